"""Installer, doctor and capture test: every file lives under tmp_path.

Each test gets a fake HOME (passed as ``home=`` and set in the environment,
with CLAUDE_CONFIG_DIR / CODEX_HOME / AGENTLOG_HOME pointing into it) and a
PATH holding only an empty tmp ``bin`` directory, so nothing here can see or
touch the real home or real agents.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.capture.command import hook_command, is_our_command
from agentlog.install import agents as agents_mod
from agentlog.install.agents import AGENTS
from agentlog.install.doctor import AgentHealth, capture_test, diagnose, unrecognised_shapes
from agentlog.install.errors import InvalidJSONError, JSONWithCommentsError, UnknownAgentError
from agentlog.install.hook_client import HookChoice
from agentlog.install.installer import InstallResult, install, read_ledger, uninstall
from agentlog.install.jsonedit import detect_style, find_our_entries, parse_config, serialise

ALL = ["claude-code", "codex", "cursor", "gemini-cli"]
# the native form as install writes it (a path with a space: quoting); no binary is built for these
FORMS = {"python": None, "native": HookChoice("native", "/opt/agent log/data/bin/agentlog-hook-0123456789abcdef")}
CONFIG_REL = {
    "claude-code": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "cursor": ".cursor/hooks.json",
    "gemini-cli": ".gemini/settings.json",
}


@dataclass
class Sandbox:
    root: Path
    home: Path
    data: Path
    bin: Path
    env: dict[str, str]

    def config(self, agent: str) -> Path:
        return self.home / CONFIG_REL[agent]

    def make_agents(self, *names: str) -> None:
        for name in names or tuple(ALL):
            self.config(name).parent.mkdir(parents=True, exist_ok=True)

    def install(self, agents: list[str] | None = None, **kw: object) -> list[InstallResult]:
        return install(agents, home=self.home, data_root=self.data, environ=self.env, **kw)  # type: ignore[arg-type]

    def uninstall(self, agents: list[str] | None = None, **kw: object) -> list[InstallResult]:
        return uninstall(agents, home=self.home, data_root=self.data, environ=self.env, **kw)  # type: ignore[arg-type]

    def diagnose(self, **kw: object) -> dict[str, AgentHealth]:
        return {h.agent: h for h in diagnose(home=self.home, data_root=self.data, environ=self.env, **kw)}  # type: ignore[arg-type]


def make_sandbox(root: Path) -> Sandbox:
    home = root / "home"
    data = root / "data"
    bindir = root / "bin"
    for d in (home, data, bindir):
        d.mkdir(parents=True, exist_ok=True)
    env = {
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CODEX_HOME": str(home / ".codex"),
        "AGENTLOG_HOME": str(data),
        "PATH": str(bindir),
    }
    return Sandbox(root=root, home=home, data=data, bin=bindir, env=env)


@pytest.fixture
def sb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    box = make_sandbox(tmp_path)
    for key, value in box.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return box


def by_agent(results: list[InstallResult]) -> dict[str, InstallResult]:
    return {r.agent: r for r in results}


def snapshot(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every path under ``root`` with its bytes (None for dirs) and mode."""
    out: dict[str, tuple[bytes | None, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            p = Path(dirpath, name)
            out[str(p)] = (None, stat.S_IMODE(p.stat().st_mode))
        for name in filenames:
            p = Path(dirpath, name)
            out[str(p)] = (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
    return out


def our_events(path: Path) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return list(dict.fromkeys(e.event for e in find_our_entries(data)))


# --------------------------------------------------------------------------
# detection


def test_detection_never_creates_agent_dirs(sb: Sandbox) -> None:
    before = snapshot(sb.home)
    results = by_agent(sb.install())
    assert all(r.outcome == "skipped" for r in results.values())
    assert "not detected" in results["claude-code"].reason
    named = by_agent(sb.install(["cursor"]))
    assert named["cursor"].outcome == "skipped"
    assert "was named but is not installed" in named["cursor"].reason
    sb.install(dry_run=True)
    health = sb.diagnose()
    assert {h.state for h in health.values()} == {"not_installed"}
    assert snapshot(sb.home) == before
    assert not (sb.data / "state").exists()


def test_launcher_on_path_without_home_is_skipped(sb: Sandbox) -> None:
    launcher = sb.bin / "codex"
    launcher.write_text("#!/bin/sh\n")
    launcher.chmod(0o755)
    result = by_agent(sb.install(["codex"]))["codex"]
    assert result.outcome == "skipped"
    assert "never creates" in result.reason
    assert not (sb.home / ".codex").exists()
    assert sb.diagnose()["codex"].state == "detected"


def test_unknown_agent_name_raises(sb: Sandbox) -> None:
    with pytest.raises(UnknownAgentError):
        sb.install(["vim"])


def test_relocated_homes_are_honoured(sb: Sandbox) -> None:
    claude_dir = sb.root / "elsewhere" / "claude"
    codex_dir = sb.root / "elsewhere" / "codex"
    claude_dir.mkdir(parents=True)
    codex_dir.mkdir(parents=True)
    sb.env["CLAUDE_CONFIG_DIR"] = str(claude_dir)
    sb.env["CODEX_HOME"] = str(codex_dir)
    results = by_agent(sb.install(["claude-code", "codex"]))
    assert results["claude-code"].outcome == "installed"
    assert results["claude-code"].config_path == claude_dir / "settings.json"
    assert (codex_dir / "hooks.json").is_file()
    assert not (sb.home / ".claude").exists()


# --------------------------------------------------------------------------
# install shapes


@pytest.mark.parametrize("agent", ALL)
def test_install_into_absent_config_creates_it(sb: Sandbox, agent: str) -> None:
    sb.make_agents(agent)
    result = by_agent(sb.install([agent]))[agent]
    assert result.outcome == "installed", result.reason
    path = sb.config(agent)
    assert result.config_path == path
    spec = AGENTS[agent]
    data = json.loads(path.read_text())
    assert list(data["hooks"]) == list(spec.events)
    assert result.events_added == list(spec.events)
    command = hook_command(agent)
    for event in spec.events:
        (entry,) = data["hooks"][event]
        if agent == "cursor":
            assert entry == {"command": command, "timeout": 10}
        elif agent == "codex":
            expected = 3 if event == "SessionEnd" else 5  # Codex caps SessionEnd at 3 s
            assert entry == {"hooks": [{"type": "command", "command": command, "timeout": expected}]}
        elif agent == "gemini-cli":
            assert entry == {
                "hooks": [
                    {"type": "command", "command": command, "name": f"agentlog-{event.lower()}", "timeout": 5000}
                ]
            }
        else:
            expected = 1 if event == "SessionEnd" else 10
            assert entry == {"hooks": [{"type": "command", "command": command, "timeout": expected}]}
    if agent == "cursor":
        assert list(data)[0] == "version" and data["version"] == 1
    assert path.read_bytes().endswith(b"}\n")
    assert not list(path.parent.glob("*.agentlog-lock"))
    assert not list(path.parent.glob("*.agentlog-bak-*")), "no backup of a file that did not exist"


def test_claude_events_exclude_behaviour_changing_ones() -> None:
    events = AGENTS["claude-code"].events
    for name in ("WorktreeCreate", "MessageDisplay", "FileChanged"):
        assert name not in events
    assert "WorktreeRemove" in events
    # the only hook for a call that fails input validation or is refused headless
    assert "PostToolBatch" in events


def test_timeout_units(sb: Sandbox) -> None:
    sb.make_agents()
    sb.install()
    for agent in ALL:
        data = json.loads(sb.config(agent).read_text())
        for entry in find_our_entries(data):
            timeout = entry.handler["timeout"]
            assert isinstance(timeout, int)
            if agent == "gemini-cli":
                assert timeout == 5000  # milliseconds
            else:
                assert 1 <= timeout <= 10  # seconds


CLAUDE_USER = {
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "model": "opus",
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/guard.sh — vérifié ✓", "timeout": 30}]}
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "say fertig"}]}],
    },
    "env": {"GRÜSS": "日本語"},
    "permissions": {"allow": ["Bash(git *)"]},
}


