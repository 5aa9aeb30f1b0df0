"""Token usage and its cost.

Usage comes from the agents' telemetry (``agentlog otel serve``: one API-request
record per model request) for the sessions that sent any, else from the transcripts
(``agentlog import``): one ``usage`` event per model response, with the response's
final counts. The ``source`` column says which. Counts are normalised at
import so that the four numbers mean the same for every agent:
``input_tokens`` (input not read from a cache), ``output_tokens`` (reasoning
included), ``cache_read_tokens`` and ``cache_write_tokens``.

Cost is computed from a price table shipped here, in US dollars per million
tokens, dated (:data:`PRICES_AS_OF`). A model matches a name when it is
that name or that name followed by ``-`` and more (a dated or preview
variant: ``claude-sonnet-4-5-20250929``); the longest matching name wins, so
``claude-opus-4-6`` matches nothing shipped here. A ``prices.toml`` in the data root overrides or adds models, no
network involved::

    as_of = "2026-11-30"
    [models."claude-sonnet-4-5"]
    input = 3.0
    output = 15.0
    cache_read = 0.30
    cache_write = 3.75

A model with no price gets a null cost, never a guess.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Final

from agentlog.core import UsageError

#: when the shipped prices were taken from the vendors' published price lists
PRICES_AS_OF: Final = "2025-11-24"
PRICES_FILE: Final = "prices.toml"


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float


#: model name → price (USD / million tokens), as the vendors published them
#: (Anthropic: cache writes at the 5-minute rate, 1.25× input; OpenAI and Google:
#: cached input at their cached rate, no write charge)
PRICES: Final[dict[str, Price]] = {
    "claude-opus-4-5": Price(5.0, 25.0, 0.50, 6.25),
    "claude-opus-4-1": Price(15.0, 75.0, 1.50, 18.75),
    "claude-opus-4-20250514": Price(15.0, 75.0, 1.50, 18.75),
    "claude-3-opus": Price(15.0, 75.0, 1.50, 18.75),
    "claude-sonnet-4-5": Price(3.0, 15.0, 0.30, 3.75),
    "claude-sonnet-4-20250514": Price(3.0, 15.0, 0.30, 3.75),
    "claude-3-7-sonnet": Price(3.0, 15.0, 0.30, 3.75),
    "claude-3-5-sonnet": Price(3.0, 15.0, 0.30, 3.75),
    "claude-haiku-4-5": Price(1.0, 5.0, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.0, 0.08, 1.0),
    "gpt-5": Price(1.25, 10.0, 0.125, 0.0),
    "gpt-5-codex": Price(1.25, 10.0, 0.125, 0.0),
    "gpt-5-mini": Price(0.25, 2.0, 0.025, 0.0),
    "gpt-5-nano": Price(0.05, 0.40, 0.005, 0.0),
    "gpt-4.1": Price(2.0, 8.0, 0.50, 0.0),
    "o3": Price(2.0, 8.0, 0.50, 0.0),
    "o4-mini": Price(1.10, 4.40, 0.275, 0.0),
    "gemini-2.5-pro": Price(1.25, 10.0, 0.31, 0.0),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.075, 0.0),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.025, 0.0),
    "gemini-3-pro": Price(2.0, 12.0, 0.20, 0.0),
}


class PriceError(UsageError, ValueError):
    """prices.toml is unreadable or holds a bad entry."""


def load_prices(root: str) -> tuple[dict[str, Price], str]:
    """The shipped prices overlaid with the data root's ``prices.toml``, and their date."""
    import tomllib

    prices = dict(PRICES)
    as_of = PRICES_AS_OF
    path = os.path.join(root, PRICES_FILE)
    if not os.path.exists(path):
        return prices, as_of
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise PriceError(f"{path}: {e}") from None
    if isinstance(data.get("as_of"), str):
        as_of = data["as_of"]
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise PriceError(f"{path}: [models] must be a table")
    for name, entry in models.items():
        if not isinstance(entry, dict):
            raise PriceError(f"{path}: models.{name} must be a table")
        values: dict[str, float] = {}
        for key in ("input", "output", "cache_read", "cache_write"):
            v = entry.get(key, 0.0)
            if type(v) not in (int, float) or v < 0:
                raise PriceError(f"{path}: models.{name}.{key} must be a number ≥ 0, not {v!r}")
            values[key] = float(v)
        unknown = set(entry) - set(values)
        if unknown:
            raise PriceError(f"{path}: models.{name}: unknown keys {sorted(unknown)}")
        prices[str(name)] = Price(**values)
    return prices, as_of


