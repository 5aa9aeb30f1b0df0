"""Every distribution of the synthetic workload, with where it comes from.

The shape reproduces the model of attemptdb's published benchmark
(``../shared/seeds/000_fac8648d9997f365.txt``, sections "Where the
distributions come from", "Shape" and "Calibration"). Each table below
carries its provenance:

- ``seed doc: …`` — the number is stated in that document;
- ``assumed: …`` — the document gives no number (or only a range or one
  quantile) and the rest was chosen here; the reason is given.

Sizes are bytes of text, durations milliseconds unless the name says
otherwise. :func:`describe` lists every table for reports.

Two kinds of tables:

- :class:`Choice` — a discrete weighted choice (weights need not sum to 100);
- :class:`Quantiles` — a continuous distribution given by quantile points
  ``(q, value)`` from ``q = 0`` (minimum) to ``q = 1`` (maximum), sampled by
  inverse transform with log-linear interpolation between points (linear
  where a value is 0).
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Choice:
    """A weighted discrete distribution."""

    name: str
    items: tuple[tuple[str, float], ...]
    provenance: str
    _keys: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _cum: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        total = 0.0
        cum: list[float] = []
        for _, w in self.items:
            if w < 0:
                raise ValueError(f"{self.name}: negative weight")
            total += w
            cum.append(total)
        if total <= 0:
            raise ValueError(f"{self.name}: weights sum to zero")
        object.__setattr__(self, "_keys", tuple(k for k, _ in self.items))
        object.__setattr__(self, "_cum", tuple(cum))

    def pick(self, rng: random.Random) -> str:
        x = rng.random() * self._cum[-1]
        return self._keys[bisect.bisect_right(self._cum, x)]

    def quota(self) -> Quota:
        """A stratified chooser over this table (see :class:`Quota`)."""
        return Quota(self)

    def share(self, key: str) -> float:
        """Probability of ``key``."""
        return sum(w for k, w in self.items if k == key) / self._cum[-1]

    def without(self, *keys: str) -> Choice:
        """The same table renormalised without ``keys``."""
        return Choice(self.name + " (without " + ", ".join(keys) + ")",
                      tuple((k, w) for k, w in self.items if k not in keys), self.provenance)

    def describe(self) -> dict[str, Any]:
        total = self._cum[-1]
        return {"name": self.name, "type": "choice", "provenance": self.provenance,
                "items": {k: round(100 * w / total, 3) for k, w in self.items}}


class Quota:
    """Draws from a :class:`Choice` so that counts track the shares closely (stratified sampling).

    Each draw picks a key with probability proportional to how far its count is
    below its share of the draws so far (plus one); counts never drift more than
    about one draw from ``share × n``. Used for the per-session provider mix, so
    that a 40,000-event sample of ~40 sessions still has the seed's mix of
    sessions rather than whatever 40 independent draws give.
    """

    def __init__(self, table: Choice) -> None:
        total = sum(w for _, w in table.items)
        self.keys = [k for k, _ in table.items]
        self.shares = [w / total for _, w in table.items]
        self.counts = [0] * len(self.keys)
        self.n = 0

    def pick(self, rng: random.Random) -> str:
        self.n += 1
        deficits = [max(0.0, s * self.n - c) for s, c in zip(self.shares, self.counts)]
        x = rng.random() * sum(deficits)
        i = 0
        for i, d in enumerate(deficits):
            x -= d
            if x < 0 and d > 0:
                break
        while deficits[i] <= 0:  # float edge: fall back to the largest deficit
            i = max(range(len(deficits)), key=deficits.__getitem__)
        self.counts[i] += 1
        return self.keys[i]


@dataclass(frozen=True)
class Quantiles:
    """A continuous distribution given by quantile points."""

    name: str
    points: tuple[tuple[float, float], ...]
    provenance: str
    unit: str = "bytes"
    _qs: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        qs = [q for q, _ in self.points]
        if qs[0] != 0.0 or qs[-1] != 1.0 or any(b <= a for a, b in zip(qs, qs[1:])):
            raise ValueError(f"{self.name}: quantiles must rise strictly from 0 to 1")
        vs = [v for _, v in self.points]
        if any(b < a for a, b in zip(vs, vs[1:])) or vs[0] < 0:
            raise ValueError(f"{self.name}: values must not fall")
        object.__setattr__(self, "_qs", tuple(qs))

    def at(self, u: float) -> float:
        """The value at quantile ``u`` (0..1)."""
        i = bisect.bisect_right(self._qs, u) - 1
        if i >= len(self.points) - 1:
            return self.points[-1][1]
        q0, v0 = self.points[i]
        q1, v1 = self.points[i + 1]
        f = (u - q0) / (q1 - q0)
        if f <= 0.0:
            return v0
        if v0 <= 0 or v1 <= 0 or v0 == v1:
            return v0 + f * (v1 - v0)
        return math.exp(math.log(v0) + f * (math.log(v1) - math.log(v0)))

    def sample(self, rng: random.Random) -> float:
        return self.at(rng.random())

    def draw(self, rng: random.Random, scale: float = 1.0) -> int:
        """A sample rounded down to an integer."""
        return int(self.at(rng.random()) * scale)

    def mean(self, steps: int = 20000) -> float:
        """Numerical mean (midpoint rule over the quantile function)."""
        return sum(self.at((i + 0.5) / steps) for i in range(steps)) / steps

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "type": "quantiles", "unit": self.unit, "provenance": self.provenance,
                "points": {f"p{round(q * 100, 2):g}": v for q, v in self.points},
                "mean": round(self.mean(2000), 1)}


@dataclass(frozen=True)
class Scalar:
    """One number and where it comes from."""

    name: str
    value: float
    provenance: str
    unit: str = ""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "type": "scalar", "value": self.value, "unit": self.unit,
                "provenance": self.provenance}


# ---------------------------------------------------------------------------
# Sessions

START_TIME_US = 1_767_603_600_000_000
"""2026-01-05T09:00:00Z (seed doc: "synthetic time starting 2026-01-05T09:00:00Z")."""

PROVIDER_MIX = Choice(
    "provider mix per session",
    (("claude_code", 70.0), ("codex", 20.0), ("cursor", 7.0), ("gemini_cli", 3.0)),
    "seed doc: Claude Code 70%, Codex 20%, Cursor 7%, Gemini CLI 3% (the requested public mix); drawn "
    "stratified (Quota) rather than independently, an assumption made so small samples keep the mix",
)

NOISE_SESSION_SHARE = Scalar(
    "single-event noise sessions", 0.01,
    "seed doc: plus 1% single-event noise sessions (capture_test/unknown)", "share of sessions",
)

NOISE_KIND = Choice(
    "noise session kind", (("capture_test", 50.0), ("unknown", 50.0)),
    "seed doc: capture_test 10 and unknown 10 events in the generated kind table (an even split)",
)

CLAUDE_SOURCE = Choice(
    "Claude Code session source",
    (("transcript", 45.0), ("hook", 55.0)),
    "seed doc: 45% of Claude Code sessions are transcript reconstructions (drawn stratified, see Quota)",
)

ACTIVE_SESSIONS = Scalar(
    "sessions active at a time", 3,
    "seed doc: three sessions active at a time (here: three lanes, each running sessions back to back)",
)

SESSION_START_GAP_S = Quantiles(
    "gap before a lane's next session",
    ((0.0, 20.0), (1.0, 28_800.0)),
    "seed doc: session start gaps 20 s – 8 h (itself assumed there); log-uniform in between is assumed here",
    "s",
)

SESSION_STARTED_SHARE = Scalar(
    "hook sessions with a session_started event", 0.5,
    "assumed: the seed's table has 446 session_started for 1529 sessions; half of the Claude Code, "
    "Codex and Gemini hook sessions (hook installed mid-session or resumed) gives about that; "
    "Cursor sessions have none (seed doc) and transcripts carry no start record",
    "share of sessions",
)

SESSION_ENDED_SHARE = Scalar(
    "sessions with a session_ended event", 0.10,
    "seed doc: 10% of the synthetic sessions have a session_ended (Codex has no SessionEnd hook, "
    "transcripts no end record: those never end)",
    "share of sessions",
)

TURNS_PER_SESSION = Choice(
    "turns per session",
    (("1", 30.0), ("2", 25.0), ("3", 12.0), ("4", 8.0), ("5", 6.0), ("6", 5.0), ("7", 4.0), ("8", 3.0),
     ("9", 2.5), ("10", 2.0), ("11", 1.5), ("12", 1.0)),
    "seed doc: turns per session 1–12, median 2; the weights between are assumed",
)

TOOL_CALLS_PER_TURN = Quantiles(
    "tool calls per turn",
    ((0.0, 1.0), (0.10, 6.0), (0.25, 22.0), (0.50, 60.0), (0.75, 140.0), (0.90, 300.0), (0.97, 540.0),
     (0.99, 760.0), (1.0, 900.0)),
    "seed doc: 1–900, median 60, long tail (the sample's turns had p50 176, max 857); the other "
    "quantiles are assumed",
    "calls",
)

# -- subagents -----------------------------------------------------------------

SUBAGENT_CALL_SHARE = Scalar(
    "tool calls inside subagents", 0.77,
    "seed doc: 77% of tool calls run inside subagents, dispatched by an Agent tool call", "share of calls",
)

DISPATCHES_PER_CALL = Scalar(
    "subagent dispatches per tool call of a turn", 0.029,
    "assumed: the seed's tool mix has subagent (Agent/Task) calls at 2.2% of starts; a turn of m calls "
    "gets m × 0.029 dispatches (stochastically rounded; none in the turn when it rounds to 0). Only "
    "providers with subagents (Claude Code, Codex) dispatch",
    "dispatches per call",
)

SUBAGENT_FRACTION = Quantiles(
    "share of a turn's calls made inside its subagents (turns with a dispatch)",
    ((0.0, 0.70), (0.5, 0.89), (1.0, 0.99)),
    "assumed: chosen so that 77% of all tool calls run inside subagents (seed doc) once Cursor, Gemini "
    "and turns without a dispatch (all main-agent calls) are counted; the calls are split between the "
    "turn's dispatches at uniformly random cut points, so a dispatch holds ~36 calls on average",
    "share",
)

SUBAGENT_STOPS = Choice(
    "subagent_stopped events per dispatch",
    tuple((str(k), w) for k, w in zip(range(1, 21), (
        14.0, 13.5, 12.5, 11.5, 10.0, 8.5, 7.0, 5.5, 4.5, 3.5, 2.8, 2.2, 1.7, 1.3, 1.0, 0.8, 0.6, 0.45, 0.35, 0.3))),
    "seed doc: each dispatch has 1–20 subagent_stopped events; the shape (mean ~5.3, tuned so that "
    "subagent_stopped is ~6.4% of events as in the seed's kind table) is assumed. Every stop but the "
    "last is one a stop hook blocked (stop_hook_active on the next)",
)

SUBAGENT_TYPES = Choice(
    "subagent types",
    (("general-purpose", 55.0), ("Explore", 20.0), ("Plan", 8.0), ("reviewer", 7.0), ("test-runner", 6.0),
     ("", 4.0)),
    "assumed: the real fixtures show general-purpose and the empty string; the others are plausible names",
)

# -- tools ---------------------------------------------------------------------

TOOL_MIX = Choice(
    "tool mix over starts",
    (("shell", 70.5), ("edit", 10.1), ("read", 8.9), ("write", 6.1), ("subagent", 2.2), ("web", 0.45),
     ("search", 0.8), ("mcp", 0.4), ("plan", 0.35), ("other", 0.2)),
    "seed doc: shell 70.5%, edit 10.1%, read 8.9%, write 6.1%, subagent 2.2%, web 0.45%, "
    "other/search/MCP < 1%; the split of the remaining 1.75% (search 0.8, mcp 0.4, plan 0.35, "
    "other 0.2) is assumed. 'subagent' is not drawn from this table: DISPATCHES_PER_CALL decides it",
)

CALL_MIX = TOOL_MIX.without("subagent")

SHELL_FAIL_RATE = Scalar("shell calls that fail", 0.020, "seed doc: shell calls fail 2.0% of the time", "share")
SHELL_FAIL_CLASS = Choice(
    "shell failure class", (("file_not_found", 35.0), ("nonzero_exit", 65.0)),
    "seed doc: file_not_found / nonzero_exit; the 35/65 split is assumed",
)
EDIT_FAIL_RATE = Scalar("edits that fail (string_mismatch)", 0.009, "seed doc: edits fail 0.9% (string_mismatch)",
                        "share")
DENY_RATE = Scalar(
    "tool starts denied", 0.001,
    "seed doc: 0.1% of starts are denied (Claude Code only: Codex, Cursor and Gemini send no denial event "
    "the recorder sees)",
    "share",
)
STDERR_SHARE = Scalar("successful shell calls with stderr", 0.15, "assumed", "share")


def stderr_size(rng: random.Random) -> int:
    """Size of a successful call's stderr: 0 (85%) or drawn from SHELL_STDERR (two draws, always)."""
    present = rng.random() < STDERR_SHARE.value
    size = SHELL_STDERR.draw(rng)
    return size if present else 0

