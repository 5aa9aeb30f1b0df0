"""The stored projection, brought up to date incrementally, equals the batch projection.

Property: for a small random stream of wire events (one to three sessions, one
or two providers, tool calls with and without call ids, failures, stops,
session starts and ends, permission requests, notifications, commits,
corrections and retractions of attempts, events and sessions), delivered to a
real data root in one to five chunks, in random order and with random
duplicates, every public view read through the query engine after each
``ingest`` + ``refresh`` equals the batch ``project()`` of the events
delivered so far — for every prefix. A full rebuild gives the same tables as
the incremental path, and a refresh with nothing new does nothing.

The places where the two used to differ (a retraction's ``matched`` when the
retracted event arrives later or was dropped before projecting; a retracted
session's edges) are regression tests below.
"""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.projection.observe import session_key
from agentlog.projection import persist
from agentlog.projection.persist import cross_session, parts, refresh, refreshing, shard_of
from agentlog.store.ingest import ingest
from projection_support import (
    BASE_US,
    META_PROVIDER,
    META_SESSION,
    US,
    attempt_id_of,
    batch_tables,
    deliver,
    deliveries,
    diff,
    event_id,
    known_divergences,
    session_id_of,
    streams,
    view_tables,
    wire,
)
from scenario import build_reference


def _forces_full(chunk: list[dict[str, Any]]) -> bool:
    return any(e["kind"] == "retraction" and e.get("attrs", {}).get("target_type") in ("event", "session")
               for e in chunk)


def _forget_process_caches() -> None:
    """As if each refresh ran in a new process: nothing parsed or written before is remembered."""
    parts._FILE_CACHE.clear()
    cross_session._MEMOS.clear()
    refreshing._OBSERVED.clear()


def check_delivery(root: str, chunks: list[list[dict[str, Any]]], *, fresh: bool = False) -> None:
    delivered: list[dict[str, Any]] = []
    for i, chunk in enumerate(chunks):
        deliver(root, chunk)
        delivered += chunk
        report = ingest(root, durability="relaxed")
        assert not report.breaks and not report.busy
        if fresh:
            _forget_process_caches()
        r = refresh(root)
        if i == 0:
            assert r.mode == "full"
        else:
            assert r.mode == ("full" if _forces_full(chunk) else "incremental"), r
        got, want = known_divergences(view_tables(root)), known_divergences(batch_tables(delivered))
        assert got == want, f"after chunk {i + 1}/{len(chunks)}:\n{diff(got, want)}"
    # Nothing new: nothing to do.
    assert ingest(root, durability="relaxed").events == 0
    assert refresh(root).mode == "none"
    incremental = view_tables(root)
    # A full rebuild gives the same tables.
    assert refresh(root, full=True).mode == "full"
    rebuilt = view_tables(root)
    rebuilt, incremental = known_divergences(rebuilt), known_divergences(incremental)
    assert rebuilt == incremental, diff(rebuilt, incremental)
    assert refresh(root).mode == "none"


def _run(data: st.DataObject, max_steps: int, *, fresh: bool = False) -> None:
    events = data.draw(streams(max_steps=max_steps), label="events")
    chunks = data.draw(deliveries(events), label="chunks")
    with tempfile.TemporaryDirectory(prefix="agentlog-prop-") as d:
        check_delivery(os.path.join(d, "root"), chunks, fresh=fresh)


_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@settings(max_examples=40, **_SETTINGS)  # type: ignore[arg-type]
@given(data=st.data())
def test_incremental_equals_batch_for_every_prefix(data: st.DataObject) -> None:
    _run(data, max_steps=14)


@pytest.mark.slow
@settings(max_examples=100, **_SETTINGS)  # type: ignore[arg-type]
@given(data=st.data())
def test_incremental_equals_batch_for_every_prefix_large(data: st.DataObject) -> None:
    _run(data, max_steps=30)


@settings(max_examples=30, **_SETTINGS)  # type: ignore[arg-type]
@given(data=st.data())
def test_incremental_equals_batch_without_corrections(data: st.DataObject) -> None:
    """No correction or retraction: every refresh of the process reuses what the
    cross-session stage remembered of unchanged sessions and work units."""
    events = data.draw(streams(max_steps=18, meta=False), label="events")
    chunks = data.draw(deliveries(events), label="chunks")
    with tempfile.TemporaryDirectory(prefix="agentlog-prop-") as d:
        check_delivery(os.path.join(d, "root"), chunks)


