"""The full-text index: tantivy, derived from the store, kept up to date by its commits.

``state/search/`` is a tantivy index with one document per event: its text
(its head and tail: :func:`.text.head_and_tail`) *indexed, not stored* (``body``: which events hold a term and
how often, for BM25 — no positions: a phrase's order is checked on the
candidate's text, :mod:`.service`); *stored*, only where the event is — its
log, seq and frame's offset — for a hit reads its id, kind, tool, project,
paths and text back from its log frame; time as a fast field (a column:
ranges, recency); kind, provider, session, tool, project and paths indexed,
not stored, for the filters, and ``key`` (log and seq) to replace or delete a
document. The event id is not in the index. One more document, ``meta:state``,
holds the Delta version of the store the index has applied and the table's
id: it is replaced in the same tantivy commit as the documents it accounts
for, so the version and the index can never disagree.

**Following the store.** The events table is a Delta table; every ingest is a
commit whose JSON names the Parquet files it added. :func:`catch_up` reads the
commits after the version it last applied, reads the added files' rows
(``dataChange`` false — a compaction's rewrite — adds nothing new) and
indexes them, replacing any document of the same log position (a file the
store rewrote, a purge's survivors), then commits with the new version: a
crash leaves the previous commit, and the next catch-up does the work again.
A store dropped and rebuilt (another table id) or commits no longer on disk
make it rebuild. The daemon catches up after each ingest, every reader before
answering.

**One writer.** tantivy allows one writer per index (a lock file). A
catch-up that finds it held — the daemon is indexing — does nothing: the
reader answers from what is committed (the daemon is about to commit the
rest). :func:`rebuild` and :func:`forget` wait for the lock.

**Purge.** :func:`forget` deletes the events' documents and rewrites the
segments that held them: tantivy only marks a deleted document, and its terms
stay in the segment's files until that is rewritten. Every other document of
those segments is deleted too and indexed again from the store, in the same
commit; a segment with no document left is dropped, and its files removed.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

from agentlog.core import locks
from agentlog.core.atrest import derived_state_dir
from agentlog.core.paths import DIR_MODE, FILE_MODE, ensure_dir, state_dir
from agentlog.search.delta import BATCH, COLUMNS, batches as _batches, commit as _commit, content_of, delta as _delta
from agentlog.search.delta import latest_version as _latest_version, table_id as _table_id
from agentlog.search.text import Term, body

if TYPE_CHECKING:
    import tantivy

INDEX_DIR: Final = "search"
LEGACY_FILES: Final = ("search.sqlite3", "search.sqlite3-wal", "search.sqlite3-shm")
"""The SQLite FTS5 index this one replaced (removed when this one is built)."""
CODE_TOKENIZER: Final = "agentlog_code"
LOWER_TOKENIZER: Final = "agentlog_lower"
MAX_TOKEN_BYTES: Final = 80
"""Longer tokens are not indexed (base64 and minified blobs); a 64-hex digest still is."""
HEAP_BYTES: Final = 64_000_000
"""The writer's memory budget: it flushes a segment when its buffers reach it. At 128 MB a
rebuild of 1.45 M events peaked at 1,082 MiB resident (630 anonymous, 432 the segments that
merges map); 64 MB keeps it under 1 GiB."""
META: Final = "state"
FIELDS: Final = ("event_id", "log", "seq", "offset", "t", "kind", "provider", "session", "tool", "project", "paths")
"""An event's fields as :data:`Prepared` holds them (the schema says which are stored, which
indexed; the event id is neither)."""


def index_path(root: str) -> str:
    return os.path.join(derived_state_dir(root), INDEX_DIR)


@functools.cache
def schema() -> tantivy.Schema:
    """The index's fields (see the module docstring)."""
    import tantivy

    b = tantivy.SchemaBuilder()
    # which documents hold a term and how often (BM25), not where: a phrase is checked on the hit's text
    b.add_text_field("body", stored=False, tokenizer_name=CODE_TOKENIZER, index_option="freq")
    b.add_text_field("key", stored=False, tokenizer_name="raw", index_option="basic")  # log + seq: upsert, delete
    b.add_text_field("meta", stored=False, tokenizer_name="raw", index_option="basic")
    # stored: only where the event is (its log, seq and frame's offset); a hit's id, kind, tool …
    # are read from its frame with its text. Not indexed: the event id (nothing looks an event up
    # by it; as a term per event, random, it was ~1/6 of the term dictionary)
    b.add_text_field("log", stored=True, tokenizer_name="raw", index_option="basic")
    b.add_integer_field("seq", stored=True)
    b.add_integer_field("offset", stored=True)
    # µs since the epoch, a fast field only: ranges, recency and "events only" read its column (as
    # indexed terms it held one term per event, read by nothing)
    b.add_integer_field("t", fast=True)
    for name in ("kind", "provider", "session", "project"):  # filters
        b.add_text_field(name, stored=False, tokenizer_name="raw", index_option="basic")
    b.add_text_field("tool", stored=False, tokenizer_name=LOWER_TOKENIZER, index_option="basic")
    b.add_text_field("paths", stored=False, tokenizer_name="raw", index_option="basic")
    b.add_integer_field("m_version", stored=True)
    b.add_text_field("m_table", stored=True, tokenizer_name="raw", index_option="basic")
    # in the schema only to tell this index from one that held each event's first 8 KiB (an index
    # of another schema is rebuilt): ``body`` is each event's text's head and tail (text.head_and_tail)
    b.add_integer_field("m_head_and_tail", stored=False)
    return b.build()