@pytest.mark.parametrize("indent", ["    ", "\t", "  "])
def test_install_keeps_user_hooks_order_and_style(sb: Sandbox, indent: str) -> None:
    sb.make_agents("claude-code")
    path = sb.config("claude-code")
    original = json.dumps(CLAUDE_USER, indent=indent, ensure_ascii=False) + "\n"
    path.write_text(original, encoding="utf-8")
    assert by_agent(sb.install(["claude-code"]))["claude-code"].outcome == "installed"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("{\n" + indent + '"$schema"')
    assert "日本語" in text and "vérifié ✓" in text  # not \u-escaped
    data = json.loads(text)
    assert list(data) == list(CLAUDE_USER)
    assert data["env"] == CLAUDE_USER["env"] and data["permissions"] == CLAUDE_USER["permissions"]
    pre = data["hooks"]["PreToolUse"]
    assert pre[0] == CLAUDE_USER["hooks"]["PreToolUse"][0]  # type: ignore[index]
    assert len(pre) == 2 and is_our_command(pre[1]["hooks"][0]["command"])
    assert data["hooks"]["Stop"][0] == CLAUDE_USER["hooks"]["Stop"][0]  # type: ignore[index]
    assert list(data["hooks"])[:2] == ["PreToolUse", "Stop"]
    # Without ours, the document is exactly the user's.
    from agentlog.install.jsonedit import unmerge

    assert json.dumps(unmerge(data).data) == json.dumps(CLAUDE_USER)
    # And the backup holds the original bytes.
    (backup,) = path.parent.glob("settings.json.agentlog-bak-*")
    assert backup.read_text(encoding="utf-8") == original


def test_install_keeps_cursor_and_gemini_user_hooks(sb: Sandbox) -> None:
    sb.make_agents("cursor", "gemini-cli")
    cursor_user = {"version": 1, "hooks": {"preToolUse": [{"command": "./audit.sh", "matcher": "Shell"}], "afterFileEdit": [{"command": "fmt"}]}}
    gemini_user = {
        "tools": {"enableHooks": True},
        "hooks": {"BeforeTool": [{"matcher": "write_file|replace", "hooks": [{"type": "command", "command": "lint", "name": "lint", "timeout": 60000}]}]},
    }
    sb.config("cursor").write_text(json.dumps(cursor_user))
    sb.config("gemini-cli").write_text(json.dumps(gemini_user, indent=2))
    results = by_agent(sb.install(["cursor", "gemini-cli"]))
    assert results["cursor"].outcome == results["gemini-cli"].outcome == "installed"
    cur = json.loads(sb.config("cursor").read_text())
    assert cur["hooks"]["preToolUse"][0] == {"command": "./audit.sh", "matcher": "Shell"}
    assert cur["hooks"]["afterFileEdit"] == [{"command": "fmt"}]
    assert sb.config("cursor").read_text().count("\n") == 0, "single-line file stays single-line"
    gem = json.loads(sb.config("gemini-cli").read_text())
    assert gem["hooks"]["BeforeTool"][0] == gemini_user["hooks"]["BeforeTool"][0]  # type: ignore[index]
    assert gem["tools"] == {"enableHooks": True}
    assert not any("not explicitly enabled" in n or "disabled" in n for n in results["gemini-cli"].notes)


def test_second_install_is_byte_identical_and_already_current(sb: Sandbox) -> None:
    sb.make_agents()
    sb.config("claude-code").write_text(json.dumps(CLAUDE_USER, indent="\t", ensure_ascii=False))
    sb.install()
    before = snapshot(sb.root)
    results = sb.install()
    assert {r.outcome for r in results} == {"already_current"}
    assert snapshot(sb.root) == before


def test_update_replaces_old_entries_in_place(sb: Sandbox) -> None:
    sb.make_agents("claude-code")
    old = "/old/venv/bin/python3 -I -S /old/site-packages/agentlog/_hook.py claude-code"
    config = {
        "hooks": {
            "WorktreeCreate": [{"hooks": [{"type": "command", "command": old, "timeout": 5}]}],
            "PreToolUse": [
                {"hooks": [{"type": "command", "command": old, "timeout": 5}]},
                {"matcher": "Edit", "hooks": [{"type": "command", "command": "user-edit-hook"}]},
            ],
        }
    }
    sb.config("claude-code").write_text(json.dumps(config, indent=2))
    health = sb.diagnose()["claude-code"]
    assert health.state == "stale"
    result = by_agent(sb.install(["claude-code"]))["claude-code"]
    assert result.outcome == "updated"
    assert result.events_removed == ["WorktreeCreate"]
    assert "PreToolUse" in result.events_updated
    data = json.loads(sb.config("claude-code").read_text())
    assert "WorktreeCreate" not in data["hooks"]
    pre = data["hooks"]["PreToolUse"]
    assert pre[0]["hooks"][0]["command"] == hook_command("claude-code"), "re-inserted where the old one was"
    assert pre[1]["matcher"] == "Edit"
    assert old not in sb.config("claude-code").read_text()
    # The file held our entries before we wrote it: no byte-exact original is known.
    assert str(sb.config("claude-code")) not in read_ledger(sb.data)
    assert by_agent(sb.uninstall(["claude-code"]))["claude-code"].outcome == "removed"
    left = json.loads(sb.config("claude-code").read_text())
    assert left == {"hooks": {"PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "user-edit-hook"}]}]}}


def test_user_hook_sharing_our_group_is_kept(sb: Sandbox) -> None:
    sb.make_agents("claude-code")
    ours = hook_command("claude-code")
    config = {"hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": ours}, {"type": "command", "command": "mine"}]}]}}
    sb.config("claude-code").write_text(json.dumps(config))
    sb.uninstall(["claude-code"])
    assert json.loads(sb.config("claude-code").read_text()) == {
        "hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "mine"}]}]}
    }


