"""agentlog.capture.wire: the hook protocol in Python, every rule of docs/hook-path.md
checked on both the encoding and the decoding side, and the incremental readers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.capture import wire
from agentlog.capture.wire import (
    TAG_AGENT, TAG_ARG, TAG_CAPTURED_AT, TAG_CWD, TAG_ENV, TAG_EVENT_ID, TAG_PAYLOAD, TAG_STDIN_BYTES, Request,
    WireError, decode_request, decode_response, encode_request, encode_response, frame_request,
    request_bytes_missing, request_fields, response_bytes_missing,
)
from agentlog.core.ids import uuid7

MIB = 1 << 20
EID = uuid7().encode()


def base(**change: list[bytes]) -> list[tuple[int, bytes]]:
    """A valid request's fields; ``change`` replaces a tag's values (``agent=[]`` drops it)."""
    fields: dict[str, list[bytes]] = {
        "agent": [b"claude-code"], "arg": [], "env": [], "cwd": [b"/w"], "event_id": [EID],
        "captured_at": [b"1767225600000000"], "stdin_bytes": [b"2"], "payload": [b"{}"],
    }
    fields.update(change)
    tags = {"agent": TAG_AGENT, "arg": TAG_ARG, "env": TAG_ENV, "cwd": TAG_CWD, "event_id": TAG_EVENT_ID,
            "captured_at": TAG_CAPTURED_AT, "stdin_bytes": TAG_STDIN_BYTES, "payload": TAG_PAYLOAD}
    return [(tags[name], value) for name, values in fields.items() for value in values]


def test_a_whole_request_round_trips() -> None:
    req = Request("codex", ["one", "", "t\u00e9", "\udcff raw byte"], {"CLAUDE_PROJECT_DIR": "/p=q", "AGENTLOG_DURABILITY": ""},
                  "/home/u/w", EID.decode(), 1_767_225_600_000_000, 20 * MIB, b"\xff" * (16 * MIB))
    data = encode_request(req)
    assert request_bytes_missing(data) == 0
    assert decode_request(data) == req
    assert decode_request(bytearray(data)) == req and decode_request(memoryview(data)) == req
    assert decode_request(frame_request(request_fields(req))) == req
    minimal = Request("", [], {}, None, EID.decode(), 0, 0, b"")
    assert decode_request(encode_request(minimal)) == minimal


def test_fields_may_come_in_any_order_but_args_keep_theirs() -> None:
    fields = list(reversed(base(arg=[b"1", b"2", b"3"])))
    assert decode_request(frame_request(fields)).args == ["3", "2", "1"]


BROKEN: dict[str, bytes] = {
    "bad magic": b"ALH2" + frame_request(base())[4:],
    "no fields": frame_request([]),
    "65 fields": frame_request(base(arg=[b"a"] * 32) + [(TAG_ENV, b"AGENTLOG_DURABILITY=x")] * 25),
    "unknown tag 0": frame_request(base() + [(0, b"")]),
    "unknown tag 9": frame_request(base() + [(9, b"")]),
    "no agent": frame_request(base(agent=[])),
    "two agents": frame_request(base(agent=[b"a", b"b"])),
    "agent of 65 bytes": frame_request(base(agent=[b"a" * 65])),
    "agent with a NUL": frame_request(base(agent=[b"a\0b"])),
    "33 args": frame_request(base(arg=[b"a"] * 33)),
    "an arg over 1 MiB": frame_request(base(arg=[b"a" * (MIB + 1)])),
    "an arg with a NUL": frame_request(base(arg=[b"\0"])),
    "17 envs": frame_request(base(env=[b"AGENTLOG_DURABILITY=x"] * 17)),
    "an env key not passed on": frame_request(base(env=[b"PATH=/bin"])),
    "an env without =": frame_request(base(env=[b"CLAUDE_PROJECT_DIR"])),
    "an env twice": frame_request(base(env=[b"CLAUDE_PROJECT_DIR=/a", b"CLAUDE_PROJECT_DIR=/b"])),
    "an env over 64 KiB": frame_request(base(env=[b"CLAUDE_PROJECT_DIR=" + b"a" * (64 << 10)])),
    "an env with a NUL": frame_request(base(env=[b"CLAUDE_PROJECT_DIR=a\0"])),
    "two cwds": frame_request(base(cwd=[b"/a", b"/b"])),
    "a cwd over 64 KiB": frame_request(base(cwd=[b"/" * ((64 << 10) + 1)])),
    "a cwd with a NUL": frame_request(base(cwd=[b"/a\0"])),
    "no event id": frame_request(base(event_id=[])),
    "two event ids": frame_request(base(event_id=[EID, EID])),
    "an upper-case event id": frame_request(base(event_id=[EID.upper()])),
    "a UUIDv4": frame_request(base(event_id=[EID[:14] + b"4" + EID[15:]])),
    "a UUID of the wrong variant": frame_request(base(event_id=[EID[:19] + b"c" + EID[20:]])),
    "an event id without hyphens": frame_request(base(event_id=[EID.replace(b"-", b"") + b"0000"])),
    "an event id of 35 bytes": frame_request(base(event_id=[EID[:35]])),
    "no captured_at": frame_request(base(captured_at=[])),
    "an empty captured_at": frame_request(base(captured_at=[b""])),
    "a signed captured_at": frame_request(base(captured_at=[b"+1"])),
    "a negative captured_at": frame_request(base(captured_at=[b"-1"])),
    "a captured_at with a leading zero": frame_request(base(captured_at=[b"01"])),
    "a captured_at with a space": frame_request(base(captured_at=[b" 1"])),
    "a fractional captured_at": frame_request(base(captured_at=[b"1.5"])),
    "a captured_at of 2**63": frame_request(base(captured_at=[str(1 << 63).encode()])),
    "a captured_at of 20 digits": frame_request(base(captured_at=[b"1" * 20])),
    "no stdin bytes": frame_request(base(stdin_bytes=[])),
    "stdin bytes in hex": frame_request(base(stdin_bytes=[b"0x2"])),
    "no payload": frame_request(base(payload=[])),
    "two payloads": frame_request(base(payload=[b"{}", b"{}"])),
    "a payload over 16 MiB": frame_request(base(payload=[b"a" * (16 * MIB + 1)], stdin_bytes=[b"16777217"])),
    "a payload shorter than stdin": frame_request(base(stdin_bytes=[b"3"])),
    "a payload longer than stdin": frame_request(base(stdin_bytes=[b"1"])),
    "a cut payload under 16 MiB": frame_request(base(payload=[b"a" * 100], stdin_bytes=[str(20 * MIB).encode()])),
    "over 20 MiB in all": frame_request(base(arg=[b"a" * MIB] * 5, payload=[b"a" * (16 * MIB)],
                                             stdin_bytes=[str(16 * MIB).encode()])),
    "bytes after the last field": frame_request(base()) + b"\0",
    "cut short": frame_request(base())[:-1],
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_request_that_breaks_a_rule_is_rejected(case: str) -> None:
    with pytest.raises(WireError):
        decode_request(BROKEN[case])


def test_the_reader_rejects_as_soon_as_the_bytes_break_a_framing_rule() -> None:
    with pytest.raises(WireError, match="magic"):
        request_bytes_missing(b"X")
    with pytest.raises(WireError, match="fields"):
        request_bytes_missing(b"ALH1" + (65).to_bytes(4, "big"))
    head = b"ALH1" + (1).to_bytes(4, "big")
    with pytest.raises(WireError, match="payload of"):  # announced, before any of its bytes arrive
        request_bytes_missing(head + bytes([TAG_PAYLOAD]) + (16 * MIB + 1).to_bytes(4, "big"))
    with pytest.raises(WireError, match="tag"):
        request_bytes_missing(head + bytes([77]))
    many = b"ALH1" + (40).to_bytes(4, "big") + b"".join(bytes([TAG_ARG]) + MIB.to_bytes(4, "big") + b"a" * MIB
                                                        for _ in range(20))
    with pytest.raises(WireError, match="request over"):
        request_bytes_missing(many + bytes([TAG_ARG]) + MIB.to_bytes(4, "big"))


def test_the_reader_asks_for_at_least_one_byte_until_the_request_is_whole() -> None:
    data = frame_request(base(arg=[b"x", b""], env=[b"GEMINI_PROJECT_DIR=/g"]))
    for n in range(len(data)):
        missing = request_bytes_missing(data[:n])
        assert 1 <= missing <= len(data) - n
    assert request_bytes_missing(data) == 0


def test_the_probe_is_whole_at_8_bytes_and_is_not_a_request() -> None:
    """The status probe (``hook_socket.probe``): a request of no fields, read and closed by the server."""
    assert wire.PROBE == b"ALH1\0\0\0\0"
    assert [request_bytes_missing(wire.PROBE[:n]) for n in range(9)] == [8, 7, 6, 5, 4, 3, 2, 1, 0]
    assert wire.is_probe(wire.PROBE) and not wire.is_probe(frame_request(base())) and not wire.is_probe(b"ALH1")
    with pytest.raises(WireError, match="after the last field"):
        request_bytes_missing(wire.PROBE + b"\1")
    with pytest.raises(WireError):
        decode_request(wire.PROBE)


@pytest.mark.parametrize(("value", "number"), [
    (b"0", 0), (b"7", 7), (str((1 << 63) - 1).encode(), (1 << 63) - 1), (b"", None), (b"01", None), (b"00", None),
    (b"+1", None), (b"-1", None), (b" 1", None), (b"1 ", None), (b"1.0", None), (str(1 << 63).encode(), None),
    (b"1" * 20, None), ("\u0663".encode(), None),
])
def test_a_decimal_of_the_protocol(value: bytes, number: int | None) -> None:
    """The one rule for captured_at and stdin bytes, on the wire and in the fallback's variables."""
    assert wire.decimal(value) == number


