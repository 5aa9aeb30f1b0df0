"""AttemptQL: the statement parser, dispatch against SQL, and time expressions."""

from __future__ import annotations

import pickle
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.query.attemptql import (
    PHASES,
    RESERVED,
    Diff,
    Explain,
    Filter,
    ParseError,
    Show,
    State,
    Subject,
    Target,
    Time,
    Trace,
    WhatIs,
    Why,
    is_attemptql,
    parse,
)
from agentlog.query.timeexpr import TimeError, format_us, resolve


def err(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse(text)
    return info.value


def show(text: str) -> Show:
    stmt = parse(text)
    assert isinstance(stmt, Show)
    return stmt


# ----------------------------------------------------------------------------- SHOW targets

TARGETS: list[tuple[str, Target]] = [
    ("ATTEMPTS", "attempts"),
    ("FAILED ATTEMPTS", "failed_attempts"),
    ("SUPERSEDED ATTEMPTS", "superseded_attempts"),
    ("SESSIONS", "sessions"),
    ("TURNS", "turns"),
    ("TOOL CALLS", "tool_calls"),
    ("TOOL_CALLS", "tool_calls"),
    ("HANDOFFS", "handoffs"),
    ("WORK UNITS", "work_units"),
    ("WORK_UNITS", "work_units"),
    ("DECISIONS", "decisions"),
    ("CORRECTIONS", "corrections"),
    ("RETRACTIONS", "retractions"),
    ("EDGES", "edges"),
    ("SIGNALS", "signals"),
    ("COMMITS", "commits"),
    ("CONFLICTS", "conflicts"),
]


@pytest.mark.parametrize(("words", "target"), TARGETS)
def test_show_every_target_in_any_case(words: str, target: Target) -> None:
    assert parse(f"SHOW {words}") == Show(target)
    assert parse(f"show {words.lower()};") == Show(target)
    assert parse(f"  Show\n  {words.title()}  -- trailing comment") == Show(target)


def test_show_evidence_for_subject() -> None:
    s = show("SHOW EVIDENCE FOR attempt att_01 LIMIT 3")
    assert s.target == "evidence"
    assert s.subject == Subject("attempt", "att_01", 18)
    assert s.limit == 3
    assert show("show evidence for project").subject == Subject("project", None, 18)
    assert show("SHOW EVIDENCE FOR 'some id' FOR phase=plan").subject == Subject("id", "some id", 18)


def test_show_handoffs_between() -> None:
    s = show("SHOW HANDOFFS BETWEEN agent=claude-code AND provider='openai'")
    assert s.target == "handoffs"
    assert s.between == (("agent", "claude-code"), ("provider", "openai"))
    e = err("SHOW HANDOFFS BETWEEN agent=a AND agent=a")
    assert e.code.startswith("AQL04")
    assert e.position == 34
    # same value under different fields is two different sides
    assert show("SHOW HANDOFFS BETWEEN agent=x AND provider=x").between == (("agent", "x"), ("provider", "x"))
    assert err("SHOW HANDOFFS BETWEEN tool=x AND agent=y").position == 22


def test_show_all_clauses() -> None:
    text = (
        "show tool calls for agent=claude, phase=Plan and since -1d AND path='src/a b.py' "
        "order by ts desc limit 3 until now including retracted;"
    )
    s = show(text)
    assert s == Show(
        "tool_calls",
        filters=(
            Filter("agent", "claude", 20),
            Filter("phase", "plan", 34),
            Filter("path", "src/a b.py", 63),
        ),
        since=Time("-1d", 55),
        until=Time("now", text.index("now")),
        order_by="ts",
        descending=True,
        limit=3,
        including_retracted=True,
    )


def test_show_filters_forms() -> None:
    text = "SHOW ATTEMPTS FOR project = agentlog, tool=Bash, since='2026-11-30', until 1767225600"
    s = show(text)
    assert [(f.field, f.value) for f in s.filters] == [("project", "agentlog"), ("tool", "Bash")]
    assert s.since == Time("2026-11-30", text.index("'2026"))
    assert s.until == Time("1767225600", text.index("1767"))
    s = show("SHOW SESSIONS FOR Status=ok FOR outcome='it''s done' FOR kind=x.y/z*:~ FOR turn=42")
    assert [(f.field, f.value) for f in s.filters] == [
        ("status", "ok"),
        ("outcome", "it's done"),
        ("kind", "x.y/z*:~"),
        ("turn", "42"),
    ]
    assert show("SHOW ATTEMPTS ORDER BY \"started_at\" ASC").order_by == "started_at"
    assert show("SHOW ATTEMPTS ORDER BY started_at ASC").descending is False
    assert show("SHOW ATTEMPTS ORDER BY started_at").descending is None


@pytest.mark.parametrize("phase", PHASES)
def test_every_phase_is_accepted(phase: str) -> None:
    assert show(f"SHOW TURNS FOR phase={phase.upper()}").filters == (Filter("phase", phase, 15),)


def test_unknown_phase() -> None:
    e = err("SHOW TURNS FOR phase=coding")
    assert (e.code, e.position) == ("AQL0404", 21)
    assert "plan" in e.expected


# ----------------------------------------------------------------------------- WHERE


def test_where_quoted_keywords_are_not_clause_keywords() -> None:
    s = show("SHOW ATTEMPTS WHERE approach = 'edit LIMIT x' LIMIT 5")
    assert s.where == "approach = 'edit LIMIT x'"
    assert s.limit == 5


def test_where_nested_brackets_and_stops() -> None:
    s = show(
        "SHOW ATTEMPTS WHERE (a IN (SELECT b FROM t ORDER BY c LIMIT 2) OR x[1] = 'SINCE') "
        "AND \"limit\" > 1 AND t.until IS NULL SINCE -2h ORDER BY a"
    )
    assert s.where == (
        "(a IN (SELECT b FROM t ORDER BY c LIMIT 2) OR x[1] = 'SINCE') AND \"limit\" > 1 AND t.until IS NULL"
    )
    assert s.since == Time("-2h", s.since.position if s.since else -1)
    assert s.order_by == "a"
    assert show("SHOW ATTEMPTS WHERE a = 1;").where == "a = 1"
    assert show("SHOW ATTEMPTS WHERE $$ LIMIT ) $$ = b INCLUDING RETRACTED").where == "$$ LIMIT ) $$ = b"


def test_where_comments_are_removed() -> None:
    s = show("SHOW ATTEMPTS WHERE a = 1 -- LIMIT 9 )\n  AND /* ) */ b = 2 LIMIT 3")
    assert s.where == "a = 1 \n  AND   b = 2"
    assert s.limit == 3


def test_where_errors() -> None:
    assert err("SHOW ATTEMPTS WHERE").code == "AQL0202"
    e = err("SHOW ATTEMPTS WHERE LIMIT 3")
    assert (e.position, e.expected) == (20, ("a predicate",))
    e = err("SHOW ATTEMPTS WHERE a) OR (b LIMIT 3")
    assert (e.code, e.position) == ("AQL0207", 21)
    e = err("SHOW ATTEMPTS WHERE (a = 1 LIMIT 3")
    assert (e.code, e.position) == ("AQL0207", 20)
    assert err("SHOW ATTEMPTS WHERE a = 'x LIMIT 3").code == "AQL0101"
    assert err("SHOW ATTEMPTS WHERE a = 1 /* open").code == "AQL0103"
    assert show("SHOW ATTEMPTS WHERE a = 1 WHERE b = 2").where == "a = 1 WHERE b = 2"
    assert err("SHOW ATTEMPTS WHERE a = 1 LIMIT 2 WHERE b = 2").code == "AQL0405"


# ----------------------------------------------------------------------------- other commands


def test_why() -> None:
    assert parse("WHY att_9 FAILED") == Why(Subject("id", "att_9", 4), "failed")
    assert parse("why session ses_1 status blocked;") == Why(Subject("session", "ses_1", 4), "blocked")
    assert parse("WHY project FAILED") == Why(Subject("project", None, 4), "failed")
    assert parse("WHY project web STATUS FAILED") == Why(Subject("project", "web", 4), "failed")
    assert parse("WHY project blocked failed") == Why(Subject("project", "blocked", 4), "failed")
    assert parse("WHY tool call tc_1 failed") == Why(Subject("tool_call", "tc_1", 4), "failed")
    assert parse("WHY span spn_1 failed").subject == Subject("tool_call", "spn_1", 4)  # type: ignore[union-attr]
    assert parse("WHY work unit wu_1 blocked").subject == Subject("work_unit", "wu_1", 4)  # type: ignore[union-attr]
    assert parse("WHY 'odd id' failed").subject == Subject("id", "odd id", 4)  # type: ignore[union-attr]
    e = err("WHY att_9 STATUS done")
    assert e.expected == ("BLOCKED", "FAILED")
    assert err("WHY att_9").code == "AQL0202"


@pytest.mark.parametrize(
    ("words", "kind"),
    [
        ("session", "session"),
        ("attempt", "attempt"),
        ("turn", "turn"),
        ("span", "tool_call"),
        ("tool_call", "tool_call"),
        ("tool call", "tool_call"),
        ("event", "event"),
        ("agent", "agent"),
        ("work_unit", "work_unit"),
        ("work unit", "work_unit"),
    ],
)
def test_subject_kinds(words: str, kind: str) -> None:
    assert parse(f"WHAT IS {words} x_1 DOING NOW") == WhatIs(Subject(kind, "x_1", 8))  # type: ignore[arg-type]


def test_what_is() -> None:
    assert parse("what is agent 'claude code' doing now") == WhatIs(Subject("agent", "claude code", 8))
    assert parse("WHAT IS project DOING NOW") == WhatIs(Subject("project", None, 8))
    assert parse("WHAT IS project web DOING NOW") == WhatIs(Subject("project", "web", 8))
    assert err("WHAT IS att_1 DOING").expected == ("NOW",)


def test_trace() -> None:
    assert parse("TRACE att_1 CAUSES") == Trace(Subject("id", "att_1", 6))
    assert parse("trace turn trn_2 causes direction BOTH depth 4") == Trace(Subject("turn", "trn_2", 6), 4, "both")
    assert parse("TRACE x CAUSES DEPTH 1 DIRECTION up;") == Trace(Subject("id", "x", 6), 1, "up")
    assert parse("TRACE x CAUSES DIRECTION Down").direction == "down"  # type: ignore[union-attr]
    e = err("TRACE x CAUSES DEPTH 0")
    assert (e.code, e.position) == ("AQL0403", 21)
    assert err("TRACE x CAUSES DEPTH -2").code == "AQL0403"
    assert err("TRACE x CAUSES DIRECTION sideways").expected == ("UP", "DOWN", "BOTH")
    assert err("TRACE x CAUSES DEPTH 2 DEPTH 3").code == "AQL0405"
    assert err("TRACE x CAUSES DEPTH 9999999999999999999999").code == "AQL0406"


def test_state() -> None:
    assert parse("STATE AT now") == State(None, Time("now", 9))
    assert parse("state project at '2026-11-30T15:00:00Z'") == State(
        Subject("project", None, 6), Time("2026-11-30T15:00:00Z", 17)
    )
    assert parse("STATE project web AT -1d") == State(Subject("project", "web", 6), Time("-1d", 21))
    assert parse("STATE session 'ses 1' AT yesterday;") == State(Subject("session", "ses 1", 6), Time("yesterday", 25))
    for text in ("STATE AS KNOWN AT now", "STATE project AS KNOWN AT now", "STATE x AT now AS KNOWN AT -1d"):
        e = err(text)
        assert e.code == "AQL0205"
        assert "AS KNOWN AT is not supported" in str(e)
        assert text[e.position :].upper().startswith("AS KNOWN")


def test_diff() -> None:
    assert parse("DIFF STATE -1d now") == Diff(None, Time("-1d", 11), Time("now", 15))
    assert parse("DIFF STATE project -1d now") == Diff(Subject("project", None, 11), Time("-1d", 19), Time("now", 23))
    assert parse("diff state project web '2026-11-01' today") == Diff(
        Subject("project", "web", 11), Time("2026-11-01", 23), Time("today", 36)
    )
    assert parse("DIFF STATE att_1 yesterday today") == Diff(
        Subject("id", "att_1", 11), Time("yesterday", 17), Time("today", 27)
    )
    assert parse("DIFF STATE session s1 -2h -1h").subject == Subject("session", "s1", 11)  # type: ignore[union-attr]
    assert err("DIFF STATE -1d").code == "AQL0202"
    assert err("DIFF STATE -1d now today yesterday").code == "AQL0203"
    # three values: the first is a subject
    assert parse("DIFF STATE ses_1 now today") == Diff(Subject("id", "ses_1", 11), Time("now", 17), Time("today", 21))


def test_explain() -> None:
    assert parse("EXPLAIN SHOW ATTEMPTS LIMIT 2") == Explain(Show("attempts", limit=2))
    assert parse("explain why x failed;") == Explain(Why(Subject("id", "x", 12), "failed"))
    e = err("EXPLAIN EXPLAIN SHOW ATTEMPTS")
    assert e.position == 8
    assert "EXPLAIN" not in e.expected and "SHOW" in e.expected
    assert "EXPLAIN" in err("FROBNICATE").expected


# ----------------------------------------------------------------------------- errors


def test_error_position_and_expected_list() -> None:
    e = err("SHOW ATEMPTS")
    assert e.position == 5
    assert e.code.startswith("AQL02")
    assert "ATTEMPTS" in e.expected and "TOOL CALLS" in e.expected
    assert str(e).startswith("unexpected 'ATEMPTS' at 5; expected one of: ATTEMPTS, ")
    assert e.message == str(e)
    assert e.caret("SHOW ATEMPTS") == "SHOW ATEMPTS\n     ^"


def test_caret_on_a_later_line() -> None:
    text = "SHOW ATTEMPTS\n\tFOR nope=1"
    e = err(text)
    assert e.position == text.index("nope")
    assert e.caret(text) == "\tFOR nope=1\n\t    ^"


def test_error_quotes_at_most_40_characters() -> None:
    long = "x" * 200
    e = err(f"SHOW ATTEMPTS {long}")
    assert long not in str(e)
    assert ("'" + "x" * 40 + "…'") in str(e)
    secret = "'" + "s" * 100 + "'"
    assert "s" * 41 not in str(err(f"SHOW {secret}"))


def test_lexical_errors() -> None:
    e = err("SHOW ATTEMPTS FOR project='abc")
    assert (e.code, e.position) == ("AQL0101", 26)
    assert "unterminated string" in str(e)
    assert err('SHOW ATTEMPTS ORDER BY "abc').code == "AQL0102"


def test_something_after_the_statement() -> None:
    e = err("SHOW ATTEMPTS; SHOW SESSIONS")
    assert (e.code, e.position, e.expected) == ("AQL0203", 15, ("end of statement",))
    e = err("SHOW ATTEMPTS LIMIT 5 garbage")
    assert e.position == 22
    assert "';'" in e.expected and "ORDER BY" in e.expected and "LIMIT" not in e.expected
    assert err("WHY x FAILED now").code == "AQL0203"
    assert err("SHOW ATTEMPTS ;;").position == 15


def test_reserved_word_as_value() -> None:
    e = err("SHOW ATTEMPTS FOR project=SHOW")
    assert (e.code, e.position) == ("AQL0204", 26)
    assert "reserved" in str(e)
    assert show("SHOW ATTEMPTS FOR project='SHOW'").filters == (Filter("project", "SHOW", 18),)
    assert err("WHY limit FAILED").code == "AQL0204"
    assert err("STATE session where AT now").code == "AQL0204"


def test_limit_must_be_positive() -> None:
    for text, pos in (("SHOW ATTEMPTS LIMIT 0", 20), ("SHOW ATTEMPTS LIMIT -3", 20)):
        e = err(text)
        assert (e.code, e.position) == ("AQL0402", pos)
    assert err("SHOW ATTEMPTS LIMIT ten").expected == ("an integer (LIMIT)",)
    assert err("SHOW ATTEMPTS LIMIT 1 LIMIT 2").code == "AQL0405"
    assert err("SHOW ATTEMPTS FOR since -1d SINCE -2d").code == "AQL0405"


def test_bad_time_and_bad_column() -> None:
    e = err("SHOW ATTEMPTS SINCE 'last tuesday'")
    assert (e.code, e.position) == ("AQL0210", 20)
    assert err("SHOW ATTEMPTS SINCE 2026-13-45").code == "AQL0210"
    assert err("SHOW ATTEMPTS ORDER BY a-b").position == 23
    assert err('SHOW ATTEMPTS ORDER BY "a b"').position == 23
    assert err("SHOW ATTEMPTS ORDER BY LIMIT 3").position == 23


def test_parse_error_pickles() -> None:
    e = err("SHOW ATEMPTS")
    again = pickle.loads(pickle.dumps(e))
    assert (again.message, again.position, again.code, again.expected) == (e.message, e.position, e.code, e.expected)


# ----------------------------------------------------------------------------- dispatch


@pytest.mark.parametrize(
    "text",
    [
        "SHOW ATTEMPTS",
        "show tool calls for agent=x",
        "SHOW tool_calls",
        "SHOW FAILED ATTEMPTS",
        "SHOW EVIDENCE FOR x",
        "  -- comment\n  why x failed",
        "TRACE x CAUSES",
        "STATE AT now",
        "DIFF STATE -1d now",
        "WHAT IS x DOING NOW",
        "EXPLAIN SHOW SESSIONS",
        "explain trace x causes",
        "WHY",
    ],
)
def test_is_attemptql_true(text: str) -> None:
    assert is_attemptql(text)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT * FROM events",
        "with t as (select 1) select * from t",
        "VALUES (1)",
        "FROM events",
        "DESCRIBE events",
        "SUMMARIZE events",
        "EXPLAIN SELECT 1",
        "EXPLAIN ANALYZE SELECT 1",
        "SHOW TABLES",
        "show all tables",
        "SHOW",
        "",
        "   -- only a comment",
        "'unterminated",
        "(SELECT 1)",
    ],
)
def test_is_attemptql_false(text: str) -> None:
    assert not is_attemptql(text)


