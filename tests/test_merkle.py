"""The Merkle tree (RFC 6962 / RFC 9162 §2.1) and its tiled store (C2SP tlog-tiles).

- The published RFC 6962 test vectors (tests/data/rfc6962_vectors.json, from
  transparency-dev/merkle, itself from Certificate Transparency): leaf and
  node hashes, the roots of sizes 0 to 8, inclusion paths and consistency
  proofs, and the golden verification probes (valid and tampered proofs).
- The proof builders agree with the RFC's recursive definitions, written
  again here as plainly as the RFC states them.
- Properties (hypothesis): a proof verifies, and any single flipped bit in
  the leaf hash, a proof element or a root makes it fail; the verifiers
  return False on malformed input instead of raising.
- The tiled store gives the same roots and proofs as the in-memory tree for
  any pattern of appends, across reopening; its files are private; crash
  leftovers beyond the commit are ignored; a store killed with SIGKILL at
  random times reopens to a tree whose root is the reference root of its size.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.integrity.merkle import (
    EMPTY_ROOT,
    MemoryTree,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root_from_leaf_hashes,
    verify_consistency,
    verify_inclusion,
)
from agentlog.integrity.tiles import SIZE_FILE, TILE_WIDTH, TileStore, TilesDamaged, level_path, tile_name

SRC = Path(__file__).resolve().parents[1] / "src"
VECTORS: dict[str, Any] = json.loads((Path(__file__).parent / "data" / "rfc6962_vectors.json").read_text())
LEAVES = [bytes.fromhex(x) for x in VECTORS["leaves"]]
LEAF_HASHES = [leaf_hash(x) for x in LEAVES]
ROOTS = [bytes.fromhex(x) for x in VECTORS["roots"]]


def h(hex_text: str) -> bytes:
    return bytes.fromhex(hex_text)


def leaves_for(n: int, salt: str = "") -> list[bytes]:
    return [leaf_hash(f"{salt}leaf {i}".encode()) for i in range(n)]


def flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8 % len(out)] ^= 1 << (bit % 8)
    return bytes(out)


# -- the RFC's definitions, recursive, straight from RFC 9162 §2.1.1, §2.1.3.1, §2.1.4.1 --


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def rfc_mth(d: Sequence[bytes]) -> bytes:
    """MTH over leaf hashes."""
    if not d:
        return hashlib.sha256(b"").digest()
    if len(d) == 1:
        return d[0]
    k = _k(len(d))
    return node_hash(rfc_mth(d[:k]), rfc_mth(d[k:]))


def rfc_path(m: int, d: Sequence[bytes]) -> list[bytes]:
    if len(d) == 1:
        return []
    k = _k(len(d))
    if m < k:
        return rfc_path(m, d[:k]) + [rfc_mth(d[k:])]
    return rfc_path(m - k, d[k:]) + [rfc_mth(d[:k])]


def rfc_subproof(m: int, d: Sequence[bytes], b: bool) -> list[bytes]:
    if m == len(d):
        return [] if b else [rfc_mth(d)]
    k = _k(len(d))
    if m <= k:
        return rfc_subproof(m, d[:k], b) + [rfc_mth(d[k:])]
    return rfc_subproof(m - k, d[k:], False) + [rfc_mth(d[:k])]


# -- the published vectors --


def test_leaf_and_node_hashes_are_the_published_ones() -> None:
    levels = [[h(x) for x in level] for level in VECTORS["node_hashes"]]
    assert LEAF_HASHES == levels[0]
    for below, above in zip(levels, levels[1:]):
        assert [node_hash(below[2 * i], below[2 * i + 1]) for i in range(len(above))] == above
    assert EMPTY_ROOT == ROOTS[0] == h("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")


def test_roots_of_every_published_size(tmp_path: Path) -> None:
    store = TileStore(str(tmp_path / "tree"))
    for size, expected in enumerate(ROOTS):
        assert root_from_leaf_hashes(LEAF_HASHES[:size]) == expected
        assert MemoryTree(LEAF_HASHES[:size]).root() == expected
        assert store.root() == expected
        if size < len(LEAF_HASHES):
            store.append([LEAF_HASHES[size]])
    for size, expected in enumerate(ROOTS):  # older sizes, from the grown trees
        assert MemoryTree(LEAF_HASHES).root(size) == expected
        assert TileStore(str(tmp_path / "tree")).root(size) == expected


@pytest.mark.parametrize("vector", VECTORS["inclusion"], ids=lambda v: f"{v['index']}of{v['size']}")
def test_published_inclusion_paths(vector: dict[str, Any], tmp_path: Path) -> None:
    index, size, path = vector["index"], vector["size"], [h(x) for x in vector["path"]]
    store = TileStore(str(tmp_path / "tree"))
    store.append(LEAF_HASHES)
    assert MemoryTree(LEAF_HASHES).inclusion_proof(index, size) == path
    assert store.inclusion_proof(index, size) == path
    assert verify_inclusion(LEAF_HASHES[index], index, size, path, ROOTS[size])


@pytest.mark.parametrize("vector", VECTORS["consistency"], ids=lambda v: f"{v['old_size']}to{v['new_size']}")
def test_published_consistency_proofs(vector: dict[str, Any], tmp_path: Path) -> None:
    old, new, proof = vector["old_size"], vector["new_size"], [h(x) for x in vector["proof"]]
    store = TileStore(str(tmp_path / "tree"))
    store.append(LEAF_HASHES)
    assert MemoryTree(LEAF_HASHES).consistency_proof(old, new) == proof
    assert store.consistency_proof(old, new) == proof
    assert verify_consistency(old, new, ROOTS[old], ROOTS[new], proof)


def test_every_proof_over_the_published_leaves_verifies_against_the_published_roots() -> None:
    tree = MemoryTree(LEAF_HASHES)
    for size in range(1, 9):
        for index in range(size):
            assert verify_inclusion(LEAF_HASHES[index], index, size, tree.inclusion_proof(index, size), ROOTS[size])
        for old in range(size + 1):
            assert verify_consistency(old, size, ROOTS[old], ROOTS[size], tree.consistency_proof(old, size))


def _all_hashes_32(*values: bytes | list[bytes]) -> bool:
    flat: list[bytes] = []
    for v in values:
        flat.extend(v if isinstance(v, list) else [v])
    return all(len(x) == 32 for x in flat)


@pytest.mark.parametrize("probe", VECTORS["inclusion_probes"], ids=lambda p: p["file"].split("testdata/")[1])
def test_golden_inclusion_probes(probe: dict[str, Any]) -> None:
    """Each probe verifies exactly when it should. We are stricter than the probes'
    verifier in one way: a hash that is not 32 bytes never verifies."""
    leaf, root, path = h(probe["leaf_hash"]), h(probe["root"]), [h(x) for x in probe["path"]]
    expected = probe["valid"] and _all_hashes_32(leaf, root, path)
    assert verify_inclusion(leaf, probe["index"], probe["size"], path, root) is expected


@pytest.mark.parametrize("probe", VECTORS["consistency_probes"], ids=lambda p: p["file"].split("testdata/")[1])
def test_golden_consistency_probes(probe: dict[str, Any]) -> None:
    old_root, new_root, proof = h(probe["old_root"]), h(probe["new_root"]), [h(x) for x in probe["proof"]]
    expected = probe["valid"] and _all_hashes_32(old_root, new_root, proof)
    assert verify_consistency(probe["old_size"], probe["new_size"], old_root, new_root, proof) is expected


def test_the_one_probe_we_refuse_is_a_short_hash() -> None:
    """The probes accept equal 12-byte "roots" for equal sizes; we do not."""
    refused = [
        p for p in VECTORS["inclusion_probes"] + VECTORS["consistency_probes"]
        if p["valid"] and not _all_hashes_32(*(h(p[k]) for k in ("leaf_hash", "root", "old_root", "new_root") if k in p))
    ]
    assert [p["file"] for p in refused] == ["testdata/consistency/additional/sizes-are-equal-one-and-proof-is-empty.json"]


# -- against the RFC's definitions --


def test_proofs_equal_the_rfc_definitions_for_every_small_tree() -> None:
    leaves = leaves_for(40)
    tree = MemoryTree(leaves)
    for n in range(1, 41):
        assert tree.root(n) == rfc_mth(leaves[:n]) == root_from_leaf_hashes(leaves[:n])
        for i in range(n):
            assert tree.inclusion_proof(i, n) == rfc_path(i, leaves[:n])
        for m in range(1, n + 1):
            assert tree.consistency_proof(m, n) == rfc_subproof(m, leaves[:n], True)


def test_proof_builders_refuse_leaves_and_sizes_outside_the_tree() -> None:
    tree = MemoryTree(leaves_for(5))
    get = tree.hash_at
    for bad in [(5, 5), (-1, 5), (0, 0)]:
        with pytest.raises(ValueError):
            inclusion_proof(*bad, get)
    for bad in [(6, 5), (-1, 5)]:
        with pytest.raises(ValueError):
            consistency_proof(*bad, get)
    with pytest.raises(ValueError):
        tree.root(6)
    with pytest.raises(IndexError):
        tree.hash_at(1, 2)  # leaves 4 and 5: only one is there
    assert consistency_proof(0, 5, get) == [] and consistency_proof(5, 5, get) == []


# -- properties --

sizes_and_index = st.integers(1, 300).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1)))
sizes_and_old = st.integers(1, 300).flatmap(lambda n: st.tuples(st.integers(1, n), st.just(n)))


@settings(max_examples=150, deadline=None)
@given(sizes_and_index, st.data())
def test_inclusion_verifies_and_any_flipped_bit_breaks_it(size_index: tuple[int, int], data: st.DataObject) -> None:
    n, i = size_index
    leaves = leaves_for(n, salt="p")
    tree = MemoryTree(leaves)
    proof, root = tree.inclusion_proof(i), tree.root()
    assert verify_inclusion(leaves[i], i, n, proof, root)
    bit = data.draw(st.integers(0, 255), label="bit")
    assert not verify_inclusion(flip(leaves[i], bit), i, n, proof, root)
    assert not verify_inclusion(leaves[i], i, n, proof, flip(root, bit))
    for k in range(len(proof)):
        tampered = proof[:k] + [flip(proof[k], bit)] + proof[k + 1 :]
        assert not verify_inclusion(leaves[i], i, n, tampered, root)
    assert not verify_inclusion(leaves[i], i, n, proof + [root], root)
    if proof:
        assert not verify_inclusion(leaves[i], i, n, proof[:-1], root)
    assert not verify_inclusion(leaves[i], n, n, proof, root)


@settings(max_examples=150, deadline=None)
@given(sizes_and_old, st.data())
def test_consistency_verifies_and_any_flipped_bit_breaks_it(sizes: tuple[int, int], data: st.DataObject) -> None:
    m, n = sizes
    tree = MemoryTree(leaves_for(n, salt="c"))
    proof, old_root, new_root = tree.consistency_proof(m), tree.root(m), tree.root()
    assert verify_consistency(m, n, old_root, new_root, proof)
    bit = data.draw(st.integers(0, 255), label="bit")
    assert not verify_consistency(m, n, flip(old_root, bit), new_root, proof)  # a tampered older root
    assert not verify_consistency(m, n, old_root, flip(new_root, bit), proof)
    for k in range(len(proof)):
        tampered = proof[:k] + [flip(proof[k], bit)] + proof[k + 1 :]
        assert not verify_consistency(m, n, old_root, new_root, tampered)
    if m < n:
        assert not verify_consistency(m, n, old_root, new_root, proof[:-1])
        assert not verify_consistency(m, n, old_root, new_root, proof + [new_root])
        assert not verify_consistency(n, m, new_root, old_root, proof)
        other = MemoryTree(leaves_for(m, salt="other")).root()  # a different older tree of the same size
        assert not verify_consistency(m, n, other, new_root, proof)


def test_consistency_from_the_empty_tree() -> None:
    root = MemoryTree(leaves_for(3)).root()
    assert verify_consistency(0, 3, EMPTY_ROOT, root, [])
    assert verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    assert not verify_consistency(0, 3, root, root, [])
    assert not verify_consistency(0, 3, EMPTY_ROOT, root, [root])
    assert not verify_consistency(0, 0, root, root, [])


junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.binary(max_size=40),
    st.text(max_size=5),
    st.lists(st.binary(min_size=31, max_size=33), max_size=4),
    st.lists(st.one_of(st.none(), st.integers(), st.text()), max_size=3),
    st.floats(allow_nan=True),
)


@settings(max_examples=400, deadline=None)
@given(junk, junk, junk, junk, junk)
def test_verifiers_never_raise(a: Any, b: Any, c: Any, d: Any, e: Any) -> None:
    assert verify_inclusion(a, b, c, d, e) in (True, False)
    assert verify_consistency(a, b, c, d, e) in (True, False)
    good = MemoryTree(leaves_for(5))
    # one malformed argument among otherwise valid ones
    args = [good.hash_at(0, 1), 1, 5, good.inclusion_proof(1), good.root()]
    for k in range(5):
        mixed = args[:k] + [a] + args[k + 1 :]
        if mixed != args:
            assert verify_inclusion(*mixed) in (True, False)
    assert not verify_inclusion(args[0], 1, 5, [bytearray(x) for x in args[3]], args[4])  # type: ignore[misc]
    assert not verify_inclusion(args[0], True, 5, args[3], args[4])


# -- the tiled store --

batches = st.lists(
    st.one_of(st.integers(0, 40), st.integers(200, 600), st.sampled_from([255, 256, 257, 511, 512, 1024])),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches, st.lists(st.booleans(), min_size=8, max_size=8), st.randoms(use_true_random=False))
def test_tile_store_equals_the_memory_tree(
    tmp_path: Path, sizes: list[int], reopen: list[bool], rng: random.Random
) -> None:
    directory = os.path.join(tempfile.mkdtemp(dir=tmp_path), "tree")
    store, reference = TileStore(directory, durable=False), MemoryTree()
    total = 0
    for k, again in zip(sizes, reopen):
        new = leaves_for(k, salt=f"{total}-")
        total += k
        assert store.append(new) == reference.append(new) == total
        if again:
            store = TileStore(directory, durable=False)
        _assert_same_tree(store, reference, rng)


def _assert_same_tree(store: TileStore, reference: MemoryTree, rng: random.Random, samples: int = 6) -> None:
    n = reference.size
    assert store.size == n
    assert store.root() == reference.root()
    for _ in range(samples):
        m = rng.randint(0, n)
        assert store.root(m) == reference.root(m)
        assert store.consistency_proof(m) == reference.consistency_proof(m)
        if n:
            i = rng.randrange(n)
            size = rng.randint(i + 1, n)
            assert store.inclusion_proof(i, size) == reference.inclusion_proof(i, size)


def test_tile_store_over_three_tile_levels(tmp_path: Path) -> None:
    """Past 65,536 leaves the tree has level-2 tiles; every tile level's edge is partial."""
    directory = str(tmp_path / "tree")
    store, reference = TileStore(directory, durable=False), MemoryTree()
    rng = random.Random(5)
    for k in (65_535, 1, 256 * 3 + 7, 70_000 - 65_536 - 775):
        new = leaves_for(k, salt=f"{reference.size}-")
        store.append(new)
        reference.append(new)
        _assert_same_tree(store, reference, rng, samples=20)
    store = TileStore(directory)
    _assert_same_tree(store, reference, rng, samples=20)
    assert reference.size == 70_000
    # 70,000 = 273·256 + 112; 273 = 256 + 17; 1 at level 2: a file per level, nothing else
    assert sorted(os.listdir(os.path.join(directory, "level"))) == ["0", "1", "2"]
    assert [os.path.getsize(os.path.join(directory, level_path(lv))) for lv in range(3)] == [32 * 70_000, 32 * 273, 32]
    assert store.read_tile(2, 0, 1) == reference.hash_at(16, 0)
    assert store.read_tile(0, 5) == b"".join(reference.hash_at(0, i) for i in range(5 * 256, 6 * 256))
    assert store.read_tile(1, 1, 17) == b"".join(reference.hash_at(8, i) for i in range(256, 273))
    with pytest.raises(IndexError):
        store.read_tile(1, 1, 18)