# --------------------------------------------------------------------------
# round trips


ROUNDTRIP_TEXTS = [
    None,
    "",
    "{}",
    "{}\n",
    '{"hooks": {}}\n',
    '{"hooks": {"Stop": []}, "x": 1}',
    '{\r\n  "a": "b"\r\n}\r\n',
    "\ufeff{\n  \"a\": 1\n}\n",
    '{"a" : [1,2,   3], "b":{"c":null}}',
    '{\n  "hooks": {\n    "PreToolUse": [ { "matcher": "Bash", "hooks": [ { "type": "command", "command": "x" } ] } ]\n  }\n}',
    '{"esc": "caf\\u00e9 \\/ \\ud83d\\ude00", "n": 1.50, "e": 1e3}\n',
]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("text", ROUNDTRIP_TEXTS)
def test_install_uninstall_restores_exact_bytes(sb: Sandbox, text: str | None, form: str) -> None:
    sb.make_agents()
    originals: dict[str, bytes | None] = {}
    for agent in ALL:
        if text is not None:
            sb.config(agent).write_bytes(text.encode("utf-8"))
        originals[agent] = None if text is None else text.encode("utf-8")
    results = by_agent(sb.install(hook=FORMS[form]))
    assert {r.outcome for r in results.values()} == {"installed"}, [r.reason for r in results.values()]
    for agent in ALL:
        hook = FORMS[form]
        wanted = hook.command(agent) if hook is not None else hook_command(agent)
        assert {e.command for e in find_our_entries(parse_config(sb.config(agent).read_bytes()).data)} == {wanted}
    undone = by_agent(sb.uninstall())
    for agent in ALL:
        assert undone[agent].outcome == "removed"
        assert undone[agent].restored_original
        path = sb.config(agent)
        if originals[agent] is None:
            assert not path.exists()
            assert path.parent.is_dir(), "directories are never deleted"
        else:
            assert path.read_bytes() == originals[agent]
    assert read_ledger(sb.data) == {}
    assert {r.outcome for r in sb.uninstall()} == {"not_installed"}


_name = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-éß日", min_size=1, max_size=10)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-1000, 10**12), _name)
_command = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyz/._- ~$\"'é✓", min_size=1, max_size=30
).filter(lambda c: not is_our_command(c))
_event = st.one_of(
    st.sampled_from(sorted({e for spec in AGENTS.values() for e in spec.events} | {"WorktreeCreate", "afterFileEdit"})),
    _name,
)


def _handler() -> st.SearchStrategy[dict[str, object]]:
    return st.fixed_dictionaries(
        {"command": _command},
        optional={"type": st.just("command"), "timeout": st.integers(1, 60000), "name": _name, "async": st.booleans()},
    )


def _group() -> st.SearchStrategy[dict[str, object]]:
    return st.fixed_dictionaries(
        {"hooks": st.lists(_handler(), min_size=1, max_size=3)},
        optional={"matcher": st.one_of(st.just(""), st.just("*"), _name), "sequential": st.booleans()},
    )


@st.composite
def user_config(draw: st.DrawFn, flat: bool) -> dict[str, object]:
    entry = _handler() if flat else _group()
    hooks = draw(st.dictionaries(_event, st.lists(entry, min_size=1, max_size=3), max_size=5))
    extra = draw(st.dictionaries(_name.filter(lambda k: k not in ("hooks", "version")), _scalar | st.lists(_scalar, max_size=3), max_size=4))
    items = list(extra.items())
    position = draw(st.integers(0, len(items)))
    out: dict[str, object] = dict(items[:position])
    keep_empty_hooks = draw(st.booleans())
    if hooks or keep_empty_hooks:
        out["hooks"] = hooks
    out.update(items[position:])
    if flat and draw(st.booleans()):
        out = {"version": 1, **out}
    return out


_styles: st.SearchStrategy[dict[str, object]] = st.sampled_from(
    [
        {"indent": 2},
        {"indent": 4},
        {"indent": "\t"},
        {"indent": None},
        {"indent": None, "separators": (",", ":")},
        {"indent": 3, "separators": (",", " : ")},
        {"indent": 2, "ensure_ascii": True},
    ]
)


def _render(data: dict[str, object], style: dict[str, object], newline: bool) -> bytes:
    kwargs = {"ensure_ascii": False, **style}
    return (json.dumps(data, **kwargs) + ("\n" if newline else "")).encode("utf-8")  # type: ignore[arg-type]


@st.composite
def four_configs(draw: st.DrawFn) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for agent in ALL:
        if draw(st.integers(0, 4)) == 0:
            out[agent] = None
        else:
            data = draw(user_config(agent == "cursor"))
            out[agent] = _render(data, draw(_styles), draw(st.booleans()))
    return out



@contextlib.contextmanager
def fresh_sandbox() -> Iterator[Sandbox]:
    with tempfile.TemporaryDirectory(prefix="agentlog-install-") as tmp:
        box = make_sandbox(Path(tmp))
        box.make_agents()
        yield box


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(configs=four_configs(), form=st.sampled_from(sorted(FORMS)))
def test_roundtrip_is_byte_identical_for_generated_configs(sb: Sandbox, configs: dict[str, bytes | None],
                                                           form: str) -> None:
    with fresh_sandbox() as box:
        for agent, raw in configs.items():
            if raw is not None:
                box.config(agent).write_bytes(raw)
        first = by_agent(box.install(hook=FORMS[form]))
        assert all(r.outcome == "installed" for r in first.values()), [r.reason for r in first.values()]
        once = {a: box.config(a).read_bytes() for a in ALL}
        second = by_agent(box.install(hook=FORMS[form]))
        assert all(r.outcome == "already_current" for r in second.values())
        assert {a: box.config(a).read_bytes() for a in ALL} == once
        for agent in ALL:
            assert sorted(our_events(box.config(agent))) == sorted(AGENTS[agent].events)
        undone = by_agent(box.uninstall())
        for agent, raw in configs.items():
            assert undone[agent].outcome == "removed"
            if raw is None:
                assert not box.config(agent).exists()
            else:
                assert box.config(agent).read_bytes() == raw