def fold_term(term: Term) -> Term:
    """``term`` with its tokens as the index holds them (each through :func:`analyzer`)."""
    an = analyzer()
    return Term(tuple(t for tok in term.tokens for t in an.analyze(tok)), term.phrase, term.prefix)


@functools.cache
def analyzer() -> tantivy.TextAnalyzer:
    """How ``body`` is tokenised: split on every non-alphanumeric character, lower case, ASCII
    folded, tokens over :data:`MAX_TOKEN_BYTES` dropped (queries' tokens go through it too)."""
    import tantivy

    return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(tantivy.Filter.remove_long(MAX_TOKEN_BYTES))
            .filter(tantivy.Filter.lowercase()).filter(tantivy.Filter.ascii_fold()).build())


def register_tokenizers(idx: tantivy.Index) -> tantivy.Index:
    import tantivy

    idx.register_tokenizer(CODE_TOKENIZER, analyzer())
    idx.register_tokenizer(LOWER_TOKENIZER, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw())
                           .filter(tantivy.Filter.lowercase()).build())
    return idx


def open_index(root: str, *, create: bool = True) -> tantivy.Index | None:
    """The index (created empty when there is none and ``create``); None if there is none. An
    index of another schema (an older version's) counts as none: with ``create`` its files are
    removed and an empty one made (the next catch-up then rebuilds it from the store)."""
    import tantivy

    path = index_path(root)
    if os.path.isfile(os.path.join(path, "meta.json")):
        idx = tantivy.Index.open(path)
        if idx.schema == schema():
            return register_tokenizers(idx)
        if not create:
            return None
        shutil.rmtree(path, ignore_errors=True)
    elif not create:
        return None
    ensure_dir(path)
    for name in LEGACY_FILES:
        try:
            os.unlink(os.path.join(state_dir(root), name))
        except FileNotFoundError:
            pass
    return register_tokenizers(tantivy.Index(schema(), path=path, reuse=True))


def _private(path: str) -> None:
    """The index's files readable by their owner only, like every captured content."""
    os.chmod(path, DIR_MODE)
    for name in os.listdir(path):
        try:
            os.chmod(os.path.join(path, name), FILE_MODE)
        except FileNotFoundError:
            pass  # a file the writer's garbage collection just removed


class Busy(locks.Busy):
    """Another process holds the index's writer lock."""


def _writer(idx: tantivy.Index, *, wait: float = 0.0) -> tantivy.IndexWriter:
    deadline = time.monotonic() + wait
    while True:
        try:
            return idx.writer(heap_size=HEAP_BYTES, num_threads=1)
        except ValueError as e:
            if "LockBusy" not in str(e):
                raise
            if time.monotonic() >= deadline:
                raise Busy(str(e)) from None
            time.sleep(0.1)


@contextlib.contextmanager
def _held(root: str, idx: tantivy.Index, writer: tantivy.IndexWriter) -> Iterator[None]:
    """Work with ``writer``: what it did not commit is rolled back on an error; then its merges
    are waited for and its lock released, and the files are kept private."""
    try:
        yield
    except BaseException:
        writer.rollback()
        raise
    finally:
        writer.wait_merging_threads()
        _private(index_path(root))
        idx.reload()


