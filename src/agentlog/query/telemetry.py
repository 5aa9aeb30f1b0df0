"""The ``telemetry`` view: the agents' OpenTelemetry records joined to turns and tool calls.

One row per ``telemetry`` event (``agentlog otel serve``; a record sent twice
counts once). Each row is attached to its session (the agent's session id),
its tool call and its turn:

- tool call by exact key: the record's ``tool_use_id`` equals the call's
  ``provider_call_id`` in the same session (``call_join = 'tool_use_id'``);
  else, for a record naming a tool, by time: among the calls of that tool in the
  same session whose span (±2 s) holds the record's time (its call's start,
  where the record says when the call started: Gemini CLI's ``start_time``),
  first the one whose input digest is the record's (where both carry one:
  Gemini CLI's hooks always, its telemetry when it logs prompts), then the one
  whose result has the length the record reports (Gemini CLI's
  ``content_length``, its hooks' ``llmContent``), then the one in the same
  place among the tool's calls of the turn (the k-th record of a tool in a turn,
  in start order, else the order received, is the k-th call: Gemini CLI logs a
  reply's calls together, in the reply's order), then
  the one whose start (a record with a start, a tool decision) or end (any
  other) is nearest (``call_join = 'time'``);
- turn by exact key: the record's prompt id equals the ``provider_turn_id`` of
  the turn's prompt event (``turn_join = 'prompt_id'``); else the exactly
  joined tool call's turn (``'tool_call'``); else by time: the turn of the same
  session that started last before the record (``'time'``).

``joined_by`` sums the row up: the strongest of ``tool_use_id``, ``prompt_id``,
``time``, ``none``.
"""

from __future__ import annotations

from typing import Final


def _a(path: str) -> str:
    return f"json_extract_string(attrs, '$.{path}')"


def _n(path: str, kind: str = "BIGINT") -> str:
    return f"TRY_CAST(json_extract(attrs, '$.{path}') AS {kind})"


#: slack around a tool call's start and end for a join by time (µs)
SLACK_US: Final = 2_000_000

