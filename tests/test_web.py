"""The dashboard in process: every route, the API shapes, the guard, escaping, the live feed."""

from __future__ import annotations

import json
import os
import time
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from starlette.testclient import TestClient

from agentlog.operations import demo
from agentlog.memory import service as S
from agentlog.memory.proposals import open_proposal
from agentlog.web.app import create_app
from agentlog.web.security import COOKIE, Guard

XSS_PROMPT = '<script>alert("p")</script> "><img src=x onerror=alert(1)>'
XSS_OUTPUT = "</pre><script>alert('o')</script><a href=\"javascript:alert(2)\">x</a>"
PAGES = ("/", "/timeline", "/failures", "/search", "/search?q=parser", "/memory", "/proposals", "/proposals?status=all",
         "/sql", "/sql?q=select+1+as+one", "/usage", "/integrity")
APIS = ("/api/now", "/api/timeline", "/api/failures", "/api/search?q=parser", "/api/memory", "/api/proposals",
        "/api/sql?q=select+1+as+one", "/api/usage", "/api/integrity")


def _hook(root: str, payload: dict[str, Any]) -> None:
    """A hook payload recorded through the hook path, in another process (as an agent runs it)."""
    from agentlog.capture.command import hook_argv

    r = subprocess.run(hook_argv("claude-code"), input=json.dumps(payload).encode(), capture_output=True,
                       timeout=60, env={**os.environ, "AGENTLOG_HOME": root})
    assert r.returncode == 0, r.stderr


def _hostile(root: str, sid: str = "s-xss") -> None:
    base = {"session_id": sid, "cwd": "/tmp/xss-project", "transcript_path": "/tmp/x.jsonl"}
    _hook(root, {**base, "hook_event_name": "UserPromptSubmit", "prompt": XSS_PROMPT})
    _hook(root, {**base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "tu1",
                 "tool_input": {"command": "echo '<b>bold</b>'"}})
    _hook(root, {**base, "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "tu1",
                 "tool_input": {"command": "echo '<b>bold</b>'"}, "tool_response": {"stdout": XSS_OUTPUT}})


