"""The batch pre-check before the redactor: never a false "no", on plain text and on JSON text."""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_redact import CANARY_RULES, FRAGMENTS, canaries

from agentlog.capture.redact import RULES, redact_text, redact_value
from agentlog.capture.secret_gate import might_hold_secrets, redact_serialized

# control characters and escapes that JSON writes differently, next to the rules' own pieces
GATE_FRAGMENTS = st.one_of(FRAGMENTS, st.sampled_from(["\x01", "\x0b", "\x1f", "\r", "\t", "\\n", "\\t", "/", "\\/"]))
GATE_TRICKY = st.lists(GATE_FRAGMENTS, max_size=40).map("".join)


def found(text: str) -> bool:
    return bool(redact_text(text)[1])


def test_every_rule_has_a_canary_here() -> None:
    assert CANARY_RULES == set(RULES)


@pytest.mark.parametrize("seed", range(30))
def test_every_canary_is_flagged_plain_and_as_json(seed: int) -> None:
    rng = random.Random(seed)
    items = canaries(rng)
    plain = [text for _, text, _ in items]
    assert all(found(t) for t in plain)
    assert all(might_hold_secrets(plain))
    assert all(might_hold_secrets([orjson.dumps({"k": [t]}) for t in plain]))


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(GATE_TRICKY, st.text(max_size=80)), min_size=1, max_size=8))
def test_never_a_false_no(texts: list[str]) -> None:
    """Whatever the redactor finds, the gate flags — the text itself, and the JSON of a value holding it."""
    flags = might_hold_secrets(texts)
    for text, flag in zip(texts, flags, strict=True):
        if found(text):
            assert flag, text
            try:
                blob = orjson.dumps({"content": {"output": text}, "raw": {"line": text}})
            except TypeError:
                continue  # a lone surrogate: redact_serialized never asks the gate
            assert might_hold_secrets([blob]) == [True], text


def test_plain_transcript_lines_are_not_flagged() -> None:
    lines = [
        '{"type":"assistant","message":{"usage":{"input_tokens":12,"output_tokens":5}}}',
        "def parse_config(path: str) -> dict:\n    return json.load(open(path))",
        "git status && git diff --stat",
        "https://example.com/docs/a?b=c#d",
    ]
    assert might_hold_secrets(lines) == [False] * len(lines)


def test_lone_surrogates_and_empty_batches() -> None:
    assert might_hold_secrets([]) == []
    assert might_hold_secrets(["ok text here", "x\ud800 password=hunter22", "plain"]) == [False, True, False]


def test_redact_serialized_redacts_only_what_holds_a_secret_and_counts() -> None:
    secret = "ghp_" + "a" * 36
    events = [
        {"kind": "tool_call_finished", "attrs": {}, "content": {"output": "nothing to see"}, "raw": {"line": "{}"}},
        {"kind": "tool_call_finished", "attrs": {}, "content": {"command": f"export GITHUB_TOKEN={secret}"},
         "raw": {"line": orjson.dumps({"input": {"command": f"export GITHUB_TOKEN={secret}"}}).decode()}},
        {"kind": "prompt_submitted", "attrs": {}, "content": {"prompt": "pw \ud800 password=hunter22x"}},
    ]
    first = events[0]["content"]
    blobs = redact_serialized(events)
    assert events[0]["content"] is first and "redactions" not in events[0]["attrs"]
    assert secret.encode() not in blobs[1] and b"[REDACTED:github_token]" in blobs[1]
    assert events[1]["attrs"]["redacted"] == {"github_token": 2}
    assert b"hunter22x" not in blobs[2] and events[2]["attrs"]["redactions"] == 1
    assert orjson.loads(blobs[0]) == events[0] and orjson.loads(blobs[1]) == events[1]
    # the same result as running the redactor on everything
    again = [{"content": redact_value(e.get("content"))[0]} for e in events]
    assert [e.get("content") for e in events] == [a["content"] for a in again]


