"""A relevance set for ``agentlog search``: natural-language queries, each with its known targets.

Two sources: the shared Claude Code fixtures (real sessions; :data:`FIXTURE_QUERIES`) and
sessions generated here (:data:`TOPICS`, one session each: a prompt, a failing command and its
error, the assistant's explanation), written as Claude Code transcripts and imported. Every query
is ``keyword`` (it holds the target's distinctive words), ``natural`` (a question in other
words that still shares one) or ``paraphrase`` (no distinctive word in common with any of its
targets). A hit is relevant when its event's text holds one of the query's target strings.

Measures: recall@5 (the share of a query's relevant events, at most 5, in its first 5 hits) and
nDCG@10 (binary gains), averaged over queries.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True)
class Case:
    query: str
    targets: tuple[str, ...]
    kind: str  # keyword | natural | paraphrase


# (prompt, failing command, its error output, the assistant's explanation, keyword query, paraphrase query)
TOPICS: Final[tuple[tuple[str, str, str, str, str, str], ...]] = (
    ("Make the importer read Google's Gemini assistant logs from ~/.gemini/tmp",
     "pytest tests/test_gemini_import.py", "FileNotFoundError: [Errno 2] No such file or directory: '/home/u/.gemini/tmp/chats'",
     "The Gemini importer now walks ~/.gemini/tmp/*/chats and parses each checkpoint JSON.",
     "gemini importer chats", "when did we teach it to load conversations from the Bard successor's history folder"),
    ("The build fails: ModuleNotFoundError for yaml when running the release script",
     "python scripts/release.py", "ModuleNotFoundError: No module named 'yaml'",
     "PyYAML was missing from the requirements; added it so the release script imports.",
     "ModuleNotFoundError yaml", "compilation broke because a python dependency package was not installed"),
    ("Add a dark mode toggle to the settings page of the dashboard",
     "npm run test:ui", "TypeError: Cannot read properties of undefined (reading 'theme')",
     "The settings page now has a theme switch that stores the dark palette choice in localStorage.",
     "dark mode toggle settings", "let people flip the web ui to a night colour scheme"),
    ("Postgres migrations time out on the CI runner",
     "alembic upgrade head", "psycopg2.OperationalError: could not connect to server: Connection timed out",
     "The CI service container for Postgres started after the migration step; added a readiness wait.",
     "alembic psycopg2 OperationalError", "database schema upgrades hang on the build machine"),
    ("Rate limit the public API to 100 requests per minute per token",
     "pytest tests/test_throttle.py", "AssertionError: expected status 429, got 200",
     "Added a token bucket per API key; the 101st request in a minute now returns 429.",
     "token bucket 429", "stop clients from hammering the endpoints too often"),
    ("Fix the memory leak in the websocket handler",
     "go test ./ws -run TestHandlerLeak", "leak detected: 1204 goroutines still running after Close",
     "Each connection's reader goroutine was never cancelled; Close now cancels its context.",
     "goroutines still running after Close", "the realtime socket server keeps growing its RAM until it is killed"),
    ("Translate the onboarding emails into French and German",
     "make i18n-check", "missing translation key onboarding.welcome.subject for locale fr",
     "Added fr and de message catalogues for the onboarding emails and a check for missing keys.",
     "translation locale fr onboarding", "localise the first-day messages for customers in Paris and Berlin"),
    ("Docker image is 2 GB, make it smaller",
     "docker build -t app .", "failed to solve: process \"/bin/sh -c apk add gcc\" did not complete successfully",
     "Switched to a multi-stage build on alpine; the final image is 84 MB.",
     "multi-stage build alpine", "shrink the container we ship so deploys download less"),
    ("Flaky test: test_upload_resumes sometimes fails on slow disks",
     "pytest tests/test_upload.py::test_upload_resumes", "TimeoutError: upload did not resume within 5.0 seconds",
     "The test waited a fixed 5 s; it now polls the part count with a deadline, so slow disks pass.",
     "test_upload_resumes TimeoutError", "a check that is red or green at random depending on storage speed"),
    ("Encrypt the backups with age before uploading them to S3",
     "./backup.sh --dry-run", "age: error: no recipients specified",
     "Backups are now encrypted to the team's age recipients file before the S3 upload.",
     "age recipients S3 upload", "make the nightly archive copies unreadable to the cloud provider"),
    ("Parse ISO 8601 durations like PT1H30M in the scheduler config",
     "cargo test duration", "thread 'parse_duration' panicked at 'invalid digit found in string'",
     "The scheduler now accepts ISO 8601 durations (PT1H30M) besides plain seconds.",
     "ISO 8601 durations PT1H30M", "let the job timetable take an hour and a half written the standard way"),
    ("Search results should highlight the matching words",
     "npm test -- highlight", "Expected '<mark>foo</mark> bar' but received 'foo bar'",
     "Snippets now wrap each matched term in a mark element, escaped first.",
     "highlight the matching words", "show in bold what the user typed inside each found result"),
    ("Upgrade React from 17 to 18 and fix the warnings",
     "npm run build", "Warning: ReactDOM.render is no longer supported in React 18. Use createRoot instead.",
     "Moved the entry point to createRoot and fixed the strict-mode double effects.",
     "ReactDOM.render createRoot", "move the frontend library to its newest major version"),
    ("The cron job sends duplicate invoices at midnight",
     "python -m billing.send_invoices --date 2026-01-01", "IntegrityError: duplicate key value violates unique constraint invoices_period_key",
     "Two workers picked the same period; the job now takes an advisory lock before sending.",
     "duplicate invoices cron job", "customers got billed twice by the scheduled task at 00:00"),
    ("Add OAuth login with GitHub",
     "pytest tests/test_auth.py", "KeyError: 'GITHUB_CLIENT_SECRET'",
     "GitHub OAuth is wired through the callback route; the client secret is read from the environment.",
     "GITHUB_CLIENT_SECRET KeyError", "let users sign in with their account from the code hosting site"),
    ("Speed up the CSV export, it takes minutes for big tables",
     "python -m cProfile export.py", "export of 2,000,000 rows took 312.4 s",
     "Rows are now streamed with a server-side cursor and written in batches: 9 s for 2 M rows.",
     "CSV export big tables", "downloading a spreadsheet of everything is far too slow"),
    ("The mobile app crashes on Android 14 when opening the camera",
     "./gradlew connectedAndroidTest", "java.lang.SecurityException: Permission Denial: starting Intent android.media.action.IMAGE_CAPTURE",
     "Android 14 needs the camera permission requested at run time; added the request flow.",
     "Android 14 camera crashes", "the phone application dies when taking a photo on the newest OS"),
    ("Write a Makefile target that runs the linters",
     "make lint", "make: *** No rule to make target 'lint'.  Stop.",
     "Added a lint target running ruff and mypy, and wired it into CI.",
     "Makefile target linters", "one command to check code style and types"),
    ("Timezone bug: reports show yesterday's totals after 11pm",
     "pytest tests/test_reports.py -k tz", "AssertionError: 2026-03-01 != 2026-02-28",
     "Day boundaries were computed in UTC; reports now use the account's zone from its settings.",
     "reports yesterday's totals after 11pm", "late evening numbers get counted on the wrong date"),
    ("Kubernetes pods get OOMKilled during the nightly batch",
     "kubectl describe pod batch-7f9c", "Last State: Terminated Reason: OOMKilled Exit Code: 137",
     "Raised the memory limit to 2Gi and made the batch process files in chunks of 10,000.",
     "OOMKilled Exit Code 137", "the cluster containers run out of RAM at night and die"),
)

FIXTURE_QUERIES: Final[tuple[Case, ...]] = (
    Case("mise run test:ci failing", ('"mise run test:ci" is failing',), "keyword"),
    Case("why did the checks break after the enable command's message was altered",
         ("The test is failing because the output format changed", "Tests pass now. The issue was"), "paraphrase"),
    Case("code-simplifier plugin", ("can you use the code-simplifier plugin",), "keyword"),
    Case("bump golang toolchain release", ("can you update go in all the right places", "Updated Go version"),
         "paraphrase"),
    Case("single shadow branch without suffixes", ("single shadow branch without suffixes",
                                                   "simplified single-branch approach"), "keyword"),
    Case("review pull request 102 and fix the lint", ("we are reviewing https://github.com/entireio/cli/pull/102",),
         "natural"),
    Case("one log file per worktree instead of per session", ("Consolidate logging to single file per worktree",),
         "natural"),
    Case("fish shell completion", ("This adds a new Fish branch in shell detection",), "keyword"),
    Case("warn people when two agents run at the same time", ("multi-session warnings", "multi-session handling"),
         "paraphrase"),
    Case("why did we put every log line in one place for each checkout",  # a commit's message
         ("Consolidate logging to single file per worktree",), "paraphrase"),
)


def generated_cases() -> list[Case]:
    """Per generated topic: its keyword query, its paraphrase, and (for every other topic) a
    question that names its failure in other words with one of its words."""
    out: list[Case] = []
    for i, (prompt, command, error, reply, keyword, paraphrase) in enumerate(TOPICS):
        targets = (prompt, error, reply)
        out.append(Case(keyword, targets, "keyword"))
        out.append(Case(paraphrase, targets, "paraphrase"))
        if i % 2 == 0:
            out.append(Case(f"what went wrong: {error.split(':')[0]}", targets, "natural"))
    return out


def cases() -> list[Case]:
    return [*FIXTURE_QUERIES, *generated_cases()]


def held_out(i: int) -> bool:
    """Whether the ``i``-th case is in the held-out third (not used to choose a setting)."""
    return i % 3 == 2


NONSENSE: Final = ("zebracanary", "qwxzptlk vrrmbo", "flibbertigibbet snorkel", "purple elephant ballet recital",
                   "medieval castle siege catapult", "knitting a wool scarf for grandma")
"""Queries nothing in the relevance corpus is about: a search in any mode should return nothing."""


def build(root: str, work: str, fixtures: str | None) -> None:
    """The relevance corpus in ``root``: the generated sessions (written under ``work``) and the
    shared Claude Code fixtures (``fixtures``), imported, ingested, and both indexes caught up."""
    from agentlog.importers.run import import_paths
    from agentlog.search.service import search
    from agentlog.store.ingest import ingest

    generated = write_sessions(os.path.join(work, "generated"))
    import_paths(root, ["claude-code"], [*([fixtures] if fixtures else []), *generated])
    ingest(root)
    search(root, "warm", mode="lexical")


def write_sessions(directory: str) -> list[str]:
    """Each topic as a Claude Code transcript (a session) in ``directory``; their paths."""
    os.makedirs(directory, exist_ok=True)
    paths: list[str] = []
    for i, (prompt, command, error, reply, _, _) in enumerate(TOPICS):
        sid = f"00000000-0000-4000-8000-{i:012d}"
        stamp = f"2026-02-{1 + i % 27:02d}T10:00:00.000Z"

        def line(n: int, kind: str, message: dict[str, Any], parent: str | None) -> dict[str, Any]:
            return {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": f"/work/topic{i}",
                    "sessionId": sid, "version": "2.0.76", "type": kind, "message": message,
                    "uuid": f"{sid[:-4]}{n:04d}", "timestamp": stamp}

        tool_id = f"toolu_gen{i:04d}"
        lines = [
            line(1, "user", {"role": "user", "content": prompt}, None),
            line(2, "assistant", {"role": "assistant", "type": "message", "model": "m", "id": f"msg_{i}a",
                                  "content": [{"type": "tool_use", "id": tool_id, "name": "Bash",
                                               "input": {"command": command}}]}, f"{sid[:-4]}0001"),
            line(3, "user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id,
                                                          "content": f"Exit code 1\n{error}", "is_error": True}]},
                 f"{sid[:-4]}0002"),
            line(4, "assistant", {"role": "assistant", "type": "message", "model": "m", "id": f"msg_{i}b",
                                  "content": [{"type": "text", "text": reply}]}, f"{sid[:-4]}0003"),
        ]
        path = os.path.join(directory, f"{sid}.jsonl")
        with open(path, "w") as fh:
            fh.write("\n".join(json.dumps(x) for x in lines) + "\n")
        paths.append(path)
    return paths


def event_texts(root: str) -> dict[str, str]:
    """Every stored event's id and its searchable text."""
    from agentlog.search.text import plain
    from agentlog.store.schema import read_events

    t = read_events(root, columns=["event_id", "text", "event", "tool_name"])
    out: dict[str, str] = {}
    for eid, text, event, tool in zip(*(t.column(c).to_pylist() for c in ("event_id", "text", "event", "tool_name"))):
        content = json.loads(event).get("content") if event else None
        out[str(eid)] = plain(text, content, None, tool)
    return out


