"""``agentlog install --otel``, ``uninstall --otel`` and doctor's telemetry lines (called from install_cmds)."""

from __future__ import annotations

import click

from agentlog.cli.output import stderr
from agentlog.core.paths import data_root


def configure_agents(agents: list[str], dry_run: bool, json_: bool, *, remove: bool, yes: bool = True,
                     endpoint: str | None = None) -> None:
    """``install --otel`` / ``uninstall --otel``: show the plan, ask (unless --yes), apply."""
    from functools import partial

    from agentlog.cli.config_apply import apply_configs
    from agentlog.install.otel_register import DEFAULT_ENDPOINT, configure

    url = endpoint or DEFAULT_ENDPOINT
    if not url.startswith(("http://", "https://")):
        raise click.BadParameter(f"{url!r} is not an http:// or https:// URL", param_hint="--otel-endpoint")
    apply_configs(partial(configure, endpoint=url), agents, dry_run, json_, remove=remove, yes=yes,
                  hint=f"telemetry goes to {url}: run `agentlog otel serve` or set otel_receiver "
                       "(agents read it when they start)")


def telemetry_states(agents: list[str]) -> dict[str, dict[str, object]]:
    """Per agent: whether its config points telemetry at us, and what arrived (doctor --json)."""
    from agentlog.core.timefmt import format_us
    from agentlog.install.agents import get_agent
    from agentlog.install.otel_register import EDITS, arrivals, configured

    got = arrivals(data_root())
    out: dict[str, dict[str, object]] = {}
    for agent in agents:
        seen = got.get(get_agent(agent).provider) or {}
        last = seen.get("last_at") if isinstance(seen, dict) else None
        out[agent] = {"supported": agent in EDITS, "configured": configured(agent),
                      "records": seen.get("records", 0) if isinstance(seen, dict) else 0,
                      "last_at": format_us(last) if isinstance(last, int) else None}
    return out


def show_telemetry(agents: list[str]) -> None:
    """Doctor's telemetry lines: configured or not, and whether records arrived."""
    err = stderr()
    for agent, st in telemetry_states(agents).items():
        if not st["supported"]:
            continue
        where = "points at agentlog" if st["configured"] else "not pointed at agentlog (`agentlog install --otel`)"
        arrived = (f"{st['records']:,} records received, the last at {st['last_at']}" if st["last_at"]
                   else "nothing received yet (is `agentlog otel serve` running?)")
        err.print(f"telemetry: {agent}: {where}; {arrived}", markup=False, highlight=False)
