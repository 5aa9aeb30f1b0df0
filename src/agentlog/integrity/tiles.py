"""The Merkle tree's hashes on disk, append-only, in the C2SP tlog-tiles layout.

Under the store's directory (https://c2sp.org/tlog-tiles, tile height 8):

- ``tile/<L>/<N>``: a full tile, the 256 hashes (8,192 bytes) of tree level
  ``8·L``, nodes ``256·N`` to ``256·N + 255``. Level 0 holds the leaf hashes; a
  hash of tile level ``L + 1`` is the root of a full tile of level ``L``.
  ``N`` is written in three-digit path elements, all but the last prefixed
  with ``x`` (1234067 is ``x001/x234/067``). Written once, never changed.
- ``tile/<L>/<N>.p/<W>``: the partial tile at the right edge of a level, its
  first ``W`` hashes (1 ≤ W ≤ 255). Replaced by a wider one (or by the full
  tile) as the tree grows; the superseded one is removed after the commit.
- ``tree-size``: ``"<size> <root hex>\\n"``, the committed tree. It is written
  last, atomically, after every tile it needs (fsynced first when the store is
  durable). A tile beyond it is not part of the tree: after a crash at any
  point, reopening gives the tree of the last commit, and the next append
  overwrites whatever the crash left beyond it.

Nothing else is stored: the levels between two tile levels are rebuilt from one
tile when a proof needs them (at most 255 hashes), and the leaves are our log
frames, so there are no data tiles. Hashes cost ``32·(1 + 1/256 + …)`` ≈ 32.13
bytes a leaf, plus the partial tiles at the edges.

Every tile written by any writer extends the committed tree, so the first ``W``
hashes of a wider partial tile, or of the full tile, are the partial tile of
width ``W``. A reader whose partial tile has been superseded meanwhile reads
that prefix instead.

One writer at a time: the caller serialises appends (the log's lock, or its
own). Readers in other processes see the tree committed when they opened (or
last called :meth:`TileStore.refresh`).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from hashlib import sha256
from typing import Final, Sequence

from agentlog.core import AgentlogError
from agentlog.core.fileio import TMP_SUFFIX, atomic_writer, write_atomic
from agentlog.core.paths import ensure_dir, fsync_path
from agentlog.integrity import merkle

TILE_HEIGHT: Final = 8
TILE_WIDTH: Final = 1 << TILE_HEIGHT
"""Hashes in a full tile."""
TILE_BYTES: Final = TILE_WIDTH * merkle.HASH_SIZE
SIZE_FILE: Final = "tree-size"
"""The committed size and root, in the store's directory."""
CACHED_TILES: Final = 64
"""Full tiles whose inner levels are kept in memory (~40 KB each)."""

TileLevels = list[list[bytes]]
"""One tile and the complete nodes above it inside the tile: ``levels[0]`` are
the tile's hashes, ``levels[h]`` the complete nodes ``h`` levels up (``h`` ≤ 8;
``levels[8]`` is the full tile's root)."""


class TilesDamaged(AgentlogError, RuntimeError):
    """A tile the committed tree needs, or the size record, is missing or malformed:
    exit 1. The tree is derived from the logs; rebuilding it repairs this."""