# -- content sizes (bytes) -----------------------------------------------------

SHELL_COMMAND = Quantiles(
    "shell command",
    ((0.0, 8.0), (0.25, 55.0), (0.50, 150.0), (0.75, 550.0), (0.90, 3000.0), (0.97, 13000.0), (0.99, 24000.0),
     (1.0, 40000.0)),
    "assumed: the seed names a SHELL_COMMAND table without its numbers; its size-by-kind table has "
    "tool_call_started/shell at 7.1 KB of JSON (content + raw), i.e. commands of ~3 KB on average "
    "(heredocs and inline scripts make the tail)",
)
SHELL_OUTPUT = Quantiles(
    "shell output (stdout)",
    ((0.0, 0.0), (0.10, 40.0), (0.25, 260.0), (0.50, 1200.0), (0.75, 4300.0), (0.90, 13600.0), (0.97, 22500.0),
     (1.0, 32000.0)),
    "seed doc: shell output p50 1.2 KB, p90 13.6 KB, max 32 KB; the other quantiles are assumed",
)
SHELL_STDERR = Quantiles(
    "shell stderr (when present)",
    ((0.0, 30.0), (0.50, 220.0), (0.90, 1800.0), (1.0, 8000.0)),
    "assumed",
)
FILE_SIZE = Quantiles(
    "file size (what a read returns, what an edit's originalFile holds)",
    ((0.0, 150.0), (0.10, 2200.0), (0.25, 5200.0), (0.50, 11800.0), (0.75, 24000.0), (0.90, 47000.0),
     (0.97, 72000.0), (1.0, 110000.0)),
    "seed doc: file reads p50 11.8 KB, p90 47 KB; the other quantiles are assumed",
)
EDIT_CANDIDATES = Scalar(
    "files considered per edit (the smallest is edited)", 3,
    "assumed: agents edit smaller files than they read — the seed's size table has tool_call_finished/"
    "file_edit at 16 KB of JSON against 39 KB for a read, though an Edit result carries the whole "
    "original file; taking the smallest of three popularity-drawn paths gives about that",
    "files",
)
PARTIAL_READ_SHARE = Scalar("reads with offset/limit", 0.10, "assumed", "share")
WRITE_CONTENT = Quantiles(
    "written file content",
    ((0.0, 200.0), (0.25, 4000.0), (0.50, 10000.0), (0.75, 21000.0), (0.90, 40000.0), (1.0, 90000.0)),
    "assumed: the seed's tool_call_started/file_write is 35 KB of JSON (content + raw), ~16 KB of content",
)
EDIT_STRING = Quantiles(
    "edit old_string / new_string",
    ((0.0, 12.0), (0.25, 120.0), (0.50, 380.0), (0.75, 900.0), (0.90, 2200.0), (1.0, 9000.0)),
    "assumed: the seed's tool_call_started/file_edit is 3.7 KB of JSON (both strings, content + raw)",
)
PROMPT = Quantiles(
    "user prompt",
    ((0.0, 3.0), (0.25, 14.0), (0.50, 32.0), (0.75, 500.0), (0.90, 5000.0), (0.97, 8500.0), (1.0, 11000.0)),
    "seed doc: prompts p50 32 B, p90 5 KB, max 11 KB; the other quantiles are assumed",
)
AGENT_PROMPT = Quantiles(
    "subagent dispatch prompt",
    ((0.0, 300.0), (0.25, 2500.0), (0.50, 5500.0), (0.75, 10000.0), (0.90, 16000.0), (1.0, 32000.0)),
    "assumed: the seed's tool_call_started/subagent is 17 KB of JSON (content + raw), ~8 KB of prompt",
)
AGENT_RESULT = Quantiles(
    "subagent result text",
    ((0.0, 80.0), (0.50, 1400.0), (0.90, 6000.0), (1.0, 16000.0)),
    "assumed: the seed's tool_call_finished/subagent is 22 KB against 17 KB for the start",
)
MESSAGE = Quantiles(
    "assistant message (transcript text, Cursor afterAgentResponse, Stop last_assistant_message)",
    ((0.0, 20.0), (0.25, 200.0), (0.50, 700.0), (0.75, 2000.0), (0.90, 4500.0), (1.0, 12000.0)),
    "assumed: the seed's agent_message is 6.5 KB and turn_stopped 3 KB of JSON",
)
SUBAGENT_MESSAGE = Quantiles(
    "subagent last_assistant_message (SubagentStop)",
    ((0.0, 16.0), (0.50, 180.0), (0.90, 1100.0), (1.0, 5000.0)),
    "assumed: the seed's subagent_stopped is 2.0 KB of JSON",
)
WEB_OUTPUT = Quantiles(
    "web fetch / search result",
    ((0.0, 150.0), (0.50, 2200.0), (0.90, 7500.0), (1.0, 20000.0)),
    "assumed: the seed's tool_call_finished/web is 7 KB of JSON",
)
SEARCH_OUTPUT = Quantiles(
    "grep / glob result",
    ((0.0, 30.0), (0.50, 700.0), (0.90, 5000.0), (1.0, 20000.0)),
    "assumed",
)
MCP_OUTPUT = Quantiles(
    "MCP tool result",
    ((0.0, 60.0), (0.50, 900.0), (0.90, 6000.0), (1.0, 24000.0)),
    "assumed",
)

