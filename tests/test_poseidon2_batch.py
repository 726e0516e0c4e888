"""The batched (lane-major, chunked, threaded) Poseidon2 host path against the scalar
references, at batch sizes straddling its chunk and vector edges; and the vector-width
switch of steadfast/_vector_width.py (issue #12)."""
from __future__ import annotations

import functools
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast import _vector_width as vw
from steadfast.kernels import poseidon2 as p2
from steadfast.kernels.field import P
from tests.kat import KAT_IN, KAT_OUT
from tests.test_poseidon2 import permute_ref, shared_permute_python, sponge_ref

EDGES = [0, 1, 7, 8, 9, 15, 16, 17, 1023, 1024, 1025]


def _rows_to_check(n: int, rng) -> list[int]:
    """Every row of a small batch; for a large one both ends of every chunk edge plus a
    random sample (the pure-Python reference costs ~1 ms a state)."""
    if n <= 2 * p2.BLOCK:
        return list(range(n))
    picks = {0, n - 1}
    for e in range(p2.BLOCK, n, p2.BLOCK):
        if e % (4 * p2.BLOCK) == 0 or e + p2.BLOCK >= n:
            picks |= {e - 1, e}
    picks |= set(rng.integers(0, n, 16).tolist())
    return sorted(picks)


@settings(max_examples=len(EDGES) + 4, deadline=None)
@given(st.sampled_from(EDGES), st.integers(0, 2**32 - 1))
def test_permute_batch_matches_scalar_reference(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, P, (n, 16), dtype=np.uint32)
    if n:
        x[rng.integers(0, n)] = P - 1                    # extreme lanes somewhere
    got = p2.poseidon2_permute(x)
    assert got.shape == (n, 16) and got.dtype == np.uint32
    for i in _rows_to_check(n, rng):
        assert got[i].tolist() == permute_ref(x[i]), f"state {i} of {n}"
    if n:                                                 # per-state: chunking is invisible
        cut = int(rng.integers(0, n))
        assert np.array_equal(got, np.concatenate([p2.poseidon2_permute(x[:cut]),
                                                   p2.poseidon2_permute(x[cut:])]))