GATE_TEXT = st.one_of(GATE_TRICKY, st.text(max_size=40))
GATE_VALUE = st.recursive(
    GATE_TEXT | st.integers() | st.none(),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["content", "raw", "line", "k", "token", "password"]), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def wire_events(draw: st.DrawFn) -> dict[str, object]:
    """Events whose keys come in any order, with or without content and raw, and keys
    named content or raw nested anywhere (before, inside and after the top-level ones)."""
    values: dict[str, object] = {
        "event_id": draw(GATE_TEXT), "attrs": {"source_file": draw(GATE_TEXT), "x": draw(GATE_VALUE)},
        "tool": draw(GATE_VALUE), "content": draw(GATE_VALUE), "raw": {"line": draw(GATE_TEXT)},
    }
    keys = [k for k in draw(st.permutations(list(values))) if k == "attrs" or draw(st.booleans())]
    return {k: values[k] for k in keys}


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(wire_events(), min_size=1, max_size=6))
def test_redact_serialized_gating_a_part_redacts_what_redacting_everything_does(
        events: list[dict[str, object]]) -> None:
    """The gate reads only the serialised events' content and raw: whatever the redactor
    would change there is still redacted, wherever the keys are."""
    import copy

    from agentlog.capture.redact import redact_into

    expected = []
    for ev in copy.deepcopy(events):
        attrs = ev["attrs"]
        assert isinstance(attrs, dict)
        for field, clean in zip(("content", "raw"), redact_into(attrs, ev.get("content"), ev.get("raw")),
                                strict=True):
            if clean is not None:
                ev[field] = clean
        try:
            expected.append(orjson.dumps(ev))
        except TypeError:
            expected.append(None)
    got = redact_serialized(events)
    for blob, want in zip(got, expected, strict=True):
        if want is not None:
            assert blob == want


SECRET = "ghp_" + "b" * 36


@pytest.mark.parametrize("event", [
    # content first, a nested content key after the secret
    {"content": {"a": SECRET, "b": {"z": 1, "content": "x"}}, "attrs": {}},
    # raw first, content after it
    {"raw": {"line": SECRET}, "attrs": {}, "content": {"content": "plain text"}},
    # a nested content key before the top-level content (in attrs), the secret in raw
    {"attrs": {"content": "plain"}, "content": {"message": "plain text"}, "raw": {"line": f"x {SECRET}"}},
    # the secret in content behind a nested raw key, raw last
    {"attrs": {}, "content": {"k": [SECRET], "raw": "plain text"}, "raw": {"line": "{}"}},
    # raw first, a nested raw key after the secret in it, content after
    {"raw": {"line": SECRET, "z": {"a": 1, "raw": "x"}}, "content": {"m": "plain text"}},
    # only raw, as its only key
    {"raw": {"line": SECRET}},
])
def test_redact_serialized_finds_the_fields_wherever_their_keys_are(event: dict[str, object]) -> None:
    blob = redact_serialized([event])[0]
    assert SECRET.encode() not in blob and b"[REDACTED:github_token]" in blob


def test_redact_serialized_does_not_gate_events_without_content_or_raw() -> None:
    events: list[dict[str, object]] = [{"attrs": {"note": SECRET}, "content": {}}, {"tool": {"input": SECRET}}]
    assert [orjson.loads(b) for b in redact_serialized(events)] == events  # the redactor never reads those fields


def _first_key_start(ev: dict[str, object], blob: bytes, marks: list[tuple[str, bytes]]) -> int:
    """The part's start as first written: every field's key searched through the whole blob."""
    start = len(blob)
    for field, mark in marks:
        if ev.get(field):
            at = blob.find(mark)
            if at < 0 or blob.startswith(mark[1:], 1):
                return 0
            start = min(start, at)
    return start if start < len(blob) else -1


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(wire_events())
def test_the_part_found_with_bounded_searches_is_the_part_found_searching_everything(
        event: dict[str, object]) -> None:
    """A field's key is looked for only before the earliest key found so far: the same start."""
    from agentlog.capture.secret_gate import _redactable_start

    marks = [(field, b"," + orjson.dumps(field) + b":") for field in ("content", "raw")]
    try:
        blob = orjson.dumps(event)
    except TypeError:
        return
    assert _redactable_start(event, blob, marks) == _first_key_start(event, blob, marks)