def state(searcher: tantivy.Searcher) -> tuple[int | None, str | None]:
    """The Delta version and table id the index has applied (None, None when new)."""
    import tantivy

    hits = searcher.search(tantivy.Query.term_query(schema(), "meta", META), 1).hits
    if not hits:
        return None, None
    doc = searcher.doc(hits[0][1])
    version, table = doc.get_first("m_version"), doc.get_first("m_table")
    return (int(version) if version is not None else None), (str(table) if table is not None else None)


def _set_state(writer: tantivy.IndexWriter, version: int, table_id: str | None) -> None:
    import tantivy

    writer.delete_documents_by_term("meta", META)
    writer.add_document(tantivy.Document(meta=[META], m_version=[version], m_table=[table_id or ""]))


# -- the store's commits ---------------------------------------------------------------------------


PARALLEL_MIN_ROWS: Final = 20_000
"""At least this many rows to index: the texts are prepared by worker processes."""


Prepared = tuple[str, str, int, int | None, int, str | None, str | None, str | None, str | None, str | None,
                 list[str], str]
"""An event's stored fields (as :data:`FIELDS`) and its indexed text."""


def _prepare(rows: list[dict[str, Any]]) -> list[Prepared]:
    """Each row's fields and indexed text (in a worker process for big runs)."""
    out: list[Prepared] = []
    for r in rows:
        observed = r["observed_at"]
        us = int(observed.timestamp() * 1_000_000) if hasattr(observed, "timestamp") else int(observed or 0)
        out.append((r["event_id"], f"{r['log_provider']}/{r['log_key']}", int(r["seq"]), r.get("log_offset"), us,
                    r.get("kind"), r.get("provider"), r.get("provider_session_id"), r.get("tool_name"),
                    r.get("project_name"), list(r.get("paths") or []), _body_of(r)))
    return out


def _key(log: str, seq: int) -> str:
    return f"{log}\x00{seq}"


def _add(writer: tantivy.IndexWriter, prepared: list[Prepared], *, upsert: bool, skip: set[tuple[str, int]]) -> int:
    import tantivy

    n = 0
    for p in prepared:
        if (p[1], p[2]) in skip:
            continue
        key = _key(p[1], p[2])
        if upsert:
            writer.delete_documents_by_term("key", key)
        fields: dict[str, Any] = {"body": [p[11]], "key": [key]}
        for name, value in zip(FIELDS, p[:11]):
            if name != "event_id" and value is not None and value != []:
                fields[name] = value if isinstance(value, list) else [value]
        writer.add_document(tantivy.Document(**fields))
        n += 1
    return n


Adder = Callable[[list[Prepared]], int]


@contextlib.contextmanager
def _preparers(rows_hint: int) -> Iterator[Any]:
    """Two worker processes to prepare the texts when there are many rows (else None). Made
    before the writer is opened: they are forked while this process has no tantivy thread."""
    workers = min(2, os.cpu_count() or 1)
    if rows_hint < PARALLEL_MIN_ROWS or workers < 2:
        yield None
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) as pool:
        pool.submit(os.getpid).result()  # with fork, every worker is started at the first task
        yield pool


def _index_files(add: Adder, pool: Any, table_path: str, files: list[str]) -> int:
    """Index the files' rows (:func:`_index_batches`)."""
    return _index_batches(add, pool, _batches(table_path, files))


def _index_batches(add: Adder, pool: Any, batches: Iterable[list[dict[str, Any]]]) -> int:
    """Index these rows: prepared by the ``pool``'s workers when there is one (a bounded window
    of batches in flight), added here in order."""
    if pool is None:
        return sum(add(_prepare(rows)) for rows in batches)
    from collections import deque
    from concurrent.futures import Future

    n = 0
    window: deque[Future[list[Prepared]]] = deque()
    for rows in batches:
        window.append(pool.submit(_prepare, rows))
        if len(window) >= 4:
            n += add(window.popleft().result())
    while window:
        n += add(window.popleft().result())
    return n


def _footer_rows(path: str) -> int:
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    return int(pq.ParquetFile(path).metadata.num_rows)


def _rows_in(actions: list[dict[str, Any]]) -> int:
    total = 0
    for a in actions:
        stats = (a.get("add") or {}).get("stats")
        if stats:
            try:
                total += int(json.loads(stats).get("numRecords", 0))
            except (ValueError, TypeError):
                pass
    return total


def _body_of(r: dict[str, Any]) -> str:
    return body(r.get("text"), content_of(r), r.get("paths"), r.get("tool_name"))


