"""``agentlog correct`` and ``agentlog retract``: a person's word on what was recorded.

Both append one event to the ``agentlog``/``meta`` log (see
:mod:`agentlog.operations.corrections`); nothing recorded changes, the
projection applies them on the next read.
"""

from __future__ import annotations

from typing import Any

import click

from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, stdout


def _fail(e: Exception) -> click.ClickException:
    from agentlog.operations.corrections import MetaError

    if isinstance(e, MetaError) and e.usage:
        return click.UsageError(str(e))
    return click.ClickException(str(e))


def _at(value: str | None) -> int | None:
    from agentlog.cli.scope_opts import parse_time

    return parse_time(value, "--at")


def _confirm(result: Any, as_json: bool) -> None:
    from rich.text import Text

    d = result.to_dict()
    if as_json:
        print_json(d)
        return
    attrs = d["attrs"]
    line = Text("recorded " if result.written else "would record (dry run) ")
    line.append(d["kind"], style="bold")
    line.append(f" {d['event_id']}\n  {d['target_type'].replace('_', ' ')} {d['target']}: ")
    before = d["before"]
    if d["kind"] == "correction":
        ctype = attrs["correction_type"]
        if ctype == "attempt_outcome":
            was = before.get("outcome")
            if before.get("failure_class"):
                was = f"{was} ({before['failure_class']})"
            now = attrs["outcome"] + (f" ({attrs['failure_class']})" if attrs.get("failure_class") else "")
            line.append(f"outcome {was} → {now}")
        elif ctype == "attempt_note":
            line.append("note attached")
        else:
            line.append("objective ")
            line.append(repr(_clip(before.get("objective"))))
            line.append(" → ")
            line.append(repr(_clip(d["note"])) if d["note"] is not None else "(text not kept: metadata_only)")
    else:
        line.append(f"retracted ({attrs['reason']})")
        if d["target_type"] == "attempt" and before.get("supersedes"):
            line.append(f"; {before['supersedes'][:12]} is no longer superseded by it")
    if d["note"] is not None and not (d["kind"] == "correction" and attrs["correction_type"] == "turn_objective"):
        line.append("\n  note: ")
        line.append(_clip(d["note"]) or "")
    if attrs.get("redactions"):
        line.append(f"\n  {attrs['redactions']} secret(s) redacted from the note")
    stdout().print(line, soft_wrap=True)


def _clip(text: str | None, limit: int = 80) -> str | None:
    if text is None:
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@click.command(name="correct")
@click.argument("target", metavar="ID")
@click.option("--outcome", type=click.Choice(["succeeded", "failed", "abandoned", "superseded"]),
              help="The attempt's real outcome.")
@click.option("--class", "failure_class", metavar="CLASS",
              help="With --outcome: the failure class (a token such as string_mismatch).")
@click.option("--note", help="A note on the attempt (alone: attaches the note; with --outcome: says why).")
@click.option("--objective", help="The turn's real objective (ID is a turn).")
@click.option("--at", "at", metavar="TIME", help="When the correction applies from (default: now).")
@click.option("--dry-run", is_flag=True, help="Check and show the event; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def correct_cmd(target: str, outcome: str | None, failure_class: str | None, note: str | None,
                objective: str | None, at: str | None, dry_run: bool, as_json: bool) -> None:
    """Correct what the projection inferred about an attempt or a turn.

    \b
      agentlog correct att_0f3c9a1b --outcome failed --class wrong_fix --note "tests passed, bug remained"
      agentlog correct att_0f3c9a1b --note "flaky network, not the change"
      agentlog correct trn_62df1267 --objective "Fix the crash on empty input"

    ID is an id or an unambiguous prefix. Writes one correction event (the
    latest correction of a target wins; what was inferred is kept). Exit 1
    when ID names no attempt/turn or several, 2 for a usage error.
    """
    from agentlog.operations.corrections import MetaError, record_correction

    text: str | None
    if objective is not None:
        if outcome or failure_class or note:
            raise click.UsageError("--objective goes alone (it corrects a turn, not an attempt)")
        ctype, text = "turn_objective", objective
    elif outcome is not None:
        ctype, text = "attempt_outcome", note
    elif failure_class is not None:
        raise click.UsageError("--class needs --outcome")
    elif note is not None:
        ctype, text = "attempt_note", note
    else:
        raise click.UsageError("say what to correct: --outcome, --note or --objective")
    try:
        result = record_correction(data_root(), correction_type=ctype, target=target, outcome=outcome,
                                   failure_class=failure_class, note=text, at_us=_at(at), dry_run=dry_run)
    except MetaError as e:
        raise _fail(e) from None
    _confirm(result, as_json)


@click.command(name="retract")
@click.argument("target", metavar="ID")
@click.option("--reason", required=True,
              type=click.Choice(["benchmark", "test", "duplicate", "mistaken_import", "privacy", "revoked", "other"]),
              help="Why it should not count.")
@click.option("--note", help="More about why.")
@click.option("--type", "target_type", type=click.Choice(["session", "event", "attempt"]),
              help="What ID is (default: from its prefix, else whatever it names).")
@click.option("--at", "at", metavar="TIME", help="When the retraction is dated (default: now).")
@click.option("--dry-run", is_flag=True, help="Check and show the event; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def retract_cmd(target: str, reason: str, note: str | None, target_type: str | None, at: str | None,
                dry_run: bool, as_json: bool) -> None:
    """Retract a session, an event or an attempt: hide it from every view.

    \b
      agentlog retract ses_a4fd1c55 --reason test
      agentlog retract att_0f3c9a1b --reason mistaken_import --note "replayed twice"

    Nothing is deleted (the logs are append-only; `agentlog purge` removes
    content): the projection leaves a retracted session out, re-projects as
    if a retracted event had not happened, and drops a retracted attempt (an
    attempt it superseded counts as failed again). A retraction cannot be
    undone. Exit 1 when ID names nothing, several things or something
    already retracted; 2 for a usage error.
    """
    from agentlog.operations.corrections import MetaError, record_retraction

    try:
        result = record_retraction(data_root(), target_type=target_type, target=target, reason=reason, note=note,
                                   at_us=_at(at), dry_run=dry_run)
    except MetaError as e:
        raise _fail(e) from None
    _confirm(result, as_json)
