"""``agentlog hook <agent>``: record one hook payload as one frame.

The contract with the agent: read the payload (stdin, capped at 16 MiB; Codex's
legacy ``notify`` passes it as the last argument instead), turn it into one
canonical event, redact secrets, append it to the session's log, print only
what the agent's protocol requires on stdout, and exit 0 whatever happens. On
a problem, one line goes to stderr (and to ``state/hook-errors.log``) and
what could be read is still recorded: an empty, oversized, non-UTF-8,
non-JSON or non-object payload becomes an ``unknown`` event whose
``attrs.payload_error`` says why.

Standard library only, and only the cheap parts of it (docs/hook-path.md).
"""

from __future__ import annotations

from agentlog.core import oslite as os
import sys
import time

from agentlog import __version__
from agentlog.core.fastjson import DecodeError, dumps_bytes, loads
from agentlog.core.ids import uuid7
from agentlog.core.kinds import AGENT_PROVIDERS
from agentlog.core.paths import FILE_MODE, data_root, diagnostics_log, ensure_dir, state_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agentlog.log.writer import SessionLog

MAX_PAYLOAD = 16 << 20
KEEP_TEXT = 64 << 10  # how much of an unparseable payload is kept as text


class Captured:
    """The result of normalising one payload (before it is written)."""

    __slots__ = ("provider", "event", "reply", "problem", "unrecognised", "transcript")

    def __init__(self, provider: str, event: dict[str, Any], reply: bytes, problem: str | None, unrecognised: dict[str, Any] | None) -> None:
        self.provider = provider
        self.event = event
        self.reply = reply
        self.problem = problem
        self.unrecognised = unrecognised
        self.transcript: str | None = None
        """A transcript to import in the background once this event is written."""


def read_stdin(limit: int = MAX_PAYLOAD) -> tuple[bytes, int]:
    """Read stdin up to ``limit`` bytes; drain the rest. Returns (data, total bytes)."""
    chunks: list[bytes] = []
    kept = 0
    total = 0
    while True:
        try:
            chunk = os.read(0, 1 << 20)
        except InterruptedError:
            continue
        except OSError:
            break  # stdin closed or not readable (Codex notify runs with stdin null)
        if not chunk:
            break
        total += len(chunk)
        if kept < limit:
            take = chunk[: limit - kept]
            chunks.append(take)
            kept += len(take)
    return b"".join(chunks), total


def _sniff_string(text: str, key: str) -> str | None:
    """The string value of ``"key": "…"`` in text that does not parse (no escapes handled)."""
    i = text.find('"' + key + '"')
    if i < 0:
        return None
    j = i + len(key) + 2
    while j < len(text) and text[j] in " \t\r\n:":
        j += 1
    if j >= len(text) or text[j] != '"':
        return None
    end = text.find('"', j + 1)
    if end < 0 or end - j > 256:
        return None
    return text[j + 1 : end]