def _signed_in(app: Any, guard: Guard) -> TestClient:
    client = TestClient(app, base_url=f"http://127.0.0.1:{guard.port}")
    r = client.get(f"/?token={guard.token}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"
    client.cookies.set(COOKIE, r.cookies[COOKIE])
    return client


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("web") / "home"
    mp = pytest.MonkeyPatch()
    mp.setattr(demo, "claude_hook_fixtures", lambda: [])
    result = demo.run_demo(str(home))  # the scripted session: failures, a superseded edit, a suggested memory
    mp.undo()
    root = result.home
    _hostile(root)
    S.create(root, "pitfall", XSS_PROMPT, content=XSS_OUTPUT,
             attributes={"symptom": XSS_PROMPT, "avoid": "escape everything"})
    yield root


@pytest.fixture()
def client(populated: str) -> Iterator[TestClient]:
    guard = Guard(port=8765)
    with _signed_in(create_app(populated, guard, live=False), guard) as c:
        yield c


def test_every_page_and_api_answers_on_an_empty_store(tmp_path: Path) -> None:
    guard = Guard(port=8765)
    with _signed_in(create_app(str(tmp_path / "empty"), guard, live=False), guard) as c:
        for path in PAGES:
            r = c.get(path)
            assert r.status_code == 200, (path, r.text[:300])
            assert "<main id=\"main\">" in r.text
        for path in APIS:
            r = c.get(path)
            assert r.status_code == 200 and r.headers["content-type"].startswith("application/json"), path


def test_every_page_renders_on_a_populated_store_with_links_that_work(client: TestClient) -> None:
    for path in PAGES:
        r = client.get(path)
        assert r.status_code == 200, (path, r.text[:300])
    timeline = client.get("/timeline").text
    sessions = sorted(set(re.findall(r'href="(/sessions/ses_[0-9a-f-]+)"', timeline)))
    attempts = sorted(set(re.findall(r'href="(/attempts/att_[0-9a-f-]+)"', timeline)))
    assert len(sessions) >= 2 and len(attempts) >= 4
    for path in sessions + attempts:
        assert client.get(path).status_code == 200, path
    assert "superseded" in timeline and 'class="seg failure"' in timeline  # the time bar marks failures


def test_api_shapes(client: TestClient) -> None:
    now = client.get("/api/now").json()
    assert set(now) == {"at", "needs_you", "live", "failures", "today", "bounds", "proposals"}
    assert now["proposals"]["count"] >= 1 and now["proposals"]["newest"][0]["title"]  # the demo's suggested memory
    tl = client.get("/api/timeline").json()
    assert {"sessions", "page", "more", "project"} <= set(tl)
    s = tl["sessions"][0]
    assert {"session_id", "provider", "turns", "bar"} <= set(s)
    attempt_ids = [a["attempt_id"] for s in tl["sessions"] for t in s["turns"] for a in t["attempts"]]
    edits = [client.get(f"/api/attempts/{a}").json()["attempt"] for a in attempt_ids]
    assert any(d["diffs"] and "+    return d.get('name', '')" in d["diffs"][0]["diff"] for d in edits)
    assert all({"attempt_id", "outcome", "events", "diffs"} <= set(d) for d in edits)
    f = client.get("/api/failures").json()
    assert f["failures"] and all(x["outcome_status"] in ("failure", "denied") for x in f["failures"])
    assert all({"command", "target", "error_line", "summary", "retry", "attempt_id", "attempt_outcome"} <= set(x)
               for x in f["failures"])
    sql = client.get("/api/sql", params={"q": "select kind, count(*) as n from events group by 1 order by 1"}).json()
    assert sql["result"]["columns"] == ["kind", "n"] and sql["result"]["rows"]
    csv = client.get("/sql.csv", params={"q": "select 1 as one, 'a,b' as two"})
    assert csv.status_code == 200 and csv.text.splitlines() == ["one,two", '1,"a,b"']
    assert set(client.get("/api/usage").json()) == {"days", "models", "projects"}
    mem = client.get("/api/memory").json()
    assert mem["memories"] and {"id", "kind", "title", "effective_confidence"} <= set(mem["memories"][0])
    one = client.get(f"/api/memory/{mem['memories'][0]['id']}").json()
    assert {"memory", "history"} == set(one)
    assert client.get("/api/proposals").json()["proposals"][0]["diff"]  # the demo's suggested memory
    integ = client.get("/api/integrity").json()
    assert integ["logs"] and integ["unverified"] == len(integ["logs"]) and integ["trust"] is None
    assert "Not checked yet" in client.get("/integrity").text
    after = client.post("/api/integrity/verify", headers={"x-csrf-token": _csrf(client)}).json()
    assert after["unverified"] == 0
    # "verify now" also checks the Merkle tree and the checkpoints, and the page shows the result
    trust = after["trust"]
    assert trust["ok"] and trust["tree"] and trust["frames_checked"] == trust["tree_size"] > 0 and trust["verified_at"]
    page = client.get("/integrity").text
    assert f"{trust['tree_size']} frames of {trust['logs']} logs are the tree" in page and "consistent" in page


def _csrf(client: TestClient, path: str = "/") -> str:
    m = re.search(r'<meta name="csrf-token" content="([0-9a-f]+)">', client.get(path).text)
    assert m
    return m.group(1)


def test_errors_are_problem_documents_under_api(client: TestClient) -> None:
    for path, status in (("/api/sessions/ses_ffffffffffff", 404), ("/api/attempts/zz", 400),
                         ("/api/sql?q=drop+table+events", 400), ("/api/nothing-here", 404)):
        r = client.get(path)
        assert r.status_code == status, (path, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        body = r.json()
        assert body["status"] == status and body["title"] and "type" in body
    assert client.get("/sessions/ses_ffffffffffff").status_code == 404  # a page, not JSON
    assert "text/html" in client.get("/sessions/ses_ffffffffffff").headers["content-type"]


def test_captured_and_stored_text_is_escaped_everywhere(client: TestClient) -> None:
    bodies = [client.get(p).text for p in PAGES]
    timeline = client.get("/timeline").text
    bodies += [client.get(p).text for p in sorted(set(re.findall(r'href="(/(?:sessions|attempts)/[a-z]{3}_[0-9a-f-]+)"',
                                                                 timeline)))]
    mem = [m for m in client.get("/api/memory").json()["memories"] if m["title"] == XSS_PROMPT]
    bodies.append(client.get(f"/memory/{mem[0]['id']}").text)
    joined = "\n".join(bodies)
    assert "&lt;script&gt;alert(" in joined  # the payloads are shown, as text
    for body in bodies:
        scripts = re.findall(r"<script[^>]*>", body)
        assert scripts[:1] == ['<script src="/static/app.js" defer>'], scripts  # then only the page's own files
        assert all(re.fullmatch(r'<script src="/static/[a-z_]+\.js" defer>', s) for s in scripts), scripts
        assert "onerror=alert" not in body.replace("onerror=alert(1)&gt;", "")
        assert 'href="javascript:' not in body


def test_security_headers_and_strict_csp(client: TestClient) -> None:
    r = client.get("/")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["referrer-policy"] == "same-origin"


def test_the_guard(populated: str) -> None:
    guard = Guard(port=8765)
    app = create_app(populated, guard, live=False)
    with TestClient(app, base_url="http://127.0.0.1:8765") as anon:
        assert anon.get("/").status_code == 401
        assert anon.get("/api/now").headers["content-type"].startswith("application/problem+json")
        assert anon.get("/?token=wrong").status_code == 401
        assert anon.get("/static/app.css").status_code == 200  # assets hold nothing private
    with TestClient(app, base_url="http://evil.example:8765") as rebinding:
        assert rebinding.get(f"/?token={guard.token}").status_code == 421  # DNS rebinding: foreign Host
    assert not guard.token_spent
    with _signed_in(app, guard) as c:
        assert c.get("/").status_code == 200
        with TestClient(app, base_url="http://127.0.0.1:8765") as other:
            assert other.get(f"/?token={guard.token}").status_code == 401  # one-time
        # POST without the CSRF token, with a wrong one, from another origin: refused
        pid = open_proposal(populated, [{"op": "create", "kind": "fact", "title": "web fact",
                                         "attributes": {"statement": "s"}}], title="from a test").id
        assert c.post(f"/proposals/{pid}/approve").status_code == 403
        assert c.post(f"/proposals/{pid}/approve", data={"csrf": "0" * 64}).status_code == 403
        token = _csrf(c)
        assert c.post(f"/proposals/{pid}/approve", data={"csrf": token},
                      headers={"origin": "http://evil.example"}).status_code == 403
        r = c.post(f"/proposals/{pid}/approve", data={"csrf": token}, follow_redirects=False)
        assert r.status_code == 303
        assert [m for m in S.list_memories(populated, limit=500) if m.title == "web fact"]
        assert c.post(f"/api/proposals/{pid}/undo", headers={"x-csrf-token": token}).json()["status"] == "undone"
        assert c.post(f"/api/proposals/{pid}/undo", headers={"x-csrf-token": token}).status_code == 409


def test_serve_refuses_a_non_loopback_bind_without_allow_remote(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "agentlog", "serve", "--host", "0.0.0.0", "--port", "0"],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "AGENTLOG_HOME": str(tmp_path)})
    assert r.returncode == 2 and "--allow-remote" in r.stderr


