"""The dashboard's team pages (issue 31, part 3), in process over team tables published from two
recorded machines (team_support.publish_two_machines): every page and its JSON twin, both machines,
the filters, escaping, an unreachable store, and no pages at all without ``team_url``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pytest
from starlette.testclient import TestClient

from agentlog.team.query import ask
from agentlog.web import team_data
from agentlog.web.app import create_app
from agentlog.web.security import Guard
from team_support import HOSTILE, closed_port, dashboard_team, set_team_url
from test_web import _signed_in

PAGES = ("/team", "/team/sessions", "/team/failures", "/team/cost")


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return dashboard_team(tmp_path_factory.mktemp("web-team"))


@pytest.fixture()
def client(team: dict[str, Any]) -> Iterator[TestClient]:
    guard = Guard(port=8765)
    with _signed_in(create_app(team["roots"]["machine-a"], guard, live=False), guard) as c:
        yield c


def _team(team: dict[str, Any], sql: str) -> list[tuple[Any, ...]]:
    return list(ask(team["loc"], sql).rows)


def test_every_page_renders_with_both_machines_and_the_nav_entry(client: TestClient) -> None:
    for path in PAGES:
        r = client.get(path)
        assert r.status_code == 200, (path, r.text[:500])
        assert '<a href="/team" class="here">Team</a>' in r.text, path
        assert "machine-a" in r.text and "machine-b" in r.text, path
        assert r.headers["content-security-policy"].startswith("default-src 'none'")
    assert '<a href="/team">Team</a>' in client.get("/timeline").text  # in the nav of every page


def test_overview_counts_are_the_tables(client: TestClient, team: dict[str, Any]) -> None:
    got = client.get("/api/team").json()
    sessions = dict(_team(team, "SELECT machine, count(*) FROM sessions WHERE NOT retracted GROUP BY 1"))
    events = dict(_team(team, "SELECT machine, count(*) FROM events GROUP BY 1"))
    assert {m["machine"]: (m["sessions"], m["events"]) for m in got["machines"]} == {
        k: (sessions[k], events[k]) for k in ("machine-a", "machine-b")}
    assert got["totals"] == {"machines": 2, "sessions": sum(sessions.values()), "events": sum(events.values())}
    assert all(m["last_event_at"] and m["agents"] for m in got["machines"])


def test_sessions_filters_and_pages(client: TestClient, team: dict[str, Any]) -> None:
    every = client.get("/api/team/sessions").json()
    assert {s["machine"] for s in every["sessions"]} == {"machine-a", "machine-b"}
    assert len(every["sessions"]) == _team(team, "SELECT count(*) FROM sessions WHERE NOT retracted")[0][0]
    b = client.get("/api/team/sessions", params={"machine": "machine-b"}).json()
    assert b["sessions"] and {s["machine"] for s in b["sessions"]} == {"machine-b"}
    assert b["filters"]["machine"] == "machine-b"
    codex = client.get("/api/team/sessions", params={"provider": "codex"}).json()["sessions"]
    assert len(codex) == 2 and {s["provider"] for s in codex} == {"codex"}
    days = sorted({s["day"] for s in every["sessions"]})
    one = client.get("/api/team/sessions", params={"since": days[-1], "until": days[-1]}).json()["sessions"]
    assert one and {s["day"] for s in one} == {days[-1]}
    assert client.get("/api/team/sessions", params={"until": "2000-01-01"}).json()["sessions"] == []
    assert client.get("/api/team/sessions", params={"project": "parser-project", "machine": "machine-a"}).json()[
        "sessions"]
    # a value is bound, never written into the statement
    assert client.get("/api/team/sessions", params={"machine": "x' OR '1'='1"}).json()["sessions"] == []
    # the pager keeps the filters
    page = client.get("/team/sessions", params={"machine": "machine-b", "page": "1"}).text
    assert 'href="/team/sessions?machine=machine-b&amp;page=0"' in page
    assert client.get("/api/team/sessions", params={"page": "5"}).json()["sessions"] == []
    r = client.get("/api/team/sessions", params={"since": "yesterday"})
    assert r.status_code == 400 and r.headers["content-type"].startswith("application/problem+json")
    assert client.get("/team/sessions", params={"until": "2026-02-30"}).status_code == 400


def test_failures_by_machine_agent_model_project_day(client: TestClient, team: dict[str, Any]) -> None:
    got = client.get("/api/team/failures").json()
    by = got["by"]
    assert set(by) == {"machine", "provider", "model", "project", "day"}
    failed_calls = dict(_team(team, "SELECT machine, count(*) FROM tool_calls WHERE outcome_status = 'failure' "
                                    "AND NOT retracted GROUP BY 1"))
    superseded = dict(_team(team, "SELECT machine, count(*) FROM attempts WHERE outcome = 'superseded' "
                                  "AND NOT retracted GROUP BY 1"))
    assert {r["key"]: (r["failed_tool_calls"], r["superseded_attempts"]) for r in by["machine"]} == {
        k: (failed_calls[k], superseded[k]) for k in ("machine-a", "machine-b")}
    for name in ("provider", "model", "project", "day"):  # each breakdown counts every row once
        assert sum(r["attempts"] for r in by[name]) == sum(r["attempts"] for r in by["machine"]), name
        assert sum(r["failed_tool_calls"] for r in by[name]) == sum(failed_calls.values()), name
    assert {r["key"] for r in by["provider"]} == {"claude_code", "codex"}
    assert "claude-sonnet-4-5-20250929" in {r["key"] for r in by["model"]}  # a session's model, from its events
    assert {"what": "attempt", "failure_class": "string_mismatch", "n": 2} in got["classes"]
    assert got["commands"][0]["tool_name"] == "Edit" and got["commands"][0]["machines"] == 2
    assert {a["machine"] for a in got["latest"]} == {"machine-a", "machine-b"}
    only_b = client.get("/api/team/failures", params={"machine": "machine-b"}).json()
    assert [r["key"] for r in only_b["by"]["machine"]] == ["machine-b"]
    assert {a["machine"] for a in only_b["latest"]} == {"machine-b"}
    assert client.get("/api/team/failures", params={"provider": "codex"}).json()["classes"] == []


def test_cost_and_models(client: TestClient, team: dict[str, Any]) -> None:
    got = client.get("/api/team/cost").json()
    usage = {m: (t, c) for m, t, c in _team(team, "SELECT machine, sum(total_tokens), round(sum(cost_usd), 4) "
                                                  "FROM usage GROUP BY 1")}
    assert set(usage) == {"machine-a", "machine-b"}
    assert {r["key"]: (r["tokens"], r["cost_usd"]) for r in got["by"]["machine"]} == usage
    assert {r["key"] for r in got["by"]["model"]} == {"claude-sonnet-4-5-20250929", HOSTILE}
    assert [r["key"] for r in got["by"]["day"]] == ["2026-11-01", "2026-11-03"]
    assert got["totals"]["tokens"] == sum(t for t, _ in usage.values())
    assert got["totals"]["cost_usd"] == pytest.approx(usage["machine-a"][1])  # the hostile model has no price
    only_a = client.get("/api/team/cost", params={"machine": "machine-a"}).json()
    assert [r["key"] for r in only_a["by"]["model"]] == ["claude-sonnet-4-5-20250929"]
    assert client.get("/api/team/cost", params={"since": "2026-11-02"}).json()["totals"]["tokens"] == usage[
        "machine-b"][0]


def test_pages_and_their_json_twins_say_the_same(client: TestClient) -> None:
    cost = client.get("/api/team/cost").json()
    page = client.get("/team/cost").text
    for r in cost["by"]["machine"]:
        assert re.search(rf'<span class="key">{r["key"]}</span>.*?<span class="val">{r["cost_usd"] or 0:.4f}</span>', page)
    sessions = client.get("/api/team/sessions").json()["sessions"]
    html = client.get("/team/sessions").text
    assert all(f'title="{s["session_id"]}"' in html for s in sessions)


def test_stored_text_is_escaped(client: TestClient) -> None:
    bodies = [client.get(p).text for p in PAGES]
    joined = "\n".join(bodies)
    assert "&lt;script&gt;alert(" in client.get("/team/cost").text  # the hostile model, shown as text
    assert "&lt;script&gt;alert(" in client.get("/team/sessions").text  # and in the project filter's choices
    for body in bodies:
        assert re.findall(r"<script[^>]*>", body) == ['<script src="/static/app.js" defer>']
    assert "alert(\"team\")" not in joined


def test_answers_are_remembered_for_a_while(team: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    real = team_data.read
    monkeypatch.setattr(team_data, "read", lambda url, fn: (reads.append(url), real(url, fn))[1])
    guard = Guard(port=8765)
    with _signed_in(create_app(team["roots"]["machine-a"], guard, live=False), guard) as c:
        first = c.get("/api/team").json()
        assert c.get("/api/team").json() == first and c.get("/team").status_code == 200
        assert len(reads) == 1
        c.app.state.web.team_cache.ttl = 0.0  # type: ignore[attr-defined]
        c.get("/api/team")
        assert len(reads) == 2


def test_an_unreachable_store_is_an_error_panel(team: dict[str, Any], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with closed_port() as port:  # bound, not listening: refused, and no other server can take it
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        for k, v in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}.items():
            monkeypatch.setenv(k, v)
        root = str(tmp_path / "root")
        set_team_url(root, "s3://team/org")
        guard = Guard(port=8765)
        with _signed_in(create_app(root, guard, live=False), guard) as c:
            for path in PAGES:
                r = c.get(path)
                assert r.status_code == 503, (path, r.text[:300])
                panel = re.search(r'<p class="error">([^<]*)</p>', r.text)
                assert panel and "unreachable" in panel.group(1) and "Traceback" not in r.text, r.text[-1500:]
                assert '<a href="/team" class="here">Team</a>' in r.text  # the page around it, with the nav
                api = c.get("/api" + path)
                assert api.status_code == 503 and api.headers["content-type"].startswith("application/problem+json")
                assert "unreachable" in api.json()["detail"]


def test_a_store_that_does_not_answer_in_time_is_an_error_panel(team: dict[str, Any],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setattr(team_data, "read", lambda url, fn: time.sleep(3))
    guard = Guard(port=8765)
    app = create_app(team["roots"]["machine-a"], guard, live=False)
    app.state.web.team_timeout = 0.5
    with _signed_in(app, guard) as c:
        r = c.get("/team/failures")
        assert r.status_code == 503 and "did not answer within 0.5 s" in r.text


def test_without_team_url_there_are_no_team_pages(team: dict[str, Any]) -> None:
    guard = Guard(port=8765)
    with _signed_in(create_app(team["roots"]["machine-b"], guard, live=False), guard) as c:
        assert 'href="/team"' not in c.get("/").text
        for path in PAGES:
            assert c.get(path).status_code == 404, path
            r = c.get("/api" + path)
            assert r.status_code == 404 and r.headers["content-type"].startswith("application/problem+json")


@pytest.mark.slow  # the real browser (kept off the quick tier, which installs none)
def test_the_team_pages_in_a_real_browser(team: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> None:
    """Issue 37: every page in the real browser at 1400×1000 and 390×844 (photographed, no wider than
    the window, no serious or critical axe-core violation), the hostile model name shown as text."""
    from selenium.webdriver.common.by import By

    from axe_support import check_page
    from browser_support import chrome, keep_screenshots, need_browser, serving, wait

    need_browser()
    shots = tmp_path_factory.mktemp("team-shots")
    with serving(team["roots"]["machine-a"]) as url, chrome(tmp_path_factory.mktemp("chromium")) as driver:
        base = url.split("/?", 1)[0]
        driver.get(url)  # the one-time token, exchanged for a cookie
        wait("the sign-in", lambda: driver.current_url.rstrip("/") == base)
        problems: list[str] = []
        for path in PAGES:
            problems += check_page(driver, base + path, path.strip("/").replace("/", "-"), shots)
            assert driver.execute_script("return document.querySelectorAll('script:not([src])').length") == 0
        driver.get(base + "/team/cost")
        assert HOSTILE in wait("the cost page", lambda: driver.find_element(By.ID, "main").text)
    keep_screenshots(shots)
    assert problems == [], "\n".join(problems)
    assert len(list(shots.glob("*.png"))) == 2 * len(PAGES)