def _strip_empty(data: dict[str, object]) -> dict[str, object]:
    """Structural removal cannot know an event array or ``hooks`` was empty before us."""
    out = dict(data)
    hooks = out.get("hooks")
    if isinstance(hooks, dict):
        hooks = {k: v for k, v in hooks.items() if v != []}
        if hooks:
            out["hooks"] = hooks
        else:
            del out["hooks"]
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_uninstall_after_user_edit_removes_only_ours(sb: Sandbox, data: st.DataObject) -> None:
    agent = data.draw(st.sampled_from(ALL))
    flat = agent == "cursor"
    with fresh_sandbox() as box:
        user = data.draw(user_config(flat))
        box.config(agent).write_bytes(_render(user, data.draw(_styles), True))
        box.install([agent], hook=FORMS[data.draw(st.sampled_from(sorted(FORMS)))])
        # The user edits the file: adds a hook of their own and a setting.
        edited = json.loads(box.config(agent).read_text(encoding="utf-8"))
        event = data.draw(_event)
        mine = {"command": "my-own-hook ✓"} if flat else {"hooks": [{"type": "command", "command": "my-own-hook ✓"}]}
        edited.setdefault("hooks", {}).setdefault(event, []).append(mine)
        edited["userSetting"] = "x"
        box.config(agent).write_text(json.dumps(edited, indent=2, ensure_ascii=False), encoding="utf-8")
        result = by_agent(box.uninstall([agent]))[agent]
        assert result.outcome == "removed" and not result.restored_original
        left = json.loads(box.config(agent).read_text(encoding="utf-8"))
        assert find_our_entries(left) == []
        expected = json.loads(json.dumps(user))
        if flat and "version" not in expected:
            expected = {"version": 1, **expected}
        expected.setdefault("hooks", {}).setdefault(event, []).append(mine)
        expected["userSetting"] = "x"
        assert json.dumps(_strip_empty(left)) == json.dumps(_strip_empty(expected))


# --------------------------------------------------------------------------
# refusing, dry runs, file handling


def test_dry_run_writes_nothing(sb: Sandbox) -> None:
    sb.make_agents()
    sb.config("claude-code").write_text(json.dumps(CLAUDE_USER, indent=4))
    before = snapshot(sb.root)
    results = by_agent(sb.install(dry_run=True))
    assert snapshot(sb.root) == before
    assert results["claude-code"].outcome == "installed" and results["claude-code"].dry_run
    diff = results["claude-code"].diff or ""
    assert diff.startswith("--- ") and "+" in diff and "_hook.py claude-code" in diff
    assert (results["codex"].diff or "").startswith("--- /dev/null")
    sb.install()
    installed = snapshot(sb.root)
    undo = by_agent(sb.uninstall(dry_run=True))
    assert snapshot(sb.root) == installed
    assert undo["claude-code"].outcome == "removed" and undo["claude-code"].restored_original
    assert "+++ /dev/null" in (undo["codex"].diff or "")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"hooks": {', "not valid JSON"),
        ('{"a": 1,}', "not valid JSON"),
        ('{\n  // my settings\n  "a": 1\n}\n', "comments"),
        ('{"a": 1 /* c */}', "comments"),
        ("[1, 2]", "expected an object"),
        ('{"hooks": []}', "'hooks' is a JSON list"),
        ('{"a": 1, "a": 2}', "duplicate key"),
        ('{"a": NaN}', "not valid JSON"),
    ],
)
def test_unparseable_config_is_refused_untouched(sb: Sandbox, text: str, expected: str) -> None:
    sb.make_agents("claude-code")
    path = sb.config("claude-code")
    path.write_text(text)
    before = snapshot(sb.root)
    result = by_agent(sb.install(["claude-code"]))["claude-code"]
    assert result.outcome == "failed"
    assert expected in result.reason
    assert snapshot(sb.root) == before
    assert by_agent(sb.uninstall(["claude-code"]))["claude-code"].outcome == "failed"
    assert snapshot(sb.root) == before


def test_parse_errors_are_typed() -> None:
    with pytest.raises(JSONWithCommentsError):
        parse_config(b"{// x\n}")
    with pytest.raises(InvalidJSONError):
        parse_config(b"\xff\xfe{}")


def test_event_value_of_wrong_type_is_refused(sb: Sandbox) -> None:
    sb.make_agents("codex")
    sb.config("codex").write_text('{"hooks": {"Stop": {"command": "x"}}}')
    result = by_agent(sb.install(["codex"]))["codex"]
    assert result.outcome == "failed" and "hooks.Stop" in result.reason


def test_gemini_non_event_keys_inside_hooks_are_left_alone(sb: Sandbox) -> None:
    sb.make_agents("gemini-cli")
    text = '{\n  "hooks": {\n    "enabled": false,\n    "disabled": ["agentlog-beforetool", "x"]\n  }\n}\n'
    sb.config("gemini-cli").write_text(text)
    result = by_agent(sb.install(["gemini-cli"]))["gemini-cli"]
    assert result.outcome == "installed"
    data = json.loads(sb.config("gemini-cli").read_text())
    assert data["hooks"]["enabled"] is False and data["hooks"]["disabled"] == ["agentlog-beforetool", "x"]
    notes = " ".join(result.notes)
    assert "disabled" in notes and "hooks.enabled = false" in notes and "agentlog-beforetool" in notes
    health = sb.diagnose()["gemini-cli"]
    assert any("disabled" in n for n in health.notes)
    sb.uninstall(["gemini-cli"])
    assert sb.config("gemini-cli").read_text() == text


def test_mode_is_preserved_and_backups_are_bounded(sb: Sandbox) -> None:
    sb.make_agents("claude-code")
    path = sb.config("claude-code")
    path.write_text('{"a": 0}\n')
    path.chmod(0o600)
    for i in range(8):
        sb.install(["claude-code"])
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        data = json.loads(path.read_text())
        data["a"] = i + 1  # a user edit, so the next uninstall is structural and writes
        path.write_text(json.dumps(data))
        sb.uninstall(["claude-code"])
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    backups = sorted(path.parent.glob("settings.json.agentlog-bak-*"))
    assert len(backups) == 5
    assert all(stat.S_IMODE(b.stat().st_mode) == 0o600 for b in backups)
    assert not list(path.parent.glob("*.agentlog-lock"))
    assert not list(path.parent.glob(".*agentlog-tmp"))


