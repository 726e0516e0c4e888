"""The mixed-height Merkle commitment (/work/tools/mmcs_spec.md "The mixed tree (exact)"):
kernels.mmcs.MixedTree (prover) against a plain-Python reference written from the spec's
definition (a dict of nodes, one compress per node), single participant == today's tree,
and verifier.mmcs.verify_mixed: round trips over random participant lists, tampering
(MerkleError) and wrong shapes (ShapeError)."""
import ast
import pathlib
import weakref

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.kernels import merkle as km
from steadfast.kernels import multiproof as kmp
from steadfast.kernels.mmcs import MixedTree, mixed_cap_height
from steadfast.verifier import merkle as vm
from steadfast.verifier import mmcs as vmm
from steadfast.verifier.errors import MerkleError, ShapeError
from steadfast.verifier.poseidon2 import P, compress, hash_rows


# ------------------------------------------------------------------ the reference

def _c(a, b):
    """compress on two single digests (the verifier's Poseidon2)."""
    return compress(np.asarray(a, np.uint32).reshape(1, 8),
                    np.asarray(b, np.uint32).reshape(1, 8))[0].copy()


def ref_tree(heights, leaves):
    """{(level, j): digest}, straight from the spec, one node at a time."""
    H = max(heights)
    N = {}
    tall = [t for t, h in enumerate(heights) if h == H]
    for j in range(1 << H):
        v = leaves[tall[0]][j]
        for t in tall[1:]:
            v = _c(v, leaves[t][j])
        N[0, j] = np.asarray(v, np.uint32)
    for lv in range(1, H + 1):
        for j in range(1 << (H - lv)):
            v = _c(N[lv - 1, 2 * j], N[lv - 1, 2 * j + 1])
            for t, h in enumerate(heights):
                if h == H - lv:
                    v = _c(v, leaves[t][j])
            N[lv, j] = v
    return N


def ref_plan(indices, H, c):
    s = sorted(set(int(i) for i in indices))
    out = []
    for lv in range(H - c):
        ss = set(s)
        out += [(lv, j ^ 1) for j in s if j ^ 1 not in ss]
        s = sorted({j >> 1 for j in s})
    return out


def ref_verify(cap, heights, leaf_digests, indices, nodes, log_cap):
    """The spec's verification, one node at a time: True iff it reaches the cap."""
    H = max(heights)
    c = min(log_cap, min(heights))
    s0 = sorted(set(int(i) for i in indices))
    opened = []
    for t, h in enumerate(heights):
        st_ = sorted({j >> (H - h) for j in s0})
        opened.append(dict(zip(st_, leaf_digests[t])))
    tall = [t for t, h in enumerate(heights) if h == H]
    cur = {}
    for j in s0:
        v = opened[tall[0]][j]
        for t in tall[1:]:
            v = _c(v, opened[t][j])
        cur[j] = v
    it = iter(list(nodes))
    for lv in range(H - c):
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
            v = _c(left, right)
            for t, h in enumerate(heights):
                if h == H - lv - 1:
                    v = _c(v, opened[t][j >> 1])
            nxt[j >> 1] = v
        cur = nxt
    if next(it, None) is not None:
        return False
    return all(np.array_equal(cur[j], cap[j]) for j in cur)


# ------------------------------------------------------------------ helpers

def rand_leaves(heights, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, P, size=(1 << h, 8), dtype=np.uint32) for h in heights]


def rand_rows(heights, seed):
    """Committed row matrices uint32[2^h_t, w_t] (w_t = 1 + t % 3)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, P, size=(1 << h, 1 + t % 3), dtype=np.uint32)
            for t, h in enumerate(heights)]


def recording_rows_of(rows):
    """A rows_of over the full matrices (plain slicing) and the list of its calls
    (t, groups, b)."""
    calls = []

    def rows_of(t, groups, b):
        groups = np.asarray(groups)
        calls.append((t, groups.tolist(), b))
        return rows[t].reshape(-1, 1 << b, rows[t].shape[1])[groups]

    return rows_of, calls


def opened(heights, leaves, indices):
    """Each participant's leaf digests at S_(H-h_t)."""
    H = max(heights)
    s0 = np.unique(np.asarray(indices, np.int64))
    return [leaves[t][np.unique(s0 >> (H - h))] for t, h in enumerate(heights)]


