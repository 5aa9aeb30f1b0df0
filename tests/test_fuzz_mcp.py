"""A fuzz pass over every MCP tool's arguments (issue 27): for each tool the server registers
(enumerated from the server itself, so a new tool is covered the day it is added), arguments made
by hypothesis from its input schema — of the right type and of the wrong one, required ones
missing, extra keys, huge strings, odd ids — called in-process through the server's own
``call_tool`` (the SDK's path for a tools/call request: argument validation, then the tool), against
a copy of a small real data root (tests/fuzz_support.py).

The answer must be a result, or a tool error saying why (the SDK's ``ToolError``, which a client
receives as ``isError`` with that text) — never a crash: an ``UnexpectedToolError`` is what the SDK
raises around an exception no tool expected (the client gets "Error executing tool …" and the
server logs a traceback). No answer may hold a traceback, and each must come within its time limit.

Bugs this pass found are kept as explicit regressions in :data:`REGRESSIONS`."""

from __future__ import annotations

import asyncio
import os
import traceback
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError

from agentlog.mcp.server import build
from fuzz_support import Seed, changes, copy_root, dates, either, ids, json_values, search_queries, seed_root, \
    statements, texts, time_limit

EXAMPLES = 100
"""Hypothesis examples per tool (the file runs in ~30 s on 2 cores: in the quick tier)."""
CALL_LIMIT = 60.0
"""Seconds one call may take before it counts as a hang."""


def _tools() -> dict[str, dict[str, Any]]:
    """Each tool the server registers, with its input schema (building the server touches no data root)."""
    return {t.name: t.input_schema for t in asyncio.run(build("/nonexistent").list_tools())}


TOOLS = _tools()


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Seed:
    base = tmp_path_factory.mktemp("fuzz-mcp-seed")
    return seed_root(base / "root", base / "scratch")


