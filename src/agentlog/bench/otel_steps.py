"""``agentlog bench otel``: the OTLP receiver and the span export, measured.

Everything runs as the user runs it: ``python -m agentlog otel serve`` in its own
process on loopback, fed OTLP/HTTP protobuf requests (built with the official
``opentelemetry-proto`` messages) by one and by four sender threads here;
``python -m agentlog otel export`` into a second receiver; and a record's trip
from its request to a row of the ``telemetry`` view (``python -m agentlog sql``,
which catches the store up first, process start included).

Reported: records/s (logs, metrics), the receiver's resident memory before and
at its peak under the flood, spans/s of the export, and the arrival-to-queryable
time (median, p95, p99). Numbers, never pass/fail.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from agentlog.bench.common import describe, machine
from agentlog.bench.measure import child


class _Server:
    def __init__(self, root: str) -> None:
        env = {**os.environ, "AGENTLOG_HOME": root}
        self.proc = subprocess.Popen([sys.executable, "-m", "agentlog", "otel", "serve", "--port", "0"], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline().decode()
        m = re.search(r"127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"agentlog otel serve did not start: {line!r}")
        self.port = int(m.group(1))

    def rss(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self) -> None:
        self.proc.send_signal(2)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def _attr(kvs: Any, key: str, value: Any) -> None:
    kv = kvs.add(key=key)
    if isinstance(value, int):
        kv.value.int_value = value
    else:
        kv.value.string_value = str(value)


def logs_body(sender: int, request: int, records: int, sessions: int) -> bytes:
    """An ExportLogsServiceRequest of ``records`` Claude Code api_request records."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    _attr(rl.resource.attributes, "service.name", "claude-code")
    sl = rl.scope_logs.add()
    now = time.time_ns()
    for i in range(records):
        lr = sl.log_records.add()
        lr.time_unix_nano = now + i
        lr.body.string_value = "claude_code.api_request"
        for k, v in (("session.id", f"bench-{(request + i) % sessions}"), ("event.name", "api_request"),
                     ("prompt.id", f"p-{sender}-{request}"), ("model", "claude-sonnet-4-5"),
                     ("input_tokens", 100 + i), ("output_tokens", 20), ("cache_read_tokens", 1000),
                     ("request_id", f"req_{sender}_{request}_{i}"), ("duration_ms", 1200)):
            _attr(lr.attributes, k, v)
    return req.SerializeToString()


def metrics_body(sender: int, request: int, points: int, sessions: int) -> bytes:
    """An ExportMetricsServiceRequest of one counter with ``points`` data points."""
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

    req = ExportMetricsServiceRequest()
    rm = req.resource_metrics.add()
    _attr(rm.resource.attributes, "service.name", "claude-code")
    metric = rm.scope_metrics.add().metrics.add()
    metric.name = "claude_code.token.usage"
    metric.unit = "tokens"
    metric.sum.is_monotonic = True
    metric.sum.aggregation_temporality = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
    now = time.time_ns()
    for i in range(points):
        dp = metric.sum.data_points.add()
        dp.time_unix_nano = now + i
        dp.as_int = 1000 * sender + request + i
        _attr(dp.attributes, "session.id", f"bench-{(request + i) % sessions}")
        _attr(dp.attributes, "type", "input")
    return req.SerializeToString()