def test_symlinked_config_is_written_through(sb: Sandbox) -> None:
    sb.make_agents("claude-code")
    dotfiles = sb.root / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "claude-settings.json"
    target.write_text('{"model": "opus"}\n')
    link = sb.config("claude-code")
    link.symlink_to(target)
    assert by_agent(sb.install(["claude-code"]))["claude-code"].outcome == "installed"
    assert link.is_symlink()
    assert our_events(target) == list(AGENTS["claude-code"].events)
    sb.uninstall(["claude-code"])
    assert link.is_symlink() and target.read_text() == '{"model": "opus"}\n'


def test_project_scope(sb: Sandbox) -> None:
    sb.make_agents("claude-code")  # detected through the user's home
    project = sb.root / "repo"
    project.mkdir()
    results = by_agent(sb.install(["claude-code", "codex"], scope="project", project_dir=project))
    assert results["claude-code"].outcome == "installed"
    assert results["claude-code"].config_path == project / ".claude" / "settings.json"
    assert results["codex"].outcome == "skipped"
    assert not (project / ".codex").exists()
    assert not sb.config("claude-code").exists(), "user config untouched"
    health = sb.diagnose(scope="project", project_dir=project)
    assert health["claude-code"].state == "installed"
    assert by_agent(sb.uninstall(["claude-code"], scope="project", project_dir=project))["claude-code"].restored_original
    assert not (project / ".claude" / "settings.json").exists()
    assert (project / ".claude").is_dir()


def test_style_detection() -> None:
    assert detect_style('{\n\t"a": 1\n}').indent == "\t"
    assert detect_style('{\n    "a": {\n        "b": 1\n    }\n}\n').indent == "    "
    compact = detect_style('{"a":1,"b":[1,2]}')
    assert compact.indent is None and compact.key_separator == ":" and compact.item_separator == ","
    assert detect_style('{"a": "x,y:z", "b": 1}').item_separator == ", "
    crlf = detect_style('{\r\n  "a": 1\r\n}\r\n')
    data: dict[str, object] = {"a": 1}
    assert serialise(data, crlf) == b'{\r\n  "a": 1\r\n}\r\n'


# --------------------------------------------------------------------------
# doctor


def test_doctor_states(sb: Sandbox) -> None:
    sb.make_agents("claude-code", "codex", "cursor")
    health = sb.diagnose()
    assert health["gemini-cli"].state == "not_installed"
    assert health["claude-code"].state == "detected"
    sb.install()
    health = sb.diagnose()
    assert health["claude-code"].state == "installed"
    assert health["claude-code"].problems == []
    assert health["gemini-cli"].state == "not_installed"
    assert any("/hooks" in n for n in health["codex"].notes), "Codex trust is reported"
    logs = sb.data / "logs" / "claude_code"
    logs.mkdir(parents=True)
    (logs / "abc.jsonl").write_text('{"x":1}\n')
    os.utime(logs / "abc.jsonl", (1_800_000_000, 1_800_000_000))
    health = sb.diagnose()
    assert health["claude-code"].state == "receiving"
    assert health["claude-code"].last_event_at is not None
    assert int(health["claude-code"].last_event_at.timestamp()) == 1_800_000_000
    assert health["codex"].state == "installed"


def test_doctor_stale_when_script_is_missing(sb: Sandbox) -> None:
    sb.make_agents("claude-code")
    sb.install(["claude-code"])
    path = sb.config("claude-code")
    gone = f"{sys.executable} -I -S {sb.root}/gone/agentlog/_hook.py claude-code"
    path.write_text(path.read_text().replace(hook_command("claude-code"), gone))
    health = sb.diagnose()["claude-code"]
    assert health.state == "stale"
    assert any("hook script" in p and "no longer exists" in p for p in health.problems)
    path.write_text(path.read_text().replace(sys.executable, "/nonexistent/python3.11"))
    health = sb.diagnose()["claude-code"]
    assert any("interpreter" in p for p in health.problems)
    result = by_agent(sb.install(["claude-code"]))["claude-code"]
    assert result.outcome == "updated"
    assert sb.diagnose()["claude-code"].state == "installed"


def test_doctor_stale_missing_obsolete_duplicate(sb: Sandbox) -> None:
    sb.make_agents("cursor")
    sb.install(["cursor"])
    path = sb.config("cursor")
    data = json.loads(path.read_text())
    del data["hooks"]["stop"]
    data["hooks"]["afterShellExecution"] = [{"command": hook_command("cursor"), "timeout": 10}]
    data["hooks"]["preToolUse"].append({"command": hook_command("cursor"), "timeout": 10})
    path.write_text(json.dumps(data, indent=2))
    health = sb.diagnose()["cursor"]
    assert health.state == "stale"
    assert health.events_missing == ["stop"]
    assert health.events_obsolete == ["afterShellExecution"]
    assert health.events_duplicated == ["preToolUse"]
    result = by_agent(sb.install(["cursor"]))["cursor"]
    assert result.outcome == "updated"
    assert result.events_added == ["stop"] and result.events_removed == ["afterShellExecution"]
    fixed = sb.diagnose()["cursor"]
    assert fixed.state == "installed", fixed.problems


def test_doctor_wrong_agent_argument_and_timeout_are_stale(sb: Sandbox) -> None:
    sb.make_agents("codex")
    sb.install(["codex"])
    path = sb.config("codex")
    path.write_text(path.read_text().replace('"timeout": 5', '"timeout": 600', 1))
    assert sb.diagnose()["codex"].events_outdated == ["SessionStart"]
    path.write_text(path.read_text().replace("_hook.py codex", "_hook.py claude-code"))
    health = sb.diagnose()["codex"]
    assert health.state == "stale"
    assert any("records as claude-code" in p for p in health.problems)


def test_unrecognised_shapes_summary(sb: Sandbox) -> None:
    assert unrecognised_shapes(sb.data) == []
    state = sb.data / "state"
    state.mkdir()
    lines = [
        {"provider": "claude_code", "event": "NewThing", "keys": ["a", "b"], "at": "2026-01-01T00:00:00+00:00"},
        {"provider": "claude_code", "event": "NewThing", "keys": ["a", "b", "c"], "at": "2026-01-02T00:00:00+00:00"},
        {"provider": "cursor", "event": "beforeX", "keys": ["z"], "at": 1_767_225_600_000_000},
    ]
    text = "\n".join(json.dumps(line) for line in lines) + "\nnot json\n"
    (state / "unrecognised.jsonl").write_text(text)
    shapes = {(s.provider, s.event): s for s in unrecognised_shapes(sb.data)}
    new_thing = shapes[("claude_code", "NewThing")]
    assert new_thing.count == 2 and new_thing.last_at == "2026-01-02T00:00:00+00:00"
    assert new_thing.keys == ("a", "b", "c")
    assert shapes[("cursor", "beforeX")].last_at == "2026-01-01T00:00:00+00:00"
    health = sb.diagnose()
    assert [u.event for u in health["claude-code"].unrecognised] == ["NewThing"]
    assert [u.event for u in health["cursor"].unrecognised] == ["beforeX"]


