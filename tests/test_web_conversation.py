"""The session page as a conversation, a call on its own, and the Usage page's SVG charts.

On a real Claude Code transcript (shared/fixtures, imported with ``agentlog import``): the
prompts, the assistant's text, the tool calls in order, a failure with its class, a subagent's
calls nested under the Task call that started it, an edit's diff. Captured text stays escaped
(a hostile transcript: script tags, ``"onerror=`` and labels that would close an SVG). In a
real headless Chromium: expanding a call shows its input and output, "show all" fetches the
rest, and each page is photographed at 1400×1000 and 390×844, does not scroll sideways and
has no serious or critical axe-core violation. A 10,000-event session's page is weighed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from starlette.testclient import TestClient

from agentlog.operations.fixtures import shared_dir
from agentlog.web.app import create_app
from agentlog.web.security import COOKIE, Guard
from test_web_browser import browser  # noqa: F401 - the fixture: a headless Chromium

_SHARED = shared_dir()
FIXTURE = (_SHARED / "fixtures" / "claude-code" / "entireio-cli__ckpt-10-a740e118e0-0__full.jsonl"
           if _SHARED is not None else Path("/nonexistent"))
PROMPT = '<script>alert("p")</script> "><img src=x onerror=alert(1)>'
REPLY = '</p><script>alert("a")</script> a reply'
PROMPT_END = "the end of the prompt </p><script>alert('end')</script>"
REPLY_END = "the end of the reply \"><img src=x onerror=alert(8)>"
LONG_PROMPT = PROMPT + " " + "y" * 2000 + " " + PROMPT_END
LONG_REPLY = REPLY + " " + "z" * 1500 + " " + REPLY_END
MODEL = '</title></svg><script>alert("m")</script>'
OUTPUT = '</pre><script>alert("o")</script>"onerror=alert(6) ' + "x" * 3000
COMMAND = 'echo "<svg onload=alert(5)>"'


def _rec(env: dict[str, Any], i: int, **kw: Any) -> dict[str, Any]:
    return {**env, "uuid": f"u{i}", "timestamp": f"2026-11-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z", **kw}


def _hostile_transcript(dir: Path) -> Path:
    cwd = dir / 'proj-"onerror=alert(7)'
    cwd.mkdir(parents=True)
    env = {"sessionId": "s-hostile", "cwd": str(cwd), "version": "2.1.42", "isSidechain": False}
    records = [
        _rec(env, 1, type="user", message={"role": "user", "content": LONG_PROMPT}),
        _rec(env, 2, type="assistant", message={
            "id": "m1", "model": MODEL, "role": "assistant", "type": "message",
            "content": [{"type": "text", "text": LONG_REPLY},
                        {"type": "tool_use", "id": "tu1", "name": "Bash", "input": {"command": COMMAND}}],
            "usage": {"input_tokens": 120, "output_tokens": 30}}),
        _rec(env, 3, type="user", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "tu1", "content": OUTPUT, "is_error": True}]}),
    ]
    path = dir / "s-hostile.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _import(root: str, path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "agentlog", "import", "claude-code", str(path)], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "AGENTLOG_HOME": root})
    assert r.returncode == 0, r.stderr


def _session_id(root: str, provider_session_id: str) -> str:
    from agentlog.operations.refresh import run_sql

    rows = run_sql(root, f"select session_id from sessions where provider_session_id = '{provider_session_id}'").rows
    assert len(rows) == 1, rows
    return "ses_" + str(rows[0][0]).removeprefix("ses_")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if not FIXTURE.is_file():
        pytest.fail(f"the shared fixture {FIXTURE} is missing (agentlog fetch-fixtures)")
    tmp = tmp_path_factory.mktemp("conv")
    root = str(tmp / "home")
    _import(root, FIXTURE)
    _import(root, _hostile_transcript(tmp / "hostile"))
    real = json.loads(FIXTURE.read_text().splitlines()[0]).get("sessionId") or next(
        json.loads(line)["sessionId"] for line in FIXTURE.read_text().splitlines() if '"sessionId"' in line)
    return {"root": root, "real": _session_id(root, real), "hostile": _session_id(root, "s-hostile")}


def _client(root: str) -> TestClient:
    guard = Guard(port=8766)
    client = TestClient(create_app(root, guard, live=False), base_url=f"http://127.0.0.1:{guard.port}")
    r = client.get(f"/?token={guard.token}", follow_redirects=False)
    client.cookies.set(COOKIE, r.cookies[COOKIE])
    return client


@pytest.fixture(scope="module")
def client(imported: dict[str, str]) -> Iterator[TestClient]:
    with _client(imported["root"]) as c:
        yield c


def _calls(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for it in items:
        if it["type"] == "call":
            yield it
            yield from _calls(it.get("children") or [])


def test_a_real_session_reads_as_a_conversation(client: TestClient, imported: dict[str, str]) -> None:
    s = client.get(f"/api/sessions/{imported['real']}").json()["session"]
    items = s["items"]
    kinds = [it["type"] for it in items]
    assert kinds[0] == "prompt" and "message" in kinds and "call" in kinds
    assert s["pages"] == 1 and s["item_count"] == len(items)
    calls = list(_calls(items))
    top = [it for it in items if it["type"] == "call"]
    # in order: each top-level item starts no earlier than the one before it
    times = [c["started_at"] for c in top]
    assert times == sorted(times)
    # the subagent: its calls under the Task call that started it, none at the top
    (task,) = [c for c in top if c["tool"] == "Task"]
    assert len(task["children"]) >= 15 and all(k.get("agent") for k in task["children"] if k["type"] == "call")
    assert task["subagents"] and not any(c.get("agent") for c in top)
    assert {"Read", "Bash", "Glob", "Write"} <= {k["tool"] for k in task["children"] if k["type"] == "call"}
    # the failure: its class and evidence
    failed = [c for c in calls if c["failed"]]
    assert failed and all(c["class"] for c in failed), failed
    # input and output of each finished call; the subagent's Write shows as a diff
    assert all(c["input"]["text"] for c in calls)
    write = next(k for k in task["children"] if k["type"] == "call" and k["tool"] == "Write")
    assert write["diffs"] and any(kind == "add" for kind, _ in write["diffs"][0]["lines"])
    # the page: the same, as HTML
    page = client.get(f"/sessions/{imported['real']}").text
    assert page.count('<li class="prompt" id="e-') == kinds.count("prompt")
    assert re.search(r'<li id="c-[0-9a-f-]+" class="call failed( sub)?">', page)
    assert '<ol class="conversation nested"' in page and 'class="call sub"' in page
    assert '<svg class="strip"' in page and "seg-model" in page and "seg-tool" in page


def test_a_call_on_its_own_holds_the_whole_output(client: TestClient, imported: dict[str, str]) -> None:
    s = client.get(f"/api/sessions/{imported['hostile']}").json()["session"]
    (call,) = list(_calls(s["items"]))
    assert call["output"]["more"] > 0 and len(call["output"]["text"]) < len(OUTPUT)
    whole = client.get(call["href"])
    assert whole.status_code == 200 and "x" * 3000 in whole.text
    api = client.get("/api" + call["href"]).json()["call"]
    assert api["output"]["more"] == 0 and api["output"]["text"].endswith("x" * 3000)
    assert client.get(f"/sessions/{imported['hostile']}/calls/tc_ffffffffffff").status_code == 404
    assert client.get(f"/sessions/{imported['real']}/calls/{call['id']}").status_code == 404  # another session's


def test_a_long_prompt_and_message_on_their_own_hold_the_whole_text(client: TestClient,
                                                                      imported: dict[str, str]) -> None:
    """A prompt or a message cut in the conversation links to its own page, which holds it whole
    (escaped like every captured text); an id of another kind, of nothing, or of another
    session's prompt is refused."""
    items = client.get(f"/api/sessions/{imported['hostile']}").json()["session"]["items"]
    (prompt,) = [it for it in items if it["type"] == "prompt"]
    (message,) = [it for it in items if it["type"] == "message"]
    page = client.get(f"/sessions/{imported['hostile']}").text
    for it, full, end in ((prompt, LONG_PROMPT, PROMPT_END), (message, LONG_REPLY, REPLY_END)):
        assert it["more"] == len(full) - len(it["text"]) > 0 and end not in it["text"]
        assert f'href="{it["href"]}" data-part="text">show all</a>' in page.replace("&amp;", "&")
        whole = client.get(it["href"])
        assert whole.status_code == 200
        _no_live_markup(whole.text)
        assert 'id="text-whole"' in whole.text and "show all" not in whole.text
        assert f'href="/sessions/{imported["hostile"]}?page=0#{it["anchor"]}"' in whole.text  # the way back
        assert f'id="{it["anchor"]}"' in page
        api = client.get("/api" + it["href"]).json()["text"]
        assert api["text"] == full and api["more"] == 0 and api["type"] == it["type"]
    assert "the end of the prompt &lt;/p&gt;&lt;script&gt;alert(&#39;end&#39;)" in client.get(prompt["href"]).text
    assert "the end of the reply &#34;&gt;&lt;img src=x onerror=alert(8)&gt;" in client.get(message["href"]).text
    base = f"/sessions/{imported['hostile']}/texts/"
    assert client.get(base + "ev_01900000-0000-7000-8000-000000000000").status_code == 404
    assert client.get(base + "att_0123456789ab").status_code == 400
    assert client.get(base + "ev_<script>").status_code == 400
    real = client.get(f"/api/sessions/{imported['real']}").json()["session"]["items"]
    other = next(it for it in real if it["type"] == "prompt")["anchor"].removeprefix("e-")
    assert client.get(f"{base}ev_{other}").status_code == 404  # another session's prompt


