"""The hook wire protocol between ``agentlog-hook`` and the capture server (issue 29).

The native client (``capture/native/agentlog_hook.c``) sends one request per
connection to ``<data root>/run/hook.sock`` and the capture server in
``agentlog daemon run`` answers 'A' (recorded; the reply goes to the agent) or
'F' (fall back to the Python hook); docs/hook-path.md says when. This
module is the protocol's one Python implementation, every rule enforced on
both sides: the capture server (``capture/server.py``) reads with
:func:`request_bytes_missing` and decodes with :func:`decode_request` (a
request that breaks a rule raises :class:`WireError` and gets no answer), and
encodes with :func:`encode_response`; tests and tools speak the client side
with :func:`encode_request` and :func:`decode_response`. The Python hook
checks what a falling-back client hands it with :func:`is_uuid7` and
:func:`decimal`, so an event id or a number means the same on both paths.

The format (integers big-endian)::

    request   "ALH1", u32 N (1..64), N x {u8 tag, u32 len, len bytes}
      1 agent        exactly once, <= 64 bytes
      2 arg          0..32, each <= 1 MiB, in argv order (after the agent)
      3 env          0..16, "KEY=VALUE" <= 64 KiB, KEY one of ENV_KEYS, each key once
      4 cwd          at most once, <= 64 KiB
      5 event id     exactly once, a lower-case UUIDv7 (36 bytes)
      6 captured_at  exactly once, decimal µs since the epoch
      7 stdin bytes  exactly once, decimal, stdin's whole size
      8 payload      exactly once, the first min(stdin bytes, 16 MiB) bytes of stdin
      9 deadline     at most once, decimal ASCII, 1..60000: how many ms the client waits
                     for the answer before it falls back (a request the server appends well
                     within it needs no duplicate check)
      in all at most 16 MiB + 4 MiB; no byte after the last field;
      no NUL in agent, arg, env, cwd; decimals without sign or leading zero, < 2**63
    probe     "ALH1", u32 0: no fields (``hook_socket.probe``); the server reads it,
              records nothing and closes without an answer
    response  "ALR1", u8 status ('A' recorded | 'F' fall back), u32 len (<= 1 MiB,
              0 for 'F'), len bytes: what the client prints

Reading off a socket: :func:`request_bytes_missing` says how many more bytes a
partial request needs at least (0 once it is whole), and raises as soon as
the bytes so far break a framing rule, so that a server never buffers more
than :data:`MAX_REQUEST` bytes of a bad one. :func:`response_bytes_missing`
does the same for an answer.

Strings on the wire are bytes; they are decoded as Python decodes argv and
the environment on POSIX (UTF-8 with ``surrogateescape``), so that the server
sees exactly the ``sys.argv`` and ``os.environ`` the Python hook would have.

Standard library only; at module level it imports only agentlog.core (its error base): the
Python hook imports it on the fallback path (docs/hook-path.md).
"""

from __future__ import annotations

from agentlog.core import AgentlogError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

REQUEST_MAGIC = b"ALH1"
RESPONSE_MAGIC = b"ALR1"
PROBE = REQUEST_MAGIC + bytes(4)
"""A request of no fields: "is a server reading?" (answered by closing; nothing recorded)."""

TAG_AGENT = 1
TAG_ARG = 2
TAG_ENV = 3
TAG_CWD = 4
TAG_EVENT_ID = 5
TAG_CAPTURED_AT = 6
TAG_STDIN_BYTES = 7
TAG_PAYLOAD = 8
TAG_DEADLINE_MS = 9

MAX_FIELDS = 64
MAX_AGENT = 64
MAX_ARGS = 32
MAX_ARG = 1 << 20
MAX_ENVS = 16
MAX_ENV = 64 << 10
MAX_CWD = 64 << 10
MAX_PAYLOAD = 16 << 20
MAX_REQUEST = MAX_PAYLOAD + (4 << 20)
MAX_REPLY = 1 << 20
MAX_DECIMAL = 19  # digits of a count or a time: below 10**19, and checked below 2**63
REQUEST_DEADLINE_S = 5.0  # a request must arrive whole within this (the server's rule)

RECORDED = "A"
FALL_BACK = "F"

ENV_KEYS: tuple[str, ...] = (
    "AGENTLOG_CAPTURE_MODE",
    "AGENTLOG_DURABILITY",
    "CLAUDE_PROJECT_DIR",
    "CURSOR_PROJECT_DIR",
    "GEMINI_PROJECT_DIR",
)