REQUEST_PARTS = {
    "agent": st.text(max_size=20),
    "args": st.lists(st.text(st.characters(blacklist_characters="\0"), max_size=30), max_size=32),
    "env": st.dictionaries(st.sampled_from(wire.ENV_KEYS), st.text(st.characters(blacklist_characters="\0"),
                                                                   max_size=30)),
    "cwd": st.none() | st.text(st.characters(blacklist_characters="\0"), min_size=1, max_size=40),
    "captured_at": st.integers(0, (1 << 63) - 1),
    "payload": st.binary(max_size=200),
}


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.fixed_dictionaries(REQUEST_PARTS), st.integers(0, 100))
def test_any_valid_request_round_trips_and_reads_in_any_chunks(parts: dict, extra: int) -> None:  # type: ignore[type-arg]
    agent = parts["agent"].encode("utf-8", "surrogatepass")[:64].decode("utf-8", "ignore").replace("\0", "")
    req = Request(agent, parts["args"], parts["env"], parts["cwd"], EID.decode(), parts["captured_at"],
                  len(parts["payload"]), parts["payload"])
    try:
        data = encode_request(req)
    except WireError:
        assert any("\ud800" <= c <= "\udfff" for c in "".join([agent, *req.args, *req.env.values(), req.cwd or ""]))
        return
    assert decode_request(data) == req
    buf = b""
    step = extra % 7 + 1
    while missing := request_bytes_missing(buf):
        buf += data[len(buf) : len(buf) + min(missing, step)]
    assert buf == data


