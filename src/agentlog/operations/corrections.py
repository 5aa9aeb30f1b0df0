"""Corrections and retractions: what a person says about what was recorded.

Both are ordinary canonical events (kinds ``correction`` and ``retraction``,
provider ``agentlog``, provider event names ``Correction``/``Retraction``),
appended to one hash-chained log for all of them: provider ``agentlog``,
session ``meta``. Nothing recorded is ever changed; the projection applies
them (:mod:`agentlog.projection.assemble`): a correction replaces an attempt's outcome (keeping
what was inferred), attaches a note, or replaces a turn's objective, the
latest one winning; a retraction hides a session, an event or an attempt.

Attributes (content-free): ``correction_type``, ``target`` (display id,
``att_…``/``trn_…``), ``outcome``, ``failure_class``, ``note_chars``;
``target_type`` (``session|event|attempt``), ``target``, ``reason``,
``note_chars``. The note (for ``turn_objective``: the new objective) is
``content.note``, secrets redacted as the hook redacts them, and left out
under ``capture_mode = metadata_only``.

Values are checked before anything is written: closed vocabularies, and the
target must name exactly one entity of the current projection (an id or an
unambiguous prefix) that is not retracted. Errors are :class:`MetaError`;
``usage`` tells a bad value (a usage error) from a target that is not there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Final

from agentlog.core import AgentlogError
from agentlog import __version__
from agentlog.core.kinds import (
    CORRECTION_TYPES,
    META_PROVIDER,
    META_SESSION,
    OUTCOMES,
    REASONS,
    SCHEMA_VERSION,
    TARGET_TYPES,
)

MAX_NOTE_CHARS: Final = 10_000
MAX_CLASS_CHARS: Final = 64
_CLASS_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


class MetaError(AgentlogError):
    """A correction or retraction that cannot be written (the message says why)."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage
        """True for a bad value (a usage error), False for a target that is not there or not allowed."""


@dataclass
class MetaEvent:
    """A correction or retraction, built and (unless a dry run) appended."""

    event: dict[str, Any]
    """The wire-form event."""
    target_type: str
    target: str
    """The target's display id."""
    before: dict[str, Any] = field(default_factory=dict)
    """What the projection said about the target before this event."""
    written: bool = False

    @property
    def event_id(self) -> str:
        return str(self.event["event_id"])

    def to_dict(self) -> dict[str, Any]:
        from agentlog.query.views import iso
        from agentlog.projection.ids import display

        ev = self.event
        return {
            "event_id": display("event", self.event_id), "written": self.written, "kind": ev["kind"],
            "target_type": self.target_type, "target": self.target, "attrs": ev.get("attrs", {}),
            "note": (ev.get("content") or {}).get("note"), "observed_at": iso(ev["observed_at"]),
            "capture_mode": ev["capture_mode"], "before": self.before,
        }


def _invalid(message: str) -> MetaError:
    return MetaError(message, usage=True)


def _check_choice(value: str | None, choices: tuple[str, ...], what: str) -> None:
    if value not in choices:
        raise _invalid(f"{what} must be one of {', '.join(choices)}, not {value!r}")


def _check_note(note: str | None, what: str = "note") -> str | None:
    if note is None:
        return None
    text = note.strip()
    if not text:
        raise _invalid(f"the {what} is empty")
    if len(text) > MAX_NOTE_CHARS:
        raise _invalid(f"the {what} is {len(text)} characters; at most {MAX_NOTE_CHARS}")
    return text


def _settings(root: str) -> dict[str, Any]:
    from agentlog.core.config import ConfigError, load

    try:
        return load(root)
    except ConfigError as e:
        raise MetaError(f"cannot read the settings: {e}") from None


def _open(root: str, engine: Any) -> tuple[Any, bool]:
    if engine is not None:
        return engine, False
    from agentlog.operations.refresh import open_current

    eng, _ = open_current(root)
    return eng, True


def _resolve(engine: Any, target: str, kinds: list[str]) -> Any:
    from agentlog.query.views import BadId, IdError, resolve_id

    try:
        return resolve_id(engine, target, kinds)
    except BadId as e:
        raise _invalid(str(e)) from None
    except IdError as e:
        raise MetaError(str(e)) from None