def catch_up(root: str) -> dict[str, Any]:
    """:func:`catch_up_text`, then the semantic index's (:mod:`.semantic`, with its extra)."""
    done = catch_up_text(root)
    _semantic(root, "catch_up")
    return done


def _semantic(root: str, what: str, *args: Any, **kwargs: Any) -> Any:
    """The semantic index's ``what`` when its extra is installed (else nothing)."""
    from agentlog.search import semantic

    return getattr(semantic, what)(root, *args, **kwargs) if semantic.available() else None


def catch_up_text(root: str) -> dict[str, Any]:
    """Index what the store committed since the index's version; what was done (``busy`` when
    another process holds the writer: the index is then left as that process commits it)."""
    started = time.perf_counter()
    found = _delta(root)
    if found is None:
        return {"indexed": 0, "version": None, "seconds": 0.0}
    table_path, log = found
    latest = _latest_version(log)
    table_id = _table_id(log)
    idx = open_index(root)
    assert idx is not None
    idx.reload()
    done, done_table = state(idx.searcher())
    if done is None or done_table != (table_id or "") or done > latest:
        # never indexed (the snapshot holds every row in the fewest files), or another table
        return _rebuild_unless_busy(root, done, started)
    if done >= latest:
        _prepare_places(root)
        return {"indexed": 0, "version": latest, "seconds": round(time.perf_counter() - started, 3)}
    from urllib.parse import unquote

    plan: list[tuple[int, list[str]]] = []
    rows = 0
    for version in range(done + 1, latest + 1):
        actions = _commit(log, version)
        adds = [a for a in (actions or []) if "add" in a and a["add"].get("dataChange", True)]
        if actions is None or not all(os.path.exists(os.path.join(table_path, unquote(a["add"]["path"])))
                                      for a in adds):
            # the commit cleaned up, or its files compacted into others and vacuumed since:
            # the rows are in the current snapshot
            return _rebuild_unless_busy(root, done, started)
        plan.append((version, [a["add"]["path"] for a in adds]))
        rows += _rows_in(adds)
    with _preparers(rows) as pool:
        try:
            writer = _writer(idx)
        except Busy:
            return {"indexed": 0, "version": done, "busy": True, "seconds": round(time.perf_counter() - started, 3)}
        with _held(root, idx, writer):
            idx.reload()  # what the lock's last holder committed
            done, _ = state(idx.searcher())
            upsert = idx.searcher().num_docs > 0
            indexed = 0
            for version, files in plan:
                if done is None or version > done:
                    indexed += _index_files(lambda p: _add(writer, p, upsert=upsert, skip=set()), pool, table_path,
                                            files)
            if done is None or latest > done:
                _set_state(writer, latest, table_id)
                writer.commit()
    _prepare_places(root)
    return {"indexed": indexed, "version": latest, "seconds": round(time.perf_counter() - started, 3)}


def _prepare_places(root: str) -> None:
    """The hits' place sidecars of the current projection (:mod:`.places`); a failure leaves
    searches to make them, or to read the projection's views."""
    from agentlog.search import places

    try:
        places.prepare(root)
    except (OSError, ValueError):
        pass


def _rebuild_unless_busy(root: str, done: int | None, started: float) -> dict[str, Any]:
    """:func:`rebuild`, or ``busy`` (the index as it is) when another process holds the writer."""
    try:
        return rebuild(root, wait=0.0)
    except Busy:
        return {"indexed": 0, "version": done, "busy": True, "seconds": round(time.perf_counter() - started, 3)}


def rebuild(root: str, *, without: set[tuple[str, int]] | None = None, wait: float = 600.0) -> dict[str, Any]:
    """Index the store's current snapshot from scratch (``without`` these ``(log, seq)``), in one
    commit: until it is made, readers see the previous index. Waits ``wait`` seconds at most
    for another writer (then raises :class:`Busy`)."""
    from deltalake import DeltaTable

    started = time.perf_counter()
    idx = open_index(root)
    assert idx is not None
    found = _delta(root)
    files: list[str] = []
    dt = None
    if found is not None:
        dt = DeltaTable(found[0])
        files = [u.removeprefix("file://") for u in dt.file_uris()]
    rows = sum(_footer_rows(f) for f in files)
    indexed = 0
    with _preparers(rows) as pool:
        writer = _writer(idx, wait=wait)
        with _held(root, idx, writer):
            writer.delete_all_documents()
            if found is not None and dt is not None:
                skip = without or set()
                indexed = _index_files(lambda p: _add(writer, p, upsert=False, skip=skip), pool, found[0], files)
                _set_state(writer, dt.version(), _table_id(found[1]))
            writer.commit()
            writer.garbage_collect_files()
    _prepare_places(root)
    if without is None:
        _semantic(root, "rebuild", wait=wait)
    return {"indexed": indexed, "version": dt.version() if dt is not None else None, "rebuilt": True,
            "seconds": round(time.perf_counter() - started, 3)}


