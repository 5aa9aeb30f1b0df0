"""Start each agent CLI in a scratch home, against the scripted model, with agentlog's hooks.

Everything stays on the machine: the model URL is 127.0.0.1, telemetry,
update checks and plugin syncs are off, and a proxy on a closed loopback port
catches any other address the CLI might try (``NO_PROXY`` lets loopback through).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentlog.bench.agents.anthropic import AnthropicProtocol
from agentlog.bench.agents.gemini import GeminiProtocol
from agentlog.bench.agents.npm import Release, installed_binary
from agentlog.bench.agents.openai import ResponsesProtocol
from agentlog.bench.agents.scenarios import Scenario
from agentlog.bench.agents.server import ModelProtocol, ScriptedModel
from agentlog.bench.common import start_daemon, stop_daemon

RELEASES: tuple[Release, ...] = (
    Release("claude-code", "@anthropic-ai/claude-code", "2.1.332", "claude"),
    Release("claude-code", "@anthropic-ai/claude-code", "2.1.197", "claude"),
    Release("codex", "@openai/codex", "0.171.0", "codex"),
    Release("codex", "@openai/codex", "0.142.2", "codex"),
    Release("gemini-cli", "@google/gemini-cli", "0.61.0", "gemini"),
    Release("gemini-cli", "@google/gemini-cli", "0.47.0", "gemini"),
)
"""The pinned releases: each agent's current one and one about six months older."""

DEAD_PROXY = "http://127.0.0.1:9"
SLOW_HOOK_SECONDS = 20


@dataclass
class Run:
    """One scenario run by one release."""

    release: Release
    scenario: Scenario
    scratch: Path
    hooks: bool
    model: ScriptedModel
    returncode: int = -1
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0
    timed_out: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    daemon: subprocess.Popen[bytes] | None = None
    """The ``agentlog daemon run`` beside the agent (``run_scenario(daemon=True)``)."""

    @property
    def home(self) -> Path:
        return self.scratch

    @property
    def project(self) -> Path:
        return self.scratch / "proj"

    @property
    def data_root(self) -> Path:
        return self.scratch / "alhome"

    def env(self) -> dict[str, str]:
        """The environment agentlog's commands need to read this run's record."""
        return agentlog_env(self.scratch)


def base_env(scratch: Path) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "SYSTEMROOT", "PYTHONPATH")  # PYTHONPATH: agentlog from a checkout
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update({
        "HOME": str(scratch), "AGENTLOG_HOME": str(scratch / "alhome"), "XDG_CONFIG_HOME": str(scratch / ".config"),
        "XDG_CACHE_HOME": str(scratch / ".cache"), "XDG_DATA_HOME": str(scratch / ".local" / "share"),
        "HTTP_PROXY": DEAD_PROXY, "HTTPS_PROXY": DEAD_PROXY, "http_proxy": DEAD_PROXY, "https_proxy": DEAD_PROXY,
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost", "NO_COLOR": "1", "CI": "1",
    })
    return env


def agentlog_env(scratch: Path) -> dict[str, str]:
    env = base_env(scratch)
    env["CODEX_HOME"] = str(scratch / ".codex")
    return env


def agentlog_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentlog", *args]


def _git(proj: Path, *args: str, env: dict[str, str]) -> None:
    subprocess.run(["git", *args], cwd=proj, env=env, check=True, capture_output=True, timeout=30)


def prepare_project(scratch: Path, scenario: Scenario) -> Path:
    proj = scratch / "proj"
    proj.mkdir(parents=True, exist_ok=True)
    env = {**base_env(scratch), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    _git(proj, "init", "-q", "-b", "main", env=env)
    for name, text in scenario.setup.items():
        (proj / name).write_text(text)
    (proj / "README.md").write_text("scratch project\n")
    _git(proj, "add", "-A", env=env)
    _git(proj, "commit", "-q", "-m", "start", env=env)
    return proj


def _write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2))