@settings(max_examples=30, **_SETTINGS)  # type: ignore[arg-type]
@given(data=st.data())
def test_incremental_equals_batch_merging_parts_in_fresh_processes(data: st.DataObject) -> None:
    """Every refresh's parts merged at once (MAX_DELTAS 0), with no process cache
    between refreshes: the stored rows, merged or not, still equal the batch."""
    saved = parts.MAX_DELTAS
    parts.MAX_DELTAS = 0
    try:
        _run(data, max_steps=14, fresh=True)
    finally:
        parts.MAX_DELTAS = saved


# -- fixed cases ------------------------------------------------------------------------


def _session_events(seed: int) -> list[dict[str, Any]]:
    """One Claude session: a prompt, a failing edit, a retry, a stop."""
    t = BASE_US
    ids = iter(range(1, 100))

    def ev(kind: str, at_s: int, **kw: Any) -> dict[str, Any]:
        return wire(event_id(seed, next(ids)), kind, "claude_code", "s1", t + at_s * US,
                    project={"root": "/work/repo", "name": "repo"}, **kw)

    edit = {"name": "Edit", "category": "file_edit"}
    return [
        ev("session_started", 0),
        ev("prompt_submitted", 1, content={"prompt": "Fix it"}),
        ev("tool_call_started", 2, tool={**edit, "call_id": "c1"}, paths=["a.py"]),
        ev("tool_call_failed", 3, tool={**edit, "call_id": "c1"}, paths=["a.py"],
           outcome={"status": "failure", "class": "string_mismatch"}),
        ev("tool_call_started", 4, tool={**edit, "call_id": "c2"}, paths=["a.py"]),
        ev("tool_call_finished", 5, tool={**edit, "call_id": "c2"}, paths=["a.py"], outcome={"status": "success"}),
        ev("turn_stopped", 6),
    ]


def _retraction(seed: int, n: int, at_s: int, target_type: str, target: str) -> dict[str, Any]:
    return wire(event_id(seed, n), "retraction", META_PROVIDER, META_SESSION, BASE_US + at_s * US,
                name="Retraction", attrs={"target_type": target_type, "target": target, "reason": "test"})


def test_fixed_prefixes_and_modes(tmp_path: Path) -> None:
    """Every prefix of one session, one event per chunk, plus a correction: incremental each time."""
    events = _session_events(1)
    correction = wire(event_id(1, 50), "correction", META_PROVIDER, META_SESSION, BASE_US + 10 * US,
                      name="Correction",
                      attrs={"correction_type": "attempt_note",
                             "target": "att_" + attempt_id_of("claude_code", "s1", 1, 0)},
                      content={"note": "looked at it"})
    check_delivery(str(tmp_path / "root"), [[e] for e in events] + [[correction], [events[3]]])


def test_retraction_of_a_missing_event_is_unmatched(tmp_path: Path) -> None:
    events = _session_events(2)
    chunks = [events, [_retraction(2, 60, 30, "event", event_id(2, 999))]]
    check_delivery(str(tmp_path / "root"), chunks)
    rows = view_tables(str(tmp_path / "root"))["retractions"]
    assert [r["matched"] for r in rows] == [False]


def test_batch_marks_a_retraction_of_a_present_event_matched() -> None:
    events = _session_events(3)
    r = _retraction(3, 60, 30, "event", events[3]["event_id"])
    rows = batch_tables(events + [r])["retractions"]
    assert [x["matched"] for x in rows] == [True]