def test_codex_trust_record_is_recognised(sb: Sandbox) -> None:
    from agentlog.install.doctor import codex_trust_hash

    sb.make_agents("codex")
    sb.install(["codex"])
    path = sb.config("codex")
    data = json.loads(path.read_text())
    lines = []
    for event, groups in data["hooks"].items():
        snake = "".join("_" + c.lower() if c.isupper() else c for c in event).lstrip("_")
        key = f"{path}:{snake}:0:0"
        lines.append(f'[hooks.state."{key}"]\ntrusted_hash = "{codex_trust_hash(event, groups[0], groups[0]["hooks"][0])}"\n')
    (sb.home / ".codex" / "config.toml").write_text("\n".join(lines))
    notes = sb.diagnose()["codex"].notes
    assert any("matching trust record" in n for n in notes), notes


# --------------------------------------------------------------------------
# capture test


FAKE_HOOK = textwrap.dedent(
    """
    import json, os, sys
    payload = json.load(sys.stdin)
    provider = {"claude-code": "claude_code", "gemini-cli": "gemini_cli"}.get(sys.argv[1], sys.argv[1])
    if os.environ.get("FAKE_HOOK_FAIL"):
        sys.stderr.write("boom\\n")
        sys.exit(3)
    sid = payload.get("session_id") or payload.get("conversation_id")
    d = os.path.join(os.environ["AGENTLOG_HOME"], "logs", provider)
    os.makedirs(d, exist_ok=True)
    kind = "capture_test" if payload.get("_agentlog_capture_test") is True else "session_started"
    with open(os.path.join(d, sid + ".jsonl"), "a") as fh:
        fh.write(json.dumps({"event": {"kind": kind, "provider_session_id": sid}}, separators=(",", ":")) + "\\n")
    """
)


def _install_fake_hook(sb: Sandbox, agent: str) -> None:
    script = sb.root / "fake" / "agentlog" / "_hook.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(FAKE_HOOK)
    sb.make_agents(agent)
    sb.install([agent])
    path = sb.config(agent)
    path.write_text(path.read_text().replace(hook_command(agent), f"{sys.executable} -I -S {script} {agent}"))


@pytest.mark.parametrize("agent", ALL)
def test_capture_test_with_fake_hook(sb: Sandbox, agent: str) -> None:
    _install_fake_hook(sb, agent)
    result = capture_test(agent, home=sb.home, data_root=sb.data, environ=sb.env)
    assert result.ok, result.reason
    assert result.exit_code == 0
    assert result.log_path is not None
    assert result.log_path.parent == sb.data / "logs" / AGENTS[agent].provider
    assert result.session_id.startswith("agentlog-capture-test-")


def test_capture_test_reports_failure_and_stderr(sb: Sandbox) -> None:
    _install_fake_hook(sb, "codex")
    env = {**sb.env, "FAKE_HOOK_FAIL": "1"}
    result = capture_test("codex", home=sb.home, data_root=sb.data, environ=env)
    assert not result.ok and result.exit_code == 3
    assert "boom" in result.stderr


def test_capture_test_without_install(sb: Sandbox) -> None:
    sb.make_agents("cursor")
    result = capture_test("cursor", home=sb.home, data_root=sb.data, environ=sb.env)
    assert not result.ok and "install first" in result.reason


def test_capture_test_with_real_hook(sb: Sandbox) -> None:
    sb.make_agents("claude-code")
    sb.install(["claude-code"])
    result = capture_test("claude-code", home=sb.home, data_root=sb.data, environ=sb.env)
    assert result.ok, (result.reason, result.stderr)
    # the capture test proves the wiring; it is not the agent sending events
    (health,) = [h for h in diagnose(home=sb.home, data_root=sb.data, environ=sb.env) if h.agent == "claude-code"]
    assert health.state == "installed" and health.last_event_at is None
    import subprocess

    payload = json.dumps({"session_id": "real-1", "hook_event_name": "UserPromptSubmit", "prompt": "hi", "cwd": str(sb.home)})
    subprocess.run(["/bin/sh", "-c", hook_command("claude-code")], input=payload.encode(), env={**os.environ, **sb.env, "AGENTLOG_HOME": str(sb.data)}, check=True)
    (health,) = [h for h in diagnose(home=sb.home, data_root=sb.data, environ=sb.env) if h.agent == "claude-code"]
    assert health.state == "receiving" and health.last_event_at is not None


# --------------------------------------------------------------------------
# CLI


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_cli_install_json_shape(sb: Sandbox, runner: CliRunner) -> None:
    from agentlog.cli.install_cmds import install_cmd

    sb.make_agents("claude-code", "gemini-cli")
    res = runner.invoke(install_cmd, ["--json", "--no-test", "--yes"])
    assert res.exit_code == 0, res.output
    items = json.loads(res.stdout)
    assert [i["agent"] for i in items] == ALL
    by = {i["agent"]: i for i in items}
    assert by["claude-code"]["outcome"] == "installed"
    assert by["codex"]["outcome"] == "skipped"
    assert by["claude-code"]["config_path"] == str(sb.config("claude-code"))
    assert by["claude-code"]["capture_test"] is None
    # Gemini CLI 0.47–0.61 run hooks without any setting: no note claims otherwise
    assert not any("not explicitly enabled" in n for n in by["gemini-cli"]["notes"])
    for item in items:
        assert {"agent", "outcome", "scope", "config_path", "reason", "events_added", "events_removed", "diff", "notes", "capture_test"} <= set(item)
    again = json.loads(runner.invoke(install_cmd, ["claude-code", "--json", "--no-test", "--yes"]).stdout)
    assert [i["outcome"] for i in again] == ["already_current"]


def test_cli_unknown_agent_is_usage_error(sb: Sandbox, runner: CliRunner) -> None:
    from agentlog.cli.install_cmds import install_cmd, uninstall_cmd

    res = runner.invoke(install_cmd, ["claude", "--no-test"])
    assert res.exit_code == 2
    assert "unknown agent" in res.output
    assert runner.invoke(uninstall_cmd, ["nope"]).exit_code == 2


