"""The memory model's rules: kinds and typed attributes, slugs, tags, evidence,
links, lifetime, visibility; confidence priors, updates, decay and staleness."""

from __future__ import annotations

import math
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentlog.memory import confidence as conf
from agentlog.memory.model import (
    KINDS,
    SCHEMAS,
    InvalidMemory,
    normalize_tags,
    parse_attribute,
    slugify,
    validate_attributes,
    validate_evidence,
    validate_lifetime,
    validate_link,
    validate_slug,
    validate_title,
    validate_visibility,
)

DAY = conf.US_PER_DAY


def test_every_engram_kind_and_the_code_kinds() -> None:
    engram = {"fact", "preference", "person", "organization", "project", "skill", "goal", "contact", "event",
              "location", "asset", "relationship"}
    assert engram | {"decision", "convention", "procedure", "pitfall"} == set(KINDS) == set(SCHEMAS)
    assert set(conf.DECAY) == set(KINDS)


@pytest.mark.parametrize(("kind", "attrs", "message"), [
    ("fact", {}, "fact.statement is required"),
    ("fact", {"statement": "x", "color": "red"}, "fact has no attribute 'color'"),
    ("project", {"name": "agentlog", "status": "bogus"}, "project.status must be one of"),
    ("preference", {"polarity": "likes", "strength": 1.5}, "preference.strength must be a number from 0 to 1"),
    ("preference", {"polarity": "likes", "strength": True}, "preference.strength must be a number from 0 to 1"),
    ("contact", {"channel": "email", "value": "a@b", "preferred": "yes"}, "contact.preferred must be true or false"),
    ("event", {"occurred_at": "yesterday"}, "event.occurred_at must be an ISO 8601 time"),
    ("relationship", {"subject_id": "nope", "predicate": "knows", "object_id": str(uuid.uuid4())},
     "relationship.subject_id must be a UUID"),
    ("procedure", {"goal": "run the tests", "steps": "./scripts/test.sh"}, "procedure.steps must be a list"),
    ("pitfall", {"symptom": "   ", "avoid": "x"}, "pitfall.symptom must be a non-empty string"),
    ("nonsense", {}, "unknown kind 'nonsense'"),
])
def test_bad_attributes_are_refused_with_what_was_expected(kind: str, attrs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidMemory, match=message.replace(".", r"\.").replace("(", r"\(")):
        validate_attributes(kind, attrs)


def test_good_attributes_come_back_normalised_in_schema_order() -> None:
    assert validate_attributes("project", {"status": "active", "name": "  agentlog "}) == \
        {"name": "agentlog", "status": "active"}
    assert validate_attributes("procedure", {"steps": [" ./scripts/test.sh "], "goal": "run the tests"}) == \
        {"goal": "run the tests", "steps": ["./scripts/test.sh"]}
    sid = uuid.uuid4()
    got = validate_attributes("relationship", {"subject_id": str(sid).upper(), "predicate": "knows",
                                               "object_id": str(sid)})
    assert got["subject_id"] == str(sid)
    assert validate_attributes("preference", {"polarity": "likes", "strength": 1}) == \
        {"polarity": "likes", "strength": 1.0}


def test_command_line_values_are_typed_by_the_schema() -> None:
    assert parse_attribute("preference", "strength", "0.5") == 0.5
    assert parse_attribute("contact", "preferred", "yes") is True
    assert parse_attribute("procedure", "steps", "a, b ,c") == ["a", "b", "c"]
    with pytest.raises(InvalidMemory):
        parse_attribute("contact", "preferred", "maybe")
    with pytest.raises(InvalidMemory):
        parse_attribute("fact", "nope", "x")


def test_slugs_titles_tags() -> None:
    mid = "0190a8f0-1234-7000-8000-000000000000"
    assert slugify("Run the tests: ./scripts/test.sh!", mid) == "run-the-tests-scripts-test-sh-0190a8f0"
    assert slugify("???", mid) == "0190a8f0"
    assert len(slugify("x" * 300, mid)) <= 80
    assert validate_slug(slugify("A title", mid)) == "a-title-0190a8f0"
    for bad in ("Upper", "double--dash", "-lead", "trail-", "", "a" * 81, 5):
        with pytest.raises(InvalidMemory):
            validate_slug(bad)
    assert validate_title("  hello ") == "hello"
    for bad in ("", "   ", None, "x" * 501):
        with pytest.raises(InvalidMemory):
            validate_title(bad)
    assert normalize_tags([" Python", "python", "", "CI "]) == ["python", "ci"]
    with pytest.raises(InvalidMemory):
        normalize_tags("python")