def test_a_failure_links_the_call_that_fixed_it_and_the_attempt_that_retried_it(tmp_path: Path) -> None:
    """The demo's scripted session: a failed test run fixed by a later run of the same command
    (a link to that call on its page of the conversation), failed edits retried by a later attempt."""
    from agentlog.operations import demo

    mp = pytest.MonkeyPatch()
    mp.setattr(demo, "claude_hook_fixtures", lambda: [])
    try:
        root = demo.run_demo(str(tmp_path / "home")).home
    finally:
        mp.undo()
    with _client(root) as c:
        sessions = c.get("/api/timeline").json()["sessions"]
        pages = {s["session_id"]: c.get(f"/api/sessions/{s['session_id']}").json()["session"] for s in sessions}
        calls = [(sid, call) for sid, s in pages.items() for call in _calls(s["items"])]
        fixed = [(sid, call) for sid, call in calls if call["fixed_by"]]
        assert fixed, [call["class"] for _, call in calls if call["failed"]]
        sid, call = fixed[0]
        assert call["class"] == "test_failure" and call["summary"] and call["evidence"]
        href = call["fixed_by"]["href"]
        fixer = href.rsplit("#c-", 1)[1]
        assert any(other["anchor"] == f"c-{fixer}" and other["status"] == "success" for _, other in calls)
        html = c.get(f"/sessions/{sid}").text
        assert f'fixed by <a href="{href}">' in html and f'id="c-{fixer}"' in html
        retried = [call for _, call in calls if call["retry"]]
        assert retried and all(r["failed"] for r in retried)
        assert any(f'retried in <a href="/attempts/{r["retry"]["id"]}">' in c.get(f"/sessions/{s}").text
                   for s in pages for r in retried)