TELEMETRY_VIEW: Final = f"""CREATE VIEW telemetry AS
WITH t AS (
  SELECT event_id, provider, provider_session_id, observed_at, provider_event_name AS name,
         {_a('signal')} AS signal, {_a('otel_event')} AS record, {_a('prompt_id')} AS prompt_id,
         {_a('tool_use_id')} AS tool_use_id, {_a('request_id')} AS request_id,
         {_a('input_key')} AS input_key, {_n('call_started_us')} AS call_started_us,
         {_n('content_length')} AS content_length, seq AS log_seq,
         coalesce({_a('tool_name')}, tool_name) AS tool_name, coalesce({_a('model')}, model) AS model,
         {_a('decision')} AS decision, {_a('source')} AS decision_source, outcome_status, duration_ms,
         {_n('input_tokens')} AS input_tokens, {_n('output_tokens')} AS output_tokens,
         {_n('cache_read_tokens')} AS cache_read_tokens, {_n('cache_write_tokens')} AS cache_write_tokens,
         {_n('cost_usd', 'DOUBLE')} AS cost_usd, {_a('trace_id')} AS trace_id, {_a('span_id')} AS span_id
  FROM events WHERE kind = 'telemetry'
  QUALIFY row_number() OVER (PARTITION BY event_id ORDER BY log_key DESC, seq DESC) = 1
), ts AS (
  SELECT t.*, s.session_id FROM t
  LEFT JOIN sessions s ON s.provider = t.provider AND s.provider_session_id = t.provider_session_id
), call_exact AS (
  SELECT ts.event_id, c.tool_call_id, c.turn_id, c.attempt_id FROM ts
  JOIN tool_calls c ON c.session_id = ts.session_id AND c.provider_call_id = ts.tool_use_id
  QUALIFY row_number() OVER (PARTITION BY ts.event_id ORDER BY c.started_at, c.tool_call_id) = 1
), turn_exact AS (
  SELECT ts.event_id, u.turn_id FROM ts
  JOIN events p ON p.provider = ts.provider AND p.provider_session_id = ts.provider_session_id
   AND p.kind = 'prompt_submitted' AND p.provider_turn_id = ts.prompt_id
  JOIN turns u ON u.prompt_event_id = p.event_id
  QUALIFY row_number() OVER (PARTITION BY ts.event_id ORDER BY u.started_at) = 1
), turn_time AS (
  SELECT ts.event_id, u.turn_id FROM ts
  JOIN turns u ON u.session_id = ts.session_id AND u.started_at <= ts.observed_at
  QUALIFY row_number() OVER (PARTITION BY ts.event_id ORDER BY u.started_at DESC, u.turn_id) = 1
), timed AS (
  SELECT ts.*, coalesce(ts.call_started_us, epoch_us(ts.observed_at)) AS at_us,
         coalesce(te.turn_id, tt.turn_id) AS near_turn FROM ts
  LEFT JOIN turn_exact te USING (event_id) LEFT JOIN turn_time tt USING (event_id)
  WHERE ts.tool_name IS NOT NULL AND ts.event_id NOT IN (SELECT event_id FROM call_exact)
), ranked AS (
  SELECT timed.*, row_number() OVER (PARTITION BY session_id, tool_name, near_turn, signal, record
                                     ORDER BY at_us, log_seq, event_id) AS place FROM timed
), calls AS (
  SELECT c.tool_call_id, c.session_id, c.tool_name, c.turn_id, c.attempt_id, c.started_at, c.finished_at,
         c.start_event_id, c.end_event_id, row_number() OVER (PARTITION BY c.session_id, c.tool_name, c.turn_id
                                              ORDER BY c.started_at, c.tool_call_id) AS place
  FROM tool_calls c WHERE c.session_id IN (SELECT session_id FROM timed)
), keyed AS (
  SELECT e.event_id, json_extract_string(e.attrs, '$.input_key') AS input_key,
         TRY_CAST(json_extract(e.attrs, '$.llm_content_units') AS BIGINT) AS content_length FROM events e
  WHERE e.kind IN ('tool_call_started', 'tool_call_finished', 'tool_call_failed')
    AND (e.event_id IN (SELECT start_event_id FROM calls) OR e.event_id IN (SELECT end_event_id FROM calls))
), call_time AS (
  SELECT r.event_id, c.tool_call_id, c.turn_id, c.attempt_id FROM ranked r
  JOIN calls c ON c.session_id = r.session_id AND c.tool_name = r.tool_name
   AND r.at_us BETWEEN epoch_us(c.started_at) - {SLACK_US}
                   AND epoch_us(coalesce(c.finished_at, c.started_at)) + {SLACK_US}
  LEFT JOIN keyed k ON k.event_id = c.start_event_id
  LEFT JOIN keyed ke ON ke.event_id = c.end_event_id
  QUALIFY row_number() OVER (PARTITION BY r.event_id
                             ORDER BY coalesce(r.input_key = k.input_key, false) DESC,
                                      coalesce(r.content_length = ke.content_length, false) DESC,
                                      (c.turn_id IS NOT DISTINCT FROM r.near_turn AND c.place = r.place) DESC,
                                      abs(r.at_us - epoch_us(CASE WHEN r.call_started_us IS NOT NULL
                                                                   OR r.record = 'tool_decision'
                                      THEN c.started_at ELSE coalesce(c.finished_at, c.started_at) END)),
                                      c.tool_call_id) = 1
)
SELECT ts.event_id, ts.provider, ts.provider_session_id, ts.session_id, ts.observed_at, ts.signal, ts.record,
       ts.name, ts.model, ts.tool_name, ts.decision, ts.decision_source, ts.outcome_status, ts.duration_ms,
       ts.input_tokens, ts.output_tokens, ts.cache_read_tokens, ts.cache_write_tokens, ts.cost_usd,
       ts.prompt_id, ts.tool_use_id, ts.request_id, ts.trace_id, ts.span_id,
       coalesce(ce.tool_call_id, ct.tool_call_id) AS tool_call_id,
       coalesce(ce.attempt_id, ct.attempt_id) AS attempt_id,
       coalesce(te.turn_id, ce.turn_id, tt.turn_id) AS turn_id,
       CASE WHEN ce.tool_call_id IS NOT NULL THEN 'tool_use_id' WHEN ct.tool_call_id IS NOT NULL THEN 'time' END
         AS call_join,
       CASE WHEN te.turn_id IS NOT NULL THEN 'prompt_id' WHEN ce.turn_id IS NOT NULL THEN 'tool_call'
            WHEN tt.turn_id IS NOT NULL THEN 'time' END AS turn_join,
       CASE WHEN ce.tool_call_id IS NOT NULL THEN 'tool_use_id' WHEN te.turn_id IS NOT NULL THEN 'prompt_id'
            WHEN ct.tool_call_id IS NOT NULL OR tt.turn_id IS NOT NULL THEN 'time' ELSE 'none' END AS joined_by
FROM ts
LEFT JOIN call_exact ce USING (event_id)
LEFT JOIN call_time ct USING (event_id)
LEFT JOIN turn_exact te USING (event_id)
LEFT JOIN turn_time tt USING (event_id)"""