def test_the_live_feed_sees_another_process_write_and_replays_or_resyncs(tmp_path: Path) -> None:
    from agentlog.operations.reader import Source
    from agentlog.web.live import Feed

    root = str(tmp_path / "live")
    feed = Feed(Source(root, min_interval_s=0.0), cap=3)
    feed.check()  # the baseline
    _hook(root, {"session_id": "s-live", "cwd": "/tmp/p", "hook_event_name": "UserPromptSubmit", "prompt": "hi"})
    changes = feed.check()
    assert [c.type for c in changes][:1] == ["events"] and changes[0].data["new_events"] == 1
    S.create(root, "fact", "a memory written by this process", attributes={"statement": "x"})
    assert "memory" in [c.type for c in feed.check()]
    first = feed.last_id
    for i in range(4):
        feed.publish("store", {"i": i})
    assert feed.since(first + 1) is not None and [c.data["i"] for c in feed.since(first + 1) or []] == [1, 2, 3]
    assert feed.since(first - 2) is None  # older than the ring holds: resync
    frame = feed.since(first + 2)[0].sse()  # type: ignore[index]
    assert frame.startswith(b"id: ") and b"\nevent: store\ndata: {" in frame and frame.endswith(b"\n\n")


def test_search_page_filters_and_results_fragment(client: TestClient) -> None:
    r = client.get("/search", params={"q": "parser", "tool": "Edit", "outcome": "superseded"})
    assert r.status_code == 200 and '<div id="results">' in r.text and 'id="search-form"' in r.text
    api = client.get("/api/search", params={"q": "parser", "tool": "Edit"}).json()
    assert api["hits"] and all(h["tool"] == "Edit" for h in api["hits"])
    assert all(h["attempt_outcome"] == "superseded"
               for h in client.get("/api/search", params={"q": "parser", "outcome": "superseded"}).json()["hits"])
    bad = client.get("/api/search", params={"q": '-only'}).json()
    assert bad["hits"] == [] and "at least one word" in bad["error"]
    marked = client.get("/search", params={"q": "parser"}).text
    assert "<mark>parser</mark>" in marked.lower() or "<mark>Parser</mark>" in marked


