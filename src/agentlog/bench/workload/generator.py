"""The seeded workload: sessions → turns → tool calls, as the agents' own payloads.

:func:`generate` yields *samples* in stream order. A sample is a plain dict:

``n``
    0-based index in the stream.
``t``
    synthetic observed time, µs since the epoch (whole milliseconds).
``provider`` / ``agent``
    ``claude_code``/``claude-code``, ``codex``/``codex``, ``cursor``/``cursor``,
    ``gemini_cli``/``gemini-cli`` (``agent`` is the argument of ``agentlog hook``).
``source``
    ``hook`` (the payload an agent writes to a hook's stdin) or ``transcript``
    (one line of a Claude Code session transcript, for the sessions that are
    reconstructed from their transcript rather than captured by hooks).
``session``
    the provider's session id.
``kind``
    the canonical kind the capture path must produce (tests check that the
    adapters agree).
``profile``
    ``<tool category>_<phase>`` for tool events (``shell_started``,
    ``read_finished``, ``edit_failed``, ``shell_denied``; the category is the
    one the adapter derives, e.g. a Codex file read is a shell call) and
    ``prompt``, ``message``, ``turn_stopped``, ``notification``,
    ``subagent_started``, ``subagent_stopped``, ``session_started``,
    ``session_ended``, ``capture_test``, ``unknown`` otherwise.
``payload`` (hook) or ``line`` (transcript)
    the native hook payload object exactly as that agent sends it, or one
    native transcript JSONL line as a string.

The stream interleaves three *lanes*, each running sessions back to back with
a start gap between them (``model.ACTIVE_SESSIONS``); samples are merged by
synthetic time. The fixture session ``bench-chain-session`` (a turn of 200
sequential failing edits of one file, the TRACE subject) is placed at the
midpoint of the stream, contiguously: the other sessions pause around it (their
later events are shifted by its duration). For samples under 2,000 events the
chain is scaled down to ``events // 10`` edits (none under 10 events).

Determinism: every draw comes from ``random.Random(seed)`` or from generators
seeded with values drawn from it (each session has its own, so interleaving
does not change a session's content); file contents and text pools use
sub-seeds derived from the seed by name. Ids (session ids, tool_use ids,
uuids, agent ids) come from the same generators. The wall clock is never read.
"""

from __future__ import annotations

import heapq
import random
import time
from collections import OrderedDict
from typing import Any, Iterator

from agentlog.core.fastjson import dumps
from agentlog.bench.workload import model as M
from agentlog.bench.workload.text import NOUNS, PROSE, VERBS, TextSource, base62, text_source, uuid4

DEFAULT_SEED = 20261130
HOME = "/home/bench"
AGENT_OF = {"claude_code": "claude-code", "codex": "codex", "cursor": "cursor", "gemini_cli": "gemini-cli"}

# (raw time µs, kind, profile, body, stamped): body is the payload (hook) or the
# transcript record (transcript); `stamped` bodies get their "timestamp" set from
# the final observed time when they are emitted.
Emit = tuple[int, str, str, dict[str, Any], bool]

_MS = 1000
_S = 1_000_000
# Gemini's ToolPermission notifications come before tool calls: per call, the per-turn rate spread
# over a turn's calls (mean of TOOL_CALLS_PER_TURN, ~116).
_NOTIFY_PER_CALL = M.NOTIFICATION_PER_TURN.value / 116.0


