"""The semantic index: one vector per unit people ask about, derived from the store like the text index.

**What is embedded.** A chunk is an event of a kind people look for by meaning
(:data:`KINDS`): a prompt, an assistant message, a failed tool call (its tool,
input and error, head and tail), a failed turn, a memory. Its text is the one
the text index holds (:func:`.text.plain`, head and tail), less the paths and the
tool name; an event with no captured text (metadata-only capture, a purged
frame) has no vector. Each vector keeps its event's place in the log
(``log``, ``seq``) and its role in its turn: a hit is then placed — session,
turn, attempt, outcome — exactly as a lexical one. Each turn also has a
**summary** vector, made from its prompt's, failures' and last message's
vectors and placed at those events (:mod:`.summaries`).

**The model.** ``wordllama``'s static 256-dimension embeddings, shipped inside
its wheel (the ``semantic`` extra): loaded from the package's own files with
downloads disabled, nothing is fetched (docs/search.md says why this model).

**The store.** ``state/semantic/``: segments, each an ``int8`` matrix
(``.npy``, unit vectors times 127), its keys (``.keys.json``) and its
background scores (``.bg.npy``, :mod:`.floor`), listed by
``manifest.json`` with the store's Delta version and table id they account
for. A catch-up writes one new segment (a segment holding a key written again
is rewritten without it); a rebuild writes one; a purge rewrites the segments
holding what it purges, so no vector of purged content stays on disk. Over
:data:`MERGE_AT` segments they are merged into one. The manifest is replaced
atomically after the files it names are written. A query scores every vector
(exact, :data:`BLOCK` rows at a time as float32): docs/search.md has the
measured cost and why this beats an approximate index at this size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

from agentlog.core import UsageError, locks
from agentlog.core.atrest import derived_state_dir
from agentlog.core.paths import DIR_MODE, FILE_MODE, ensure_dir
from agentlog.search import floor as background_floor
from agentlog.search import summaries
from agentlog.search.embed_pool import Embedder
from agentlog.search.retracted import Retracted

if TYPE_CHECKING:
    import numpy as np

DIR: Final = "semantic"
MODEL: Final = "wordllama/l2_supercat/256"
FORMAT: Final = 2
"""The index's layout: 2 adds each vector's role and the turn summaries (:mod:`.summaries`) and each
segment's background scores (:mod:`.floor`); an index of another layout is rebuilt."""
DIM: Final = 256
KINDS: Final = frozenset({"prompt_submitted", "agent_message", "tool_call_failed", "turn_failed", "memory",
                          "permission_denied", "task_created", "task_completed", "turn_stopped"})
"""The events embedded: the units people ask about by meaning. ``turn_stopped`` holds the turn's
last assistant message when a hook captured it (Claude Code's, Codex's and Gemini CLI's stop
hooks send it): in a session recorded by hooks alone, the only assistant text there is."""
MIN_CHARS: Final = 3
"""A chunk shorter than this (once stripped) is not embedded."""
MERGE_AT: Final = 16
BLOCK: Final = 65_536
EXACT_MAX: Final = 50_000
"""Up to this many vectors a query scores each one; past it, a first pass by the Hamming distance
of the vectors' sign bits (32 bytes a vector) keeps :data:`RERANK` candidates (or 8 × the vectors
asked for), which are then scored exactly (docs/search.md has what this costs and misses)."""
RERANK: Final = 4_096
ENABLE: Final = "semantic search needs the 'semantic' extra: pip install 'agentlog[semantic]'"
Key = tuple[str, int]


class SemanticUnavailable(UsageError):
    """The ``semantic`` extra is not installed."""


def available() -> bool:
    """Whether the extra (numpy and wordllama) is installed."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("numpy", "wordllama"))


def require() -> None:
    if not available():
        raise SemanticUnavailable(ENABLE)


@functools.cache
def _model() -> Any:
    """wordllama's model from the files its wheel ships (never a download)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import logging
    from pathlib import Path

    import wordllama  # type: ignore[import-untyped]

    logging.getLogger("wordllama").setLevel(logging.ERROR)
    # the package's own directory holds weights/ and tokenizers/ as its cache layout expects
    return wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)


