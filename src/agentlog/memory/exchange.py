"""Export and import of the memory: byte-stable files a git repository diffs well.

``export DIR`` writes:

- ``memories/<kind>/<slug>.md``: one file per memory (deleted ones left out),
  TOML front matter between ``+++`` lines with every field (keys sorted), then
  its markdown content;
- ``events.ndjson``: every event of the memory log, in log order, each exactly
  the bytes its frame holds;
- ``manifest.json``: the format, counts, and the SHA-256 of every other file.

Nothing in them depends on when or where the export ran, so exporting twice
gives identical bytes. ``import DIR --restore`` (into a memory with no events
yet) checks the checksums and appends the events as they are — the same ids,
so the same state, and exporting again gives the same bytes. A plain import
opens one proposal creating the memories of the directory's markdown files,
with their slugs (made unique when merged, as every proposal's).

Slugs are unique (:func:`.service.free_slug`), so one memory is one file. A
read model replayed from a log written before they were (two memories of one
kind and slug) still exports every memory: the second file is
``<slug>.<id>.md``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from typing import Any, Final

from agentlog.core import AgentlogError
from agentlog.memory.store import PROVIDER, LOG_KEY, connect, log_path

FORMAT: Final = 1


class ExchangeError(AgentlogError, ValueError):
    """An export directory that cannot be read or restored (the message says why)."""


@functools.lru_cache(maxsize=4096)
def _key(k: str) -> str:
    """A TOML key: bare when it can be, else quoted (the same few keys come back on every memory)."""
    return k if k and all(c.isascii() and (c.isalnum() or c in "_-") for c in k) else json.dumps(k)


def _toml(v: Any) -> str:
    """A value as TOML (strings as basic strings — JSON's escapes are TOML's — numbers as
    Python writes them, tables inline, keys sorted): fast and byte-stable."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v if x is not None) + "]"
    if isinstance(v, dict):
        items = [f"{_key(str(k))} = {_toml(x)}" for k, x in sorted(v.items()) if x is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")  # pragma: no cover


@functools.lru_cache(maxsize=4096)
def _toml_of_json(text: str) -> str:
    """A JSON column of the read model as TOML (the same few attribute sets, tag lists, lifetimes
    and visibilities come back on many memories: each is converted once)."""
    return _toml(json.loads(text))


_STR: Final = json.encoder.encode_basestring
"""``json.dumps(s, ensure_ascii=False)`` of a string, without the encoder around it."""


def _memory_file(r: tuple[Any, ...], evidence: list[str], links: list[list[str]]) -> str:
    """A memory's file (``r``: the row in :data:`_EXPORTED` order): TOML front matter of all its
    fields — keys in sorted order, written out here (one format string per key), a None left
    out — then its content."""
    (mid, kind, title, slug, content, attributes, tags, confidence, author, created_at, updated_at, confirmed,
     lifetime, visibility, archived, pinned, version) = r
    lines = [f"archived = {'true' if archived else 'false'}\n", f"attributes = {_toml_of_json(attributes)}\n",
             f"author = {_STR(author)}\n", f"confidence = {confidence!r}\n", f"created_at = {created_at!r}\n",
             "evidence = [" + ", ".join(_toml_of_json(e) for e in evidence) + "]\n", f"id = {_STR(mid)}\n",
             f"kind = {_STR(kind)}\n", f"last_confirmed_at = {confirmed!r}\n" if confirmed is not None else "",
             f"lifetime = {_toml_of_json(lifetime)}\n",
             "links = [" + ", ".join(f"{{ relation = {_STR(rel)}, target = {_STR(t)} }}" for rel, t in links) + "]\n",
             f"pinned = {'true' if pinned else 'false'}\n", f"slug = {_STR(slug)}\n", f"tags = {_toml_of_json(tags)}\n",
             f"title = {_STR(title)}\n", f"updated_at = {updated_at!r}\n", f"version = {version!r}\n",
             f"visibility = {_toml_of_json(visibility)}\n"]
    return "+++\n" + "".join(lines) + "+++\n\n" + (content or "") + "\n"


_EXPORTED: Final = ("id", "kind", "title", "slug", "content", "attributes", "tags", "confidence", "author", "created_at",
                    "updated_at", "last_confirmed_at", "lifetime", "visibility", "archived", "pinned", "version")


def _event_lines(root: str) -> list[bytes]:
    from agentlog.log.frame import event_bytes, is_purged
    from agentlog.log.segments import lines_from

    path = log_path(root)
    if not os.path.exists(path):
        return []
    return [event_bytes(line) for _, line in lines_from(path, 0) if not is_purged(line)]


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)