def slow_hook_command(scratch: Path) -> str:
    script = scratch / "slow-hook.sh"
    script.write_text(f"#!/bin/sh\ncat >/dev/null\nexec sleep {SLOW_HOOK_SECONDS}\n")
    script.chmod(0o755)
    return str(script)


class Driver:
    agent = ""

    def protocol(self, run_dir: Path) -> ModelProtocol:
        raise NotImplementedError

    def configure(self, scratch: Path, url: str, scenario: Scenario, telemetry: bool = False) -> None:
        """The agent's own settings in the scratch home (before agentlog's install); ``telemetry``:
        leave the agent's telemetry setting for ``agentlog install --otel`` to write."""

    def argv(self, exe: Path, scenario: Scenario) -> list[str]:
        raise NotImplementedError

    def env(self, scratch: Path, url: str) -> dict[str, str]:
        return base_env(scratch)


class ClaudeDriver(Driver):
    agent = "claude-code"

    def protocol(self, run_dir: Path) -> ModelProtocol:
        return AnthropicProtocol(str(run_dir / "proj"))

    def configure(self, scratch: Path, url: str, scenario: Scenario, telemetry: bool = False) -> None:
        settings: dict[str, Any] = {}
        if scenario.slow_hook:
            hook = {"type": "command", "command": slow_hook_command(scratch), "timeout": 2}
            settings["hooks"] = {e: [{"matcher": "*", "hooks": [hook]}] if e.endswith("ToolUse") else [{"hooks": [hook]}]
                                 for e in ("PreToolUse", "PostToolUse", "UserPromptSubmit")}
        _write_json(scratch / ".claude" / "settings.json", settings)

    def argv(self, exe: Path, scenario: Scenario) -> list[str]:
        mode = "bypassPermissions" if scenario.permission_mode == "bypass" else scenario.permission_mode
        return [str(exe), "-p", scenario.prompt, "--permission-mode", mode, "--output-format", "stream-json", "--verbose"]

    def env(self, scratch: Path, url: str) -> dict[str, str]:
        env = base_env(scratch)
        env.update({
            "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-scripted-model",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1", "IS_SANDBOX": "1",
        })
        return env


class CodexDriver(Driver):
    agent = "codex"

    def protocol(self, run_dir: Path) -> ModelProtocol:
        return ResponsesProtocol(str(run_dir / "proj"))

    def configure(self, scratch: Path, url: str, scenario: Scenario, telemetry: bool = False) -> None:
        home = scratch / ".codex"
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            'model = "gpt-5.5"\nmodel_provider = "scripted"\napproval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\ncheck_for_update_on_startup = false\n'
            "[features]\nplugins = false\napps = false\nremote_plugin = false\nplugin_sharing = false\n"
            "[analytics]\nenabled = false\n"
            '[model_providers.scripted]\nname = "Scripted"\n'
            f'base_url = "{url}/v1"\nwire_api = "responses"\nenv_key = "SCRIPTED_OPENAI_API_KEY"\n'
            "request_max_retries = 0\nstream_max_retries = 0\n"
            f'[projects."{scratch / "proj"}"]\ntrust_level = "trusted"\n'
        )
        if scenario.slow_hook:
            hook = {"type": "command", "command": slow_hook_command(scratch), "timeout": 2}
            _write_json(home / "hooks.json", {"hooks": {e: [{"hooks": [hook]}] for e in ("PreToolUse", "PostToolUse", "UserPromptSubmit")}})

    def argv(self, exe: Path, scenario: Scenario) -> list[str]:
        return [str(exe), "exec", "--dangerously-bypass-hook-trust", "--json", "--skip-git-repo-check", scenario.prompt]

    def env(self, scratch: Path, url: str) -> dict[str, str]:
        env = base_env(scratch)
        env.update({"CODEX_HOME": str(scratch / ".codex"), "SCRIPTED_OPENAI_API_KEY": "sk-fake-scripted"})
        return env


