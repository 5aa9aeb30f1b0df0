"""Helpers shared by the provider adapters (hook path: standard library only).

An adapter turns one hook payload into a *partial* wire-form event: the
fields the payload itself determines (kind, provider ids, tool, paths,
outcome, attrs, content). The capture pipeline adds identity, times,
project and ``raw``. Every helper here is total: payloads are untrusted JSON,
so any key may be missing or of the wrong type, and nothing may raise.

Working form: adapters build ``ev`` through :func:`new_event`, which
pre-creates empty ``attrs``/``content``/``paths``; :func:`finish` drops the
empty ones and returns the wire-form dict.
"""

from __future__ import annotations

import sys

from agentlog.capture.classify import (
    classify_command,
    classify_tool,
    edit_line_counts,
    file_facts,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

OUTPUT_LIMIT = 64 * 1024
"""Largest serialised ``content.tool_output`` kept as is (bytes)."""

# Text that the agent injects into the prompt stream; not typed by a human.
INJECTED_PROMPT_PREFIXES: tuple[str, ...] = (
    "<task-notification>",
    "<system-reminder>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<bash-stdout>",
    "<bash-stderr>",
    "[SYSTEM NOTIFICATION",
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<user-prompt-submit-hook>",
)

# tool_input keys that name the file a tool works on, in priority order.
FILE_KEYS: tuple[str, ...] = ("file_path", "notebook_path", "absolute_path", "filePath")
# Keys that name a directory or search root (a path, but no file facts).
DIR_KEYS: tuple[str, ...] = ("path", "directory", "dir_path")

PATCH_HEADERS: tuple[str, ...] = (
    "*** Add File:",
    "*** Update File:",
    "*** Delete File:",
    "*** Move to:",
)


# Optional wire keys after the identity block, in the order every writer puts them.
WIRE_OPTIONAL: tuple[str, ...] = (
    "provider_version", "provider_session_id", "provider_turn_id", "agent", "tool",
    "paths", "outcome", "duration_ms",
)


def put_optional(event: dict[str, Any], values: dict[str, Any]) -> None:
    """The optional wire keys of ``values`` that say something, in :data:`WIRE_OPTIONAL` order."""
    for key in WIRE_OPTIONAL:
        value = values.get(key)
        if value is not None and value != [] and value != {}:
            event[key] = value


# -- scalar coercion ---------------------------------------------------------


def text(v: Any) -> str | None:
    """``v`` if it is a non-empty string, else ``None``."""
    return v if isinstance(v, str) and v else None


def integer(v: Any) -> int | None:
    """``v`` as an int if it is an integral JSON number (not a bool)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v == v and v not in (float("inf"), float("-inf")) and v == int(v):
        return int(v)
    return None


def duration(v: Any) -> int | None:
    """A non-negative duration in ms (ints or finite floats, rounded down)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if v != v or v < 0 or v > 1e15:  # NaN, negative, absurd
        return None
    return int(v)


def as_dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def utf8_len(s: str) -> int:
    if s.isascii():  # a flag of the string: no need to encode it to know
        return len(s)
    return len(s.encode("utf-8", "surrogatepass"))


def _has_float(v: Any) -> bool:
    if isinstance(v, float):
        return True
    if isinstance(v, dict):
        v = v.values()
    elif not isinstance(v, (list, tuple)):
        return False
    for x in v:
        if not isinstance(x, (str, int)) and _has_float(x):
            return True
    return False


def json_size(v: Any) -> int:
    """Bytes of ``v`` serialised (a string counts as its UTF-8 text)."""
    if isinstance(v, str):
        return utf8_len(v)
    # In a process that has orjson loaded (an import; the hook never loads it) its
    # output is the same length as fastjson's and several times faster to make —
    # but for floats, which fastjson writes as ``repr`` does (``1e-05``, orjson
    # ``0.00001``), and what orjson refuses (a lone surrogate, an int beyond 64
    # bits): those are measured by fastjson as ever.
    orjson = sys.modules.get("orjson")
    if orjson is not None:
        try:
            if not _has_float(v):
                return len(orjson.dumps(v))
        except (TypeError, RecursionError):
            pass
    try:
        from agentlog.core import fastjson

        return len(fastjson.dumps_bytes(v))
    except Exception:  # not JSON (cannot come from a parsed payload)
        return utf8_len(str(v))


def dumps_text(v: Any) -> str:
    try:
        from agentlog.core import fastjson

        return fastjson.dumps(v)
    except Exception:
        return str(v)


def loads_or_none(s: str) -> tuple[bool, Any]:
    """``(True, value)`` when ``s`` is one JSON document, else ``(False, None)``."""
    try:
        from agentlog.core import fastjson

        return True, fastjson.loads(s)
    except Exception:
        return False, None


def truncate_utf8(s: str, limit: int) -> str:
    """``s`` cut to at most ``limit`` UTF-8 bytes, on a character boundary."""
    b = s.encode("utf-8", "surrogatepass")
    if len(b) <= limit:
        return s
    cut = limit
    while cut > 0 and (b[cut] & 0xC0) == 0x80:
        cut -= 1
    return b[:cut].decode("utf-8", "surrogatepass")


def snake(token: str) -> str:
    """``rateLimit``/``Rate-Limit``/``rate limit`` → ``rate_limit``."""
    out: list[str] = []
    prev = ""
    for ch in token.strip():
        if ch.isalnum():
            if ch.isupper() and prev and (prev.islower() or prev.isdigit()):
                out.append("_")
            out.append(ch.lower())
        elif out and out[-1] != "_":
            out.append("_")
        prev = ch
    return "".join(out).strip("_")


def is_token(s: str) -> bool:
    """A short identifier-like string (``rate_limit``, ``overloaded``, ``Error-Type``)."""
    if not s or len(s) > 64:
        return False
    for ch in s:
        if not (ch.isalnum() or ch in "_-. "):
            return False
    return any(ch.isalpha() for ch in s)


# -- time --------------------------------------------------------------------


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date."""
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _digits(s: str, i: int, n: int) -> int | None:
    part = s[i : i + n]
    if len(part) != n or not part.isdigit() or not part.isascii():
        return None
    return int(part)


def parse_iso8601(s: str) -> int | None:
    """µs since the epoch of an ISO 8601 / RFC 3339 date-time with a zone.

    Accepts ``YYYY-MM-DD[T ]hh:mm[:ss[.fraction]](Z|±hh[:mm]|±hhmm)``
    (``T``/``Z`` in either case). A time without a zone is ambiguous (local
    time of an unknown machine) and yields ``None``, as does anything invalid.
    """
    if not isinstance(s, str):
        return None
    n = len(s)
    if 20 <= n <= 30 and s[-1] == "Z" and s[10] == "T" and s[13] == ":" and s[16] == ":":
        days = _DATE_DAYS.get(s[:10])  # the usual UTC shape, of a date seen before (transcripts)
        if days is not None:
            got = _utc_time(s, n)
            if got is not None:
                return days * 86_400_000_000 + got
    s = s.strip()
    if len(s) < 17 or len(s) > 64:
        return None
    year = _digits(s, 0, 4)
    month = _digits(s, 5, 2)
    day = _digits(s, 8, 2)
    if year is None or month is None or day is None or s[4] != "-" or s[7] != "-":
        return None
    if s[10] not in "Tt ":
        return None
    hour = _digits(s, 11, 2)
    minute = _digits(s, 14, 2)
    if hour is None or minute is None or s[13] != ":":
        return None
    i = 16
    second = 0
    micro = 0
    if i < len(s) and s[i] == ":":
        sec = _digits(s, i + 1, 2)
        if sec is None:
            return None
        second = sec
        i += 3
        if i < len(s) and s[i] in ".,":
            j = i + 1
            while j < len(s) and "0" <= s[j] <= "9":
                j += 1
            frac = s[i + 1 : j]
            if not frac:
                return None
            micro = int((frac + "000000")[:6])
            i = j
    rest = s[i:]
    if rest in ("Z", "z"):
        offset = 0
    elif rest[:1] in ("+", "-"):
        sign = 1 if rest[0] == "+" else -1
        body = rest[1:]
        oh: int | None
        om: int | None
        if len(body) == 2:
            oh, om = _digits(body, 0, 2), 0
        elif len(body) == 4:
            oh, om = _digits(body, 0, 2), _digits(body, 2, 2)
        elif len(body) == 5 and body[2] == ":":
            oh, om = _digits(body, 0, 2), _digits(body, 3, 2)
        else:
            return None
        if oh is None or om is None or oh > 23 or om > 59:
            return None
        offset = sign * (oh * 3600 + om * 60)
    else:
        return None
    if not 1 <= month <= 12 or day < 1 or hour > 23 or minute > 59 or second > 60:
        return None
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    mdays = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]
    if day > mdays:
        return None
    days = _days_from_civil(year, month, day)
    if len(_DATE_DAYS) < 4096:
        _DATE_DAYS[s[:10]] = days
    secs = days * 86400 + hour * 3600 + minute * 60 + second - offset
    return secs * 1_000_000 + micro


_DATE_DAYS: dict[str, int] = {}
"""``YYYY-MM-DD`` → days since the epoch, of dates :func:`parse_iso8601` checked."""


def _utc_time(s: str, n: int) -> int | None:
    """µs into the day of ``…Thh:mm:ss[.fraction]Z`` (``s[10]`` is ``T``), else None."""
    clock = s[11:13] + s[14:16] + s[17:19]
    if not (clock.isdigit() and clock.isascii()):
        return None
    hour, rest = divmod(int(clock), 10000)
    minute, second = divmod(rest, 100)
    if hour > 23 or minute > 59 or second > 60:
        return None
    micro = 0
    if n > 20:
        frac = s[20:-1]
        if s[19] not in ".," or not (frac.isdigit() and frac.isascii()):
            return None
        micro = int((frac + "000000")[:6])
    return (hour * 3600 + minute * 60 + second) * 1_000_000 + micro


def timestamp_us(v: Any) -> int | None:
    """A provider timestamp as µs: ISO text, or an epoch number (s, ms or µs by size)."""
    if isinstance(v, str):
        return parse_iso8601(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        return None
    if v <= 0 or v >= 1e17:
        return None
    if v > 1e14:
        return int(v)
    if v > 1e10:
        return int(v * 1000)
    return int(v * 1_000_000)


# -- event building ----------------------------------------------------------


def event_name(payload: dict[str, Any], extra_args: list[str], key: str = "hook_event_name") -> str | None:
    """The provider's event name: payload first, else a plain first extra argument."""
    name = text(payload.get(key))
    if name is not None:
        return name
    if extra_args and isinstance(extra_args[0], str):
        hint = extra_args[0].strip()
        if hint and not hint.startswith(("{", "[")):
            return hint
    return None


def new_event(kind: str, name: str | None) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "kind": kind,
        "provider_event_name": name if name is not None else "",
        "attrs": {},
        "content": {},
        "paths": [],
    }
    if name is None:
        ev["kind"] = "unknown"
        ev["attrs"]["payload_error"] = "missing_event_name"
    return ev