def build(
    agent: str,
    data: bytes,
    total_bytes: int,
    extra_args: list[str],
    *,
    environ: dict[str, str] | None = None,
    captured_at: int | None = None,
    event_id: str | None = None,
    capture_mode: str = "full",
    redact: bool = True,
    cwd: str | None = None,
    process_cwd: str | None = None,
) -> Captured:
    """Normalise one payload into a wire-form event (pure apart from reading git files).

    The working directory is the payload's ``cwd``, else ``cwd``, else the agents' project
    variables in ``environ``, else ``process_cwd``: the hook process's own (``os.getcwd()``
    when None; ``""`` for none, as the capture server passes for a client without one)."""
    env = os.environ if environ is None else environ
    now = captured_at if captured_at is not None else time.time_ns() // 1000
    provider = AGENT_PROVIDERS.get(agent)
    problem: str | None = None
    attrs_extra: dict[str, Any] = {}
    content_extra: dict[str, Any] = {}
    payload: Any = None
    text = ""

    if provider == "codex" and extra_args and not data.strip():
        data = extra_args[-1].encode("utf-8", "surrogateescape")
        total_bytes = len(data)
        attrs_extra["payload_source"] = "argv"
    if provider is None:
        problem = f"unknown agent {agent!r} (expected one of {', '.join(AGENT_PROVIDERS)})"
        attrs_extra["adapter_error"] = "unknown_agent"
        attrs_extra["agent_arg"] = agent[:64]
        provider = "unknown_agent"
    if total_bytes > len(data):
        problem = problem or f"payload of {total_bytes} bytes exceeds the {MAX_PAYLOAD} byte cap; recorded as a gap"
        attrs_extra["payload_error"] = "oversized"
        attrs_extra["payload_bytes"] = total_bytes
        text = data[:KEEP_TEXT].decode("utf-8", "replace")
        content_extra["payload_head"] = text
    elif not data.strip():
        problem = problem or "empty payload on stdin"
        attrs_extra["payload_error"] = "empty_payload"
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("utf-8", "replace")
            attrs_extra["payload_error"] = "invalid_utf8"
            problem = "payload is not valid UTF-8 (undecodable bytes replaced)"
        try:
            payload = loads(text)
        except DecodeError as e:
            problem = f"payload is not JSON: {e}"
            attrs_extra["payload_error"] = "invalid_json"
            content_extra["payload_text"] = text[:KEEP_TEXT]
            if len(text) > KEEP_TEXT:
                attrs_extra["payload_text_truncated"] = True
        else:
            if not isinstance(payload, dict):
                problem = f"payload is a JSON {type(payload).__name__}, not an object"
                attrs_extra["payload_error"] = "payload_not_object"
    if total_bytes:
        attrs_extra.setdefault("payload_bytes", total_bytes)

    partial: dict[str, Any]
    reply = b""
    adapter = None
    if provider in _ADAPTER_MODULES:
        adapter = _adapter(provider)
    if isinstance(payload, dict) and adapter is not None:
        try:
            partial = adapter.normalise(payload, extra_args)
        except Exception as e:  # an adapter bug must not lose the event
            problem = f"adapter failed: {type(e).__name__}: {e}"
            partial = {"kind": "unknown", "provider_event_name": str(payload.get("hook_event_name", "")), "attrs": {"adapter_error": type(e).__name__}}
        if payload.get("_agentlog_capture_test") is True:
            partial["kind"] = "capture_test"
    else:
        partial = {"kind": "unknown", "provider_event_name": "", "attrs": {}}
        sid = _sniff_string(text, "session_id") or _sniff_string(text, "conversation_id") if text else None
        if sid:
            partial["provider_session_id"] = sid
        name = _sniff_string(text, "hook_event_name") if text else None
        if name:
            partial["provider_event_name"] = name
    if adapter is not None:
        try:
            reply = adapter.reply(str(partial.get("provider_event_name", "")))
        except Exception:
            reply = b""

    # -- assemble in canonical key order --------------------------------------
    event: dict[str, Any] = {
        "event_id": event_id or uuid7(now // 1000),
        "schema_version": 1,
        "kind": partial.get("kind", "unknown"),
        "provider": provider,
        "provider_event_name": partial.get("provider_event_name") or "",
        "observed_at": partial.get("observed_at") or now,
        "captured_at": now,
        "capture_mode": capture_mode,
        "agentlog_version": __version__,
    }
    from agentlog.capture.adapters.common import put_optional

    put_optional(event, partial)

    work_dir = partial.get("cwd") or cwd or env.get("CLAUDE_PROJECT_DIR") or env.get("CURSOR_PROJECT_DIR") or env.get("GEMINI_PROJECT_DIR")
    if not work_dir and process_cwd is None:
        try:
            work_dir = os.getcwd()
        except OSError:
            work_dir = None
    elif not work_dir:
        work_dir = process_cwd or None
    project = None
    if work_dir:
        from agentlog.capture.project import attach_project, project_info

        project = project_info(work_dir)
        if project is not None and redact:
            from agentlog.capture.redact import redact_project

            project = redact_project(project)
        attach_project(event, project, work_dir)

    attrs: dict[str, Any] = dict(partial.get("attrs") or {})
    attrs.update(attrs_extra)
    content: dict[str, Any] | None = partial.get("content")
    if content_extra:
        content = {**(content or {}), **content_extra}
    raw = payload if payload is not None else None

    if capture_mode == "metadata_only":
        content = None
        raw = None
        for key in ("failure_evidence", "failing_tests", "first_error", "result_summary"):
            attrs.pop(key, None)  # they quote the output
    elif redact:
        from agentlog.capture.redact import redact_into

        content, raw = redact_into(attrs, content or None, raw)  # type: ignore[assignment]

    unrecognised = None
    if attrs.get("unrecognised") and isinstance(payload, dict):
        unrecognised = {"provider": provider, "event": event["provider_event_name"], "keys": sorted(str(k) for k in payload)[:64]}
    event["attrs"] = attrs
    if content:
        event["content"] = content
    if raw is not None:
        event["raw"] = raw
    captured = Captured(provider, event, reply, problem, unrecognised)
    if provider in SYNC_AT and event["provider_event_name"] in SYNC_AT[provider] and isinstance(payload, dict):
        tp = payload.get("transcript_path")
        if isinstance(tp, str) and tp.startswith("/") and len(tp) < 4096:
            captured.transcript = tp
    return captured


# Where a hook lacks outcomes its agent's transcript has, the events at which that
# transcript is imported in the background (Codex: PostToolUse carries no exit code
# and a failed apply_patch fires no end hook; the rollout has both).
SYNC_AT: dict[str, tuple[str, ...]] = {"codex": ("Stop", "SessionEnd")}
SYNC_AGENT: dict[str, str] = {"codex": "codex"}


def spawn_transcript_sync(provider: str, transcript: str, root: str) -> int | None:
    """Start ``agentlog import <agent> <transcript>`` detached (own session, no
    stdio), so the hook returns at once; the import takes the import lock, and
    what the hooks already recorded is not written twice. Its pid (a long-lived
    caller such as the capture server reaps it), or None when nothing was started."""
    exe = sys.executable
    if not exe:
        return None
    argv = [exe, "-I", "-m", "agentlog", "import", SYNC_AGENT[provider], transcript]
    env = dict(os.environ)
    env["AGENTLOG_HOME"] = root
    devnull = "/dev/null"
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, devnull, os.O_WRONLY, 0),
    ]
    return os.posix_spawn(exe, argv, env, file_actions=actions, setsid=True)


