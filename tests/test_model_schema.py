"""The event model, its generated JSON Schema, ids and fast JSON."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, strategies as st

from agentlog.core import fastjson, ids, schema
from agentlog.core.kinds import EVENT_KINDS
from agentlog.core.model import Event, ModelError

from conftest import REPO


def minimal(**kw: object) -> dict:
    ev = {
        "event_id": ids.uuid7(),
        "schema_version": 1,
        "kind": "tool_call_finished",
        "provider": "claude_code",
        "provider_event_name": "PostToolUse",
        "observed_at": 1_790_000_000_000_000,
        "captured_at": 1_790_000_000_000_000,
        "capture_mode": "full",
        "agentlog_version": "0.1.0",
    }
    ev.update(kw)
    return ev


def test_committed_schema_is_generated_from_the_model() -> None:
    committed = (REPO / "docs" / "event.schema.json").read_text()
    assert committed == schema.render(), "run: python -m agentlog.core.schema > docs/event.schema.json"


def test_schema_covers_every_kind() -> None:
    assert schema.event_schema()["properties"]["kind"]["enum"] == list(EVENT_KINDS)
    assert len(EVENT_KINDS) >= 27


def test_full_event_round_trips_and_validates() -> None:
    wire = minimal(
        provider_session_id="s",
        provider_turn_id="t",
        agent={"agent_id": "a1", "agent_type": "Explore"},
        tool={"name": "Bash", "category": "shell", "call_id": "toolu_1"},
        paths=["src/x.py"],
        outcome={"status": "failure", "class": "nonzero_exit", "exit_code": 2},
        duration_ms=12,
        project={"root": "/r", "name": "r", "branch": "main"},
        attrs={"command_category": "test"},
        content={"command": "pytest"},
        raw={"a": [1, {"b": None}]},
    )
    ev = Event.from_wire(wire)
    assert ev.outcome is not None and ev.outcome.failure_class == "nonzero_exit"
    assert ev.to_wire() == wire
    jsonschema.validate(wire, schema.event_schema())


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "made_up"},
        {"tool": {"name": "x", "category": "nope"}},
        {"outcome": {"status": "fine"}},
        {"observed_at": "yesterday"},
        {"surprise": 1},
        {"agent": {"agent_id": 3}},
    ],
)
def test_from_wire_is_strict(bad: dict) -> None:
    with pytest.raises(ModelError):
        Event.from_wire(minimal(**bad))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(minimal(**bad), schema.event_schema())


def test_uuid7_layout_and_order() -> None:
    a = ids.uuid7(1_700_000_000_000)
    b = ids.uuid7(1_700_000_000_001)
    assert a[14] == "7" and a[19] in "89ab"
    assert ids.uuid7_time_ms(a) == 1_700_000_000_000
    assert a < b
    assert len({ids.uuid7(5) for _ in range(1000)}) == 1000


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=30,
)


@given(json_values)
def test_fastjson_matches_stdlib(value: object) -> None:
    text = fastjson.dumps(value) if _encodable(value) else None
    if text is not None:
        assert text == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        assert fastjson.loads(text) == json.loads(text)
    data = fastjson.dumps_bytes(value)
    assert json.loads(data) == value


def _encodable(value: object) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


@pytest.mark.parametrize("text", ["", "{", "[1,]", "NaN", "{} x", "Infinity", "[1] [2]"])
def test_fastjson_rejects(text: str) -> None:
    with pytest.raises(fastjson.DecodeError):
        fastjson.loads(text)