def forget(root: str, keys: set[tuple[str, int]]) -> int:
    """Take the events at these ``(log, seq)`` out of the index (before the store deletes them),
    their terms gone from the files too; how many were indexed.

    tantivy only marks a deleted document: its terms stay in its segment's files until the
    segment is rewritten, and a commit drops a segment none of whose documents is left. So the
    segments holding these events are rewritten, and only those: every document of theirs is
    deleted by its key, the others read again from the store and added (a new segment), in one
    commit, and the old files removed. A purge of recent events touches the small segments the
    catch-ups made since the last rebuild; when the segments to rewrite hold more than
    :data:`REWRITE_MAX` events (a large rebuild's segments), the index is rebuilt without the
    purged events instead, as before."""
    if keys:
        _semantic(root, "forget", keys)
    if not keys or open_index(root, create=False) is None:
        return 0
    idx = open_index(root)
    assert idx is not None
    started = time.perf_counter()
    idx.reload()
    plan = _plan(idx.searcher(), keys)
    if not plan[0]:
        return 0
    if plan[2] is not None:
        with _preparers(len(plan[2])) as pool:  # forked before the writer (and its threads) exists
            writer = _writer(idx, wait=600.0)
            with _held(root, idx, writer):
                idx.reload()  # what the lock's last holder committed
                searcher = idx.searcher()
                if _layout(searcher) != plan[3]:  # another writer committed meanwhile
                    plan = _plan(searcher, keys)
                found, segments, others, _ = plan
                if others is not None:
                    version, table = state(searcher)
                    for log, seq in keys | others:
                        writer.delete_documents_by_term("key", _key(log, seq))
                    readded = _readd(root, writer, others, pool)
                    if version is not None:
                        _set_state(writer, version, table)  # its document may be in a rewritten segment
                    writer.commit()
                    writer.garbage_collect_files()
                    _LAST_FORGET.update(found=found, segments=len(segments), readded=readded, rebuilt=False,
                                        seconds=round(time.perf_counter() - started, 3))
                    return found
    found = plan[0]
    writer = _writer(idx, wait=600.0)
    with _held(root, idx, writer):
        for log, seq in keys:  # unfindable from this commit on, whatever happens to the rebuild
            writer.delete_documents_by_term("key", _key(log, seq))
        writer.commit()
    rebuild(root, without=keys)
    _LAST_FORGET.update(found=found, segments=len(plan[1]), readded=0, rebuilt=True,
                        seconds=round(time.perf_counter() - started, 3))
    return found


def _layout(searcher: tantivy.Searcher) -> tuple[int, int]:
    return searcher.num_segments, searcher.num_docs


def _plan(searcher: tantivy.Searcher, keys: set[tuple[str, int]]) -> tuple[
        int, set[int], set[tuple[str, int]] | None, tuple[int, int]]:
    """How many of ``keys`` are indexed, the segments holding them, the other events of those
    segments (None when they are more than :data:`REWRITE_MAX`: rebuild instead), and the layout
    this was told from."""
    import tantivy

    sc = schema()
    segments: set[int] = set()
    found = 0
    for log, seq in keys:
        hits = searcher.search(tantivy.Query.term_query(sc, "key", _key(log, seq)), 1, count=False).hits
        if hits:
            found += 1
            segments.add(hits[0][1].segment_ord)
    others: set[tuple[str, int]] | None = set()
    if found:
        others = _segment_keys(searcher, segments)
        others = others - keys if others is not None else None
    return found, segments, others, _layout(searcher)


_LAST_FORGET: dict[str, Any] = {}
"""What the last :func:`forget` of this process did (for the purge benchmark)."""
PAGE: Final = 100_000
"""Documents listed at a time when a segment's are collected."""
REWRITE_MAX: Final = 200_000
"""Events a purge re-indexes, at most, to rewrite the segments holding what it purges; with more
(a segment of a large rebuild) it rebuilds the index instead. At 1.45 M events, rewriting a
642,437-event segment took 356 s and 1.8 GiB resident (contended) — no better than a rebuild."""


