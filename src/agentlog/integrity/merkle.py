"""The Merkle tree of RFC 6962 §2.1 (the same tree as RFC 9162 §2.1), with SHA-256.

A leaf's hash is ``SHA-256(0x00 ‖ data)`` and an inner node's is
``SHA-256(0x01 ‖ left ‖ right)``; a tree of ``n > 1`` leaves splits at ``k``, the
largest power of two below ``n``, into the complete left subtree of ``k`` leaves
and the right rest. The empty tree's root is ``SHA-256("")``.

Nodes are named by ``(level, index)``: the complete subtree of ``2**level``
leaves that starts at leaf ``index * 2**level``. Every hash a proof needs is
either such a node or the root of a right edge ``[start, size)``, which is a
fold of at most ``log2(size)`` complete nodes. So the proof builders here take
a :data:`SubtreeHashes` callback, ``get_hash(level, index)``, that returns one
complete node's hash; a store answers it from what it keeps (the tiles of
:mod:`agentlog.integrity.tiles` keep every 8th level and rebuild the levels
between from one tile), and a proof costs ``O(log n)`` calls.

The file has two parts. The first, :func:`leaf_hash` to
:func:`verify_consistency`, is what a third party needs to check our proofs:
it uses only :mod:`hashlib`, follows RFC 9162 §2.1.3.2 and §2.1.4.2 step by
step, and never raises on malformed input (it returns ``False``). It is meant
to be copied as it is into a standalone verifier. The second part builds roots
and proofs.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Final, Sequence

# ---------------------------------------------------------------------------
# Verification (self-contained: hashlib only; copied into the standalone verifier)
# ---------------------------------------------------------------------------

HASH_SIZE: Final = 32
"""Bytes in every hash of the tree (SHA-256)."""

EMPTY_ROOT: Final = hashlib.sha256(b"").digest()
"""The root of the empty tree: SHA-256 of the empty string (RFC 9162 §2.1.1)."""


def leaf_hash(data: bytes) -> bytes:
    """The hash of a leaf whose input is ``data``: SHA-256(0x00 ‖ data)."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """The hash of an inner node over its two children: SHA-256(0x01 ‖ left ‖ right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _is_hash(value: object) -> bool:
    return isinstance(value, bytes) and len(value) == HASH_SIZE


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _hash_list(proof: object) -> list[bytes] | None:
    """``proof`` as a list of 32-byte hashes, or None when it is anything else."""
    if not isinstance(proof, (list, tuple)):
        return None
    hashes = list(proof)
    return hashes if all(_is_hash(h) for h in hashes) else None


def verify_inclusion(leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes) -> bool:
    """Whether ``proof`` shows that the leaf with hash ``leaf_hash`` is leaf ``index``
    of the tree of ``size`` leaves whose root is ``root`` (RFC 9162 §2.1.3.2).

    ``proof`` is the inclusion path, nearest sibling first. Anything malformed
    (a hash that is not 32 bytes, ``index >= size``, a proof too short or too
    long, a value of the wrong type) gives ``False``, never an exception."""
    if not (_is_hash(leaf_hash) and _is_hash(root) and _is_count(index) and _is_count(size)):
        return False
    path = _hash_list(proof)
    if path is None or index >= size:  # step 1
        return False
    fn, sn = index, size - 1  # step 2
    r = leaf_hash  # step 3
    for p in path:  # step 4
        if sn == 0:  # 4a
            return False
        if fn & 1 or fn == sn:  # 4b
            r = node_hash(p, r)
            while fn and not fn & 1:  # until LSB(fn) is set or fn is 0
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1  # 4c
        sn >>= 1
    return sn == 0 and r == root  # step 5


def verify_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]) -> bool:
    """Whether ``proof`` shows that the tree of ``old_size`` leaves with root
    ``old_root`` is a prefix of the tree of ``new_size`` leaves with root
    ``new_root`` (RFC 9162 §2.1.4.2).

    The RFC's algorithm is for ``0 < old_size < new_size``. Around it: equal
    sizes need an empty proof and equal roots (the empty tree's root for size
    0); an old size of 0 needs an empty proof and the empty tree's root as
    ``old_root`` (every tree extends the empty one). Anything malformed gives
    ``False``, never an exception."""
    if not (_is_count(old_size) and _is_count(new_size) and _is_hash(old_root) and _is_hash(new_root)):
        return False
    path = _hash_list(proof)
    if path is None or old_size > new_size:
        return False
    if old_size == new_size:
        return not path and old_root == new_root and (old_size > 0 or old_root == EMPTY_ROOT)
    if old_size == 0:
        return not path and old_root == EMPTY_ROOT
    if not path:  # step 1
        return False
    if old_size & (old_size - 1) == 0:  # step 2: first is an exact power of 2
        path = [old_root, *path]
    fn, sn = old_size - 1, new_size - 1  # step 3
    while fn & 1:  # step 4
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]  # step 5
    for c in path[1:]:  # step 6
        if sn == 0:  # 6a
            return False
        if fn & 1 or fn == sn:  # 6b
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while fn and not fn & 1:  # until LSB(fn) is set or fn is 0
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1  # 6c
        sn >>= 1
    return fr == old_root and sr == new_root and sn == 0  # step 7


# ---------------------------------------------------------------------------
# Roots and proofs
# ---------------------------------------------------------------------------

SubtreeHashes = Callable[[int, int], bytes]
"""``get_hash(level, index)``: the hash of the complete subtree of ``2**level``
leaves starting at leaf ``index * 2**level`` (level 0: a leaf hash). A proof
for a tree of ``size`` leaves asks only for nodes inside the first ``size``
leaves."""