def _flood(server: _Server, path: str, bodies: list[list[bytes]], per_request: int) -> dict[str, Any]:
    """Each sender thread POSTs its bodies over one keep-alive connection."""
    latencies: list[float] = []
    errors: list[str] = []
    peak = [server.rss()]
    lock = threading.Lock()

    def send(mine: list[bytes]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        try:
            for body in mine:
                t0 = time.perf_counter()
                conn.request("POST", path, body, {"Content-Type": "application/x-protobuf"})
                resp = conn.getresponse()
                resp.read()
                ms = (time.perf_counter() - t0) * 1e3
                with lock:
                    latencies.append(ms)
                    if resp.status != 200:
                        errors.append(str(resp.status))
        finally:
            conn.close()

    before = server.rss()
    threads = [threading.Thread(target=send, args=(b,)) for b in bodies]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak[0] = max(peak[0], server.rss())
        for t in threads:
            t.join(timeout=0.1)
    secs = time.perf_counter() - t0
    records = sum(len(b) for b in bodies) * per_request
    return {"senders": len(bodies), "requests": sum(len(b) for b in bodies), "records": records, "secs": secs,
            "records_per_s": records / secs if secs else 0.0, "request_ms": describe(latencies),
            "rss_before": before, "rss_peak": peak[0], "errors": len(errors)}


def _queryable(root: str, server: _Server, runs: int) -> list[float]:
    """Seconds from a record's POST to its row in the telemetry view (``agentlog sql``)."""
    env = {**os.environ, "AGENTLOG_HOME": root}
    out: list[float] = []
    for i in range(runs):
        marker = f"arrival-{i}-{time.time_ns()}"
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

        req = ExportLogsServiceRequest()
        rl = req.resource_logs.add()
        _attr(rl.resource.attributes, "service.name", "claude-code")
        lr = rl.scope_logs.add().log_records.add()
        lr.time_unix_nano = time.time_ns()
        lr.body.string_value = "claude_code.api_request"
        _attr(lr.attributes, "session.id", "bench-arrival")
        _attr(lr.attributes, "request_id", marker)
        t0 = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request("POST", "/v1/logs", req.SerializeToString(), {"Content-Type": "application/x-protobuf"})
        conn.getresponse().read()
        conn.close()
        for _ in range(50):
            r = child([sys.executable, "-m", "agentlog", "sql", "--json",
                       f"select count(*) as n from telemetry where request_id = '{marker}'"], env)
            if json.loads(r["stdout"])["rows"][0][0] == 1:
                break
        out.append(time.perf_counter() - t0)
    return out


def run_otel_bench(requests: int = 500, per_request: int = 50, sessions: int = 20, export_events: int = 20_000,
                   arrival_runs: int = 5) -> dict[str, Any]:
    """The whole run; ``requests`` per signal and sender count, split among the senders."""
    from agentlog.bench.workload.load import load

    result: dict[str, Any] = {"machine": machine(), "params": {
        "requests": requests, "per_request": per_request, "sessions": sessions, "export_events": export_events,
        "arrival_runs": arrival_runs}, "receiver": [], "tables": []}
    with tempfile.TemporaryDirectory(prefix="agentlog-bench-otel-") as scratch:
        for signal, path, make in (("logs", "/v1/logs", logs_body), ("metrics", "/v1/metrics", metrics_body)):
            for senders in (1, 4):
                root = os.path.join(scratch, f"{signal}-{senders}")
                os.makedirs(root)
                server = _Server(root)
                try:
                    bodies = [[make(s, r, per_request, sessions) for r in range(requests // senders)]
                              for s in range(senders)]
                    run = _flood(server, path, bodies, per_request)
                finally:
                    server.stop()
                result["receiver"].append({"signal": signal, **run})
        source = os.path.join(scratch, "export-source")
        os.makedirs(source)
        load(export_events, root=source)
        sink = os.path.join(scratch, "export-sink")
        os.makedirs(sink)
        server = _Server(sink)
        try:
            env = {**os.environ, "AGENTLOG_HOME": source}
            # the store and projection first, so that the export's time is the export's
            child([sys.executable, "-m", "agentlog", "sql", "select count(*) from sessions"], env)
            r = child([sys.executable, "-m", "agentlog", "otel", "export", "--json", "--no-ingest", "--endpoint",
                       f"http://127.0.0.1:{server.port}"], env)
            exported = json.loads(r["stdout"])
            result["export"] = {**exported, "process_secs": r["secs"], "process_rss": r["rss"],
                                "spans_per_s": exported["spans"] / exported["seconds"] if exported["seconds"] else 0}
            result["arrival"] = describe(_queryable(sink, server, arrival_runs))
        finally:
            server.stop()
    rows = [[e["signal"], e["senders"], e["requests"], e["records"], f"{e['records_per_s']:,.0f}",
             f"{e['request_ms']['median']:.1f} / {e['request_ms']['p95']:.1f} / {e['request_ms']['p99']:.1f}",
             f"{e['rss_before'] / 2**20:.0f} → {e['rss_peak'] / 2**20:.0f}", e["errors"]]
            for e in result["receiver"]]
    result["tables"].append({"title": "Receiver (agentlog otel serve, protobuf over loopback)",
                             "columns": ["signal", "senders", "requests", "records", "records/s",
                                         "request ms median / p95 / p99", "RSS MiB before → peak", "non-200"],
                             "rows": rows})
    ex = result["export"]
    result["tables"].append({"title": "Export (agentlog otel export into a second receiver)",
                             "columns": ["sessions", "spans", "export s", "spans/s", "process s", "process peak RSS MiB"],
                             "rows": [[ex["sessions"], ex["spans"], f"{ex['seconds']:.2f}", f"{ex['spans_per_s']:,.0f}",
                                       f"{ex['process_secs']:.2f}", f"{ex['process_rss'] / 2**20:.0f}"]]})
    a = result["arrival"]
    result["tables"].append({"title": "Arrival to queryable (POST → a row of the telemetry view via agentlog sql)",
                             "columns": ["runs", "median s", "p95 s", "p99 s"],
                             "rows": [[a["n"], f"{a['median']:.2f}", f"{a['p95']:.2f}", f"{a['p99']:.2f}"]],
                             "note": "Includes starting the `agentlog sql` process and its catch-up ingest."})
    return result