def iso_ms(us: int) -> str:
    """``2026-01-05T09:00:00.123Z``."""
    s, rem = divmod(us, _S)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{rem // _MS:03d}Z"


def chain_edits(events: int) -> int:
    """Failing edits in the fixture session for a sample of ``events`` (see the module docstring)."""
    return min(int(M.CHAIN_EDITS.value), events // 10)


# ---------------------------------------------------------------------------
# The world: projects, paths, file contents


class Project:
    __slots__ = ("index", "name", "root", "paths", "exts", "cum", "branch")

    def __init__(self, index: int, name: str, paths: list[str], branch: str) -> None:
        self.index = index
        self.name = name
        self.root = f"{M.PROJECT_ROOT}/{name}"
        self.paths = paths
        self.exts = [p.rsplit(".", 1)[-1] for p in paths]
        s = M.PATH_ZIPF.value
        cum: list[float] = []
        total = 0.0
        for i in range(len(paths)):
            total += 1.0 / (i + 1) ** s
            cum.append(total)
        self.cum = cum
        self.branch = branch

    def pick(self, rng: random.Random) -> int:
        return rng.choices(range(len(self.paths)), cum_weights=self.cum)[0]


class World:
    """Projects, their paths, and the contents of their files (by version)."""

    def __init__(self, seed: int, text: TextSource) -> None:
        rng = random.Random(f"agentlog-bench-world/{seed}")
        self.seed = seed
        self.text = text
        self.projects: list[Project] = []
        names: set[str] = set()
        tops = ("crates", "src", "tests", "docs", "bench", "tools")
        for i in range(int(M.PROJECTS.value)):
            while True:
                name = f"{rng.choice(NOUNS)}-{rng.choice(NOUNS)}"
                if name not in names:
                    names.add(name)
                    break
            paths: list[str] = []
            seen: set[str] = set()
            while len(paths) < int(M.PATHS_PER_PROJECT.value):
                depth = int(M.PATH_DEPTH.pick(rng))
                ext = M.EXTENSIONS.pick(rng)
                parts = [rng.choice(tops)] + [rng.choice(NOUNS) for _ in range(depth - 2)]
                stem = rng.choice(NOUNS) if rng.random() < 0.6 else f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}"
                p = "/".join(parts + [f"{stem}.{ext}"])
                if p not in seen:
                    seen.add(p)
                    paths.append(p)
            branch = rng.choice(("main", "main", "main", f"feat/{rng.choice(NOUNS)}-{rng.choice(VERBS)}"))
            self.projects.append(Project(i, name, paths, branch))
        s = M.PROJECT_ZIPF.value
        self.project_cum: list[float] = []
        total = 0.0
        for i in range(len(self.projects)):
            total += 1.0 / (i + 1) ** s
            self.project_cum.append(total)
        self._cache: OrderedDict[tuple[int, int, int], str] = OrderedDict()

    def pick_project(self, rng: random.Random) -> Project:
        return rng.choices(self.projects, cum_weights=self.project_cum)[0]

    def size(self, project: int, path: int, version: int) -> int:
        """A file's size at a version (cheap: no text is generated)."""
        return M.FILE_SIZE.draw(random.Random(f"agentlog-bench-file/{self.seed}/{project}/{path}/{version}"))

    def content(self, project: int, path: int, version: int) -> str:
        """A file's text at a version: a pure function of (seed, project, path, version)."""
        key = (project, path, version)
        got = self._cache.get(key)
        if got is not None:
            self._cache.move_to_end(key)
            return got
        rng = random.Random(f"agentlog-bench-file/{self.seed}/{project}/{path}/{version}")
        size = M.FILE_SIZE.draw(rng)
        got = self.text.file_text(self.projects[project].exts[path], size, rng)
        self._cache[key] = got
        if len(self._cache) > 384:
            self._cache.popitem(last=False)
        return got


# ---------------------------------------------------------------------------
# Tool calls in neutral form


class Call:
    """One tool call before it is rendered in a provider's format."""

    __slots__ = ("cat", "ok", "fclass", "denied", "ms", "d")

    def __init__(self, cat: str, d: dict[str, Any], ms: int, ok: bool = True, fclass: str = "") -> None:
        self.cat = cat
        self.d = d
        self.ms = ms
        self.ok = ok
        self.fclass = fclass
        self.denied = False


class Dispatch:
    """A subagent dispatch: the Agent/Task call and what runs inside it."""

    __slots__ = ("agent_id", "agent_type", "description", "prompt", "result", "inner", "stops", "tool")

    def __init__(self, agent_id: str, agent_type: str, description: str, prompt: str, result: str, inner: int,
                 stops: int, tool: str) -> None:
        self.agent_id = agent_id
        self.agent_type = agent_type
        self.description = description
        self.prompt = prompt
        self.result = result
        self.inner = inner
        self.stops = stops
        self.tool = tool


def _phrase(rng: random.Random, lo: int, hi: int) -> str:
    n = rng.randint(lo, hi)
    words = [PROSE[rng.randrange(len(PROSE))] if rng.random() < 0.55 else NOUNS[rng.randrange(len(NOUNS))]
             for _ in range(n)]
    s = " ".join(words)
    return s[:1].upper() + s[1:]


# ---------------------------------------------------------------------------
# Sessions


class Session:
    """Base class: one provider session (a generator of emits)."""

    provider = ""
    source = "hook"
    dispatches = False  # whether this provider runs subagents

    def __init__(self, wl: Workload, rng: random.Random, start: int, project: Project, sid: str) -> None:
        self.wl = wl
        self.text = wl.text
        self.world = wl.world
        self.rng = rng
        self.t = start
        self.last = 0
        self.project = project
        self.sid = sid
        self.cwd = project.root
        self.agent = AGENT_OF[self.provider] if self.provider else ""
        self.versions: dict[int, int] = {}
        # Text comes from its own generator, so that tuning the text never changes the structure.
        self.trng = random.Random(rng.getrandbits(64))
        self.model = M.MODELS[self.provider].pick(rng) if self.provider in M.MODELS else ""
        self.version = M.VERSIONS[self.provider].pick(rng) if self.provider in M.VERSIONS else ""

    # -- time ------------------------------------------------------------------
    def emit(self, kind: str, profile: str, body: dict[str, Any], stamped: bool = False) -> Emit:
        if self.t <= self.last:
            self.t = self.last + _MS
        self.last = self.t
        return (self.t, kind, profile, body, stamped)

    def advance_ms(self, ms: float) -> None:
        self.t += max(_MS, int(ms) * _MS)

    def think(self) -> None:
        self.t += max(_MS, int(M.THINK_TIME_S.sample(self.rng) * 1000) * _MS)

    def user_gap(self) -> None:
        self.t += int(M.USER_GAP_S.sample(self.rng) * 1000) * _MS

    # -- neutral calls ---------------------------------------------------------
    def rel_path(self) -> str:
        return self.project.paths[self.project.pick(self.rng)]

    def text_path(self) -> str:
        """A path for text (commands) — drawn from the text generator."""
        return self.project.paths[self.project.pick(self.trng)]

    def abs_path(self, i: int) -> str:
        return f"{self.project.root}/{self.project.paths[i]}"

    def new_call(self, cat: str) -> Call:
        builder = getattr(self, "call_" + cat)
        call: Call = builder()
        return call

    def call_shell(self) -> Call:
        r = self.rng
        tr = self.trng
        t = self.text
        command = t.command(M.SHELL_COMMAND.draw(r), tr, self.text_path)
        description = _phrase(tr, 3, 8)
        stdout = t.text("shell", M.SHELL_OUTPUT.draw(r), tr)
        ms = M.DURATION_MS["shell"].draw(r)
        if r.random() < M.SHELL_FAIL_RATE.value:
            cls = M.SHELL_FAIL_CLASS.pick(r)
            if cls == "file_not_found":
                prog = r.choice(("cat", "ls", "sed", "head"))
                missing = self.rel_path().rsplit(".", 1)[0] + r.choice((".bak", ".orig", "_old.rs", ".tmp"))
                stderr = f"{prog}: {missing}: No such file or directory"
                code = 1 if prog != "ls" else 2
            else:
                stderr = "error: " + t.text("shell", M.SHELL_STDERR.draw(r), tr)
                code = r.choice((1, 1, 2, 101))
            return Call("shell", {"command": command, "description": description, "stdout": stdout, "stderr": stderr,
                                  "exit_code": code}, ms, ok=False, fclass=cls)
        err_size = M.stderr_size(r)
        stderr = t.text("shell", err_size, tr) if err_size else ""
        return Call("shell", {"command": command, "description": description, "stdout": stdout, "stderr": stderr,
                              "exit_code": 0}, ms)

    def call_read(self) -> Call:
        r = self.rng
        i = self.project.pick(r)
        content = self.world.content(self.project.index, i, self.versions.get(i, 0))
        total = content.count("\n") + 1
        partial = r.random() < M.PARTIAL_READ_SHARE.value
        u_start, u_limit = r.random(), r.random()
        d: dict[str, Any] = {"path": self.abs_path(i), "rel": self.project.paths[i], "total_lines": total}
        if partial and total > 60:
            lines = content.split("\n")
            start = int(u_start * (total - 40))
            limit = 40 + int(u_limit * (min(400, total - start) - 40))
            d.update(offset=start + 1, limit=limit, content="\n".join(lines[start:start + limit]), start_line=start + 1,
                     num_lines=limit)
        else:
            d.update(content=content, start_line=1, num_lines=total)
        return Call("read", d, M.DURATION_MS["read"].draw(r))

    def call_edit(self) -> Call:
        r = self.rng
        tr = self.trng
        p = self.project
        cands = [p.pick(r) for _ in range(int(M.EDIT_CANDIDATES.value))]
        i = min(cands, key=lambda c: (self.world.size(p.index, c, self.versions.get(c, 0)), c))
        v = self.versions.get(i, 0)
        original = self.world.content(self.project.index, i, v)
        ext = self.project.exts[i]
        size = M.EDIT_STRING.draw(r)
        ok = r.random() >= M.EDIT_FAIL_RATE.value
        u_start = r.random()
        if ok and len(original) > 4:
            start = int(u_start * max(1, len(original) - size))
            nl = original.rfind("\n", 0, start)
            start = nl + 1 if nl >= 0 else 0
            old = original[start:start + size] or original[:size]
        else:
            old = self.text.file_text(ext, size, tr)
        new = self.text.file_text(ext, M.EDIT_STRING.draw(r), tr)
        if ok:
            self.versions[i] = v + 1
        return Call("edit", {"path": self.abs_path(i), "rel": self.project.paths[i], "old": old, "new": new,
                             "original": original}, M.DURATION_MS["edit"].draw(r), ok=ok,
                    fclass="" if ok else "string_mismatch")

    def call_write(self) -> Call:
        r = self.rng
        tr = self.trng
        i = self.project.pick(r)
        content = self.text.file_text(self.project.exts[i], M.WRITE_CONTENT.draw(r), tr)
        created = i not in self.versions and r.random() < 0.5
        self.versions[i] = self.versions.get(i, 0) + 1
        return Call("write", {"path": self.abs_path(i), "rel": self.project.paths[i], "content": content,
                              "created": created}, M.DURATION_MS["write"].draw(r))

    def call_search(self) -> Call:
        r = self.rng
        tr = self.trng
        grep = r.random() < 0.7
        d: dict[str, Any] = {"grep": grep}
        rel = self.rel_path()
        directory = f"{self.project.root}/{rel.split('/', 1)[0]}"
        d["path"] = directory
        if grep:
            d["pattern"] = f"{r.choice(VERBS)}_{r.choice(NOUNS)}"
            d["result"] = self.text.text("shell", M.SEARCH_OUTPUT.draw(r), tr)
            d["files"] = [self.abs_path(self.project.pick(r)) for _ in range(r.randint(0, 6))]
        else:
            d["pattern"] = f"**/*{r.choice(NOUNS)}*.rs"
            d["files"] = [self.abs_path(self.project.pick(r)) for _ in range(r.randint(0, 40))]
            d["result"] = "\n".join(d["files"])
        return Call("search", d, M.DURATION_MS["search"].draw(r))

    def call_web(self) -> Call:
        r = self.rng
        tr = self.trng
        fetch = r.random() < 0.6
        d: dict[str, Any] = {
            "fetch": fetch,
            "url": f"https://{r.choice(NOUNS)}.docs.example.org/{r.choice(NOUNS)}/{r.choice(VERBS)}.html",
            "query": _phrase(tr, 3, 7),
            "prompt": _phrase(tr, 6, 16),
            "result": self.text.text("markdown", M.WEB_OUTPUT.draw(r), tr),
        }
        return Call("web", d, M.DURATION_MS["web"].draw(r))

    def call_mcp(self) -> Call:
        r = self.rng
        tr = self.trng
        d: dict[str, Any] = {
            "server": r.choice(("tracker", "notes", "browser", "warehouse", "wiki")),
            "tool": f"{r.choice(VERBS)}_{r.choice(NOUNS)}",
            "args": {"query": _phrase(tr, 2, 6), "limit": r.randint(5, 50)},
            "result": self.text.text(r.choice(("jsonl", "markdown")), M.MCP_OUTPUT.draw(r), tr),
        }
        return Call("mcp", d, M.DURATION_MS["mcp"].draw(r))

    def call_plan(self) -> Call:
        r = self.rng
        tr = self.trng
        todos = [{"content": _phrase(tr, 3, 9), "status": r.choice(("pending", "in_progress", "completed")),
                  "activeForm": _phrase(tr, 3, 9)} for _ in range(r.randint(2, 8))]
        return Call("plan", {"todos": todos}, M.DURATION_MS["plan"].draw(r))

    def call_other(self) -> Call:
        r = self.rng
        return Call("other", {"skill": r.choice(NOUNS), "args": _phrase(self.trng, 2, 10)}, M.DURATION_MS["other"].draw(r))

    def new_dispatch(self, inner: int, tool: str) -> Dispatch:
        r = self.rng
        tr = self.trng
        return Dispatch(
            agent_id="a" + self.text.hex(6, r),
            agent_type=M.SUBAGENT_TYPES.pick(r),
            description=_phrase(tr, 3, 6),
            prompt=self.text.prompt(M.AGENT_PROMPT.draw(r), tr),
            result=self.text.message(M.AGENT_RESULT.draw(r), tr),
            inner=inner,
            stops=int(M.SUBAGENT_STOPS.pick(r)),
            tool=tool,
        )

    # -- session skeleton --------------------------------------------------------
    def run(self) -> Iterator[Emit]:
        r = self.rng
        if self.has_start() and r.random() < M.SESSION_STARTED_SHARE.value:
            yield self.session_start()
            self.advance_ms(r.uniform(200, 4000))
        turns = int(M.TURNS_PER_SESSION.pick(r))
        for k in range(turns):
            if k:
                self.user_gap()
            yield from self.turn(k)
        if self.has_end() and r.random() < M.SESSION_ENDED_SHARE.value:
            self.user_gap()
            yield self.session_end()

    def has_start(self) -> bool:
        return True

    def has_end(self) -> bool:
        return True

    def session_start(self) -> Emit:
        raise NotImplementedError

    def session_end(self) -> Emit:
        raise NotImplementedError

    def turn(self, k: int) -> Iterator[Emit]:
        r = self.rng
        self.begin_turn(k)
        yield self.prompt(self.text.prompt(M.PROMPT.draw(r), self.trng))
        self.think()
        m = max(1, int(M.TOOL_CALLS_PER_TURN.sample(r)))
        for j, item in enumerate(self.turn_plan(m)):
            if j:
                self.think()
            if item:
                yield from self.dispatch(item)
            else:
                yield from self.main_call(self.new_call(M.CALL_MIX.pick(r)))
        self.think()
        yield from self.end_turn(self.text.message(M.MESSAGE.draw(r), self.trng))

    def begin_turn(self, k: int) -> None:
        pass

    def turn_plan(self, m: int) -> list[int]:
        """The main agent's calls of a turn of ``m`` tool calls: 0 for a plain call, K > 0 for a
        dispatch whose subagent makes K calls (the dispatch itself counts as one of the ``m``)."""
        r = self.rng
        x = m * M.DISPATCHES_PER_CALL.value if self.dispatches and m >= 4 else 0.0
        dispatches = min(m // 2, int(x) + (1 if r.random() < x - int(x) else 0))
        if not dispatches:
            return [0] * m
        inside = min(m - dispatches, max(dispatches, round(m * M.SUBAGENT_FRACTION.sample(r))))
        cuts = sorted(r.sample(range(1, inside), dispatches - 1)) if dispatches > 1 else []
        sizes = [b - a for a, b in zip([0] + cuts, cuts + [inside])]
        plan = [0] * (m - dispatches - inside)
        for k in sizes:
            plan.insert(r.randint(0, len(plan)), k)
        return plan

    def main_call(self, call: Call) -> Iterator[Emit]:
        yield from self.tool_call(call, None)

    def prompt(self, text: str) -> Emit:
        raise NotImplementedError

    def tool_call(self, call: Call, sub: Dispatch | None) -> Iterator[Emit]:
        raise NotImplementedError

    def dispatch(self, inner: int) -> Iterator[Emit]:
        raise NotImplementedError

    def end_turn(self, message: str) -> Iterator[Emit]:
        raise NotImplementedError

    def inner_calls(self, d: Dispatch) -> Iterator[Emit]:
        """The subagent's calls, with its stop events spread over them (first stops blocked by a stop hook)."""
        r = self.rng
        cuts = sorted(r.randint(1, d.inner) for _ in range(d.stops - 1))
        ci = 0
        for j in range(d.inner):
            if j:
                self.think()
            yield from self.tool_call(self.new_call(M.CALL_MIX.pick(r)), d)
            while ci < len(cuts) and cuts[ci] == j + 1:
                self.advance_ms(r.uniform(50, 900))
                yield self.subagent_stop(d, ci > 0, last=False)
                ci += 1
        self.advance_ms(r.uniform(50, 900))
        yield self.subagent_stop(d, d.stops > 1, last=True)

    def subagent_stop(self, d: Dispatch, hook_active: bool, last: bool) -> Emit:
        raise NotImplementedError


# -- Claude Code (shared by hooks and transcripts) ------------------------------


def claude_tool(call: Call, sub_tool: str = "Task") -> tuple[str, dict[str, Any]]:
    """(tool_name, tool_input) of a neutral call in Claude Code's format."""
    d = call.d
    c = call.cat
    if c == "shell":
        return "Bash", {"command": d["command"], "description": d["description"]}
    if c == "read":
        inp: dict[str, Any] = {"file_path": d["path"]}
        if "offset" in d:
            inp["offset"] = d["offset"]
            inp["limit"] = d["limit"]
        return "Read", inp
    if c == "edit":
        return "Edit", {"file_path": d["path"], "old_string": d["old"], "new_string": d["new"]}
    if c == "write":
        return "Write", {"file_path": d["path"], "content": d["content"]}
    if c == "search":
        if d["grep"]:
            return "Grep", {"pattern": d["pattern"], "path": d["path"], "output_mode": "content"}
        return "Glob", {"pattern": d["pattern"], "path": d["path"]}
    if c == "web":
        if d["fetch"]:
            return "WebFetch", {"url": d["url"], "prompt": d["prompt"]}
        return "WebSearch", {"query": d["query"]}
    if c == "mcp":
        return f"mcp__{d['server']}__{d['tool']}", dict(d["args"])
    if c == "plan":
        return "TodoWrite", {"todos": d["todos"]}
    return "Skill", {"skill": d["skill"], "args": d["args"]}


def _patch_lines(old: str, new: str) -> list[str]:
    return ["-" + s for s in old.split("\n")] + ["+" + s for s in new.split("\n")]


def claude_response(call: Call) -> Any:
    """Claude Code's ``tool_response`` (also a transcript's ``toolUseResult``) of a successful call."""
    d = call.d
    c = call.cat
    if c == "shell":
        return {"stdout": d["stdout"], "stderr": d["stderr"], "interrupted": False, "isImage": False,
                "noOutputExpected": False}
    if c == "read":
        return {"type": "text", "file": {"filePath": d["path"], "content": d["content"], "numLines": d["num_lines"],
                                         "startLine": d["start_line"], "totalLines": d["total_lines"]}}
    if c == "edit":
        o = d["old"].count("\n") + 1
        n = d["new"].count("\n") + 1
        return {"filePath": d["path"], "oldString": d["old"], "newString": d["new"], "originalFile": d["original"],
                "structuredPatch": [{"oldStart": 1, "oldLines": o, "newStart": 1, "newLines": n,
                                     "lines": _patch_lines(d["old"], d["new"])}],
                "userModified": False, "replaceAll": False}
    if c == "write":
        return {"type": "create" if d["created"] else "update", "filePath": d["path"], "content": d["content"],
                "structuredPatch": []}
    if c == "search":
        if d["grep"]:
            return {"mode": "content", "numFiles": len(d["files"]), "filenames": [], "content": d["result"],
                    "numLines": d["result"].count("\n") + 1}
        return {"filenames": d["files"], "durationMs": call.ms, "numFiles": len(d["files"]), "truncated": False}
    if c == "web":
        if d["fetch"]:
            return {"bytes": len(d["result"]) * 3, "code": 200, "codeText": "OK", "result": d["result"],
                    "durationMs": call.ms, "url": d["url"]}
        return {"query": d["query"], "results": [d["result"]], "durationSeconds": call.ms / 1000}
    if c == "mcp":
        return [{"type": "text", "text": d["result"]}]
    if c == "plan":
        return {"oldTodos": [], "newTodos": d["todos"]}
    return {"success": True, "commandName": d["skill"]}


def claude_error(call: Call) -> str:
    """The ``error`` text Claude Code reports for a failed call."""
    d = call.d
    if call.cat == "shell":
        out = f"Exit code {d['exit_code']}\n{d['stderr']}"
        return out + "\n" + d["stdout"] if d["stdout"] else out
    return f"String to replace not found in file.\nString: {d['old']}"


def claude_result_text(call: Call) -> str:
    """A transcript ``tool_result`` block's text for a successful call."""
    d = call.d
    c = call.cat
    if c == "shell":
        return str(d["stdout"]) + ("\n" + str(d["stderr"]) if d["stderr"] else "")
    if c == "read":
        return str(d["content"])
    if c == "edit":
        return f"The file {d['path']} has been updated."
    if c == "write":
        return f"File {'created' if d['created'] else 'updated'} successfully at: {d['path']}"
    if c in ("search", "web", "mcp"):
        return str(d["result"])
    if c == "plan":
        return "Todos have been modified successfully."
    return f"Launching skill: {d['skill']}"


#: what Claude Code writes as the result of a tool use the user rejected (the importer
#: recognises a rejection by its start)
DENIED_TEXT = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a "
               "file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the "
               "user to tell you how to proceed.")


class ClaudeHookSession(Session):
    provider = "claude_code"
    dispatches = True

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        slug = self.cwd.replace("/", "-")
        self.transcript = f"{HOME}/.claude/projects/{slug}/{self.sid}.jsonl"
        self.mode = M.PERMISSION_MODES.pick(self.rng)
        self.task_tool = self.rng.choice(("Task", "Agent"))

    def base(self, name: str, sub: Dispatch | None = None, mode: bool = True) -> dict[str, Any]:
        p: dict[str, Any] = {"session_id": self.sid, "transcript_path": self.transcript, "cwd": self.cwd}
        if mode:
            p["permission_mode"] = self.mode
        p["hook_event_name"] = name
        if sub is not None:
            p["agent_id"] = sub.agent_id
            p["agent_type"] = sub.agent_type
        return p

    def session_start(self) -> Emit:
        p = self.base("SessionStart", mode=False)
        p["source"] = "startup"
        p["model"] = self.model
        return self.emit("session_started", "session_started", p)

    def session_end(self) -> Emit:
        p = self.base("SessionEnd", mode=False)
        p["reason"] = self.rng.choice(("prompt_input_exit", "other", "clear", "logout"))
        return self.emit("session_ended", "session_ended", p)

    def prompt(self, text: str) -> Emit:
        p = self.base("UserPromptSubmit")
        p["prompt"] = text
        return self.emit("prompt_submitted", "prompt", p)

    def notification(self, message: str, ntype: str) -> Emit:
        p = self.base("Notification", mode=False)
        p["message"] = message
        p["notification_type"] = ntype
        return self.emit("notification", "notification", p)

    def tool_call(self, call: Call, sub: Dispatch | None) -> Iterator[Emit]:
        r = self.rng
        name, inp = claude_tool(call)
        tid = "toolu_01" + base62(22, r)
        pre = self.base("PreToolUse", sub)
        pre.update(tool_name=name, tool_input=inp, tool_use_id=tid)
        yield self.emit("tool_call_started", call.cat + "_started", pre)
        if r.random() < M.DENY_RATE.value:
            self.advance_ms(r.uniform(5, 60))
            p = self.base("PermissionDenied", sub)
            p.update(tool_name=name, tool_input=inp, tool_use_id=tid,
                     reason=f"The {self.mode} policy does not allow {name} here")
            yield self.emit("permission_denied", call.cat + "_denied", p)
            return
        self.advance_ms(call.ms)
        if call.ok:
            post = self.base("PostToolUse", sub)
            post.update(tool_name=name, tool_input=inp, tool_response=claude_response(call), tool_use_id=tid,
                        duration_ms=call.ms)
            yield self.emit("tool_call_finished", call.cat + "_finished", post)
        else:
            post = self.base("PostToolUseFailure", sub)
            post.update(tool_name=name, tool_input=inp, tool_use_id=tid, error=claude_error(call), is_interrupt=False,
                        duration_ms=call.ms)
            yield self.emit("tool_call_failed", call.cat + "_failed", post)

    def dispatch(self, inner: int) -> Iterator[Emit]:
        r = self.rng
        d = self.new_dispatch(inner, self.task_tool)
        tid = "toolu_01" + base62(22, r)
        inp = {"description": d.description, "prompt": d.prompt, "subagent_type": d.agent_type or "general-purpose"}
        pre = self.base("PreToolUse")
        pre.update(tool_name=d.tool, tool_input=inp, tool_use_id=tid)
        began = self.t
        yield self.emit("tool_call_started", "subagent_started", pre)
        self.advance_ms(r.uniform(20, 300))
        start = self.base("SubagentStart", mode=False)
        start.update(agent_id=d.agent_id, agent_type=d.agent_type)
        yield self.emit("subagent_started", "subagent_started", start)
        self.think()
        yield from self.inner_calls(d)
        self.advance_ms(r.uniform(20, 400))
        post = self.base("PostToolUse")
        total = (self.t - began) // _MS
        post.update(tool_name=d.tool, tool_input=inp, tool_response={
            "status": "completed", "prompt": d.prompt, "agentId": d.agent_id,
            "content": [{"type": "text", "text": d.result}], "totalDurationMs": total,
            "totalTokens": r.randint(2000, 180000), "totalToolUseCount": d.inner,
            "usage": {"input_tokens": r.randint(10, 900), "output_tokens": r.randint(50, 9000)}},
            tool_use_id=tid, duration_ms=total)
        yield self.emit("tool_call_finished", "subagent_finished", post)

    def subagent_stop(self, d: Dispatch, hook_active: bool, last: bool) -> Emit:
        r = self.rng
        p = self.base("SubagentStop")
        p.update(stop_hook_active=hook_active, agent_id=d.agent_id,
                 agent_transcript_path=self.transcript[:-6] + f"/subagents/agent-{d.agent_id}.jsonl",
                 agent_type=d.agent_type, last_assistant_message=self.text.message(M.SUBAGENT_MESSAGE.draw(r), self.trng))
        return self.emit("subagent_stopped", "subagent_stopped", p)

    def end_turn(self, message: str) -> Iterator[Emit]:
        r = self.rng
        self.advance_ms(r.uniform(100, 3000))
        p = self.base("Stop")
        p.update(stop_hook_active=False, last_assistant_message=message)
        yield self.emit("turn_stopped", "turn_stopped", p)
        if r.random() < M.NOTIFICATION_PER_TURN.value:
            self.advance_ms(r.uniform(1000, 60000))
            yield self.notification("The agent is waiting for your input", "idle_prompt")


class ClaudeTranscriptSession(Session):
    """A Claude Code session known only from its transcript (reconstructed, no hooks)."""

    provider = "claude_code"
    source = "transcript"
    dispatches = True

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        self.parent: dict[str, str | None] = {"": None}
        self.task_tool = self.rng.choice(("Task", "Agent"))
        self.turn_began = 0
        self.prompt_id = ""
        self.tool_uuid: str = ""

    def has_start(self) -> bool:
        return False  # a transcript has no session-start record

    def has_end(self) -> bool:
        return False

    def record(self, typ: str, sub: Dispatch | None, **fields: Any) -> dict[str, Any]:
        chain = sub.agent_id if sub is not None else ""
        u = uuid4(self.rng)
        rec: dict[str, Any] = {"parentUuid": self.parent.get(chain), "isSidechain": sub is not None,
                               "userType": "external", "cwd": self.cwd, "sessionId": self.sid,
                               "version": self.version, "gitBranch": self.project.branch}
        if sub is not None:
            rec["agentId"] = sub.agent_id
        if typ == "assistant":
            rec["message"] = fields.pop("message")
            rec["requestId"] = "req_011C" + base62(20, self.rng)
            rec["type"] = typ
        else:
            rec["type"] = typ
            if "message" in fields:
                rec["message"] = fields.pop("message")
        rec["uuid"] = u
        rec["timestamp"] = ""
        rec.update(fields)
        self.parent[chain] = u
        return rec

    def assistant(self, block: dict[str, Any], sub: Dispatch | None, stop: str | None) -> dict[str, Any]:
        r = self.rng
        msg = {"model": self.model, "id": "msg_01" + base62(22, r), "type": "message", "role": "assistant",
               "content": [block], "stop_reason": stop, "stop_sequence": None,
               "usage": {"input_tokens": r.randint(1, 40), "cache_creation_input_tokens": r.randint(0, 20000),
                         "cache_read_input_tokens": r.randint(0, 150000), "output_tokens": r.randint(1, 2000),
                         "service_tier": "standard"}}
        rec = self.record("assistant", sub, message=msg)
        self.tool_uuid = rec["uuid"]
        return rec

    def begin_turn(self, k: int) -> None:
        self.prompt_id = uuid4(self.rng)

    def prompt(self, text: str) -> Emit:
        self.turn_began = self.t
        rec = self.record("user", None, message={"role": "user", "content": text}, promptId=self.prompt_id)
        return self.emit("prompt_submitted", "prompt", rec, True)

    def text_message(self, text: str, sub: Dispatch | None, stop: str | None) -> Emit:
        rec = self.assistant({"type": "text", "text": text}, sub, stop)
        return self.emit("agent_message", "message", rec, True)

    def main_call(self, call: Call) -> Iterator[Emit]:
        r = self.rng
        if r.random() < M.TEXT_BEFORE_CALL.value:
            yield self.text_message(self.text.message(M.MESSAGE.draw(r), self.trng), None, None)
            self.advance_ms(r.uniform(200, 2000))
        yield from self.tool_call(call, None)

    def tool_call(self, call: Call, sub: Dispatch | None) -> Iterator[Emit]:
        r = self.rng
        name, inp = claude_tool(call)
        tid = "toolu_01" + base62(22, r)
        rec = self.assistant({"type": "tool_use", "id": tid, "name": name, "input": inp}, sub, "tool_use")
        yield self.emit("tool_call_started", call.cat + "_started", rec, True)
        source_uuid = self.tool_uuid
        if r.random() < M.DENY_RATE.value:
            self.advance_ms(r.uniform(500, 8000))
            res = self.record("user", sub, message={"role": "user", "content": [
                {"type": "tool_result", "content": DENIED_TEXT, "is_error": True, "tool_use_id": tid}]},
                toolUseResult="Error: " + DENIED_TEXT, sourceToolAssistantUUID=source_uuid)
            yield self.emit("permission_denied", call.cat + "_denied", res, True)
            return
        self.advance_ms(call.ms)
        if call.ok:
            block: dict[str, Any] = {"tool_use_id": tid, "type": "tool_result", "content": claude_result_text(call)}
            res = self.record("user", sub, message={"role": "user", "content": [block]},
                              toolUseResult=claude_response(call), sourceToolAssistantUUID=source_uuid)
            yield self.emit("tool_call_finished", call.cat + "_finished", res, True)
        else:
            err = claude_error(call)
            text = err if call.cat == "shell" else f"<tool_use_error>{err}</tool_use_error>"
            block = {"type": "tool_result", "content": text, "is_error": True, "tool_use_id": tid}
            res = self.record("user", sub, message={"role": "user", "content": [block]},
                              toolUseResult="Error: " + err, sourceToolAssistantUUID=source_uuid)
            yield self.emit("tool_call_failed", call.cat + "_failed", res, True)

    def dispatch(self, inner: int) -> Iterator[Emit]:
        r = self.rng
        d = self.new_dispatch(inner, self.task_tool)
        tid = "toolu_01" + base62(22, r)
        inp = {"description": d.description, "prompt": d.prompt, "subagent_type": d.agent_type or "general-purpose"}
        rec = self.assistant({"type": "tool_use", "id": tid, "name": d.tool, "input": inp}, None, "tool_use")
        began = self.t
        yield self.emit("tool_call_started", "subagent_started", rec, True)
        source_uuid = self.tool_uuid
        # The subagent's own records follow inline (isSidechain, agentId). Its task is the Task call's
        # input; no start record is written (the seed's reconstructions have no subagent_started).
        self.advance_ms(r.uniform(20, 300))
        self.think()
        yield from self.inner_calls(d)
        self.advance_ms(r.uniform(20, 400))
        total = (self.t - began) // _MS
        res = self.record("user", None, message={"role": "user", "content": [
            {"tool_use_id": tid, "type": "tool_result", "content": [{"type": "text", "text": d.result}]}]},
            toolUseResult={"status": "completed", "prompt": d.prompt, "agentId": d.agent_id,
                           "content": [{"type": "text", "text": d.result}], "totalDurationMs": total,
                           "totalTokens": r.randint(2000, 180000), "totalToolUseCount": d.inner},
            sourceToolAssistantUUID=source_uuid)
        yield self.emit("tool_call_finished", "subagent_finished", res, True)

    def subagent_stop(self, d: Dispatch, hook_active: bool, last: bool) -> Emit:
        rec = self.record("system", d, subtype="stop_hook_summary", hookCount=1,
                          hookInfos=[{"command": "agentlog hook claude-code"}], hookErrors=[],
                          preventedContinuation=not last, stopReason="", hasOutput=False, level="suggestion",
                          toolUseID=uuid4(self.rng))
        return self.emit("subagent_stopped", "subagent_stopped", rec, True)

    def end_turn(self, message: str) -> Iterator[Emit]:
        r = self.rng
        self.advance_ms(r.uniform(300, 4000))
        yield self.text_message(message, None, "end_turn")
        self.advance_ms(r.uniform(20, 200))
        rec = self.record("system", None, subtype="turn_duration", durationMs=(self.t - self.turn_began) // _MS,
                          isMeta=False)
        yield self.emit("turn_stopped", "turn_stopped", rec, True)


# -- Codex ----------------------------------------------------------------------


class CodexSession(Session):
    provider = "codex"
    dispatches = True

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        self.transcript = f"{HOME}/.codex/sessions/2026/01/05/rollout-2026-01-05T09-00-00-{self.sid}.jsonl"
        self.mode = M.PERMISSION_MODES.pick(self.rng)
        self.turn_id = ""

    def has_end(self) -> bool:
        return False  # Codex has no SessionEnd hook

    def base(self, name: str, sub: Dispatch | None = None, turn: bool = True) -> dict[str, Any]:
        p: dict[str, Any] = {"session_id": self.sid, "transcript_path": self.transcript, "cwd": self.cwd,
                             "hook_event_name": name, "model": self.model, "permission_mode": self.mode}
        if turn:
            p["turn_id"] = self.turn_id
        if sub is not None:
            p["agent_id"] = sub.agent_id
            p["agent_type"] = sub.agent_type
        return p

    def begin_turn(self, k: int) -> None:
        self.turn_id = uuid4(self.rng)

    def session_start(self) -> Emit:
        p = self.base("SessionStart", turn=False)
        p["source"] = "startup"
        return self.emit("session_started", "session_started", p)

    def prompt(self, text: str) -> Emit:
        p = self.base("UserPromptSubmit")
        p["prompt"] = text
        return self.emit("prompt_submitted", "prompt", p)

    def render(self, call: Call) -> tuple[str, str, dict[str, Any], Any, bool]:
        """(category, tool_name, tool_input, tool_response, failed): Codex runs reads, searches and
        fetches through the shell and edits/writes files with apply_patch."""
        d = call.d
        c = call.cat
        secs = f"{call.ms / 1000:.1f}"
        if c in ("edit", "write"):
            rel = d["rel"]
            if c == "edit":
                patch = ("*** Begin Patch\n*** Update File: " + rel + "\n@@\n" + "\n".join(_patch_lines(d["old"], d["new"]))
                         + "\n*** End Patch")
            else:
                patch = ("*** Begin Patch\n*** Add File: " + rel + "\n"
                         + "\n".join("+" + s for s in d["content"].split("\n")) + "\n*** End Patch")
            if call.ok:
                resp = f"Success. Updated the following files:\n{'M' if c == 'edit' else 'A'} {rel}\n"
            else:  # Codex reports no failure status the hook can see
                resp = f"apply_patch verification failed: the expected lines are absent from {rel}"
            return "edit", "apply_patch", {"command": patch}, resp, False
        if c == "mcp":
            return "mcp", f"mcp__{d['server']}__{d['tool']}", dict(d["args"]), {
                "content": [{"type": "text", "text": d["result"]}], "isError": False}, False
        if c == "shell":
            cmd, out, code = d["command"], d["stdout"] + d["stderr"], d["exit_code"]
        elif c == "read":
            if "offset" in d:
                cmd = f"sed -n '{d['offset']},{d['offset'] + d['limit'] - 1}p' {d['rel']}"
            else:
                cmd = f"cat {d['rel']}"
            out, code = d["content"], 0
        elif c == "search":
            cmd = f"rg -n '{d['pattern']}' {d['path']}" if d["grep"] else f"rg --files -g '{d['pattern']}' {d['path']}"
            out, code = d["result"], 0
        elif c == "web":
            cmd, out, code = f"curl -sL {d['url']} | head -c 20000", d["result"], 0
        elif c == "plan":
            cmd, out, code = "git status --short", "\n".join("M " + t["content"] for t in d["todos"]), 0
        else:
            cmd, out, code = f"just {d['skill']}", d["args"], 0
        resp = f"Exit code: {code}\nWall time: {secs} seconds\nOutput:\n{out}"
        return "shell", "Bash", {"command": cmd}, resp, code != 0

    def tool_call(self, call: Call, sub: Dispatch | None) -> Iterator[Emit]:
        cat, name, inp, resp, failed = self.render(call)
        tid = "call_" + base62(24, self.rng)
        pre = self.base("PreToolUse", sub)
        pre.update(tool_name=name, tool_use_id=tid, tool_input=inp)
        yield self.emit("tool_call_started", cat + "_started", pre)
        self.advance_ms(call.ms)
        post = self.base("PostToolUse", sub)
        post.update(tool_name=name, tool_use_id=tid, tool_input=inp, tool_response=resp)
        if failed:
            yield self.emit("tool_call_failed", cat + "_failed", post)
        else:
            yield self.emit("tool_call_finished", cat + "_finished", post)

    def dispatch(self, inner: int) -> Iterator[Emit]:
        # Codex's spawn tool is not intercepted by PreToolUse; the dispatch shows as SubagentStart/Stop.
        r = self.rng
        d = self.new_dispatch(inner, "spawn_agent")
        p = self.base("SubagentStart")
        p.update(agent_id=d.agent_id, agent_type=d.agent_type or "default")
        yield self.emit("subagent_started", "subagent_started", p)
        self.think()
        yield from self.inner_calls(d)
        self.advance_ms(r.uniform(20, 400))

    def subagent_stop(self, d: Dispatch, hook_active: bool, last: bool) -> Emit:
        r = self.rng
        p = self.base("SubagentStop")
        p.update(agent_id=d.agent_id, agent_type=d.agent_type or "default", stop_hook_active=hook_active,
                 last_assistant_message=self.text.message(M.SUBAGENT_MESSAGE.draw(r), self.trng))
        return self.emit("subagent_stopped", "subagent_stopped", p)

    def end_turn(self, message: str) -> Iterator[Emit]:
        self.advance_ms(self.rng.uniform(100, 3000))
        p = self.base("Stop")
        p.update(stop_hook_active=False, last_assistant_message=message)
        yield self.emit("turn_stopped", "turn_stopped", p)


# -- Cursor ---------------------------------------------------------------------


class CursorSession(Session):
    """Cursor through its generic tool hooks: only tool ends are reported (postToolUse/-Failure)."""

    provider = "cursor"

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        slug = self.cwd.strip("/").replace("/", "-")
        self.transcript = f"{HOME}/.cursor/projects/{slug}/agent-transcripts/{self.sid}.jsonl"
        self.generation = ""

    def has_start(self) -> bool:
        return False  # the seed: Cursor sessions have no start events

    def base(self, name: str) -> dict[str, Any]:
        return {"conversation_id": self.sid, "generation_id": self.generation, "model": self.model,
                "hook_event_name": name, "cursor_version": self.version, "workspace_roots": [self.cwd],
                "user_email": None, "transcript_path": self.transcript}

    def begin_turn(self, k: int) -> None:
        self.generation = uuid4(self.rng)

    def session_end(self) -> Emit:
        p = self.base("sessionEnd")
        p.update(session_id=self.sid, reason="completed", duration_ms=self.rng.randint(60_000, 7_200_000),
                 is_background_agent=False, final_status="completed")
        return self.emit("session_ended", "session_ended", p)

    def prompt(self, text: str) -> Emit:
        p = self.base("beforeSubmitPrompt")
        p.update(prompt=text, attachments=[])
        return self.emit("prompt_submitted", "prompt", p)

    def main_call(self, call: Call) -> Iterator[Emit]:
        r = self.rng
        if r.random() < M.TEXT_BEFORE_CALL.value:
            p = self.base("afterAgentResponse")
            p["text"] = self.text.message(M.MESSAGE.draw(r), self.trng)
            yield self.emit("agent_message", "message", p)
            self.advance_ms(r.uniform(200, 2000))
        yield from self.tool_call(call, None)

    def tool_call(self, call: Call, sub: Dispatch | None) -> Iterator[Emit]:
        d = call.d
        c = call.cat
        if c == "shell":
            name, inp, out = "Shell", {"command": d["command"]}, {"exitCode": 0, "stdout": d["stdout"],
                                                                  "stderr": d["stderr"]}
        elif c == "read":
            name, inp, out = "Read", {"file_path": d["path"]}, {"content": d["content"], "totalLines": d["total_lines"]}
        elif c == "edit":
            name, inp, out = "StrReplace", {"file_path": d["path"], "old_string": d["old"], "new_string": d["new"]}, {
                "success": True}
        elif c == "write":
            name, inp, out = "Write", {"file_path": d["path"], "content": d["content"]}, {"success": True}
        elif c == "search":
            name, inp, out = "Grep", {"pattern": d["pattern"], "path": d["path"]}, {"matches": d["result"]}
        elif c == "web":
            name, inp, out = "WebSearch", {"query": d["query"]}, {"results": d["result"]}
        elif c == "mcp":
            name, inp, out = f"MCP:{d['tool']}", dict(d["args"]), {"content": [{"type": "text", "text": d["result"]}]}
        elif c == "plan":
            name, inp, out = "UpdateTodos", {"todos": d["todos"]}, {"success": True}
        else:
            name, inp, out = "Skill", {"skill": d["skill"], "args": d["args"]}, {"success": True}
        cat = "other" if c == "other" else c
        tid = "toolu_" + base62(24, self.rng)
        self.advance_ms(call.ms)
        if call.ok:
            p = self.base("postToolUse")
            p.update(tool_name=name, tool_input=inp, tool_output=dumps(out), tool_use_id=tid, cwd=self.cwd,
                     duration=call.ms, model=self.model)
            yield self.emit("tool_call_finished", cat + "_finished", p)
        else:
            if c == "shell":
                err = f"Command failed with exit code {d['exit_code']}\n{d['stderr']}"
            else:
                err = f"Edit failed: old_string matches nothing in {d['path']}"
            p = self.base("postToolUseFailure")
            p.update(tool_name=name, tool_input=inp, tool_use_id=tid, cwd=self.cwd, error_message=err,
                     failure_type="error", duration=call.ms, is_interrupt=False)
            yield self.emit("tool_call_failed", cat + "_failed", p)

    def end_turn(self, message: str) -> Iterator[Emit]:
        r = self.rng
        self.advance_ms(r.uniform(100, 2000))
        p = self.base("afterAgentResponse")
        p["text"] = message
        yield self.emit("agent_message", "message", p)
        self.advance_ms(r.uniform(20, 300))
        p = self.base("stop")
        p.update(status="completed", loop_count=0)
        yield self.emit("turn_stopped", "turn_stopped", p)


# -- Gemini CLI -----------------------------------------------------------------


class GeminiSession(Session):
    provider = "gemini_cli"

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        h = format(self.rng.getrandbits(256), "064x")
        self.transcript = f"{HOME}/.gemini/tmp/{h}/chats/session-2026-01-05T09-00-{self.sid[:8]}.jsonl"
        self.last_prompt = ""

    def base(self, name: str) -> dict[str, Any]:
        return {"session_id": self.sid, "transcript_path": self.transcript, "cwd": self.cwd, "hook_event_name": name,
                "timestamp": ""}

    def session_start(self) -> Emit:
        p = self.base("SessionStart")
        p["source"] = "startup"
        return self.emit("session_started", "session_started", p, True)

    def session_end(self) -> Emit:
        p = self.base("SessionEnd")
        p["reason"] = self.rng.choice(("exit", "clear", "other"))
        return self.emit("session_ended", "session_ended", p, True)

    def prompt(self, text: str) -> Emit:
        self.last_prompt = text
        p = self.base("BeforeAgent")
        p["prompt"] = text
        return self.emit("prompt_submitted", "prompt", p, True)

    def tool_call(self, call: Call, sub: Dispatch | None) -> Iterator[Emit]:
        r = self.rng
        d = call.d
        c = call.cat
        resp: dict[str, Any]
        if c == "shell":
            name, inp = "run_shell_command", {"command": d["command"], "description": d["description"]}
            resp = {"llmContent": f"Output: {d['stdout']}{d['stderr']}\nExit Code: {d['exit_code']}",
                    "returnDisplay": d["stdout"]}
            if not call.ok:
                resp["error"] = f"Command exited with code {d['exit_code']}: {d['stderr']}"
        elif c == "read":
            name, inp = "read_file", {"file_path": d["path"]}
            resp = {"llmContent": d["content"], "returnDisplay": ""}
        elif c == "edit":
            name, inp = "replace", {"file_path": d["path"], "old_string": d["old"], "new_string": d["new"]}
            resp = {"llmContent": f"Replaced 1 occurrence in {d['path']}.", "returnDisplay": "\n".join(
                _patch_lines(d["old"], d["new"]))}
            if not call.ok:
                resp = {"llmContent": "", "returnDisplay": "",
                        "error": f"Edit failed: old_string matches nothing in {d['path']}"}
        elif c == "write":
            name, inp = "write_file", {"file_path": d["path"], "content": d["content"]}
            resp = {"llmContent": f"Wrote {len(d['content'])} bytes to {d['path']}.", "returnDisplay": ""}
        elif c == "search":
            if d["grep"]:
                name, inp = "search_file_content", {"pattern": d["pattern"], "path": d["path"]}
            else:
                name, inp = "glob", {"pattern": d["pattern"], "path": d["path"]}
            resp = {"llmContent": d["result"], "returnDisplay": ""}
        elif c == "web":
            if d["fetch"]:
                name, inp = "web_fetch", {"prompt": d["prompt"] + " " + d["url"]}
            else:
                name, inp = "google_web_search", {"query": d["query"]}
            resp = {"llmContent": d["result"], "returnDisplay": ""}
        elif c == "mcp":
            name, inp = f"mcp__{d['server']}__{d['tool']}", dict(d["args"])
            resp = {"llmContent": d["result"], "returnDisplay": ""}
        elif c == "plan":
            name, inp = "write_todos", {"todos": [{"description": t["content"], "status": t["status"]}
                                                   for t in d["todos"]]}
            resp = {"llmContent": "Updated the todo list.", "returnDisplay": ""}
        else:
            name, inp = "save_memory", {"fact": d["args"]}
            resp = {"llmContent": "Saved.", "returnDisplay": ""}
        if r.random() < _NOTIFY_PER_CALL:
            n = self.base("Notification")
            n.update(notification_type="ToolPermission", message=f"Allow {name}?",
                     details={"tool": name, "type": "exec" if c == "shell" else "edit"})
            yield self.emit("notification", "notification", n, True)
            self.advance_ms(r.uniform(500, 20000))
        pre = self.base("BeforeTool")
        pre.update(tool_name=name, tool_input=inp)
        yield self.emit("tool_call_started", c + "_started", pre, True)
        self.advance_ms(call.ms)
        post = self.base("AfterTool")
        post.update(tool_name=name, tool_input=inp, tool_response=resp)
        if call.ok:
            yield self.emit("tool_call_finished", c + "_finished", post, True)
        else:
            yield self.emit("tool_call_failed", c + "_failed", post, True)

    def end_turn(self, message: str) -> Iterator[Emit]:
        self.advance_ms(self.rng.uniform(100, 3000))
        p = self.base("AfterAgent")
        p.update(prompt=self.last_prompt, prompt_response=message, stop_hook_active=False)
        yield self.emit("turn_stopped", "turn_stopped", p, True)


# -- noise and the TRACE fixture ---------------------------------------------------


class NoiseSession(Session):
    """One event: a capture test, or an event the adapter records as ``unknown``."""

    def __init__(self, wl: Workload, rng: random.Random, start: int, project: Project, sid: str, provider: str,
                 kind: str) -> None:
        self.provider = provider
        super().__init__(wl, rng, start, project, sid)
        self.kind = kind

    def run(self) -> Iterator[Emit]:
        p: dict[str, Any]
        stamped = False
        if self.kind == "capture_test":
            name = {"cursor": "sessionStart"}.get(self.provider, "SessionStart")
            p = {"hook_event_name": name, "session_id": self.sid, "cwd": self.cwd, "_agentlog_capture_test": True}
            if self.provider == "cursor":
                p["conversation_id"] = self.sid
                p["workspace_roots"] = [self.cwd]
        elif self.provider == "cursor":
            p = {"conversation_id": self.sid, "generation_id": uuid4(self.rng), "hook_event_name": "beforeTabFileRead",
                 "workspace_roots": [self.cwd], "file_path": f"{self.cwd}/{self.rel_path()}"}
        elif self.provider == "gemini_cli":
            p = {"session_id": self.sid, "transcript_path": None, "cwd": self.cwd, "hook_event_name": "BeforeModel",
                 "timestamp": "", "llm_request": {"model": self.model, "messages": []}}
            stamped = True
        elif self.provider == "codex":
            p = {"session_id": self.sid, "transcript_path": None, "cwd": self.cwd, "hook_event_name": "Interrupt",
                 "model": self.model}
        else:
            p = {"session_id": self.sid, "transcript_path": f"{HOME}/.claude/projects/x/{self.sid}.jsonl",
                 "cwd": self.cwd, "hook_event_name": "Setup", "trigger": "init"}
        yield self.emit(self.kind, self.kind, p, stamped)


class ChainSession(ClaudeHookSession):
    """``bench-chain-session``: one turn of sequential failing edits of one file (the TRACE subject)."""

    def __init__(self, wl: Workload, rng: random.Random, start: int, edits: int) -> None:
        project = wl.world.projects[0]
        super().__init__(wl, rng, start, project, M.CHAIN_SESSION_ID)
        self.edits = edits
        self.mode = "acceptEdits"

    def run(self) -> Iterator[Emit]:
        r = self.rng
        i = 0  # the most popular file of the most popular project
        path = self.abs_path(i)
        ext = self.project.exts[i]
        yield self.prompt("Make the failing assertion in " + self.project.paths[i] + " pass")
        self.think()
        for _ in range(self.edits):
            old = self.text.file_text(ext, r.randint(40, 400), self.trng)
            new = self.text.file_text(ext, r.randint(40, 400), self.trng)
            call = Call("edit", {"path": path, "rel": self.project.paths[i], "old": old, "new": new, "original": ""},
                        M.DURATION_MS["edit"].draw(r), ok=False, fclass="string_mismatch")
            yield from self.tool_call(call, None)
            self.advance_ms(r.uniform(300, 4000))
        p = self.base("Stop")
        p.update(stop_hook_active=False, last_assistant_message="The edit keeps missing; the file changed under me.")
        yield self.emit("turn_stopped", "turn_stopped", p)

    def tool_call(self, call: Call, sub: Dispatch | None) -> Iterator[Emit]:
        # no denials inside the fixture: every attempt is an edit that fails
        name, inp = claude_tool(call)
        tid = "toolu_01" + base62(22, self.rng)
        pre = self.base("PreToolUse")
        pre.update(tool_name=name, tool_input=inp, tool_use_id=tid)
        yield self.emit("tool_call_started", "edit_started", pre)
        self.advance_ms(call.ms)
        post = self.base("PostToolUseFailure")
        post.update(tool_name=name, tool_input=inp, tool_use_id=tid, error=claude_error(call), is_interrupt=False,
                    duration_ms=call.ms)
        yield self.emit("tool_call_failed", "edit_failed", post)


# ---------------------------------------------------------------------------
# The stream


class Workload:
    """Creates sessions and merges their events into one stream."""

    def __init__(self, events: int, seed: int, world_seed: int | None = None) -> None:
        if events < 0:
            raise ValueError("events must be >= 0")
        self.events = events
        self.seed = seed
        self.rng = random.Random(seed)
        self.text = text_source(seed)
        self.world = World(seed if world_seed is None else world_seed, self.text)
        self.providers = M.PROVIDER_MIX.quota()
        self.claude_source = M.CLAUDE_SOURCE.quota()

    def new_session(self, start: int) -> Session:
        rng = self.rng
        sub = random.Random(rng.getrandbits(64))
        project = self.world.pick_project(rng)
        sid = uuid4(sub)
        if rng.random() < M.NOISE_SESSION_SHARE.value:
            provider = M.PROVIDER_MIX.pick(rng)
            kind = M.NOISE_KIND.pick(rng)
            if kind == "capture_test":
                sid = "agentlog-capture-test-" + base62(12, sub)
            return NoiseSession(self, sub, start, project, sid, provider, kind)
        provider = self.providers.pick(rng)
        if provider == "claude_code":
            if self.claude_source.pick(rng) == "transcript":
                return ClaudeTranscriptSession(self, sub, start, project, sid)
            return ClaudeHookSession(self, sub, start, project, sid)
        if provider == "codex":
            return CodexSession(self, sub, start, project, sid)
        if provider == "cursor":
            return CursorSession(self, sub, start, project, sid)
        return GeminiSession(self, sub, start, project, sid)

    def gap_us(self) -> int:
        return int(M.SESSION_START_GAP_S.sample(self.rng)) * _S

    def samples(self) -> Iterator[dict[str, Any]]:
        total = self.events
        if total == 0:
            return
        k = chain_edits(total)
        chain_len = 2 * k + 2 if k else 0
        chain_at = (total - chain_len) // 2 if chain_len else -1
        heap: list[tuple[int, int, int, Emit, Session, Iterator[Emit]]] = []
        seq = 0
        lanes = int(M.ACTIVE_SESSIONS.value)
        for lane in range(lanes):
            start = M.START_TIME_US + (self.gap_us() // 4 if lane else 0)
            sess = self.new_session(start)
            it = sess.run()
            first = next(it)
            heap.append((first[0], lane, seq, first, sess, it))
            seq += 1
        heapq.heapify(heap)
        n = 0
        offset = 0
        last_out = M.START_TIME_US
        last_raw = M.START_TIME_US
        while n < total:
            if n == chain_at:
                chain = ChainSession(self, random.Random(self.rng.getrandbits(64)), last_out + 2 * _S, k)
                for e in chain.run():
                    yield self._sample(n, e[0], chain, e)
                    n += 1
                    last_out = e[0]
                offset = last_out + 2 * _S - last_raw
                continue
            raw, lane, _, item, sess, it = heapq.heappop(heap)
            out = raw + offset
            yield self._sample(n, out, sess, item)
            n += 1
            last_out = out
            last_raw = raw
            nxt = next(it, None)
            if nxt is None:
                sess = self.new_session(raw + self.gap_us())
                it = sess.run()
                nxt = next(it)
            heapq.heappush(heap, (nxt[0], lane, seq, nxt, sess, it))
            seq += 1

    @staticmethod
    def _sample(n: int, t: int, sess: Session, item: Emit) -> dict[str, Any]:
        _, kind, profile, body, stamped = item
        if stamped:
            body["timestamp"] = iso_ms(t)
        sample: dict[str, Any] = {"n": n, "t": t, "provider": sess.provider, "agent": sess.agent,
                                  "source": sess.source, "session": sess.sid, "kind": kind, "profile": profile}
        if sess.source == "hook":
            sample["payload"] = body
        else:
            sample["line"] = dumps(body)
        return sample


def generate(events: int, seed: int = DEFAULT_SEED, world_seed: int | None = None) -> Iterator[dict[str, Any]]:
    """Exactly ``events`` samples of the seeded workload, in stream order (see the module docstring);
    ``world_seed`` (default: ``seed``) chooses the projects, their paths and their files, so that
    another seed's sessions can go on working on the same projects."""
    return Workload(events, seed, world_seed).samples()