def bump(a, pos):
    """A copy of ``a`` with the element at ``pos`` changed (still a field element)."""
    b = np.array(a, dtype=np.uint32, copy=True)
    b[pos] = (int(b[pos]) + 1) % P
    return b


# ------------------------------------------------------------------ prover vs reference

@pytest.mark.parametrize("heights", [
    [0], [3], [3, 3], [3, 1], [1, 3], [2, 0, 2], [1, 3, 2, 3, 0], [4, 4, 2, 2, 1],
    [0, 0], [5, 2, 5, 2, 3],
])
def test_tree_matches_reference(heights):
    # leaves are real row digests here (the spec's leaf_t[j] = sponge(row j))
    rng = np.random.default_rng(len(heights) * 7 + sum(heights))
    leaves = [hash_rows(rng.integers(0, P, size=(1 << h, 1 + t), dtype=np.uint32))
              for t, h in enumerate(heights)]
    ref = ref_tree(heights, leaves)
    tree = MixedTree.build(heights, leaves)
    H = max(heights)
    assert tree.height == H
    assert tree.stored_bytes == ((2 << H) - 1) * 32
    np.testing.assert_array_equal(tree.root, ref[H, 0])
    for lv in range(H + 1):
        np.testing.assert_array_equal(tree.level(lv), np.stack([ref[lv, j] for j in range(1 << (H - lv))]))
    for log_cap in range(0, H + 3):
        c = mixed_cap_height(heights, log_cap)
        assert c == min(log_cap, min(heights))
        cap = tree.cap(log_cap)
        assert cap.shape == (1 << c, 8) and cap.dtype == np.uint32
        np.testing.assert_array_equal(cap, np.stack([ref[H - c, j] for j in range(1 << c)]))
        for idx in ([0], [(1 << H) - 1], list(range(0, 1 << H, 3)), [1, 1, 0]):
            idx = [i % (1 << H) for i in idx]
            plan = ref_plan(idx, H, c)
            nodes = tree.nodes(np.array(idx), log_cap)
            assert nodes.shape == (len(plan), 8)
            for k, key in enumerate(plan):
                np.testing.assert_array_equal(nodes[k], ref[key])
            dig = opened(heights, leaves, idx)
            assert ref_verify(cap, heights, dig, idx, nodes, log_cap)
            vmm.verify_mixed(cap, heights, dig, idx, nodes, log_cap, "t")
            assert vmm.mixed_multiproof_size(idx, heights, log_cap) == len(plan)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("heights,prune", [([7, 5, 7, 3, 6, 7], 2), ([6, 6, 1], 0),
                                           ([7, 2, 4], 3)])
def test_chunked_build_on_the_pool_matches_reference(monkeypatch, heights, prune, threads):
    """The build's level-0 .. p chunks run on the host pool, each on one thread (serial
    sponges and in-place folds): with chunks of a few groups (many chunks, ranges taken
    dynamically by both threads) every kept node is the reference's."""
    import numba
    from steadfast.kernels import mmcs as kmm
    monkeypatch.setattr(kmm, "_BUILD_CHUNK", 1 << (prune + 1))      # two groups a chunk
    rng = np.random.default_rng(sum(heights) + prune)
    leaves = [hash_rows(rng.integers(0, P, size=(1 << h, 3), dtype=np.uint32))
              for h in heights]
    ref = ref_tree(heights, leaves)
    H = max(heights)
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        tree = MixedTree.build(heights, leaves, prune=prune,
                               rows_of=(lambda *a: None) if prune else None)
    finally:
        numba.set_num_threads(before)
    for lv in range(prune, H + 1):
        np.testing.assert_array_equal(tree.level(lv),
                                      np.stack([ref[lv, j] for j in range(1 << (H - lv))]))


