"""Time travel over the projection: the state at an instant, what changed
between two instants, why something is blocked or failed, and causal traces.

Everything here reads an open query engine (``query.engine.Engine``). The
time-travel answers (state, DIFF, WHY, WHAT IS … NOW) read the projection
through facts loaded once per engine — its snapshot never changes — and
sorted for "the latest … by t" lookups, so an answer at an instant costs
Python over the few sessions and units concerned, plus at most one query of
the events table (a session's last event before ``t`` when it went on after
``t``); the rest (ids, traces, WHY FAILED) filter and aggregate inside DuckDB
and bring back only the few rows an answer needs. No function reads the wall
clock: every instant is an argument, and callers default "now" to the latest
observed event time (:func:`latest_event_us`).

State at ``t`` (:func:`state_at`) is the projection seen as it was known at
``t``: only entities observed at or before ``t``, outcomes masked to what was
known then — an attempt that had not ended is ``in_progress``; a failed
attempt whose retry had not started yet is ``failed``, not ``superseded``;
corrections recorded after ``t`` are ignored; a signal not cleared by ``t``
blocks; a turn whose end came later is ``in_progress``.

Answers carry ``evidence`` (event ids) and an ``uncertainty``
``{confidence, reason, note}``; when the evidence does not support a claim
the answer is one row with reason ``insufficient_evidence`` — never a guess.

Ids are bare UUID text, as stored; :func:`resolve_id` turns what a person
typed (``att_…``, a bare id, an unambiguous prefix of four or more hex
digits, a provider's session id) into ``(kind, id)`` or raises
:class:`ResolveError`.

TRACE (:func:`trace`) walks causal edges — ``caused``, ``triggered``,
``superseded``, ``handed_off`` (and ``blocked``, ``resolved``,
``contradicted`` should the projection emit them). UP follows edges
backwards, towards causes; DOWN forwards, towards effects; BOTH does each
from the start, each direction keeping to itself (up stays up), so BOTH is
"causes and effects", not "everything connected". Structural containment
(``parent_of``: work unit → turn, session → turn, turn → tool call) is
followed only DOWN: containment is not causation, and walking it upwards and
back down would flood a trace with siblings. The causal edges are loaded once
per engine into an adjacency index (the huge ``evidence_for`` and
``parent_of`` sets stay in DuckDB); containment children are fetched per
level, batched.

The package, one concern a module (each imports only those before it):
``common`` (the engine protocol, parameters, formatting, the latest time),
``resolve`` (ids), ``calls`` (the tool call index), ``facts`` (the small
tables kept per engine), ``attempts`` (attempts and signals as known at an
instant), ``activity`` (a session's last event before an instant), ``at``
(state at an instant, flat rows), ``diff``, ``why`` (WHY … and WHAT IS …
NOW) and ``tracing`` (TRACE). The tuning constants and the phase rule are the
projection's (:mod:`agentlog.projection.rules`).
"""

from __future__ import annotations

# "X as X": public names outside __all__ that callers read (aql: the column tuples).
from agentlog.query.state.common import (
    ALL_ROWS as ALL_ROWS,
    COVERAGE_CONFIDENCE as COVERAGE_CONFIDENCE,
    FAILURES as FAILURES,
    MEMO_CAP as MEMO_CAP,
    US as US,
    Params,
    Runner,
    StateError,
    coverage_note,
    latest_event_us,
)
from agentlog.query.state.resolve import ID_SPACES, MIN_PREFIX as MIN_PREFIX, ResolveError, resolve_id
from agentlog.query.state.calls import SHORT_CALL as SHORT_CALL
from agentlog.query.state.facts import ActivityKey as ActivityKey
from agentlog.query.state.at import (
    STATE_COLUMNS as STATE_COLUMNS,
    StateAt,
    flatten_session,
    flatten_work_unit,
    state_at,
)
from agentlog.query.state.diff import (
    DIFF_COLUMNS as DIFF_COLUMNS,
    SESSION_DIFF_FIELDS as SESSION_DIFF_FIELDS,
    UNIT_DIFF_FIELDS as UNIT_DIFF_FIELDS,
    diff_state,
)
from agentlog.query.state.why import (
    MAX_WHY_SESSIONS as MAX_WHY_SESSIONS,
    WHY_COLUMNS as WHY_COLUMNS,
    what_is_doing_now,
    why_blocked,
    why_failed,
)
from agentlog.query.state.tracing import (
    CAUSAL_EDGES,
    CONTAINMENT_FROM as CONTAINMENT_FROM,
    TRACE_COLUMNS as TRACE_COLUMNS,
    TRACE_KINDS,
    Edge as Edge,
    trace,
)

__all__ = [
    "Runner",
    "Params",
    "ResolveError",
    "StateError",
    "StateAt",
    "ID_SPACES",
    "TRACE_KINDS",
    "CAUSAL_EDGES",
    "resolve_id",
    "latest_event_us",
    "state_at",
    "diff_state",
    "why_blocked",
    "why_failed",
    "what_is_doing_now",
    "trace",
    "flatten_session",
    "flatten_work_unit",
    "coverage_note",
]