class GeminiDriver(Driver):
    agent = "gemini-cli"

    def protocol(self, run_dir: Path) -> ModelProtocol:
        return GeminiProtocol(str(run_dir / "proj"))

    def configure(self, scratch: Path, url: str, scenario: Scenario, telemetry: bool = False) -> None:
        settings: dict[str, Any] = {
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "privacy": {"usageStatisticsEnabled": False},
            "security": {"auth": {"selectedType": "gemini-api-key"}},
        }
        if not telemetry:
            settings["telemetry"] = {"enabled": False}
        if scenario.slow_hook:
            hook = {"type": "command", "name": "slow", "command": slow_hook_command(scratch), "timeout": 2000}
            settings["hooks"] = {e: [{"hooks": [hook]}] for e in ("BeforeTool", "AfterTool", "BeforeAgent")}
        _write_json(scratch / ".gemini" / "settings.json", settings)
        _write_json(scratch / ".gemini" / "trustedFolders.json", {str(scratch / "proj"): "TRUST_FOLDER"})

    def argv(self, exe: Path, scenario: Scenario) -> list[str]:
        return [str(exe), "-m", "gemini-2.5-flash", "--approval-mode", "yolo", "--output-format", "stream-json", "-p", scenario.prompt]

    def env(self, scratch: Path, url: str) -> dict[str, str]:
        env = base_env(scratch)
        env.update({"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": "fake-scripted-key", "GEMINI_CLI_NO_RELAUNCH": "true"})
        return env


DRIVERS: dict[str, Driver] = {d.agent: d for d in (ClaudeDriver(), CodexDriver(), GeminiDriver())}