# -- time ----------------------------------------------------------------------

THINK_TIME_S = Quantiles(
    "think time between tool calls",
    ((0.0, 0.05), (0.25, 0.25), (0.50, 0.7), (0.75, 2.6), (0.90, 9.7), (0.99, 80.0), (1.0, 600.0)),
    "seed doc: the sampled gap table: p50 0.7 s, p90 9.7 s, p99 80 s, capped at 10 min; the other "
    "quantiles are assumed",
    "s",
)
USER_GAP_S = Quantiles(
    "gap between a turn's end and the next prompt",
    ((0.0, 3.0), (0.50, 45.0), (0.90, 600.0), (1.0, 3600.0)),
    "assumed",
    "s",
)
DURATION_MS: dict[str, Quantiles] = {
    "shell": Quantiles(
        "shell duration",
        ((0.0, 2.0), (0.25, 12.0), (0.50, 40.0), (0.75, 700.0), (0.90, 6000.0), (0.99, 62000.0), (1.0, 600000.0)),
        "seed doc: shell p50 40 ms, p90 6 s, p99 62 s; the rest (cap 10 min) is assumed", "ms"),
    "read": Quantiles("read duration", ((0.0, 1.0), (0.5, 6.0), (0.9, 30.0), (1.0, 800.0)), "assumed", "ms"),
    "edit": Quantiles("edit duration", ((0.0, 2.0), (0.5, 16.0), (0.9, 70.0), (1.0, 1500.0)), "assumed", "ms"),
    "write": Quantiles("write duration", ((0.0, 2.0), (0.5, 12.0), (0.9, 60.0), (1.0, 1500.0)), "assumed", "ms"),
    "search": Quantiles("search duration", ((0.0, 5.0), (0.5, 60.0), (0.9, 450.0), (1.0, 6000.0)), "assumed", "ms"),
    "web": Quantiles("web duration", ((0.0, 150.0), (0.5, 1600.0), (0.9, 6500.0), (1.0, 30000.0)), "assumed", "ms"),
    "mcp": Quantiles("MCP duration", ((0.0, 20.0), (0.5, 320.0), (0.9, 3000.0), (1.0, 30000.0)), "assumed", "ms"),
    "plan": Quantiles("plan tool duration", ((0.0, 1.0), (0.5, 4.0), (1.0, 200.0)), "assumed", "ms"),
    "other": Quantiles("other tool duration", ((0.0, 1.0), (0.5, 30.0), (1.0, 5000.0)), "assumed", "ms"),
}