# ----------------------------------------------------------------------------- properties

_FAST = settings(max_examples=150, deadline=None)

_WORDS = st.sampled_from(
    ["SHOW", "ATTEMPTS", "WHERE", "FOR", "project", "=", "'", "''", "(", ")", ";", "--", "\n", " ", "LIMIT", "0",
     "-1d", "now", "WHY", "STATE", "AT", "DIFF", "TRACE", "CAUSES", "DEPTH", "EXPLAIN", "HANDOFFS", "BETWEEN",
     "agent", "AND", ",", '"', "phase", "$$", "/*", "9" * 30, "²", "ORDER", "BY", "x", "AS", "KNOWN"]
)  # fmt: skip


@_FAST
@given(st.one_of(st.text(max_size=60), st.lists(_WORDS, max_size=14).map(" ".join), st.lists(_WORDS).map("".join)))
def test_parse_only_ever_raises_parse_error(text: str) -> None:
    try:
        parse(text)
    except ParseError as e:
        assert 0 <= e.position <= len(text)
        assert e.code[:5] in ("AQL01", "AQL02", "AQL04")
        e.caret(text)
    is_attemptql(text)


_value_word = st.from_regex(r"[a-z][a-z0-9_./:~*-]{0,11}", fullmatch=True).filter(
    lambda w: w.upper() not in RESERVED and "--" not in w
)
_value = st.one_of(
    _value_word.map(lambda w: (w, w)),
    st.text(max_size=12).map(lambda t: (t, "'" + t.replace("'", "''") + "'")),
)
_TIMES = ["now", "today", "yesterday", "-15m", "+2h", "-1w", "1767225600", "'2026-11-30'", "'2026-11-30 15:00'"]


