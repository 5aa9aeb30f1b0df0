"""``agentlog memory …``: what we know, with its evidence (docs/memory.md)."""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from typing import Any, Iterator

import click

from agentlog.core.paths import data_root
from agentlog.cli.output import print_columns, print_json, print_table, stderr, terminal_safe


def _fail(e: Exception) -> click.ClickException:
    return click.ClickException(str(e))


class _Refused(click.ClickException):
    """A request that breaks one of the memory's rules (a bad value, form, date or id, a slug
    another memory has, a change the memory's state refuses): one line, exit 2."""

    exit_code = 2


@contextmanager
def _errors() -> Iterator[None]:
    """The library's errors as one line each: a broken rule (``InvalidMemory``) exits 2; a memory
    that is not there, or changed since (``NotFound``, ``VersionConflict``), exits 1."""
    from agentlog.memory.model import InvalidMemory
    from agentlog.memory.store import NotFound, VersionConflict

    try:
        yield
    except InvalidMemory as e:
        raise _Refused(str(e)) from None
    except (NotFound, VersionConflict) as e:
        raise _fail(e) from None


def _attrs(kind: str, pairs: tuple[str, ...]) -> dict[str, Any]:
    from agentlog.memory.model import parse_attribute

    out: dict[str, Any] = {}
    for p in pairs:
        if "=" not in p:
            raise click.BadParameter(f"{p!r} is not name=value", param_hint="--attr")
        name, value = p.split("=", 1)
        out[name.strip()] = parse_attribute(kind, name.strip(), value)
    return out


_FILE_REF = re.compile(r"^(?P<path>.+?)(?:#L(?P<start>\d+)(?:-L?(?P<end>\d+))?)?(?:@(?P<commit>[0-9a-fA-F]{7,64}))?$")


def _evidence(items: tuple[str, ...]) -> list[dict[str, Any]]:
    """``TYPE:VALUE`` each; a file as ``PATH``, ``PATH#L10``, ``PATH#L10-20``, each with an
    optional ``@COMMIT`` (``src/x.py#L10-20@abc1234``)."""
    out: list[dict[str, Any]] = []
    for item in items:
        etype, _, value = item.partition(":")
        if not value:
            raise click.BadParameter(f"{item!r} is not type:value (event:ID, attempt:ID, file:PATH[#L10-20][@COMMIT], "
                                     "url:URL, quote:TEXT)", param_hint="--evidence")
        if etype != "file":
            out.append({"type": etype, "value": value})
            continue
        m = _FILE_REF.match(value)
        assert m is not None  # (any text matches: the path alone at the least)
        ref: dict[str, Any] = {"type": "file", "path": m["path"]}
        if m["start"]:
            ref["line_start"] = int(m["start"])
            ref["line_end"] = int(m["end"] or m["start"])
        if m["commit"]:
            ref["commit"] = m["commit"].lower()
        out.append(ref)
    return out


def _show_one(m: Any, as_json: bool) -> None:
    if as_json:
        print_json(m.to_dict())
        return
    click.echo(f"{terminal_safe(m.title)}  [{m.kind}]  {m.slug}")
    click.echo(f"id {m.id}  version {m.version}  confidence {m.confidence:.2f} "
               f"(effective {m.effective_confidence:.2f}{', stale' if m.stale else ''})"
               f"{'  archived' if m.archived else ''}{'  pinned' if m.pinned else ''}")
    if m.tags:
        click.echo("tags: " + ", ".join(terminal_safe(t) for t in m.tags))
    for k, v in m.attributes.items():
        click.echo(f"{k}: {terminal_safe(v if not isinstance(v, list) else ', '.join(v))}")
    if m.content:
        click.echo("")
        click.echo(terminal_safe(m.content))
    until, allowed = m.lifetime.get("until"), m.visibility.get("allowed_actors") or []
    click.echo(f"lifetime {m.lifetime['policy']}{' until ' + terminal_safe(until) if until else ''}"
               f"  visibility {m.visibility['visibility']}"
               + (" to " + ", ".join(terminal_safe(a) for a in allowed) if allowed else ""))
    for ref in m.evidence or []:
        seen = ref.get("resolved")
        what = ""
        if seen:
            what = "  → " + ("purged: " if seen.get("purged") else "") + (seen.get("why") or seen.get("error") or ", ".join(
                f"{k} {terminal_safe(v)}" for k, v in seen.items() if v is not None))
        where = ""
        if ref["type"] == "file" and ref.get("line_start"):
            where = f"#L{ref['line_start']}" + (f"-{ref['line_end']}" if ref.get("line_end", ref["line_start"])
                                                 != ref["line_start"] else "")
        where += f"@{ref['commit']}" if ref.get("commit") else ""
        click.echo(f"evidence {ref['type']}: {terminal_safe(ref['value'] + where)}{what}")
    for relation, target in m.links or []:
        click.echo(f"link {relation} → {target}")


