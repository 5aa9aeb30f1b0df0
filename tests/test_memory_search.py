"""The memory search language: each operator with a positive and a negative case."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.memory import confidence as conf
from agentlog.memory import service as S
from agentlog.memory.model import InvalidMemory


@pytest.fixture
def mems(agentlog_home: Path) -> dict[str, S.Memory]:
    root = str(agentlog_home)
    out = {
        "tests": S.create(root, "procedure", "Run the tests", content="Use the make target",
                          attributes={"goal": "run the tests", "steps": ["make test"]}, tags=["ci"]),
        "ruff": S.create(root, "convention", "Format with ruff", attributes={"rule": "ruff format", "scope": "python"},
                         tags=["style"], evidence=[{"type": "url", "value": "https://docs.astral.sh/ruff"}]),
        "proj": S.create(root, "project", "agentlog", attributes={"name": "agentlog", "status": "active"}),
        "old": S.create(root, "project", "oldthing", attributes={"name": "oldthing", "status": "abandoned"},
                        actor="agent"),
    }
    S.link(root, out["ruff"].id, "relates_to", out["tests"].id)
    S.archive(root, out["old"].id)
    return {k: S.get(root, v.id) for k, v in out.items()}


def ids(root: Path, q: str, **kw: object) -> set[str]:
    return {m.id for m, _ in S.search(str(root), q, **kw)}  # type: ignore[arg-type]


def test_each_operator_finds_what_it_names_and_not_the_rest(agentlog_home: Path, mems: dict[str, S.Memory]) -> None:
    t, r, p, o = (mems[k].id for k in ("tests", "ruff", "proj", "old"))
    root = agentlog_home
    cases = [
        ("tests", {t}), ("tests ruff", set()), ('"make target"', {t}), ('"target make"', set()), ("form*", {r}),
        ("kind:convention", {r}), ("kind:pitfall", set()),
        ("tag:ci", {t}), ("tag:nope", set()),
        ("is:archived", {o}), ("is:pinned", set()),
        ("has:evidence", {r}), ("has:links", {r}),
        ("evidence:https://docs.astral.sh/ruff", {r}), ("evidence:https://nowhere", set()),
        ("linked:" + mems["tests"].slug, {r}), ("linked:" + mems["ruff"].slug, {t}), ("linked:" + mems["proj"].slug, set()),
        ("status:active", {p}), ("status:paused", set()), ("steps:make test", set()), ("scope:python", {r}),
        ("confidence>0.9", {t, r, p}), ("confidence<0.9", set()), ("confidence<=0.95 kind:project", {p}),
        ("updated:>2000-01-01", {t, r, p}), ("updated:<2000-01-01", set()),
        ("kind:project is:archived", {o}), ("kind:project status:abandoned", set()),  # archived: only with is:archived
        ("http://example.com", set()),
    ]
    for q, want in cases:
        assert ids(root, q) == want, q


def test_is_stale_uses_the_effective_confidence_at_read_time(agentlog_home: Path,
                                                               mems: dict[str, S.Memory]) -> None:
    t = mems["tests"]
    later = t.created_at + int((conf.stale_after_days(t.confidence, "procedure") + 1) * conf.US_PER_DAY)
    assert t.id in ids(agentlog_home, "is:stale", now_us=later)
    assert t.id not in ids(agentlog_home, "is:stale")


def test_bad_dates_are_refused_and_fts_syntax_is_text(agentlog_home: Path, mems: dict[str, S.Memory]) -> None:
    with pytest.raises(InvalidMemory, match="updated"):
        S.search(str(agentlog_home), "updated:>yesterday")
    for q in ('tests OR ruff', 'NEAR(tests ruff)', 'tests AND NOT ruff', '"unbalanced', 'tests -ruff', "col:umn"):
        assert isinstance(S.search(str(agentlog_home), q), list)
    t, r = mems["tests"].id, mems["ruff"].id
    # the free text is event search's language: OR, -exclusion, phrases, prefixes; the rest is text
    assert ids(agentlog_home, "tests OR ruff") == {t, r}
    assert ids(agentlog_home, "make -ruff") == {t}
    assert ids(agentlog_home, "kind:convention -ruff") == set()
    assert ids(agentlog_home, "kind:procedure -ruff") == {t}
    assert ids(agentlog_home, 'NEAR(tests ruff)') == set()
    assert ids(agentlog_home, 'tests AND NOT ruff') == set()


def test_ranking_is_relevance_times_confidence(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    strong = S.create(root, "fact", "the cache lives in redis", attributes={"statement": "redis cache"})
    weak = S.create(root, "fact", "the cache lives in memcached", actor="agent", attributes={"statement": "cache"})
    assert [m.id for m, _ in S.search(root, "cache")] == [strong.id, weak.id]
    for _ in range(2):
        S.confirm(root, weak.id)
        S.contradict(root, strong.id)
    assert [m.id for m, _ in S.search(root, "cache")] == [weak.id, strong.id]


@settings(max_examples=200, deadline=None)
@given(c=st.floats(0, 1), kind=st.sampled_from(sorted(conf.DECAY) + ["not-a-kind"]),
       anchor=st.integers(0, 2_000_000_000_000_000), created=st.integers(0, 2_000_000_000_000_000),
       now=st.integers(0, 2_000_000_000_000_000), confirmed=st.booleans())
def test_effective_confidence_in_sql_equals_the_python_formula(c: float, kind: str, anchor: int, created: int,
                                                                now: int, confirmed: bool) -> None:
    """Ranking and the confidence operators use the SQL form; show uses Python: the same number."""
    import sqlite3

    from agentlog.memory.search import _effective_sql

    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE memories (confidence REAL, kind TEXT, last_confirmed_at INTEGER, created_at INTEGER)")
    con.execute("INSERT INTO memories VALUES (?, ?, ?, ?)", (c, kind, anchor if confirmed else None, created))
    effective, threshold = _effective_sql(con)
    got, under = con.execute(f"SELECT {effective}, {threshold} FROM memories", {"now": now}).fetchone()
    base = anchor if confirmed else created
    assert got == (conf.effective(c, kind, base, now) if kind in conf.DECAY else c)
    assert under == conf.DECAY.get(kind, (0.0, 0.0))[1]