@pytest.mark.parametrize("req", [
    Request("a" * 65, [], {}, None, EID.decode(), 0, 0, b""),
    Request("a", [], {"PATH": "/bin"}, None, EID.decode(), 0, 0, b""),
    Request("a", [], {}, None, "not-a-uuid", 0, 0, b""),
    Request("a", [], {}, None, EID.decode(), -1, 0, b""),
    Request("a", [], {}, None, EID.decode(), 0, 5, b"abc"),
    Request("a", ["\ud800"], {}, None, EID.decode(), 0, 0, b""),
], ids=["long agent", "env key", "event id", "negative time", "payload and total", "lone surrogate"])
def test_encoding_refuses_what_the_server_would(req: Request) -> None:
    with pytest.raises(WireError):
        encode_request(req)


def test_responses_round_trip() -> None:
    for status, reply in (("A", b""), ("A", b"{}"), ("A", bytes(range(256)) * 4096), ("F", b"")):
        data = encode_response(status, reply)
        assert response_bytes_missing(data) == 0
        assert decode_response(data) == wire.Response(status, reply)
    assert encode_response("A", b"{}") == b"ALR1A\x00\x00\x00\x02{}"


@pytest.mark.parametrize(("status", "reply"), [("X", b""), ("F", b"x"), ("A", b"x" * (MIB + 1)), ("a", b"")])
def test_encoding_a_response_refuses_a_broken_one(status: str, reply: bytes) -> None:
    with pytest.raises(WireError):
        encode_response(status, reply)


@pytest.mark.parametrize("data", [
    b"ALR2A\0\0\0\0", b"ALR1X\0\0\0\0", b"ALR1F\0\0\0\x01x", b"ALR1A\0\x10\0\x01", b"ALR1A\0\0\0\x01xy",
    b"ALR1A\0\0\0\x02x", b"ALR1", b"",
], ids=["magic", "status", "F with a reply", "reply over 1 MiB", "bytes after", "cut reply", "cut header", "empty"])
def test_decoding_a_response_refuses_a_broken_one(data: bytes) -> None:
    with pytest.raises(WireError):
        decode_response(data)


def test_the_response_reader_rejects_early_and_counts_what_is_missing() -> None:
    with pytest.raises(WireError):
        response_bytes_missing(b"AL\0")
    with pytest.raises(WireError):
        response_bytes_missing(b"ALR1Q")
    with pytest.raises(WireError):  # the length alone says it is too long
        response_bytes_missing(b"ALR1A" + (MIB + 1).to_bytes(4, "big"))
    data = encode_response("A", b"hello")
    assert [response_bytes_missing(data[:n]) for n in range(len(data) + 1)] == [
        9, 8, 7, 6, 5, 4, 3, 2, 1, 5, 4, 3, 2, 1, 0]


def test_wire_keeps_to_the_hook_path_import_rule() -> None:
    """The Python hook imports it on the fallback path (docs/hook-path.md): nothing beyond
    what that path loads anyway."""
    src = Path(__file__).resolve().parents[1] / "src"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); before = set(sys.modules);"
            "import agentlog.capture.wire; print(' '.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(src)], capture_output=True, text=True, check=True)
    # agentlog.core (its error base) is on the hook path already
    assert set(out.stdout.split()) <= {"__future__", "agentlog", "agentlog.capture", "agentlog.capture.wire",
                                       "agentlog.core"}