def _policy_options(fn: Any) -> Any:
    """--lifetime, --until, --visibility, --allow (add and edit)."""
    for option in reversed([
        click.option("--lifetime", type=click.Choice(["permanent", "standard", "until", "ephemeral"]), default=None,
                     help="How long it holds (added: standard unless said; --until implies until)."),
        click.option("--until", default=None, metavar="TIME", help="With --lifetime until: an ISO 8601 time."),
        click.option("--visibility", type=click.Choice(["shared", "private", "restricted"]), default=None,
                     help="Who may recall it (added: shared unless said; --allow implies restricted)."),
        click.option("--allow", "allowed", multiple=True, metavar="ACTOR",
                     help="With restricted: an actor allowed (repeatable)."),
    ]):
        fn = option(fn)
    return fn


@click.group(name="memory")
def memory() -> None:
    """Memories: facts, decisions, conventions, procedures and pitfalls, each with its evidence.

    Every change is an event in agentlog's own hash-chained memory log
    (`agentlog verify` checks it), folded into a small SQLite read model.
    """


@memory.command(name="add")
@click.argument("kind")
@click.argument("title")
@click.option("--content", default="", help="The memory's text (markdown).")
@click.option("--attr", "attrs", multiple=True, metavar="NAME=VALUE", help="An attribute of its kind (repeatable).")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--evidence", "evidence", multiple=True, metavar="TYPE:VALUE",
              help="event:ID, attempt:ID, session:ID, tool_call:ID (checked to exist), file:PATH, url:URL, quote:TEXT.")
@click.option("--slug", default=None, help="Its slug (default: from the title and id; refused if another memory has it).")
@click.option("--pin", "pinned", is_flag=True, help="Pin it (listed first).")
@_policy_options
@click.option("--json", "as_json", is_flag=True, help="Print the memory as JSON.")
def add_cmd(kind: str, title: str, content: str, attrs: tuple[str, ...], tags: tuple[str, ...],
            evidence: tuple[str, ...], slug: str | None, pinned: bool, lifetime: str | None, until: str | None,
            visibility: str | None, allowed: tuple[str, ...], as_json: bool) -> None:
    """Add a memory of KIND (fact, decision, convention, procedure, pitfall, …) titled TITLE.

    The kind's main attribute (a fact's statement, a decision's chosen, a
    convention's rule …) defaults to the content, else the title, and the
    command says so.

    Example: agentlog memory add fact "The API runs on port 8080" --tag api
    """
    from agentlog.memory import service
    from agentlog.memory.model import with_main_attribute

    with _errors():
        given, note = with_main_attribute(kind, title, content, _attrs(kind, attrs))
        m = service.create(data_root(), kind, title, content=content, attributes=given, tags=list(tags),
                           evidence=_evidence(evidence), slug=slug, pinned=pinned,
                           lifetime=lifetime or ("until" if until else "standard"), until=until,
                           visibility=visibility or ("restricted" if allowed else "shared"),
                           allowed_actors=list(allowed) or None)
    if note:  # said once it worked (a refusal stays one line)
        click.echo(note, err=True)
    _show_one(m, as_json)


_KIND = click.Choice(["fact", "preference", "person", "organization", "project", "skill", "goal", "contact", "event",
                      "location", "asset", "relationship", "decision", "convention", "procedure", "pitfall"])