def test_single_participant_is_todays_tree():
    rng = np.random.default_rng(5)
    rows = rng.integers(0, P, size=(32, 5), dtype=np.uint32)
    today = km.commit(rows)
    tree = MixedTree.build([5], [hash_rows(rows)])
    np.testing.assert_array_equal(tree.root, today.root)
    np.testing.assert_array_equal(tree.flat, today.nodes)
    idx = np.array([3, 4, 17, 17, 30])
    s0 = vm.leaf_set(idx)
    for log_cap in range(0, 7):
        np.testing.assert_array_equal(tree.cap(log_cap), kmp.cap(today, log_cap))
        nodes = tree.nodes(idx, log_cap)
        np.testing.assert_array_equal(nodes, kmp.multiproof_nodes(today, idx, log_cap))
        vm.verify_multiproof(tree.cap(log_cap), today.levels[0][s0], s0, nodes, 5, log_cap)
        vmm.verify_mixed(kmp.cap(today, log_cap), [5], [today.levels[0][s0]], idx,
                         kmp.multiproof_nodes(today, idx, log_cap), log_cap, "main")
        assert vmm.mixed_multiproof_size(idx, [5], log_cap) == vm.multiproof_size(idx, 5, log_cap)


# ------------------------------------------------------------------ round trips

heights_st = st.lists(st.integers(0, 7), min_size=1, max_size=5)


@settings(max_examples=120, deadline=None)
@given(heights=heights_st, log_cap=st.integers(0, 3), seed=st.integers(0, 2 ** 16),
       data=st.data())
def test_round_trip_and_tampering(heights, log_cap, seed, data):
    H = max(heights)
    idx = data.draw(st.lists(st.integers(0, (1 << H) - 1), min_size=1, max_size=10))
    leaves = rand_leaves(heights, seed)
    tree = MixedTree.build(heights, leaves)
    cap = tree.cap(log_cap)
    nodes = tree.nodes(np.array(idx), log_cap)
    c = mixed_cap_height(heights, log_cap)
    assert nodes.shape == (vmm.mixed_multiproof_size(idx, heights, log_cap), 8)
    assert nodes.shape[0] == kmp.multiproof_count(np.array(idx), H, c)
    dig = opened(heights, leaves, idx)
    for t, h in enumerate(heights):
        np.testing.assert_array_equal(vmm.participant_indices(idx, heights, t),
                                      np.unique(np.array(idx) >> (H - h)))
    vmm.verify_mixed(cap, heights, dig, idx, nodes, log_cap, "main")
    vmm.verify_mixed(cap, heights, dig, idx[::-1] + idx, nodes, log_cap, "main")  # any order

    # one node
    if nodes.shape[0]:
        k = data.draw(st.integers(0, nodes.shape[0] - 1))
        with pytest.raises(MerkleError, match="main"):
            vmm.verify_mixed(cap, heights, dig, idx, bump(nodes, (k, k % 8)), log_cap, "main")
    # one leaf digest of one participant
    t = data.draw(st.integers(0, len(heights) - 1))
    r = data.draw(st.integers(0, dig[t].shape[0] - 1))
    bad = list(dig)
    bad[t] = bump(dig[t], (r, 3))
    with pytest.raises(MerkleError, match="aux"):
        vmm.verify_mixed(cap, heights, bad, idx, nodes, log_cap, "aux")
    # one cap entry the opening reaches
    j = int(data.draw(st.sampled_from(sorted({i >> (H - c) for i in idx}))))
    with pytest.raises(MerkleError, match="parts"):
        vmm.verify_mixed(bump(cap, (j, 7)), heights, dig, idx, nodes, log_cap, "parts")


@settings(max_examples=40, deadline=None)
@given(heights=st.lists(st.integers(0, 5), min_size=1, max_size=4), log_cap=st.integers(0, 3),
       seed=st.integers(0, 2 ** 16), data=st.data())
