"""`agentlog share` (docs/share.md): sanitised HTML and Markdown of real sessions, their proofs, escaping,
the dashboard's Share button, and no network request from the page in a real headless Chromium."""

from __future__ import annotations

import getpass
import json
import re
import shutil
import socket
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from agentlog.cli import cli
from agentlog.operations.fixtures import missing, shared_dir

CANARY_TOKEN = "Zq8Xw3Rt7Yu1Io5Pa2Sd9Fg4Hj6Kl0MnBv"  # random-looking: capture keeps it, the export profile must not
CANARY_GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
XSS = ['<script>alert("p")</script>', "</textarea><img src=x onerror=alert(1)>", "[click](javascript:alert(2))",
       '<a href="javascript:alert(3)">x</a>', "right\u202eevil\u200b\ufeffzero", "```\n</details><script>x()</script>"]
SHARED = shared_dir()


def _run(root: Path, *args: str, code: int = 0) -> Any:
    r = CliRunner().invoke(cli, list(args), env={"AGENTLOG_HOME": str(root)}, catch_exceptions=False)
    assert r.exit_code == code, (args, r.output[-3000:])
    return r


def _record(root: Path, sid: str, payload: dict[str, Any]) -> None:
    from agentlog.capture.hook import build, record

    payload = {"session_id": sid, "cwd": f"/home/{getpass.getuser()}/work/proj", **payload}
    record(build("claude-code", json.dumps(payload).encode(), 0, []), str(root), "relaxed")


def _hostile_session(root: Path) -> None:
    user, host = getpass.getuser(), socket.gethostname()
    prompt = (f"deploy with token {CANARY_TOKEN} and {CANARY_GITHUB}; files in /home/{user}/work/proj and "
              f"/Users/somebody/src on {host}; ask {user} or somebody; mail ops@example.com\n" + "\n".join(XSS))
    _record(root, "share-hostile", {"hook_event_name": "UserPromptSubmit", "prompt": prompt})
    call = {"tool_name": "Bash", "tool_use_id": "tu1", "tool_input": {"command": "cat </textarea> # ACME-1234"}}
    _record(root, "share-hostile", {"hook_event_name": "PreToolUse", **call})
    _record(root, "share-hostile", {"hook_event_name": "PostToolUse", **call,
                                    "tool_response": {"stdout": "\n".join(XSS) + f"\n/home/{user}/.ssh/id_ed25519"}})


def _fixture_users() -> set[str]:
    """Every user name in a home path of the fixtures the root imports."""
    found: set[str] = set()
    for f in _fixture_files() + _hook_fixtures():
        found |= set(re.findall(r"(?:/home/|/Users/)([A-Za-z0-9._-]+)", f.read_text(encoding="utf-8", errors="replace")))
    return {u for u in found if len(u) >= 3}


def _fixture_files() -> list[Path]:
    assert SHARED is not None
    cc = sorted((SHARED / "fixtures" / "claude-code").glob("*.jsonl"), key=lambda p: p.stat().st_size)
    others = [f for agent in ("codex", "gemini-cli", "cursor") for f in sorted((SHARED / "fixtures" / agent).glob("*.jsonl"))[:1]]
    return [cc[-1], cc[0], *others]


def _hook_fixtures() -> list[Path]:
    """The real hook payloads of one project (prompts, tool calls before and after)."""
    assert SHARED is not None
    hooks = SHARED / "fixtures" / "claude-code-hooks"
    return [hooks / f"attio-mcp-server__logs-{name}.json" for name in ("user_prompt_submit", "pre_tool_use", "post_tool_use")]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if SHARED is None:
        pytest.fail(missing())
    home = tmp_path_factory.mktemp("share") / "home"
    for f in _fixture_files():
        agent = f.parent.name
        _run(home, "import", agent, str(f), "--json")
    _hostile_session(home)
    from agentlog.capture.hook import build, record

    for f in _hook_fixtures():  # real hook payloads, recorded through the hook's own build and record
        for payload in json.loads(f.read_text(encoding="utf-8"))[:25]:
            record(build("claude-code", json.dumps(payload).encode(), 0, []), str(home), "relaxed")
    _run(home, "ingest")
    return home


