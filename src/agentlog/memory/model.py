"""What a memory is: kinds and their typed attributes, slugs, tags, evidence, links,
lifetime, visibility — and the rules that validate each (pure, no storage).

Kinds are engram's twelve (so an engram export imports losslessly) plus four
for code work: ``decision``, ``convention``, ``procedure``, ``pitfall``.
Unlike engram, which checks attribute *names* only, every attribute is checked
for its type and, where it has one, its closed vocabulary; a bad value is
refused with a message that names the kind, the attribute and what was
expected.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from agentlog.core import UsageError

KINDS: Final = ("fact", "preference", "person", "organization", "project", "skill", "goal", "contact", "event",
                "location", "asset", "relationship", "decision", "convention", "procedure", "pitfall")

LINK_RELATIONS: Final = ("about", "involves", "part_of", "owned_by", "works_at", "located_in", "relates_to",
                         "supersedes", "derived_from", "contradicts")
LIFETIMES: Final = ("permanent", "standard", "until", "ephemeral")
VISIBILITIES: Final = ("shared", "private", "restricted")
EVIDENCE_TYPES: Final = ("event", "attempt", "session", "tool_call", "file", "url", "quote",
                         # engram's, kept so its exports import losslessly
                         "uri", "conversation", "document", "observation")
#: evidence that names something recorded (checked to exist when it is added)
RECORDED_EVIDENCE: Final = ("event", "attempt", "session", "tool_call")

SLUG_RE: Final = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
SLUG_MAX: Final = 80
TITLE_MAX: Final = 500


class InvalidMemory(UsageError, ValueError):
    """A memory, attribute, evidence or link that breaks a rule (the message says which)."""


@dataclass(frozen=True)
class Attr:
    """One attribute of a kind: its type (``str``, ``text``, ``float01``, ``number``,
    ``bool``, ``time``, ``date``, ``uuid``, ``list``) and closed vocabulary, if any."""

    name: str
    type: str = "str"
    required: bool = False
    choices: tuple[str, ...] = ()


def _a(name: str, type: str = "str", required: bool = False, *choices: str) -> Attr:
    return Attr(name, type, required, tuple(choices))


#: the attribute schema of each kind (version 1)
SCHEMAS: Final[dict[str, tuple[Attr, ...]]] = {
    "fact": (_a("statement", "text", True),),
    "preference": (_a("polarity", "str", True, "likes", "dislikes", "wants", "avoids", "prefers"),
                   _a("strength", "float01"), _a("context", "text")),
    "person": (_a("full_name", "str", True), _a("aliases", "list"), _a("roles", "list"), _a("notes", "text")),
    "organization": (_a("name", "str", True), _a("aliases", "list"),
                     _a("org_type", "str", False, "company", "team", "community", "institution", "other"),
                     _a("url")),
    "project": (_a("name", "str", True), _a("status", "str", True, "idea", "active", "paused", "done", "abandoned"),
                _a("summary", "text"), _a("target_date", "date")),
    "skill": (_a("name", "str", True), _a("proficiency", "str", False, "novice", "competent", "proficient", "expert"),
              _a("last_used_at", "time")),
    "goal": (_a("statement", "text", True), _a("status", "str", True, "active", "achieved", "dropped"),
             _a("horizon", "str", False, "short", "medium", "long"), _a("target_date", "date")),
    "contact": (_a("channel", "str", True, "email", "phone", "handle", "address", "other"), _a("value", "str", True),
                _a("label"), _a("preferred", "bool")),
    "event": (_a("occurred_at", "time", True), _a("end_at", "time"), _a("outcome", "text")),
    "location": (_a("name", "str", True), _a("address", "text"), _a("latitude", "number"), _a("longitude", "number"),
                 _a("location_type", "str", False, "home", "work", "city", "venue", "other")),
    "asset": (_a("asset_type", "str", True, "file", "document", "device", "account", "domain", "repository", "other"),
              _a("uri"), _a("identifier"), _a("notes", "text")),
    "relationship": (_a("subject_id", "uuid", True), _a("predicate", "str", True), _a("object_id", "uuid", True),
                     _a("since", "time"), _a("until", "time")),
    # code work
    "decision": (_a("chosen", "text", True), _a("alternatives", "list"), _a("rationale", "text"),
                 _a("status", "str", False, "proposed", "accepted", "superseded", "reverted"),
                 _a("decided_at", "time")),
    "convention": (_a("rule", "text", True), _a("scope", "str"), _a("paths", "list"), _a("rationale", "text")),
    "procedure": (_a("goal", "text", True), _a("steps", "list", True), _a("command", "text"),
                  _a("verified_at", "time")),
    "pitfall": (_a("symptom", "text", True), _a("cause", "text"), _a("avoid", "text", True), _a("paths", "list"),
                _a("failure_class", "str")),
}


MAIN_ATTRIBUTE: Final[dict[str, str]] = {
    "fact": "statement", "goal": "statement", "decision": "chosen", "convention": "rule", "pitfall": "symptom",
    "procedure": "goal", "person": "full_name", "organization": "name", "project": "name", "skill": "name",
    "location": "name",
}
"""The attribute a kind's title or content usually says (``memory add fact "uv is the tool"``)."""


