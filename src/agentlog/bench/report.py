"""``results.md`` from ``results.json``: the machine, every step's tables, the
anchors side by side, our targets, and "Slow and unflattering", all computed
from the results object (nothing in the report is written by hand)."""

from __future__ import annotations

from typing import Any

from agentlog.bench.anchors import Comparison, TargetCheck, check_targets, compare, load_anchors, step_metric
from agentlog.bench.common import markdown_table

GIB = 1 << 30
MIB = 1 << 20


def fmt_bytes(v: float | None) -> str:
    if v is None:
        return "—"
    if v >= GIB:
        return f"{v / GIB:,.2f} GiB"
    if v >= MIB:
        return f"{v / MIB:,.2f} MiB"
    if v >= 100_000:
        return f"{v / 1024:,.1f} KiB"
    return f"{v:,.0f} B"


def fmt_secs(v: float | None) -> str:
    if v is None:
        return "—"
    if v >= 120:
        m, s = divmod(v, 60)
        return f"{int(m)} min {s:.0f} s"
    if v >= 1:
        return f"{v:,.2f} s"
    if v >= 0.001:
        return f"{v * 1000:,.1f} ms"
    return f"{v * 1e6:,.0f} µs"


def fmt_value(v: float | None, unit: str) -> str:
    if v is None:
        return "—"
    if unit == "ms":
        if v >= 1000:
            return fmt_secs(v / 1000)
        if v < 1:
            return f"{v * 1000:,.0f} µs" if v >= 0.01 else f"{v * 1000:,.1f} µs"
        return f"{v:,.2f} ms"
    if unit == "µs":
        return fmt_value(v / 1000, "ms")
    if unit == "s":
        return fmt_secs(v)
    if unit == "B":
        return fmt_bytes(v)
    if unit == "MB/s":
        return f"{v:,.1f} MB/s"
    if unit == "events/s":
        return f"{v:,.0f} events/s"
    if unit == "×":
        return f"{v:,.2f}×"
    if unit == "points":
        return f"{v:,.2f} points"
    if unit == "share":
        return f"{v * 100:,.1f} %"
    return f"{v:,.4g}" + (f" {unit}" if unit else "")


def _target_text(t: dict[str, Any]) -> str:
    if t["op"] == "between":
        lo, hi = t["value"]
        return f"{fmt_value(lo, t['unit'])} to {fmt_value(hi, t['unit'])}"
    return f"{t['op']} {fmt_value(t['value'], t['unit'])}"


def _peak(entry: dict[str, Any]) -> float | None:
    rss = entry.get("peak_rss") or {}
    vals = [v for k, v in rss.items() if k in ("ru_maxrss_bytes", "vmhwm_bytes") and v]
    return max(vals) if vals else None


def machine_section(m: dict[str, Any]) -> list[str]:
    disk = m.get("disk") or {}
    git = m.get("git") or {}
    disk_text = ", ".join(
        x
        for x in [
            f"{fmt_bytes(disk['size_bytes'])} ({fmt_bytes(disk['free_bytes'])} free)" if "size_bytes" in disk else "",
            f"{disk.get('fstype')} on {disk.get('device')}" if disk.get("device") else "",
            f"model {disk['model']}" if disk.get("model") else "",
            f"driver {disk['driver']}" if disk.get("driver") else "",
            f"rotational flag {disk['rotational_flag']}" if disk.get("rotational_flag") is not None else "",
            f"holding {disk.get('path')}",
        ]
        if x
    )
    if git.get("commit"):
        tree = "clean" if git.get("clean") else f"with {git.get('changed_paths')} uncommitted change(s)"
        commit = f"{git.get('short')} ({tree})"
    else:
        commit = git.get("note") or "unknown"
    libs = ", ".join(f"{k} {v}" for k, v in (m.get("libraries") or {}).items() if v)
    rows: list[list[Any]] = [
        ["CPU", m.get("cpu_model")],
        ["Logical CPUs", f"{m.get('logical_cpus')} ({m.get('usable_cpus')} usable by this process)"],
        ["Memory", fmt_bytes(m.get("memory_bytes"))],
        ["Disk", disk_text],
        ["OS", f"{m.get('os')}, kernel {m.get('kernel')} ({m.get('arch')})"],
        ["Python", f"{m.get('python_full')} ({m.get('implementation')})"],
        ["Libraries", libs],
        ["Commit", commit],
        ["Load average at start", ", ".join(f"{x:.2f}" for x in m["load_avg"]) if m.get("load_avg") else "—"],
    ]
    return ["## Machine", "", markdown_table(["Item", "Value"], rows), ""]


