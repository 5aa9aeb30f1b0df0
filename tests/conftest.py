"""Shared fixtures: every test gets its own data root and never the real home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

REPO = Path(__file__).resolve().parents[1]
HOOK_SCRIPT = REPO / "src" / "agentlog" / "_hook.py"


# The quick tier (``./scripts/test.sh --quick``, ``pytest -m quick``): every test but the
# slow ones and these modules, which start real processes at scale (the bench's whole run,
# crash and kill rounds, a 2 GiB store, the browser, the demo) or run long property tests.
# Measured on 2 cores: these modules are ~85 % of the suite's test time (docs/benchmarks.md).
NOT_QUICK: frozenset[str] = frozenset({
    "test_bench_harness.py", "test_bench_ship.py", "test_demo.py", "test_ingest.py", "test_log_crash.py",
    "test_projection_incremental.py", "test_secret_gate.py", "test_store_large.py", "test_web_browser.py",
    "test_web_proposals.py", "test_workload.py",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    quick = pytest.mark.quick
    for item in items:
        if item.path.name not in NOT_QUICK and item.get_closest_marker("slow") is None:
            item.add_marker(quick)


def pytest_report_header() -> list[str]:
    import sqlite3

    return [f"agentlog repo: {REPO}", f"sqlite {sqlite3.sqlite_version}"]


@pytest.fixture(autouse=True)
def agentlog_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("agentlog-home")
    monkeypatch.setenv("AGENTLOG_HOME", str(home))
    monkeypatch.delenv("AGENTLOG_CAPTURE_MODE", raising=False)
    monkeypatch.delenv("AGENTLOG_DURABILITY", raising=False)
    monkeypatch.delenv("AGENTLOG_FAULT_SPLIT_WRITE_MS", raising=False)
    monkeypatch.delenv("AGENTLOG_FAULT_SEAL", raising=False)
    yield home


@pytest.fixture(scope="session")
def nacl_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh venv with PyNaCl and nothing of agentlog, to run the standalone proof verifier as
    a third party would (made once per test session)."""
    import venv

    where = tmp_path_factory.mktemp("nacl-venv")
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    python = str(where / "bin" / "python")
    r = subprocess.run([python, "-m", "pip", "install", "--quiet", "pynacl"], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        pytest.fail(f"pip could not install PyNaCl into a fresh venv (needed to run the standalone verifier "
                    f"as a third party would): {r.stderr[-2000:]}")
    probe = subprocess.run([python, "-I", "-c", "import nacl.signing, importlib.util as u; "
                            "print(u.find_spec('agentlog') is None)"], capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "True", probe.stderr
    return python


def hook_argv(agent: str = "claude-code", *extra: str) -> list[str]:
    return [sys.executable, "-I", "-S", str(HOOK_SCRIPT), agent, *extra]


def run_hook(
    stdin: bytes, agent: str = "claude-code", *extra: str, env: dict[str, str] | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run the real hook as a process, the way an agent does."""
    return subprocess.run(
        hook_argv(agent, *extra), input=stdin, capture_output=True, env={**os.environ, **(env or {})}, timeout=60, cwd=cwd
    )


@pytest.fixture(scope="session")
def native_hook(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The native client ``agentlog-hook``, built once per test session into a scratch data
    root (its fallback: this interpreter and the package's ``_hook.py``, as installed)."""
    from agentlog.install.native_build import build_client

    built = build_client(str(tmp_path_factory.mktemp("native-hook")))
    if built.path is None:
        pytest.skip(f"no native hook client: {built.reason}")
    return built.path


@pytest.fixture(params=["python", "native"])
def hook_path(request: pytest.FixtureRequest, agentlog_home: Path) -> Iterator[Any]:
    """The hook as agents run it, through each path of issue 29 (tests/hook_paths.py): the
    Python hook, or the native client with a capture server serving ``agentlog_home``."""
    from hook_paths import HookPath

    if request.param == "python":
        yield HookPath("python", agentlog_home)
        return
    from agentlog.capture.server import CaptureServer

    binary = request.getfixturevalue("native_hook")
    with CaptureServer(str(agentlog_home)) as server:
        yield HookPath("native", agentlog_home, binary, server)