EMBED_CHARS: Final = 131_072
"""Characters of a batch given to the model at once, counted as its texts' number times its longest:
wordllama pads a batch to its longest text and holds every token's vector (a batch of 256 texts of
8 KiB took gigabytes)."""


def embed(texts: list[str]) -> np.ndarray:
    """Unit vectors (float32, one row per text). The texts are embedded shortest first, in batches
    of similar length holding at most :data:`EMBED_CHARS` (padded), at most 256 texts."""
    import numpy as np

    out = np.zeros((len(texts), DIM), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and end - start < 256 and (end - start + 1) * len(texts[order[end]]) <= EMBED_CHARS:
            end += 1
        rows = order[start:end]
        out[rows] = np.asarray(_model().embed([texts[i] for i in rows], norm=True, batch_size=len(rows)),
                               dtype=np.float32)
        start = end
    return out


def embed_quantised(texts: list[str]) -> np.ndarray:
    """The texts' int8 vectors (what an embedding worker runs: :mod:`.embed_pool`)."""
    return quantise(embed(texts))


@functools.cache
def _background_queries() -> np.ndarray:
    return embed(list(background_floor.BACKGROUND))


def quantise(vectors: np.ndarray) -> np.ndarray:
    import numpy as np

    return np.clip(np.rint(vectors * 127.0), -127, 127).astype(np.int8)


COMMIT: Final = '"git_subcommand":"commit"'
"""What a shell call's event holds when it runs ``git commit`` (its ``attrs``, as the store keeps
the event): its command, the commit's message, is a chunk."""


def chunk_text(row: dict[str, Any]) -> str | None:
    """The text a row is embedded by (None: not a chunk)."""
    from agentlog.search.delta import content_of
    from agentlog.search.text import plain

    if row.get("kind") == "tool_call_started" and COMMIT in (row.get("event") or ""):
        content = content_of(row)
        command = content.get("command") if isinstance(content, dict) else None
        return f"git commit: {command}" if isinstance(command, str) and len(command.strip()) >= MIN_CHARS else None
    if row.get("kind") not in KINDS:
        return None
    text = plain(row.get("text"), content_of(row), None, None).strip()
    if len(text) < MIN_CHARS:
        return None
    tool = row.get("tool_name")
    return f"{tool}: {text}" if tool else text


# -- the files -------------------------------------------------------------------------------------


def path(root: str) -> str:
    return os.path.join(derived_state_dir(root), DIR)


def _manifest(root: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(path(root), "manifest.json"), "rb") as fh:
            m = json.load(fh)
    except (FileNotFoundError, ValueError):
        return None
    return m if isinstance(m, dict) and m.get("model") == MODEL and m.get("format") == FORMAT else None


def _write(file: str, data: bytes) -> None:
    tmp = file + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, file)


def _save_manifest(root: str, version: int | None, table: str | None, segments: list[str],
                   gone: Retracted | None = None) -> None:
    _write(os.path.join(path(root), "manifest.json"),
           json.dumps({"model": MODEL, "format": FORMAT, "version": version, "table": table, "segments": segments,
                       "retracted": (gone or Retracted()).to_json()}).encode())
    _collect(root, segments)


def _collect(root: str, segments: list[str]) -> None:
    """Remove the files of segments the manifest no longer names."""
    keep = {f"{s}{ext}" for s in segments for ext in (".npy", ".keys.json", ".bg.npy")} | {"manifest.json", "lock"}
    for name in os.listdir(path(root)):
        if name not in keep:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(path(root), name))