def _no_live_markup(body: str) -> None:
    scripts = re.findall(r"<script[^>]*>", body)
    assert all(re.fullmatch(r'<script src="/static/[a-z]+\.js" defer>', s) for s in scripts), scripts
    assert not re.search(r"<[a-zA-Z][^<>]*\son(error|load)\s*=", body)
    assert '"onerror=' not in body and "<svg onload" not in body and "</svg><script>" not in body
    assert "<img src=x" not in body


def test_captured_text_stays_escaped_in_the_conversation_and_the_charts(client: TestClient,
                                                                       imported: dict[str, str]) -> None:
    page = client.get(f"/sessions/{imported['hostile']}").text
    (call,) = list(_calls(client.get(f"/api/sessions/{imported['hostile']}").json()["session"]["items"]))
    whole = client.get(call["href"]).text
    usage = client.get("/usage").text
    for body in (page, whole, usage):
        _no_live_markup(body)
    assert "&lt;script&gt;alert(&#34;p&#34;)&lt;/script&gt;" in page  # shown, as text
    assert "&lt;/p&gt;&lt;script&gt;alert(&#34;a&#34;)" in page and "&lt;svg onload=alert(5)&gt;" in page
    assert "&lt;/pre&gt;&lt;script&gt;alert(&#34;o&#34;)" in whole
    # the model's name, in the charts' SVG titles and their legends
    assert "&lt;/title&gt;&lt;/svg&gt;&lt;script&gt;alert(&quot;m&quot;)" in usage
    assert "&lt;/title&gt;&lt;/svg&gt;&lt;script&gt;alert(&#34;m&#34;)" in usage
    assert usage.count('<svg class="svgchart"') >= 4 and "proj-&#34;onerror=alert(7)" in usage