def steps_summary(results: dict[str, Any]) -> list[str]:
    rows: list[list[Any]] = []
    for s in results.get("steps", []):
        rss = s.get("peak_rss") or {}
        rows.append(
            [
                f"`{s['name']}`",
                s.get("status"),
                fmt_secs(s.get("wall_secs")),
                " / ".join(fmt_secs(s[k]) if s.get(k) is not None else "—" for k in ("disk_flush_secs", "disk_settle_secs")),
                fmt_bytes(rss.get("ru_maxrss_bytes")),
                fmt_bytes(rss.get("vmhwm_bytes")),
                fmt_bytes(rss.get("observed_bytes")) if rss.get("observed_bytes") else "—",
                fmt_bytes(rss.get("observed_group_bytes")) if rss.get("observed_group_bytes") else "—",
                s.get("reason") or "",
            ]
        )
    return [
        "## Steps",
        "",
        markdown_table(
            ["Step", "Status", "Wall", "Disk flush / settle before", "Peak RSS (getrusage)", "Peak RSS (VmHWM)", "Observed by parent", "Observed, with its children", "Note"],
            rows,
        ),
        "",
        "Wall: the whole child process, interpreter start included. Disk flush / settle before: the parent's `sync` "
        "before the step starts, then its wait until no write or discard completes or is in flight for 0.6 s (at most "
        "30 s; untimed: the writeback and discards of the step before are not charged to it). Peak RSS: the child's own "
        "`getrusage(RUSAGE_SELF).ru_maxrss` and `VmHWM` at exit; observed: the parent's polling of `VmRSS` every "
        "250 ms, for the child alone and summed over its process group (the hooks and commands a step spawns; shared "
        "pages count once per process there).",
        "",
        *_scratch_note(results),
        *_bytecode_note(results),
    ]


def _bytecode_note(results: dict[str, Any]) -> list[str]:
    """How the steps' Pythons had their bytecode (a run before this note did not say)."""
    bytecode = results.get("run", {}).get("bytecode")
    if not bytecode:
        return []
    forbade = (" (the environment that started the run set `PYTHONDONTWRITEBYTECODE`: dropped for the steps)"
               if bytecode.get("caller_forbade_writing") else "")
    return ["Bytecode: the steps and the processes they start compile each module once per run into a scratch cache "
            f"(`PYTHONPYCACHEPREFIX`), as an installed package has its bytecode; a process's first import of a module "
            f"compiles it, later processes read it{forbade}.", ""]


def _scratch_note(results: dict[str, Any]) -> list[str]:
    """Where the steps' scratch directories were made (spread by the file system or not)."""
    spread = [s["name"] for s in results.get("steps", []) if (s.get("result") or {}).get("scratch_spread")]
    plain = [s["name"] for s in results.get("steps", []) if (s.get("result") or {}).get("scratch_spread") is False]
    if not spread and not plain:
        return []
    text = "Scratch directories: "
    if spread:
        text += (f"spread over the file system's block groups ({', '.join(spread)}: ext4's top-directory flag, so no "
                 "step creates files where an earlier one just removed thousands — ext4 without a journal skips "
                 "recently freed inodes one by one)")
    if plain:
        text += ("; " if spread else "") + f"where the file system puts them ({', '.join(plain)}: it has no such flag)"
    return [text + ".", ""]


