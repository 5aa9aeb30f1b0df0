"""Part of ``web``: the session page (the conversation) of a 10,000-event session.

A Claude Code transcript of about 10,000 events (:func:`big_session_transcript`: 50 turns of
50 steps, each a reply's text, a Bash call with its usage and a 150-line result, one in seven
failing) is imported with ``agentlog import`` into a data root of its own (not timed); then
``agentlog serve --no-live`` is started over it and the session's first, a middle and its
call pages are timed over HTTP (the first request computed, then warm) and weighed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from agentlog.bench.measure import child
from agentlog.bench.serving import client, serve, stop, time_routes


def _rec(env: dict[str, Any], i: int, **kw: Any) -> dict[str, Any]:
    return {**env, "uuid": f"u{i}", "timestamp": f"2026-11-01T{10 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
            **kw}


def big_session_transcript(path: Path, session: str = "s-big", turns: int = 50, steps: int = 50) -> int:
    """Write a transcript of ``turns`` × ``steps`` tool calls (about 4 events each); its line count."""
    env = {"sessionId": session, "cwd": str(path.parent), "version": "2.1.42", "isSidechain": False}
    n, lines = 0, []
    for t in range(turns):
        n += 1
        lines.append(_rec(env, n, type="user", message={"role": "user", "content": f"turn {t}: make the tests pass"}))
        for s in range(steps):
            n += 1
            tid = f"tu-{t}-{s}"
            lines.append(_rec(env, n, type="assistant", message={
                "id": f"m-{t}-{s}", "model": "claude-sonnet-4-5", "role": "assistant", "type": "message",
                "content": [{"type": "text", "text": f"step {s}: running the tests again"},
                            {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": f"pytest -q -k t{s}"}}],
                "usage": {"input_tokens": 1000, "output_tokens": 50}}))
            n += 1
            failed = s % 7 == 3
            out = ("F" if failed else ".") * 40 + "\n" + "log line\n" * 150 + (
                "1 failed, 211 passed in 3.2s" if failed else "212 passed in 3.1s")
            lines.append(_rec(env, n, type="user", message={"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tid, "content": out, "is_error": failed}]}))
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return n


def big_session(tmp: str) -> dict[str, Any]:
    """The table and metrics of the 10,000-event session's pages."""
    root = os.path.join(tmp, "big-session-home")
    transcript = Path(tmp) / "big-session.jsonl"
    big_session_transcript(transcript)
    child([sys.executable, "-m", "agentlog", "import", "claude-code", str(transcript)],
          env={**os.environ, "AGENTLOG_HOME": root})
    proc, url = serve(root, live=False)
    try:
        http = client(url)
        (s,) = http.get("/api/timeline").json()["sessions"]
        sid = s["session_id"]
        first = http.get(f"/api/sessions/{sid}").json()["session"]
        call = next(it for it in first["items"] if it["type"] == "call")
        routes = [f"/sessions/{sid}", f"/sessions/{sid}?page={first['pages'] // 2}", call["href"]]
        timed = time_routes(http, routes)
        weight = {r: len(http.get(r).content) for r in routes}
        http.close()
    finally:
        stop(proc)
    worst = max(d["first"] for d in timed.values())
    return {
        "metrics": {"session_10k.first_ms": worst, "session_10k.max_kb": max(weight.values()) / 1024,
                    "session_10k.events": s.get("event_count")},
        "table": {"title": f"The session page of a {s.get('event_count') or 0:,}-event session",
                  "columns": ["route", "first (computed)", "p50", "p95", "weight"],
                  "rows": [[r.replace(sid, "ID"), f"{d['first']:.0f} ms", f"{d['median']:.0f} ms",
                            f"{d['p95']:.0f} ms", f"{weight[r] / 1024:.0f} KB"] for r, d in timed.items()],
                  "note": "An imported transcript of 2,500 tool calls in 50 turns, alone in its data root; "
                          "HTTP on loopback to `agentlog serve --no-live`. First: computed (the server remembers "
                          "a page until the store changes). Targets: ≤ 500 ms and ≤ 200 KB before expanding "
                          "anything (the conversation is paged; a call's whole output is fetched on 'show all')."},
    }


__all__ = ["big_session", "big_session_transcript"]