def _case(word: str, flips: list[bool]) -> str:
    return "".join(c.upper() if f else c.lower() for c, f in zip(word, flips + [False] * len(word)))


@_FAST
@given(
    target=st.sampled_from(TARGETS),
    filters=st.lists(
        st.tuples(st.sampled_from(["project", "agent", "tool", "status", "path", "outcome", "kind"]), _value),
        max_size=3,
    ),
    phase=st.one_of(st.none(), st.sampled_from(PHASES)),
    since=st.one_of(st.none(), st.sampled_from(_TIMES)),
    until=st.one_of(st.none(), st.sampled_from(_TIMES)),
    where=st.one_of(st.none(), st.sampled_from(["a = 1", "(b IN (1, 2)) OR c = 'LIMIT 3'", "\"order\" > 0"])),
    order=st.one_of(
        st.none(),
        st.tuples(st.from_regex(r"[A-Za-z0-9_]{1,8}", fullmatch=True), st.sampled_from([None, True, False])),
    ),
    limit=st.one_of(st.none(), st.integers(1, 10**9)),
    retracted=st.booleans(),
    flips=st.lists(st.booleans(), max_size=12),
    semicolon=st.booleans(),
)  # fmt: skip
def test_generated_show_round_trips(
    target: tuple[str, Target],
    filters: list[tuple[str, tuple[str, str]]],
    phase: str | None,
    since: str | None,
    until: str | None,
    where: str | None,
    order: tuple[str, bool | None] | None,
    limit: int | None,
    retracted: bool,
    flips: list[bool],
    semicolon: bool,
) -> None:
    parts = [_case("show", flips), " ".join(_case(w, flips) for w in target[0].split())]
    items = [f"{field}={raw}" for field, (_, raw) in filters]
    if phase:
        items.append(f"phase = {phase.upper()}")
    if items:
        parts.append(_case("for", flips) + " " + " and ".join(items))
    if where is not None:
        parts.append(f"{_case('where', flips)} {where}")
    if since:
        parts.append(f"SINCE {since}")
    if until:
        parts.append(f"until {until}")
    if order:
        parts.append(f"ORDER BY {order[0]}" + {None: "", True: " DESC", False: " asc"}[order[1]])
    if limit is not None:
        parts.append(f"LIMIT {limit}")
    if retracted:
        parts.append("including RETRACTED")
    text = " ".join(parts) + (";" if semicolon else "")
    s = show(text)
    assert s.target == target[1]
    expected_filters = [(f, v) for f, (v, _) in filters] + ([("phase", phase)] if phase else [])
    assert [(f.field, f.value) for f in s.filters] == expected_filters
    assert s.where == where
    assert (s.since.text if s.since else None) == (since.strip("'") if since else None)
    assert (s.until.text if s.until else None) == (until.strip("'") if until else None)
    assert s.order_by == (order[0] if order else None)
    assert s.descending == (order[1] if order else None)
    assert s.limit == limit
    assert s.including_retracted is retracted