def _segment_keys(searcher: tantivy.Searcher, segments: set[int]) -> set[tuple[str, int]] | None:
    """The ``(log, seq)`` of every event document in these segments (None: more than
    :data:`REWRITE_MAX` of them)."""
    import tantivy

    query = tantivy.Query.exists_query("t")
    addrs: list[Any] = []
    offset = 0
    while True:
        hits = searcher.search(query, PAGE, count=False, offset=offset).hits
        addrs.extend(a for _, a in hits if a.segment_ord in segments)
        if len(addrs) > REWRITE_MAX:
            return None
        if len(hits) < PAGE:
            break
        offset += PAGE
    out: set[tuple[str, int]] = set()
    for addr in addrs:
        doc = searcher.doc(addr)
        out.add((str(doc.get_first("log")), int(doc.get_first("seq") or 0)))
    return out


def _readd(root: str, writer: tantivy.IndexWriter, wanted: set[tuple[str, int]], pool: Any) -> int:
    """Index again the store's rows at these ``(log, seq)``: only the row groups that hold one
    are read in full, :data:`BATCH` rows at a time."""
    if not wanted:
        return 0
    from deltalake import DeltaTable

    found = _delta(root)
    if found is None:
        return 0
    files = [u.removeprefix("file://") for u in DeltaTable(found[0]).file_uris()]
    return _index_batches(lambda p: _add(writer, p, upsert=False, skip=set()), pool, _rows_at(files, wanted))


def _rows_at(files: list[str], wanted: set[tuple[str, int]]) -> Iterator[list[dict[str, Any]]]:
    import pyarrow.parquet as pq

    keys = ["log_provider", "log_key", "seq"]
    for path in files:
        with pq.ParquetFile(path) as f:
            for g in range(f.metadata.num_row_groups):
                ids = f.read_row_group(g, columns=keys)
                if not any((f"{p}/{k}", int(q)) in wanted for p, k, q in
                           zip(*(ids.column(c).to_pylist() for c in keys))):
                    continue
                for batch in f.iter_batches(batch_size=BATCH, row_groups=[g], columns=list(COLUMNS)):
                    rows = [r for r in batch.to_pylist()
                            if (f"{r['log_provider']}/{r['log_key']}", int(r["seq"])) in wanted]
                    if rows:
                        yield rows


def indexed_keys(root: str) -> set[tuple[str, int]]:
    """Every indexed event's ``(log, seq)``."""
    import tantivy

    idx = open_index(root, create=False)
    if idx is None:
        return set()
    idx.reload()
    searcher = idx.searcher()
    out: set[tuple[str, int]] = set()
    query = tantivy.Query.exists_query("t")
    hits = searcher.search(query, max(searcher.num_docs, 1), count=False).hits
    for _, addr in hits:
        doc = searcher.doc(addr)
        out.add((str(doc.get_first("log")), int(doc.get_first("seq") or 0)))
    return out


def check(root: str) -> dict[str, Any]:
    """The index compared with the store: events only one side has (``ok`` when none)."""
    from agentlog.store.schema import read_events

    catch_up(root)
    try:
        indexed = indexed_keys(root)
    except ValueError as e:  # a damaged index: tantivy cannot open or read it
        return {"ok": False, "error": str(e)}
    stored: set[tuple[str, int]] = set()
    if _delta(root) is not None:
        t = read_events(root, columns=["log_provider", "log_key", "seq"])
        stored = {(f"{p}/{k}", int(s)) for p, k, s in zip(*(t.column(c).to_pylist() for c in ("log_provider", "log_key",
                                                                                                "seq")))}
    return {"ok": indexed == stored, "indexed": len(indexed), "stored": len(stored),
            "only_indexed": len(indexed - stored), "only_stored": len(stored - indexed)}


def remove(root: str) -> None:
    """Delete the index and its place sidecars (the next catch-up builds them again)."""
    from agentlog.search import places

    shutil.rmtree(index_path(root), ignore_errors=True)
    places.remove(root)
    from agentlog.search import semantic

    semantic.remove(root)


__all__ = ["INDEX_DIR", "Busy", "analyzer", "catch_up", "check", "forget", "index_path", "indexed_keys", "open_index",
           "rebuild", "remove", "schema", "state"]