def finish(ev: dict[str, Any]) -> dict[str, Any]:
    """Drop empty containers and ``None`` values; return the partial wire form. A
    successful test run gets its summary (``attrs.result_summary``: 212 tests passed)."""
    attrs = ev.get("attrs")
    if ev.get("kind") == "tool_call_finished" and attrs and attrs.get("command_category") == "test":
        try:
            from agentlog.capture.failures import test_run_attrs

            attrs.update(test_run_attrs(ev))
        except Exception:  # a summary bug must not lose the event
            pass
    out: dict[str, Any] = {}
    for k, v in ev.items():
        if v is None:
            continue
        if k in ("attrs", "content", "paths", "agent") and not v:
            continue
        out[k] = v
    return out


def set_str(d: dict[str, Any], key: str, v: Any) -> None:
    s = text(v)
    if s is not None:
        d[key] = s


def set_bool(d: dict[str, Any], key: str, v: Any) -> None:
    if isinstance(v, bool):
        d[key] = v


def set_int(d: dict[str, Any], key: str, v: Any) -> None:
    n = integer(v)
    if n is not None:
        d[key] = n


def add_path(ev: dict[str, Any], p: Any) -> bool:
    """Append a reported path (verbatim) unless empty or already listed."""
    s = text(p)
    if s is None or s.strip() == "":
        return False
    paths: list[str] = ev["paths"]
    if s not in paths:
        paths.append(s)
    return True