def test_stored_full_build_marks_a_retraction_of_a_present_event_matched(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    events = _session_events(4)
    deliver(root, events + [_retraction(4, 60, 30, "event", events[3]["event_id"])])
    ingest(root, durability="relaxed")
    assert refresh(root).mode == "full"
    rows = view_tables(root)["retractions"]
    assert [(r["matched"], r["retracted_events"]) for r in rows] == [(True, [events[3]["event_id"]])]


def test_incremental_matches_a_retraction_whose_event_arrives_later(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    events = _session_events(5)
    deliver(root, [_retraction(5, 60, 30, "event", events[3]["event_id"])])
    ingest(root, durability="relaxed")
    refresh(root)
    deliver(root, events)
    ingest(root, durability="relaxed")
    assert refresh(root).mode == "incremental"
    incremental = view_tables(root)["retractions"]
    refresh(root, full=True)
    full = view_tables(root)["retractions"]
    assert [r["matched"] for r in full] == [True]
    assert incremental == full


def test_two_data_roots_in_one_process(tmp_path: Path) -> None:
    """Two data roots refreshed in one process keep their own per-session facts (the
    facts cache was once keyed by the bare file name, shared between roots)."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    ev_a = _session_events(6)
    # The same session key in root b (so the same shard), other events: a different projection.
    ev_b = _session_events(7)[:3]
    for root, evs in ((a, ev_a), (b, ev_b)):
        deliver(root, evs)
        ingest(root, durability="relaxed")
        assert refresh(root).mode == "full"
    # Root a gets an event of another session (another shard): incremental, the s1 shard untouched.
    other = wire(event_id(6, 70), "prompt_submitted", "codex", "zz-other", BASE_US + 40 * US,
                 project={"root": "/work/repo", "name": "repo"}, content={"prompt": "hello"})
    assert shard_of(session_key("codex", "zz-other")) != shard_of(session_key("claude_code", "s1"))
    deliver(a, [other])
    ingest(a, durability="relaxed")
    assert refresh(a).mode == "incremental"
    got, want = known_divergences(view_tables(a)), known_divergences(batch_tables(ev_a + [other]))
    assert got == want, diff(got, want)


def test_retracted_session_edges_stored_equal_batch(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    events = _session_events(8) + [_retraction(8, 60, 30, "session", session_id_of("claude_code", "s1"))]
    deliver(root, events)
    ingest(root, durability="relaxed")
    refresh(root)
    got, want = view_tables(root), batch_tables(events)
    assert [s["retracted"] for s in got["sessions"]] == [True]
    assert got["edges"] == want["edges"], diff(got, want)


def test_reference_scenario_delivered_in_shuffled_chunks(tmp_path: Path) -> None:
    """The reference scenario (real hook payloads: a handoff, a commit, a pending signal,
    a supersession), delivered Codex first, shuffled, with duplicates, in four chunks."""
    sc = build_reference(str(tmp_path / "capture"), str(tmp_path / "work"))
    events = list(sc.captured.values())
    rng = random.Random(7)
    items = events + rng.sample(events, 6)
    rng.shuffle(items)
    codex_first = sorted(items, key=lambda e: e["provider"] != "codex")
    chunks = [codex_first[:5], codex_first[5:12], codex_first[12:25], codex_first[25:]]
    check_delivery(str(tmp_path / "root"), chunks)
    tables = view_tables(str(tmp_path / "root"))
    assert len(tables["handoffs"]) == 1 and len(tables["decisions"]) == 1 and len(tables["commits"]) == 1


def test_full_build_in_worker_processes_equals_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Large stores project their shards in ``python -m agentlog.projection.persist``
    children; forced here on a small store, the tables must be the same."""
    root = str(tmp_path / "home")
    build_reference(root, str(tmp_path))
    ingest(root)
    monkeypatch.setenv("AGENTLOG_PROJECT_WORKERS", "1")
    assert refresh(root, full=True).mode == "full"
    one = view_tables(root)
    monkeypatch.setenv("AGENTLOG_PROJECT_WORKERS", "2")
    report = refresh(root, full=True)
    assert report.mode == "full" and report.counts["sessions"] == 2
    assert view_tables(root) == one


# -- conflicts and the reference time --------------------------------------------------


def _concurrent_edits(seed: int) -> list[dict[str, Any]]:
    """Two sessions of different agents on one project, active at the same time and
    both editing ``src/a.py`` (so two open work units in conflict), each turn
    stopped at 40 min."""
    project = {"root": "/work/shared", "name": "shared"}
    events: list[dict[str, Any]] = []
    n = 0

    def add(kind: str, provider: str, psid: str, at_min: float, **fields: Any) -> None:
        nonlocal n
        n += 1
        events.append(wire(event_id(seed, n), kind, provider, psid, BASE_US + int(at_min * 60 * US),
                           project=project, **fields))

    for provider, psid, offset in (("claude_code", "c1", 0.0), ("codex", "x1", 1.0)):
        add("prompt_submitted", provider, psid, offset, content={"prompt": "Change a.py"})
        for k in range(4):
            at = offset + 5 + 8 * k
            tool = {"name": "Edit", "category": "file_edit", "call_id": f"{psid}-{k}"}
            add("tool_call_started", provider, psid, at, tool=tool, paths=["/work/shared/src/a.py"])
            add("tool_call_finished", provider, psid, at + 0.5, tool=tool, paths=["/work/shared/src/a.py"],
                outcome={"status": "success"})
        add("turn_stopped", provider, psid, 40 + offset)
    return events


def test_a_conflict_ends_when_time_moves_on_without_rejoining_its_project(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    events = _concurrent_edits(7)
    deliver(root, events)
    ingest(root, durability="relaxed")
    assert refresh(root).mode == "full"
    got, want = view_tables(root), batch_tables(events)
    assert got == want, diff(got, want)
    assert len(want["conflicts"]) == 1 and want["conflicts"][0]["path_count"] == 1
    assert sorted(u["status"] for u in want["work_units"]) == ["open", "open"]
    # An hour later something happens in another project only: that project is
    # joined, this one is not, yet both units are now completed and the conflict
    # is no longer an answer.
    later = [wire(event_id(8, 1), "prompt_submitted", "claude_code", "elsewhere", BASE_US + 100 * 60 * US,
                  project={"root": "/work/other", "name": "other"}, content={"prompt": "hello"})]
    deliver(root, later)
    ingest(root, durability="relaxed")
    report = refresh(root)
    assert report.mode == "incremental" and report.projects_reassembled == 1
    got, want = view_tables(root), batch_tables(events + later)
    assert got == want, diff(got, want)
    assert want["conflicts"] == []
    assert sorted(u["status"] for u in want["work_units"] if u["project_name"] == "shared") == ["completed"] * 2


def test_a_refresh_reuses_the_work_units_of_unchanged_sessions(tmp_path: Path) -> None:
    """A third session (6 minutes after the others stopped: no handoff) joins the
    project of two conflicting ones and goes on, on another file: each refresh
    re-joins the project, the two untouched units are reused (the same remembered
    rows), and every table still equals the batch."""
    root = str(tmp_path / "root")
    events = _concurrent_edits(9)
    project = {"root": "/work/shared", "name": "shared"}
    tool = {"name": "Edit", "category": "file_edit"}

    def third(n: int, kind: str, at_min: float, **fields: Any) -> dict[str, Any]:
        return wire(event_id(10, n), kind, "claude_code", "c2", BASE_US + int(at_min * 60 * US), project=project,
                    **fields)

    chunks = [
        events,
        [third(1, "prompt_submitted", 47, content={"prompt": "Change b.py"}),
         third(2, "tool_call_started", 48, tool={**tool, "call_id": "b1"}, paths=["/work/shared/src/b.py"])],
        [third(3, "tool_call_finished", 49, tool={**tool, "call_id": "b1"}, paths=["/work/shared/src/b.py"],
               outcome={"status": "success"})],
        [third(4, "turn_stopped", 50)],
    ]
    delivered: list[dict[str, Any]] = []
    remembered: list[dict[tuple[str, ...], Any]] = []
    for i, chunk in enumerate(chunks):
        deliver(root, chunk)
        delivered += chunk
        ingest(root, durability="relaxed")
        assert refresh(root).mode == ("full" if i == 0 else "incremental")
        got, want = view_tables(root), batch_tables(delivered)
        assert got == want, f"after chunk {i + 1}:\n{diff(got, want)}"
        if i:
            memo = cross_session._MEMOS[os.path.abspath(persist.projection_dir(root))]
            (units,) = [u for u in memo.units.values() if u]
            remembered.append(units)
            # the observations of c2, the one session rebuilt, are kept for the next refresh
            assert len(refreshing._OBSERVED[os.path.abspath(persist.projection_dir(root))]) == 1
    assert len(want["conflicts"]) == 1
    assert [len(u) for u in remembered] == [3, 3, 3]
    # the units of c1 and x1 (one turn each, never touched again) are the same entries throughout
    untouched = [k for k in remembered[0] if all(k in later and later[k] is remembered[0][k] for later in remembered)]
    assert len(untouched) == 2