# lane values at the edges of the kernel's lazy-reduction bounds (issue #12: the fused
# one-pass rounds keep the same bounds; these states would expose an off-by-p slip)
BOUNDARY = [0, 1, 2, P - 1, P - 2, (P - 1) // 2, (P + 1) // 2, 1 << 27, (1 << 27) - 1,
            (1 << 30), P - (1 << 27), (1 << 31) - 1 - P + P // 2]


@settings(max_examples=12, deadline=None)
@given(st.lists(st.lists(st.sampled_from(BOUNDARY), min_size=16, max_size=16),
                min_size=1, max_size=20),
       st.integers(0, 2 * p2.BLOCK))
def test_permute_boundary_lanes_match_scalar_reference(states, pad):
    """States made of boundary lane values, anywhere in a batch (a column of a chunk, a
    full or a short last chunk), permute exactly as the pure-Python reference."""
    rng = np.random.default_rng(pad)
    x = rng.integers(0, P, (pad + len(states), 16), dtype=np.uint32)
    x[pad:] = np.array(states, dtype=np.uint32)
    got = p2.poseidon2_permute(x)
    for i in range(pad, x.shape[0]):
        assert got[i].tolist() == permute_ref(x[i]), f"state {i}"
    assert np.array_equal(p2.compress_pairs(x)[pad:], got[pad:, :8])


@settings(max_examples=len(EDGES), deadline=None)
@given(st.sampled_from(EDGES), st.sampled_from([1, 8, 9, 16, 23]), st.integers(0, 2**32 - 1))
def test_leaf_sponge_batch_matches_scalar_reference(n, w, seed):
    rng = np.random.default_rng(seed)
    m = rng.integers(0, P, (n, w), dtype=np.uint32)
    got = p2.hash_rows(m)
    assert got.shape == (n, 8)
    for i in _rows_to_check(n, rng)[:40]:
        assert got[i].tolist() == sponge_ref(m[i]), f"row {i} of {n}, width {w}"


@settings(max_examples=len(EDGES), deadline=None)
@given(st.sampled_from(EDGES), st.integers(0, 2**32 - 1))
def test_compression_batch_matches_scalar_reference(n, seed):
    rng = np.random.default_rng(seed)
    pairs = rng.integers(0, P, (n, 16), dtype=np.uint32)
    got = p2.compress_pairs(pairs)
    assert got.shape == (n, 8)
    for i in _rows_to_check(n, rng)[:40]:
        assert got[i].tolist() == permute_ref(pairs[i])[:8]


def test_batch_known_answer_and_shared_source_agree():
    x = np.array([KAT_IN] * 9, np.uint32)
    assert all(r == KAT_OUT for r in p2.poseidon2_permute(x).tolist())
    assert shared_permute_python(KAT_IN) == KAT_OUT


# ---------------------------------------------------------------- vector width switch
AVX512_HOST = {"avx2": True, "avx512f": True, "avx512dq": True, "avx512vl": True, "sse2": True}
AVX2_HOST = {"avx2": True, "avx512f": False, "sse2": True}


def test_features_for_choices():
    s = vw.features_for("auto", AVX512_HOST)
    assert s.endswith(",-prefer-256-bit") and "+avx512f" in s and "+avx2" in s
    assert "-avx512dq" in s.split(",") and "+avx512dq" not in s   # no vpmullq (see _drop)
    fp16 = vw.features_for("auto", {**AVX512_HOST, "avx512fp16": True, "avx10.1-512": True})
    assert "-avx512fp16" in fp16.split(",") and "-avx10.1-512" in fp16.split(",")
    assert vw.features_for("512", AVX512_HOST) == s
    assert vw.features_for("256", AVX512_HOST) is None
    assert vw.features_for("auto", AVX2_HOST) is None          # AVX2 hosts: numba's default
    with pytest.raises(ValueError, match="AVX-512"):
        vw.features_for("512", AVX2_HOST)
    with pytest.raises(ValueError, match="STEADFAST_VECTOR_WIDTH"):
        vw.features_for("1024", AVX512_HOST)


_CHILD = """
import hashlib, numpy as np
from steadfast.kernels.poseidon2 import poseidon2_permute, hash_rows
from steadfast.kernels.field import P
x = np.random.default_rng(5).integers(0, P, (1025, 16), dtype=np.uint32)
print(hashlib.sha256(poseidon2_permute(x).tobytes() + hash_rows(x[:, :11]).tobytes()).hexdigest())
"""


def test_vector_widths_give_identical_bytes():
    """256- and 512-bit code generation (where the host has AVX-512) agree bit for bit."""
    import llvmlite.binding as ll
    if vw.features_for("auto", dict(ll.get_host_cpu_features())) is None:
        pytest.skip("host without AVX-512: only one width to test")
    out = []
    for width in ("256", "512"):
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_CPU_FEATURES"}
        env["STEADFAST_VECTOR_WIDTH"] = width
        r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        out.append(r.stdout.strip().splitlines()[-1])
    assert out[0] == out[1]


def _partial_rounds_ref(lanes_mont):
    """The 13 partial rounds on canonical values (SPEC §2), in and out in Montgomery form
    (x*2^32 mod p), from the rational V16 table: an independent model of _partial_rounds."""
    from steadfast.kernels import poseidon2_constants as pc
    r = (1 << 32) % P
    rinv = pow(r, -1, P)
    v16 = [n * pow(d, -1, P) % P for n, d in pc.V16_RATIONAL]
    s = [x * rinv % P for x in lanes_mont]
    for rc in pc.RC_PARTIAL.tolist():
        s[0] = pow((s[0] + rc) % P, 7, P)
        tot = sum(s) % P
        s = [(tot + v * x) % P for v, x in zip(v16, s)]
    return [x * r % P for x in s]


@functools.lru_cache(maxsize=1)
def _partial_rounds_kernel():
    from numba import njit
    return njit(p2._partial_rounds.py_func)       # compiled once for the test


# lane values at the partial rounds' entry bound (|x| < 0.75p, centred Montgomery form)
_EDGE_IN = [0, 1, -1, (3 * P) // 4 - 1, -((3 * P) // 4 - 1), P // 2, -(P // 2), 1 << 30]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_EDGE_IN), min_size=16, max_size=16),
                min_size=1, max_size=p2.BLOCK))
def test_partial_rounds_lazy_bounds_at_extremes(cols):
    """_partial_rounds keeps lanes unreduced between rounds (the +-4 lanes grow 4x a
    round); fed columns at its entry bound it must still agree mod p with the model and
    stay inside the documented |lane| < 2^57.1."""
    kern = _partial_rounds_kernel()
    buf = np.zeros(16 * p2.BLOCK, np.int64)
    for j, col in enumerate(cols):
        for i, v in enumerate(col):
            buf[i * p2.BLOCK + j] = v
    kern(buf, p2._RCP_S, p2._K_R2)
    assert int(np.abs(buf).max()) < 2 ** 57.1
    for j, col in enumerate(cols):
        got = [int(buf[i * p2.BLOCK + j]) % P for i in range(16)]
        assert got == _partial_rounds_ref([v % P for v in col]), f"column {j}"