def common(ev: dict[str, Any], payload: dict[str, Any], session_keys: tuple[str, ...] = ("session_id",)) -> None:
    """Fields most providers share: session, cwd, timestamp, transcript, mode, agent."""
    for k in session_keys:
        sid = text(payload.get(k))
        if sid is not None:
            ev["provider_session_id"] = sid
            break
    attrs = ev["attrs"]
    cwd = text(payload.get("cwd"))
    if cwd is not None:
        ev["cwd"] = cwd
        attrs["cwd"] = cwd
    if "timestamp" in payload:
        t = timestamp_us(payload.get("timestamp"))
        if t is not None:
            ev["observed_at"] = t
    if "transcript_path" in payload:
        attrs["transcript_present"] = text(payload.get("transcript_path")) is not None
    set_str(attrs, "permission_mode", payload.get("permission_mode"))
    agent: dict[str, Any] = {}
    agent_id = text(payload.get("agent_id"))
    agent_type = text(payload.get("agent_type"))
    if agent_id is not None:
        agent["agent_id"] = agent_id
        attrs["is_subagent"] = True
    if agent_type is not None:
        agent["agent_type"] = agent_type
        attrs["agent_type"] = agent_type
    set_str(agent, "model", payload.get("model"))
    ev["agent"] = agent