def with_main_attribute(kind: str, title: str, content: str, attributes: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``attributes`` with the kind's main attribute taken from the content (else the title)
    when it is missing, and a note saying so (None when nothing was filled)."""
    name = MAIN_ATTRIBUTE.get(kind)
    if name is None or attributes.get(name) is not None:
        return attributes, None
    source, text = ("content", content) if content and content.strip() else ("title", title)
    if not text or not text.strip():
        return attributes, None
    value = text.strip() if source == "title" else text
    if len(value) > 2000:
        value = value[:2000]
    return {**attributes, name: value}, f"{kind}.{name} was not given: taken from the {source}"


def _check_value(kind: str, attr: Attr, value: Any) -> Any:
    where = f"{kind}.{attr.name}"
    t = attr.type
    if t in ("str", "text"):
        if not isinstance(value, str) or not value.strip():
            raise InvalidMemory(f"{where} must be a non-empty string, not {value!r}")
        value = value.strip() if t == "str" else value
        if attr.choices and value not in attr.choices:
            raise InvalidMemory(f"{where} must be one of {', '.join(attr.choices)}, not {value!r}")
        return value
    if t == "float01":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise InvalidMemory(f"{where} must be a number from 0 to 1, not {value!r}")
        return float(value)
    if t == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise InvalidMemory(f"{where} must be a number, not {value!r}")
        return value
    if t == "bool":
        if not isinstance(value, bool):
            raise InvalidMemory(f"{where} must be true or false, not {value!r}")
        return value
    if t in ("time", "date"):
        if not isinstance(value, str):
            raise InvalidMemory(f"{where} must be an ISO 8601 {t}, not {value!r}")
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidMemory(f"{where} must be an ISO 8601 {t}, not {value!r}") from None
        return value
    if t == "uuid":
        try:
            return str(uuid.UUID(str(value)))
        except ValueError:
            raise InvalidMemory(f"{where} must be a UUID, not {value!r}") from None
    if t == "list":
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise InvalidMemory(f"{where} must be a list of non-empty strings, not {value!r}")
        return [v.strip() for v in value]
    raise AssertionError(f"unknown attribute type {t}")  # pragma: no cover


RELATIONSHIP_ENDS: Final = ("subject_id", "object_id")
"""The attributes of a ``relationship`` that name memories (checked to exist where it is made)."""


def relationship_ends(kind: str, attributes: dict[str, Any]) -> list[tuple[str, str]]:
    """(attribute, memory id) for each memory a relationship's attributes name; none for
    another kind."""
    if kind != "relationship":
        return []
    return [(k, str(attributes[k])) for k in RELATIONSHIP_ENDS if attributes.get(k) is not None]


def validate_attributes(kind: str, attributes: dict[str, Any]) -> dict[str, Any]:
    """``attributes`` checked against ``kind``'s schema, normalised, in schema order.
    Raises :class:`InvalidMemory` naming the first problem."""
    if kind not in SCHEMAS:
        raise InvalidMemory(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
    schema = SCHEMAS[kind]
    names = {a.name for a in schema}
    unknown = sorted(set(attributes) - names)
    if unknown:
        raise InvalidMemory(f"{kind} has no attribute {unknown[0]!r} (it has {', '.join(a.name for a in schema)})")
    out: dict[str, Any] = {}
    for attr in schema:
        value = attributes.get(attr.name)
        if value is None:
            if attr.required:
                raise InvalidMemory(f"{kind}.{attr.name} is required")
            continue
        out[attr.name] = _check_value(kind, attr, value)
    return out


def parse_attribute(kind: str, name: str, text: str) -> Any:
    """A value typed on a command line (``--attr name=value``) as the schema wants it."""
    schema = {a.name: a for a in SCHEMAS.get(kind, ())}
    attr = schema.get(name)
    if attr is None:
        raise InvalidMemory(f"{kind} has no attribute {name!r}")
    if attr.type in ("float01", "number"):
        try:
            return float(text)
        except ValueError:
            raise InvalidMemory(f"{kind}.{name} must be a number, not {text!r}") from None
    if attr.type == "bool":
        low = text.strip().lower()
        if low not in ("true", "false", "yes", "no", "1", "0"):
            raise InvalidMemory(f"{kind}.{name} must be true or false, not {text!r}")
        return low in ("true", "yes", "1")
    if attr.type == "list":
        return [p.strip() for p in text.split(",") if p.strip()]
    return text


def validate_title(title: Any) -> str:
    if not isinstance(title, str) or not title.strip():
        raise InvalidMemory("a memory needs a title")
    text: str = title.strip()
    if len(text) > TITLE_MAX:
        raise InvalidMemory(f"a title is at most {TITLE_MAX} characters ({len(text)} given)")
    return text


def slugify(title: str, memory_id: str) -> str:
    """The slug a memory gets when none is given: its title in lower case, runs of
    anything but letters and digits as ``-``, then ``-`` and the first 8 hex digits
    of its id. Those digits are a UUIDv7's time (the same for about 65 s), so two
    memories of one title can get the same: the writer makes it unique
    (:func:`agentlog.memory.service.free_slug`)."""
    tail = memory_id.replace("-", "")[:8].lower()
    base = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    base = base[: SLUG_MAX - len(tail) - 1].strip("-")
    return f"{base}-{tail}" if base else tail


def suffixed(slug: str, n: int) -> str:
    """``slug`` with ``-n`` at its end (cut to fit :data:`SLUG_MAX`): what tells a memory's
    slug from another memory's equal one."""
    tail = f"-{n}"
    return slug[: SLUG_MAX - len(tail)].rstrip("-") + tail


def validate_slug(slug: Any) -> str:
    if not isinstance(slug, str) or not SLUG_RE.fullmatch(slug) or len(slug) > SLUG_MAX:
        raise InvalidMemory(f"a slug is lower-case letters and digits joined by single '-', at most {SLUG_MAX} "
                           f"characters, not {slug!r}")
    return slug


def normalize_tags(tags: Any) -> list[str]:
    """Stripped, lower-cased, empties dropped, duplicates dropped (order kept)."""
    if tags is None:
        return []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InvalidMemory(f"tags must be a list of strings, not {tags!r}")
    out: dict[str, None] = {}
    for t in tags:
        t = t.strip().lower()
        if t:
            out[t] = None
    return list(out)


def validate_evidence(ref: Any) -> dict[str, Any]:
    """One evidence reference, normalised: ``{"type", "value", …}``. Recorded things
    (event, attempt, session, tool_call) are ids — that they exist is checked by the
    caller against the store; a file has ``path`` and optional ``line_start``,
    ``line_end``, ``commit``; a url a URL; a quote its text."""
    if not isinstance(ref, dict):
        raise InvalidMemory(f"evidence must be an object, not {ref!r}")
    etype = ref.get("type")
    if etype not in EVIDENCE_TYPES:
        raise InvalidMemory(f"evidence type must be one of {', '.join(EVIDENCE_TYPES)}, not {etype!r}")
    out: dict[str, Any] = {"type": etype}
    note = ref.get("note")
    if etype == "file":
        path = ref.get("path") or ref.get("value")
        if not isinstance(path, str) or not path.strip():
            raise InvalidMemory("file evidence needs a path")
        out["value"] = path.strip()
        lines = [ref.get("line_start"), ref.get("line_end")]
        for name, n in zip(("line_start", "line_end"), lines):
            if n is not None:
                if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                    raise InvalidMemory(f"file evidence {name} must be a line number ≥ 1, not {n!r}")
                out[name] = n
        if "line_start" in out and "line_end" in out and out["line_end"] < out["line_start"]:
            raise InvalidMemory("file evidence line_end is before line_start")
        commit = ref.get("commit")
        if commit is not None:
            if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{7,64}", commit):
                raise InvalidMemory(f"file evidence commit must be a hex commit id, not {commit!r}")
            out["commit"] = commit
    else:
        value = ref.get("value")
        if not isinstance(value, str) or not value.strip():
            raise InvalidMemory(f"{etype} evidence needs a value")
        value = value.strip()
        if etype == "url" and not re.match(r"^[a-z][a-z0-9+.-]*://\S+$", value, re.I):
            raise InvalidMemory(f"url evidence must be a URL, not {value!r}")
        out["value"] = value
    if note is not None:
        if not isinstance(note, str):
            raise InvalidMemory("an evidence note must be text")
        out["note"] = note
    return out


def validate_link(relation: Any, source_id: str, target_id: str) -> str:
    if relation not in LINK_RELATIONS:
        raise InvalidMemory(f"a link relation is one of {', '.join(LINK_RELATIONS)}, not {relation!r}")
    if source_id == target_id:
        raise InvalidMemory("a memory cannot link to itself")
    return str(relation)


def validate_lifetime(policy: Any, until: Any = None) -> dict[str, Any]:
    if policy not in LIFETIMES:
        raise InvalidMemory(f"lifetime is one of {', '.join(LIFETIMES)}, not {policy!r}")
    if (policy == "until") != (until is not None):
        raise InvalidMemory("an 'until' lifetime needs an until time, and only it has one")
    if until is not None:
        _check_value("lifetime", Attr("until", "time"), until)
    return {"policy": policy, "until": until}


def validate_visibility(visibility: Any, allowed_actors: Any = None) -> dict[str, Any]:
    if visibility not in VISIBILITIES:
        raise InvalidMemory(f"visibility is one of {', '.join(VISIBILITIES)}, not {visibility!r}")
    if allowed_actors is not None and visibility != "restricted":
        raise InvalidMemory("allowed actors go only with 'restricted' visibility")
    actors = normalize_tags(allowed_actors) if allowed_actors is not None else []
    return {"visibility": visibility, "allowed_actors": actors}