def measure(root: str, mode: str, *, which: str | None = None, part: str | None = None) -> dict[str, float]:
    """Mean recall@5 and nDCG@10 of ``mode`` over the set (``which``: one kind of query only;
    ``part``: ``tuning`` or ``held-out`` queries only, :func:`held_out`)."""
    from agentlog.search.service import search

    texts = event_texts(root)
    recall, ndcg = [], []
    for i, case in enumerate(cases()):
        if which is not None and case.kind != which:
            continue
        if part is not None and held_out(i) != (part == "held-out"):
            continue
        relevant = {e for e, t in texts.items() if any(s in t for s in case.targets)}
        if not relevant:
            raise ValueError(f"no event holds a target of {case.query!r}")
        hits = search(root, case.query, limit=10, mode=mode, catch=False).hits
        got = [h.event_id in relevant for h in hits]
        recall.append(sum(got[:5]) / min(len(relevant), 5))
        dcg = sum(1 / math.log2(i + 2) for i, g in enumerate(got) if g)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
        ndcg.append(dcg / ideal)
    n = max(len(recall), 1)
    return {"queries": len(recall), "recall@5": round(sum(recall) / n, 3), "ndcg@10": round(sum(ndcg) / n, 3)}


PARTS: Final = (("all", None, None), ("keyword", "keyword", None), ("natural", "natural", None),
                 ("paraphrase", "paraphrase", None), ("held-out", None, "held-out"))


def report(work: str, fixtures: str | None) -> dict[str, Any]:
    """The relevance set measured in every mode the installed extras allow: the corpus built
    under ``work`` (kept: a second call reuses it), recall@5 and nDCG@10 per mode and per part
    (:data:`PARTS`: every query, each kind, the held-out third), and the index's vectors."""
    from agentlog.search import semantic

    root = os.path.join(work, "home")
    if not os.path.isdir(root):
        build(root, work, fixtures)
    modes = ["lexical", "semantic", "hybrid"] if semantic.available() else ["lexical"]
    out: dict[str, Any] = {"queries": len(cases()), "modes": {}}
    for mode in modes:
        out["modes"][mode] = {name: measure(root, mode, which=which, part=part) for name, which, part in PARTS}
    if semantic.available():
        out["index"] = semantic.stats(root)
    return out


__all__ = ["FIXTURE_QUERIES", "NONSENSE", "PARTS", "TOPICS", "Case", "build", "cases", "event_texts", "held_out",
           "measure", "report", "write_sessions"]
