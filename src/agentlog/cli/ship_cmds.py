"""``agentlog enroll`` and ``agentlog ship``: this machine's side of the vault (docs/vault.md)."""

from __future__ import annotations

import re
import sys
from typing import Any

import click

from agentlog.cli.output import print_json, print_table, stderr
from agentlog.core.paths import data_root

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """'30s', '5m', '2h', '7d' or plain seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text or "")
    if m is None:
        raise click.BadParameter(f"{text!r} is not a duration (e.g. 30s, 5m, 2h, 7d)")
    return float(m.group(1)) * _UNITS[m.group(2)]


class Duration(click.ParamType):  # type: ignore[type-arg]
    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return parse_duration(str(value))
        except click.BadParameter as e:
            self.fail(str(e.message), param, ctx)


@click.command(name="enroll")
@click.argument("url")
@click.argument("token")
@click.option("--rotate", is_flag=True, help="Enrol again with a new machine key (replaces the current enrolment).")
@click.option("--host", "host", metavar="NAME", default=None,
              help="The name this machine enrols under (default its host name); one enrolment per name.")
@click.option("--ca", "ca", metavar="FILE", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Trust only this CA (PEM) for the vault's TLS certificate (kept; e.g. a self-signed vault).")
def enroll_cmd(url: str, token: str, rotate: bool, host: str | None, ca: str | None) -> None:
    """Enrol this machine with a vault, so `agentlog ship` can send it sessions.

    TOKEN comes from `agentlog vault admin token` (single use, one hour). The
    machine key and the vault's recipient set are kept under
    `<data root>/vault/` (0600); nothing is written unless the vault's
    recipient set is the one the token names. URL must be https://, or
    http:// to 127.0.0.1/localhost. The vault's certificate is checked against
    the system's CAs (SSL_CERT_FILE replaces them), or with --ca only against
    that file, which is kept for every later request.

    Example: agentlog enroll https://vault.example.com 3f9a...c2.Zk4hU...
    """
    from agentlog.vault.machine import enroll

    m = enroll(data_root(), url, token, rotate=rotate, host=host, ca=ca)
    click.echo(f"enrolled as {m.machine_id} ({m.host}) with {m.url}")


@click.command(name="ship")
@click.option("--every", type=Duration(), default=None, help="Keep running: a pass, then sleep this long (e.g. 30s).")
@click.option("--prune-after", type=Duration(), default=None,
              help="Remove the local files of sessions fully acknowledged by the vault and idle this long "
                   "(never a stopped or partly shipped one).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per pass.")
@click.option("--all", "show_all", is_flag=True, help="List up-to-date sessions too.")
def ship_cmd(every: float | None, prune_after: float | None, as_json: bool, show_all: bool) -> None:
    """Send every session's new frames to the vault, end-to-end encrypted.

    Frames are checked locally first: a log rewritten after shipping stops
    that session (named with the first diverging seq; never resolved
    automatically). An unreachable vault ends the pass; the next pass goes
    on from where this one stopped. Exit 1 when a session is stopped or the
    vault is unreachable (with --every, only a hard error ends it).

    Example: agentlog ship --every 30s --prune-after 7d
    """
    from agentlog.vault.ship import PassResult, loop, run_once

    root = data_root()
    consoles: list[Any] = []  # made when first needed: --json never needs one (30 ms of a pass's start)

    def progress(line: str) -> None:
        if not consoles:
            consoles.append(stderr())
        consoles[0].print(line, markup=False, highlight=False)

    def report(res: PassResult) -> None:
        if as_json:
            print_json(res.to_dict())
            sys.stdout.flush()
            return
        if res.message:
            progress(res.message)
        rows = [{"session": c.chain, "status": c.status, "shipped seq": "" if c.shipped_seq is None else c.shipped_seq,
                 "frames": c.frames, "note": c.message} for c in res.chains if show_all or c.status != "up to date"]
        for c in res.chains:
            if c.status == "stopped":
                progress(c.message)
        if rows:
            print_table(rows, ["session", "status", "shipped seq", "frames", "note"])
        idle = sum(1 for c in res.chains if c.status == "up to date")
        progress(f"{len(res.chains)} sessions: {sum(c.frames for c in res.chains)} frames shipped, {idle} up to date")

    if every is not None:
        try:
            loop(root, every, prune_after=prune_after, on_pass=report, progress=None if as_json else progress)
        except KeyboardInterrupt:
            return
    res = run_once(root, prune_after=prune_after, progress=None if as_json else progress)
    report(res)
    if res.exit_code:
        sys.exit(res.exit_code)
