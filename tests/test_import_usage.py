"""Token usage and its cost: the price table, a prices.toml override, the usage view and
`agentlog usage` — on a hand-made transcript whose costs are worked out here, by hand,
from the table's numbers (not by the code under test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agentlog.cli import cli
from agentlog.importers.run import import_paths
from agentlog.query.usage import PRICES, Price, PriceError, load_prices

SONNET, HAIKU, UNPRICED = "claude-sonnet-4-5-20250929", "claude-haiku-4-5", "claude-opus-4-6"


def _assistant(session: str, cwd: Path, at: str, mid: str, model: str, usage: dict[str, int],
               uuid: str) -> dict[str, Any]:
    return {"type": "assistant", "sessionId": session, "uuid": uuid, "timestamp": at, "cwd": str(cwd),
            "message": {"id": mid, "model": model, "role": "assistant",
                        "content": [{"type": "text", "text": f"answer {uuid}"}], "usage": usage}}


def _usage(i: int, o: int, cr: int, cw: int) -> dict[str, int]:
    return {"input_tokens": i, "output_tokens": o, "cache_read_input_tokens": cr, "cache_creation_input_tokens": cw}


@pytest.fixture
def transcripts(tmp_path: Path) -> Path:
    """Two sessions on two days in two projects: m1 (Sonnet 4.5, streamed: its first
    record's usage is a snapshot, the second the final one), m2 (Haiku 4.5), m3 (a model
    the table has no price for)."""
    projects = tmp_path / "claude" / "projects"
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    a = [_assistant("s-a", alpha, "2026-11-01T10:00:00Z", "m1", SONNET, _usage(1000, 10, 10000, 4000), "a1"),
         _assistant("s-a", alpha, "2026-11-01T10:00:05Z", "m1", SONNET, _usage(1000, 2000, 10000, 4000), "a2"),
         _assistant("s-a", alpha, "2026-11-01T10:01:00Z", "m2", HAIKU, _usage(200, 300, 0, 0), "a3")]
    b = [_assistant("s-b", beta, "2026-11-02T09:00:00Z", "m3", UNPRICED, _usage(50, 60, 70, 80), "b1")]
    for name, records in (("s-a", a), ("s-b", b)):
        path = projects / "-w" / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return projects


# by hand, from the table's numbers (USD per million tokens):
# m1: Sonnet 4.5 is 3 in, 15 out, 0.30 cache read, 3.75 cache write
M1_COST = (1000 * 3 + 2000 * 15 + 10000 * 0.30 + 4000 * 3.75) / 1e6  # 0.051
# m2: Haiku 4.5 is 1 in, 5 out
M2_COST = (200 * 1 + 300 * 5) / 1e6  # 0.0017


def test_the_table_holds_the_numbers_the_hand_count_uses() -> None:
    assert PRICES["claude-sonnet-4-5"] == Price(3.0, 15.0, 0.30, 3.75)
    assert PRICES["claude-haiku-4-5"] == Price(1.0, 5.0, 0.10, 1.25)
    assert not any(UNPRICED == name or UNPRICED.startswith(name + "-") for name in PRICES)


def _rows(root: Path, sql: str) -> list[tuple[Any, ...]]:
    from agentlog.operations.refresh import open_current

    engine, _ = open_current(str(root), catch_up=True)
    with engine:
        return list(engine.run(sql).rows)


def test_each_response_is_priced_once_at_its_final_counts(agentlog_home: Path, transcripts: Path) -> None:
    import_paths(str(agentlog_home), ["claude-code"], [str(transcripts)])
    rows = _rows(agentlog_home, "SELECT message_id, model, input_tokens, output_tokens, cache_read_tokens, "
                                "cache_write_tokens, cost_usd, price_model FROM usage ORDER BY message_id")
    assert [r[:6] for r in rows] == [("m1", SONNET, 1000, 2000, 10000, 4000), ("m2", HAIKU, 200, 300, 0, 0),
                                     ("m3", UNPRICED, 50, 60, 70, 80)]
    assert rows[0][6] == pytest.approx(M1_COST) and rows[0][7] == "claude-sonnet-4-5"  # the dated name matched
    assert rows[1][6] == pytest.approx(M2_COST) and rows[1][7] == "claude-haiku-4-5"
    assert rows[2][6] is None and rows[2][7] is None  # no price: no cost, never a guess


def test_prices_toml_overrides_and_adds_models(agentlog_home: Path, transcripts: Path) -> None:
    (agentlog_home / "prices.toml").write_text(
        'as_of = "2026-12-01"\n'
        '[models."claude-sonnet-4-5"]\ninput = 10\noutput = 20\ncache_read = 1\ncache_write = 2\n'
        '[models."claude-opus-4-6"]\ninput = 4\noutput = 8\n')
    prices, as_of = load_prices(str(agentlog_home))
    assert as_of == "2026-12-01" and prices["claude-opus-4-6"] == Price(4.0, 8.0, 0.0, 0.0)
    assert prices["claude-haiku-4-5"] == PRICES["claude-haiku-4-5"]  # the others stay
    import_paths(str(agentlog_home), ["claude-code"], [str(transcripts)])
    costs = dict(_rows(agentlog_home, "SELECT message_id, cost_usd FROM usage"))
    assert costs["m1"] == pytest.approx((1000 * 10 + 2000 * 20 + 10000 * 1 + 4000 * 2) / 1e6)
    assert costs["m2"] == pytest.approx(M2_COST)
    assert costs["m3"] == pytest.approx((50 * 4 + 60 * 8) / 1e6)  # unset rates are 0
    as_of_rows = _rows(agentlog_home, "SELECT DISTINCT price_as_of FROM usage WHERE price_as_of IS NOT NULL")
    assert as_of_rows == [("2026-12-01",)]


@pytest.mark.parametrize("body, message", [
    ("[models.x]\ninput = -1\n", "must be a number"),
    ("[models.x]\ninput = 1\nfoo = 2\n", "unknown keys"),
    ("models = 3\n", "must be a table"),
    ("not toml = = =\n", "prices.toml"),
])
def test_a_bad_prices_toml_is_a_clear_error(agentlog_home: Path, body: str, message: str) -> None:
    (agentlog_home / "prices.toml").write_text(body)
    with pytest.raises(PriceError, match=message):
        load_prices(str(agentlog_home))
    result = CliRunner().invoke(cli, ["usage", "--json"], env={"AGENTLOG_HOME": str(agentlog_home)})
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output


def _usage_json(root: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["usage", "--json", *args], env={"AGENTLOG_HOME": str(root)})
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.output)
    return out


def test_the_usage_command_groups_filters_and_prints_json(agentlog_home: Path, transcripts: Path) -> None:
    import_paths(str(agentlog_home), ["claude-code"], [str(transcripts)])
    by_day = _usage_json(agentlog_home, "--by", "day")
    assert by_day["by"] == "day" and by_day["prices_as_of"]
    assert [(r["day"], r["responses"], r["output_tokens"]) for r in by_day["rows"]] == [
        ("2026-11-01", 2, 2300), ("2026-11-02", 1, 60)]
    assert by_day["rows"][0]["cost_usd"] == pytest.approx(M1_COST + M2_COST, abs=1e-4)
    assert by_day["rows"][1]["cost_usd"] is None and by_day["rows"][1]["unpriced"] == 1
    assert by_day["rows"][1]["unpriced_tokens"] == 50 + 60 + 70 + 80
    assert by_day["unpriced"] == [{"model": UNPRICED, "responses": 1, "tokens": 260}]
    sessions = {r["session"]: r["responses"] for r in _usage_json(agentlog_home, "--by", "session")["rows"]}
    assert sessions == {"claude_code:s-a": 2, "claude_code:s-b": 1}
    models = {r["model"]: r["input_tokens"] for r in _usage_json(agentlog_home, "--by", "model")["rows"]}
    assert models == {SONNET: 1000, HAIKU: 200, UNPRICED: 50}
    projects = {r["project"]: r["cache_write_tokens"] for r in _usage_json(agentlog_home, "--by", "project")["rows"]}
    assert projects == {"alpha": 4000, "beta": 80}
    (provider,) = _usage_json(agentlog_home, "--by", "provider")["rows"]
    assert provider["provider"] == "claude_code" and provider["responses"] == 3
    assert provider["cost_usd"] == pytest.approx(M1_COST + M2_COST, abs=1e-4)
    since = _usage_json(agentlog_home, "--by", "day", "--since", "2026-11-02")
    assert [r["day"] for r in since["rows"]] == ["2026-11-02"]
    assert _usage_json(agentlog_home, "--since", "2027-01-01")["rows"] == []


def test_the_usage_table_says_how_many_tokens_have_no_price(agentlog_home: Path, transcripts: Path) -> None:
    import_paths(str(agentlog_home), ["claude-code"], [str(transcripts)])
    result = CliRunner().invoke(cli, ["usage", "--by", "model"], env={"AGENTLOG_HOME": str(agentlog_home)})
    assert result.exit_code == 0, result.output
    assert "260 tokens in 1 response have no price" in result.output and UNPRICED in result.output
    bad = CliRunner().invoke(cli, ["usage", "--by", "week"], env={"AGENTLOG_HOME": str(agentlog_home)})
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    bad_since = CliRunner().invoke(cli, ["usage", "--since", "whenever"], env={"AGENTLOG_HOME": str(agentlog_home)})
    assert bad_since.exit_code == 2 and "--since" in bad_since.output