def step_sections(results: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for s in results.get("steps", []):
        out += [f"## Step `{s['name']}`", ""]
        if s.get("description"):
            out += [s["description"], ""]
        result = s.get("result")
        if not result:
            out += [f"Not run: {s.get('reason') or s.get('status')}.", ""]
            tail = (s.get("process") or {}).get("output_tail")
            if tail:
                out += ["Last output:", "", "```", tail.strip()[-1500:], "```", ""]
            continue
        if s.get("status") == "capped":
            out += [f"**Capped**: {s.get('reason')}", ""]
        for table in result.get("tables") or []:
            out += [f"### {table['title']}", "", markdown_table(table["columns"], table["rows"]), ""]
            if table.get("note"):
                out += [table["note"], ""]
    return out


def _machine_line(results: dict[str, Any]) -> str:
    m = results.get("machine") or {}
    return f"{m.get('logical_cpus')}-core {m.get('cpu_model') or 'machine'} with {fmt_bytes(m.get('memory_bytes'))}"


def anchors_section(results: dict[str, Any], comps: list[Comparison], anchors: dict[str, Any]) -> list[str]:
    machines = anchors.get("machines", {})
    out = [
        "## Anchors side by side",
        "",
        "Their figures come from other machines — attemptdb's from "
        f"{machines.get('attemptdb')}; nd7's from {machines.get('nd7')}; engram's from {machines.get('engram')} — "
        f"while ours come from this {_machine_line(results)}. A ratio here compares machines as much as code. "
        "Ratio: ours ÷ theirs; the verdict accounts for which direction is better. Sources are files under "
        "`shared/` (the seeds) or the issue that quotes the figure.",
        "",
    ]
    measured = [c for c in comps if c.state == "measured"]
    elsewhere = [c for c in comps if c.state in ("not_run", "step_failed", "no_metric")]
    if measured:
        rows = [
            [
                c.anchor["project"],
                c.anchor["what"],
                c.anchor["published"],
                fmt_value(c.ours, c.anchor["unit"]),
                f"{c.ratio:.3g}" if c.ratio is not None else "—",
                c.verdict(),
                c.machine_short(anchors),
                f"`{c.anchor['ours']['step']}` {c.anchor['ours']['metric']}",
                c.anchor.get("source"),
            ]
            for c in measured
        ]
        out += [markdown_table(["Project", "Measured", "Theirs", "Ours", "Ours ÷ theirs", "Verdict", "Their machine", "Our step, metric", "Source"], rows), ""]
        notes = [f"- {c.anchor['project']}, {c.anchor['what']}: {c.anchor['note']}" for c in measured if c.anchor.get("note")]
        if notes:
            out += ["Notes:", "", *notes, ""]
    else:
        out += ["No anchor has a measured counterpart in this run.", ""]
    if elsewhere:
        rows = [[c.anchor["project"], c.anchor["what"], c.anchor["published"], c.why] for c in elsewhere]
        out += ["Anchors whose step exists but gave no figure in this run:", "", markdown_table(["Project", "Measured", "Theirs", "Why"], rows), ""]
    other = sorted({str(c.anchor["machine"]) for c in comps if c.anchor.get("machine")})
    for m in other:
        out += [f"Rows of a project marked “re-run” come from {m}.", ""]
    later = [c for c in comps if c.state == "not_measured"]
    if later:
        rows = [
            [c.why, c.anchor["project"], c.anchor["what"], c.anchor["published"], c.machine_short(anchors), c.anchor.get("source")]
            for c in sorted(later, key=lambda c: (c.anchor.get("issue") or 99, c.anchor["project"]))
        ]
        out += ["Not measured by us yet:", "", markdown_table(["Status", "Project", "Measured", "Theirs", "Their machine", "Source"], rows), ""]
    return out


def targets_section(checks: list[TargetCheck]) -> list[str]:
    rows = []
    for c in checks:
        t = c.target
        met = c.met
        state = c.why if met is None else ("met" if met else "**missed**")
        rows.append([t["what"], _target_text(t), fmt_value(c.ours, t["unit"]), state, t.get("source")])
    return ["## Targets", "", "Our own goals, from the issues.", "", markdown_table(["Target", "Wanted", "Ours", "State", "Source"], rows), ""]


def unflattering(results: dict[str, Any], comps: list[Comparison], checks: list[TargetCheck], anchors: dict[str, Any]) -> list[str]:
    items: list[str] = []
    run = results.get("run") or {}
    if run.get("status") != "complete":
        items.append(f"The run did not complete (status `{run.get('status')}`): the steps after the last one recorded were never started.")
    for s in results.get("steps", []):
        st = s.get("status")
        if st in ("killed", "failed", "interrupted"):
            items.append(f"`{s['name']}` did not run to a result: {s.get('reason')}.")
        elif st in ("pending", "running"):
            items.append(f"`{s['name']}` was {'running' if st == 'running' else 'not started'} when the run stopped.")
        elif st == "capped":
            items.append(f"`{s['name']}` hit its soft time cap of {run.get('time_cap_secs')} s — {s.get('reason')}; its numbers cover only what it reached.")
    for check in checks:
        if check.met is False:
            t = check.target
            items.append(f"Target missed — {t['what']}: ours {fmt_value(check.ours, t['unit'])}, wanted {_target_text(t)}; source: {t.get('source')}.")
    worse = sorted((c for c in comps if c.worse and c.anchor.get("better") != "match"), key=lambda c: c.factor or 1)
    for c in worse:
        f = c.factor or 1
        items.append(
            f"Behind {c.anchor['project']} by {1 / f:.2f}× — {c.anchor['what']}: ours {fmt_value(c.ours, c.anchor['unit'])}, "
            f"theirs {c.anchor['published']} (their machine: {c.machine_short(anchors)})."
        )
    for c in comps:
        if c.worse and c.anchor.get("better") == "match":
            items.append(
                f"Calibration off — {c.anchor['what']}: ours {fmt_value(c.ours, c.anchor['unit'])} vs {c.anchor['published']} ({c.verdict()})."
            )
    steps = {s["name"]: s for s in results.get("steps", [])}
    hook = steps.get("hook")
    if hook and hook.get("status") in ("ok", "capped"):
        p50 = step_metric(hook, "p50_ms")
        floor = step_metric(hook, "floor_p50_ms")
        above = step_metric(hook, "above_floor_p50_ms")
        true = step_metric(hook, "true_p50_ms")
        p99 = step_metric(hook, "p99_ms")
        if p50 and floor and above is not None and true is not None:
            items.append(
                f"Process start dominates the hook: of its {p50:.2f} ms p50, the interpreter starting and exiting with nothing to do "
                f"costs {floor:.2f} ms ({100 * floor / p50:.0f} %; /usr/bin/true alone {true:.2f} ms); the hook's own work above that floor is {above:.2f} ms."
            )
        if p50 and p99 and p99 > 3 * p50:
            items.append(f"The hook's tail is long: p99 {p99:.2f} ms is {p99 / p50:.1f}× its p50.")
    ver = steps.get("verify")
    if ver and ver.get("status") in ("ok", "capped"):
        ip = step_metric(ver, "in_process_mb_s")
        ho = step_metric(ver, "hash_only_mb_s")
        cm = step_metric(ver, "command_mb_s")
        if ip and ho:
            items.append(
                f"Verify in one process reaches {ip:,.0f} MB/s, {100 * ip / ho:.0f} % of hashing every frame with SHA-256 and doing nothing else "
                f"({ho:,.0f} MB/s)" + (f"; as a whole command, interpreter start included, {cm:,.0f} MB/s." if cm else ".")
            )
    for s in results.get("steps", []):
        rss = s.get("peak_rss") or {}
        own, seen = _peak(s), rss.get("observed_bytes")
        if own and seen and abs(seen - own) / own > 0.25 and own > 64 * MIB:
            items.append(
                f"`{s['name']}`: the parent's polling saw {fmt_bytes(seen)} against the child's own peak of {fmt_bytes(own)} "
                "(a peak shorter than 250 ms, or memory released before exit)."
            )
    ran = [s for s in results.get("steps", []) if s.get("wall_secs")]
    if ran:
        slow = max(ran, key=lambda s: s["wall_secs"])
        fat = max(ran, key=lambda s: _peak(s) or 0)
        items.append(f"Slowest step: `{slow['name']}`, {fmt_secs(slow['wall_secs'])}. Largest peak RSS: `{fat['name']}`, {fmt_bytes(_peak(fat))}.")
    m = results.get("machine") or {}
    load, cpus = m.get("load_avg"), m.get("logical_cpus")
    if load and cpus and load[0] > 0.5 * cpus:
        items.append(
            f"The machine was busy when the run started (load average {load[0]:.2f} on {cpus} CPUs): "
            "timings are higher and noisier than on an idle machine."
        )
    git = m.get("git") or {}
    if git.get("commit") and git.get("clean") is False:
        items.append(f"The tree had {git.get('changed_paths')} uncommitted change(s) when the run started: commit {git.get('short')} does not fully describe the code measured.")
    elif not git.get("commit"):
        items.append(f"No commit was recorded ({git.get('note') or 'git state unknown'}).")
    not_yet = sum(1 for c in comps if c.state == "not_measured")
    if not_yet:
        items.append(f"{not_yet} of {len(comps)} published figures have no step of ours yet (listed under the anchors).")
    if not items:
        items.append("Nothing: every step ran, every target measured was met and no anchor is ahead.")
    return ["## Slow and unflattering", "", "Computed from the results above.", "", *[f"- {i}" for i in items], ""]


def render_markdown(results: dict[str, Any], anchors: dict[str, Any] | None = None) -> str:
    anchors = anchors or load_anchors()
    run = results.get("run") or {}
    comps = compare(results, anchors)
    checks = check_targets(results, anchors)
    head = [
        "# agentlog benchmark results",
        "",
        f"`agentlog bench run --events {run.get('events')} --seed {run.get('seed')}`, time cap {run.get('time_cap_secs')} s per step, "
        f"RSS cap {fmt_bytes(run.get('rss_cap_bytes'))}; started {run.get('started')}, finished {run.get('finished') or '—'} "
        f"({fmt_secs(run.get('wall_secs'))}), status **{run.get('status')}**. Every number below is rendered from "
        "results.json by `agentlog bench report`.",
        "",
    ]
    return "\n".join(
        head
        + machine_section(results.get("machine") or {})
        + steps_summary(results)
        + step_sections(results)
        + anchors_section(results, comps, anchors)
        + targets_section(checks)
        + unflattering(results, comps, checks, anchors)
    )