def test_random_trees_match_reference(heights, log_cap, seed, data):
    H = max(heights)
    idx = data.draw(st.lists(st.integers(0, (1 << H) - 1), min_size=1, max_size=8))
    leaves = rand_leaves(heights, seed)
    ref = ref_tree(heights, leaves)
    tree = MixedTree.build(heights, leaves)
    c = min(log_cap, min(heights))
    np.testing.assert_array_equal(tree.root, ref[H, 0])
    np.testing.assert_array_equal(tree.cap(log_cap), np.stack([ref[H - c, j] for j in range(1 << c)]))
    plan = ref_plan(idx, H, c)
    nodes = tree.nodes(np.array(idx), log_cap)
    assert [tuple(n) for n in nodes.tolist()] == [tuple(ref[k].tolist()) for k in plan]


def test_empty_index_set():
    heights = [3, 1]
    leaves = rand_leaves(heights, 0)
    tree = MixedTree.build(heights, leaves)
    assert tree.nodes(np.array([], np.int64), 1).shape == (0, 8)
    assert vmm.mixed_multiproof_size([], heights, 1) == 0
    empty = np.zeros((0, 8), np.uint32)
    vmm.verify_mixed(tree.cap(1), heights, [empty, empty], [], empty, 1, "x")


# ------------------------------------------------------------------ order and shapes

def test_table_order_matters():
    leaves = rand_leaves([3, 2, 3, 2], 11)
    base = MixedTree.build([3, 2, 3, 2], leaves)
    swap_tall = MixedTree.build([3, 2, 3, 2], [leaves[2], leaves[1], leaves[0], leaves[3]])
    swap_short = MixedTree.build([3, 2, 3, 2], [leaves[0], leaves[3], leaves[2], leaves[1]])
    assert not np.array_equal(base.root, swap_tall.root)
    assert not np.array_equal(base.root, swap_short.root)
    assert not np.array_equal(swap_tall.root, swap_short.root)
    # the verifier, handed the participants in the other order, rejects
    idx = [1, 6]
    dig = opened([3, 2, 3, 2], leaves, idx)
    nodes = base.nodes(np.array(idx), 0)
    vmm.verify_mixed(base.cap(0), [3, 2, 3, 2], dig, idx, nodes, 0, "main")
    with pytest.raises(MerkleError):
        vmm.verify_mixed(base.cap(0), [3, 2, 3, 2], [dig[2], dig[1], dig[0], dig[3]], idx,
                         nodes, 0, "main")
    with pytest.raises(MerkleError):
        vmm.verify_mixed(base.cap(0), [3, 2, 3, 2], [dig[0], dig[3], dig[2], dig[1]], idx,
                         nodes, 0, "main")


def test_wrong_shapes_are_shape_errors():
    heights = [4, 2, 4]
    leaves = rand_leaves(heights, 3)
    tree = MixedTree.build(heights, leaves)
    idx = [0, 5, 11]
    log_cap = 1
    cap, nodes = tree.cap(log_cap), tree.nodes(np.array(idx), log_cap)
    dig = opened(heights, leaves, idx)
    assert nodes.shape[0] > 1
    ok = dict(cap=cap, heights=heights, leaf_digests=dig, top_indices=idx, nodes=nodes,
              log_cap=log_cap, what="main")
    vmm.verify_mixed(**ok)

    def bad(**kw):
        with pytest.raises(ShapeError):
            vmm.verify_mixed(**{**ok, **kw})

    bad(nodes=nodes[:-1])                                   # a node missing
    bad(nodes=np.concatenate([nodes, nodes[:1]]))           # one too many
    bad(nodes=nodes[:, :7])
    bad(nodes=nodes.reshape(-1))
    bad(nodes=np.where(nodes == nodes, np.uint32(P), nodes))  # not field elements
    bad(cap=cap[:1])                                        # the cap of another c
    bad(cap=tree.cap(2))
    bad(cap=cap[:, :4])
    bad(leaf_digests=dig[:2])                               # a participant missing
    bad(leaf_digests=dig + [dig[0]])
    bad(leaf_digests=[dig[0], dig[1][:1], dig[2]])          # a leaf missing
    bad(leaf_digests=[dig[0], dig[1], np.concatenate([dig[2], dig[2][:1]])])
    bad(leaf_digests=[dig[0], dig[1].reshape(-1), dig[2]])
    bad(leaf_digests=[dig[0], dig[1], dig[2].astype(np.float64)])
    with pytest.raises(ValueError):
        vmm.verify_mixed(**{**ok, "top_indices": [16]})
    with pytest.raises(ValueError):
        vmm.verify_mixed(**{**ok, "heights": []})


