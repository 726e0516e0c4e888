"""The 32-bit-lane Poseidon2 host kernel (kernels/poseidon2_lanes.py) against the int64
kernel and the pure-Python reference: group edges, short last blocks, lazy-bound lane
values, both kernels and both vector widths in fresh processes (bit-identical bytes)."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from steadfast.kernels import poseidon2 as p2
from steadfast.kernels import poseidon2_lanes as pl
from steadfast.kernels.field import P
from tests.test_poseidon2 import permute_ref, sponge_ref

W = pl.W


def _run(m, k, rate):
    out = np.zeros((m.shape[0], k), np.uint32)
    pl.sponge_lanes(m, out, rate, 0, (m.shape[0] + W - 1) // W)
    return out


@pytest.mark.parametrize("n", [1, W - 1, W, W + 1, 3 * W + 5])
def test_permute_and_compress_match_reference(n):
    rng = np.random.default_rng(n)
    x = rng.integers(0, P, (n, 16), dtype=np.uint32)
    x[0] = P - 1
    got = _run(x, 16, 16)
    for i in range(n):
        assert got[i].tolist() == permute_ref(x[i]), f"state {i} of {n}"
    assert np.array_equal(_run(x, 8, 16), got[:, :8])


@pytest.mark.parametrize("w", [1, 7, 8, 9, 16, 17, 24, 40])
def test_leaf_sponge_matches_reference(w):
    """Whole rate blocks go through the vector transposes, a short one element-wise."""
    rng = np.random.default_rng(w)
    n = 2 * W + 3
    m = rng.integers(0, P, (n, w), dtype=np.uint32)
    got = _run(m, 8, 8)
    for i in (0, 1, W - 1, W, 2 * W, n - 1):
        assert got[i].tolist() == sponge_ref(m[i].tolist()), f"row {i}, w = {w}"


def test_extreme_lanes_match_reference():
    """Lane values at the ends of [0, p) and around 2^27 / 2^31 - p (the 2^-k splits and
    the signed Montgomery bounds) in every lane position of a whole group."""
    vals = [0, 1, 2, P - 1, P - 2, (P - 1) // 2, (P + 1) // 2, 1 << 27, (1 << 27) - 1,
            1 << 30, P - (1 << 27), (1 << 31) - 1 - P + P // 2, 255, 256]
    rng = np.random.default_rng(3)
    x = rng.choice(np.array(vals, dtype=np.uint32), size=(4 * W, 16))
    got = _run(x, 16, 16)
    for i in range(x.shape[0]):
        assert got[i].tolist() == permute_ref(x[i]), f"state {i}"


@pytest.mark.parametrize("n", [1, W - 1, W, W + 1, 3 * W + 5])
@pytest.mark.parametrize("serial", [False, True])
def test_pair_sponge_is_compress_in_place_or_not(n, serial):
    """_sponge(m, out, 16, m2=...) is compress(m[j], m2[j]) row by row -- the kernel
    reading the pair from two arrays -- whether out is a fresh array or m itself (a
    mixed tree's fold in place), at group edges."""
    rng = np.random.default_rng(n + 100 * serial)
    a = rng.integers(0, P, (n, 8), dtype=np.uint32)
    b = rng.integers(0, P, (n, 8), dtype=np.uint32)
    a[0], b[-1] = P - 1, P - 1
    want = np.array([permute_ref([int(x) for x in a[i]] + [int(x) for x in b[i]])[:8]
                     for i in range(n)],
                    np.uint32).reshape(n, 8)
    assert np.array_equal(p2.compress(a, b), want)
    out = np.zeros((n, 8), np.uint32)
    p2._sponge(a, out, 16, m2=b, serial=serial)
    assert np.array_equal(out, want)
    inplace = a.copy()
    p2._sponge(inplace, inplace, 16, m2=b, serial=serial)
    assert np.array_equal(inplace, want)
    with pytest.raises(ValueError, match="sponge of pairs"):
        p2._sponge(a, out, 8, m2=b)


def test_lanes_kernel_equals_int64_kernel():
    rng = np.random.default_rng(11)
    x = rng.integers(0, P, (1000, 16), dtype=np.uint32)
    ref = np.empty_like(x)
    chunks = (x.shape[0] + p2.BLOCK - 1) // p2.BLOCK
    p2._sponge_kernel(x, ref, 16, 0, chunks, *p2._fast_args())
    assert np.array_equal(_run(x, 16, 16), ref)


_CHILD = """
import hashlib, numpy as np
from steadfast.kernels import poseidon2 as p2
from steadfast.kernels.field import P
x = np.random.default_rng(5).integers(0, P, (1031, 16), dtype=np.uint32)
fold = x[:, :8].copy()
p2._sponge(fold, fold, 16, m2=x[:, 8:].copy())        # the mixed tree's fold in place
h = hashlib.sha256(p2.poseidon2_permute(x).tobytes() + p2.hash_rows(x[:, :13]).tobytes()
                   + p2.compress_pairs(x).tobytes() + fold.tobytes())
assert (fold == p2.compress_pairs(x)).all()
print(p2.KERNEL, h.hexdigest())
"""


def test_kernels_and_widths_give_identical_bytes():
    """lanes at the default width, lanes at 256 bits (8 states a vector), int64: one hash."""
    runs = [{}, {"STEADFAST_VECTOR_WIDTH": "256"}, {"STEADFAST_POSEIDON2_KERNEL": "int64"}]
    hashes = set()
    for extra in runs:
        env = {k: v for k, v in os.environ.items()
               if k not in ("NUMBA_CPU_FEATURES", "STEADFAST_VECTOR_WIDTH",
                            "STEADFAST_POSEIDON2_KERNEL")}
        env.update(extra)
        r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                           text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-2000:]
        hashes.add(r.stdout.strip().splitlines()[-1].split()[1])
    assert len(hashes) == 1, hashes


def test_non_contiguous_arrays_are_copied_not_misread():
    """_sponge's lanes path addresses rows by flat offsets: strided views in or out go
    through C-contiguous copies."""
    rng = np.random.default_rng(4)
    x = rng.integers(0, P, (3 * W + 1, 32), dtype=np.uint32)
    view = x[:, ::2]
    out = np.zeros((x.shape[0], 32), np.uint32)[:, ::2]
    p2._sponge(view, out, 16)
    assert np.array_equal(out, p2.poseidon2_permute(np.ascontiguousarray(view)))
