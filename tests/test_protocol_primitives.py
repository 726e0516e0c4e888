"""The verifier's own primitives: Poseidon2 (SPEC §2 known answer, Grain constants),
the Merkle conventions, and agreement with the prover's commitments."""
import numpy as np
import pytest

from steadfast.prover.core import commit as prover_commit
from steadfast.verifier import merkle
from steadfast.verifier.field import barycentric_at, bitrev, ef_basis_combine, pow_scalar_arr
from steadfast.verifier.poseidon2 import P, compress, grain_constants, hash_rows, permute
from steadfast.air import field as F
from tests.kat import KAT_IN, KAT_OUT


def test_poseidon2_known_answer_and_batch():
    out = permute(np.array(KAT_IN, np.uint32))
    assert out.tolist() == KAT_OUT
    batch = np.tile(np.array(KAT_IN, np.uint32), (5, 1))
    batch[1, 0] += 1
    res = permute(batch)
    assert res[0].tolist() == KAT_OUT and res[2].tolist() == KAT_OUT
    assert res[1].tolist() != KAT_OUT


def test_grain_constants_shape_and_range():
    init, part, final = grain_constants()
    assert init.shape == (4, 16) and part.shape == (13,) and final.shape == (4, 16)
    allc = np.concatenate([init.ravel(), part, final.ravel()])
    assert allc.max() < P and len(set(allc.tolist())) == allc.size


def test_poseidon2_matches_kernels_if_present():
    kernels = pytest.importorskip("kernels")
    try:
        kperm = kernels.poseidon2_permute
    except (AttributeError, ImportError):
        pytest.skip("kernels.poseidon2 not available yet")
    rng = np.random.default_rng(3)
    states = rng.integers(0, P, (33, 16), dtype=np.uint64).astype(np.uint32)
    assert np.array_equal(kperm(states), permute(states))


def _ref_sponge(row):
    st = np.zeros(16, np.uint32)
    for i in range(0, len(row), 8):
        blk = row[i:i + 8]
        st[:len(blk)] = blk
        st = permute(st)
    return st[:8]


@pytest.mark.parametrize("w", [1, 7, 8, 9, 17])
def test_hash_rows_overwrite_sponge(w):
    rng = np.random.default_rng(w)
    rows = rng.integers(0, P, (4, w), dtype=np.uint64).astype(np.uint32)
    got = hash_rows(rows)
    for r in range(4):
        assert np.array_equal(got[r], _ref_sponge(rows[r]))


@pytest.mark.parametrize("log_n", [1, 3, 5])
def test_merkle_root_against_prover_trees(log_n):
    # (the openings: caps and multiproofs against the prover's trees, tests/test_multiproof.py)
    rng = np.random.default_rng(log_n)
    rows = rng.integers(0, P, (1 << log_n, 5), dtype=np.uint64).astype(np.uint32)
    tree = prover_commit.commit(rows)
    assert np.array_equal(np.asarray(tree.root), merkle.merkle_root(rows))


def test_compress_is_first_half_of_permutation():
    a = np.arange(8, dtype=np.uint32)
    b = np.arange(8, 16, dtype=np.uint32)
    assert np.array_equal(compress(a, b)[0], permute(np.arange(16, dtype=np.uint32))[:8])


def test_field_helpers():
    assert bitrev(np.arange(8), 3).tolist() == [0, 4, 2, 6, 1, 5, 3, 7]
    e = np.array([0, 1, 5, 30, 12345])
    assert pow_scalar_arr(7, e).tolist() == [pow(7, int(k), P) for k in e]
    # X^c combination: the EF column with coefficient columns v_c = (c+1) embedded
    vals = [F.ef_from_base(np.array([c + 1], np.uint64)) for c in range(4)]
    assert ef_basis_combine(vals)[:, 0].tolist() == [1, 2, 3, 4]


def test_barycentric_matches_direct_evaluation():
    rng = np.random.default_rng(5)
    log_n = 3
    coeffs = rng.integers(0, P, 8).tolist()
    w = F.root_of_unity(log_n)
    col = np.array([[sum(c * pow(w, i * k, P) for k, c in enumerate(coeffs)) % P]
                    for i in range(8)], np.uint32)
    z = rng.integers(0, P, 4, dtype=np.uint64)
    got = barycentric_at(col, z, log_n)[0]
    # Horner in EF
    acc = np.zeros((4, 1), np.uint64)
    for c in reversed(coeffs):
        acc = F.ef_add_base(F.ef_mul(acc, z.reshape(4, 1)), c)
    assert got.tolist() == acc[:, 0].tolist()
