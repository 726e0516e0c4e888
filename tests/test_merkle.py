"""Merkle commitments (SPEC §3): host tree vs a naive recursive reference, openings,
verification (and what it must reject), error handling, and the device tree vs the host."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from steadfast.kernels import merkle as mk
from steadfast.kernels import poseidon2 as p2
from steadfast.kernels.field import P


def rand_field(rng, shape):
    return rng.integers(0, P, shape, dtype=np.uint32)


def naive_root(rows):
    """Recursive definition, one node at a time (independent of the flat level layout and
    of how levels are batched; the hash functions themselves are tested in test_poseidon2)."""
    if len(rows) == 1:
        return p2.sponge_hash(rows[0])
    half = len(rows) // 2
    return p2.compress(naive_root(rows[:half])[None], naive_root(rows[half:])[None])[0]


@pytest.fixture(scope="module")
def tree64():
    m = rand_field(np.random.default_rng(64), (64, 9))
    return m, mk.commit(m)


# ---------------------------------------------------------------- commitment
@pytest.mark.parametrize("log_n, w", [(0, 1), (0, 8), (1, 3), (2, 8), (3, 9), (4, 16), (5, 17)])
def test_root_matches_naive_recursive_reference(log_n, w):
    m = rand_field(np.random.default_rng(10 * log_n + w), (1 << log_n, w))
    tree = mk.commit(m)
    assert np.array_equal(tree.root, naive_root(m))
    assert np.array_equal(mk.merkle_root(m), tree.root)


def test_levels_layout(tree64):
    m, tree = tree64
    levels = tree.levels
    assert [lv.shape for lv in levels] == [(64 >> k, 8) for k in range(7)]
    assert np.array_equal(levels[0], p2.hash_rows(m))
    for k in range(6):
        assert np.array_equal(levels[k + 1], p2.compress(levels[k][0::2], levels[k][1::2]))
    assert np.array_equal(levels[-1][0], tree.root)
    assert tree.nodes.shape == (127, 8) and tree.n == 64 and tree.log_n == 6


def test_rows_are_committed_in_the_given_order(tree64):
    m, tree = tree64
    assert not np.array_equal(mk.commit(m[::-1].copy()).root, tree.root)


def test_from_digests_and_immutability(tree64):
    m, tree = tree64
    t2 = mk.MerkleTree.from_digests(tree.levels[0], matrix=m)
    assert np.array_equal(t2.nodes, tree.nodes)
    only = mk.MerkleTree.from_digests(tree.levels[0])
    assert np.array_equal(only.paths([3]), tree.paths([3]))
    with pytest.raises(ValueError):
        only.open([3])
    with pytest.raises(AttributeError):
        tree.root = np.zeros(8, np.uint32)
    with pytest.raises(ValueError):
        tree.nodes[0, 0] = 0
    root = tree.root
    root[0] ^= 1                                  # root is a copy
    assert not np.array_equal(root, tree.root)


@pytest.mark.parametrize("bad, exc", [
    (np.zeros((3, 4), np.uint32), ValueError),     # not a power of two
    (np.zeros((6, 4), np.uint32), ValueError),
    (np.zeros((0, 4), np.uint32), ValueError),     # empty
    (np.zeros((4, 0), np.uint32), ValueError),
    (np.zeros(8, np.uint32), ValueError),          # not a matrix
    (np.zeros((4, 4), np.int32), TypeError),
    (np.zeros((4, 4), np.float32), TypeError),
    (np.full((4, 4), P, np.uint32), ValueError),   # not canonical
])
def test_commit_rejects_bad_input(bad, exc):
    with pytest.raises(exc):
        mk.commit(bad)


# ---------------------------------------------------------------- openings
@given(st.lists(st.integers(0, 63), min_size=1, max_size=12))
def test_open_and_verify_random_indices(tree64, indices):
    m, tree = tree64
    rows, paths = tree.open(indices)
    assert rows.shape == (len(indices), 9) and paths.shape == (len(indices), 6, 8)
    assert np.array_equal(rows, m[indices])
    assert mk.verify_paths(tree.root, rows, indices, paths).all()


def test_paths_hold_the_siblings(tree64):
    _, tree = tree64
    i = 45
    paths = tree.paths([i])[0]
    for k, level in enumerate(tree.levels[:-1]):
        assert np.array_equal(paths[k], level[(i >> k) ^ 1])


def test_verify_rejects_tampering(tree64):
    _, tree = tree64
    idx = np.array([5, 17, 40, 63])
    rows, paths = tree.open(idx)
    root = tree.root

    bad_paths = paths.copy()
    bad_paths[1, 3, 2] ^= 1                                   # tampered sibling
    bad_rows = rows.copy()
    bad_rows[2, 0] = (int(bad_rows[2, 0]) + 1) % P            # tampered row
    wrong_idx = idx.copy()
    wrong_idx[3] = 62                                         # wrong index
    bad_root = root.copy()
    bad_root[7] = (int(bad_root[7]) + 1) % P                  # wrong root

    assert mk.verify_paths(root, rows, idx, bad_paths).tolist() == [True, False, True, True]
    assert mk.verify_paths(root, bad_rows, idx, paths).tolist() == [True, True, False, True]
    assert mk.verify_paths(root, rows, wrong_idx, paths).tolist() == [True, True, True, False]
    assert not mk.verify_paths(bad_root, rows, idx, paths).any()
    # out-of-range index and non-canonical values are rejected, not raised
    far = idx.copy()
    far[0] = 64 + 5
    assert mk.verify_paths(root, rows, far, paths).tolist() == [False, True, True, True]
    big = rows.copy()
    big[1, 1] = P
    assert mk.verify_paths(root, big, idx, paths).tolist() == [True, False, True, True]
    # a path of the wrong depth does not verify
    assert not mk.verify_paths(root, rows, idx, paths[:, :-1]).any()


def test_verify_shape_errors(tree64):
    _, tree = tree64
    rows, paths = tree.open([1, 2])
    with pytest.raises(ValueError):
        mk.verify_paths(tree.root[:7], rows, [1, 2], paths)
    with pytest.raises(ValueError):
        mk.verify_paths(tree.root, rows, [1, 2, 3], paths)
    with pytest.raises(ValueError):
        mk.verify_paths(tree.root, rows, [1, 2], paths[:1])
    with pytest.raises(TypeError):
        mk.verify_paths(tree.root, rows.astype(np.int64), [1, 2], paths)
    with pytest.raises(TypeError):
        mk.verify_paths(tree.root, rows, np.array([1.0, 2.0]), paths)
    assert mk.verify_paths(tree.root, rows[:0], [], paths[:0]).shape == (0,)


def test_open_errors(tree64):
    _, tree = tree64
    with pytest.raises(ValueError):
        tree.open([64])
    with pytest.raises(ValueError):
        tree.open([-1])
    with pytest.raises(TypeError):
        tree.open(np.array([1.5]))
    rows, paths = tree.open([])
    assert rows.shape == (0, 9) and paths.shape == (0, 6, 8)


def test_single_row_tree():
    m = rand_field(np.random.default_rng(1), (1, 5))
    tree = mk.commit(m)
    assert np.array_equal(tree.root, p2.sponge_hash(m[0]))
    assert [lv.shape for lv in tree.levels] == [(1, 8)]
    rows, paths = tree.open([0, 0])
    assert paths.shape == (2, 0, 8)
    assert mk.verify_paths(tree.root, rows, [0, 0], paths).all()
    assert not mk.verify_paths(tree.root, rows, [0, 1], paths)[1]


# ---------------------------------------------------------------- device (simulator)
BLK = 8


@pytest.fixture(scope="module")
def dev():
    from numba import cuda
    from steadfast.kernels import merkle_device
    return cuda, merkle_device


@pytest.mark.parametrize("n, w", [(1, 3), (BLK, 9), (2 * BLK, 17)])
def test_device_commit_matches_host(dev, n, w):
    cuda, md = dev
    m = rand_field(np.random.default_rng(n + w), (n, w))
    host = mk.commit(m)
    tree = md.commit_device(cuda.to_device(m), block=BLK)
    assert isinstance(tree.root, np.ndarray) and np.array_equal(tree.root, host.root)
    assert np.array_equal(tree.nodes.copy_to_host(), host.nodes)
    assert [tuple(lv.shape) for lv in tree.levels] == [lv.shape for lv in host.levels]
    assert np.array_equal(tree.to_host().nodes, host.nodes)
    assert np.array_equal(tree.to_host().matrix, m)


def test_device_commit_with_stream_and_out(dev):
    cuda, md = dev
    m = rand_field(np.random.default_rng(9), (4, 8))
    stream = cuda.stream()
    out = cuda.device_array((7, 8), np.uint32)
    tree = md.commit_device(cuda.to_device(m), stream=stream, out=out, block=BLK)
    assert tree.nodes is out
    assert np.array_equal(tree.root, mk.merkle_root(m))
    assert np.array_equal(md.merkle_root_device(cuda.to_device(m), block=BLK), tree.root)


def test_device_commit_errors(dev):
    cuda, md = dev
    with pytest.raises(ValueError):
        md.commit_device(cuda.to_device(np.zeros((3, 4), np.uint32)))
    with pytest.raises(ValueError):
        md.commit_device(cuda.to_device(np.zeros((0, 4), np.uint32)))
    with pytest.raises(TypeError):
        md.commit_device(np.zeros((4, 4), np.uint32))
    with pytest.raises(TypeError):
        md.commit_device(cuda.to_device(np.zeros((4, 4), np.int32)))
    with pytest.raises(ValueError):
        md.commit_device(cuda.to_device(np.zeros((4, 4), np.uint32)),
                         out=cuda.device_array((8, 8), np.uint32))


# ---------------------------------------------------------------- v3: caps and multiproofs
# The verifier's multiproof checker (verifier.merkle) against a naive reference written
# from the spec: full trees built one node at a time with the prover's hash functions
# (kernels.poseidon2), node lists produced with Python sets, level by level.
from steadfast.verifier import merkle as vm
from steadfast.verifier.errors import MerkleError, ShapeError


def naive_levels(rows):
    """levels[l][j] = node (l, j) of the full tree, built pairwise."""
    levels = [[p2.sponge_hash(r) for r in rows]]
    while len(levels[-1]) > 1:
        lv = levels[-1]
        levels.append([p2.compress(lv[2 * j][None], lv[2 * j + 1][None])[0]
                       for j in range(len(lv) // 2)])
    return levels


def naive_multiproof(levels, indices, log_cap):
    """(cap, S_0, nodes) exactly as the spec states them."""
    h = len(levels) - 1
    c = min(log_cap, h)
    s = sorted(set(int(i) for i in indices))
    s0 = list(s)
    nodes = []
    for lv in range(h - c):
        for j in s:
            if j ^ 1 not in s:
                nodes.append(levels[lv][j ^ 1])
        s = sorted({j >> 1 for j in s})
    cap = np.array(levels[h - c], np.uint32).reshape(-1, 8)
    return cap, s0, np.array(nodes, np.uint32).reshape(-1, 8)


@pytest.fixture(scope="module")
def naive_trees():
    out = {}
    for h in range(0, 7):
        rows = rand_field(np.random.default_rng(100 + h), (1 << h, 5))
        out[h] = (rows, naive_levels(rows))
    return out


@given(h=st.integers(0, 6), log_cap=st.integers(0, 8),
       idx=st.lists(st.integers(0, 63), min_size=1, max_size=20))
def test_multiproof_accepts_the_naive_reference(naive_trees, h, log_cap, idx):
    rows, levels = naive_trees[h]
    idx = [i % (1 << h) for i in idx]
    cap, s0, nodes = naive_multiproof(levels, idx, log_cap)
    assert np.array_equal(vm.cap_of(rows, log_cap), cap)
    assert vm.leaf_set(idx).tolist() == s0
    assert vm.multiproof_size(idx, h, log_cap) == len(nodes)
    vm.check_opening(cap, rows[s0], s0, nodes, h, log_cap)
    # every node matters: tampering with any one is a MerkleError
    for k in range(len(nodes)):
        bad = nodes.copy()
        bad[k, k % 8] = (int(bad[k, k % 8]) + 1) % P
        with pytest.raises(MerkleError):
            vm.check_opening(cap, rows[s0], s0, bad, h, log_cap)
    # a wrong node count is a ShapeError (never an IndexError), before any hashing
    with pytest.raises(ShapeError):
        vm.check_opening(cap, rows[s0], s0, np.concatenate([nodes, nodes[:1] if len(nodes)
                                                            else cap[:1]]), h, log_cap)
    if len(nodes):
        with pytest.raises(ShapeError):
            vm.check_opening(cap, rows[s0], s0, nodes[:-1], h, log_cap)
    # a tampered opened row, or a tampered cap entry the opening reaches
    bad_rows = rows[s0].copy()
    bad_rows[-1, 0] = (int(bad_rows[-1, 0]) + 1) % P
    with pytest.raises(MerkleError):
        vm.check_opening(cap, bad_rows, s0, nodes, h, log_cap)
    c = min(log_cap, h)
    bad_cap = cap.copy()
    bad_cap[s0[0] >> (h - c), 3] ^= 1
    with pytest.raises(MerkleError):
        vm.check_opening(bad_cap, rows[s0], s0, nodes, h, log_cap)


def test_multiproof_node_count_by_hand():
    # h = 6, S_0 = {3, 4, 5, 63}: level 0 supplies nodes 2 and 62 (4, 5 are siblings);
    # S_1 = {1, 2, 31}: 0, 3, 30; S_2 = {0, 1, 15}: 14; S_3 = {0, 7}: 1, 6; S_4 = {0, 3}:
    # 1, 2; S_5 = {0, 1}: none -> 10 nodes for caps 2^0 and 2^1, 8 for a cap of 4
    assert [vm.multiproof_size([63, 3, 4, 5, 4], 6, c) for c in range(8)] == \
        [10, 10, 8, 6, 5, 2, 0, 0]
    assert vm.multiproof_size([], 6, 0) == 0
    assert vm.multiproof_size(range(64), 6, 0) == 0


def test_multiproof_shape_errors(naive_trees):
    rows, levels = naive_trees[5]
    cap, s0, nodes = naive_multiproof(levels, [1, 9, 30], 2)
    vm.check_opening(cap, rows[s0], s0, nodes, 5, 2)
    for bad_cap in (cap[:-1], np.concatenate([cap, cap]), cap[:, :7], cap.reshape(-1)):
        with pytest.raises(ShapeError):
            vm.check_opening(bad_cap, rows[s0], s0, nodes, 5, 2)
    with pytest.raises(ShapeError):                        # a row missing / one too many
        vm.check_opening(cap, rows[s0[:-1]], s0, nodes, 5, 2)
    with pytest.raises(ShapeError):
        vm.check_opening(cap, rows[[1, 9, 30, 30]], s0, nodes, 5, 2)
    with pytest.raises(ShapeError):                        # node rows of 7 elements
        vm.check_opening(cap, rows[s0], s0, nodes[:, :7], 5, 2)
    with pytest.raises(ShapeError):                        # not a field element
        big = nodes.copy()
        big[0, 0] = P
        vm.check_opening(cap, rows[s0], s0, big, 5, 2)
    with pytest.raises(ValueError):                        # the caller's bug, not the proof's
        vm.check_opening(cap, rows[s0], [9, 1, 30], nodes, 5, 2)
    with pytest.raises(ValueError):
        vm.check_opening(cap, rows[s0], [1, 9, 32], nodes, 5, 2)