# -- content facts -------------------------------------------------------------


def prompt_facts(ev: dict[str, Any], prompt: Any) -> None:
    """``content.prompt`` and the content-free prompt facts."""
    if not isinstance(prompt, str):
        return
    attrs = ev["attrs"]
    ev["content"]["prompt"] = prompt
    attrs["prompt_chars"] = len(prompt)
    attrs["prompt_lines"] = len(prompt.splitlines())
    attrs["prompt_has_code_fence"] = "```" in prompt
    attrs["prompt_has_question"] = "?" in prompt or "\uff1f" in prompt
    attrs["prompt_kind"] = prompt_kind(prompt)


def prompt_kind(prompt: str) -> str:
    """``injected`` for agent-generated text in the prompt stream, else ``human``."""
    head = prompt.lstrip()
    for prefix in INJECTED_PROMPT_PREFIXES:
        if head.startswith(prefix):
            return "injected"
    return "human"


def command_text(v: Any) -> str | None:
    """A shell command: a string, or an argv array joined by spaces."""
    if isinstance(v, str):
        return v if v.strip() else None
    if isinstance(v, list) and v:
        joined = " ".join(_argv_strings(v))
        return joined if joined.strip() else None
    return None


def _argv_strings(argv: list[Any]) -> list[str]:
    return [p if isinstance(p, str) else dumps_text(p) for p in argv]


_SAFE_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_")


def shell_line(v: Any) -> str | None:
    """The command as one shell line for classification: an argv array is
    quoted word by word (``["bash", "-lc", "cargo test"]`` must stay one
    script argument, which plain joining would split)."""
    if not isinstance(v, list):
        return command_text(v)
    words = []
    for w in _argv_strings(v):
        if w and all(ch in _SAFE_WORD for ch in w):
            words.append(w)
        else:
            words.append("'" + w.replace("'", "'\"'\"'") + "'")
    line = " ".join(words)
    return line if line.strip() else None


