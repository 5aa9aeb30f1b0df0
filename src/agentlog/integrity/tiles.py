"""The Merkle tree's hashes on disk, append-only: one file per tile level.

A level-file equivalent of the C2SP tlog-tiles layout (https://c2sp.org/tlog-tiles,
tile height 8), under the store's directory:

- ``level/<L>``: the hashes of tree level ``8·L``, 32 bytes each, in order. Level 0
  holds the leaf hashes; a hash on level ``L + 1`` is the root of a full tile (256
  hashes) of level ``L``. Tile ``(L, N)`` of tlog-tiles is bytes
  ``8192·N … 8192·N + 8191`` of ``level/<L>`` (:meth:`TileStore.read_tile`); the
  partial tile at a level's right edge is what follows the last full one.
- ``tree-size``: ``"<size> <root hex>\\n"``, the committed tree. It is written
  last, atomically, after every hash it needs (fsynced first when the store is
  durable). Bytes beyond what it covers are not part of the tree: after a crash at
  any point, reopening gives the tree of the last commit, and the next append
  overwrites whatever the crash left there.

An append writes each level's new hashes with one positioned write; no file is
created after the first (a file per tile cost 0.35–0.9 ms each to create here, most
of the tree's share of ingest). Nothing else is stored: the levels between two tile
levels are rebuilt from one tile when a proof needs them (at most 255 hashes), and
the leaves are our log frames, so there are no data tiles. Hashes cost
``32·(1 + 1/256 + …)`` ≈ 32.13 bytes a leaf.

One writer at a time: the caller serialises appends (the ingest lock). Readers in
other processes see the tree committed when they opened (or last called
:meth:`TileStore.refresh`); a writer only ever writes beyond that.
"""

from __future__ import annotations

import os
import shutil
from collections import OrderedDict
from hashlib import sha256
from typing import Final, Sequence

from agentlog.core import AgentlogError
from agentlog.core.fileio import write_atomic
from agentlog.core.paths import ensure_dir, fsync_path
from agentlog.integrity import merkle

TILE_HEIGHT: Final = 8
TILE_WIDTH: Final = 1 << TILE_HEIGHT
"""Hashes in a full tile."""
TILE_BYTES: Final = TILE_WIDTH * merkle.HASH_SIZE
SIZE_FILE: Final = "tree-size"
"""The committed size and root, in the store's directory."""
LEVEL_DIR: Final = "level"
OLD_TILE_DIR: Final = "tile"
"""The first layout's directory (a file per tile), moved to level files on open."""
CACHED_TILES: Final = 64
"""Full tiles whose inner levels are kept in memory (~40 KB each)."""

TileLevels = list[list[bytes]]
"""One tile and the complete nodes above it inside the tile: ``levels[0]`` are
the tile's hashes, ``levels[h]`` the complete nodes ``h`` levels up (``h`` ≤ 8;
``levels[8]`` is the full tile's root)."""


class TilesDamaged(AgentlogError, RuntimeError):
    """A level file the committed tree needs is missing or too short, or the size record
    is malformed: exit 1. The tree is derived from the logs; rebuilding it repairs this."""


def level_path(level: int) -> str:
    """The file of tile level ``level`` under the store's directory, ``/``-separated."""
    if level < 0:
        raise ValueError(f"no tile level {level}")
    return f"{LEVEL_DIR}/{level}"


def tile_name(level: int, index: int) -> str:
    """How reports name tile ``(level, index)``: its tlog-tiles coordinates and file."""
    return f"tile {level}/{index} ({level_path(level)} at {index * TILE_BYTES})"


def _extend_levels(levels: TileLevels, hashes: Sequence[bytes]) -> None:
    """Add ``hashes`` to a tile and compute the complete nodes they finish."""
    levels[0].extend(hashes)
    for height in range(TILE_HEIGHT):
        below, above = levels[height], levels[height + 1]
        pending = iter(below[2 * len(above) :])
        finished = [sha256(b"\x01" + left + right).digest() for left, right in zip(pending, pending)]
        if not finished:
            break
        above.extend(finished)


def _tile_levels(hashes: Sequence[bytes]) -> TileLevels:
    levels: TileLevels = [[] for _ in range(TILE_HEIGHT + 1)]
    _extend_levels(levels, hashes)
    return levels