#: what the catalog says of each column
COLUMNS: Final = {
    "event_id": "the telemetry event",
    "provider_session_id": "the agent's session id (session.id, Codex's conversation.id)",
    "session_id": "the session it joins (null: no hook or transcript recorded that session)",
    "observed_at": "the record's time (UTC)",
    "signal": "logs, metrics or traces",
    "record": "the record's name without the agent's prefix (api_request, tool_result, tool_decision, api_error …)",
    "name": "the record's full name as sent",
    "model": "the model of an API request",
    "tool_name": "the tool a tool record is about",
    "decision": "a tool decision (accept, reject)",
    "decision_source": "who decided (config, user_permanent, user_temporary, user_abort, user_reject …)",
    "outcome_status": "success or failure, where the record says",
    "duration_ms": "the duration the record reports",
    "input_tokens": "input tokens not read from a cache (an API request)",
    "output_tokens": "output tokens",
    "cache_read_tokens": "input tokens read from the prompt cache",
    "cache_write_tokens": "input tokens written to the prompt cache",
    "cost_usd": "the cost the agent reported",
    "prompt_id": "the agent's prompt id (Claude Code prompt.id)",
    "tool_use_id": "the agent's tool-call id",
    "request_id": "the API request id",
    "trace_id": "the OpenTelemetry trace id (spans, and logs sent inside a span)",
    "span_id": "the OpenTelemetry span id",
    "tool_call_id": "the tool call it is attached to",
    "attempt_id": "that tool call's attempt",
    "turn_id": "the turn it is attached to",
    "call_join": "how the tool call was found: tool_use_id (exact) or time",
    "turn_join": "how the turn was found: prompt_id (exact), tool_call (the exactly joined call's turn) or time",
    "joined_by": "the strongest join of the row: tool_use_id, prompt_id, time or none",
}


#: the ``turn_latency`` view: where each turn's wall time went
TURN_LATENCY_VIEW: Final = """CREATE VIEW turn_latency AS
WITH model AS (
  SELECT turn_id, sum(duration_ms) AS model_ms, count(*) AS model_requests FROM telemetry
  WHERE record IN ('api_request', 'api_error', 'api_response') AND turn_id IS NOT NULL GROUP BY 1
), tools AS (
  SELECT turn_id, sum(coalesce(duration_ms, epoch_ms(finished_at) - epoch_ms(started_at))) AS tool_ms,
         count(*) AS tool_calls
  FROM tool_calls WHERE turn_id IS NOT NULL GROUP BY 1
), asked AS (
  SELECT p.event_id, p.observed_at, p.tool_name, s.session_id FROM events p
  JOIN sessions s ON s.provider = p.provider AND s.provider_session_id = p.provider_session_id
  WHERE p.kind = 'permission_requested'
), waited AS (
  SELECT a.event_id, a.session_id, a.observed_at,
         epoch_ms(d.observed_at) - epoch_ms(a.observed_at) AS wait_ms FROM asked a
  JOIN telemetry d ON d.session_id = a.session_id AND d.record = 'tool_decision' AND d.tool_name = a.tool_name
   AND d.observed_at >= a.observed_at AND d.decision_source LIKE 'user%'
  QUALIFY row_number() OVER (PARTITION BY a.event_id ORDER BY d.observed_at) = 1
), permission AS (
  SELECT u.turn_id, sum(w.wait_ms) AS permission_ms FROM waited w
  JOIN turns u ON u.session_id = w.session_id AND w.observed_at >= u.started_at
   AND (u.ended_at IS NULL OR w.observed_at <= u.ended_at)
  GROUP BY 1
)
SELECT t.turn_id, t.session_id, t.turn_index, t.started_at, t.ended_at,
       epoch_ms(t.ended_at) - epoch_ms(t.started_at) AS wall_ms,
       m.model_ms, coalesce(m.model_requests, 0) AS model_requests,
       coalesce(c.tool_ms, 0) AS tool_ms, coalesce(c.tool_calls, 0) AS tool_calls, p.permission_ms,
       epoch_ms(t.started_at) - epoch_ms(lag(t.ended_at) OVER (PARTITION BY t.session_id ORDER BY t.turn_index))
         AS user_wait_ms
FROM turns t
LEFT JOIN model m USING (turn_id) LEFT JOIN tools c USING (turn_id) LEFT JOIN permission p USING (turn_id)"""

LATENCY_COLUMNS: Final = {
    "turn_id": "the turn",
    "session_id": "its session",
    "turn_index": "its place in the session",
    "started_at": "when the prompt was submitted (UTC)",
    "ended_at": "when the turn stopped (null: not seen)",
    "wall_ms": "ended_at − started_at",
    "model_ms": "time in model requests: the durations the agent's telemetry reported for the turn's API requests "
                "(null: no telemetry for the turn)",
    "model_requests": "API requests (and errors) the telemetry attached to the turn",
    "tool_ms": "time in tool calls (their durations, else finish − start)",
    "tool_calls": "tool calls of the turn",
    "permission_ms": "waiting for permission: from each permission request (hook) to the person's decision "
                     "(telemetry tool_decision from a user source, same tool); null when neither was seen",
    "user_wait_ms": "waiting for the user: from the previous turn's end to this prompt (null for the first turn)",
}