# tag -> (name, longest value); an event id is exactly 36 bytes
_FIELD_LIMITS: dict[int, tuple[str, int]] = {
    TAG_AGENT: ("agent", MAX_AGENT),
    TAG_ARG: ("arg", MAX_ARG),
    TAG_ENV: ("env", MAX_ENV),
    TAG_CWD: ("cwd", MAX_CWD),
    TAG_EVENT_ID: ("event id", 36),
    TAG_CAPTURED_AT: ("captured_at", MAX_DECIMAL),
    TAG_STDIN_BYTES: ("stdin bytes", MAX_DECIMAL),
    TAG_PAYLOAD: ("payload", MAX_PAYLOAD),
    TAG_DEADLINE_MS: ("deadline", 5),
}
# tag -> (fewest, most) occurrences in one request
_FIELD_COUNTS: dict[int, tuple[int, int]] = {
    TAG_AGENT: (1, 1),
    TAG_ARG: (0, MAX_ARGS),
    TAG_ENV: (0, MAX_ENVS),
    TAG_CWD: (0, 1),
    TAG_EVENT_ID: (1, 1),
    TAG_CAPTURED_AT: (1, 1),
    TAG_STDIN_BYTES: (1, 1),
    TAG_PAYLOAD: (1, 1),
    TAG_DEADLINE_MS: (0, 1),
}
_HEX = frozenset(b"0123456789abcdef")
_DIGITS = frozenset(b"0123456789")


class WireError(AgentlogError, ValueError):
    """A request or response that breaks a rule of the protocol (the server closes without an answer)."""


class Request:
    """One hook call as the client saw it: what ``agentlog.capture.hook.build`` needs."""

    __slots__ = ("agent", "args", "env", "cwd", "event_id", "captured_at", "stdin_bytes", "payload", "deadline_ms")

    def __init__(
        self,
        agent: str,
        args: Sequence[str],
        env: Mapping[str, str],
        cwd: str | None,
        event_id: str,
        captured_at: int,
        stdin_bytes: int,
        payload: bytes,
        deadline_ms: int | None = None,
    ) -> None:
        self.agent = agent
        self.args: list[str] = list(args)
        """The client's argv after the agent, in order."""
        self.env: dict[str, str] = dict(env)
        """Those of :data:`ENV_KEYS` set in the client's environment."""
        self.cwd = cwd
        """The client's working directory; None when ``getcwd`` failed."""
        self.event_id = event_id
        """The UUIDv7 the client made (the fallback uses it too, so nothing is recorded twice)."""
        self.captured_at = captured_at
        """µs since the epoch when the client started."""
        self.stdin_bytes = stdin_bytes
        """How many bytes stdin held in all (more than ``len(payload)`` when over the cap)."""
        self.payload = payload
        """The first :data:`MAX_PAYLOAD` bytes of stdin."""
        self.deadline_ms = deadline_ms
        """How long the client waits for the answer before it falls back (1 to 60,000 ms;
        None: not said). A request appended well within it needs no duplicate check."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Request(agent={self.agent!r}, args={len(self.args)}, env={sorted(self.env)}, cwd={self.cwd!r}, "
                f"event_id={self.event_id!r}, captured_at={self.captured_at}, stdin_bytes={self.stdin_bytes}, "
                f"payload={len(self.payload)} bytes)")


class Response:
    """The server's answer: :data:`RECORDED` with the agent's reply, or :data:`FALL_BACK`."""

    __slots__ = ("status", "reply")

    def __init__(self, status: str, reply: bytes = b"") -> None:
        self.status = status
        self.reply = reply

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Response):
            return NotImplemented
        return self.status == other.status and self.reply == other.reply

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Response(status={self.status!r}, reply={self.reply!r})"


# -- framing -------------------------------------------------------------------


def _u32(data: bytes | bytearray | memoryview, at: int) -> int:
    return int.from_bytes(data[at : at + 4], "big")


def frame_request(fields: Sequence[tuple[int, bytes]]) -> bytes:
    """Frame ``(tag, value)`` pairs as a request, checking nothing but that each fits a u32
    (tests use it to build requests that break the rules; :func:`encode_request` checks them)."""
    parts = [REQUEST_MAGIC, len(fields).to_bytes(4, "big")]
    for tag, value in fields:
        parts.append(bytes((tag,)) + len(value).to_bytes(4, "big"))
        parts.append(value)
    return b"".join(parts)


def request_bytes_missing(data: bytes | bytearray | memoryview) -> int:
    """How many more bytes the partial request ``data`` needs at least; 0 when it is whole.

    Raises :class:`WireError` as soon as the bytes so far break a framing rule: the
    magic, the number of fields, a tag, a field longer than its limit, a request
    larger than :data:`MAX_REQUEST` (counted from the lengths announced, so before
    the bytes arrive), or bytes past the last field. :data:`PROBE` is whole at its
    8 bytes (:func:`is_probe`; :func:`decode_request` refuses it).
    """
    have = len(data)
    if have < 8:
        if bytes(data[:4]) != REQUEST_MAGIC[: min(have, 4)]:
            raise WireError("not a hook request (bad magic)")
        return 8 - have
    if bytes(data[:4]) != REQUEST_MAGIC:
        raise WireError("not a hook request (bad magic)")
    count = _u32(data, 4)
    if count > MAX_FIELDS:
        raise WireError(f"{count} fields (1 to {MAX_FIELDS} allowed; 0 is the probe)")
    at = 8
    for _ in range(count):
        if have <= at:
            return at + 5 - have
        tag = data[at]
        limit = _FIELD_LIMITS.get(tag)
        if limit is None:
            raise WireError(f"unknown field tag {tag}")
        if have < at + 5:
            return at + 5 - have
        length = _u32(data, at + 1)
        if length > limit[1]:
            raise WireError(f"{limit[0]} of {length} bytes (at most {limit[1]})")
        at += 5 + length
        if at > MAX_REQUEST:
            raise WireError(f"request over {MAX_REQUEST} bytes")
        if have < at:
            return at - have
    if have > at:
        raise WireError(f"{have - at} bytes after the last field")
    return 0


def is_probe(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` is exactly :data:`PROBE`."""
    return bytes(data) == PROBE