def test_build_rejects_bad_input():
    with pytest.raises(ValueError):
        MixedTree.build([], [])
    with pytest.raises(ValueError):
        MixedTree.build([2], [])
    with pytest.raises(ValueError):
        MixedTree.build([2, 1], rand_leaves([2], 0))
    with pytest.raises(ValueError):
        MixedTree.build([2], rand_leaves([3], 0))
    with pytest.raises(ValueError):
        MixedTree.build([2], [np.zeros((4, 7), np.uint32)])
    with pytest.raises(ValueError):
        MixedTree.build([-1], [np.zeros((1, 8), np.uint32)])
    with pytest.raises(ValueError):
        MixedTree.build([1], [np.full((2, 8), P, np.uint32)])
    with pytest.raises(TypeError):
        MixedTree.build([1], [np.zeros((2, 8), np.int64)])


def test_leaves_are_not_kept():
    leaves = rand_leaves([6, 3, 6], 2)
    refs = [weakref.ref(a) for a in leaves]
    tree = MixedTree.build([6, 3, 6], leaves)
    root = tree.root.copy()
    del leaves
    assert all(r() is None for r in refs)
    np.testing.assert_array_equal(tree.root, root)
    with pytest.raises(AttributeError):
        tree._nodes = None
    with pytest.raises(ValueError):
        tree.flat[0, 0] = 1                                 # read-only


def test_large_build_is_vectorised():
    # 2^16 tall leaves and a few short participants: a per-node Python loop would take
    # seconds; the batched levels take milliseconds.
    import time
    heights = [16, 14, 16, 10, 14]
    rows = rand_rows(heights, 9)
    leaves = [hash_rows(r) for r in rows]
    rows_of, calls = recording_rows_of(rows)
    t0 = time.perf_counter()
    tree = MixedTree.build(heights, leaves, rows_of=rows_of)      # default prune: 6
    full = MixedTree.build(heights, leaves, prune=0)
    assert time.perf_counter() - t0 < 5.0
    assert tree.prune == 6 and tree.stored_bytes == ((2 << 10) - 1) * 32
    assert full.stored_bytes == ((2 << 16) - 1) * 32
    idx = np.random.default_rng(0).integers(0, 1 << 16, 40)
    t0 = time.perf_counter()
    nodes = tree.nodes(idx, 3)
    assert time.perf_counter() - t0 < 2.0
    np.testing.assert_array_equal(nodes, full.nodes(idx, 3))
    assert sorted(t for t, _, _ in calls) == [0, 1, 2, 4]        # not the height-10 one
    vmm.verify_mixed(tree.cap(3), heights, opened(heights, leaves, idx), idx, nodes, 3, "main")


def test_verifier_is_independent():
    src = pathlib.Path(vmm.__file__).read_text()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            assert node.level == 1 or not mod.startswith(("steadfast.kernels", "steadfast.prover",
                                                          "kernels", "prover")), mod
            assert "kernels" not in mod and "prover" not in mod, mod
        elif isinstance(node, ast.Import):
            for a in node.names:
                assert "kernels" not in a.name and "prover" not in a.name, a.name


# ------------------------------------------------------------------ pruned trees