def test_usage_charts_api_and_the_old_shape(client: TestClient) -> None:
    assert set(client.get("/api/usage").json()) == {"days", "models", "projects"}
    series = client.get("/api/usage/charts").json()
    assert MODEL in series["tokens_by_model"] and series["failures_by_class"] and series["tool_latency"]
    days = series["usage_days"]
    assert all(len(v) == len(days) for v in series["tokens_by_model"].values())


@pytest.mark.slow
def test_a_10000_event_session_page_is_light(tmp_path: Path) -> None:
    root = str(tmp_path / "home")
    from agentlog.bench.conversation_steps import big_session_transcript

    big_session_transcript(tmp_path / "big.jsonl")
    _import(root, tmp_path / "big.jsonl")
    from agentlog.operations.refresh import run_sql

    (events,) = run_sql(root, "select count(*) from events where provider_session_id = 's-big'").rows[0]
    assert events >= 10_000, events
    sid = _session_id(root, "s-big")
    with _client(root) as c:
        c.get("/")  # the engine opened
        timings, weights = [], []
        for page in (0, 1, 30):
            started = time.perf_counter()
            r = c.get(f"/sessions/{sid}?page={page}")
            timings.append((time.perf_counter() - started) * 1000)
            assert r.status_code == 200
            weights.append(len(r.content))
        s = c.get(f"/api/sessions/{sid}").json()["session"]
    print(f"\n{events:,} events: session page {', '.join(f'{t:.0f}' for t in timings)} ms (first uncached), "
          f"{', '.join(f'{w / 1024:.0f}' for w in weights)} KB; {s['pages']} pages")
    assert max(weights) <= 200 * 1024, weights
    assert s["pages"] > 1 and s["item_count"] >= 2500


# -- in a real browser --------------------------------------------------------------------------


