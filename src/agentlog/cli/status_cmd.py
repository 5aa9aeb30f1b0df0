"""``agentlog status``."""

from __future__ import annotations

import click

from agentlog.core.humanize import fmt_bytes
from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, print_table, stderr


@click.command(name="status")
@click.option("--no-ingest", is_flag=True, help="Answer from what is already in the store; do not ingest pending frames first.")
@click.option("--verify", "verify", is_flag=True, help="Also rebuild the store from the logs into a scratch root and compare the row sets (exit 1 on a difference).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def status_cmd(no_ingest: bool, verify: bool, as_json: bool) -> None:
    """Show sessions, events, sizes by component, files, ingest lag and breaks.

    Ingests pending frames first (unless --no-ingest; a catch-up that finds
    another ingest running answers from what is committed). Exit 1 when a log
    has a break that stopped its ingest.
    """
    from agentlog.operations.ship_schedule import last_ship
    from agentlog.store.status import status

    root = data_root()
    st = status(root, catch_up=not no_ingest)
    memory_check: dict[str, object] | None = None
    if verify:
        from agentlog.memory.store import verify as verify_memory
        from agentlog.store.rebuild import differential_verify

        st.verify = differential_verify(root).to_dict()
        memory_check = verify_memory(root)
    vault = _vault_state(root)
    shipped_last = last_ship(root)
    if as_json:
        print_json(st.to_dict() | ({"memory_verify": memory_check} if memory_check is not None else {})
                   | ({"vault": vault} if vault is not None else {})
                   | ({"last_ship": shipped_last} if shipped_last is not None else {}))
    else:
        rows: list[dict[str, object]] = [
            {"what": "sessions (logs)", "value": f"{st.sessions:,}"
             + (f" (and {st.capture_tests:,} of install's capture tests)" if st.capture_tests else "")},
            {"what": "events in the store", "value": f"{st.events:,}"},
            {"what": "store version", "value": st.table_version},
            {"what": "last ingest", "value": st.last_ingest_at or "never"},
            {"what": "ingest lag", "value": f"{st.lag_logs} logs, {fmt_bytes(st.lag_bytes)}"},
        ]
        hs = st.hook_server
        rows.append({"what": "hook server", "value": (
            f"answering; per request p50 {hs.get('server_us_p50')} µs, p95 {hs.get('server_us_p95')} µs "
            f"(last {hs.get('window', 0):,})" if hs.get("answering") else "not answering (hooks use the Python path)")})
        if vault is not None:
            counts: dict[str, int] = {}
            for c in vault:
                counts[str(c["state"])] = counts.get(str(c["state"]), 0) + 1
            rows.append({"what": "vault (agentlog ship)",
                         "value": ", ".join(f"{n:,} {k}" for k, n in sorted(counts.items())) or "no sessions"})
        if shipped_last is not None:
            rows.append({"what": "last ship (the daemon)", "value": f"{shipped_last.get('at')}: {shipped_last.get('summary')}"})
        for comp, size in st.bytes_by_component.items():
            rows.append({"what": comp, "value": f"{fmt_bytes(size)} in {st.files_by_component[comp]:,} files"})
        print_table(rows, ["what", "value"], title=st.data_root)
        if st.caught_up is not None and st.caught_up.events:
            stderr().print(f"ingested {st.caught_up.events:,} pending events first")
        for b in st.breaks:
            stderr().print(f"[red]break[/]: {b}")
        for c in vault or []:
            if c["state"] == "stopped":
                stderr().print(f"[red]vault[/]: {c['chain']}: shipping stopped: {c['stopped']}", markup=True)
        if st.verify is not None:
            v = st.verify
            if v["ok"]:
                stderr().print(f"verify: the store equals a rebuild from the logs ({v['live_rows']:,} rows)")
            else:
                stderr().print(f"[red]verify: the store differs from a rebuild[/]: {v['missing']} rows missing, {v['extra']} extra")
        if memory_check is not None:
            if memory_check["ok"]:
                stderr().print(f"verify: the memory read model equals a replay of its log ({memory_check['rows']:,} rows)")
            else:
                stderr().print(f"[red]verify: the memory read model differs from a replay[/]: {memory_check['differences']}")
    if st.breaks or (st.verify is not None and not st.verify["ok"]) or (memory_check is not None and not memory_check["ok"]):
        raise click.exceptions.Exit(1)


def _vault_state(root: str) -> list[dict[str, object]] | None:
    """Per session what is shipped to the vault (None when this machine is not enrolled)."""
    from agentlog.vault.machine import enrolled
    from agentlog.vault.ship import shipped_state

    return shipped_state(root) if enrolled(root) else None