def prices_table(root: str) -> Any:
    """The prices as an Arrow table (prefix, input, output, cache_read, cache_write, as_of)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    prices, as_of = load_prices(root)
    names = sorted(prices)
    return pa.table({
        "prefix": pa.array(names, pa.string()),
        "input": pa.array([prices[n].input for n in names], pa.float64()),
        "output": pa.array([prices[n].output for n in names], pa.float64()),
        "cache_read": pa.array([prices[n].cache_read for n in names], pa.float64()),
        "cache_write": pa.array([prices[n].cache_write for n in names], pa.float64()),
        "as_of": pa.array([as_of] * len(names), pa.string()),
    })


def _int(path: str) -> str:
    return f"coalesce(CAST(json_extract(attrs, '$.{path}') AS BIGINT), 0)"


#: how far outside the first and last telemetry record of a session a transcript's response
#: still counts as covered by the telemetry (the two clocks' and the exporter's batching skew)
COVERED_SLACK_S: Final = 10

#: the ``usage`` view: one row per model response, from the agent's telemetry where it sent
#: any (``agentlog otel serve``: the API-request log records carrying token counts), else from
#: its transcript (the last one imported when a response was imported twice, e.g. while it was
#: still being written). A transcript's response is left out when its session's telemetry
#: covers its time (from the session's first telemetry record to its last, ±10 s): the agents
#: send no key shared by both (Claude Code's transcript has message ids, its telemetry request
#: ids, or none), so coverage decides, per response — a session whose telemetry began late
#: (installed mid-session) or stopped early keeps the transcript's counts outside that span,
#: and no token counts twice. Cost: what the agent reported, else the price table.
USAGE_VIEW: Final = f"""CREATE VIEW usage AS
WITH tel AS (
  SELECT event_id, provider, provider_session_id, agent_id, project_name, project_root, observed_at,
         coalesce(json_extract_string(attrs, '$.model'), model) AS model,
         json_extract_string(attrs, '$.request_id') AS message_id,
         {_int('input_tokens')} AS input_tokens, {_int('output_tokens')} AS output_tokens,
         {_int('cache_read_tokens')} AS cache_read_tokens, {_int('cache_write_tokens')} AS cache_write_tokens,
         TRY_CAST(json_extract(attrs, '$.cost_usd') AS DOUBLE) AS reported_cost, 'telemetry' AS source
  FROM events WHERE kind = 'telemetry' AND json_extract_string(attrs, '$.signal') = 'logs'
    AND json_extract(attrs, '$.input_tokens') IS NOT NULL
  QUALIFY row_number() OVER (PARTITION BY event_id ORDER BY log_key DESC, seq DESC) = 1
), covered AS (
  SELECT provider, provider_session_id, min(observed_at) - INTERVAL {COVERED_SLACK_S} SECOND AS lo,
         max(observed_at) + INTERVAL {COVERED_SLACK_S} SECOND AS hi
  FROM tel GROUP BY provider, provider_session_id
), tr AS (
  SELECT event_id, provider, provider_session_id, agent_id, project_name, project_root, observed_at,
         coalesce(json_extract_string(attrs, '$.model'), model) AS model,
         json_extract_string(attrs, '$.message_id') AS message_id,
         {_int('input_tokens')} AS input_tokens, {_int('output_tokens')} AS output_tokens,
         {_int('cache_read_tokens')} AS cache_read_tokens, {_int('cache_write_tokens')} AS cache_write_tokens,
         CAST(NULL AS DOUBLE) AS reported_cost, 'transcript' AS source
  FROM events e WHERE kind = 'usage'
    AND NOT EXISTS (SELECT 1 FROM covered c WHERE c.provider = e.provider
                    AND c.provider_session_id IS NOT DISTINCT FROM e.provider_session_id
                    AND e.observed_at BETWEEN c.lo AND c.hi)
  QUALIFY row_number() OVER (PARTITION BY provider, provider_session_id, coalesce(message_id, event_id)
                             ORDER BY log_key DESC, seq DESC) = 1
), u AS (
  SELECT * FROM tel UNION ALL SELECT * FROM tr
), priced AS (
  SELECT u.*, p.prefix AS price_model, p.as_of AS price_as_of,
         (u.input_tokens * p.input + u.output_tokens * p.output + u.cache_read_tokens * p.cache_read
          + u.cache_write_tokens * p.cache_write) / 1e6 AS table_cost
  FROM u LEFT JOIN _prices p ON lower(u.model) = p.prefix OR starts_with(lower(u.model), p.prefix || '-')
  QUALIFY row_number() OVER (PARTITION BY u.event_id ORDER BY length(p.prefix) DESC NULLS LAST) = 1
)
SELECT event_id, provider, provider_session_id, agent_id, project_name, project_root, observed_at, model,
       message_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
       input_tokens + output_tokens + cache_read_tokens + cache_write_tokens AS total_tokens,
       coalesce(reported_cost, table_cost) AS cost_usd, price_model, price_as_of, source,
       CASE WHEN reported_cost IS NOT NULL THEN 'telemetry' WHEN table_cost IS NOT NULL THEN 'price_table' END
         AS cost_source