def command_key(cmd: str) -> str:
    """A digest of a command line (blanks collapsed): the same command run again has the
    same key, which is how a retry that passed is found (``tool_calls.fixed_by``)."""
    from agentlog.log.frame import sha256

    return sha256(" ".join(cmd.split()).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def command_facts(ev: dict[str, Any], cmd: str, line: str | None = None) -> None:
    """``content.command`` and its facts; ``line`` is the form to classify
    when it differs from the recorded text (quoted argv)."""
    ev["content"]["command"] = cmd
    attrs = ev["attrs"]
    attrs["command_bytes"] = utf8_len(cmd)
    attrs["command_key"] = command_key(cmd)
    try:
        facts = classify_command(line if line is not None else cmd)
    except Exception:  # classifier bug must not lose the event
        facts = {}
    if isinstance(facts, dict):
        for k in ("command_category", "git_subcommand", "command_subcategory"):
            set_str(attrs, k, facts.get(k))


def patch_facts(ev: dict[str, Any], patch: str) -> bool:
    """Paths and line counts of an ``apply_patch`` envelope; True if it was one."""
    found = False
    added = removed = 0
    in_patch = False
    for raw_line in patch.splitlines():
        line = raw_line.strip()
        header = False
        for prefix in PATCH_HEADERS:
            if line.startswith(prefix):
                found = header = in_patch = True
                add_path(ev, line[len(prefix) :].strip())
                break
        if header or not in_patch:
            if line == "*** Begin Patch":
                in_patch = True
            continue
        if line.startswith("*** "):
            continue
        if raw_line.startswith("+"):
            added += 1
        elif raw_line.startswith("-"):
            removed += 1
    if found:
        ev["attrs"]["lines_added"] = ev["attrs"].get("lines_added", 0) + added
        ev["attrs"]["lines_removed"] = ev["attrs"].get("lines_removed", 0) + removed
    return found


def add_lines(ev: dict[str, Any], old: Any, new: Any) -> None:
    o = old if isinstance(old, str) else ""
    n = new if isinstance(new, str) else ""
    try:
        a, r = edit_line_counts(o, n)
    except Exception:
        return
    attrs = ev["attrs"]
    attrs["lines_added"] = attrs.get("lines_added", 0) + int(a)
    attrs["lines_removed"] = attrs.get("lines_removed", 0) + int(r)


def edits_facts(ev: dict[str, Any], edits: Any) -> None:
    """Line counts of an ``edits`` array (MultiEdit, Cursor afterFileEdit)."""
    if not isinstance(edits, list):
        return
    for e in edits:
        if isinstance(e, dict) and (isinstance(e.get("old_string"), str) or isinstance(e.get("new_string"), str)):
            add_lines(ev, e.get("old_string"), e.get("new_string"))


def set_file_facts(ev: dict[str, Any], path: str) -> None:
    try:
        facts = file_facts(path)
    except Exception:
        return
    if not isinstance(facts, dict):
        return
    attrs = ev["attrs"]
    set_str(attrs, "file_ext", facts.get("file_ext"))
    for k in ("file_is_test", "file_is_config", "file_is_doc"):
        set_bool(attrs, k, facts.get(k))


def tool_category(name: str) -> str:
    if name.startswith("MCP:"):
        return "mcp"
    try:
        cat = classify_tool(name)
    except Exception:
        return "other"
    return cat if isinstance(cat, str) else "other"


def set_tool(ev: dict[str, Any], name: Any, call_id: Any = None, category: str | None = None) -> str | None:
    """``tool`` from a provider tool name; returns the category (None when no name)."""
    if isinstance(name, str):
        tname = name
    elif isinstance(name, (int, float)) and not isinstance(name, bool):
        tname = str(name)
    else:
        tname = ""
    if not tname:
        ev["attrs"]["payload_error"] = "missing_tool_name"
        return None
    cat = category if category is not None else tool_category(tname)
    tool: dict[str, Any] = {"name": tname, "category": cat}
    cid = call_id if isinstance(call_id, str) and call_id else None
    if cid is not None:
        tool["call_id"] = cid
    ev["tool"] = tool
    return cat


def input_facts(ev: dict[str, Any], tool_input: Any, category: str | None, tool_name: str = "") -> None:
    """``content.tool_input`` and what it reveals: paths, command, edit size, file facts."""
    if tool_input is None:
        return
    ev["content"]["tool_input"] = tool_input
    ev["attrs"]["tool_input_bytes"] = json_size(tool_input)
    if not isinstance(tool_input, dict):
        if isinstance(tool_input, str) and "*** Begin Patch" in tool_input:
            patch_facts(ev, tool_input)
            if ev["paths"]:
                set_file_facts(ev, ev["paths"][0])
        return
    paths: list[str] = ev["paths"]
    n_before = len(paths)
    for k in FILE_KEYS:
        add_path(ev, tool_input.get(k))
    file_primary = n_before == 0 and len(paths) > 0
    for k in DIR_KEYS:
        add_path(ev, tool_input.get(k))
    patches = [v for v in (tool_input.get("patch"), tool_input.get("input")) if isinstance(v, str)]
    raw_cmd = tool_input.get("command")
    if raw_cmd is None:
        raw_cmd = tool_input.get("cmd")
    cmd = command_text(raw_cmd)
    # Codex's apply_patch (and its Edit/Write aliases) carries the patch in
    # `command`; it is not a shell command. A shell running apply_patch is.
    is_patch_tool = tool_name.lower() == "apply_patch" or (
        cmd is not None and category in ("file_edit", "file_write") and "*** Begin Patch" in cmd
    )
    if cmd is not None and (is_patch_tool or "*** Begin Patch" in cmd):
        patches.append(cmd)
    for patch in patches:
        empty = not paths
        if patch_facts(ev, patch) and empty and paths:
            file_primary = True
    if cmd is not None and not is_patch_tool:
        command_facts(ev, cmd, shell_line(raw_cmd))
    if "old_string" in tool_input or "new_string" in tool_input:
        add_lines(ev, tool_input.get("old_string"), tool_input.get("new_string"))
    edits_facts(ev, tool_input.get("edits"))
    if category == "file_write" and isinstance(tool_input.get("content"), str):
        add_lines(ev, "", tool_input.get("content"))
    if category == "subagent":
        set_str(ev["attrs"], "subagent_type", tool_input.get("subagent_type"))
    if file_primary and ev["paths"]:
        set_file_facts(ev, ev["paths"][0])


def set_tool_output(ev: dict[str, Any], value: Any, as_text: str | None = None) -> None:
    """``content.tool_output``: kept as is up to 64 KiB serialised, else a truncated string.

    ``as_text`` is the output's original text form (Cursor sends JSON strings)
    to truncate instead of re-serialising ``value``.
    """
    if value is None:
        return
    size = json_size(value) if as_text is None else utf8_len(as_text)
    ev["attrs"]["tool_output_bytes"] = size
    if size <= OUTPUT_LIMIT:
        ev["content"]["tool_output"] = value
        return
    if as_text is None:
        as_text = value if isinstance(value, str) else dumps_text(value)
    ev["content"]["tool_output"] = truncate_utf8(as_text, OUTPUT_LIMIT)
    ev["attrs"]["tool_output_truncated"] = True


def error_text(v: Any) -> str | None:
    """Error text from a string, or an object's ``message``/``error``."""
    if isinstance(v, str):
        return v if v.strip() else None
    if isinstance(v, dict):
        for k in ("message", "error", "error_message"):
            s = v.get(k)
            if isinstance(s, str) and s.strip():
                return s
    return None


def set_failure(
    ev: dict[str, Any],
    err: str | None,
    exit_code: int | None = None,
    cls: str | None = None,
    status: str = "failure",
) -> None:
    """Mark ``ev`` failed: outcome, ``attrs.error_class``/``error_bytes``, ``content.error``,
    and what the output says (``attrs.failure_evidence``, test and check counts).

    The class comes from :func:`agentlog.capture.failures.classify_event`: the
    event's error and output, tool, command facts and exit code, with ``cls``
    as the adapter's structured hint (kept when it is a strong one:
    interrupted, cancelled, a refusal …). An explicit ``exit_code`` replaces
    one read from the text. Call it after the event's tool, input and output are set.
    """
    if err is not None:
        ev["content"]["error"] = err
        ev["attrs"]["error_bytes"] = utf8_len(err)
    outcome: dict[str, Any] = {"status": status}
    if exit_code is not None:
        outcome["exit_code"] = exit_code
    ev["outcome"] = outcome
    if not ev.get("tool"):  # a turn's failure: the agent's own error type (rate_limit …) is its class
        outcome["class"] = ev["attrs"]["error_class"] = cls or ("nonzero_exit" if exit_code else "unknown")
        return
    try:
        from agentlog.capture.failures import CLASSIFIER_VERSION, classify_event, summary_attrs

        verdict = classify_event(ev, cls)
        klass = str(verdict["class"])
        code = integer(verdict.get("exit_code"))
        ev["attrs"].update(summary_attrs(verdict))
        ev["attrs"]["classified_by"] = CLASSIFIER_VERSION
    except Exception:  # a classifier bug must not lose the event
        klass, code = cls or ("nonzero_exit" if exit_code else "unknown"), exit_code
    outcome["class"] = klass
    if exit_code is None and code is not None:
        outcome["exit_code"] = code
    ev["attrs"]["error_class"] = klass


def response_exit_code(resp: Any) -> int | None:
    """An explicit exit code in a tool response object (``exit_code``, ``exitCode``, ``metadata.exit_code``)."""
    if not isinstance(resp, dict):
        return None
    for k in ("exit_code", "exitCode"):
        n = integer(resp.get(k))
        if n is not None:
            return n
    meta = resp.get("metadata")
    if isinstance(meta, dict):
        for k in ("exit_code", "exitCode"):
            n = integer(meta.get(k))
            if n is not None:
                return n
    return None


def header_exit_code(s: str, label: str = "exit code", max_lines: int = 8) -> int | None:
    """``N`` from a leading ``Exit code: N`` line of a tool's text output."""
    for i, line in enumerate(s.splitlines()):
        if i >= max_lines:
            break
        low = line.strip().lower()
        if low.startswith(label):
            rest = low[len(label) :].lstrip(" :=")
            num = ""
            for ch in rest:
                if ch.isdigit() or (ch == "-" and not num):
                    num += ch
                else:
                    break
            if num and num != "-":
                return int(num)
            return None
    return None


def copy_texts(ev: dict[str, Any], payload: dict[str, Any], pairs: tuple[tuple[str, str], ...]) -> None:
    """Copy non-empty string payload values into content (``payload key → content key``)."""
    content = ev["content"]
    for src, dst in pairs:
        if dst in content:
            continue
        s = text(payload.get(src))
        if s is not None:
            content[dst] = s


def codex_text_exit_code(resp: str) -> int | None:
    """Exit code of a Codex shell result given as text.

    Newer Codex: ``Exit code: N`` header lines, or the unified exec tool's
    ``Process exited with code N`` line (0.14x and later); older: a JSON string
    ``{"output": …, "metadata": {"exit_code": N, …}}``.
    """
    head = resp.lstrip()
    if head.startswith("{") and '"exit_code"' in resp:
        ok, value = loads_or_none(resp)
        if ok:
            return response_exit_code(value)
    code = header_exit_code(resp, "exit code")
    if code is None and head.startswith("Chunk ID:"):
        # unified exec (0.14x+): "Chunk ID / Wall time / Process exited with code N / … / Output:"
        code = header_exit_code(resp, "process exited with code", 6)
    return code