def _new_segment(root: str, vectors: np.ndarray, keys: list[Key], extra: list[list[Any]]) -> str:
    """A segment file of these vectors, their keys and each row's extra fields (an event's role, or
    a summary's :data:`.summaries.SUMMARY` and members), with its background scores (:mod:`.floor`)."""
    import io

    import numpy as np

    name = f"s{time.time_ns():x}{os.getpid():x}"
    scores = background_floor.background(vectors, _background_queries())
    for ext, array in ((".npy", vectors), (".bg.npy", scores)):
        buf = io.BytesIO()
        np.save(buf, array, allow_pickle=False)
        _write(os.path.join(path(root), name + ext), buf.getvalue())
    _write(os.path.join(path(root), name + ".keys.json"),
           json.dumps([[k[0], k[1], *x] for k, x in zip(keys, extra, strict=True)]).encode())
    return name


Segment = tuple["np.ndarray", list[Key], list[list[Any]]]


def _load_segment(root: str, name: str) -> Segment:
    return _read_segment(path(root), name)


@functools.lru_cache(maxsize=2 * 16 + 8)
def _read_segment(directory: str, name: str) -> Segment:
    """A segment's files (kept per process: a segment is never changed once written, its name is
    new each time; a catch-up reads every segment's keys to find a log's vectors)."""
    import numpy as np

    vectors = np.load(os.path.join(directory, name + ".npy"), allow_pickle=False)
    with open(os.path.join(directory, name + ".keys.json"), "rb") as fh:
        rows = json.load(fh)
    return vectors, [(str(k[0]), int(k[1])) for k in rows], [list(k[2:]) for k in rows]


@contextlib.contextmanager
def _locked(root: str, wait: float) -> Iterator[bool]:
    """The index's writer lock (False: another process held it for ``wait`` seconds)."""
    ensure_dir(path(root))
    os.chmod(path(root), DIR_MODE)
    fd = locks.open_locked(os.path.join(path(root), "lock"), wait)
    if fd is None:
        yield False
        return
    try:
        yield True
    finally:
        os.close(fd)


# -- following the store ---------------------------------------------------------------------------


def _embed_rows(batches: Iterable[list[dict[str, Any]]], skip: set[Key],
                gone: Retracted) -> tuple[np.ndarray, list[Key], list[list[Any]], bool]:
    """The rows' vectors, keys and roles, less ``skip`` and what ``gone`` retracts; a retraction
    among the rows is added to ``gone`` (the last value: whether one was). A large run embeds on
    every CPU (:mod:`.embed_pool`)."""
    import numpy as np

    parts: list[np.ndarray] = []
    keys: list[Key] = []
    roles: list[list[Any]] = []
    retracting = False
    with Embedder(embed_quantised) as embedder:
        for rows in batches:
            texts: list[str] = []
            for r in rows:
                retracting = gone.add(r) or retracting
                key = (f"{r['log_provider']}/{r['log_key']}", int(r["seq"]))
                text = chunk_text(r) if key not in skip and not (gone and gone.holds(r)) else None
                if text is not None:
                    texts.append(text)
                    keys.append(key)
                    roles.append([summaries.role(r.get("kind"))])
            if texts:
                parts.extend(embedder.add(texts))
        parts.extend(embedder.finish())
    vectors = np.concatenate(parts) if parts else np.zeros((0, DIM), dtype=np.int8)
    return vectors, keys, roles, retracting


def _drop(root: str, segments: list[str], keys: set[Key]) -> tuple[list[str], int, set[str]]:
    """``segments`` with every vector of ``keys`` gone, and every summary holding one of them (a
    segment holding one rewritten); how many of ``keys`` went, and the logs whose summaries must be
    made again (:func:`_summarise`)."""
    out: list[str] = []
    dropped = 0
    logs: set[str] = set()
    for name in segments:
        vectors, seg_keys, extra = _load_segment(root, name)
        keep: list[int] = []
        for i, k in enumerate(seg_keys):
            if k in keys:
                dropped += 1
                logs.add(summaries.log_of(k))
            elif extra[i][:1] == [summaries.SUMMARY] and any((summaries.log_of(k), s) in keys for s in extra[i][1]):
                logs.add(summaries.log_of(k))
            else:
                keep.append(i)
        if len(keep) == len(seg_keys):
            out.append(name)
        elif keep:
            out.append(_new_segment(root, vectors[keep], [seg_keys[i] for i in keep], [extra[i] for i in keep]))
    return out, dropped, logs