def _write_if_changed(path: str, data: bytes, dirs: set[str], existed: bool) -> None:
    """``data`` at ``path`` unless the file already holds exactly it (a re-export then leaves
    unchanged files alone: their times too). ``existed``: the file was there when the export
    began (a file that was not is created without trying to read it first)."""
    try:
        if not existed:
            raise FileNotFoundError(path)
        with open(path, "rb") as fh:
            if fh.read(len(data) + 1) == data:
                return
    except FileNotFoundError:
        d = os.path.dirname(path)
        if d not in dirs:
            os.makedirs(d, exist_ok=True)
            dirs.add(d)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def export(root: str, out_dir: str) -> dict[str, Any]:
    """Write the memory to ``out_dir`` (replacing a previous export there: files that did not
    change are left as they are, files of memories gone are removed)."""
    from agentlog.memory.store import catch_up, locked

    with locked(root):
        con = connect(root)
        try:
            catch_up(root, con)
            rows = con.execute(f"SELECT {', '.join(_EXPORTED)} FROM memories WHERE deleted = 0 ORDER BY id").fetchall()
            evidence: dict[str, list[str]] = {}
            for mid, ref in con.execute("SELECT memory_id, ref FROM evidence ORDER BY memory_id, seq"):
                evidence.setdefault(mid, []).append(ref)
            links: dict[str, list[list[str]]] = {}
            for src, rel, target in con.execute("SELECT source, relation, target FROM links ORDER BY 1, 2, 3"):
                links.setdefault(src, []).append([rel, target])
            events = _event_lines(root)
        finally:
            con.close()
    base = os.path.join(out_dir, "memories")
    before = {os.path.relpath(os.path.join(d, f), out_dir) for d, _, fs in os.walk(base) for f in fs}
    dirs: set[str] = set()
    files: dict[str, str] = {}
    for r in rows:
        rel_path = f"memories/{r[1]}/{r[3]}.md"
        if rel_path in files:  # a slug two memories share (a log written before slugs were unique): both kept
            rel_path = f"memories/{r[1]}/{r[3]}.{r[0]}.md"
        data = _memory_file(r, evidence.get(r[0], []), links.get(r[0], [])).encode("utf-8")
        _write_if_changed(os.path.join(out_dir, rel_path), data, dirs, rel_path in before)
        files[rel_path] = hashlib.sha256(data).hexdigest()
    for gone in sorted(before - set(files)):
        os.remove(os.path.join(out_dir, gone))
    for d, _, _ in sorted(os.walk(base, topdown=False), reverse=True):  # (deepest first)
        if not os.listdir(d):
            os.rmdir(d)
    ndjson = b"".join(e + b"\n" for e in events)
    _write(os.path.join(out_dir, "events.ndjson"), ndjson)
    files["events.ndjson"] = hashlib.sha256(ndjson).hexdigest()
    manifest = {"format": FORMAT, "memories": len(rows), "events": len(events), "files": dict(sorted(files.items()))}
    _write(os.path.join(out_dir, "manifest.json"), (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
    return manifest


def _manifest(src: str) -> dict[str, Any]:
    from agentlog.core.jsonio import read_json  # (orjson: not for importing this module)

    try:
        manifest = read_json(os.path.join(src, "manifest.json"))
    except (OSError, ValueError) as e:
        raise ExchangeError(f"{src}: no readable manifest.json ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ExchangeError(f"{src}: not an agentlog memory export of format {FORMAT}")
    for rel, digest in (manifest.get("files") or {}).items():
        path = os.path.join(src, rel)
        if ".." in rel.split("/") or not os.path.isfile(path):
            raise ExchangeError(f"{src}: {rel} is missing")
        with open(path, "rb") as fh:
            if hashlib.sha256(fh.read()).hexdigest() != digest:
                raise ExchangeError(f"{src}: {rel} does not match its checksum (edited after export?)")
    return manifest


def restore(root: str, src: str) -> int:
    """The export's events appended to an empty memory; how many. Python's cycle collector is
    paused meanwhile: every event is held parsed until all are checked (nothing is written
    unless all are good), and the collector's full passes over that growing heap cost a sixth
    of a restore of 100,000 memories (a fresh process each, 3 rounds interleaved with the code
    before: 5.36 / 5.38 / 5.56 s → 4.40 / 4.52 / 4.69 s; 1,000: 75–96 → 59–80 ms). The events
    are plain dicts and lists: no cycle waits on it."""
    import gc

    paused = gc.isenabled()
    gc.disable()
    try:
        return _restore(root, src)
    finally:
        if paused:
            gc.enable()


def _restore(root: str, src: str) -> int:
    from agentlog.log.writer import SessionLog
    from agentlog.memory.store import (
        _applied,
        _durability,
        _fold,
        locked,
        _log_stamp,
        _parse_all,
        bulk_cache,
        catch_up,
    )

    manifest = _manifest(src)
    with open(os.path.join(src, "events.ndjson"), "rb") as fh:
        lines = [line for line in fh.read().split(b"\n") if line.strip()]
    if len(lines) != manifest.get("events"):
        raise ExchangeError(f"{src}: events.ndjson holds {len(lines)} events, the manifest says {manifest.get('events')}")
    parsed: list[Any] = []
    for at in range(0, len(lines), 1000):  # a thousand parsed per call (a call per line costs more than parsing)
        chunk = lines[at:at + 1000]
        try:
            events = _parse_all(chunk)
            parsed += events
        except ValueError:
            bad = next(i for i, line in enumerate(chunk, at + 1) if not _is_json(line))
            raise ExchangeError(f"{src}: events.ndjson line {bad} is not JSON") from None
        for i, ev in enumerate(events, at + 1):
            if not isinstance(ev, dict) or ev.get("kind") != "memory":
                raise ExchangeError(f"{src}: events.ndjson line {i} is not a memory event")
    with locked(root):
        if _event_lines(root):
            raise ExchangeError("the memory already has events: --restore goes into an empty memory "
                                "(a plain import opens proposals instead)")
        # as every memory write (the durability setting), hashed as bulk writers hash (OpenSSL)
        log = SessionLog(root, PROVIDER, LOG_KEY, session_id=LOG_KEY, durability=_durability(root),
                         hasher=hashlib.sha256)
        before = os.path.getsize(log_path(root)) if os.path.exists(log_path(root)) else 0
        end, repaired = 0, False
        for i in range(0, len(lines), 10_000):
            res = log.append(lines[i:i + 10_000])
            end, repaired = end + res.written, repaired or bool(res.gaps)
        con = connect(root)
        try:
            with bulk_cache(con):
                if repaired or before or _applied(con):  # the log held more than these frames: read it back
                    catch_up(root, con)
                else:  # exactly these frames, from an empty log: fold what was parsed above, as a replay would
                    path = os.path.abspath(log_path(root))
                    _fold(con, ((end, ev) for ev in parsed), path, _log_stamp(path))
        finally:
            con.close()
    return len(lines)


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def read_markdown(path: str) -> dict[str, Any]:
    """A memory file of an export: its front matter and content."""
    import tomllib

    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    if not text.startswith("+++\n"):
        raise ExchangeError(f"{path}: no +++ front matter")
    end = text.find("\n+++\n", 3)
    if end < 0:
        raise ExchangeError(f"{path}: front matter not closed")
    try:
        front = tomllib.loads(text[4:end + 1])
    except tomllib.TOMLDecodeError as e:
        raise ExchangeError(f"{path}: {e}") from None
    content = text[end + 5:]
    content = content[1:] if content.startswith("\n") else content
    front["content"] = content[:-1] if content.endswith("\n") else content
    return front


def _portable(ref: dict[str, Any]) -> dict[str, Any]:
    """Evidence naming a recorded thing of another history becomes a quote that says so
    (this history may not hold it, and such evidence must exist where it is added)."""
    if ref.get("type") in ("event", "attempt", "session", "tool_call"):
        return {"type": "quote", "value": f"{ref['type']} {ref.get('value')} (recorded elsewhere)"}
    return ref


def import_as_proposal(root: str, src: str, *, actor: str = "import") -> Any:
    """Open one proposal creating the memories of ``src``'s markdown files."""
    from agentlog.memory.proposals import open_proposal

    manifest = _manifest(src)
    changes = []
    base = os.path.join(src, "memories")
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(".md"):
                continue
            m = read_markdown(os.path.join(dirpath, name))
            changes.append({"op": "create", "kind": m.get("kind"), "title": m.get("title"), "content": m["content"],
                            "slug": m.get("slug"), "attributes": m.get("attributes") or {}, "tags": m.get("tags") or [],
                            "evidence": [_portable(e) for e in m.get("evidence") or []]})
    if not changes:
        raise ExchangeError(f"{src}: no memories to import")
    if len(changes) != manifest.get("memories"):
        # an export by an older agentlog wrote memories sharing a slug to one file (the last one won)
        raise ExchangeError(f"{src}: the manifest counts {manifest.get('memories')} memories, its files hold "
                            f"{len(changes)} (an export that wrote memories sharing a slug to one file); its events "
                            "hold them all: `agentlog memory import --restore` into an empty memory, then export again")
    return open_proposal(root, changes, title=f"import {len(changes)} memories from {os.path.basename(src)}",
                         actor=actor)