def test_cli_dry_run_and_failure_exit_codes(sb: Sandbox, runner: CliRunner) -> None:
    from agentlog.cli.install_cmds import install_cmd, uninstall_cmd

    sb.make_agents("claude-code", "cursor")
    sb.config("cursor").write_text("{ not json")
    before = snapshot(sb.root)
    res = runner.invoke(install_cmd, ["claude-code", "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "dry run" in res.stdout and "_hook.py claude-code" in res.stdout
    assert snapshot(sb.root) == before
    res = runner.invoke(install_cmd, ["--no-test", "--json", "--yes"])
    assert res.exit_code == 1
    by = {i["agent"]: i for i in json.loads(res.stdout)}
    assert by["cursor"]["outcome"] == "failed" and by["claude-code"]["outcome"] == "installed"
    assert "cursor" in res.stderr
    res = runner.invoke(uninstall_cmd, ["claude-code", "--json"])
    assert res.exit_code == 0
    assert json.loads(res.stdout)[0]["restored_original"] is True


def test_cli_install_runs_capture_test(sb: Sandbox, runner: CliRunner) -> None:
    from agentlog.cli.install_cmds import install_cmd

    _install_fake_hook(sb, "codex")
    res = runner.invoke(install_cmd, ["codex", "--json", "--yes"])
    item = json.loads(res.stdout)[0]
    # The install repoints the hook at the real command, so the real hook runs.
    assert item["outcome"] == "updated"
    assert item["capture_test"]["session_id"].startswith("agentlog-capture-test-")
    assert res.exit_code == (0 if item["capture_test"]["ok"] else 1)


def test_cli_doctor(sb: Sandbox, runner: CliRunner) -> None:
    from agentlog.cli.install_cmds import doctor_cmd, install_cmd

    sb.make_agents("claude-code")
    res = runner.invoke(doctor_cmd, ["--json"])
    assert res.exit_code == 0
    items = json.loads(res.stdout)
    assert {i["agent"]: i["state"] for i in items} == {
        "claude-code": "detected",
        "codex": "not_installed",
        "cursor": "not_installed",
        "gemini-cli": "not_installed",
    }
    assert {"agent", "state", "config_path", "last_event_at", "problems", "notes", "unrecognised"} <= set(items[0])
    runner.invoke(install_cmd, ["--no-test", "--yes"])
    path = sb.config("claude-code")
    path.write_text(path.read_text().replace(sys.executable, "/nonexistent/python"))
    res = runner.invoke(doctor_cmd, [])
    assert res.exit_code == 1
    assert "stale" in res.stdout
    assert "stale hooks" in res.stderr


def test_cli_help_texts(runner: CliRunner) -> None:
    from agentlog.cli.install_cmds import doctor_cmd, install_cmd, uninstall_cmd

    for cmd in (install_cmd, uninstall_cmd, doctor_cmd):
        res = runner.invoke(cmd, ["--help"])
        assert res.exit_code == 0 and len(res.stdout) > 100


def test_agents_module_has_no_side_effects_on_import() -> None:
    assert set(agents_mod.AGENT_NAMES) == set(ALL)


def test_cli_install_backfills_recent_transcripts(sb: Sandbox, runner: CliRunner) -> None:
    """--backfill imports the installed agents' transcripts modified in the last N days
    (an older one is left for `agentlog import`)."""
    import os
    import time

    from agentlog.cli.install_cmds import install_cmd

    sb.make_agents("claude-code")
    projects = sb.home / ".claude" / "projects" / "-w"
    projects.mkdir(parents=True)
    line = json.dumps({"type": "user", "sessionId": "s-new", "timestamp": "2026-11-01T10:00:00Z",
                       "message": {"role": "user", "content": "hello"}})
    (projects / "s-new.jsonl").write_text(line + "\n")
    old = projects / "s-old.jsonl"
    old.write_text(line.replace("s-new", "s-old") + "\n")
    month_ago = time.time() - 40 * 86400
    os.utime(old, (month_ago, month_ago))
    res = runner.invoke(install_cmd, ["claude-code", "--json", "--no-test", "--backfill", "--yes"])
    assert res.exit_code == 0, res.output
    (item,) = json.loads(res.stdout)
    assert item["backfill"] == "1 events from 1 files (1 sessions)"
    logs = sorted(p.name for p in (sb.data / "logs" / "claude_code").glob("*.jsonl"))
    assert logs == ["s-new.jsonl"]
    again = runner.invoke(install_cmd, ["claude-code", "--json", "--no-test", "--no-backfill", "--yes"])
    assert "backfill" not in json.loads(again.stdout)[0]


# --------------------------------------------------------------------------
# install --mcp


def test_mcp_registration_in_each_agents_format_keeps_everything_else(sb: Sandbox) -> None:
    import tomllib

    from agentlog.install.mcp_register import register

    for d in (".claude", ".codex", ".cursor", ".gemini"):
        (sb.home / d).mkdir()
    claude = sb.home / ".claude" / ".claude.json"
    claude.write_text(json.dumps({"numStartups": 3, "mcpServers": {"other": {"command": "x"}}}, indent=2) + "\n")
    codex = sb.home / ".codex" / "config.toml"
    codex.write_text('model = "o3"  # mine\n\n[mcp_servers.other]\ncommand = "y"\n')
    gemini = sb.home / ".gemini" / "settings.json"
    gemini.write_text('{\n    "theme": "dark"\n}\n')
    results = {r.agent: r for r in register(["claude-code", "codex", "cursor", "gemini-cli"], home=sb.home,
                                            environ=sb.env)}
    assert {a: r.outcome for a, r in results.items()} == dict.fromkeys(results, "registered")
    c = json.loads(claude.read_text())
    assert c["numStartups"] == 3 and c["mcpServers"]["other"] == {"command": "x"}
    ours = c["mcpServers"]["agentlog"]
    assert ours["type"] == "stdio" and ours["args"] == ["-m", "agentlog", "mcp"]
    assert ours["env"] == {"AGENTLOG_HOME": str(sb.data)}
    t = codex.read_text()
    assert "# mine" in t and tomllib.loads(t)["mcp_servers"]["agentlog"]["args"] == ["-m", "agentlog", "mcp"]
    assert tomllib.loads(t)["mcp_servers"]["other"] == {"command": "y"}
    cursor = json.loads((sb.home / ".cursor" / "mcp.json").read_text())
    assert cursor["mcpServers"]["agentlog"]["command"] == ours["command"]
    g = gemini.read_text()
    assert json.loads(g)["theme"] == "dark" and g.startswith('{\n    "theme"')  # its indentation kept
    before = snapshot(sb.home)
    again = register(["claude-code", "codex", "cursor", "gemini-cli"], home=sb.home, environ=sb.env)
    assert {r.outcome for r in again} == {"unchanged"}
    assert {k: v for k, v in snapshot(sb.home).items() if "agentlog-bak" not in k} == \
        {k: v for k, v in before.items() if "agentlog-bak" not in k}
    removed = register(["claude-code", "codex", "cursor", "gemini-cli"], home=sb.home, environ=sb.env, remove=True)
    assert {r.outcome for r in removed} == {"removed"}
    assert "agentlog" not in json.loads(claude.read_text())["mcpServers"]
    assert "agentlog" not in tomllib.loads(codex.read_text())["mcp_servers"]


def test_mcp_registration_skips_agents_not_detected_and_the_cli_reports(sb: Sandbox) -> None:
    from agentlog.cli import cli

    (sb.home / ".cursor").mkdir()
    r = CliRunner().invoke(cli, ["install", "--mcp", "--json", "--yes"], env=sb.env)
    assert r.exit_code == 0, r.output
    out = {x["agent"]: x["outcome"] for x in json.loads(r.stdout)}
    assert out["cursor"] == "registered" and out["claude-code"] == "skipped"
    r = CliRunner().invoke(cli, ["uninstall", "--mcp", "cursor", "--json"], env=sb.env)
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["outcome"] == "removed"


def test_a_byte_exact_uninstall_leaves_no_backup_behind(sb: Sandbox) -> None:
    """Issue 27, finding 12: uninstall restored settings.json byte for byte but left
    settings.json.agentlog-bak-* beside it (and made one more of its own bytes)."""
    sb.make_agents("claude-code")
    path = sb.config("claude-code")
    original = json.dumps(CLAUDE_USER, indent=2) + "\n"
    path.write_text(original, encoding="utf-8")
    mine = path.parent / "settings.json.agentlog-bak-19990101T000000"  # not ours: kept
    mine.write_text("a backup the user made\n")
    assert by_agent(sb.install(["claude-code"]))["claude-code"].outcome == "installed"
    assert len(list(path.parent.glob("settings.json.agentlog-bak-*"))) == 2
    (result,) = sb.uninstall(["claude-code"])
    assert result.restored_original and path.read_text(encoding="utf-8") == original
    assert list(path.parent.glob("settings.json.agentlog-bak-*")) == [mine]


# --------------------------------------------------------------------------
# install asks before changing another program's config (issue 27, finding 4)


def test_cli_install_without_terminal_or_yes_prints_plan_and_changes_nothing(sb: Sandbox, runner: CliRunner) -> None:
    from agentlog.cli.install_cmds import install_cmd

    sb.make_agents("claude-code")
    before = snapshot(sb.root)
    res = runner.invoke(install_cmd, ["claude-code", "--no-backfill"])
    assert res.exit_code == 1, res.output
    assert "the plan" in res.stdout and "_hook.py claude-code" in res.stdout  # the diff of what would change
    assert "--yes" in res.stderr and "nothing changed" in res.stderr
    assert snapshot(sb.root) == before
    res = runner.invoke(install_cmd, ["claude-code", "--json"])
    assert res.exit_code == 1
    (item,) = json.loads(res.stdout)
    assert item["outcome"] == "installed" and item["dry_run"] is True
    assert snapshot(sb.root) == before
    mcp = runner.invoke(install_cmd, ["claude-code", "--mcp"])
    assert mcp.exit_code == 1 and "--yes" in mcp.stderr
    assert snapshot(sb.root) == before
    # once installed, a second run changes nothing, so it does not need asking
    assert runner.invoke(install_cmd, ["claude-code", "--no-test", "--yes", "--no-backfill"]).exit_code == 0
    again = runner.invoke(install_cmd, ["claude-code", "--no-test", "--no-backfill", "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout)[0]["outcome"] == "already_current"


def _install_on_terminal(sb: Sandbox, answer: bytes) -> tuple[int, str]:
    """Run `agentlog install claude-code` on a pseudo-terminal, answer its question."""
    import pty
    import select
    import subprocess
    import time

    env = {**sb.env, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COLUMNS": "200"}
    main_fd, sub_fd = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "agentlog", "install", "claude-code", "--no-test",
                             "--no-backfill"], stdin=sub_fd, stdout=sub_fd, stderr=sub_fd, env=env, close_fds=True)
    os.close(sub_fd)
    seen = b""
    answered = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main_fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(main_fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        if not answered and b"Apply these changes?" in seen:
            os.write(main_fd, answer + b"\n")
            answered = True
        if proc.poll() is not None and not ready:
            break
    code = proc.wait(timeout=30)
    os.close(main_fd)
    return code, seen.decode("utf-8", "replace")


def test_cli_install_on_a_terminal_shows_the_plan_and_asks(sb: Sandbox) -> None:
    sb.make_agents("claude-code")
    before = snapshot(sb.root)
    code, out = _install_on_terminal(sb, b"n")
    assert "_hook.py claude-code" in out and "Apply these changes?" in out
    assert code == 1 and "nothing changed" in out
    assert snapshot(sb.root) == before
    code, out = _install_on_terminal(sb, b"y")
    assert code == 0, out
    assert "_hook.py claude-code" in sb.config("claude-code").read_text()


def test_capture_tests_are_closed_and_hidden_unless_all(sb: Sandbox, runner: CliRunner) -> None:
    """install's capture test is a synthetic session: not in sessions, status's session count,
    the Integrity page or Now; `sessions --all` and `/integrity?all=1` show it, closed."""
    from agentlog.cli import cli
    from agentlog.web import data as web_data

    sb.make_agents("claude-code")
    res = runner.invoke(cli, ["install", "claude-code", "--yes", "--no-backfill", "--json"])
    assert res.exit_code == 0, res.output
    test_id = json.loads(res.stdout)[0]["capture_test"]["session_id"]
    listed = runner.invoke(cli, ["sessions", "--all-projects", "--json"])
    assert listed.exit_code == 0 and json.loads(listed.stdout) == []
    plain = runner.invoke(cli, ["sessions", "--all-projects"])
    assert "capture tests not shown (--all)" in plain.stderr and test_id not in plain.stdout
    every = runner.invoke(cli, ["sessions", "--all", "--json"])
    (row,) = json.loads(every.stdout)
    assert row["session_id"] == test_id and row["liveness"] == "closed" and row["capture_test"] is True
    status = json.loads(runner.invoke(cli, ["status", "--json"]).stdout)
    assert status["sessions"] == 0 and status["capture_tests"] == 1
    page = web_data.integrity(str(sb.data))
    assert page["logs"] == [] and page["capture_tests_hidden"] == 1
    assert [r["log"] for r in web_data.integrity(str(sb.data), everything=True)["logs"]] == [f"claude_code/{test_id}"]