def _event(kind: str, name: str, attrs: dict[str, Any], note: str | None, settings: dict[str, Any],
           at_us: int | None) -> dict[str, Any]:
    from agentlog.core.ids import uuid7

    now = time.time_ns() // 1000
    mode = settings["capture_mode"]
    attrs = {k: v for k, v in attrs.items() if v is not None}
    content: dict[str, Any] | None = None
    if note is not None:
        attrs["note_chars"] = len(note)
        if mode != "metadata_only":
            text = note
            if settings["redact_secrets"]:
                from agentlog.capture.redact import redact_text

                text, counts = redact_text(note)
                if counts:
                    attrs["redactions"] = sum(counts.values())
                    attrs["redacted"] = counts
            content = {"note": text}
    event: dict[str, Any] = {
        "event_id": uuid7(now // 1000),
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "provider": META_PROVIDER,
        "provider_event_name": name,
        "observed_at": now if at_us is None else int(at_us),
        "captured_at": now,
        "capture_mode": mode,
        "agentlog_version": __version__,
        "provider_session_id": META_SESSION,
        "attrs": attrs,
    }
    if content is not None:
        event["content"] = content
    from agentlog.core.model import Event, ModelError

    try:
        Event.from_wire(event)
    except ModelError as e:  # pragma: no cover - a bug here, not a person's mistake
        raise MetaError(f"internal error: the {kind} does not match the event model: {e}") from None
    return event


def append_meta(root: str, event: dict[str, Any], settings: dict[str, Any] | None = None) -> None:
    """Append one correction or retraction to the ``agentlog``/``meta`` log."""
    from agentlog.core.fastjson import dumps_bytes
    from agentlog.log.writer import open_session_log

    settings = settings or _settings(root)
    log = open_session_log(root, META_PROVIDER, META_SESSION, durability=settings["durability"],
                           capture_mode=event["capture_mode"])
    log.append([dumps_bytes(event)])


def _one(engine: Any, sql: str, ident: str) -> dict[str, Any]:
    res = engine.run(sql, [ident])
    return dict(zip(res.columns, res.rows[0])) if res.rows else {}


def record_correction(root: str, *, correction_type: str, target: str, outcome: str | None = None,
                      failure_class: str | None = None, note: str | None = None, at_us: int | None = None,
                      dry_run: bool = False, engine: Any = None) -> MetaEvent:
    """Check, build and (unless ``dry_run``) append a correction; what was written.

    ``attempt_outcome`` needs ``outcome`` (``failure_class`` optional, only with
    a failure); ``attempt_note`` needs ``note``; ``turn_objective`` takes the new
    objective as ``note``. ``engine`` (optional) is an open engine over the
    current projection; without one the store is brought up to date first."""
    _check_choice(correction_type, CORRECTION_TYPES, "correction type")
    note = _check_note(note, "objective" if correction_type == "turn_objective" else "note")
    if correction_type == "attempt_outcome":
        _check_choice(outcome, OUTCOMES, "outcome")
        if failure_class is not None:
            if outcome == "succeeded":
                raise _invalid("a failure class goes with a failed, superseded or abandoned outcome, not succeeded")
            if not failure_class or len(failure_class) > MAX_CLASS_CHARS or not _CLASS_CHARS.issuperset(failure_class):
                raise _invalid(f"a failure class is a short token of a-z, 0-9 and _ (like string_mismatch), "
                               f"not {failure_class!r}")
    else:
        if outcome is not None or failure_class is not None:
            raise _invalid(f"a {correction_type} correction takes no outcome or failure class")
        if note is None:
            raise _invalid("an objective correction needs the new objective" if correction_type == "turn_objective"
                           else "a note correction needs the note")
    kind = "turn" if correction_type == "turn_objective" else "attempt"
    settings = _settings(root)
    eng, opened = _open(root, engine)
    try:
        ref = _resolve(eng, target, [kind])
        if kind == "attempt":
            before = _one(eng, "SELECT outcome, failure_class, inferred_outcome, inferred_failure_class, note, "
                               "corrected_by, retracted FROM attempts WHERE attempt_id = ?", ref.id)
        else:
            before = _one(eng, "SELECT objective, inferred_objective, corrected_by, retracted FROM turns "
                               "WHERE turn_id = ?", ref.id)
    finally:
        if opened:
            eng.close()
    if before.pop("retracted", False):
        raise MetaError(f"{ref.display} is retracted; a correction would not apply")
    if before.get("corrected_by"):
        before["corrected_by"] = "ev_" + str(before["corrected_by"])
    attrs = {"correction_type": correction_type, "target": ref.display, "outcome": outcome,
             "failure_class": failure_class}
    event = _event("correction", "Correction", attrs, note, settings, at_us)
    out = MetaEvent(event, kind, ref.display, before)
    if not dry_run:
        append_meta(root, event, settings)
        out.written = True
    return out


def record_retraction(root: str, *, target_type: str | None, target: str, reason: str, note: str | None = None,
                      at_us: int | None = None, dry_run: bool = False, engine: Any = None) -> MetaEvent:
    """Check, build and (unless ``dry_run``) append a retraction; what was written.

    ``target_type`` None: the type the id names (its prefix, else the one
    entity among sessions, events and attempts it matches)."""
    if target_type is not None:
        _check_choice(target_type, TARGET_TYPES, "target type")
    _check_choice(reason, REASONS, "reason")
    note = _check_note(note)
    settings = _settings(root)
    eng, opened = _open(root, engine)
    try:
        ref = _resolve(eng, target, [target_type] if target_type else list(TARGET_TYPES))
        before: dict[str, Any] = {}
        if ref.kind == "session":
            before = _one(eng, "SELECT provider, provider_session_id, project_name, turn_count, event_count, "
                               "retracted FROM sessions WHERE session_id = ?", ref.id)
        elif ref.kind == "attempt":
            before = _one(eng, "SELECT outcome, approach, superseded_by, supersedes, retracted FROM attempts "
                               "WHERE attempt_id = ?", ref.id)
        else:
            before = _one(eng, "SELECT kind, provider, tool_name FROM events WHERE event_id = ?", ref.id)
            if before.get("kind") in ("correction", "retraction"):
                raise MetaError(f"{ref.display} is a {before['kind']}; corrections and retractions cannot be retracted")
            gone = eng.run("SELECT 1 FROM retractions WHERE target_type = 'event' AND target = ? LIMIT 1", [ref.id])
            before["retracted"] = bool(gone.rows)
    finally:
        if opened:
            eng.close()
    if before.pop("retracted", False):
        raise MetaError(f"{ref.display} is already retracted")
    for k in ("superseded_by", "supersedes"):
        if before.get(k):
            before[k] = "att_" + str(before[k])
    attrs = {"target_type": ref.kind, "target": ref.display, "reason": reason}
    event = _event("retraction", "Retraction", attrs, note, settings, at_us)
    out = MetaEvent(event, ref.kind, ref.display, before)
    if not dry_run:
        append_meta(root, event, settings)
        out.written = True
    return out


def write_correction(root: str, *, correction_type: str, target: str, outcome: str | None = None,
                     failure_class: str | None = None, note: str | None = None, at_us: int | None = None) -> str:
    """Append a correction (see :func:`record_correction`); its event id."""
    return record_correction(root, correction_type=correction_type, target=target, outcome=outcome,
                             failure_class=failure_class, note=note, at_us=at_us).event_id


def write_retraction(root: str, *, target_type: str | None, target: str, reason: str, note: str | None = None,
                     at_us: int | None = None) -> str:
    """Append a retraction (see :func:`record_retraction`); its event id."""
    return record_retraction(root, target_type=target_type, target=target, reason=reason, note=note,
                             at_us=at_us).event_id


__all__ = [
    "CORRECTION_TYPES", "META_PROVIDER", "META_SESSION", "MetaError", "MetaEvent", "OUTCOMES", "REASONS",
    "TARGET_TYPES", "append_meta", "record_correction", "record_retraction", "write_correction",
    "write_retraction",
]