def install_hooks(scratch: Path, agent: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = agentlog_env(scratch)
    return subprocess.run(agentlog_cmd("install", agent, "--yes", "--no-backfill", *extra), env=env, cwd=scratch / "proj",
                          capture_output=True, text=True, timeout=120)


def run_scenario(release: Release, scenario: Scenario, scratch: Path, *, hooks: bool = True, timeout: float = 180.0,
                 cache: Path | None = None, install_args: tuple[str, ...] = (), bypass_trust: bool = True,
                 daemon: bool = False, sandbox: bool = False, otel: bool = False) -> Run:
    """Run one scenario with one release in ``scratch`` (made empty first) and return what happened.

    ``install_args`` go to ``agentlog install``; ``bypass_trust=False`` runs Codex
    without ``--dangerously-bypass-hook-trust`` (its hooks then run only if trusted);
    ``daemon`` runs ``agentlog daemon run`` on the run's data root while the agent runs
    (its capture server answers the native hook), stopped after. ``sandbox`` starts the agent under
    ``agentlog run --net loopback --port <the model's port>`` (docs/sandbox.md). ``otel`` runs ``agentlog
    otel serve`` on the run's data root and points the agent's telemetry at it (``install --otel``),
    stopped once the agent has exited (its receipt line in ``run.extra["otel"]``)."""
    driver = DRIVERS[release.agent]
    exe = installed_binary(release, cache)
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    prepare_project(scratch, scenario)
    model = ScriptedModel(driver.protocol(scratch), scenario).start()
    run = Run(release, scenario, scratch, hooks, model)
    receiver: Receiver | None = None
    try:
        driver.configure(scratch, model.url, scenario, telemetry=otel)
        if hooks:
            inst = install_hooks(scratch, release.agent, *install_args)
            run.extra["install"] = inst.stdout + inst.stderr
            if inst.returncode != 0:
                raise RuntimeError(f"agentlog install {release.agent} failed: {inst.stderr.strip()[-400:]}")
        if otel:
            receiver = start_receiver(run)
            inst = install_hooks(scratch, release.agent, "--otel", "--otel-endpoint", receiver.endpoint)
            if inst.returncode != 0:
                raise RuntimeError(f"agentlog install --otel {release.agent} failed: {inst.stderr.strip()[-400:]}")
        env = driver.env(scratch, model.url)
        if daemon:
            run.daemon = start_daemon(str(run.data_root), run.env())
        started = time.perf_counter()
        try:
            argv = driver.argv(exe, scenario)
            if not bypass_trust:
                argv = [a for a in argv if a != "--dangerously-bypass-hook-trust"]
            if sandbox:
                port = str(urllib.parse.urlsplit(model.url).port)
                argv = [sys.executable, "-m", "agentlog", "run", "--net", "loopback", "--port", port, "--", *argv]
                package_parent = str(Path(__file__).resolve().parents[3])
                env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", "")) if p)
            proc = subprocess.run(argv, cwd=scratch / "proj", env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=timeout)
            run.returncode, run.stdout, run.stderr = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as e:
            run.timed_out = True
            run.stdout = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            run.stderr = (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        run.wall_s = time.perf_counter() - started
    finally:
        model.stop()
        if run.daemon is not None:
            stop_daemon(run.daemon)
            run.daemon = None
        if receiver is not None:
            run.extra["otel"] = receiver.stop()
    return run


@dataclass
class Receiver:
    """``agentlog otel serve`` on a free loopback port, for one run's data root."""

    proc: subprocess.Popen[bytes]
    endpoint: str

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=30)
        return err.decode("utf-8", "replace").strip()


def start_receiver(run: Run) -> Receiver:
    proc = subprocess.Popen(agentlog_cmd("otel", "serve", "--port", "0"), env=run.env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    assert proc.stderr is not None
    line = proc.stderr.readline().decode()
    m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if m is None:
        proc.kill()
        proc.communicate(timeout=30)
        raise RuntimeError(f"agentlog otel serve did not start: {line.strip()!r}")
    return Receiver(proc, f"http://127.0.0.1:{m.group(1)}")


TRANSCRIPT_GLOBS = {
    "claude-code": ".claude/projects/*/*.jsonl",
    "codex": ".codex/sessions/*/*/*/rollout-*.jsonl",
    "gemini-cli": ".gemini/tmp/*/chats/session-*",
}


def transcripts(run: Run) -> list[Path]:
    """The transcript files the agent wrote in this run's scratch home."""
    return sorted(run.scratch.glob(TRANSCRIPT_GLOBS[run.release.agent]))


def wait_for_sync(run: Run, timeout: float = 30.0) -> float | None:
    """Seconds until the background transcript import (Codex: at Stop and
    SessionEnd) has read every transcript to its end, counted from when the CLI
    exited; None when it has not within ``timeout`` or the agent has none."""
    from agentlog.core.jsonio import loads

    if run.release.agent != "codex":
        return None
    state_file = run.data_root / "state" / "import.json"
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    while time.monotonic() < deadline:
        try:
            state = loads(state_file.read_bytes())
        except (OSError, ValueError):
            state = {}
        files = transcripts(run)
        if files and all(isinstance(state.get(str(f)), dict) and state[str(f)].get("offset") == f.stat().st_size
                         for f in files):
            return time.monotonic() - started
        time.sleep(0.05)
    return None


def import_transcripts(run: Run) -> dict[str, Any]:
    """``agentlog import <agent> --json`` over the run's transcripts (the user's own command)."""
    from agentlog.core.jsonio import loads

    proc = subprocess.run(agentlog_cmd("import", run.release.agent, *map(str, transcripts(run)), "--json"),
                          env=run.env(), cwd=run.project, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"agentlog import failed: {proc.stderr.strip()[-400:]}")
    out = loads(proc.stdout)
    return out if isinstance(out, dict) else {}


def files_containing(root: Path, needles: tuple[str, ...]) -> list[str]:
    """Files under ``root`` whose bytes hold any of ``needles``."""
    found: list[str] = []
    encoded = [n.encode() for n in needles]
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if any(n in data for n in encoded):
                found.append(str(path.relative_to(root)))
    return found