@memory.command(name="list")
@click.option("--kind", type=_KIND, default=None, help="Only this kind.")
@click.option("--tag", default=None, help="Only memories with this tag.")
@click.option("--archived", is_flag=True, help="Include archived memories.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(0, 2**62), default=0, help="Skip this many (the next page).")
@click.option("--json", "as_json", is_flag=True, help="Print the memories as JSON.")
def list_cmd(kind: str | None, tag: str | None, archived: bool, limit: int, offset: int, as_json: bool) -> None:
    """List memories, pinned first, then the most recently changed."""
    from agentlog.memory import service

    ms = service.list_memories(data_root(), kind=kind, tag=tag, include_archived=archived, limit=limit,
                               offset=offset)
    if as_json:
        print_json([m.to_dict() for m in ms])
        return
    if not ms:
        click.echo("no memories", err=True)
        return
    print_columns([{"slug": m.slug, "kind": m.kind, "title": m.title, "confidence": f"{m.effective_confidence:.2f}"
                    + (" stale" if m.stale else "") + (" doubtful" if m.doubtful else ""), "tags": ", ".join(m.tags)} for m in ms],
                  ["slug", "kind", "title", "confidence", "tags"])


@memory.command(name="show")
@click.argument("ident")
@click.option("--json", "as_json", is_flag=True, help="Print the memory as JSON.")
def show_cmd(ident: str, as_json: bool) -> None:
    """One memory (by id, id prefix or slug): its fields, its effective confidence, its
    evidence resolved to what was recorded (an attempt's outcome, an event's time), its
    links and its history."""
    from agentlog.memory import service

    with _errors():
        m = service.get(data_root(), ident)
        m.evidence = service.resolve_evidence(data_root(), m.evidence or [])
        changes = service.history(data_root(), m.id)
    from agentlog.cli.memory_truth_cmds import echo_explanation, explanation

    if as_json:
        print_json({**m.to_dict(), "history": changes, "confidence_factors": explanation(m)})
        return
    _show_one(m, False)
    echo_explanation(m)
    click.echo("")
    for h in changes:
        via = f" (proposal {h['proposal_id'][:13]})" if h["proposal_id"] else ""
        click.echo(f"v{h['version']}  {h['change']}  by {h['actor']}{via}")


@memory.command(name="search")
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@click.option("--mode", type=click.Choice(["lexical", "semantic", "hybrid"]), default=None,
              help="lexical (words), semantic (meaning) or hybrid (both; the default with the 'semantic' extra).")
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
def search_cmd(query: str, limit: int, mode: str | None, as_json: bool) -> None:
    """Memories matching QUERY's words (all of them; `word*` for a prefix) and, with the
    'semantic' extra, its meaning; ranked by relevance times effective confidence.

    Example: agentlog memory search "how do we format python code"
    """
    from agentlog.memory import service

    with _errors():
        hits = service.search(data_root(), query, limit=limit, mode=mode)
    if as_json:
        print_json([{**m.to_dict(), "score": s} for m, s in hits])
        return
    if not hits:
        click.echo("no memory matches", err=True)
        return
    print_columns([{"slug": m.slug, "kind": m.kind, "title": m.title, "score": f"{s:.3f}"} for m, s in hits],
                  ["slug", "kind", "title", "score"])


def _simple(name: str, doc: str, fn_name: str, **extra: Any) -> click.Command:
    @click.command(name=name, help=doc)
    @click.argument("ident")
    @click.option("--version", "expected", type=int, default=None,
                  help="Refuse if the memory is no longer at this version (another change came first).")
    @click.option("--json", "as_json", is_flag=True, help="Print the memory as JSON.")
    def cmd(ident: str, expected: int | None, as_json: bool) -> None:
        from agentlog.memory import service

        with _errors():
            m = getattr(service, fn_name)(data_root(), ident, expected_version=expected, **extra)
        _show_one(m, as_json)

    return cmd


memory.add_command(_simple("confirm", "Confirm a memory: its confidence moves toward 1.", "confirm"))
memory.add_command(_simple("contradict", "Contradict a memory: its confidence moves toward 0.", "contradict"))
memory.add_command(_simple("archive", "Archive a memory (hidden from listings and search; restorable).", "archive"))
memory.add_command(_simple("restore", "Restore an archived memory.", "archive", restore=True))


@memory.command(name="delete")
@click.argument("ident")
@click.option("--purge", "for_real", is_flag=True,
              help="Delete for real: purge its content from the log, the store and the read model (hashes kept).")
@click.option("--dry-run", is_flag=True, help="With --purge: say what would be purged; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="With --purge: do not ask (required when not on a terminal).")
@click.option("--version", "expected", type=int, default=None,
              help="Refuse if the memory is no longer at this version (another change came first).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def delete_cmd(ident: str, for_real: bool, dry_run: bool, yes: bool, expected: int | None, as_json: bool) -> None:
    """Delete a memory. Without --purge, a tombstone: it leaves every listing and
    search, its events stay in the log (undo and history still work). With
    --purge, every frame of the memory log that mentions it (its events, the
    proposals that created or changed it) is purged as `agentlog purge` does —
    same seq and hash, so verify still proves the chain — its rows leave the
    store, and the read model is rebuilt; other memories a purged proposal
    also changed are restored exactly."""
    from agentlog.memory import service
    from agentlog.operations.memory_purge import purge_memory
    from agentlog.memory.store import NotFound
    from agentlog.operations.purge import PurgeBusy

    root = data_root()
    if not for_real:
        if dry_run or yes:
            raise click.UsageError("--dry-run and --yes go with --purge")
        with _errors():
            m = service.delete(root, ident, expected_version=expected)
        _show_one(m, as_json)
        return
    try:
        plan = purge_memory(root, ident, dry_run=True)
        if not dry_run and not yes:
            if not sys.stdin.isatty():
                raise click.UsageError("purging a memory is irreversible: pass --yes (not on a terminal)")
            click.confirm(f"purge memory {plan.slug} ({plan.frames} frames"
                          f"{', restating ' + str(len(plan.restated)) + ' other memories' if plan.restated else ''})?",
                          abort=True)
        done = plan if dry_run else purge_memory(root, ident)
    except NotFound as e:
        raise _fail(e) from None
    except PurgeBusy as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        print_json(done.to_dict())
    else:
        verb = "would purge" if dry_run else "purged"
        stderr().print(f"{verb} memory {terminal_safe(done.slug)}: {done.frames} frames"
                       + (f", {len(done.restated)} other memories restated" if done.restated else ""))


@memory.command(name="rebuild")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
def rebuild_cmd(as_json: bool) -> None:
    """Rebuild the memory read model from its log."""
    from agentlog.memory.store import rebuild

    n = rebuild(data_root())
    if as_json:
        print_json({"events": n})
    else:
        stderr().print(f"replayed {n} memory events")


# -- proposals ------------------------------------------------------------------------------


def _proposal_line(p: Any) -> dict[str, Any]:
    return {"id": p.id, "status": p.status, "by": p.actor, "title": p.title, "changes": len(p.changes)}


@memory.command(name="propose")
@click.option("--title", required=True, help="What the proposal is about.")
@click.option("--note", default=None, help="Why (shown when it is reviewed).")
@click.option("--file", "path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A JSON list of changes ({op: create|edit|confirm|contradict|add_evidence|link|unlink|archive|delete, …}).")
@click.option("--change", "inline", multiple=True, metavar="JSON", help="One change as JSON (repeatable).")
@click.option("--actor", type=click.Choice(["agent", "import", "person"]), default="agent", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the proposal as JSON.")
def propose_cmd(title: str, note: str | None, path: str | None, inline: tuple[str, ...], actor: str,
                as_json: bool) -> None:
    """Open a proposal: changes a person reviews and approves, rejects or undoes later."""
    import json

    from agentlog.core.jsonio import read_json
    from agentlog.memory import proposals
    from agentlog.memory.model import InvalidMemory
    from agentlog.memory.store import NotFound

    changes: list[Any] = []
    try:
        if path:
            loaded = read_json(path)
            changes.extend(loaded if isinstance(loaded, list) else [loaded])
        changes.extend(json.loads(c) for c in inline)
    except (OSError, ValueError) as e:
        raise click.BadParameter(f"changes are not JSON: {e}") from None
    try:
        p = proposals.open_proposal(data_root(), changes, title=title, note=note, actor=actor)
    except (InvalidMemory, NotFound) as e:
        raise _fail(e) from None
    if as_json:
        print_json(p.to_dict())
    else:
        click.echo(f"proposal {p.id} opened ({len(p.changes)} changes): `agentlog memory review {p.id[:13]}`")


@memory.command(name="proposals")
@click.option("--status", type=click.Choice(["open", "merged", "rejected", "undone", "all"]), default="open",
              show_default=True)
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the proposals as JSON.")
def proposals_cmd(status: str, limit: int, as_json: bool) -> None:
    """List proposals, newest first."""
    from agentlog.memory import proposals

    ps = proposals.list_proposals(data_root(), None if status == "all" else status, limit)
    if as_json:
        print_json([p.to_dict() for p in ps])
    elif not ps:
        stderr().print(f"no {'' if status == 'all' else status + ' '}proposals")
    else:
        print_table([_proposal_line(p) for p in ps], ["id", "status", "by", "title", "changes"])


def _json_change(text: str, option: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError as e:
        raise click.BadParameter(f"{text!r} is not JSON: {e}", param_hint=option) from None


@memory.command(name="review")
@click.argument("pid", required=False)
@click.option("--doubtful", is_flag=True,
              help="Instead: list the doubtful memories (their evidence changed, or activity contradicts them), "
                   "each with why.")
@click.option("--limit", type=click.IntRange(1, 10000), default=100, show_default=True, help="With --doubtful: at most.")
@click.option("--title", default=None, help="Edit: a new title.")
@click.option("--note", default=None, help="Edit: a new note ('' clears it).")
@click.option("--drop", "drops", multiple=True, type=click.IntRange(1), metavar="N",
              help="Edit: drop change N (its #N in the review; repeatable).")
@click.option("--replace", "replaces", multiple=True, metavar="N=JSON",
              help="Edit: replace change N by this change (repeatable).")
@click.option("--add", "adds", multiple=True, metavar="JSON", help="Edit: add this change after the others (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the proposal and its diff as JSON.")
def review_cmd(pid: str | None, doubtful: bool, limit: int, title: str | None, note: str | None,
               drops: tuple[int, ...], replaces: tuple[str, ...], adds: tuple[str, ...], as_json: bool) -> None:
    """What merging proposal PID would change, against the memories as they are now;
    or, with --doubtful, the memories a person should look at (agentlog memory check
    finds them; keep, edit or archive each: the rules' proposals are in
    agentlog memory proposals).

    With --title, --note, --drop, --replace or --add, a person edits the open
    proposal first (every change it then holds is checked again against the
    memories now; the edit is recorded in the memory log), then sees the result.

    Example: agentlog memory review --doubtful
    """
    from agentlog.memory import proposals
    from agentlog.memory.model import InvalidMemory
    from agentlog.memory.store import NotFound

    if doubtful == (pid is not None):
        raise click.UsageError("give a proposal id, or --doubtful (not both)")
    if doubtful:
        from agentlog.cli.memory_truth_cmds import print_doubtful

        print_doubtful(limit, as_json)
        return
    assert pid is not None
    replaced: dict[int, Any] = {}
    for item in replaces:
        number, sep, change = item.partition("=")
        if not sep or not number.strip().isdigit():
            raise click.BadParameter(f"{item!r} is not N=JSON", param_hint="--replace")
        replaced[int(number)] = _json_change(change, "--replace")
    added = [_json_change(a, "--add") for a in adds]
    editing = title is not None or note is not None or bool(drops or replaced or added)
    try:
        p = proposals.get(data_root(), pid)
        if editing:
            edited = proposals.edit_proposal(data_root(), p.id, title=title, note=note, drop=drops, replace=replaced,
                                             add=added)
            click.echo(f"proposal {p.id} {'edited' if edited.updated_at != p.updated_at else 'unchanged'}", err=True)
            p = edited
        lines = proposals.diff(data_root(), p.id)
    except (InvalidMemory, NotFound, proposals.StaleProposal) as e:
        raise _fail(e) from None
    if as_json:
        print_json({**p.to_dict(), "diff": lines})
        return
    click.echo(f"{p.id}  {p.status}  by {p.actor}: {terminal_safe(p.title)}")
    if p.note:
        click.echo(terminal_safe(p.note))
    for line in lines:
        click.echo(terminal_safe(line))


def _decide(name: str, doc: str) -> click.Command:
    @click.command(name=name, help=doc)
    @click.argument("pid")
    @click.option("--reason", default=None, help="Why (rejections).")
    @click.option("--json", "as_json", is_flag=True, help="Print the proposal as JSON.")
    def cmd(pid: str, reason: str | None, as_json: bool) -> None:
        from agentlog.memory import proposals
        from agentlog.memory.model import InvalidMemory
        from agentlog.memory.store import NotFound

        try:
            if name == "reject":
                p = proposals.reject(data_root(), pid, reason=reason)
            else:
                p = getattr(proposals, name)(data_root(), pid)
        except (InvalidMemory, NotFound, proposals.StaleProposal) as e:
            raise _fail(e) from None
        if as_json:
            print_json(p.to_dict())
        else:
            click.echo(f"proposal {p.id}: {p.status}")

    return cmd


memory.add_command(_decide("approve", "Merge proposal PID: all its changes, or none if a memory changed since."))
memory.add_command(_decide("reject", "Reject proposal PID (--reason says why)."))
memory.add_command(_decide("undo", "Undo merged proposal PID: its memories as they were (refused if changed since)."))


@memory.command(name="export")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
def export_cmd(directory: str, as_json: bool) -> None:
    """Write every memory as markdown, the events as NDJSON and a manifest with checksums
    (the same memory exports to the same bytes)."""
    from agentlog.memory.exchange import export

    try:
        manifest = export(data_root(), directory)
    except OSError as e:
        raise _fail(OSError(f"cannot write the export to {directory}: {e.strerror or e}")) from None
    if as_json:
        print_json(manifest)
    else:
        stderr().print(f"exported {manifest['memories']} memories and {manifest['events']} events to {directory}")


@memory.command(name="import")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--restore", is_flag=True, help="Replay the export's events into this empty memory (the same state).")
@click.option("--from", "source", type=click.Choice(["agentlog", "engram"]), default="agentlog", show_default=True,
              help="Whose export DIRECTORY is (engram: its metadata/memories.ndjson, else its markdown files).")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
def import_cmd(directory: str, restore: bool, source: str, as_json: bool) -> None:
    """Import an export: --restore replays it into an empty memory; otherwise one proposal
    creating its memories is opened for review (also for an engram export, --from engram,
    whose loose values are converted or kept aside, memory by memory, as the summary says)."""
    from agentlog.memory import exchange

    out: dict[str, Any]
    with _errors():
        try:
            if source == "engram":
                if restore:
                    raise click.UsageError("--restore replays agentlog's own exports; an engram export opens a proposal")
                from agentlog.memory.engram import import_engram

                got = import_engram(data_root(), directory)
                out = {"proposal": got.proposal.id, "changes": len(got.proposal.changes), "memories": got.memories,
                       "report": got.report}
            elif restore:
                out = {"restored_events": exchange.restore(data_root(), directory)}
            else:
                p = exchange.import_as_proposal(data_root(), directory)
                out = {"proposal": p.id, "changes": len(p.changes), "memories": len(p.changes)}
        except exchange.ExchangeError as e:
            raise _fail(e) from None
    if as_json:
        print_json(out)
        return
    err = stderr()
    if "restored_events" in out:
        err.print(f"restored {out['restored_events']} events")
        return
    for entry in out.get("report", []):  # (one line each, not wrapped: a summary to grep)
        click.echo(f"{terminal_safe(str(entry['title'] or entry['at']))} ({terminal_safe(str(entry['id']))}, "
                   f"{entry['at'] or 'a link'}): " + terminal_safe("; ".join(entry["notes"])), err=True)
    click.echo(f"proposal {out['proposal']} opened with {out['memories']} memories: "
               f"`agentlog memory review {out['proposal'][:13]}`", err=True)


@memory.command(name="suggest")
@click.option("--dry-run", is_flag=True, help="Show what would be proposed; open nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the suggestions as JSON.")
@click.option("--all-projects", is_flag=True, help="Every project (what suggestions always read; accepted as the "
                                                   "other listings accept it).")
def suggest_cmd(dry_run: bool, as_json: bool, all_projects: bool) -> None:
    """Propose memories from the recorded history, with their evidence (no model call):
    a command that kept failing and then worked becomes a procedure, a file whose edits
    keep failing the same way a pitfall. They stay proposals until a person approves."""
    from agentlog.memory.model import InvalidMemory
    from agentlog.memory.suggest import suggest

    try:
        got = suggest(data_root(), dry_run=dry_run)
    except InvalidMemory as e:
        raise _fail(e) from None
    rows = [s if isinstance(s, dict) else {"id": s.id, "title": s.title, "note": s.note} for s in got]
    if as_json:
        print_json([{k: v for k, v in r.items() if k != "changes"} for r in rows])
    elif not rows:
        stderr().print("nothing new to suggest")
    else:
        for r in rows:
            click.echo(f"{'would propose' if dry_run else 'proposed ' + r['id'][:13]}: {terminal_safe(r['title'])} "
                       f"({terminal_safe(r['note'])})")


@memory.command(name="edit")
@click.argument("ident")
@click.option("--title", default=None, help="A new title.")
@click.option("--content", default=None, help="New content (markdown).")
@click.option("--attr", "attrs", multiple=True, metavar="NAME=VALUE", help="Set an attribute (repeatable).")
@click.option("--tag", "tags", multiple=True, help="The tags, replacing the old ones (repeatable).")
@click.option("--slug", default=None, help="A new slug (refused if another memory has it).")
@click.option("--evidence", "evidence", multiple=True, metavar="TYPE:VALUE", help="Add evidence (repeatable).")
@click.option("--pin/--unpin", "pinned", default=None, help="Pin it (listed first), or unpin it.")
@_policy_options
@click.option("--version", "expected", type=int, default=None,
              help="Refuse if the memory is no longer at this version (another change came first).")
@click.option("--json", "as_json", is_flag=True, help="Print the memory as JSON.")
def edit_cmd(ident: str, title: str | None, content: str | None, attrs: tuple[str, ...], tags: tuple[str, ...],
             slug: str | None, evidence: tuple[str, ...], pinned: bool | None, lifetime: str | None,
             until: str | None, visibility: str | None, allowed: tuple[str, ...], expected: int | None,
             as_json: bool) -> None:
    """Change a memory's title, content, attributes, tags, slug, pin, lifetime or visibility,
    or add evidence."""
    from agentlog.memory import service

    refs = _evidence(evidence)
    with _errors():
        m = service.get(data_root(), ident)
        m = service.edit(data_root(), m.id, expected_version=expected, title=title, content=content,
                         attributes=_attrs(m.kind, attrs) if attrs else None, tags=list(tags) if tags else None,
                         slug=slug, pinned=pinned, lifetime=lifetime, until=until, visibility=visibility,
                         allowed_actors=list(allowed) or None)
        for ref in refs:
            m = service.add_evidence(data_root(), m.id, ref)
    _show_one(m, as_json)


@memory.command(name="link")
@click.argument("ident")
@click.argument("relation", type=click.Choice(["about", "involves", "part_of", "owned_by", "works_at", "located_in",
                                               "relates_to", "supersedes", "derived_from", "contradicts"]))
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="Print the memory as JSON.")
def link_cmd(ident: str, relation: str, target: str, as_json: bool) -> None:
    """Link memory IDENT to TARGET (e.g. `agentlog memory link new-way supersedes old-way`)."""
    from agentlog.memory import service

    with _errors():
        m = service.link(data_root(), ident, relation, target)
    _show_one(m, as_json)


@memory.command(name="unlink")
@click.argument("ident")
@click.argument("relation")
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="Print the memory as JSON.")
def unlink_cmd(ident: str, relation: str, target: str, as_json: bool) -> None:
    """Remove the link RELATION from memory IDENT to TARGET (its id, id prefix or slug; the id of
    a deleted memory too) — e.g. the link that keeps a proposal from being undone."""
    from agentlog.memory import service

    with _errors():
        m = service.unlink(data_root(), ident, relation, target)
    _show_one(m, as_json)


def _register() -> None:
    from agentlog.cli.memory_truth_cmds import check_cmd, keep_cmd

    memory.add_command(check_cmd)
    memory.add_command(keep_cmd)


_register()