# -- turn-level events ---------------------------------------------------------

NOTIFICATION_PER_TURN = Scalar(
    "turns with a notification", 0.30,
    "assumed: notification is 0.1% of events in the seed's table (~1 per 4 turns of the providers that "
    "have a Notification hook: Claude Code and Gemini CLI)",
    "share of turns",
)
TEXT_BEFORE_CALL = Scalar(
    "main-agent tool calls preceded by assistant text", 0.05,
    "assumed: agent_message is 0.5% of events in the seed's table; it comes from transcripts (assistant "
    "text records) and Cursor's afterAgentResponse",
    "share of calls",
)

# -- projects and paths --------------------------------------------------------

PROJECTS = Scalar("projects", 12, "seed doc: 12 projects with Zipf weights")
PROJECT_ZIPF = Scalar("Zipf exponent of project popularity", 1.0, "assumed: the seed says Zipf, not which exponent")
PATHS_PER_PROJECT = Scalar("paths per project", 160, "seed doc: 160 paths each")
PATH_ZIPF = Scalar(
    "Zipf exponent of file popularity inside a project", 0.9,
    "assumed: agents keep returning to a few files (the TRACE subject is one of them)",
)
PATH_DEPTH = Choice(
    "path depth (components below the project root)",
    (("4", 91.0), ("2", 2.0), ("3", 4.0), ("5", 2.5), ("6", 0.5)),
    "seed doc: depth 4 for 91% of paths; the other depths are assumed",
)
EXTENSIONS = Choice(
    "file extensions",
    (("rs", 82.0), ("txt", 8.5), ("jsonl", 3.5), ("py", 2.5), ("md", 2.0), ("toml", 1.0), ("json", 0.5)),
    "seed doc: rs 82%, txt 8.5%, jsonl 3.5%, py 2.5%, md 2%; the remaining 1.5% (toml, json) is assumed",
)
PROJECT_ROOT = "/srv/agentlog-bench"
"""assumed: working directories live under a prefix that exists on no real machine, so the capture
path's git lookup finds nothing and every run sees the same project facts."""