def test_opening_and_appending_read_only_the_edges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening reads the size record alone; appending k leaves reads the partial tile of
    each tile level once and writes each level's new hashes once, then the record:
    nothing in proportion to the tree, and no file created."""
    from agentlog.integrity import tiles

    directory = str(tmp_path / "tree")
    TileStore(directory, durable=False).append(leaves_for(70_000))
    reads: list[tuple[str, int, int]] = []
    writes: list[tuple[str, int, int]] = []
    opened: dict[int, str] = {}
    real_open, real_pread, real_pwrite, real_write = os.open, os.pread, os.pwrite, tiles.write_atomic

    def counting_file(path: str, *args: Any, **kwargs: Any) -> Any:
        fh = open(path, *args, **kwargs)
        opened[fh.fileno()] = os.path.relpath(path, directory)
        return fh

    def counting_open(path: str, *args: Any, **kwargs: Any) -> int:
        fd = real_open(path, *args, **kwargs)
        opened[fd] = os.path.relpath(path, directory)
        return fd

    def counting_pread(fd: int, n: int, offset: int) -> bytes:
        reads.append((opened.get(fd, "?"), offset // 32, n // 32))
        return real_pread(fd, n, offset)

    def counting_pwrite(fd: int, data: bytes, offset: int) -> int:
        writes.append((opened.get(fd, "?"), offset // 32, len(data) // 32))
        return real_pwrite(fd, data, offset)

    def counting_write(path: str, *args: Any, **kwargs: Any) -> Any:
        writes.append((os.path.relpath(path, directory), 0, 0))
        return real_write(path, *args, **kwargs)

    class _Os:
        def __getattr__(self, name: str) -> Any:
            return getattr(os, name)
    fake = _Os()
    fake.open, fake.pread, fake.pwrite = counting_open, counting_pread, counting_pwrite  # type: ignore[attr-defined]
    monkeypatch.setattr(tiles, "os", fake)
    monkeypatch.setattr(tiles, "open", counting_file, raising=False)
    monkeypatch.setattr(tiles, "write_atomic", counting_write)
    store = TileStore(directory)
    assert reads == [] and writes == []
    store.append(leaves_for(1, salt="one more"))
    # 70,000 = 273·256 + 112 leaves: the three edges are read once, level 0 gets one hash
    assert sorted(reads) == [("level/0", 69_888, 112), ("level/1", 256, 17), ("level/2", 0, 1)]
    assert writes == [("level/0", 70_000, 1), (SIZE_FILE, 0, 0)]
    reads.clear()
    writes.clear()
    store.append(leaves_for(143 + 256, salt="two tiles"))  # fills tile 273, then 256 more: tile 274
    assert reads == []
    assert writes == [("level/0", 70_001, 399), ("level/1", 273, 2), (SIZE_FILE, 0, 0)]


def test_tiles_are_named_by_their_level_file() -> None:
    assert level_path(0) == "level/0"
    assert tile_name(1, 7) == f"tile 1/7 (level/1 at {7 * 8192})"
    with pytest.raises(ValueError):
        level_path(-1)


def test_files_are_private_and_the_commit_names_size_and_root(tmp_path: Path) -> None:
    directory = tmp_path / "tree"
    store = TileStore(str(directory))
    store.append(leaves_for(300))
    modes = {p.relative_to(directory).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in directory.rglob("*")}
    assert modes == {"level": 0o700, "level/0": 0o600, "level/1": 0o600, SIZE_FILE: 0o600}
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert (directory / SIZE_FILE).read_text() == f"300 {MemoryTree(leaves_for(300)).root().hex()}\n"
    assert (directory / "level/0").read_bytes() == b"".join(leaves_for(300))
    assert (directory / "level/1").read_bytes() == MemoryTree(leaves_for(256)).root()


def test_bytes_per_leaf_is_about_32(tmp_path: Path) -> None:
    directory = tmp_path / "tree"
    TileStore(str(directory), durable=False).append(leaves_for(256 * 256))
    total = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    assert total == 32 * (256 * 256 + 256 + 1) + len(f"65536 {'0' * 64}\n")
    assert total / (256 * 256) < 32.2


def test_what_a_crash_leaves_beyond_the_commit_is_ignored_then_replaced(tmp_path: Path) -> None:
    directory = tmp_path / "tree"
    leaves = leaves_for(600)
    store = TileStore(str(directory))
    store.append(leaves[:300])
    # a writer killed before its commit: hashes beyond the committed ones on every level, all wrong
    junk = os.urandom(32 * 400)
    with open(directory / "level/0", "ab") as fh:
        fh.write(junk)
    with open(directory / "level/1", "ab") as fh:
        fh.write(junk[:64])
    (directory / "level/2").write_bytes(junk[:32])
    reopened = TileStore(str(directory))
    reference = MemoryTree(leaves[:300])
    _assert_same_tree(reopened, reference, random.Random(1), samples=30)
    reopened.append(leaves[300:450])
    reference.append(leaves[300:450])
    _assert_same_tree(TileStore(str(directory)), reference, random.Random(2), samples=30)
    reopened.append(leaves[450:600])
    reference.append(leaves[450:600])
    _assert_same_tree(TileStore(str(directory)), reference, random.Random(3), samples=30)
    assert (directory / "level/0").read_bytes()[: 32 * 600] == b"".join(leaves)


def test_a_reader_keeps_its_tree_while_the_writer_appends(tmp_path: Path) -> None:
    directory = str(tmp_path / "tree")
    leaves = leaves_for(1000)
    writer = TileStore(directory)
    writer.append(leaves[:100])
    reader = TileStore(directory)  # has read only the size record
    writer.append(leaves[100:200])
    reference = MemoryTree(leaves[:100])
    _assert_same_tree(reader, reference, random.Random(4), samples=20)
    late = TileStore(directory)
    writer.append(leaves[200:1000])
    late_reference = MemoryTree(leaves[:200])
    _assert_same_tree(late, late_reference, random.Random(5), samples=20)
    assert late.refresh() == 1000
    _assert_same_tree(late, MemoryTree(leaves), random.Random(6), samples=20)


def test_a_tree_in_the_first_layout_moves_to_level_files(tmp_path: Path) -> None:
    """The first layout (a file per tile, ``tile/<L>/<N>`` and ``….p/<W>``) is read once
    and rewritten a file per level, with the same root; then the tile files are gone."""
    directory = tmp_path / "tree"
    leaves = leaves_for(70_000)
    (directory / "tile/0/x000").mkdir(parents=True)
    for n in range(273):
        name = f"x{n // 1000:03d}/{n % 1000:03d}" if n >= 1000 else f"{n:03d}"
        (directory / "tile/0" / name).write_bytes(b"".join(leaves[256 * n : 256 * n + 256]))
    (directory / "tile/0/273.p").mkdir()
    (directory / "tile/0/273.p/112").write_bytes(b"".join(leaves[256 * 273 :]))
    reference = MemoryTree(leaves)
    (directory / SIZE_FILE).write_text(f"70000 {reference.root().hex()}\n")
    moved = TileStore(str(directory))
    _assert_same_tree(moved, reference, random.Random(7), samples=20)
    assert not (directory / "tile").exists()
    assert (directory / "level/0").read_bytes() == b"".join(leaves)
    (directory / "tile/0").mkdir(parents=True)
    (directory / "tile/0/000").write_bytes(b"\0" * 8192)  # a tile that does not give the root
    (directory / "level").rename(directory / "level.kept")
    with pytest.raises(TilesDamaged):
        TileStore(str(directory))


def test_damage_is_reported_not_answered(tmp_path: Path) -> None:
    directory = tmp_path / "tree"
    TileStore(str(directory)).append(leaves_for(600))
    with open(directory / "level/0", "r+b") as fh:
        fh.truncate(32 * 100)
    with pytest.raises(TilesDamaged):
        TileStore(str(directory)).inclusion_proof(3)
    (directory / "level/1").unlink()
    with pytest.raises(TilesDamaged):
        TileStore(str(directory)).inclusion_proof(599)
    for record in (b"600\n", b"600 abc\n", b"x " + b"0" * 64 + b"\n", b"-1 " + b"0" * 64 + b"\n"):
        (directory / SIZE_FILE).write_bytes(record)
        with pytest.raises(TilesDamaged):
            TileStore(str(directory))


def test_append_refuses_what_is_not_a_leaf_hash(tmp_path: Path) -> None:
    store = TileStore(str(tmp_path / "tree"))
    store.append(leaves_for(3))
    for bad in ([b"short"], [leaves_for(1)[0] + b"x"], [bytearray(32)], leaves_for(2) + ["x" * 32]):
        with pytest.raises(ValueError):
            store.append(bad)  # type: ignore[arg-type]
    assert store.append([]) == 3
    assert TileStore(str(tmp_path / "tree")).size == 3
    with pytest.raises(ValueError):
        store.inclusion_proof(3)
    with pytest.raises(ValueError):
        store.consistency_proof(2, 4)
    with pytest.raises(IndexError):
        store.hash_at(2, 0)
    with pytest.raises(IndexError):
        store.read_tile(0, 0, 4)


# -- crashes --

WRITER = """\
import hashlib, random, sys
sys.path.insert(0, {src!r})
from agentlog.integrity.tiles import TileStore
from agentlog.integrity.merkle import leaf_hash

