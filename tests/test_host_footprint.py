"""Host prover footprint and arithmetic (issue #12): the LDE-backed tree opens exactly
what a tree over the committed matrix opens, without holding that matrix; the lazily
reduced air.field forms equal naive big-integer arithmetic."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.air import field as F
from steadfast.kernels.ntt_host import bit_reverse_permutation
from steadfast.prover.core import commit as merkle
from steadfast.prover.core import ldetree as LT
from steadfast.prover.core.stages import _bitrev_index, _bitrev_rows, _LdeTree

P = F.P


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 11), st.integers(1, 9), st.integers(0, 4), st.integers(0, 2**32 - 1))
def test_lde_tree_opens_like_the_matrix_tree(log_n, c, prune, seed):
    """The pruned LDE tree (no row matrix, no levels below ``prune``, hashed in chunks)
    has the root, caps, rows, paths and multiproofs of the full tree over the
    bit-reversed rows."""
    from steadfast.kernels import multiproof as mp
    from steadfast.prover.core import stages as S
    rng = np.random.default_rng(seed)
    lde = rng.integers(0, P, (c, 1 << log_n), dtype=np.uint32)
    prune = min(prune, log_n)
    # the reference matrix by numpy (independent of _bitrev_rows' compiled gather)
    full = merkle.commit(np.ascontiguousarray(bit_reverse_permutation(lde.T.copy(), axis=0)))
    assert np.array_equal(_bitrev_rows(lde), full.matrix)
    chunk = LT._COMMIT_CHUNK
    try:
        LT._COMMIT_CHUNK = 1 << max(prune, log_n - 2)        # several chunks
        lean = _LdeTree.commit(lde, prune=prune)
    finally:
        LT._COMMIT_CHUNK = chunk
    assert lean.stored_bytes == ((2 << (log_n - prune)) - 1) * 32
    assert np.array_equal(full.root, lean.root)
    idx = rng.integers(0, 1 << log_n, 9)
    (r1, p1), (r2, p2) = full.open(idx), lean.open(idx)
    assert np.array_equal(r1, r2) and np.array_equal(p1, p2)
    for log_cap in range(0, 5):
        assert np.array_equal(mp.cap(full, log_cap), lean.cap(log_cap))
        u = np.unique(idx)
        rows, nodes = lean.open_batch(u, log_cap)
        assert np.array_equal(rows, full.matrix[u])
        assert np.array_equal(nodes, mp.multiproof_nodes(full, u, log_cap))


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 6), st.integers(1, 20), st.integers(0, 2**32 - 1))
def test_level_digests_are_the_tree_levels(log_n, w, seed):
    from steadfast.kernels.merkle import level_digests
    rng = np.random.default_rng(seed)
    m = rng.integers(0, P, (1 << log_n, w), dtype=np.uint32)
    tree = merkle.commit(m)
    for level in range(log_n + 1):
        assert np.array_equal(level_digests(m, level), tree.levels[level])


def test_level_digests_rejects_bad_input():
    from steadfast.kernels.merkle import level_digests
    with pytest.raises(ValueError, match="multiple"):
        level_digests(np.zeros((6, 2), np.uint32), 2)
    with pytest.raises(ValueError, match="canonical"):
        level_digests(np.full((4, 2), P, np.uint32), 1)
    with pytest.raises(TypeError):
        level_digests(np.zeros((4, 2), np.int64), 1)


def test_released_lde_is_recomputed_identically():
    """A committed matrix's LDE, released and read again, is recomputed from the
    coefficients to the same values; the tree opens the same rows after the release."""
    from steadfast.air import field as F
    from steadfast.prover.core.stages import Committed, HostStages
    from steadfast.verifier.protocol import table_shape
    from steadfast.air.examples import fibonacci_air
    air = fibonacci_air()
    rng = np.random.default_rng(3)
    for log_blowup in (1, 2, 3):
        from steadfast.verifier.proof_format import Params
        shape = table_shape(air, 6, Params(log_blowup=log_blowup))
        trace = rng.integers(0, P, (64, air.main_width), dtype=np.uint32)
        com = HostStages()._commit_columns(np.ascontiguousarray(trace.T), shape)
        assert isinstance(com, Committed) and com.holds_lde
        kept = com.lde.copy()
        idx = np.array([0, 5, 17, 63])
        rows, nodes = HostStages().open_batch(com.tree, idx, 1)
        com.release()
        assert not com.holds_lde
        assert np.array_equal(com.tree.rows(idx), kept[:, _bitrev_index(idx, shape.log_lde)].T)
        assert not com.holds_lde                          # an opening does not keep it
        r2, n2 = HostStages().open_batch(com.tree, idx, 1)
        assert np.array_equal(rows, r2) and np.array_equal(nodes, n2)
        assert np.array_equal(com.lde, kept) and com.holds_lde


def test_bitrev_index_matches_permutation():
    for bits in range(0, 9):
        a = np.arange(1 << bits, dtype=np.int64)
        assert np.array_equal(_bitrev_index(a, bits), bit_reverse_permutation(a))


def _ef_mul_ref(a, b):
    c = [0] * 7
    for i in range(4):
        for j in range(4):
            c[i + j] += int(a[i]) * int(b[j])
    return [(c[0] + 11 * c[4]) % P, (c[1] + 11 * c[5]) % P, (c[2] + 11 * c[6]) % P, c[3] % P]


residue = st.integers(0, P - 1)
edge = st.sampled_from([0, 1, 2, P - 2, P - 1, P // 2, (P + 1) // 2])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(residue, edge), min_size=8, max_size=8))
def test_lazy_field_forms_match_big_integers(v):
    a = np.array(v[:4], np.uint64).reshape(4, 1)
    b = np.array(v[4:], np.uint64).reshape(4, 1)
    x, y = np.array(v[:4], np.uint64), np.array(v[4:], np.uint64)
    assert F.add(x, y).tolist() == [(int(p) + int(q)) % P for p, q in zip(x, y)]
    assert F.sub(x, y).tolist() == [(int(p) - int(q)) % P for p, q in zip(x, y)]
    assert F.neg(x).tolist() == [(-int(p)) % P for p in x]
    assert F.mul(x, y).tolist() == [int(p) * int(q) % P for p, q in zip(x, y)]
    # the vector EF path (not the scalar fast path): tile to (4, 3)
    A, B = np.tile(a, 3), np.tile(b, 3)
    got = F.ef_mul(A, B)
    assert got[:, 1].tolist() == _ef_mul_ref(v[:4], v[4:])
    assert F.ef_mul_base(A, B[0]).tolist() == [[int(p) * int(v[4]) % P] * 3 for p in v[:4]]


def test_field_scalar_inputs_keep_their_types():
    assert isinstance(F.add(3, 4), np.ndarray) and int(F.add(P - 1, 1)) == 0
    assert int(F.sub(0, 1)) == P - 1 and int(F.neg(0)) == 0


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 40), st.sampled_from([1, 2, 1023, 1024, 1025, 3000]), st.integers(0, 2**32 - 1))
def test_combine_rows_matches_big_integers(c, n, seed):
    from steadfast.prover.core.hostops import combine_rows
    rng = np.random.default_rng(seed)
    mat = rng.integers(0, P, (c, n), dtype=np.uint32)
    co = rng.integers(0, P, (c, 4), dtype=np.uint32)
    mat[0, 0], co[0, 0] = P - 1, P - 1
    ref = (mat.astype(object).T.dot(co.astype(object)) % P).astype(np.uint32)
    assert np.array_equal(combine_rows(mat, co), ref)
    # into=: the sums added to a canonical array in place (DEEP's groups)
    base = rng.integers(0, P, (n, 4), dtype=np.uint32)
    base[0] = P - 1
    want = ((base.astype(object) + ref.astype(object)) % P).astype(np.uint32)
    got = combine_rows(mat, co, into=base)
    assert got is base and np.array_equal(got, want)
    with pytest.raises(ValueError, match="into"):
        combine_rows(mat, co, into=np.zeros((n + 1, 4), np.uint32))


def test_combine_rows_rejects_non_canonical_coefficients():
    import pytest
    from steadfast.prover.core.hostops import combine_rows
    with pytest.raises(ValueError, match="canonical"):
        combine_rows(np.zeros((2, 4), np.uint32), np.full((2, 4), P, np.uint32))


def test_deep_quotient_from_released_ldes_is_the_same():
    """DEEP from the coefficients (the matrices' LDEs released) equals DEEP combined on
    the LDE domain (the same matrices given by their LDEs alone), and releases them."""
    from steadfast.prover.core import stages as S
    from steadfast.verifier.protocol import table_shape
    from steadfast.verifier.proof_format import Params
    from steadfast.air.examples import fibonacci_air
    air = fibonacci_air()
    rng = np.random.default_rng(5)
    shape = table_shape(air, 5, Params(log_blowup=2))
    host = S.HostStages()

    def commits():
        r = np.random.default_rng(9)
        out = []
        for c in (3, 5):
            ev = r.integers(0, P, (c, 32), dtype=np.uint32)
            out.append(host._commit_columns(ev, shape))
        return out

    z = rng.integers(0, P, 4, dtype=np.uint32)
    lam = rng.integers(0, P, 4, dtype=np.uint32)
    vals = [rng.integers(0, P, (c, 4), dtype=np.uint32) for c in (3, 3, 5)]
    a, b = commits()
    want = host.deep_quotient(shape, [(a, vals[0], False), (a, vals[1], True), (b, vals[2], False)], z, lam)
    assert not a.holds_lde and not b.holds_lde                   # released after their groups
    a, b = (S.Committed(m.lde, None, m.tree, m.root) for m in commits())
    got = host.deep_quotient(shape, [(a, vals[0], False), (a, vals[1], True), (b, vals[2], False)], z, lam)
    assert np.array_equal(got, want)