def _split_fields(data: bytes | bytearray | memoryview) -> list[tuple[int, bytes]]:
    missing = request_bytes_missing(data)
    if missing:
        raise WireError(f"truncated request ({missing} more bytes expected at least)")
    view = memoryview(data)
    fields: list[tuple[int, bytes]] = []
    at = 8
    for _ in range(_u32(view, 4)):
        tag, length = view[at], _u32(view, at + 1)
        fields.append((tag, bytes(view[at + 5 : at + 5 + length])))
        at += 5 + length
    return fields


# -- field rules ---------------------------------------------------------------


def _text(name: str, value: bytes) -> str:
    if b"\0" in value:
        raise WireError(f"{name} holds a NUL byte")
    return value.decode("utf-8", "surrogateescape")


def decimal(value: bytes) -> int | None:
    """``value`` as a count or a time of the protocol: ASCII digits, no sign, no leading
    zero, at most :data:`MAX_DECIMAL` of them, below 2**63; None when it is not one."""
    if (not value or len(value) > MAX_DECIMAL or not set(value) <= _DIGITS
            or (len(value) > 1 and value[0] == 0x30)):
        return None
    n = int(value)
    return n if n < 1 << 63 else None


def _decimal(name: str, value: bytes) -> int:
    n = decimal(value)
    if n is None:
        raise WireError(f"{name} is not a decimal number below 2**63: {value[:24]!r}")
    return n


def is_uuid7(value: bytes) -> bool:
    """Whether ``value`` is a lower-case hyphenated RFC 9562 UUIDv7 (version 7, variant 10)."""
    if len(value) != 36:
        return False
    for i, c in enumerate(value):
        if i in (8, 13, 18, 23):
            if c != 0x2D:
                return False
        elif c not in _HEX:
            return False
    return value[14] == 0x37 and value[19] in b"89ab"


def _request_from_fields(fields: Sequence[tuple[int, bytes]]) -> Request:
    if not 1 <= len(fields) <= MAX_FIELDS:
        raise WireError(f"{len(fields)} fields (1 to {MAX_FIELDS} allowed)")
    seen: dict[int, int] = {}
    for tag, value in fields:
        limit = _FIELD_LIMITS.get(tag)
        if limit is None:
            raise WireError(f"unknown field tag {tag}")
        if len(value) > limit[1]:
            raise WireError(f"{limit[0]} of {len(value)} bytes (at most {limit[1]})")
        seen[tag] = seen.get(tag, 0) + 1
    for tag, (fewest, most) in _FIELD_COUNTS.items():
        n = seen.get(tag, 0)
        if not fewest <= n <= most:
            raise WireError(f"{_FIELD_LIMITS[tag][0]} {n} times ({fewest} to {most} allowed)")
    by_tag = {tag: value for tag, value in fields}  # the fields that occur once
    env: dict[str, str] = {}
    for tag, value in fields:
        if tag != TAG_ENV:
            continue
        key, eq, rest = _text("env", value).partition("=")
        if not eq or key not in ENV_KEYS:
            raise WireError(f"env {key[:64]!r} is not one of the keys passed on")
        if key in env:
            raise WireError(f"env {key} twice")
        env[key] = rest
    if not is_uuid7(by_tag[TAG_EVENT_ID]):
        raise WireError(f"event id is not a lower-case UUIDv7: {by_tag[TAG_EVENT_ID][:40]!r}")
    payload = by_tag[TAG_PAYLOAD]
    total = _decimal("stdin bytes", by_tag[TAG_STDIN_BYTES])
    if len(payload) != min(total, MAX_PAYLOAD):
        raise WireError(f"payload of {len(payload)} bytes for {total} bytes of stdin (the first "
                        f"{MAX_PAYLOAD} are sent)")
    cwd = by_tag.get(TAG_CWD)
    deadline = by_tag.get(TAG_DEADLINE_MS)
    deadline_ms = None if deadline is None else _decimal("deadline", deadline)
    if deadline_ms is not None and not 1 <= deadline_ms <= 60_000:
        raise WireError(f"deadline of {deadline_ms} ms (1 to 60,000 allowed)")
    return Request(
        agent=_text("agent", by_tag[TAG_AGENT]),
        args=[_text("arg", value) for tag, value in fields if tag == TAG_ARG],
        env=env,
        cwd=None if cwd is None else _text("cwd", cwd),
        event_id=by_tag[TAG_EVENT_ID].decode("ascii"),
        captured_at=_decimal("captured_at", by_tag[TAG_CAPTURED_AT]),
        stdin_bytes=total,
        payload=payload,
        deadline_ms=deadline_ms,
    )


