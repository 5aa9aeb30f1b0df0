"""The memory's free-text index: tantivy, the engine of event search (:mod:`agentlog.search`).

``state/memory-text-2/`` holds one document per memory that is not deleted:
its text (title, content, attribute values, tags, and what their identifiers
add — :func:`agentlog.search.text.additions`) *indexed, not stored*, with
positions (phrases are matched by the index: a memory is short), tokenised
as events are (:func:`agentlog.search.index.analyzer`); its id (to replace or
delete it); its row in the read model (a fast field: a hit is joined to
``memories`` by it); and its kind, tags and flags (``pinned``, ``archived``)
as exact terms, so a search's ``kind:``, ``tag:`` and ``is:`` operators — and
the archived memories it leaves out — narrow the matches in the index before
the read model is asked (which checks them again: it is the truth). The
``-2`` is the layout: an index of another layout (``memory-text/``, the
first, without those terms) is removed and this one built in its place. One ``meta:state`` document holds how far the index has
followed the read model, replaced in the same commit as the documents it
accounts for.

**Following the read model.** A write does not touch this index (no tantivy
commit on the write path): the fold appends the ids of memories whose text
changed (text, tags, flags) to the read model's ``text_queue`` in the
write's own transaction.
A search first catches the index up (:func:`catch_up`): the queue's rows
after the index's mark are read in one snapshot with those memories' rows,
their documents replaced (or deleted), and the mark committed with them. So
the process that wrote finds its write at its next search, as does every
other. A read model replaced by a rebuild has another ``generation`` (in
its ``meta``): the index is then built again from it, whole.

**Purge.** :func:`remove` deletes the index's files; the rebuild that ends a
memory purge calls it, so no segment keeps a purged memory's terms (tantivy
only marks a deleted document until its segment is rewritten).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final, Sequence, cast

from agentlog.core.atrest import derived_state_dir
from agentlog.core.paths import DIR_MODE, FILE_MODE, ensure_dir, state_dir

if TYPE_CHECKING:
    import tantivy

    from agentlog.search.text import Query, Term

INDEX_DIR: Final = "memory-text-2"
OLD_INDEX_DIRS: Final = ("memory-text",)
"""Indexes of earlier layouts, removed when this one is made."""
LOCK_FILE: Final = "memory-text.lock"
META: Final = "state"
HEAP_BYTES: Final = 15_000_000
"""The writer's memory budget (tantivy's least for one thread; a catch-up writes a few documents,
a full build at 100,000 memories flushes a few segments)."""
PRUNE_AFTER: Final = 10_000
"""Rows of ``text_queue`` the index has applied that are left before a catch-up deletes them."""


def index_path(root: str) -> str:
    return os.path.join(derived_state_dir(root), INDEX_DIR)


@functools.cache
def schema() -> tantivy.Schema:
    import tantivy

    from agentlog.search.index import CODE_TOKENIZER

    b = tantivy.SchemaBuilder()
    b.add_text_field("body", stored=False, tokenizer_name=CODE_TOKENIZER, index_option="position")
    b.add_text_field("id", stored=False, tokenizer_name="raw", index_option="basic")
    b.add_integer_field("row", stored=False, indexed=False, fast=True)
    b.add_text_field("meta", stored=False, tokenizer_name="raw", index_option="basic")
    b.add_text_field("kind", stored=False, tokenizer_name="raw", index_option="basic")
    b.add_text_field("tag", stored=False, tokenizer_name="raw", index_option="basic")
    b.add_text_field("flag", stored=False, tokenizer_name="raw", index_option="basic")
    b.add_integer_field("m_mark", stored=True)
    b.add_text_field("m_generation", stored=True, tokenizer_name="raw", index_option="basic")
    return b.build()


def text_of(title: str, content: str, attributes: dict[str, Any], tags: list[str]) -> str:
    """A memory's indexed text: its strings, then what their identifiers add (as events)."""
    from agentlog.search.text import additions, strings_of

    pieces: list[str] = []
    strings_of([title, content, attributes, tags], pieces, [1 << 40])
    joined = "\n".join(pieces)
    extra = additions(joined)
    return joined + ("\n" + extra if extra else "")


# -- the index, kept open per process --------------------------------------------------------------

_OPEN: dict[tuple[str, int], tuple[tantivy.Index, tuple[int, int, int] | None]] = {}


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(os.path.join(path, "meta.json"))
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _index(root: str) -> tantivy.Index:
    """The index (created when missing: under :func:`_locked`), kept open per process and thread
    and reloaded when another commit changed it."""
    import tantivy

    from agentlog.search.index import register_tokenizers

    path = os.path.abspath(index_path(root))
    key = (path, threading.get_ident())
    stamp = _stamp(path)
    kept = _OPEN.get(key)
    if kept is not None and stamp is not None and kept[1] == stamp:
        return kept[0]
    if stamp is None:
        for old in OLD_INDEX_DIRS:  # (an earlier layout's: it cannot hold this one's documents)
            shutil.rmtree(os.path.join(state_dir(root), old), ignore_errors=True)
        ensure_dir(path)
        os.chmod(path, DIR_MODE)
        idx = register_tokenizers(tantivy.Index(schema(), path=path, reuse=True))
    elif kept is None:
        idx = register_tokenizers(tantivy.Index.open(path))
    else:
        idx = kept[0]
    idx.reload()
    _OPEN[key] = (idx, _stamp(path))
    return idx