def root_from_leaf_hashes(hashes: Sequence[bytes]) -> bytes:
    """The root of the tree whose leaf hashes are ``hashes``, in ``O(n)``.

    Pairing each level's nodes left to right and carrying an unpaired last node
    up a level builds the same tree as RFC 9162's split at the largest power
    of two below ``n``: the left part is always complete, so only the right
    edge can be odd."""
    if not hashes:
        return EMPTY_ROOT
    level = list(hashes)
    while len(level) > 1:
        paired = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n > 1``)."""
    return 1 << ((n - 1).bit_length() - 1)


def range_hash(start: int, end: int, get_hash: SubtreeHashes) -> bytes:
    """The root of the leaves ``[start, end)``, where ``start`` is a multiple of
    the smallest power of two at least ``end - start`` (a node's range, or a right
    edge of one): the fold, right to left, of its complete subtrees, largest
    first. At most ``log2(end - start) + 1`` calls of ``get_hash``."""
    if not 0 <= start < end:
        raise ValueError(f"empty or negative leaf range [{start}, {end})")
    span = 1 << (end - start - 1).bit_length()
    if start % span:
        raise ValueError(f"leaf range [{start}, {end}) is not aligned to a subtree")
    parts: list[bytes] = []
    while start < end:
        level = (end - start).bit_length() - 1
        parts.append(get_hash(level, start >> level))
        start += 1 << level
    result = parts.pop()
    while parts:
        result = node_hash(parts.pop(), result)
    return result


def root(size: int, get_hash: SubtreeHashes) -> bytes:
    """The root of the tree of the first ``size`` leaves."""
    if size < 0:
        raise ValueError(f"negative tree size {size}")
    return range_hash(0, size, get_hash) if size else EMPTY_ROOT


def inclusion_proof(index: int, size: int, get_hash: SubtreeHashes) -> list[bytes]:
    """The inclusion path of leaf ``index`` in the tree of ``size`` leaves,
    nearest sibling first (RFC 9162 §2.1.3.1, ``PATH(m, D_n)``)."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size} leaves")
    siblings: list[bytes] = []  # from the root down; reversed at the end
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            siblings.append(range_hash(start + k, end, get_hash))
            end = start + k
        else:
            siblings.append(range_hash(start, start + k, get_hash))
            start += k
    siblings.reverse()
    return siblings


def consistency_proof(old_size: int, new_size: int, get_hash: SubtreeHashes) -> list[bytes]:
    """The proof that the tree of ``old_size`` leaves is a prefix of the tree of
    ``new_size`` leaves (RFC 9162 §2.1.4.1, ``PROOF(m, D_n)``); empty when
    ``old_size`` is 0 or equals ``new_size``."""
    if not 0 <= old_size <= new_size:
        raise ValueError(f"no consistency proof from {old_size} leaves to {new_size}")
    if old_size in (0, new_size):
        return []
    hashes: list[bytes] = []  # from the root down; reversed at the end
    m, start, end = old_size, 0, new_size
    old_root_known = True  # SUBPROOF's b: the old tree's root is one the verifier has
    while m != end - start:
        k = _split(end - start)
        if m <= k:
            hashes.append(range_hash(start + k, end, get_hash))
            end = start + k
        else:
            hashes.append(range_hash(start, start + k, get_hash))
            start += k
            m -= k
            old_root_known = False
    if not old_root_known:
        hashes.append(range_hash(start, end, get_hash))
    hashes.reverse()
    return hashes


class MemoryTree:
    """A tree kept in memory, every level of it: the reference the tiled store is
    tested against, and a small tree for callers that need no persistence."""

    def __init__(self, leaf_hashes: Sequence[bytes] = ()) -> None:
        self._levels: list[list[bytes]] = [[]]
        self.append(leaf_hashes)

    @property
    def size(self) -> int:
        return len(self._levels[0])

    def append(self, leaf_hashes: Sequence[bytes]) -> int:
        """Add leaves (their hashes); return the new size."""
        levels = self._levels
        for h in leaf_hashes:
            if len(h) != HASH_SIZE:
                raise ValueError(f"a leaf hash has {len(h)} bytes, not {HASH_SIZE}")
            levels[0].append(h)
            level = 0
            while len(levels[level]) % 2 == 0:  # a right child: its parent is now complete
                if level + 1 == len(levels):
                    levels.append([])
                pair = levels[level]
                levels[level + 1].append(node_hash(pair[-2], pair[-1]))
                level += 1
        return self.size

    def hash_at(self, level: int, index: int) -> bytes:
        """The complete node ``(level, index)`` (:data:`SubtreeHashes`)."""
        if level < 0 or index < 0 or level >= len(self._levels) or index >= len(self._levels[level]):
            raise IndexError(f"no complete node ({level}, {index}) in a tree of {self.size} leaves")
        return self._levels[level][index]

    def _check_size(self, size: int | None) -> int:
        if size is None:
            return self.size
        if not 0 <= size <= self.size:
            raise ValueError(f"tree size {size} is not between 0 and {self.size}")
        return size

    def root(self, size: int | None = None) -> bytes:
        return root(self._check_size(size), self.hash_at)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        return inclusion_proof(index, self._check_size(size), self.hash_at)

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> list[bytes]:
        return consistency_proof(old_size, self._check_size(new_size), self.hash_at)


__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "MemoryTree",
    "SubtreeHashes",
    "consistency_proof",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "range_hash",
    "root",
    "root_from_leaf_hashes",
    "verify_consistency",
    "verify_inclusion",
]