@pytest.fixture
def server(seed: Seed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    root = copy_root(seed, tmp_path / "root")
    monkeypatch.setenv("AGENTLOG_HOME", str(root))
    monkeypatch.chdir(tmp_path)
    return build(str(root))


# ---------------------------------------------------------------- arguments from the schema

# Over the protocol a string can hold what no command line can: NUL, any control character.
ANY_TEXT = st.one_of(texts(60), st.text(max_size=60), st.text(st.characters(max_codepoint=0x1F), max_size=20))


def _string(name: str, seed: Seed) -> st.SearchStrategy[str]:
    if name in ("subject", "ident", "session"):
        return either(ids(seed), ANY_TEXT)
    if name == "at":
        return either(dates(), ANY_TEXT)
    if name == "project":
        return either(st.sampled_from(seed.projects or ["x"]), ANY_TEXT)
    if name == "statement":
        return either(statements(), ANY_TEXT)
    if name == "query":
        return either(search_queries(), ANY_TEXT)
    if name == "direction":
        return either(st.sampled_from(["UP", "DOWN", "BOTH", "up", "both", "sideways", ""]), ANY_TEXT)
    if name == "outcome":
        return either(st.sampled_from(["failed", "succeeded", "superseded", "FAILED", ""]), ANY_TEXT)
    if name == "table":
        return either(st.sampled_from(["attempts", "events", "sessions", "nosuch", "events; drop table x", ""]),
                         ANY_TEXT)
    if name == "path":
        return either(st.sampled_from(["src/parser.py", "*.py", "**", "src/*", "[", "*a" * 400, ""]), ANY_TEXT)
    if name == "kind":
        return either(st.sampled_from(["fact", "decision", "pitfall", "procedure", "convention", "nosuch"]),
                         ANY_TEXT)
    return ANY_TEXT


def _integer(name: str) -> st.SearchStrategy[int]:
    """Mostly within the tool's budget (so the call gets past it), else anything: zero, negative, huge."""
    usual = {"max_rows": st.integers(1, 1000), "max_chars": st.integers(200, 200_000), "depth": st.integers(0, 12)}
    odd = st.one_of(st.sampled_from([0, -1, 2**31, 2**63, -(2**63), 10**30]), st.integers())
    return either(usual.get(name, st.integers(-3, 60)), odd, 8)


def _of_type(name: str, schema: dict[str, Any], seed: Seed) -> st.SearchStrategy[Any]:
    """A value of the type the schema gives (``anyOf`` with null: either)."""
    if "anyOf" in schema:
        return st.one_of(*[_of_type(name, s, seed) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "string":
        return _string(name, seed)
    if kind == "integer":
        return _integer(name)
    if kind == "null":
        return st.none()
    if kind == "array":
        if name == "changes":
            return st.lists(changes(seed), max_size=4)
        if name == "evidence":
            kinds = st.sampled_from(["attempt", "event", "session", "tool_call", "file", "url", "quote", "x", ""])
            return st.lists(st.one_of(st.tuples(kinds, ids(seed)).map(lambda t: f"{t[0]}:{t[1]}"), ANY_TEXT,
                                      st.dictionaries(st.sampled_from(["type", "value", "note"]), ANY_TEXT)),
                            max_size=4)
        return st.lists(ANY_TEXT, max_size=4)
    if kind == "object":
        return st.dictionaries(st.one_of(st.sampled_from(["statement", "rule", "goal", "steps", "chosen"]), ANY_TEXT),
                               json_values(ANY_TEXT), max_size=4)
    return json_values(ANY_TEXT)


def arguments(schema: dict[str, Any], seed: Seed) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for a tool: each property maybe (a required one now and then missing), seven in eight of
    its type and the rest any JSON value at all, and now and then keys the tool does not have."""
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for name, sub in props.items():
        parts[name] = either(_of_type(name, sub, seed), json_values(ANY_TEXT), 8)
    keep = st.fixed_dictionaries({}, optional=parts)
    with_required = st.fixed_dictionaries({n: parts[n] for n in props if n in required},
                                          optional={n: parts[n] for n in props if n not in required})
    extra = st.dictionaries(ANY_TEXT.filter(lambda k: k not in props), json_values(ANY_TEXT), max_size=2)
    return st.tuples(either(with_required, keep), either(st.just({}), extra)).map(lambda t: {**t[0], **t[1]})


# ---------------------------------------------------------------- the judge

def call(server: Any, name: str, args: dict[str, Any]) -> tuple[str, bool]:
    """(text of the answer, whether it is an error); fails on a crash, a traceback or a hang."""
    with time_limit(CALL_LIMIT, f"tool {name} {args!r:.300}"):
        try:
            result = asyncio.run(server.call_tool(name, args))
        except UnexpectedToolError as e:
            cause = "".join(traceback.format_exception(e.__cause__ or e))
            raise AssertionError(f"tool {name} crashed on {args!r:.2000}\n{cause}") from None
        except ToolError as e:  # a bad argument the SDK or the tool refused: the client reads this as isError
            text, is_error = str(e), True
        else:
            text = "".join(getattr(c, "text", "") for c in result.content)
            is_error = bool(result.is_error)
            if not is_error:
                assert result.structured_content is not None, (name, args)
    assert text.strip(), f"tool {name} answered nothing to {args!r:.500}"
    assert "Traceback" not in text, f"tool {name} answered a traceback to {args!r:.500}:\n{text[:3000]}"
    return text, is_error


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_fuzz_tool(name: str, seed: Seed, server: Any) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=bool(os.environ.get("CI")),
              suppress_health_check=list(HealthCheck))
    @given(args=arguments(TOOLS[name], seed))
    def fuzz(args: dict[str, Any]) -> None:
        call(server, name, args)

    fuzz()


def test_every_tool_is_fuzzed() -> None:
    assert len(TOOLS) >= 14 and "memory_propose" in TOOLS, sorted(TOOLS)


# ---------------------------------------------------------------- what the fuzz found

REGRESSIONS: list[tuple[str, dict[str, Any], bool, str]] = [
    # a well-formed id that names nothing: the library's ResolveError was not a ToolError, so the SDK
    # answered "Error executing tool why" and logged a traceback
    ("why", {"subject": "att_e3e70682-c209-4cac-629f-6fbed82c07cd"}, True, "has an id starting with"),
    ("trace", {"subject": "00000000-0000-771e-b0ff-2d4413f70a840"}, True, "has an id starting with"),
    # a lone surrogate (a JSON escape the HTTP transport's parser lets through): DuckDB's TypeError
    ("query", {"statement": "\udcff\udc80"}, True, "lone surrogate"),
    ("search", {"query": "pytest \ud800"}, True, "lone surrogate"),
    ("memory_propose", {"title": "t", "changes": [{"op": "create", "kind": "fact", "title": "\udcff"}]}, True,
     "lone surrogate"),
]


@pytest.mark.parametrize("name, args, is_error, says", REGRESSIONS,
                         ids=lambda v: (str(v)[:30] if not isinstance(v, bool) else ""))
def test_regression(name: str, args: dict[str, Any], is_error: bool, says: str, server: Any) -> None:
    text, error = call(server, name, args)
    assert error is is_error and says in text, (error, text[:500])
