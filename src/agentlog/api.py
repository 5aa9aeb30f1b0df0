"""agentlog's public library API: what the surfaces and the benchmarks call.

Every name here is re-exported from the module that defines it, and loaded
lazily: ``import agentlog.api`` imports nothing but the standard library's
``importlib``, and ``agentlog.api.run_sql`` (or ``from agentlog.api import
run_sql``) imports ``agentlog.operations.refresh`` — and DuckDB behind it —
only then. So a command that needs one name pays for that name's modules
alone, as the deferred imports it replaces did.

The table :data:`_LAZY` maps each public name to ``"module:attribute"`` (or a
bare module path for a module). The ``TYPE_CHECKING`` block names the same
things for type checkers and readers; ``tests/test_api.py`` keeps the two in
step (every name in ``__all__`` resolves) and checks that importing this
module loads no heavy dependency.

Groups, by what a caller wants:

- read: bring the store and projection up to date, open an engine, run SQL or
  AttemptQL, time travel (state, diff, why, trace), ids, full-text search;
- write: ingest the logs, compact the store, refresh the projection, import
  transcripts, record corrections and retractions, seal and verify logs, read
  a log's frames back (``log_lines``, ``frame_event_bytes``);
- on-disk layout: where the store, projection, index and place sidecars are
  (``agentlog.core.paths`` holds the data root, logs and state directories);
- capture: the hook's own event building, for tools that replay payloads;
- memory: the memory service's operations, proposals, export and restore;
- vault: one ship pass, the machine's enrolment, chain paths and the index,
  and the sealed batch format (zstd + XChaCha20-Poly1305), for `bench ship`;
- team: a team location, its tables' names and partitioning, publish and ask,
  for `bench team`;
- OpenTelemetry: the OTLP receiver (bound, not yet serving) and the span export.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentlog.capture.classify import classify_command, command_programs
    from agentlog.capture.failures import classify as classify_failure
    from agentlog.capture.failures import classify_event as classify_failure_event
    from agentlog.capture.hook import build as capture_hook_payload
    from agentlog.capture.hook import record as record_hook_event
    from agentlog.capture.hook_socket import probe as hook_server_answers
    from agentlog.capture.server import stats_path as hook_server_stats_path
    from agentlog.install.native_build import build_client as build_native_hook
    from agentlog.importers.run import ImportReport, import_paths
    from agentlog.log.frame import event_bytes as frame_event_bytes
    from agentlog.log.layout import iter_logs
    from agentlog.log.segments import lines_from as log_lines
    from agentlog.log.seal import seal_log
    from agentlog.log.verify import verify_log
    from agentlog.log.writer import SessionLog, open_session_log
    from agentlog.memory.exchange import export as export_memories
    from agentlog.memory.exchange import restore as restore_memories
    from agentlog.memory.proposals import approve as approve_proposal
    from agentlog.memory.proposals import open_proposal
    from agentlog.memory.proposals import undo as undo_proposal
    from agentlog.memory.service import confirm as confirm_memory
    from agentlog.memory.service import create as create_memory
    from agentlog.memory.service import edit as edit_memory
    from agentlog.memory.service import list_memories
    from agentlog.memory.service import search as search_memories
    from agentlog.memory.store import rebuild as rebuild_memory_store
    from agentlog.memory.store import verify as verify_memory_store
    from agentlog.memory.truth import check as check_memories
    from agentlog.memory.truth import doubtful as doubtful_memories
    from agentlog.memory.store import new_event as new_memory_event
    from agentlog.memory.store import write as write_memory_events
    from agentlog.memory.model import validate_attributes as validate_memory_attributes
    from agentlog.memory.model import validate_evidence as validate_memory_evidence
    from agentlog.memory.confidence import prior as memory_prior
    from agentlog.operations.corrections import record_correction, record_retraction
    from agentlog.operations.refresh import bring_up_to_date, open_current, run_sql
    from agentlog.projection.ids import display as display_id
    from agentlog.projection.persist import ProjectionBusy, RefreshReport, projection_dir
    from agentlog.projection.persist import refresh as refresh_projection
    from agentlog.query.aql import AqlResult
    from agentlog.query.aql import execute as execute_aql
    from agentlog.query.ask import Answer, ask
    from agentlog.query.engine import Engine, QueryResult
    from agentlog.query.scope import Scope
    from agentlog.query.state import diff_state, resolve_id, state_at, trace, why_blocked, why_failed
    from agentlog.query.timeexpr import format_us
    from agentlog.query.views import timeline
    from agentlog.query.now import now as dashboard_now
    from agentlog.query.failed_calls import failed_calls, failing_call, failure_groups, first_error_line
    from agentlog.search.index import index_path
    from agentlog.search.places import places_dir
    from agentlog.search.relevance import report as relevance_report
    from agentlog.search.semantic import path as semantic_path
    from agentlog.search.service import search
    from agentlog.integrity.merkle import verify_consistency, verify_inclusion
    from agentlog.integrity.tree import FrameTree, tree_dir
    from agentlog.operations.checkpoints import checkpoint
    from agentlog.store.compact import CompactReport, compact
    from agentlog.store.ingest import IngestReport, catch_up, ingest
    from agentlog.store.schema import COMPACT_ZSTD_LEVEL, events_path, read_events
    from agentlog.vault.crypto import ZSTD_LEVEL as VAULT_ZSTD_LEVEL
    from agentlog.vault.crypto import batch_aad as vault_batch_aad
    from agentlog.vault.crypto import open_batch as vault_open_batch
    from agentlog.vault.crypto import seal_batch as vault_seal_batch
    from agentlog.vault.machine import load as load_vault_machine
    from agentlog.vault.protocol import MAX_BATCH_BYTES as VAULT_MAX_BATCH_BYTES
    from agentlog.vault.protocol import chain_path as vault_chain_path
    from agentlog.vault.protocol import PackedIndex as VaultPackedIndex
    from agentlog.vault.protocol import index_entries as vault_index_entries
    from agentlog.vault.ship import run_once as ship_once
    from agentlog.team.location import Location as TeamLocation
    from agentlog.team.publish import BATCH_ROWS as TEAM_PUBLISH_BATCH_ROWS
    from agentlog.team.publish import publish as team_publish
    from agentlog.team.publish import writer_properties as team_writer_properties
    from agentlog.team.query import ask as team_ask
    from agentlog.sandbox.bench_probe import floor_cost as sandbox_floor_cost
    from agentlog.team.tables import PARTITION_BY as TEAM_PARTITION_BY
    from agentlog.team.tables import TEAM_TABLES
    from agentlog.otel.export import export_sessions as otel_export_sessions
    from agentlog.otel.server import make_server as otel_make_server

_LAZY: dict[str, str] = {
    # read
    "bring_up_to_date": "agentlog.operations.refresh:bring_up_to_date",
    "open_current": "agentlog.operations.refresh:open_current",
    "run_sql": "agentlog.operations.refresh:run_sql",
    "Engine": "agentlog.query.engine:Engine",
    "QueryResult": "agentlog.query.engine:QueryResult",
    "ask": "agentlog.query.ask:ask",
    "Answer": "agentlog.query.ask:Answer",
    "execute_aql": "agentlog.query.aql:execute",
    "AqlResult": "agentlog.query.aql:AqlResult",
    "Scope": "agentlog.query.scope:Scope",
    "timeline": "agentlog.query.views:timeline",
    "dashboard_now": "agentlog.query.now:now",
    "failed_calls": "agentlog.query.failed_calls:failed_calls",
    "failure_groups": "agentlog.query.failed_calls:failure_groups",
    "failing_call": "agentlog.query.failed_calls:failing_call",
    "first_error_line": "agentlog.query.failed_calls:first_error_line",
    "format_us": "agentlog.query.timeexpr:format_us",
    "display_id": "agentlog.projection.ids:display",
    # proofs
    "FrameTree": "agentlog.integrity.tree:FrameTree",
    "tree_dir": "agentlog.integrity.tree:tree_dir",
    "verify_inclusion": "agentlog.integrity.merkle:verify_inclusion",
    "verify_consistency": "agentlog.integrity.merkle:verify_consistency",
    "checkpoint": "agentlog.operations.checkpoints:checkpoint",
    "state_at": "agentlog.query.state:state_at",
    "diff_state": "agentlog.query.state:diff_state",
    "why_failed": "agentlog.query.state:why_failed",
    "why_blocked": "agentlog.query.state:why_blocked",
    "trace": "agentlog.query.state:trace",
    "resolve_id": "agentlog.query.state:resolve_id",
    "search": "agentlog.search.service:search",
    # write
    "ingest": "agentlog.store.ingest:ingest",
    "catch_up": "agentlog.store.ingest:catch_up",
    "IngestReport": "agentlog.store.ingest:IngestReport",
    "compact": "agentlog.store.compact:compact",
    "CompactReport": "agentlog.store.compact:CompactReport",
    "refresh_projection": "agentlog.projection.persist:refresh",
    "RefreshReport": "agentlog.projection.persist:RefreshReport",
    "ProjectionBusy": "agentlog.projection.persist:ProjectionBusy",
    "import_paths": "agentlog.importers.run:import_paths",
    "ImportReport": "agentlog.importers.run:ImportReport",
    "record_correction": "agentlog.operations.corrections:record_correction",
    "record_retraction": "agentlog.operations.corrections:record_retraction",
    "SessionLog": "agentlog.log.writer:SessionLog",
    "open_session_log": "agentlog.log.writer:open_session_log",
    "iter_logs": "agentlog.log.layout:iter_logs",
    "log_lines": "agentlog.log.segments:lines_from",
    "frame_event_bytes": "agentlog.log.frame:event_bytes",
    "seal_log": "agentlog.log.seal:seal_log",
    "verify_log": "agentlog.log.verify:verify_log",
    # on-disk layout
    "events_path": "agentlog.store.schema:events_path",
    "read_events": "agentlog.store.schema:read_events",
    "COMPACT_ZSTD_LEVEL": "agentlog.store.schema:COMPACT_ZSTD_LEVEL",
    "projection_dir": "agentlog.projection.persist:projection_dir",
    "index_path": "agentlog.search.index:index_path",
    "places_dir": "agentlog.search.places:places_dir",
    "semantic_path": "agentlog.search.semantic:path",
    "relevance_report": "agentlog.search.relevance:report",
    # capture
    "capture_hook_payload": "agentlog.capture.hook:build",
    "record_hook_event": "agentlog.capture.hook:record",
    "hook_server_answers": "agentlog.capture.hook_socket:probe",
    "hook_server_stats_path": "agentlog.capture.server:stats_path",
    "build_native_hook": "agentlog.install.native_build:build_client",
    "classify_failure": "agentlog.capture.failures:classify",
    "classify_failure_event": "agentlog.capture.failures:classify_event",
    "classify_command": "agentlog.capture.classify:classify_command",
    "command_programs": "agentlog.capture.classify:command_programs",
    # memory
    "create_memory": "agentlog.memory.service:create",
    "edit_memory": "agentlog.memory.service:edit",
    "confirm_memory": "agentlog.memory.service:confirm",
    "list_memories": "agentlog.memory.service:list_memories",
    "search_memories": "agentlog.memory.service:search",
    "open_proposal": "agentlog.memory.proposals:open_proposal",
    "approve_proposal": "agentlog.memory.proposals:approve",
    "undo_proposal": "agentlog.memory.proposals:undo",
    "export_memories": "agentlog.memory.exchange:export",
    "restore_memories": "agentlog.memory.exchange:restore",
    "rebuild_memory_store": "agentlog.memory.store:rebuild",
    "verify_memory_store": "agentlog.memory.store:verify",
    "check_memories": "agentlog.memory.truth:check",
    "doubtful_memories": "agentlog.memory.truth:doubtful",
    # memory events written straight (`bench memory`'s setup: many memories in few writes)
    "new_memory_event": "agentlog.memory.store:new_event",
    "write_memory_events": "agentlog.memory.store:write",
    "validate_memory_attributes": "agentlog.memory.model:validate_attributes",
    "validate_memory_evidence": "agentlog.memory.model:validate_evidence",
    "memory_prior": "agentlog.memory.confidence:prior",
    # vault (the machine side, and the sealed batch format: `bench ship`)
    "ship_once": "agentlog.vault.ship:run_once",
    "load_vault_machine": "agentlog.vault.machine:load",
    "vault_chain_path": "agentlog.vault.protocol:chain_path",
    "vault_index_entries": "agentlog.vault.protocol:index_entries",
    "VaultPackedIndex": "agentlog.vault.protocol:PackedIndex",
    "VAULT_MAX_BATCH_BYTES": "agentlog.vault.protocol:MAX_BATCH_BYTES",
    "vault_seal_batch": "agentlog.vault.crypto:seal_batch",
    "vault_open_batch": "agentlog.vault.crypto:open_batch",
    "vault_batch_aad": "agentlog.vault.crypto:batch_aad",
    "VAULT_ZSTD_LEVEL": "agentlog.vault.crypto:ZSTD_LEVEL",
    # team tables (`bench team`)
    "TeamLocation": "agentlog.team.location:Location",
    "TEAM_TABLES": "agentlog.team.tables:TEAM_TABLES",
    "TEAM_PARTITION_BY": "agentlog.team.tables:PARTITION_BY",
    "TEAM_PUBLISH_BATCH_ROWS": "agentlog.team.publish:BATCH_ROWS",
    "team_publish": "agentlog.team.publish:publish",
    "team_writer_properties": "agentlog.team.publish:writer_properties",
    "team_ask": "agentlog.team.query:ask",
    "sandbox_floor_cost": "agentlog.sandbox.bench_probe:floor_cost",
    # OpenTelemetry (docs/otel.md)
    "otel_export_sessions": "agentlog.otel.export:export_sessions",
    "otel_make_server": "agentlog.otel.server:make_server",
}

__all__ = [
    "otel_export_sessions",
    "otel_make_server",
    "build_native_hook",
    "hook_server_answers",
    "hook_server_stats_path",
    "FrameTree",
    "checkpoint",
    "tree_dir",
    "verify_consistency",
    "verify_inclusion",
    "COMPACT_ZSTD_LEVEL",
    "Answer",
    "AqlResult",
    "CompactReport",
    "Engine",
    "ImportReport",
    "IngestReport",
    "ProjectionBusy",
    "QueryResult",
    "RefreshReport",
    "Scope",
    "SessionLog",
    "approve_proposal",
    "ask",
    "bring_up_to_date",
    "capture_hook_payload",
    "record_hook_event",
    "catch_up",
    "classify_command",
    "classify_failure",
    "classify_failure_event",
    "command_programs",
    "compact",
    "check_memories",
    "confirm_memory",
    "create_memory",
    "diff_state",
    "display_id",
    "doubtful_memories",
    "memory_prior",
    "new_memory_event",
    "validate_memory_attributes",
    "validate_memory_evidence",
    "write_memory_events",
    "edit_memory",
    "events_path",
    "execute_aql",
    "export_memories",
    "format_us",
    "frame_event_bytes",
    "import_paths",
    "index_path",
    "ingest",
    "iter_logs",
    "list_memories",
    "log_lines",
    "open_current",
    "open_proposal",
    "open_session_log",
    "places_dir",
    "projection_dir",
    "read_events",
    "rebuild_memory_store",
    "record_correction",
    "record_retraction",
    "refresh_projection",
    "resolve_id",
    "restore_memories",
    "run_sql",
    "seal_log",
    "search",
    "search_memories",
    "semantic_path",
    "relevance_report",
    "state_at",
    "timeline",
    "dashboard_now",
    "failed_calls",
    "failure_groups",
    "failing_call",
    "first_error_line",
    "trace",
    "undo_proposal",
    "verify_log",
    "verify_memory_store",
    "why_blocked",
    "why_failed",
    "ship_once",
    "load_vault_machine",
    "vault_chain_path",
    "vault_index_entries",
    "VaultPackedIndex",
    "VAULT_MAX_BATCH_BYTES",
    "vault_seal_batch",
    "vault_open_batch",
    "vault_batch_aad",
    "VAULT_ZSTD_LEVEL",
    "TeamLocation",
    "TEAM_TABLES",
    "TEAM_PARTITION_BY",
    "TEAM_PUBLISH_BATCH_ROWS",
    "team_publish",
    "team_writer_properties",
    "team_ask",
    "sandbox_floor_cost",
]


def __getattr__(name: str) -> Any:
    """Import the module behind ``name`` on first use; keep the value for the next."""
    try:
        target = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    module, _, attr = target.partition(":")
    value: Any = importlib.import_module(module)
    if attr:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
