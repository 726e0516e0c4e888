"""kernels/multiproof.py (prover side of proof format 3): caps and multiproof node
selection against naive references written from docs/protocol.md §3 (Python sets and
loops), and a naive verifier that recomputes the cap from the opened leaves."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.kernels import multiproof as mp
from steadfast.kernels.merkle import MerkleTree, commit
from steadfast.prover.core.stages import HostStages


def _compress(left, right):
    """One inner node, by the tree's own two-leaf construction."""
    return MerkleTree.from_digests(np.stack([left, right]).astype(np.uint32)).root


def _tree(log_n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 2013265921, size=(1 << log_n, 3), dtype=np.uint32)
    return commit(rows), rows


def naive_plan(indices, h, log_cap):
    """The spec, literally: S_0 sorted distinct; per level, j ascending, (l, j^1) if
    j^1 not in S_l; S_{l+1} = {j >> 1}."""
    c = min(log_cap, h)
    s = sorted(set(int(i) for i in indices))
    out = []
    for level in range(h - c):
        ss = set(s)
        for j in s:
            if j ^ 1 not in ss:
                out.append((level, j ^ 1))
        s = sorted({j >> 1 for j in s})
    return out


def naive_verify(cap, leaf_digests_by_index, nodes, h, log_cap):
    """Recompute level by level from the opened leaves and the proof nodes (consumed in
    order); return True iff the nodes reach the cap exactly."""
    c = min(log_cap, h)
    cur = dict(leaf_digests_by_index)
    it = iter(list(nodes))
    for _ in range(h - c):
        nxt = {}
        for j in sorted(cur):
            if j ^ 1 in cur:
                if j & 1:
                    continue
                left, right = cur[j], cur[j ^ 1]
            else:
                sib = next(it, None)
                if sib is None:
                    return False
                left, right = (cur[j], sib) if j % 2 == 0 else (sib, cur[j])
            nxt[j >> 1] = _compress(left, right)
        cur = nxt
    if next(it, None) is not None:
        return False
    return all(np.array_equal(cur[j], cap[j]) for j in cur)


@pytest.mark.parametrize("h,log_cap", [(0, 0), (0, 3), (3, 0), (3, 1), (3, 3), (3, 8), (5, 2)])
def test_cap_is_level_h_minus_c(h, log_cap):
    tree, _ = _tree(h)
    c = min(log_cap, h)
    cap = mp.cap(tree, log_cap)
    assert cap.shape == (1 << c, 8) and cap.dtype == np.uint32
    np.testing.assert_array_equal(cap, tree.levels[h - c])
    if c == 0:
        np.testing.assert_array_equal(cap[0], tree.root)
    # the cap's nodes are the compressions of the level below them
    if c < h:
        below = tree.levels[h - c - 1]
        for j in range(1 << c):
            np.testing.assert_array_equal(cap[j], _compress(below[2 * j], below[2 * j + 1]))


@settings(max_examples=60, deadline=None)
@given(h=st.integers(0, 6), log_cap=st.integers(0, 8), data=st.data())
def test_plan_and_nodes_match_the_spec(h, log_cap, data):
    n = 1 << h
    idx = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=12))
    tree, _ = _tree(h, seed=h)
    ref = naive_plan(idx, h, log_cap)
    levels, pos = mp.multiproof_plan(np.asarray(idx), h, log_cap)
    assert list(zip(levels.tolist(), pos.tolist())) == ref
    assert mp.multiproof_count(np.asarray(idx), h, log_cap) == len(ref)
    nodes = mp.multiproof_nodes(tree, np.asarray(idx), log_cap)
    assert nodes.shape == (len(ref), 8)
    for k, (level, j) in enumerate(ref):
        np.testing.assert_array_equal(nodes[k], tree.levels[level][j])
    # and they authenticate the leaves against the cap (naive verifier)
    leaves = {int(i): tree.levels[0][int(i)] for i in set(idx)}
    cap = mp.cap(tree, log_cap)
    assert naive_verify(cap, leaves, nodes, h, log_cap)


def test_naive_verifier_can_fail():
    tree, _ = _tree(5, seed=3)
    idx = np.array([1, 9, 9, 30])
    nodes = mp.multiproof_nodes(tree, idx, 2)
    cap = mp.cap(tree, 2)
    leaves = {int(i): tree.levels[0][int(i)] for i in set(idx.tolist())}
    assert naive_verify(cap, leaves, nodes, 5, 2)
    for k in range(nodes.shape[0]):
        bad = nodes.copy()
        bad[k, 0] ^= 1
        assert not naive_verify(cap, leaves, bad, 5, 2)
    assert not naive_verify(cap, leaves, nodes[:-1], 5, 2)
    wrong = dict(leaves)
    wrong[9] = tree.levels[0][8]
    assert not naive_verify(cap, wrong, nodes, 5, 2)


def test_edge_cases():
    tree, _ = _tree(4)
    # every leaf opened: nothing to send
    assert mp.multiproof_nodes(tree, np.arange(16), 0).shape == (0, 8)
    # one leaf, cap 0: a full path (log n nodes, the siblings bottom-up)
    one = mp.multiproof_nodes(tree, np.array([5]), 0)
    np.testing.assert_array_equal(one, tree.paths([5])[0])
    # cap as high as the tree: no nodes at all, the cap is the leaf level
    assert mp.multiproof_nodes(tree, np.array([3, 7]), 8).shape == (0, 8)
    with pytest.raises(ValueError, match="out of range"):
        mp.multiproof_plan(np.array([16]), 4, 0)
    with pytest.raises(ValueError):
        mp.multiproof_plan(np.array([1.5]), 4, 0)


def test_host_open_batch():
    S = HostStages()
    rng = np.random.default_rng(1)
    vals = rng.integers(0, 2013265921, size=(64, 4), dtype=np.uint32)
    tree = S.fri_commit_layer(vals, 2)                       # 16 leaves of 16 elements
    rows, nodes = S.open_batch(tree, np.array([0, 5, 6]), 1)
    np.testing.assert_array_equal(rows, vals.reshape(16, 16)[[0, 5, 6]])
    np.testing.assert_array_equal(nodes, mp.multiproof_nodes(tree, np.array([0, 5, 6]), 1))
    np.testing.assert_array_equal(S.cap(tree, 1), tree.levels[3])
    for bad in (np.array([5, 0]), np.array([5, 5]), np.array([], np.int64), np.array([16])):
        with pytest.raises(ValueError):
            S.open_batch(tree, bad, 1)