# ----------------------------------------------------------------------------- time expressions

NOW = 1_796_052_345_678_901  # 2026-11-30T15:25:45.678901Z
DAY = 86_400_000_000


def us(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=timezone.utc).timestamp()) * 1_000_000


def test_now_fixture_is_what_it_says() -> None:
    assert format_us(NOW) == "2026-11-30T15:25:45.678901Z"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-30T15:00:00Z", us(2026, 11, 30, 15)),
        ("2026-11-30t15:00:00z", us(2026, 11, 30, 15)),
        ("2026-11-30 15:00", us(2026, 11, 30, 15)),
        ("2026-11-30T15:00:00.123+02:00", us(2026, 11, 30, 13) + 123_000),
        ("2026-11-30T15:00:00.1234567-0130", us(2026, 11, 30, 16, 30) + 123_456),
        ("2026-11-30T15:00:00", us(2026, 11, 30, 15)),
        ("2026-11-30", us(2026, 11, 30)),
        ("  2026-11-30  ", us(2026, 11, 30)),
        ("1767225600", 1_767_225_600_000_000),
        ("1767225600123", 1_767_225_600_123_000),
        ("1767225600123456", 1_767_225_600_123_456),
        ("0", 0),
        ("now", NOW),
        ("NOW", NOW),
        ("today", us(2026, 11, 30)),
        ("yesterday", us(2026, 11, 29)),
        ("-30s", NOW - 30_000_000),
        ("-15m", NOW - 15 * 60_000_000),
        ("-2h", NOW - 2 * 3_600_000_000),
        ("-1d", NOW - DAY),
        ("-1w", NOW - 7 * DAY),
        ("+2h", NOW + 2 * 3_600_000_000),
    ],
)
def test_resolve(text: str, expected: int) -> None:
    assert resolve(text, NOW) == expected