def _summarise(root: str, segments: list[str], logs: set[str]) -> list[str]:
    """``segments`` with the turn summaries of ``logs`` made again from their events' vectors
    (:mod:`.summaries`): the old ones dropped, the new ones in one new segment."""
    import numpy as np

    if not logs:
        return segments
    rows: list[tuple[str, int, str, Any]] = []
    old: set[Key] = set()
    for name in segments:
        vectors, seg_keys, extra = _load_segment(root, name)
        for i, k in enumerate(seg_keys):
            if summaries.log_of(k) not in logs:
                continue
            if summaries.is_summary(k):
                old.add(k)
            else:
                rows.append((k[0], k[1], str((extra[i] or ["o"])[0]), vectors[i]))
    made, keys, extra = summaries.build(rows)
    if old:
        segments, _, _ = _drop(root, segments, old)
    if keys:
        segments = [*segments, _new_segment(root, quantise(np.stack(made)), keys, extra)]
    return segments


def catch_up(root: str) -> dict[str, Any]:
    """Embed what the store committed since the version the index applied (a rebuild when it
    never did, or the table changed, or a commit's files are gone), and make again the turn
    summaries of the logs it touched; ``busy`` when another process is writing."""
    from urllib.parse import unquote

    from agentlog.search.delta import batches as _batches, commit as _commit, delta as _delta
    from agentlog.search.delta import latest_version as _latest_version, table_id as _table_id

    started = time.perf_counter()
    found = _delta(root)
    if found is None or not available():
        return {"embedded": 0}
    table_path, log = found
    latest, table = _latest_version(log), _table_id(log)
    m = _manifest(root)
    if m is not None and m.get("table") == table and m.get("version") == latest:
        return {"embedded": 0, "version": latest}
    with _locked(root, 0.0) as held:
        if not held:
            return {"embedded": 0, "busy": True}
        m = _manifest(root)
        if m is None or m.get("table") != table or m.get("version") is None or m["version"] > latest:
            return _rebuild_locked(root, set(), started)
        files: list[str] = []
        for version in range(int(m["version"]) + 1, latest + 1):
            actions = _commit(log, version)
            adds = [a["add"]["path"] for a in (actions or []) if "add" in a and a["add"].get("dataChange", True)]
            if actions is None or not all(os.path.exists(os.path.join(table_path, unquote(p))) for p in adds):
                return _rebuild_locked(root, set(), started)
            files += adds
        gone = Retracted.from_json(m.get("retracted"))
        vectors, keys, roles, retracting = _embed_rows(_batches(table_path, files), set(), gone)
        segments = list(m["segments"])
        touched = {k[0] for k in keys}
        if keys:
            segments, _, _ = _drop(root, segments, set(keys))  # a row written again replaces its vector
            segments.append(_new_segment(root, vectors, keys, roles))
        if retracting:  # the vectors already held for what a new retraction names go
            from deltalake import DeltaTable

            from agentlog.search.retracted import keys_in_store

            every = [u.removeprefix("file://") for u in DeltaTable(table_path).file_uris()]
            segments, _, logs = _drop(root, segments, keys_in_store(table_path, every, gone))
            touched |= logs
        segments = _summarise(root, segments, touched)
        if len(segments) > MERGE_AT:
            segments = [_merge(root, segments)]
        _save_manifest(root, latest, table, segments, gone)
    return {"embedded": len(keys), "version": latest, "seconds": round(time.perf_counter() - started, 3)}


def _merge(root: str, segments: list[str]) -> str:
    import numpy as np

    loaded = [_load_segment(root, s) for s in segments]
    return _new_segment(root, np.concatenate([v for v, _, _ in loaded]), [k for _, ks, _ in loaded for k in ks],
                        [x for _, _, xs in loaded for x in xs])


def rebuild(root: str, *, without: set[Key] | None = None, wait: float = 600.0) -> dict[str, Any]:
    """Embed the store's current snapshot from scratch (``without`` these keys)."""
    require()
    with _locked(root, wait) as held:
        if not held:
            raise locks.Busy("another process is writing the semantic index")
        return _rebuild_locked(root, without or set(), time.perf_counter())