# -- the TRACE fixture -----------------------------------------------------------

CHAIN_SESSION_ID = "bench-chain-session"
CHAIN_EDITS = Scalar(
    "sequential failing edits in the fixture session", 200,
    "seed doc: one fixture session (bench-chain-session, at the midpoint of the stream) with a turn of 200 "
    "sequential failing edits of one file; scaled down to events // 10 for samples under 2,000 events "
    "(assumed) so that it never dominates a small sample",
)

# -- providers' identities -------------------------------------------------------

MODELS: dict[str, Choice] = {
    "claude_code": Choice("Claude models", (("claude-sonnet-4-5", 60.0), ("claude-opus-4-5", 30.0),
                                            ("claude-haiku-4-5", 10.0)), "assumed"),
    "codex": Choice("Codex models", (("gpt-5-codex", 70.0), ("gpt-5", 30.0)), "assumed"),
    "cursor": Choice("Cursor models", (("composer-1", 50.0), ("claude-sonnet-4-5", 30.0), ("gpt-5", 20.0)), "assumed"),
    "gemini_cli": Choice("Gemini models", (("gemini-2.5-pro", 70.0), ("gemini-2.5-flash", 30.0)), "assumed"),
}
VERSIONS: dict[str, Choice] = {
    "claude_code": Choice("Claude Code versions", (("2.1.31", 40.0), ("2.1.37", 40.0), ("2.1.42", 20.0)), "assumed"),
    "codex": Choice("Codex versions", (("0.128.0", 50.0), ("0.131.2", 50.0)), "assumed"),
    "cursor": Choice("Cursor versions", (("1.7.52", 60.0), ("2.0.11", 40.0)), "assumed"),
    "gemini_cli": Choice("Gemini CLI versions", (("0.40.1", 100.0),), "assumed"),
}
PERMISSION_MODES = Choice(
    "permission modes", (("default", 45.0), ("acceptEdits", 35.0), ("bypassPermissions", 15.0), ("plan", 5.0)),
    "assumed",
)