directory, seed, cap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = TileStore(directory, durable=False)
rng = random.Random(seed)
print("READY", store.size, flush=True)
while store.size < cap:
    k = rng.choice([1, 2, 7, 100, 255, 256, 300, 1000, 3000])
    k = min(k, cap - store.size)
    store.append([leaf_hash(b"leaf %d" % i) for i in range(store.size, store.size + k)])
"""


@pytest.mark.slow
def test_kill_9_at_random_times_leaves_a_tree_of_the_reference(tmp_path: Path) -> None:
    """A writer appending in a loop is SIGKILLed at random moments; each time the
    store reopens to some size no larger than what was appended, whose root and
    proofs are the reference ones, and the next writer carries on from there."""
    directory = str(tmp_path / "tree")
    cap = 400_000
    reference = MemoryTree([leaf_hash(b"leaf %d" % i) for i in range(cap)])
    rng = random.Random(2026)
    script = WRITER.format(src=str(SRC))
    deadline = time.monotonic() + 15
    rounds = sizes_seen = 0
    previous = 0
    while rounds < 12 and time.monotonic() < deadline:
        proc = subprocess.Popen([sys.executable, "-c", script, directory, str(rounds), str(cap)], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        ready = proc.stdout.readline().split()
        assert ready[0] == b"READY" and int(ready[1]) == previous
        time.sleep(rng.uniform(0.01, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        store = TileStore(directory)
        assert previous <= store.size <= cap
        assert store.root() == reference.root(store.size)
        if store.size:
            i = rng.randrange(store.size)
            assert verify_inclusion(reference.hash_at(0, i), i, store.size, store.inclusion_proof(i), store.root())
            assert store.consistency_proof(previous) == reference.consistency_proof(previous, store.size)
        sizes_seen += store.size != previous
        previous = store.size
        rounds += 1
    assert rounds >= 5 and sizes_seen >= 3