def _forget(root: str) -> None:
    path = os.path.abspath(index_path(root))
    for key in [k for k in _OPEN if k[0] == path]:
        _OPEN.pop(key, None)


@contextlib.contextmanager
def _locked(root: str) -> Iterator[None]:
    """The index's writer, one process at a time (tantivy's own lock fails rather than waits)."""
    ensure_dir(state_dir(root))
    fd = os.open(os.path.join(state_dir(root), LOCK_FILE), os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _state(searcher: tantivy.Searcher) -> tuple[int, str | None]:
    """(the last ``text_queue`` row applied, the read model's generation); (0, None) when new."""
    import tantivy

    hits = searcher.search(tantivy.Query.term_query(schema(), "meta", META), 1, count=False).hits
    if not hits:
        return 0, None
    doc = searcher.doc(hits[0][1])
    return int(doc.get_first("m_mark") or 0), str(doc.get_first("m_generation") or "")


def _target(con: sqlite3.Connection) -> tuple[int, str]:
    row = con.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    last = con.execute("SELECT max(rowid) FROM text_queue").fetchone()[0]
    return int(last or 0), str(row[0]) if row else ""


# -- catching up -----------------------------------------------------------------------------------


def catch_up(root: str, con: sqlite3.Connection) -> int:
    """Bring the index to the read model ``con`` (see the module docstring); the memories
    re-indexed."""
    if _stamp(os.path.abspath(index_path(root))) is not None:
        mark, generation = _state(_index(root).searcher())
        last, current = _target(con)
        if generation == current and mark >= last:
            return 0
    with _locked(root):
        idx = _index(root)
        mark, generation = _state(idx.searcher())
        con.execute("BEGIN")  # one snapshot: the queue and the rows it names
        try:
            last, current = _target(con)
            if generation == current and mark >= last:
                return 0
            whole = generation != current
            if whole:
                rows = con.execute(f"SELECT {_DOC_COLUMNS} FROM memories WHERE deleted = 0").fetchall()
                ids: list[str] = []
            else:
                ids = [r[0] for r in con.execute("SELECT DISTINCT memory_id FROM text_queue WHERE rowid > ? "
                                                 "AND rowid <= ?", (mark, last))]
                rows = []
                for mid in ids:
                    rows += con.execute(f"SELECT {_DOC_COLUMNS} FROM memories WHERE id = ? AND deleted = 0",
                                        (mid,)).fetchall()
        finally:
            con.execute("COMMIT")
        _write(root, idx, rows, ids, last, current, whole)
        if last - mark > PRUNE_AFTER or (whole and last > PRUNE_AFTER):
            with contextlib.suppress(sqlite3.OperationalError):  # busy: the next catch-up prunes
                con.execute("DELETE FROM text_queue WHERE rowid < ?", (last,))  # (the last row keeps rowids rising)
        return len(rows)


_DOC_COLUMNS: Final = "id, rowid, title, content, attributes, tags, kind, pinned, archived"


def _write(root: str, idx: tantivy.Index, rows: list[tuple[Any, ...]], ids: list[str], mark: int,
           generation: str, whole: bool) -> None:
    import json

    import tantivy

    writer = idx.writer(heap_size=HEAP_BYTES, num_threads=1)
    try:
        if whole:
            writer.delete_all_documents()
        for mid in ids:
            writer.delete_documents_by_term("id", mid)
        for mid, rowid, title, content, attributes, tags, kind, pinned, archived in rows:
            tag_list = json.loads(tags)
            terms: dict[str, list[str]] = {"kind": [kind], "tag": [str(t) for t in tag_list],
                                           "flag": [f for f, on in (("pinned", pinned), ("archived", archived)) if on]}
            writer.add_document(tantivy.Document(
                id=[mid], row=[int(rowid)], body=[text_of(title, content or "", json.loads(attributes), tag_list)],
                **{k: v for k, v in terms.items() if v}))
        writer.delete_documents_by_term("meta", META)
        writer.add_document(tantivy.Document(meta=[META], m_mark=[mark], m_generation=[generation]))
        writer.commit()
        if whole:
            writer.garbage_collect_files()
    except BaseException:
        writer.rollback()
        raise
    finally:
        writer.wait_merging_threads()
        _private(index_path(root))
    idx.reload()


def _private(path: str) -> None:
    for name in os.listdir(path):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(os.path.join(path, name), FILE_MODE)


def remove(root: str) -> None:
    """Delete the index (the next search builds it again from the read model)."""
    with _locked(root):
        _forget(root)
        shutil.rmtree(index_path(root), ignore_errors=True)


# -- searching -------------------------------------------------------------------------------------


def engine_query(q: Query) -> tantivy.Query | None:
    """The free-text part of a memory query (words, phrases, ``-exclusions``, ``OR``,
    ``prefix*``, as :func:`agentlog.search.text.parse_query` reads them) as a tantivy query
    built from its terms; None when it names no term the index could hold."""
    import tantivy

    from agentlog.search.index import fold_term

    sc = schema()
    Q, Occur = tantivy.Query, tantivy.Occur


    def word(token: str, prefix: bool) -> Any:
        return _prefix_query(token) if prefix else Q.term_query(sc, "body", token)

    def text_query(term: Term) -> Any:
        toks: list[str | tuple[int, str]] = list(term.tokens)
        if len(toks) == 1:
            return word(term.tokens[0], term.prefix)
        ordered = Q.phrase_prefix_query(sc, "body", toks) if term.prefix else Q.phrase_query(sc, "body", toks)
        if term.phrase:
            return ordered
        # a compound: its parts in order, or its parts joined (indexed for such names)
        return Q.boolean_query([(Occur.Should, ordered), (Occur.Should, word("".join(term.tokens), term.prefix))])

    clauses: list[tuple[Any, Any]] = []
    for alternatives in q.clauses:
        terms = [t for t in map(fold_term, alternatives) if t.tokens]
        if not terms:
            return None  # a word too long to be indexed matches nothing
        alts = [text_query(t) for t in terms]
        clauses.append((Occur.Must, alts[0] if len(alts) == 1 else Q.boolean_query([(Occur.Should, a) for a in alts])))
    excluded = [text_query(t) for t in map(fold_term, q.excluded) if t.tokens]
    if not clauses:
        if not excluded:
            return None
        clauses.append((Occur.Must, Q.exists_query("row")))  # every memory (not the state document)
    clauses += [(Occur.MustNot, x) for x in excluded]
    return Q.boolean_query(clauses)


@functools.lru_cache(maxsize=256)
def _prefix_query(token: str) -> tantivy.Query:
    """The words of the index that start with ``token`` (a regex query: its automaton is built
    once per process, as building it costs more than running it on a memory's index)."""
    import tantivy

    from agentlog.search.engine_query import regex_literal

    return tantivy.Query.regex_query(schema(), "body", regex_literal(token) + ".*")


def _first(pair: tuple[Any, float]) -> int:
    """A (row, score) pair's row, for sorting (a missing row first: it is dropped)."""
    return -1 if pair[0] is None else int(pair[0])


def matches(root: str, con: sqlite3.Connection, q: Query,
            narrow: Sequence[tuple[str, str, bool]] = ()) -> dict[int, float] | None:
    """Every memory matching the free text ``q``: its row in the read model → BM25, in row
    order, after catching the index up with ``con``; None when ``q`` can match nothing.
    ``narrow``: (field, term, wanted) — the documents with (or without) the exact term ``kind``,
    ``tag`` or ``flag`` only (a search's operators, which the caller checks again)."""
    query = engine_query(q)
    if query is None:
        return None
    if narrow:
        import tantivy

        sc = schema()
        query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Must, query)]
            + [(tantivy.Occur.Must if wanted else tantivy.Occur.MustNot, tantivy.Query.term_query(sc, name, term))
               for name, term, wanted in narrow])
    catch_up(root, con)
    searcher = _index(root).searcher()
    hits = searcher.search(query, max(searcher.num_docs, 1), count=False).hits
    if not hits:
        return {}
    rows = searcher.fast_field_values("row", [a for _, a in hits])
    # in row order: the read model's rows are then visited in the order they are stored (at
    # 100,000 matches, the join on them takes a third of the time it takes in score order)
    found = dict(sorted(zip(rows, (s for s, _ in hits)), key=_first))
    found.pop(None, None)  # (no document of this index lacks a row; a segment of another schema could)
    return cast(dict[int, float], found)


def check(root: str, con: sqlite3.Connection) -> dict[str, Any]:
    """The index compared with the read model: documents only one side has."""
    import tantivy

    catch_up(root, con)
    searcher = _index(root).searcher()
    hits = searcher.search(tantivy.Query.exists_query("row"), max(searcher.num_docs, 1), count=False).hits
    indexed = {int(r) for r in searcher.fast_field_values("row", [a for _, a in hits]) if r is not None}
    live = {int(r[0]) for r in con.execute("SELECT rowid FROM memories WHERE deleted = 0")}
    return {"ok": indexed == live and len(hits) == len(indexed), "indexed": len(hits), "memories": len(live),
            "only_indexed": len(indexed - live), "only_memories": len(live - indexed)}


__all__ = ["INDEX_DIR", "catch_up", "check", "engine_query", "index_path", "matches", "remove", "schema", "text_of"]