def fallback(agent: str, data: bytes, total: int, captured_at: int, settings: dict[str, Any], error: str,
             event_id: str | None = None) -> Captured:
    """A minimal ``unknown`` event for when normalising itself failed."""
    provider = AGENT_PROVIDERS.get(agent, "unknown_agent")
    text = data[:KEEP_TEXT].decode("utf-8", "replace")
    event: dict[str, Any] = {
        "event_id": event_id or uuid7(captured_at // 1000),
        "schema_version": 1,
        "kind": "unknown",
        "provider": provider,
        "provider_event_name": _sniff_string(text, "hook_event_name") or "",
        "observed_at": captured_at,
        "captured_at": captured_at,
        "capture_mode": settings["capture_mode"],
        "agentlog_version": __version__,
    }
    sid = _sniff_string(text, "session_id") or _sniff_string(text, "conversation_id")
    if sid:
        event["provider_session_id"] = sid
    event["attrs"] = {"adapter_error": error[:200], "payload_bytes": total}
    # Without the redactor working, no content can be kept safely.
    return Captured(provider, event, b"", f"could not normalise the payload ({error}); recorded without content", None)


_ADAPTER_MODULES = {
    "claude_code": "claude_code",
    "codex": "codex",
    "cursor": "cursor",
    "gemini_cli": "gemini_cli",
}


def _adapter(provider: str) -> Any:
    """Import only the adapter this hook needs."""
    name = _ADAPTER_MODULES[provider]
    if name == "claude_code":
        from agentlog.capture.adapters import claude_code as mod
    elif name == "codex":
        from agentlog.capture.adapters import codex as mod  # type: ignore[no-redef]
    elif name == "cursor":
        from agentlog.capture.adapters import cursor as mod  # type: ignore[no-redef]
    else:
        from agentlog.capture.adapters import gemini_cli as mod  # type: ignore[no-redef]
    return mod


def session_log(captured: Captured, root: str, durability: str) -> SessionLog:
    """The log the event belongs in."""
    from agentlog.log.writer import open_session_log

    event = captured.event
    return open_session_log(
        root, captured.provider, event.get("provider_session_id"), durability=durability, capture_mode=event["capture_mode"]
    )


def record(captured: Captured, root: str, durability: str, *, dedupe: bool = False) -> bool:
    """Append the event to its session's log. With ``dedupe``, not when its event id is
    already in the log's tail (a fallback of the native hook: the capture server may have
    written it); False then."""
    log = session_log(captured, root, durability)
    event = captured.event
    result = log.append([dumps_bytes(event)], dedupe=[event["event_id"]] if dedupe else None)
    if result.skipped:
        return False
    if result.withheld:
        _complain(root, "encryption at rest is on and its key is locked (or PyNaCl is missing): the event was "
                        "recorded without its content; run `agentlog keys unlock`")
    note_written(root, log, [captured])
    return True


def note_written(root: str, log: SessionLog, written: list[Captured]) -> None:
    """After events were appended to ``log``: a gap frame for payloads a full disk made
    earlier hooks drop, and the unrecognised events listed."""
    from agentlog.capture import dropped

    lost = dropped.take(root)  # payloads a full disk made earlier hooks drop: a gap frame says so
    if lost[0]:
        last = written[-1]
        event = last.event
        now = time.time_ns() // 1000
        log.append([dumps_bytes(dropped.gap_event(last.provider, event.get("provider_session_id"),
                                                  event["capture_mode"], __version__, uuid7(now // 1000), now, lost))])
    for captured in written:
        if captured.unrecognised is not None:
            _append_line(os.path.join(state_dir(root), "unrecognised.jsonl"),
                         {**captured.unrecognised, "at": captured.event["captured_at"]})


def load_settings(root: str, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The effective settings; on a bad config, the defaults (and a diagnostic)."""
    from agentlog.core.config import ConfigError, load

    try:
        return load(root, environ)
    except ConfigError as e:
        _complain(root, f"bad config, using defaults: {e}")
        from agentlog.core.config import DEFAULTS

        return dict(DEFAULTS)


def after_record(captured: Captured, root: str, settings: dict[str, Any]) -> int | None:
    """Once the event is written: its diagnostic, and the transcript import it calls for
    (its pid, or None)."""
    if captured.problem:
        _complain(root, captured.problem)
    if captured.transcript is not None and settings.get("transcript_sync", True) and settings["capture_mode"] == "full":
        try:
            return spawn_transcript_sync(captured.provider, captured.transcript, root)
        except OSError as e:
            _complain(root, f"could not start the transcript import: {e}")
    return None


def handed_over(environ: Any) -> tuple[str | None, int | None, int | None]:
    """(event id, captured_at µs, stdin bytes) that the native hook handed its Python
    fallback (``AGENTLOG_HOOK_*``); Nones when it did not (docs/hook-path.md). They are
    read by the wire protocol's rules (``capture.wire``): an event id that is not a
    lower-case UUIDv7 means none was handed over, a number that is not the protocol's
    decimal is ignored."""
    eid = environ.get("AGENTLOG_HOOK_EVENT_ID") or ""
    if not eid:
        return None, None, None
    from agentlog.capture import wire  # only a fallback pays for it; it imports nothing

    # surrogatepass: any str encodes (what is not ASCII fails the checks anyway)
    if not wire.is_uuid7(eid.encode("utf-8", "surrogatepass")):
        return None, None, None
    at = (environ.get("AGENTLOG_HOOK_CAPTURED_AT") or "").encode("utf-8", "surrogatepass")
    total = (environ.get("AGENTLOG_HOOK_STDIN_BYTES") or "").encode("utf-8", "surrogatepass")
    return eid, wire.decimal(at), wire.decimal(total)


def _append_line(path: str, obj: dict[str, Any]) -> None:
    try:
        ensure_dir(os.path.dirname(path))
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
        try:
            os.write(fd, dumps_bytes(obj) + b"\n")
        finally:
            os.close(fd)
    except OSError:
        pass


def _complain(root: str | None, message: str) -> None:
    """One line to stderr and to the diagnostics log (secrets redacted: an
    exception message can quote the payload)."""
    try:
        from agentlog.capture.redact import redact_text

        message = redact_text(message)[0]
    except Exception:
        message = message.split(":", 1)[0]
    line = "agentlog hook: " + message.replace("\n", " ")[:500]
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except Exception:
        pass
    if root:
        _append_line(diagnostics_log(root), {"at": time.time_ns() // 1000, "message": line})


def main(argv: list[str] | None = None) -> int:
    """Entry point; always returns 0."""
    started = time.perf_counter_ns()
    captured_at = time.time_ns() // 1000
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "hook":
        args = args[1:]
    root: str | None = None
    try:
        if not args or args[0] in ("-h", "--help"):
            sys.stderr.write("usage: agentlog hook <claude-code|codex|cursor|gemini-cli> < payload.json\n")
            return 0
        agent = args[0]
        root = data_root()
        settings = load_settings(root)
        data, total = read_stdin()
        # run by the native hook as its fallback: its event id, clock and byte count
        event_id, handed_at, handed_total = handed_over(os.environ)
        if handed_at is not None:
            captured_at = handed_at
        if handed_total is not None and handed_total > total:
            total = handed_total
        try:
            captured = build(
                agent,
                data,
                total,
                args[1:],
                captured_at=captured_at,
                event_id=event_id,
                capture_mode=settings["capture_mode"],
                redact=settings["redact_secrets"],
            )
        except Exception as e:  # a bug in normalising must not lose the event
            captured = fallback(agent, data, total, captured_at, settings, f"{type(e).__name__}: {e}", event_id)
        captured.event["attrs"]["hook_us"] = (time.perf_counter_ns() - started) // 1000
        if record(captured, root, settings["durability"], dedupe=event_id is not None):
            after_record(captured, root, settings)
        if captured.reply:
            try:
                os.write(1, captured.reply)
            except OSError:
                pass
    except BaseException as e:  # never fail the agent
        if root and isinstance(e, OSError) and e.errno is not None:
            try:
                from agentlog.capture import dropped

                if e.errno in dropped.FULL_DISK_ERRNOS:
                    dropped.count_drop(root, captured_at)  # in the record reserved while there was room
            except BaseException:
                pass
        try:
            _complain(root, f"{type(e).__name__}: {e}")
        except BaseException:
            pass
    return 0