@given(st.text(max_size=200))
def test_any_title_gives_a_valid_slug(title: str) -> None:
    assert validate_slug(slugify(title, str(uuid.uuid4())))


def test_evidence_shapes() -> None:
    assert validate_evidence({"type": "attempt", "value": " att_1234 "}) == {"type": "attempt", "value": "att_1234"}
    assert validate_evidence({"type": "file", "path": "src/a.py", "line_start": 3, "line_end": 9,
                              "commit": "abc1234"}) == {"type": "file", "value": "src/a.py", "line_start": 3,
                                                        "line_end": 9, "commit": "abc1234"}
    assert validate_evidence({"type": "url", "value": "https://example.com/x", "note": "docs"})["note"] == "docs"
    for bad in ({"type": "rumour", "value": "x"}, {"type": "event"}, {"type": "file", "path": "a", "line_start": 0},
                {"type": "file", "path": "a", "line_start": 5, "line_end": 2},
                {"type": "file", "path": "a", "commit": "main"}, {"type": "url", "value": "not a url"}, "x"):
        with pytest.raises(InvalidMemory):
            validate_evidence(bad)


def test_links_lifetime_visibility() -> None:
    assert validate_link("supersedes", "a", "b") == "supersedes"
    with pytest.raises(InvalidMemory, match="itself"):
        validate_link("about", "a", "a")
    with pytest.raises(InvalidMemory):
        validate_link("likes", "a", "b")
    assert validate_lifetime("until", "2027-01-01T00:00:00Z")["until"] == "2027-01-01T00:00:00Z"
    for args in (("until", None), ("standard", "2027-01-01"), ("forever", None)):
        with pytest.raises(InvalidMemory):
            validate_lifetime(*args)
    assert validate_visibility("restricted", ["Claude_Code"]) == {"visibility": "restricted",
                                                                  "allowed_actors": ["claude_code"]}
    with pytest.raises(InvalidMemory):
        validate_visibility("shared", ["x"])


def test_confidence_priors_and_updates_by_hand() -> None:
    assert (conf.prior("person"), conf.prior("agent"), conf.prior("import")) == (0.95, 0.60, 0.70)
    assert conf.confirmed(0.6, "person") == pytest.approx(0.6 + 0.4 * 0.9)  # 0.96
    assert conf.confirmed(0.6, "agent") == pytest.approx(0.76)
    assert conf.contradicted(0.6, "person") == pytest.approx(0.12)
    assert conf.contradicted(0.6, "agent") == pytest.approx(0.36)
    assert conf.confirmed(1.0, "person") == 1.0 and conf.contradicted(0.0, "agent") == 0.0


def test_decay_and_staleness_by_hand() -> None:
    # a fact halves in 365 days
    assert conf.effective(0.8, "fact", 0, 365 * DAY) == pytest.approx(0.4)
    assert conf.effective(0.8, "fact", 10 * DAY, 0) == 0.8  # no growth before the anchor
    # engram's worked examples: a person's fact is stale after ≈525 days, an agent's after ≈284,
    # an agent's event after ≈8, a person's event after ≈28
    assert conf.stale_after_days(0.95, "fact") == pytest.approx(525, abs=1)
    assert conf.stale_after_days(0.60, "fact") == pytest.approx(284, abs=1)
    assert conf.stale_after_days(0.60, "event") == pytest.approx(8, abs=1)
    assert conf.stale_after_days(0.95, "event") == pytest.approx(28, abs=1)
    d = conf.stale_after_days(0.95, "fact")
    assert not conf.is_stale(0.95, "fact", 0, int((d - 1) * DAY))
    assert conf.is_stale(0.95, "fact", 0, int((d + 1) * DAY))
    # the code kinds: a pitfall goes out of date as fast as a project
    assert conf.DECAY["pitfall"] == conf.DECAY["project"] and conf.DECAY["decision"] == conf.DECAY["fact"]
    assert math.isclose(conf.effective(0.7, "pitfall", 0, 180 * DAY), 0.35)