def test_default_prune():
    from steadfast.kernels.mmcs import default_prune
    assert [default_prune(H) for H in (0, 3, 8, 9, 10, 14, 15, 22)] == [0, 0, 0, 1, 2, 6, 6, 6]
    # H < 9: every level kept, no rows_of needed (today's tree)
    for heights in ([8], [8, 3], [7, 7, 0]):
        tree = MixedTree.build(heights, rand_leaves(heights, 1))
        assert tree.prune == 0 and tree.stored_bytes == ((2 << max(heights)) - 1) * 32


def check_pruned(heights, prune, log_caps, idx_sets, seed):
    """The pruned tree (rows_of over the full matrices) against the unpruned one: root,
    kept levels, caps, multiproof nodes; rows_of called only for the participants taller
    than H - p, once per nodes() call each, for exactly the groups the nodes below the
    kept levels lie in, with b = p - (H - h_t)."""
    H = max(heights)
    rows = rand_rows(heights, seed)
    leaves = [hash_rows(r) for r in rows]
    rows_of, calls = recording_rows_of(rows)
    full = MixedTree.build(heights, leaves, prune=0)
    tree = MixedTree.build(heights, leaves, prune=prune, rows_of=rows_of)
    p = tree.prune
    assert p == (min(6, max(0, H - 8)) if prune is None else prune)
    assert not calls                                            # the build needs no rows
    assert tree.height == H and tree.heights == tuple(heights)
    assert tree.stored_bytes == ((2 << (H - p)) - 1) * 32 == tree.flat.nbytes
    np.testing.assert_array_equal(tree.root, full.root)
    for lv in range(p, H + 1):
        np.testing.assert_array_equal(tree.level(lv), full.level(lv))
    for lv in range(p):
        with pytest.raises(ValueError, match="not kept"):
            tree.level(lv)
    tall = [t for t, h in enumerate(heights) if h > H - p]
    for log_cap in log_caps:
        c = mixed_cap_height(heights, log_cap)
        if H - c < p:
            with pytest.raises(ValueError, match="below the kept levels"):
                tree.cap(log_cap)
            with pytest.raises(ValueError, match="below the kept levels"):
                tree.nodes(np.array([0]), log_cap)
            continue
        np.testing.assert_array_equal(tree.cap(log_cap), full.cap(log_cap))
        for idx in idx_sets:
            del calls[:]
            got = tree.nodes(np.array(idx, np.int64), log_cap)
            np.testing.assert_array_equal(got, full.nodes(np.array(idx, np.int64), log_cap))
            low = [(lv, j) for lv, j in ref_plan(idx, H, c) if lv < p]
            groups = sorted({j >> (p - lv) for lv, j in low})
            if not low:
                assert not calls
                continue
            assert sorted(t for t, _, _ in calls) == tall
            for t, g, b in calls:
                assert g == groups and b == p - (H - heights[t])
    return tree


@settings(max_examples=25, deadline=None)
@given(heights=st.lists(st.integers(0, 12), min_size=1, max_size=5).filter(lambda h: max(h) >= 9),
       seed=st.integers(0, 2 ** 16), data=st.data())
def test_default_pruned_tree_matches_full(heights, seed, data):
    # H = 9 .. 12: the default prune p = H - 8 = 1 .. 4
    H = max(heights)
    idx_sets = [data.draw(st.lists(st.integers(0, (1 << H) - 1), min_size=1, max_size=12))
                for _ in range(3)]
    g = data.draw(st.integers(0, (1 << (H - 1)) - 1))
    idx_sets.append(list(range(g << 1, (g + 1) << 1)))          # a whole level-1 group
    idx_sets.append([])
    log_caps = sorted({data.draw(st.integers(0, 9)), 0, 8})
    check_pruned(heights, None, log_caps, idx_sets, seed)


@settings(max_examples=60, deadline=None)
@given(heights=st.lists(st.integers(0, 7), min_size=1, max_size=5).filter(lambda h: max(h) >= 1),
       seed=st.integers(0, 2 ** 16), data=st.data())