def test_usage_breakdowns_equal_sums_over_the_usage_rows(agentlog_home: Path) -> None:
    """The Usage page's one-pass grouping equals sums made here from the usage rows themselves."""
    from agentlog.operations.fixtures import missing, shared_dir
    from agentlog.importers.run import import_paths
    from agentlog.query.engine import Engine
    from agentlog.store.ingest import ingest
    from agentlog.web import data

    shared = shared_dir()
    fixtures = shared / "fixtures" / "claude-code" if shared is not None else None
    if fixtures is None or not fixtures.is_dir():
        pytest.skip(missing(fixtures))
    import_paths(str(agentlog_home), ["claude-code"], [str(fixtures)])
    ingest(str(agentlog_home))
    with Engine(str(agentlog_home)) as engine:
        got = data.usage(engine)
        res = engine.run("SELECT observed_at, model, project_name, total_tokens, cost_usd FROM usage", max_rows=1_000_000)
    rows = [dict(zip(res.columns, r)) for r in res.rows]
    assert rows, "the fixtures hold usage"
    for name, key in (("days", lambda r: r["observed_at"].strftime("%Y-%m-%d")),
                      ("models", lambda r: r["model"] or "?"), ("projects", lambda r: r["project_name"] or "?")):
        want: dict[str, list[Any]] = {}
        for r in rows:
            w = want.setdefault(key(r), [0, 0])
            w[0] += r["total_tokens"]
            w[1] += 1
        assert {g["key"]: [g["tokens"], g["responses"]] for g in got[name]} == want, name
    assert [d["key"] for d in got["days"]] == sorted(d["key"] for d in got["days"])
    costs = [m["cost_usd"] for m in got["models"] if m["cost_usd"] is not None]
    assert costs == sorted(costs, reverse=True)


def test_partition_days_cover_the_span_with_a_day_either_side() -> None:
    import datetime as dt

    from agentlog.query.views import partition_days

    utc = dt.timezone.utc
    start = dt.datetime(2026, 3, 1, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-2)))  # 2 March in UTC
    assert partition_days(start, start + dt.timedelta(hours=3)) == ["2026-03-01", "2026-03-02", "2026-03-03"]
    assert partition_days(None, None) == []
    assert partition_days(start, start + dt.timedelta(days=40)) == []
    today = dt.datetime.now(utc).date()
    recent = dt.datetime.now(utc) - dt.timedelta(days=3)
    open_span = partition_days(recent, None)  # not ended: up to today (and a day after)
    assert open_span[0] == (recent.date() - dt.timedelta(days=1)).isoformat()
    assert (today + dt.timedelta(days=1)).isoformat() == open_span[-1]


