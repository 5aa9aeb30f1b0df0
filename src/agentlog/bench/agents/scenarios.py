"""Scenarios: what the scripted model replies, in order, as data files.

A scenario's ``steps`` is a list of model replies; each reply is a list of
abstract actions (``shell``, ``read``, ``write``, ``edit``, ``task``) that
each agent's protocol module turns into that agent's own tool calls. After
the last step the model answers ``final`` and the turn ends.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from agentlog.core import AgentlogError

ACTIONS = ("shell", "read", "write", "edit", "task")


class ScenarioError(AgentlogError):
    """A scenario file that does not say what the model should do."""


@dataclass(frozen=True)
class Action:
    """One tool call the model makes."""

    verb: str
    arg: str
    """The command (shell), the path (read/write/edit) or the description (task)."""
    extra: dict[str, str] = field(default_factory=dict)
    """content (write), old/new (edit), prompt (task)."""


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    prompt: str
    steps: tuple[tuple[Action, ...], ...]
    final: str
    setup: dict[str, str] = field(default_factory=dict)
    agents: tuple[str, ...] = ()
    """Agents the scenario applies to (empty: all)."""
    permission_mode: str = "bypass"
    canaries: tuple[str, ...] = ()
    slow_hook: bool = False
    subagent_final: str = "Done."

    @property
    def action_count(self) -> int:
        return sum(len(s) for s in self.steps)

    def applies_to(self, agent: str) -> bool:
        return not self.agents or agent in self.agents

    def step_after(self, results: int) -> tuple[int, tuple[Action, ...]] | None:
        """The reply (step index, actions) once ``results`` tool results have come back (None: the final answer)."""
        done = 0
        for index, step in enumerate(self.steps):
            if results <= done:
                return index, step
            done += len(step)
        return None


def _action(obj: Any, where: str) -> Action:
    if not isinstance(obj, dict):
        raise ScenarioError(f"{where}: an action is an object, got {type(obj).__name__}")
    verbs = [v for v in ACTIONS if v in obj]
    if len(verbs) != 1:
        raise ScenarioError(f"{where}: an action names exactly one of {', '.join(ACTIONS)}")
    verb = verbs[0]
    extra = {str(k): str(v) for k, v in obj.items() if k != verb}
    return Action(verb, str(obj[verb]), extra)


def parse(obj: Any, where: str = "scenario") -> Scenario:
    """A scenario from its JSON object."""
    if not isinstance(obj, dict):
        raise ScenarioError(f"{where}: not a JSON object")
    try:
        steps = tuple(
            tuple(_action(a, f"{where} step {i + 1}") for a in step) for i, step in enumerate(obj["steps"])
        )
        return Scenario(
            name=str(obj["name"]),
            about=str(obj.get("about", "")),
            prompt=str(obj["prompt"]),
            steps=steps,
            final=str(obj["final"]),
            setup={str(k): str(v) for k, v in (obj.get("setup") or {}).items()},
            agents=tuple(obj.get("agents") or ()),
            permission_mode=str(obj.get("permission_mode", "bypass")),
            canaries=tuple(obj.get("canaries") or ()),
            slow_hook=bool(obj.get("slow_hook", False)),
            subagent_final=str(obj.get("subagent_final", "Done.")),
        )
    except KeyError as e:
        raise ScenarioError(f"{where}: missing {e.args[0]!r}") from None
    except TypeError as e:
        raise ScenarioError(f"{where}: {e}") from None


def load_all() -> dict[str, Scenario]:
    """Every scenario shipped in ``scenarios/``, by name."""
    out: dict[str, Scenario] = {}
    folder = resources.files(__package__).joinpath("scenarios")
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".json"):
            sc = parse(json.loads(entry.read_text(encoding="utf-8")), entry.name)
            out[sc.name] = sc
    return out