# -- requests and responses ------------------------------------------------------


def request_fields(request: Request) -> list[tuple[int, bytes]]:
    """The request's ``(tag, value)`` pairs in the order the client sends them (payload last)."""

    def raw(text: str) -> bytes:
        return text.encode("utf-8", "surrogateescape")

    fields = [(TAG_AGENT, raw(request.agent))]
    fields += [(TAG_ARG, raw(a)) for a in request.args]
    fields += [(TAG_ENV, raw(f"{k}={v}")) for k, v in request.env.items()]
    if request.cwd is not None:
        fields.append((TAG_CWD, raw(request.cwd)))
    fields += [
        (TAG_EVENT_ID, raw(request.event_id)),
        (TAG_CAPTURED_AT, str(request.captured_at).encode("ascii")),
        (TAG_STDIN_BYTES, str(request.stdin_bytes).encode("ascii")),
    ]
    if request.deadline_ms is not None:
        fields.append((TAG_DEADLINE_MS, str(request.deadline_ms).encode("ascii")))
    fields.append((TAG_PAYLOAD, request.payload))
    return fields


def encode_request(request: Request) -> bytes:
    """The request's bytes; raises :class:`WireError` where it breaks a rule (as the server would)."""
    try:
        fields = request_fields(request)
    except (UnicodeEncodeError, ValueError) as e:  # a negative number, a lone surrogate outside the escapes
        raise WireError(f"cannot encode the request: {e}") from e
    _request_from_fields(fields)
    data = frame_request(fields)
    if len(data) > MAX_REQUEST:
        raise WireError(f"request over {MAX_REQUEST} bytes")
    return data


def decode_request(data: bytes | bytearray | memoryview) -> Request:
    """The request in ``data`` (exactly one, whole); raises :class:`WireError` on any broken rule."""
    return _request_from_fields(_split_fields(data))


def encode_response(status: str, reply: bytes = b"") -> bytes:
    """An answer: :data:`RECORDED` with the agent's reply (≤ :data:`MAX_REPLY`), or :data:`FALL_BACK` (no reply)."""
    if status not in (RECORDED, FALL_BACK):
        raise WireError(f"status {status!r} (A or F)")
    if status == FALL_BACK and reply:
        raise WireError("a fall-back answer carries no reply")
    if len(reply) > MAX_REPLY:
        raise WireError(f"reply of {len(reply)} bytes (at most {MAX_REPLY})")
    return RESPONSE_MAGIC + status.encode("ascii") + len(reply).to_bytes(4, "big") + bytes(reply)


def response_bytes_missing(data: bytes | bytearray | memoryview) -> int:
    """How many more bytes the partial answer ``data`` needs at least; 0 when it is whole.
    Raises :class:`WireError` when the bytes so far break a rule."""
    have = len(data)
    head = bytes(data[:9])
    if head[:4] != RESPONSE_MAGIC[: min(have, 4)]:
        raise WireError("not a hook answer (bad magic)")
    if have >= 5 and head[4:5] not in (b"A", b"F"):
        raise WireError(f"status {head[4:5]!r} (A or F)")
    if have < 9:
        return 9 - have
    length = _u32(head, 5)
    if length > MAX_REPLY:
        raise WireError(f"reply of {length} bytes (at most {MAX_REPLY})")
    if head[4:5] == b"F" and length:
        raise WireError("a fall-back answer carries no reply")
    if have > 9 + length:
        raise WireError(f"{have - 9 - length} bytes after the reply")
    return 9 + length - have


def decode_response(data: bytes | bytearray | memoryview) -> Response:
    """The answer in ``data`` (exactly one, whole); raises :class:`WireError` on any broken rule."""
    missing = response_bytes_missing(data)
    if missing:
        raise WireError(f"truncated answer ({missing} more bytes expected)")
    return Response(chr(data[4]), bytes(data[9:]))