def test_show_reads_the_same_evidence_as_an_unfiltered_scan(populated: str) -> None:
    from agentlog.query import views
    from agentlog.query.engine import Engine

    with Engine(populated) as engine:
        attempts = engine.run("SELECT attempt_id, evidence FROM attempts").rows
        assert attempts
        for attempt_id, evidence in attempts:
            shown = views.show(engine, f"att_{attempt_id}")
            ids = list(evidence or [])
            want = engine.run(f"SELECT event_id FROM events WHERE event_id IN ({', '.join('?' for _ in ids)}) "
                              "ORDER BY observed_at, captured_at, event_id", ids).rows if ids else []
            assert [e["event_id"].removeprefix("ev_") for e in shown["evidence"]] == [r[0] for r in want]


def test_the_server_compacts_a_store_of_small_files_when_no_daemon_runs(agentlog_home: Path) -> None:
    """Without a daemon the live feed does its upkeep: small files from many ingests are compacted,
    and every row is still there."""
    import time

    from deltalake import DeltaTable

    from agentlog.query.engine import Engine
    from agentlog.store.ingest import ingest
    from agentlog.store.schema import events_path
    from agentlog.operations.reader import Source
    from agentlog.web.live import UPKEEP_S, Feed
    from import_support import record_prompt

    root = str(agentlog_home)
    for i in range(6):  # one ingest each: six small files in today's partition
        record_prompt(root, f"s-{i}", f"prompt number {i}")
        ingest(root)
    before = len(DeltaTable(events_path(root)).file_uris())
    assert before >= 6
    feed = Feed(Source(root, catch_up=False))
    assert not feed.upkeep_if_due()  # not yet: the first upkeep waits a minute
    assert feed.upkeep_if_due(now=time.monotonic() + 2 * UPKEEP_S)
    assert feed._upkeep is not None
    feed._upkeep.join(timeout=120)
    assert feed.upkeep_runs == 1
    assert len(DeltaTable(events_path(root)).file_uris()) < before
    with Engine(root) as engine:
        assert sorted(r[0] for r in engine.run("SELECT text FROM events WHERE kind = 'prompt_submitted'").rows) == \
            [f"prompt number {i}" for i in range(6)]


def test_the_server_indexes_in_the_background_and_a_search_meanwhile_says_so(agentlog_home: Path) -> None:
    from agentlog.search import index
    from agentlog.search.service import search
    from agentlog.store.ingest import ingest
    from agentlog.operations.reader import Source
    from agentlog.web.live import Feed
    from import_support import record_prompt

    root = str(agentlog_home)
    record_prompt(root, "s-bg", "zebraquartz appears here")
    ingest(root)
    assert index.open_index(root, create=False) is None  # never indexed
    feed = Feed(Source(root, catch_up=False))
    feed.start()
    try:
        assert feed.indexer is not None
        feed.indexer.join(timeout=120)
    finally:
        feed.stop()
    assert feed.errors == 0
    assert [h.kind for h in search(root, "zebraquartz", catch=False).hits] == ["prompt_submitted"]

    # another process writing the index: the page answers from what is committed, says so, and
    # the answer is not remembered past the index's next commit
    record_prompt(root, "s-bg2", "yakquartz arrives later")
    guard = Guard(port=8765)
    idx = index.open_index(root)
    assert idx is not None
    with _signed_in(create_app(root, guard, live=False), guard) as c:
        held = idx.writer(heap_size=15_000_000, num_threads=1)
        try:
            page = c.get("/search?q=yakquartz")
            assert page.status_code == 200 and "being brought up to date" in page.text
            assert "yakquartz arrives" not in page.text
        finally:
            held.wait_merging_threads()  # released
        page = c.get("/search?q=yakquartz")
        assert "being brought up to date" not in page.text and "yakquartz" in page.text
        assert c.get("/api/search?q=yakquartz").json()["hits"]


def test_catching_up_is_skipped_while_neither_the_logs_nor_the_store_change(agentlog_home: Path) -> None:
    from agentlog.store.ingest import ingest
    from agentlog.operations.reader import Source
    from import_support import record_prompt

    root = str(agentlog_home)
    record_prompt(root, "s-q", "first prompt")
    source = Source(root, min_interval_s=0.0)
    first = source.bring_up_to_date()
    assert first is not None and first["ingest"]["events"] == 1
    assert source.bring_up_to_date() is None  # nothing changed: not even a no-op ingest
    record_prompt(root, "s-q", "second prompt")  # a hook appends
    again = source.bring_up_to_date()
    assert again is not None and again["ingest"]["events"] == 1
    record_prompt(root, "s-other", "third prompt")
    ingest(root)  # another process ingests: the store changed, the projection is refreshed here
    after = source.bring_up_to_date()
    assert after is not None and after["ingest"]["events"] == 0
    assert source.read(lambda e: e.run("SELECT count(*) FROM turns").rows[0][0]) == 3


