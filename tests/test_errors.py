"""One error base: every exception class agentlog defines is an AgentlogError carrying its
exit code, and the CLI turns one that escapes a command into one line and that code."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agentlog.cli import LazyGroup
from agentlog.core import AgentlogError, UsageError
from agentlog.core.locks import Busy, open_locked

SRC = Path(__file__).resolve().parents[1] / "src" / "agentlog"

# Exceptions that never leave their module: control flow inside one parser, and the
# bench harness's "a signal asked us to stop", an atomic writer's "keep the old file";
# and the standalone proof verifier's, which must not import agentlog (its main turns them
# into one line and exit 1, as agentlog's CLI would).
INTERNAL = {("agentlog.install.jsonedit", "_DuplicateKey"), ("agentlog.bench.harness", "Interrupted"),
            ("agentlog.core.fileio", "Discard"), ("agentlog.integrity.standalone_verifier", "Malformed"),
            ("agentlog.integrity.standalone_verifier", "Failed")}


def _exception_classes() -> list[tuple[str, str]]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, (ast.Name, ast.Attribute)) and (getattr(b, "id", None) or getattr(b, "attr", "")).endswith(
                    ("Error", "Exception", "Busy", "Running", "Conflict")) for b in node.bases):
                found.append((module, node.name))
    return found


def test_the_scan_finds_the_classes() -> None:
    names = {n for _, n in _exception_classes()}
    assert {"FrameError", "SealBusy", "QueryError", "InvalidMemory", "MetaError", "InstallError"} <= names


@pytest.mark.parametrize(("module", "name"), _exception_classes())
def test_every_error_is_an_agentlog_error(module: str, name: str) -> None:
    if (module, name) in INTERNAL:
        pytest.skip("internal control flow, never raised out of its module")
    cls = getattr(importlib.import_module(module), name)
    if issubclass(cls, click.ClickException):
        pytest.skip("a click exception: the CLI's own")
    assert issubclass(cls, AgentlogError), f"{module}.{name} does not derive from AgentlogError"
    assert cls.exit_code in (1, 2)


def test_busy_errors_share_one_base() -> None:
    from agentlog.log.seal import SealBusy
    from agentlog.operations.daemon import DaemonRunning
    from agentlog.operations.purge import PurgeBusy
    from agentlog.projection.persist import ProjectionBusy
    from agentlog.search.index import Busy as IndexBusy
    from agentlog.store.compact import CompactBusy
    from agentlog.store.rebuild import RebuildBusy

    for cls in (SealBusy, DaemonRunning, PurgeBusy, ProjectionBusy, IndexBusy, CompactBusy, RebuildBusy):
        assert issubclass(cls, Busy) and cls.exit_code == 1


def test_usage_errors_exit_2() -> None:
    from agentlog.memory.model import InvalidMemory
    from agentlog.query.attemptql import ParseError
    from agentlog.query.engine import QueryError

    assert issubclass(InvalidMemory, UsageError) and issubclass(ParseError, UsageError)
    assert QueryError("no", "refused").exit_code == 2
    assert QueryError("boom", "error").exit_code == 1


def _group_raising(error: Exception) -> click.Group:
    @click.group(cls=LazyGroup)
    def top() -> None:
        pass

    @top.command()
    def go() -> None:
        raise error

    return top


@pytest.mark.parametrize(("error", "code"), [(AgentlogError("the store is gone"), 1), (UsageError("bad --at"), 2),
                                             (Busy("another process is sealing"), 1)])
def test_an_escaping_error_is_one_line_and_its_exit_code(error: AgentlogError, code: int) -> None:
    r = CliRunner().invoke(_group_raising(error), ["go"])
    assert r.exit_code == code
    assert r.output.strip().splitlines() == [f"Error: {error}"]
    assert "Traceback" not in r.output


def test_an_escaping_message_is_terminal_safe() -> None:
    r = CliRunner().invoke(_group_raising(AgentlogError("evil \x1b[2J name")), ["go"])
    assert "\x1b" not in r.output and "\\x1b" in r.output


def test_the_real_cli_reports_a_library_error_without_a_traceback(tmp_path: Path) -> None:
    """A statement the engine refuses, through the installed console entry point."""
    env = {"AGENTLOG_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "agentlog", "query", "SHOW NONSENSE"], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr


def test_open_locked_times_out_while_another_holds_it(tmp_path: Path) -> None:
    path = str(tmp_path / "x.lock")
    first = open_locked(path, 0.0)
    assert first is not None
    held = subprocess.run([sys.executable, "-c", f"from agentlog.core.locks import open_locked; "
                           f"print(open_locked({path!r}, 0.2))"], capture_output=True, text=True, timeout=60)
    assert held.stdout.strip() == "None"
    import os

    os.close(first)
    again = open_locked(path, 0.0)
    assert again is not None
    os.close(again)
    assert (tmp_path / "x.lock").stat().st_mode & 0o777 == 0o600
