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