def _sessions(root: Path) -> list[str]:
    rows = json.loads(_run(root, "sql", "select session_id, provider_session_id from sessions", "--json").stdout)["rows"]
    return ["ses_" + r[0] for r in rows]


def _hostile_id(root: Path) -> str:
    rows = json.loads(_run(root, "sql", "select session_id from sessions where provider_session_id = 'share-hostile'",
                           "--json").stdout)["rows"]
    return "ses_" + rows[0][0]


def _outside_proof(text: str) -> str:
    at = text.rfind("agentlog-share-proof")
    return text[:at]


def _share(root: Path, ident: str, fmt: str, out: Path, *extra: str) -> str:
    _run(root, "share", ident, f"--{fmt}", str(out), *extra)
    assert out.stat().st_mode & 0o777 == 0o600
    return out.read_text(encoding="utf-8")


@pytest.mark.parametrize("fmt", ["html", "markdown"])
def test_shared_sessions_hold_no_secret_home_user_or_host(root: Path, tmp_path: Path, fmt: str) -> None:
    from agentlog.share.sanitize import NOT_NAMES

    users = (_fixture_users() | {getpass.getuser()}) - NOT_NAMES
    host = socket.gethostname()
    assert users  # the fixtures' authors' home paths are there to remove
    sessions = _sessions(root)
    assert len(sessions) >= 4
    for i, sid in enumerate(sessions):
        text = _share(root, sid, fmt, tmp_path / f"{i}.{fmt}")
        shown = _outside_proof(text)
        assert CANARY_TOKEN not in text and CANARY_GITHUB not in text and "ghp_" not in text
        assert not re.search(r"/home/[A-Za-z0-9]|/Users/[A-Za-z0-9]|[A-Za-z]:\\+Users", text), sid
        assert "ops@example.com" not in text
        for name in users | {host}:
            assert not re.search(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", shown, re.IGNORECASE), (sid, name)
        r = _run(root, "verify-proof", str(tmp_path / f"{i}.{fmt}"))
        assert "verified: the shared file's content is unedited" in r.stdout
    hostile = _share(root, _hostile_id(root), fmt, tmp_path / f"h.{fmt}").replace("\\_", "_")  # Markdown's escapes
    assert "secret:github_token" in hostile or "github_token" in hostile  # counted in the appendix
    assert "high_entropy" in hostile and "home_dir" in hostile and "host_name" in hostile and "email" in hostile
    assert "somebody" not in _outside_proof(hostile)  # a user name learned from a home path, met as a word too


@pytest.mark.parametrize("fmt", ["html", "markdown"])
def test_one_edited_character_fails_verification(root: Path, tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"s.{fmt}"
    text = _share(root, _sessions(root)[0], fmt, path)
    assert _run(root, "verify-proof", str(path), "--json").stdout.count('"ok": true') == 1
    at = text.index("Prompt") + 40  # inside the first prompt shown
    for edited in (text[:at] + ("X" if text[at] != "X" else "Y") + text[at + 1:],
                   text.replace("What was removed", "What was rem0ved", 1)):
        assert edited != text
        path.write_text(edited, encoding="utf-8")
        r = _run(root, "verify-proof", str(path), code=1)
        assert "FAILED: the shown content was edited" in r.stdout
    block = text.rfind('"frame_hash":"') + 14  # a frame hash in the proof: the inclusion proof fails
    flipped = text[:block] + ("0" if text[block] != "0" else "1") + text[block + 1:]
    path.write_text(flipped, encoding="utf-8")
    r = _run(root, "verify-proof", str(path), code=1)
    assert "inclusion proof does not verify" in r.stdout


def test_a_turn_and_an_attempt_share_their_own_frames(root: Path, tmp_path: Path) -> None:
    rows = json.loads(_run(root, "sql", "select attempt_id, turn_id from attempts order by tool_call_count desc limit 1",
                           "--json").stdout)["rows"]
    att, trn = rows[0]
    whole = json.loads(_run(root, "share", "ses_" + _session_of(root, trn), "--dry-run", "--json").stdout)
    turn = json.loads(_run(root, "share", "trn_" + trn, "--markdown", str(tmp_path / "t.md"), "--json").stdout)
    one = json.loads(_run(root, "share", "att_" + att, "--html", str(tmp_path / "a.html"), "--json").stdout)
    assert whole["written"] is None and whole["kind"] == "session"
    assert turn["kind"] == "turn" and one["kind"] == "attempt"
    assert 0 < one["frames"] <= turn["frames"] <= whole["frames"]
    for f in ("t.md", "a.html"):
        _run(root, "verify-proof", str(tmp_path / f))


def _session_of(root: Path, turn: str) -> str:
    rows = json.loads(_run(root, "sql", f"select session_id from turns where turn_id = '{turn}'", "--json").stdout)["rows"]
    return str(rows[0][0])


def test_dry_run_writes_nothing_and_options_redact_more(root: Path, tmp_path: Path) -> None:
    sid = _hostile_id(root)
    out = tmp_path / "never.html"
    r = _run(root, "share", sid, "--html", str(out), "--dry-run")
    assert not out.exists() and "would write session" in r.output and "high_entropy" in r.output
    text = _share(root, sid, "markdown", tmp_path / "more.md", "--redact-paths", "--redact", r"ACME-\d+")
    assert "ACME-1234" not in text and "[REDACTED:regex 1]" in text and "<path>/proj" in text.replace("&lt;", "<")
    assert "| path |" in text and "| regex 1 |" in text, text[-3000:]
    bad = CliRunner().invoke(cli, ["share", sid, "--redact", "("], env={"AGENTLOG_HOME": str(root)})
    assert bad.exit_code == 2 and "not a regular expression" in bad.output
    both = CliRunner().invoke(cli, ["share", sid, "--html", "a", "--markdown", "b"], env={"AGENTLOG_HOME": str(root)})
    assert both.exit_code == 2
    nothing = CliRunner().invoke(cli, ["share", "ses_ffffffffffff"], env={"AGENTLOG_HOME": str(root)})
    assert nothing.exit_code == 1 and "Traceback" not in nothing.output


def test_hostile_text_renders_as_text(root: Path, tmp_path: Path) -> None:
    html = _share(root, _hostile_id(root), "html", tmp_path / "x.html")
    assert html.count("<script") == 2  # the folding script and the proof block, nothing captured
    assert not re.search(r"<a\b|href=\"|<img|</?textarea", html, re.IGNORECASE)
    assert "&lt;script&gt;alert(&quot;p&quot;)&lt;/script&gt;" in html
    assert "\u202e" not in html and "\u200b" not in html and "\\u{202E}" in html
    md = _share(root, _hostile_id(root), "markdown", tmp_path / "x.md")
    outside = re.sub(r"(`{3,})[a-z]*\n.*?\n\1", "", _outside_proof(md), flags=re.S)  # drop the fenced blocks
    assert "<script" not in outside and "javascript:" not in outside and "<img" not in outside
    assert "\u202e" not in md


@pytest.fixture()
def browser(tmp_path: Path) -> Iterator[Any]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not (chromium and driver_path):
        pytest.fail("chromium and chromedriver are needed (Debian: apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--user-data-dir={tmp_path / 'profile'}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)
    driver.set_page_load_timeout(30)
    try:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": True, "latency": 0,
                                                                    "downloadThroughput": 0, "uploadThroughput": 0})
        yield driver
    finally:
        driver.quit()


def _requests(driver: Any, page: Path) -> list[str]:
    """The URLs the page asked for, besides itself."""
    driver.get_log("performance")
    driver.get(page.as_uri())
    urls = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.requestWillBeSent":
            url = msg["params"]["request"]["url"]
            if url != page.as_uri():
                urls.append(url)
    return urls


@pytest.mark.slow
def test_the_html_makes_no_request_and_folds_in_a_real_browser(root: Path, tmp_path: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    control = tmp_path / "control.html"
    control.write_text('<html><body><img src="http://192.0.2.1/x.png"><p>x</p></body></html>', encoding="utf-8")
    assert _requests(browser, control), "the check sees a page's requests"
    hostile = _hostile_id(root)
    for sid in (hostile, _sessions(root)[0]):
        page = tmp_path / "s.html"
        _share(root, sid, "html", page)
        assert _requests(browser, page) == []
        if sid == hostile:
            text = browser.find_element(By.TAG_NAME, "main").text
            assert '<script>alert("p")</script>' in text and "javascript:alert(3)" in text
        assert browser.execute_script("return document.querySelectorAll('a[href], img, iframe').length") == 0
        assert browser.execute_script("return document.scripts.length") == 2
        closed = browser.execute_script("return document.querySelectorAll('details:not([open])').length")
        browser.find_element(By.CSS_SELECTOR, "button[data-fold=open]").click()
        assert closed == 0 or browser.execute_script("return document.querySelectorAll('details:not([open])').length") == 0


def test_the_session_page_has_a_share_button_that_downloads_a_checked_file(root: Path, tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from agentlog.web.app import create_app
    from agentlog.web.security import COOKIE, Guard

    sid = _hostile_id(root)
    guard = Guard(port=8765)
    with TestClient(create_app(str(root), guard, live=False), base_url="http://127.0.0.1:8765") as c:
        assert c.get(f"/sessions/{sid}/share").status_code == 401
        r = c.get(f"/?token={guard.token}", follow_redirects=False)
        c.cookies.set(COOKIE, r.cookies[COOKIE])
        page = c.get(f"/sessions/{sid}").text
        assert f'action="/sessions/{sid}/share"' in page and ">Share</button>" in page
        got = c.get(f"/sessions/{sid}/share", params={"format": "markdown", "redact_paths": "1"})
        assert got.status_code == 200 and "attachment" in got.headers["content-disposition"]
        (tmp_path / "web.md").write_bytes(got.content)
        assert CANARY_TOKEN not in got.text and "<path>" in got.text.replace("&lt;", "<")
        assert c.get("/sessions/ses_ffffffffffff/share").status_code == 404
        assert c.get(f"/sessions/{sid}/share", params={"format": "pdf"}).status_code == 400
    _run(root, "verify-proof", str(tmp_path / "web.md"))


def test_the_standalone_verifier_checks_shared_files_too(root: Path, tmp_path: Path, nacl_python: str) -> None:
    import subprocess

    script = _run(root, "verify-proof", "--print-script").stdout
    (tmp_path / "verify_bundle.py").write_text(script, encoding="utf-8")

    def standalone(path: Path) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([nacl_python, "-I", str(tmp_path / "verify_bundle.py"), str(path)], capture_output=True,
                           text=True, timeout=60)
        assert "Traceback" not in r.stdout + r.stderr, r.stderr
        return r

    for fmt in ("html", "markdown"):
        path = tmp_path / f"s.{fmt}"
        text = _share(root, _hostile_id(root), fmt, path)
        ok = standalone(path)
        assert ok.returncode == 0 and "verified: the shared file's content is unedited" in ok.stdout, ok.stdout
        path.write_text(text.replace("What was removed", "What was rem0ved", 1), encoding="utf-8")
        bad = standalone(path)
        assert bad.returncode == 1 and "FAILED: the shown content was edited" in bad.stdout
        block = text.rfind('"statement":"') + 30  # inside the statement's text: its signature fails
        path.write_text(text[:block] + ("0" if text[block] != "0" else "1") + text[block + 1:], encoding="utf-8")
        assert standalone(path).returncode == 1
        assert _run(root, "verify-proof", str(path), code=1)