@pytest.mark.slow
def test_the_conversation_and_charts_in_a_real_browser(imported: dict[str, str], browser: Any,
                                                       tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from axe_support import check_page
    from agentlog.bench.serving import serve, stop
    from test_web_browser import _wait

    proc, url = serve(imported["root"], live=True)  # the bench's: `agentlog serve` in a child process
    try:
        base = url.split("/?", 1)[0]
        browser.get(url)
        _wait("the sign-in", lambda: browser.current_url.rstrip("/") == base)
        browser.get(f"{base}/sessions/{imported['real']}")
        prompts = _wait("the prompts", lambda: browser.find_elements(By.CSS_SELECTOR, "li.prompt .bubble.user"))
        assert prompts[0].text.strip()
        assert browser.find_elements(By.CSS_SELECTOR, "li.message .bubble.assistant")
        failed = browser.find_element(By.CSS_SELECTOR, "li.call.failed")
        assert (failed.find_element(By.CSS_SELECTOR, "summary .fclass").get_attribute("textContent") or "").strip()
        # expanding a call shows what it was given and what it returned
        call = browser.find_element(By.CSS_SELECTOR, "ol.conversation > li.call:not(.failed)")
        assert not call.find_element(By.CSS_SELECTOR, "pre.input").is_displayed()
        call.find_element(By.CSS_SELECTOR, "summary").click()
        _wait("the call's input", lambda: call.find_element(By.CSS_SELECTOR, "pre.input").is_displayed())
        assert call.find_element(By.CSS_SELECTOR, "pre.input").text.strip()
        assert call.find_element(By.CSS_SELECTOR, "pre.output").text.strip()
        # the subagent's calls nested under the Task call
        task = next(li for li in browser.find_elements(By.CSS_SELECTOR, "ol.conversation > li.call")
                    if li.find_element(By.CSS_SELECTOR, "summary .tool").text == "Task")
        task.find_element(By.CSS_SELECTOR, "summary").click()
        nested = _wait("the subagent's calls", lambda: [li for li in task.find_elements(
            By.CSS_SELECTOR, "ol.nested > li.call.sub") if li.is_displayed()])
        assert len(nested) >= 15
        browser.get(f"{base}/sessions/{imported['hostile']}")
        call = _wait("the hostile call", lambda: browser.find_element(By.CSS_SELECTOR, "li.call"))
        call.find_element(By.CSS_SELECTOR, "summary").click()
        _wait("show all", lambda: call.find_element(By.CSS_SELECTOR, "a.show-all").is_displayed())
        href = call.find_element(By.CSS_SELECTOR, "a.show-all").get_attribute("href")
        call.find_element(By.CSS_SELECTOR, "a.show-all[data-part=output]").click()
        _wait("the whole output", lambda: "x" * 3000 in call.find_element(By.CSS_SELECTOR, "pre.output").text)
        # a long prompt: "show all" swaps in the whole text, still text
        prompt = browser.find_element(By.CSS_SELECTOR, "li.prompt")
        assert "the end of the prompt" not in prompt.text
        text_href = prompt.find_element(By.CSS_SELECTOR, "a.show-all[data-part=text]").get_attribute("href")
        prompt.find_element(By.CSS_SELECTOR, "a.show-all[data-part=text]").click()
        _wait("the whole prompt", lambda: PROMPT_END in browser.find_element(By.CSS_SELECTOR, "li.prompt p.text").text)
        assert not browser.find_elements(By.CSS_SELECTOR, "li.prompt a.show-all")
        assert browser.execute_script("return document.querySelectorAll('[onerror],[onload]').length") == 0
        assert browser.execute_script(
            "return Array.prototype.every.call(document.scripts, function (s) { return s.src.indexOf('/static/') > 0; })")
        shots = tmp_path / "screenshots"
        problems: list[str] = []
        for name, path in (("session", f"/sessions/{imported['real']}"), ("session-hostile",
                                                                          f"/sessions/{imported['hostile']}"),
                           ("usage", "/usage"), ("timeline", "/timeline")):
            problems += check_page(browser, base + path, name, shots)
        problems += check_page(browser, href, "call", shots)
        problems += check_page(browser, text_href, "prompt", shots)  # without script, the link opens it
        assert PROMPT_END in browser.find_element(By.CSS_SELECTOR, "#text-whole p.text").text
        assert not problems, "\n".join(problems)
        assert len(list(shots.glob("*.png"))) >= 12
    finally:
        stop(proc)
    print("screenshots:", shots)
