"""`agentlog otel serve`: the real OpenTelemetry SDK sends logs, metrics and traces (protobuf and
JSON) to a real receiver process; garbage, oversized bodies, wrong types and a flood get 4xx or
200 as due, and the receiver lives on with bounded memory."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import threading
from pathlib import Path

import pytest

from otel_support import Receiver, log_events, logs_request, post, send_sdk


@pytest.fixture
def receiver(agentlog_home: Path) -> Receiver:
    r = Receiver(agentlog_home)
    yield r
    r.stop()


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_sdk_records_become_events_in_the_session_log(receiver: Receiver, agentlog_home: Path, encoding: str) -> None:
    from agentlog.core.model import Event

    send_sdk(receiver.url, encoding, f"sess-{encoding}", "prompt-1", "toolu_01", count=3)
    events = list(log_events(agentlog_home))
    assert {name for name, _ in events} == {f"sess-{encoding}.jsonl"}
    for _, ev in events:
        Event.from_wire(ev)  # the canonical model, strictly
        assert ev["kind"] == "telemetry" and ev["provider"] == "claude_code"
        assert ev["provider_session_id"] == f"sess-{encoding}"
    by_name: dict[str, list[dict]] = {}
    for _, ev in events:
        by_name.setdefault(ev["attrs"]["otel_event"], []).append(ev)
    assert sorted((k, len(v)) for k, v in by_name.items()) == [
        ("api_error", 1), ("api_request", 3), ("interaction", 1), ("token.usage", 1), ("tool", 1),
        ("tool.duration", 1), ("tool_decision", 1), ("tool_result", 1)]
    req = by_name["api_request"][0]["attrs"]
    assert req["signal"] == "logs" and req["prompt_id"] == "prompt-1" and req["model"] == "claude-sonnet-4-5"
    assert (req["input_tokens"], req["output_tokens"], req["cache_read_tokens"], req["cache_write_tokens"]) == (
        100, 20, 1000, 50)
    assert req["cost_usd"] == pytest.approx(0.0123)
    assert sorted(e["attrs"]["request_id"] for e in by_name["api_request"]) == ["req_0000", "req_0001", "req_0002"]
    result = by_name["tool_result"][0]
    assert result["tool"] == {"name": "Bash", "category": "other", "call_id": "toolu_01"}
    assert result["outcome"]["status"] == "failure" and result["duration_ms"] == 40
    assert "[REDACTED:" in result["content"]["error"] and "ghp_aaaa" not in json.dumps(result)
    assert by_name["tool_decision"][0]["attrs"]["decision"] == "accept"
    counter = by_name["token.usage"][0]["attrs"]
    assert counter["signal"] == "metrics" and counter["value"] == 120 and counter["metric_type"] == "sum"
    assert by_name["tool.duration"][0]["attrs"]["count"] == 1
    child, parent = by_name["tool"][0]["attrs"], by_name["interaction"][0]["attrs"]
    assert child["signal"] == "traces" and child["parent_span_id"] == parent["span_id"]
    assert child["trace_id"] == parent["trace_id"] and child["span_status"] == "error"
    assert by_name["tool"][0]["outcome"]["status"] == "failure"


def test_records_without_a_session_go_to_the_agents_telemetry_log(receiver: Receiver, agentlog_home: Path) -> None:
    body = logs_request([{"_body": "codex.api_request", "event.name": "codex.api_request", "model": "gpt-5",
                          "input_token_count": 500, "cached_token_count": 200, "output_token_count": 9}],
                        session=None, service="codex_exec")
    assert post(receiver.url + "/v1/logs", gzip.compress(body), **{"Content-Encoding": "gzip"})[0] == 200
    ((name, ev),) = list(log_events(agentlog_home, "codex"))
    assert name == "otel-telemetry.jsonl" and "provider_session_id" not in ev
    # OpenAI counts cached input inside input: stored as input not read from a cache, like the importer does
    assert (ev["attrs"]["input_tokens"], ev["attrs"]["cache_read_tokens"]) == (300, 200)


def _raw(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head)
        return s.recv(4096)


def test_garbage_and_wrong_requests_get_4xx_and_the_receiver_lives_on(receiver: Receiver,
                                                                      agentlog_home: Path) -> None:
    url = receiver.url
    assert post(url + "/v1/logs", b"\xff\x00garbage\x12\x99")[0] == 400
    assert post(url + "/v1/traces", b"{not json", "application/json")[0] == 400
    assert post(url + "/v1/metrics", b'{"resourceMetrics": 7}', "application/json")[0] == 400
    assert post(url + "/v1/logs", logs_request([{}]), "text/plain")[0] == 415
    assert post(url + "/v1/nothing", b"x")[0] == 404
    assert post(url + "/v1/logs", b"not gzip", **{"Content-Encoding": "gzip"})[0] == 400
    # a gzip bomb: 100 MB of zeros in ~100 kB
    assert post(url + "/v1/logs", gzip.compress(b"\0" * 100_000_000), **{"Content-Encoding": "gzip"})[0] == 413
    # a 100 MB body: answered 413 on its Content-Length, before any of it is read
    answer = _raw(receiver.port, b"POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                                 b"Content-Length: 100000000\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 413"), answer[:100]
    with socket.create_connection(("127.0.0.1", receiver.port), timeout=30) as s:
        s.sendall(b"POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                  b"Content-Length: 100000000\r\n\r\n")
        chunk = b"\x0a" * (1 << 20)
        try:
            for _ in range(100):
                s.sendall(chunk)
        except OSError:
            pass  # the receiver closed the connection after its 413
    answer = _raw(receiver.port, b"POST /v1/logs HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 411"), answer[:100]
    assert list(log_events(agentlog_home)) == []  # nothing of the above was written
    # and a good request still lands
    status, _ = post(url + "/v1/logs", logs_request([{"tool_name": "Read", "success": True}]))
    assert status == 200 and len(list(log_events(agentlog_home))) == 1
    assert receiver.proc.poll() is None


@pytest.mark.slow
def test_a_flood_of_10000_requests_from_four_senders_is_all_recorded_in_bounded_memory(
        receiver: Receiver, agentlog_home: Path) -> None:
    per_sender, senders = 2500, 4
    body = logs_request([{"_body": "claude_code.api_request", "event.name": "api_request", "model": "m",
                          "input_tokens": 1, "output_tokens": 1}], session="flood")
    statuses: list[int] = []
    errors: list[BaseException] = []

    def send(n: int) -> None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=60)
            for i in range(per_sender):
                # one record per request, each different (its time), so none is a retry of another
                one = logs_request([{"_body": "claude_code.api_request", "event.name": "api_request",
                                     "model": "m", "input_tokens": i, "output_tokens": n, "_time": 1_700_000_000_000_000
                                     + n * 10_000_000 + i}], session="flood")
                conn.request("POST", "/v1/logs", one, {"Content-Type": "application/x-protobuf"})
                resp = conn.getresponse()
                resp.read()
                statuses.append(resp.status)
            conn.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    assert post(receiver.url + "/v1/logs", body)[0] == 200
    before = receiver.rss_kib()
    threads = [threading.Thread(target=send, args=(n,)) for n in range(senders)]
    for t in threads:
        t.start()
    peak = before
    while any(t.is_alive() for t in threads):
        peak = max(peak, receiver.rss_kib())
        for t in threads:
            t.join(timeout=0.2)
    assert not errors, errors[:3]
    assert len(statuses) == per_sender * senders and set(statuses) == {200}
    events = [ev for _, ev in log_events(agentlog_home)]
    assert len(events) == 1 + per_sender * senders
    assert len({ev["event_id"] for ev in events}) == len(events)
    assert peak - before < 100 * 1024, f"RSS grew by {(peak - before) // 1024} MiB under the flood"


def test_metadata_only_writes_no_content_and_no_raw_payload(agentlog_home: Path) -> None:
    (agentlog_home / "config.toml").write_text('capture_mode = "metadata_only"\n')
    receiver = Receiver(agentlog_home)
    try:
        body = logs_request([{"_body": "claude_code.user_prompt", "event.name": "user_prompt",
                              "prompt": "the secret plan", "prompt_length": 15}])
        assert post(receiver.url + "/v1/logs", body)[0] == 200
    finally:
        receiver.stop()
    ((_, ev),) = list(log_events(agentlog_home))
    assert ev["capture_mode"] == "metadata_only" and "content" not in ev and "raw" not in ev
    assert ev["attrs"]["prompt_length"] == 15 and "secret plan" not in json.dumps(ev)


def test_the_daemon_runs_the_receiver_when_the_setting_says_so(agentlog_home: Path) -> None:
    import socket
    import time

    from agentlog.operations.daemon import start, stop
    from agentlog.store.status import status

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (agentlog_home / "config.toml").write_text(f"otel_receiver = true\notel_port = {port}\n")
    start(str(agentlog_home))
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                status_code, _ = post(url + "/v1/logs", logs_request([{"tool_name": "Read"}], session="daemon-s"))
                break
            except OSError:
                assert time.monotonic() < deadline, "the daemon's receiver never answered"
                time.sleep(0.2)
        assert status_code == 200
        deadline = time.monotonic() + 30
        while status(str(agentlog_home), catch_up=False).events < 1:  # the daemon ingests it too
            assert time.monotonic() < deadline, "not ingested"
            time.sleep(0.1)
    finally:
        stop(str(agentlog_home))
    log = (agentlog_home / "state" / "daemon.log").read_text()
    assert f"OTLP receiver on 127.0.0.1:{port}" in log and "OTLP receiver stopped" in log
    with pytest.raises(OSError):
        post(f"http://127.0.0.1:{port}/v1/logs", b"")


def test_chunked_bodies_as_node_exporters_send_them(agentlog_home: Path) -> None:
    receiver = Receiver(agentlog_home, "--max-body", "65536")
    try:
        body = logs_request([{"tool_name": "Read"}, {"tool_name": "Bash"}])
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7]) for i in range(0, len(body), 7))
        head = (b"POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")
        assert _raw(receiver.port, head + chunks + b"0\r\n\r\n").startswith(b"HTTP/1.1 200")
        big = b"".join(b"%x\r\n%s\r\n" % (4096, b"\x0a" * 4096) for _ in range(20))  # 80 KiB > the cap
        assert _raw(receiver.port, head + big + b"0\r\n\r\n").startswith(b"HTTP/1.1 413")
        assert _raw(receiver.port, head + b"zz\r\nab\r\n0\r\n\r\n").startswith(b"HTTP/1.1 400")
    finally:
        receiver.stop()
    assert len(list(log_events(agentlog_home))) == 2