FROM priced"""

GROUPS: Final = {
    "day": "CAST(observed_at AS DATE)",
    "session": "provider || ':' || coalesce(provider_session_id, '')",
    "model": "coalesce(model, '(unknown)')",
    "project": "coalesce(project_name, '(none)')",
    "provider": "provider",
}


def _since(since_us: int | None) -> str:
    return f"WHERE epoch_us(observed_at) >= {int(since_us)}" if since_us is not None else ""


def usage_sql(by: str, since_us: int | None) -> str:
    """The statement ``agentlog usage --by BY`` runs: per group, responses, the four
    counts, the cost of the priced ones, and how many responses and tokens have no price
    (their cost is not in ``cost_usd``)."""
    key = GROUPS[by]
    return (f"SELECT {key} AS {by}, count(*) AS responses, sum(input_tokens) AS input_tokens, "
            f"sum(output_tokens) AS output_tokens, sum(cache_read_tokens) AS cache_read_tokens, "
            f"sum(cache_write_tokens) AS cache_write_tokens, round(sum(cost_usd), 4) AS cost_usd, "
            f"count(*) FILTER (WHERE cost_usd IS NULL) AS unpriced, "
            f"coalesce(sum(total_tokens) FILTER (WHERE cost_usd IS NULL), 0) AS unpriced_tokens, "
            f"string_agg(DISTINCT source, '+' ORDER BY source) AS source "
            f"FROM usage {_since(since_us)} GROUP BY 1 ORDER BY 1")


def unpriced_sql(since_us: int | None) -> str:
    """The models without a price (in the shipped table or ``prices.toml``) and their tokens."""
    where = _since(since_us)
    return (f"SELECT coalesce(model, '(unknown)') AS model, count(*) AS responses, sum(total_tokens) AS tokens "
            f"FROM usage {where} {'AND' if where else 'WHERE'} cost_usd IS NULL GROUP BY 1 ORDER BY 3 DESC, 1")