def test_explicit_prune_matches_full(heights, seed, data):
    H = max(heights)
    prune = data.draw(st.integers(1, min(4, H)))
    idx_sets = [data.draw(st.lists(st.integers(0, (1 << H) - 1), min_size=1, max_size=10))
                for _ in range(2)]
    idx_sets.append(list(range(1 << H)))                        # everything: no nodes
    log_caps = list(range(0, H + 2))
    check_pruned(heights, prune, log_caps, idx_sets, seed)


def test_pruned_tree_matches_reference():
    heights = [5, 2, 5, 3, 4, 5]
    rows = rand_rows(heights, 4)
    leaves = [hash_rows(r) for r in rows]
    ref = ref_tree(heights, leaves)
    rows_of, calls = recording_rows_of(rows)
    tree = MixedTree.build(heights, leaves, prune=3, rows_of=rows_of)
    idx = [0, 9, 10, 31]
    plan = ref_plan(idx, 5, 2)
    nodes = tree.nodes(np.array(idx), 2)
    assert [tuple(n) for n in nodes.tolist()] == [tuple(ref[k].tolist()) for k in plan]
    # levels 0 .. 2 are recomputed: participants 0, 2, 5 (height 5), 4 (4), 3 (3)
    assert sorted((t, b) for t, _, b in calls) == [(0, 3), (2, 3), (3, 1), (4, 2), (5, 3)]
    np.testing.assert_array_equal(tree.cap(2), np.stack([ref[3, j] for j in range(4)]))
    vmm.verify_mixed(tree.cap(2), heights, opened(heights, leaves, idx), idx, nodes, 2, "main")


def test_prune_needs_rows_of_and_a_valid_level():
    heights = [10, 6, 10]
    leaves = rand_leaves(heights, 6)
    with pytest.raises(ValueError, match="rows_of"):
        MixedTree.build(heights, leaves)                        # default prune 2
    for p in (1, 4, 10):
        with pytest.raises(ValueError, match="rows_of"):
            MixedTree.build(heights, leaves, prune=p)
    with pytest.raises(ValueError, match="rows_of"):
        MixedTree.build([3], rand_leaves([3], 0), prune=1)
    rows_of = lambda t, groups, b: None                        # never called here
    for p in (-1, 11):
        with pytest.raises(ValueError, match="prune"):
            MixedTree.build(heights, leaves, prune=p, rows_of=rows_of)
    MixedTree.build(heights, leaves, prune=0)                   # no rows needed
    # a bad rows_of answer is a ValueError at opening time
    tree = MixedTree.build(heights, leaves, prune=2, rows_of=lambda t, g, b: np.zeros((1, 1, 1), np.uint32))
    with pytest.raises(ValueError, match="rows_of"):
        tree.nodes(np.array([1, 200]), 0)
    # the root-only tree (p = H) still opens
    rows = rand_rows(heights, 6)
    lv = [hash_rows(r) for r in rows]
    rf, _ = recording_rows_of(rows)
    top = MixedTree.build(heights, lv, prune=10, rows_of=rf)
    full = MixedTree.build(heights, lv, prune=0)
    assert top.stored_bytes == 32
    np.testing.assert_array_equal(top.cap(0), full.cap(0))
    np.testing.assert_array_equal(top.nodes(np.array([3, 700]), 0), full.nodes(np.array([3, 700]), 0))
    with pytest.raises(ValueError, match="below the kept levels"):
        top.cap(1)


def test_pruned_tree_keeps_no_leaves():
    heights = [9, 4, 9]
    rows = rand_rows(heights, 2)
    leaves = [hash_rows(r) for r in rows]
    refs = [weakref.ref(a) for a in leaves]
    rows_of, _ = recording_rows_of(rows)
    tree = MixedTree.build(heights, leaves, rows_of=rows_of)
    root = tree.root.copy()
    del leaves
    assert all(r() is None for r in refs)
    assert tree.prune == 1
    np.testing.assert_array_equal(tree.root, root)
    with pytest.raises(AttributeError):
        tree._rows_of = None