@pytest.mark.parametrize(
    "text",
    ["", "  ", "soon", "-15", "15m", "-15y", "2026-13-01", "2026-02-30", "2026-11-30T25:00", "2026-11-30T15:00+24:00",
     "2026-W48", "2026-11-30T15", "-99999999999999w", "9" * 40, "1.5", "-1d ago"],
)  # fmt: skip
def test_resolve_rejects(text: str) -> None:
    with pytest.raises(TimeError) as info:
        resolve(text, NOW)
    assert "accepted" in str(info.value) or "out of range" in str(info.value)


def test_resolve_error_names_forms_and_is_short() -> None:
    with pytest.raises(TimeError) as info:
        resolve("x" * 100, NOW)
    msg = str(info.value)
    assert "RFC 3339" in msg and "YYYY-MM-DD" in msg and "-15m" in msg and "yesterday" in msg
    assert "x" * 41 not in msg


def test_format_us() -> None:
    assert format_us(0) == "1970-01-01T00:00:00Z"
    assert format_us(us(2026, 11, 30, 15)) == "2026-11-30T15:00:00Z"
    assert format_us(us(2026, 11, 30, 15) + 123_000) == "2026-11-30T15:00:00.123000Z"
    assert format_us(-1) == "1969-12-31T23:59:59.999999Z"
    assert format_us(resolve("0001-01-01", 0)) == "0001-01-01T00:00:00Z"
    with pytest.raises(TimeError):
        format_us(10**20)


@_FAST
@given(st.integers(resolve("0001-01-01", 0), resolve("9999-12-31T23:59:59.999999Z", 0)))
def test_format_resolve_round_trip(value: int) -> None:
    assert resolve(format_us(value), 0) == value
