"""Structural edits of agents' JSON hook configs.

A config is parsed with its key order kept, its layout (indent unit,
separators, line ending, final newline, BOM) detected, and written back in
the same layout. Our entries are recognised by their command
(`agentlog.capture.command.is_our_command`), never by position, so a merge
is idempotent: remove every entry of ours wherever it is, then add the
current set where the old ones were. Containers (matcher groups, event
arrays, the ``hooks`` object) are dropped only when they became empty
because we removed our entries; everything else of the user's is left as it
was, in its order.

Files this module will not rewrite: invalid JSON, JSON with comments, a top
level that is not an object, duplicate keys, and a ``hooks`` value of the
wrong type. They raise a `ConfigError` subclass and stay untouched.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from agentlog.capture.command import is_our_command
from agentlog.install.agents import AgentSpec
from agentlog.install.errors import ConfigShapeError, InvalidJSONError, JSONWithCommentsError

JSONObject = dict[str, object]
BOM = "\ufeff"


@dataclass(frozen=True)
class JSONStyle:
    """Layout of a JSON file, enough to re-serialise it the same way."""

    indent: str | None = "  "
    """Indent unit; None for a single-line file."""
    item_separator: str = ","
    key_separator: str = ": "
    newline: str = "\n"
    trailing_newline: bool = True
    bom: bool = False


DEFAULT_STYLE = JSONStyle()


@dataclass
class ConfigDocument:
    """A parsed config file (or an empty one standing in for an absent file)."""

    path: Path | None
    data: JSONObject
    style: JSONStyle
    original: bytes | None
    """The file's bytes as read; None when the file does not exist."""

    @property
    def existed(self) -> bool:
        return self.original is not None


def detect_style(text: str) -> JSONStyle:
    """Guess the layout of ``text`` (a JSON document)."""
    bom = text.startswith(BOM)
    if bom:
        text = text[1:]
    if not text.strip():
        return JSONStyle(bom=bom)
    newline = "\r\n" if "\r\n" in text else "\n"
    trailing = text.endswith("\n")
    body_lines = [line for line in text.strip().splitlines() if line.strip()]
    indent: str | None
    if len(body_lines) <= 1:
        indent = None
    else:
        indent = ""
        for line in body_lines[1:]:
            stripped = line.lstrip(" \t")
            if stripped and len(stripped) < len(line):
                indent = line[: len(line) - len(stripped)]
                break
    # Separators: look only outside strings.
    outside = _outside_strings(text)
    tight_keys = len(re.findall(r":(?=\S)", outside))
    loose_keys = len(re.findall(r":(?=\s)", outside))
    key_separator = ":" if tight_keys > loose_keys else ": "
    if tight_keys + loose_keys == 0:
        key_separator = ": "
    item_separator = ","
    if indent is None:
        loose_items = len(re.findall(r",(?=\s)", outside))
        tight_items = len(re.findall(r",(?=\S)", outside))
        item_separator = ", " if loose_items >= tight_items and loose_items else ","
    return JSONStyle(
        indent=indent,
        item_separator=item_separator,
        key_separator=key_separator,
        newline=newline,
        trailing_newline=trailing,
        bom=bom,
    )


def _outside_strings(text: str) -> str:
    """``text`` with the contents of JSON strings blanked out (quotes kept)."""
    out: list[str] = []
    in_string = False
    escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                out.append(ch)
            continue
        if ch == '"':
            in_string = True
        out.append(ch)
    return "".join(out)


def _strip_comments(text: str) -> tuple[str, bool]:
    """Remove ``//`` and ``/* */`` comments outside strings; report whether any were found."""
    out: list[str] = []
    i = 0
    n = len(text)
    in_string = False
    found = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            in_string = True
            out.append(ch)
            i += 1
            continue
        if text.startswith("//", i):
            found = True
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if text.startswith("/*", i):
            found = True
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        out.append(ch)
        i += 1
    return "".join(out), found


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _pairs_hook(pairs: list[tuple[str, object]]) -> JSONObject:
    out: JSONObject = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def parse_config(raw: bytes | None, path: Path | None = None) -> ConfigDocument:
    """Parse a config file's bytes (None = the file does not exist).

    An absent, empty or whitespace-only file is an empty object. Raises a
    `ConfigError` subclass for anything agentlog should not rewrite.
    """
    if raw is None:
        return ConfigDocument(path=path, data={}, style=DEFAULT_STYLE, original=None)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidJSONError(f"not UTF-8 text ({exc.reason} at byte {exc.start}); left untouched", path) from None
    style = detect_style(text)
    body = text[1:] if style.bom else text
    if not body.strip():
        return ConfigDocument(path=path, data={}, style=style, original=raw)
    try:
        data = json.loads(body, object_pairs_hook=_pairs_hook, parse_constant=_reject_constant)
    except _DuplicateKey as exc:
        raise ConfigShapeError(
            f"duplicate key {exc.key!r}; agentlog will not rewrite a file whose meaning is ambiguous", path
        ) from None
    except ValueError as exc:
        _, had_comments = _strip_comments(body)
        if had_comments:
            raise JSONWithCommentsError(
                "contains comments (JSON with comments); agentlog will not rewrite it because the "
                "comments would be lost; remove the comments or add the hooks by hand",
                path,
            ) from None
        if isinstance(exc, json.JSONDecodeError):
            detail = f"line {exc.lineno} column {exc.colno}: {exc.msg}"
        else:
            detail = str(exc)
        raise InvalidJSONError(f"not valid JSON ({detail}); left untouched", path) from None
    if not isinstance(data, dict):
        raise ConfigShapeError(
            f"top level is a JSON {type(data).__name__}, expected an object; left untouched", path
        )
    return ConfigDocument(path=path, data=data, style=style, original=raw)