def describe() -> list[dict[str, Any]]:
    """Every table and scalar of the model, with its provenance (for reports)."""
    out: list[dict[str, Any]] = []
    for value in globals().values():
        if isinstance(value, (Choice, Quantiles, Scalar)):
            out.append(value.describe())
        elif isinstance(value, dict):
            for v in value.values():
                if isinstance(v, (Choice, Quantiles, Scalar)):
                    out.append(v.describe())
    return out


# ---------------------------------------------------------------------------
# Calibration targets (what a 40,000-event sample must look like)

SEED_KIND_SHARES: dict[str, float] = {
    "tool_call_finished": 46.5,
    "tool_call_started": 44.1,
    "subagent_stopped": 6.4,
    "subagent_started": 0.8,
    "tool_call_failed": 0.8,
    "agent_message": 0.5,
    "turn_stopped": 0.4,
    "prompt_submitted": 0.3,
    "notification": 0.1,
    "permission_denied": 0.0,
    "session_started": 0.0,
    "session_ended": 0.0,
    "capture_test": 0.0,
    "unknown": 0.0,
}
"""seed doc: the kind table's "Share" column (percent of 1,450,000 generated events)."""

SEED_MEAN_JSON_BYTES = Scalar(
    "mean JSON bytes per event", 11_700,
    "seed doc: a 40,000-event sample of the generator averaged 11.7 KB of JSON per event", "bytes")
SEED_ZSTD_RATIO = Scalar(
    "zstd -3 ratio of the events as JSONL", 8.7,
    "seed doc: and compressed 8.7:1 with zstd -3 as JSONL", "ratio")