def tile_path(level: int, index: int, width: int = TILE_WIDTH) -> str:
    """The tile's path under the store's directory, ``/``-separated:
    ``tile/<level>/<index>`` or, for a partial tile, ``tile/<level>/<index>.p/<width>``."""
    if level < 0 or index < 0 or not 1 <= width <= TILE_WIDTH:
        raise ValueError(f"no tile at level {level}, index {index}, width {width}")
    digits = str(index)
    digits = digits.zfill(max(3, -(-len(digits) // 3) * 3))
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    elements = [f"x{g}" for g in groups[:-1]] + groups[-1:]
    partial = "" if width == TILE_WIDTH else f".p/{width}"
    return f"tile/{level}/{'/'.join(elements)}{partial}"


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


def _partial_dir(level: int, index: int) -> str:
    """The directory of the partial tiles of ``(level, index)``: ``tile/<level>/<index>.p``."""
    return f"{tile_path(level, index)}.p"


def _split_hashes(data: bytes) -> list[bytes]:
    size = merkle.HASH_SIZE
    return [data[i : i + size] for i in range(0, len(data), size)]


class TileStore:
    """The tiled, append-only store of one Merkle tree in ``directory``.

    Opening reads only the size record; the partial tiles at the edges (one
    per tile level) are read the first time something needs them."""

    def __init__(self, directory: str, *, durable: bool = True) -> None:
        self.directory = directory
        self.durable = durable
        """Fsync the tiles before the commit and the commit itself: the tree
        survives a power loss, not only a killed process."""
        self._size = 0
        self._root = merkle.EMPTY_ROOT
        self._edges: dict[int, TileLevels] | None = None  # tile level -> its rightmost, incomplete tile
        self._full_tiles: OrderedDict[tuple[int, int], TileLevels] = OrderedDict()
        self._read_size_record()

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
        """The bytes of tile ``(level, index)`` of width ``width`` (for serving the
        tiles to others): only what the committed tree covers."""
        if level < 0 or index < 0 or not 1 <= width <= TILE_WIDTH:
            raise ValueError(f"no tile at level {level}, index {index}, width {width}")
        if index * TILE_WIDTH + width > self._size >> (TILE_HEIGHT * level):
            raise IndexError(f"tile ({level}, {index}) of width {width} is beyond the tree of {self._size} leaves")
        return b"".join(self._tile_nodes(level, index)[0][:width])

    # -- reading tiles -----------------------------------------------------------------

    def _tile_nodes(self, level: int, index: int) -> TileLevels:
        edges = self._edge_tiles()
        if index == (self._size >> (TILE_HEIGHT * level)) >> TILE_HEIGHT:
            return edges[level]
        key = (level, index)
        cached = self._full_tiles.get(key)
        if cached is not None:
            self._full_tiles.move_to_end(key)
            return cached
        path = os.path.join(self.directory, tile_path(level, index))
        try:
            with open(path, "rb") as fh:
                data = fh.read(TILE_BYTES + 1)
        except FileNotFoundError:
            data = b""
        if len(data) != TILE_BYTES:
            raise TilesDamaged(f"{path} is missing or is not {TILE_BYTES} bytes")
        levels = _tile_levels(_split_hashes(data))
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
                count = self._size >> (TILE_HEIGHT * level)
                width = count % TILE_WIDTH
                hashes = self._read_partial(level, count >> TILE_HEIGHT, width) if width else []
                edges[level] = _tile_levels(hashes)
                if count < TILE_WIDTH:
                    break
                level += 1
            self._edges = edges
        return self._edges

    def _read_partial(self, level: int, index: int, width: int) -> list[bytes]:
        """The partial tile, or the first ``width`` hashes of a tile that superseded
        it. A writer may supersede the wider one too while this looks (it renames
        the next tile in before removing the last): so the search is tried a few
        times before the tile counts as missing."""
        want = width * merkle.HASH_SIZE
        for _attempt in range(3):
            candidates = [(tile_path(level, index, width), want), (tile_path(level, index), TILE_BYTES)]
            try:
                names = os.listdir(os.path.join(self.directory, _partial_dir(level, index)))
            except OSError:
                names = []
            wider = sorted(int(n) for n in names if n.isdigit() and width < int(n) < TILE_WIDTH)
            candidates += [(tile_path(level, index, w), w * merkle.HASH_SIZE) for w in wider]
            for relative, length in candidates:
                try:
                    with open(os.path.join(self.directory, relative), "rb") as fh:
                        data = fh.read(TILE_BYTES + 1)
                except FileNotFoundError:
                    continue
                if len(data) == length:
                    return _split_hashes(data[:want])
        raise TilesDamaged(f"no tile in {self.directory} holds {tile_path(level, index, width)}")

    # -- appending ---------------------------------------------------------------------

    def append(self, leaf_hashes: Sequence[bytes]) -> int:
        """Add leaves (their 32-byte hashes) and commit; return the new size.

        Costs ``O(k + log n)`` hashes and file writes for ``k`` leaves: the edge
        tiles are extended, each tile that fills is written once, each edge
        tile that changed is written as a new partial tile, then the size
        record. On an error the store is left at its last commit."""
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
        written: list[str] = []
        touched: list[tuple[int, int, int]] = []  # edge tiles (and their width) to tidy after the commit
        incoming = hashes
        level = 0
        while incoming:
            levels = edges.setdefault(level, _tile_levels([]))
            index = (old_size >> (TILE_HEIGHT * level)) >> TILE_HEIGHT
            touched.append((level, index, len(levels[0])))
            roots: list[bytes] = []
            position = 0
            while position < len(incoming):
                take = incoming[position : position + TILE_WIDTH - len(levels[0])]
                position += len(take)
                _extend_levels(levels, take)
                if len(levels[0]) == TILE_WIDTH:
                    written.append(self._write_tile(level, index, TILE_WIDTH, levels[0]))
                    roots.append(levels[TILE_HEIGHT][0])
                    self._cache_full_tile((level, index), levels)
                    index += 1
                    levels = _tile_levels([])
            if levels[0]:
                written.append(self._write_tile(level, index, len(levels[0]), levels[0]))
            edges[level] = levels
            incoming = roots
            level += 1
        if self.durable:
            self._sync(written)
        self._size = old_size + len(hashes)
        self._root = merkle.root(self._size, self.hash_at)
        record = f"{self._size} {self._root.hex()}\n".encode("ascii")
        write_atomic(os.path.join(self.directory, SIZE_FILE), record, durable=self.durable)
        for level, index, old_width in touched:
            self._remove_partials(level, index, old_width)
        return self._size

    def _sync(self, written: list[str]) -> None:
        """Fsync the new tiles and every directory between them and the store's
        (a directory made by this append is an entry in its parent)."""
        for path in written:
            fsync_path(path)
        top = os.path.normpath(self.directory)
        directories: set[str] = set()
        for path in written:
            directory = os.path.dirname(path)
            while directory not in directories and len(directory) > len(top):
                directories.add(directory)
                directory = os.path.dirname(directory)
        for directory in sorted(directories, key=len, reverse=True):
            fsync_path(directory)

    def _write_tile(self, level: int, index: int, width: int, hashes: Sequence[bytes]) -> str:
        path = os.path.join(self.directory, tile_path(level, index, width))
        ensure_dir(os.path.dirname(path))
        with atomic_writer(path, durable=False) as fh:
            fh.write(b"".join(hashes[:width]))
        return path

    def _remove_partials(self, level: int, index: int, old_width: int) -> None:
        """After a commit, remove what is no longer part of the tree at edge tile
        ``(level, index)``: the partial tiles other than the current one, and a
        full tile a crashed writer left while the tile is still partial. The
        previous commit's partial tile goes last, so that a reader of that
        commit that finds it gone only finds tiles that extend it."""
        count = self._size >> (TILE_HEIGHT * level)
        still_partial = index == count >> TILE_HEIGHT
        keep = str(count % TILE_WIDTH) if still_partial else None
        partial_dir = os.path.join(self.directory, _partial_dir(level, index))
        if still_partial:
            _unlink(os.path.join(self.directory, tile_path(level, index)))
        try:
            names = os.listdir(partial_dir)
        except FileNotFoundError:
            names = []
        previous = str(old_width)
        for name in names:
            if name not in (keep, previous) and (name.isdigit() or name.endswith(TMP_SUFFIX)):
                _unlink(os.path.join(partial_dir, name))
        if previous in names and previous != keep:
            _unlink(os.path.join(partial_dir, previous))
        if keep is None:
            try:
                os.rmdir(partial_dir)
            except OSError:
                pass


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


__all__ = ["SIZE_FILE", "TILE_BYTES", "TILE_HEIGHT", "TILE_WIDTH", "TileLevels", "TileStore", "TilesDamaged", "tile_path"]