def serialise(data: JSONObject, style: JSONStyle = DEFAULT_STYLE) -> bytes:
    """``data`` as bytes laid out in ``style``."""
    separators = (style.item_separator, style.key_separator)
    text = json.dumps(data, indent=style.indent, separators=separators, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (from \ud800-style escapes) cannot be UTF-8: keep them escaped.
        text = json.dumps(data, indent=style.indent, separators=separators, ensure_ascii=True)
    if style.newline != "\n":
        text = text.replace("\n", style.newline)
    if style.trailing_newline:
        text += style.newline
    if style.bom:
        text = BOM + text
    return text.encode("utf-8")


def canonical(data: object) -> str:
    """Order-sensitive canonical text, for "did anything change?" comparisons."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def unified_diff(before: bytes | None, after: bytes | None, path: Path) -> str:
    """A unified diff between two versions of a file (``None`` = absent)."""
    a = (before or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    b = (after or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    fromfile = str(path) if before is not None else "/dev/null"
    tofile = str(path) if after is not None else "/dev/null"
    lines = list(difflib.unified_diff(a, b, fromfile=fromfile, tofile=tofile))
    out: list[str] = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


# --------------------------------------------------------------------------
# Finding, removing and adding our entries


def is_our_handler(item: object) -> bool:
    """A handler object whose command is one of ours."""
    if not isinstance(item, dict):
        return False
    command = item.get("command")
    return isinstance(command, str) and is_our_command(command)


@dataclass(frozen=True)
class FoundEntry:
    """One handler of ours found in a config."""

    event: str
    handler: JSONObject
    group: JSONObject | None
    """The matcher group holding it (nested shape), None when the handler sits in the event array."""

    @property
    def command(self) -> str:
        value = self.handler.get("command")
        return value if isinstance(value, str) else ""


def _hooks_object(data: JSONObject, path: Path | None) -> JSONObject | None:
    hooks = data.get("hooks")
    if hooks is None:
        return None
    if not isinstance(hooks, dict):
        raise ConfigShapeError(
            f"'hooks' is a JSON {type(hooks).__name__}, expected an object; left untouched", path
        )
    return hooks


def find_our_entries(data: JSONObject, path: Path | None = None) -> list[FoundEntry]:
    """Every handler of ours under ``hooks``, in file order."""
    hooks = _hooks_object(data, path)
    found: list[FoundEntry] = []
    if hooks is None:
        return found
    for event, value in hooks.items():
        if not isinstance(value, list):
            continue
        for item in value:
            if is_our_handler(item):
                assert isinstance(item, dict)
                found.append(FoundEntry(event=event, handler=item, group=None))
            elif isinstance(item, dict) and isinstance(item.get("hooks"), list):
                inner = item["hooks"]
                assert isinstance(inner, list)
                for handler in inner:
                    if is_our_handler(handler):
                        assert isinstance(handler, dict)
                        found.append(FoundEntry(event=event, handler=handler, group=item))
    return found


@dataclass
class _Removal:
    removed: dict[str, int] = field(default_factory=dict)
    """Per event, how many handlers of ours were removed."""
    positions: dict[str, int] = field(default_factory=dict)
    """Per event, where (in the filtered array) the first removed entry was."""
    emptied: set[str] = field(default_factory=set)
    """Events whose array became empty because of the removal."""


def _remove_ours(hooks: JSONObject) -> _Removal:
    """Remove our handlers from ``hooks`` in place (empty arrays are kept; see `_Removal.emptied`)."""
    result = _Removal()
    for event in list(hooks):
        value = hooks[event]
        if not isinstance(value, list):
            continue
        kept_items: list[object] = []
        removed = 0
        first: int | None = None
        for item in value:
            if is_our_handler(item):
                removed += 1
                if first is None:
                    first = len(kept_items)
                continue
            if isinstance(item, dict) and isinstance(item.get("hooks"), list):
                inner = item["hooks"]
                assert isinstance(inner, list)
                kept_handlers = [h for h in inner if not is_our_handler(h)]
                n = len(inner) - len(kept_handlers)
                if n:
                    removed += n
                    if first is None:
                        first = len(kept_items)
                    if kept_handlers:
                        item["hooks"] = kept_handlers
                        kept_items.append(item)
                    continue
            kept_items.append(item)
        if removed:
            hooks[event] = kept_items
            result.removed[event] = removed
            result.positions[event] = first if first is not None else len(kept_items)
            if not kept_items:
                result.emptied.add(event)
    return result


@dataclass
class EditResult:
    """The outcome of a structural edit (nothing is written by this module)."""

    data: JSONObject
    changed: bool
    """Whether ``data`` differs from the input (order-sensitive)."""
    had_ours: dict[str, int]
    """Per event, how many of our handlers the input held."""
    events_added: list[str]
    events_removed: list[str]
    events_updated: list[str]


def merge(data: JSONObject, spec: AgentSpec, command: str, path: Path | None = None) -> EditResult:
    """Return a copy of ``data`` holding exactly our current entries for ``spec``."""
    doc = copy.deepcopy(data)
    before_entries = find_our_entries(doc, path)
    before_canon = canonical(data)
    if spec.needs_version_key and "version" not in doc:
        doc = {"version": 1, **doc}
    hooks = _hooks_object(doc, path)
    if hooks is None:
        hooks = {}
        doc["hooks"] = hooks
    for event in spec.events:
        value = hooks.get(event)
        if value is not None and not isinstance(value, list):
            raise ConfigShapeError(
                f"'hooks.{event}' is a JSON {type(value).__name__}, expected an array; left untouched", path
            )
    removal = _remove_ours(hooks)
    for event in spec.events:
        entry = spec.entry(event, command)
        existing = hooks.get(event)
        if isinstance(existing, list):
            position = removal.positions.get(event, len(existing))
            existing.insert(min(position, len(existing)), entry)
        else:
            hooks[event] = [entry]
        removal.emptied.discard(event)
    for event in removal.emptied:
        del hooks[event]
    return _edit_result(data, doc, before_canon, before_entries, spec, command, path)


def unmerge(data: JSONObject, path: Path | None = None) -> EditResult:
    """Return a copy of ``data`` without any entry of ours."""
    doc = copy.deepcopy(data)
    before_entries = find_our_entries(doc, path)
    before_canon = canonical(data)
    hooks = _hooks_object(doc, path)
    if hooks is not None:
        removal = _remove_ours(hooks)
        for event in removal.emptied:
            del hooks[event]
        if removal.removed and not hooks:
            del doc["hooks"]
    return _edit_result(data, doc, before_canon, before_entries, None, None, path)


def _edit_result(
    original: JSONObject,
    doc: JSONObject,
    before_canon: str,
    before_entries: list[FoundEntry],
    spec: AgentSpec | None,
    command: str | None,
    path: Path | None,
) -> EditResult:
    had: dict[str, int] = {}
    for entry in before_entries:
        had[entry.event] = had.get(entry.event, 0) + 1
    after_entries = find_our_entries(doc, path)
    after_events: list[str] = []
    for entry in after_entries:
        if entry.event not in after_events:
            after_events.append(entry.event)
    added = [e for e in after_events if e not in had]
    removed = [e for e in had if e not in after_events]
    updated: list[str] = []
    if spec is not None and command is not None:
        for event in after_events:
            if event not in had:
                continue
            old = [e for e in before_entries if e.event == event]
            if len(old) != 1 or not _entry_matches(old[0], spec.entry(event, command), spec):
                updated.append(event)
    return EditResult(
        data=doc,
        changed=canonical(doc) != before_canon,
        had_ours=had,
        events_added=added,
        events_removed=removed,
        events_updated=updated,
    )


def _entry_matches(found: FoundEntry, wanted: JSONObject, spec: AgentSpec) -> bool:
    if spec.shape == "flat":
        return found.group is None and canonical(found.handler) == canonical(wanted)
    return found.group is not None and canonical(found.group) == canonical(wanted)


def expected_entry_matches(found: FoundEntry, spec: AgentSpec, command: str) -> bool:
    """Whether ``found`` is exactly what the current version would install for its event."""
    if found.event not in spec.events:
        return False
    return _entry_matches(found, spec.entry(found.event, command), spec)