def _old_tile(directory: str, index: int, width: int) -> bytes:
    """Level-0 tile ``index`` of the first layout (``tile/0/x001/234`` full, ``….p/<width>``
    partial), its first ``width`` hashes."""
    digits = str(index)
    digits = digits.zfill(max(3, -(-len(digits) // 3) * 3))
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    name = "/".join([f"x{g}" for g in groups[:-1]] + groups[-1:])
    want = width * merkle.HASH_SIZE
    for candidate in [name] + ([f"{name}.p/{width}"] if width < TILE_WIDTH else []):
        try:
            with open(os.path.join(directory, "0", candidate), "rb") as fh:
                data = fh.read(TILE_BYTES)
        except FileNotFoundError:
            continue
        if len(data) >= want:
            return data[:want]
    raise TilesDamaged(f"{directory}/0 has no tile {name} of {width} hashes")


def _split_hashes(data: bytes) -> list[bytes]:
    size = merkle.HASH_SIZE
    return [data[i : i + size] for i in range(0, len(data), size)]


class TileStore:
    """The append-only store of one Merkle tree in ``directory``, a file per tile level.

    Opening reads only the size record; the partial tiles at the edges (one per tile
    level) are read the first time something needs them."""

    def __init__(self, directory: str, *, durable: bool = True) -> None:
        self.directory = directory
        self.durable = durable
        """Fsync the level files before the commit and the commit itself: the tree
        survives a power loss, not only a killed process."""
        self._size = 0
        self._root = merkle.EMPTY_ROOT
        self._edges: dict[int, TileLevels] | None = None  # tile level -> its rightmost, incomplete tile
        self._full_tiles: OrderedDict[tuple[int, int], TileLevels] = OrderedDict()
        self._read_size_record()
        if self._size and os.path.isdir(os.path.join(directory, OLD_TILE_DIR)):
            self._from_tile_files()

    def _from_tile_files(self) -> None:
        """Move a tree written in a file per tile (the first layout, before 2026-12-07) to a
        file per level: its leaf hashes are appended again and must give the committed root."""
        size, root = self._size, self._root
        old = os.path.join(self.directory, OLD_TILE_DIR)
        hashes: list[bytes] = []
        for index in range(-(-size // TILE_WIDTH)):
            width = min(TILE_WIDTH, size - index * TILE_WIDTH)
            hashes.extend(_split_hashes(_old_tile(old, index, width)))
        self._size, self._root, self._edges = 0, merkle.EMPTY_ROOT, None
        self._append(hashes)
        if (self._size, self._root) != (size, root):
            raise TilesDamaged(f"the tiles in {old} do not give the committed root; rebuild the tree")
        shutil.rmtree(old, ignore_errors=True)

    # -- the committed tree ------------------------------------------------------------

    @property
    def size(self) -> int:
        """Leaves in the committed tree."""
        return self._size

    def refresh(self) -> int:
        """Read the size record again (another process may have appended); the new size."""
        self._read_size_record()
        return self._size

    def _read_size_record(self) -> None:
        self._edges = None
        try:
            with open(os.path.join(self.directory, SIZE_FILE), "rb") as fh:
                record = fh.read(200)
        except FileNotFoundError:
            self._size, self._root = 0, merkle.EMPTY_ROOT
            return
        fields = record.split()
        try:
            size, root = int(fields[0]), bytes.fromhex(fields[1].decode("ascii"))
        except (IndexError, ValueError, UnicodeDecodeError):
            size, root = -1, b""
        if size < 0 or len(root) != merkle.HASH_SIZE or len(fields) != 2 or not record.endswith(b"\n"):
            raise TilesDamaged(f"{os.path.join(self.directory, SIZE_FILE)} is not '<size> <root hex>'")
        self._size, self._root = size, root

    def root(self, size: int | None = None) -> bytes:
        """The root of the tree of the first ``size`` leaves (default: all)."""
        if size is None or size == self._size:
            return self._root
        return merkle.root(self._check_size(size), self.hash_at)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """Leaf ``index``'s inclusion path in the tree of ``size`` leaves (default: all)."""
        return merkle.inclusion_proof(index, self._check_size(size), self.hash_at)

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> list[bytes]:
        """The proof that the tree of ``old_size`` leaves is a prefix of the one of
        ``new_size`` leaves (default: all)."""
        return merkle.consistency_proof(old_size, self._check_size(new_size), self.hash_at)

    def _check_size(self, size: int | None) -> int:
        if size is None:
            return self._size
        if not 0 <= size <= self._size:
            raise ValueError(f"tree size {size} is not between 0 and {self._size}")
        return size

    def level_count(self, level: int) -> int:
        """Hashes on tile level ``level`` in the committed tree."""
        return self._size >> (TILE_HEIGHT * level)

    def hash_at(self, level: int, index: int) -> bytes:
        """The hash of the complete node ``(level, index)`` of the committed tree
        (:data:`agentlog.integrity.merkle.SubtreeHashes`): one tile read, at most."""
        if level < 0 or index < 0 or (index + 1) << level > self._size:
            raise IndexError(f"no complete node ({level}, {index}) in a tree of {self._size} leaves")
        tile_level, height = divmod(level, TILE_HEIGHT)
        first = index << height  # the node's first descendant on the tile level
        levels = self._tile_nodes(tile_level, first >> TILE_HEIGHT)
        return levels[height][(first % TILE_WIDTH) >> height]

    def read_tile(self, level: int, index: int, width: int = TILE_WIDTH) -> bytes:
        """The bytes of tlog-tiles tile ``(level, index)`` of width ``width``: only what
        the committed tree covers."""
        if level < 0 or index < 0 or not 1 <= width <= TILE_WIDTH:
            raise ValueError(f"no tile at level {level}, index {index}, width {width}")
        if index * TILE_WIDTH + width > self.level_count(level):
            raise IndexError(f"tile ({level}, {index}) of width {width} is beyond the tree of {self._size} leaves")
        return self.read_level(level, index * TILE_WIDTH, width)

    def read_level(self, level: int, start: int, count: int) -> bytes:
        """``count`` hashes of tile level ``level`` from hash ``start`` (within the committed tree)."""
        path = os.path.join(self.directory, level_path(level))
        want = count * merkle.HASH_SIZE
        try:
            with open(path, "rb") as fh:
                data = os.pread(fh.fileno(), want, start * merkle.HASH_SIZE)
        except FileNotFoundError:
            data = b""
        if len(data) != want:
            raise TilesDamaged(f"{path} is missing or shorter than the committed tree needs "
                               f"({start + count} hashes of level {level})")
        return data

    # -- reading tiles -----------------------------------------------------------------

    def _tile_nodes(self, level: int, index: int) -> TileLevels:
        edges = self._edge_tiles()
        if index == self.level_count(level) >> TILE_HEIGHT:
            return edges[level]
        key = (level, index)
        cached = self._full_tiles.get(key)
        if cached is not None:
            self._full_tiles.move_to_end(key)
            return cached
        levels = _tile_levels(_split_hashes(self.read_level(level, index * TILE_WIDTH, TILE_WIDTH)))
        self._cache_full_tile(key, levels)
        return levels

    def _cache_full_tile(self, key: tuple[int, int], levels: TileLevels) -> None:
        self._full_tiles[key] = levels
        self._full_tiles.move_to_end(key)
        while len(self._full_tiles) > CACHED_TILES:
            self._full_tiles.popitem(last=False)

    def _edge_tiles(self) -> dict[int, TileLevels]:
        """The rightmost incomplete tile of every tile level (empty where the level
        ends on a tile boundary), read on first use."""
        if self._edges is None:
            edges: dict[int, TileLevels] = {}
            level = 0
            while True:
                count = self.level_count(level)
                width = count % TILE_WIDTH
                hashes = _split_hashes(self.read_level(level, count - width, width)) if width else []
                edges[level] = _tile_levels(hashes)
                if count < TILE_WIDTH:
                    break
                level += 1
            self._edges = edges
        return self._edges

    # -- appending ---------------------------------------------------------------------

    def append(self, leaf_hashes: Sequence[bytes]) -> int:
        """Add leaves (their 32-byte hashes) and commit; return the new size.

        Costs ``O(k + log n)`` hashes for ``k`` leaves and one write per tile level:
        the edge tiles are extended, the new hashes of each level are written after the
        committed ones, then the size record. On an error the store is left at its
        last commit."""
        hashes = list(leaf_hashes)
        if not hashes:
            return self._size
        if set(map(type, hashes)) != {bytes} or set(map(len, hashes)) != {merkle.HASH_SIZE}:
            raise ValueError(f"every leaf hash must be {merkle.HASH_SIZE} bytes")
        try:
            return self._append(hashes)
        except BaseException:
            self._full_tiles.clear()
            self._read_size_record()  # back to the last commit
            raise

    def _append(self, hashes: list[bytes]) -> int:
        old_size = self._size
        edges = self._edge_tiles()
        ensure_dir(os.path.join(self.directory, LEVEL_DIR))
        written: list[str] = []
        incoming = hashes
        level = 0
        while incoming:
            levels = edges.setdefault(level, _tile_levels([]))
            count = old_size >> (TILE_HEIGHT * level)
            index = count >> TILE_HEIGHT
            written.append(self._write_level(level, count, incoming))
            roots: list[bytes] = []
            position = 0
            while position < len(incoming):
                take = incoming[position : position + TILE_WIDTH - len(levels[0])]
                position += len(take)
                _extend_levels(levels, take)
                if len(levels[0]) == TILE_WIDTH:
                    roots.append(levels[TILE_HEIGHT][0])
                    self._cache_full_tile((level, index), levels)
                    index += 1
                    levels = _tile_levels([])
            edges[level] = levels
            incoming = roots
            level += 1
        if self.durable:
            for path in written:
                fsync_path(path)
            fsync_path(os.path.join(self.directory, LEVEL_DIR))
        self._size = old_size + len(hashes)
        self._root = merkle.root(self._size, self.hash_at)
        record = f"{self._size} {self._root.hex()}\n".encode("ascii")
        write_atomic(os.path.join(self.directory, SIZE_FILE), record, durable=self.durable)
        return self._size

    def _write_level(self, level: int, count: int, hashes: Sequence[bytes]) -> str:
        """Write ``hashes`` as hashes ``count …`` of level ``level`` (after the committed ones)."""
        path = os.path.join(self.directory, level_path(level))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.pwrite(fd, b"".join(hashes), count * merkle.HASH_SIZE)
        finally:
            os.close(fd)
        return path


__all__ = ["LEVEL_DIR", "SIZE_FILE", "TILE_BYTES", "TILE_HEIGHT", "TILE_WIDTH", "TileLevels", "TileStore",
           "TilesDamaged", "level_path", "tile_name"]