def _rebuild_locked(root: str, without: set[Key], started: float) -> dict[str, Any]:
    import numpy as np
    from deltalake import DeltaTable

    from agentlog.search.delta import batches as _batches, delta as _delta, table_id as _table_id

    found = _delta(root)
    if found is None:
        _save_manifest(root, None, None, [])
        return {"embedded": 0, "rebuilt": True}
    from agentlog.search.retracted import in_store

    dt = DeltaTable(found[0])
    files = [u.removeprefix("file://") for u in dt.file_uris()]
    gone = in_store(found[0], files)  # first: a retraction may come after what it retracts
    vectors, keys, roles, _ = _embed_rows(_batches(found[0], files), without, gone)
    made, made_keys, made_extra = summaries.build(
        (k[0], k[1], str(x[0]), vectors[i]) for i, (k, x) in enumerate(zip(keys, roles, strict=True)))
    if made:
        vectors = np.concatenate([vectors, quantise(np.stack(made))])
    segments = [_new_segment(root, vectors, keys + made_keys, roles + made_extra)] if keys else []
    _save_manifest(root, dt.version(), _table_id(found[1]), segments, gone)
    return {"embedded": len(keys), "summaries": len(made_keys), "version": dt.version(), "rebuilt": True,
            "seconds": round(time.perf_counter() - started, 3)}


def forget(root: str, keys: set[Key]) -> int:
    """Remove the vectors of these events (before the store deletes them), and the turn summaries
    holding one (made again without it): the segments holding one are rewritten without it and
    the old files removed. How many were there."""
    if not keys or _manifest(root) is None:
        return 0
    with _locked(root, 600.0) as held:
        if not held:
            raise locks.Busy("another process is writing the semantic index")
        m = _manifest(root)
        if m is None:
            return 0
        segments, dropped, logs = _drop(root, list(m["segments"]), keys)
        segments = _summarise(root, segments, logs)
        _save_manifest(root, m.get("version"), m.get("table"), segments, Retracted.from_json(m.get("retracted")))
    return dropped


def remove(root: str) -> None:
    shutil.rmtree(path(root), ignore_errors=True)


# -- reading ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Loaded:
    """Every vector of the index, its key, the members of each summary, and the index's background
    scores (:mod:`.floor`)."""

    vectors: Any
    keys: list[Key]
    members: dict[Key, list[int]]
    background: Any

    @property
    def events(self) -> int:
        return len(self.keys) - len(self.members)


_LOADED: dict[str, tuple[tuple[int, int], Loaded]] = {}


def loaded(root: str) -> Loaded:
    """The index as its manifest names it (kept per process until the manifest changes)."""
    import numpy as np

    file = os.path.join(path(root), "manifest.json")
    try:
        st = os.stat(file)
    except FileNotFoundError:
        return Loaded(np.zeros((0, DIM), dtype=np.int8), [], {}, None)
    stamp = (st.st_ino, st.st_mtime_ns)
    kept = _LOADED.get(file)
    if kept is not None and kept[0] == stamp:
        return kept[1]
    m = _manifest(root) or {"segments": []}
    segments = [_load_segment(root, s) for s in m["segments"]]
    vectors = np.concatenate([v for v, _, _ in segments]) if segments else np.zeros((0, DIM), dtype=np.int8)
    keys = [k for _, ks, _ in segments for k in ks]
    members = {k: [int(s) for s in x[1]] for _, ks, xs in segments for k, x in zip(ks, xs, strict=True)
               if x[:1] == [summaries.SUMMARY]}
    backgrounds = [np.load(os.path.join(path(root), s + ".bg.npy"), allow_pickle=False) for s in m["segments"]]
    index = Loaded(vectors, keys, members, np.max(backgrounds, axis=0) if backgrounds else None)
    _LOADED[file] = (stamp, index)
    return index


def count(root: str) -> int:
    """Event vectors held (turn summaries not counted)."""
    return loaded(root).events