def test_a_missing_static_file_and_a_monstrous_path_glob_are_clean_errors(populated: str) -> None:
    """Issue 27, finding 20: no 500 (and no server traceback) for a /static/ miss without a
    session, nor for a path: glob too complex for the index's regex engine."""
    guard = Guard(port=8765)
    app = create_app(populated, guard, live=False)
    anonymous = TestClient(app, base_url=f"http://127.0.0.1:{guard.port}", raise_server_exceptions=True)
    r = anonymous.get("/static/no-such-file.js")
    assert r.status_code == 404 and "<nav" not in r.text
    with _signed_in(app, guard) as c:
        for path in ("/search", "/api/search"):
            r = c.get(path, params={"q": "path:" + "*a" * 500})
            assert r.status_code in (200, 400), (path, r.status_code)
            assert "too complex" in r.text, path


def test_sessions_expire_and_other_origins_cannot_use_the_cookie(populated: str) -> None:
    """Issue 27, finding 18: the session cookie (sent by the browser to every port of
    127.0.0.1) was a bearer token without expiry. Now it expires (Max-Age and the server's
    own clock), and a request another origin makes the browser send is refused."""
    guard = Guard(port=8765)
    app = create_app(populated, guard, live=False)
    with TestClient(app, base_url=f"http://127.0.0.1:{guard.port}") as c:
        r = c.get(f"/?token={guard.token}", follow_redirects=False)
        assert "Max-Age=" in r.headers["set-cookie"]
        c.cookies.set(COOKIE, r.cookies[COOKIE])
        assert c.get("/timeline").status_code == 200
        assert c.get("/timeline", headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200
        for site in ("same-site", "cross-site"):  # another port of 127.0.0.1 is "same-site"
            assert c.get("/timeline", headers={"Sec-Fetch-Site": site}).status_code == 403, site
        guard.sessions[r.cookies[COOKIE]] = 0.0  # its time is up
        assert c.get("/timeline").status_code == 401


def test_serve_prints_its_address_only_once_it_accepts_connections(tmp_path: Path) -> None:
    """Issue 27, finding 10: the URL was printed before the socket listened, so a client that
    opened it at once was refused."""
    import os
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    env = {**os.environ, "AGENTLOG_HOME": str(tmp_path / "home")}
    with subprocess.Popen([sys.executable, "-m", "agentlog", "serve", "--port", "0", "--no-live"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:")
            plain = url.split("?", 1)[0] + "nothing-here"  # no token: the server answers 401, it does not refuse
            try:
                urllib.request.urlopen(plain, timeout=30)
                status = 200
            except urllib.error.HTTPError as e:
                status = e.code
            assert status == 401
        finally:
            proc.terminate()
            proc.communicate(timeout=30)


def test_the_server_warms_up_while_it_starts(populated: str) -> None:
    """Issue 27, finding 10: before any page is asked for, the server has caught up, opened its
    engine and compiled its templates, so the first page a person opens is not the slow one."""
    import time

    guard = Guard(port=8765)
    app = create_app(populated, guard, live=False)
    assert not app.state.source.is_open
    with TestClient(app, base_url=f"http://127.0.0.1:{guard.port}"):
        deadline = time.monotonic() + 60
        while not app.state.source.is_open and time.monotonic() < deadline:
            time.sleep(0.05)
        assert app.state.source.is_open
        from agentlog.web.app import PAGES

        assert len(app.state.web.env.cache) >= len({template for _path, template, _fn in PAGES})


def test_serve_warms_up_before_it_reports_ready(populated: str) -> None:
    """Issue 37: the first page opened at once after start took 593–642 ms, racing the warm-up.
    ``agentlog serve`` now warms before it prints its address: Now is answered and remembered
    under the key its first request asks, for as long as a Now answer is good (then asked again)."""
    from agentlog.web.app import warm
    from agentlog.web.routes.pages import NOW_FRESH_S, NOW_KEY

    app = create_app(populated, Guard(port=8765), live=False)
    st = app.state.web
    try:
        warm(st)
        assert st.source.is_open

        def again(engine: Any) -> dict[str, Any]:
            return {"asked": "again"}

        got = st.source.read_cached(NOW_KEY, again, max_age_s=NOW_FRESH_S)  # the warm-up's answer
        assert {"needs_you", "live", "failures", "today"} <= set(got)
        assert st.source.read_cached(NOW_KEY, again, max_age_s=0.0) == {"asked": "again"}  # too old: asked again
        assert st.source.read_cached(NOW_KEY, again, max_age_s=NOW_FRESH_S) == {"asked": "again"}
    finally:
        st.source.close()


def test_what_waits_for_review_on_a_data_root_without_memory(tmp_path: Path) -> None:
    from agentlog.memory.review import waiting
    from agentlog.memory.store import db_path

    root = str(tmp_path / "home")
    assert waiting(root) == {"count": 0, "newest": []}
    assert not os.path.exists(db_path(root))  # Now does not make a memory where there is none


def test_the_servers_listening_socket_turns_nagle_off() -> None:
    """uvicorn writes an answer's head and body apart; with Nagle on, the body waited for the
    client's delayed ACK (44 ms per kept-alive request). asyncio turns it off per connection
    only when the listener says IPPROTO_TCP; the listener carries TCP_NODELAY too."""
    import socket

    from agentlog.cli.serve_cmd import listening_socket

    sock = listening_socket("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        client = socket.create_connection(sock.getsockname())
        conn, _ = sock.accept()
        with client, conn:  # Linux passes the option on to the accepted socket
            assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        sock.close()


def test_sigterm_stops_the_dashboard_with_a_live_stream_open(agentlog_home: Path) -> None:
    """A browser holding the live stream open does not keep the server from stopping: SIGTERM
    ends it within the graceful-shutdown bound (uvicorn's default waits for every request)."""
    import http.cookiejar
    import subprocess
    import sys
    import threading
    import urllib.request

    proc = subprocess.Popen([sys.executable, "-m", "agentlog", "serve", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "AGENTLOG_HOME": str(agentlog_home)})
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        deadline = time.monotonic() + 20
        while True:
            try:
                opener.open(url, timeout=5).read()
                break
            except OSError:
                assert time.monotonic() < deadline, "the dashboard did not answer"
                time.sleep(0.2)
        stream = opener.open(url.split("/?", 1)[0] + "/api/stream", timeout=30)
        got = threading.Event()
        threading.Thread(target=lambda: (stream.read(1), got.set()), daemon=True).start()
        assert got.wait(15), "the stream sent nothing"
        started = time.monotonic()
        proc.terminate()
        proc.communicate(timeout=15)
        assert time.monotonic() - started < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_search_page_mode_and_similar(client: TestClient) -> None:
    from agentlog.search import semantic

    if not semantic.available():
        pytest.skip("the 'semantic' extra is not installed")
    lexical = client.get("/api/search", params={"q": "parser", "mode": "lexical"}).json()
    assert lexical["hits"] and lexical["mode"] == "lexical"
    page = client.get("/search", params={"q": "parser", "mode": "semantic"}).text
    assert '<select name="mode"' in page and '<option value="semantic" selected>' in page
    assert "/search?similar=" in page  # each hit links to the events like it
    embedded = [h for h in lexical["hits"] if h["kind"] in semantic.KINDS]
    assert embedded, [h["kind"] for h in lexical["hits"]]
    first = embedded[0]["event_id"]
    like = client.get("/api/search", params={"similar": first}).json()
    assert "error" not in like and like["similar"] == first
    assert like["hits"] and first not in {h["event_id"] for h in like["hits"]}
    assert f'name="similar" value="{first}"' in client.get("/search", params={"similar": first}).text
    bad = client.get("/api/search", params={"similar": "ev_nothing"}).json()
    assert bad["hits"] == [] and bad["error"]