def floor(root: str, minimum: float) -> float:
    """The similarity a semantic candidate needs in this index, at least ``minimum`` (:mod:`.floor`)."""
    return background_floor.floor(loaded(root).background, minimum)


def nearest(root: str, query: np.ndarray, n: int,
            exclude: frozenset[Key] = frozenset()) -> tuple[list[tuple[float, Key]], float | None]:
    """The events nearest ``query`` (a unit vector) by cosine, best first, from the ``n`` nearest
    vectors (a turn summary's hit scoring each of its members, :func:`.summaries.expand`); and the
    ``n``-th vector's score (None when the index holds no more than ``n``: none further)."""
    index = loaded(root)
    found = ranked(index.vectors, query, n)
    last = found[-1][0] if found and len(index.keys) > n else None
    return summaries.expand(((s, index.keys[i]) for s, i in found), index.members, exclude), last


def signs(vectors: np.ndarray) -> np.ndarray:
    """Each vector's sign bits, packed (``uint64``, four a 256-dimension vector)."""
    import numpy as np

    return np.packbits(vectors > 0, axis=-1).view(np.uint64)


_SIGNS: dict[int, tuple[Any, Any]] = {}


def ranked(vectors: np.ndarray, query: np.ndarray, n: int, exact_max: int = EXACT_MAX) -> list[tuple[float, int]]:
    """The ``n`` rows of ``vectors`` (int8) nearest ``query`` by cosine, best first: each scored
    exactly up to ``exact_max`` rows, past it only the best by Hamming distance of their signs."""
    import numpy as np

    if not len(vectors) or n <= 0:
        return []
    q = query.astype(np.float32) / 127.0
    n = min(n, len(vectors))
    if len(vectors) > exact_max and 8 * n < len(vectors):
        kept = _SIGNS.get(id(vectors))
        if kept is None or kept[0] is not vectors:
            kept = _SIGNS[id(vectors)] = (vectors, signs(vectors))
            for other in [k for k, v in _SIGNS.items() if v[0] is not vectors]:
                del _SIGNS[other]  # one matrix's signs kept: the current one
        distance = np.bitwise_count(kept[1] ^ signs(query.reshape(1, -1))).sum(axis=1, dtype=np.uint16)
        want = min(max(RERANK, 8 * n), len(vectors))
        rows = np.argpartition(distance, want - 1)[:want]
        scores = vectors[rows].astype(np.float32) @ q
    else:
        rows = np.arange(len(vectors))
        scores = np.empty(len(vectors), dtype=np.float32)
        for start in range(0, len(vectors), BLOCK):
            scores[start:start + BLOCK] = vectors[start:start + BLOCK].astype(np.float32) @ q
    top = np.argpartition(-scores, n - 1)[:n]
    top = top[np.argsort(-scores[top], kind="stable")]
    return [(float(scores[i]), int(rows[i])) for i in top]


def vector_of(root: str, key: Key) -> np.ndarray | None:
    """The stored vector of this event (as float32, scaled back to about unit length)."""
    import numpy as np

    index = loaded(root)
    for i, k in enumerate(index.keys):
        if k == key:
            found: np.ndarray = index.vectors[i].astype(np.float32) / 127.0
            return found
    return None


def stats(root: str) -> dict[str, Any]:
    """Vectors held and bytes on disk."""
    m = _manifest(root)
    size = sum(os.path.getsize(os.path.join(path(root), f)) for f in os.listdir(path(root))) \
        if os.path.isdir(path(root)) else 0
    index = loaded(root)
    return {"vectors": index.events if m else 0, "summaries": len(index.members) if m else 0, "bytes": size,
            "model": MODEL,
            "version": m.get("version") if m else None}


__all__ = ["ENABLE", "KINDS", "MODEL", "Loaded", "SemanticUnavailable", "available", "catch_up", "chunk_text", "count",
           "embed", "embed_quantised", "floor", "forget", "loaded", "nearest", "ranked", "rebuild", "remove", "require", "signs", "stats",
           "vector_of"]
