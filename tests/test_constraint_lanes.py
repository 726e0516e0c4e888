"""The constraint interpreter's instructions in 32-bit lanes (kernels/constraint_lanes.py,
run by kernels/constraint_host.py's ``_run_block``) against air.field on the decoded
values, bit for bit: every arithmetic opcode, destinations aliasing an operand, the FOLD
of base and extension values, the LDE loads at the current and the next row across the
wrap at M, blocks that are not whole vectors, and the edge values of the centred
extension-field product (0, 1, (p-1)/2, (p+1)/2, p-1).  tests/test_constraint_host.py
compares whole quotients and LogUp h columns with the numpy interpreter."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.air import field as AF
from steadfast.kernels import constraint_host as CH
from steadfast.kernels.constraint_lanes import LANES

P = AF.P
R = pow(2, 32, P)
RINV = pow(R, P - 2, P)
EDGES = np.array([0, 1, 2, (P - 1) // 2, (P + 1) // 2, P - 2, P - 1], np.uint32)
BLOCK = 8 * LANES

ARITH = ["ADD_BB", "ADD_EB", "ADD_EE", "SUB_BB", "SUB_EB", "SUB_BE", "SUB_EE", "MUL_BB",
         "MUL_EB", "MUL_EE", "NEG_B", "NEG_E"]


def dec(v):
    """Montgomery form -> value (uint64)."""
    return np.asarray(v, np.uint64) * np.uint64(RINV) % np.uint64(P)


def enc(v):
    return (np.asarray(v, np.uint64) * np.uint64(R) % np.uint64(P)).astype(np.uint32)


def reference(name, a, b):
    """The opcode on decoded operands: a, b uint64[4, w] (a base operand in row 0)."""
    a0, b0 = a[0], b[0]
    if name in ("ADD_BB", "SUB_BB", "MUL_BB", "NEG_B"):
        f = {"ADD_BB": AF.add, "SUB_BB": AF.sub, "MUL_BB": AF.mul}.get(name)
        return (AF.neg(a0) if name == "NEG_B" else f(a0, b0))[None]
    if name == "ADD_EB":
        return AF.ef_add_base(a, b0)
    if name == "SUB_EB":
        return AF.ef_add_base(a, AF.neg(b0))
    if name == "SUB_BE":
        return AF.ef_sub(AF.ef_from_base(a0), b)
    if name == "MUL_EB":
        return AF.ef_mul_base(a, b0)
    return {"ADD_EE": AF.ef_add, "SUB_EE": AF.ef_sub, "MUL_EE": AF.ef_mul,
            "NEG_E": lambda x, _: AF.ef_neg(x)}[name](a, b)


def _values(rng, shape, edge_share=0.5):
    v = rng.integers(0, P, shape, dtype=np.uint64).astype(np.uint32)
    mask = rng.random(shape) < edge_share
    v[mask] = rng.choice(EDGES, int(mask.sum()))
    return v


def _run(code, V, G, w, apow=None):
    dummy = np.zeros((1, 1), np.uint32)
    if apow is None:
        apow = np.zeros((max(1, len(code)), 4), np.uint32)
    out_ef = np.array([c[2] % 2 for c in code], np.int64)       # FOLD tests set these
    out_when = np.array([c[1] % 4 for c in code], np.int64)
    CH._run_block(np.asarray(code, np.int64), np.zeros(1, np.uint32), dummy, dummy, dummy,
                  np.zeros(1, np.uint32), np.zeros(8, np.uint32), apow, out_ef, out_when,
                  V, G, G[0], np.int64(0), np.int64(w), np.int64(V.shape[2]), np.int64(1),
                  np.int64(0), np.int64(0))


@pytest.mark.parametrize("name", ARITH)
@pytest.mark.parametrize("alias", ["none", "a", "b"])
@pytest.mark.parametrize("w", [1, LANES, 37, BLOCK])
def test_each_opcode_against_the_field(name, alias, w):
    op = getattr(CH, name)
    d = {"none": 2, "a": 0, "b": 1}[alias]
    rng = np.random.default_rng(op * 7 + d + w)
    V = _values(rng, (4, 4, BLOCK))
    want = enc(reference(name, dec(V[0, :, :w]), dec(V[1, :, :w])))
    _run([[op, 0, 1, d]], V, np.zeros((4, 4, BLOCK), np.uint32), w)
    assert np.array_equal(V[d, :want.shape[0], :w], want), name


def test_extension_product_at_the_centring_edges():
    """Every pair of edge values in every pair of coefficient positions (the centred
    products' bound is tightest at +-(p-1)/2), the other coefficients edges too."""
    e = len(EDGES)
    idx = np.indices((e, e)).reshape(2, -1)           # all pairs of edge values
    n = ((idx.shape[1] + LANES - 1) // LANES) * LANES
    for i in range(4):
        for j in range(4):
            rng = np.random.default_rng(4 * i + j)
            V = _values(rng, (3, 4, n), edge_share=1.0)
            V[0, i, :idx.shape[1]] = EDGES[idx[0]]
            V[1, j, :idx.shape[1]] = EDGES[idx[1]]
            want = enc(AF.ef_mul(dec(V[0]), dec(V[1])))
            _run([[CH.MUL_EE, 0, 1, 2]], V, np.zeros((4, 4, n), np.uint32), n)
            assert np.array_equal(V[2], want), (i, j)


@pytest.mark.parametrize("ext", [0, 1])
@pytest.mark.parametrize("w", [3, LANES + 3, BLOCK])
def test_fold_against_the_field(ext, w):
    """FOLD k adds alpha^(K-1-k) (apow row k) times constraint k's value into its row
    condition's sum; here 5 constraints over 4 conditions."""
    rng = np.random.default_rng(ext + w)
    # FOLD k: a = k (row condition k % 4, _run), b = its slot (out_ef from b's parity)
    code = [[CH.FOLD, k, 2 * s + ext, 0] for k, s in ((0, 0), (1, 1), (2, 0), (3, 1), (4, 0))]
    V = _values(rng, (4, 4, BLOCK))
    G = _values(rng, (4, 4, BLOCK))
    apow = _values(rng, (5, 4))
    want = dec(G[:, :, :w])
    for _, k, slot, _ in code:
        x = dec(V[slot, :, :w]) if ext else dec(V[slot, 0, :w])
        a = dec(apow[k]).reshape(4, 1)
        term = AF.ef_mul(np.broadcast_to(a, (4, w)), x) if ext else AF.ef_mul_base(a, x)
        want[k % 4] = AF.ef_add(want[k % 4], term)
    _run(code, V, G, w, apow)
    assert np.array_equal(G[:, :, :w], enc(want))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), log_m=st.integers(4, 9), nx=st.booleans(),
       w=st.integers(1, 3 * LANES + 5), lo_frac=st.floats(0, 1))
def test_loads_across_the_wrap(seed, log_m, nx, w, lo_frac):
    """LD_MAIN / LD_AUX at the current or the next row: whole vectors up to the wrap at M,
    scalar loads after it, into Montgomery form."""
    rng = np.random.default_rng(seed)
    M = 1 << log_m
    w = min(w, M)
    lo = int(lo_frac * (M - w))
    nxt = int(rng.integers(1, M))
    main = _values(rng, (3, M))
    aux = _values(rng, (8, M))
    code = [[CH.LD_MAIN, 2, int(nx), 0], [CH.LD_AUX, 1, int(nx), 1]]
    blk = ((w + LANES - 1) // LANES) * LANES
    V = np.zeros((2, 4, blk), np.uint32)
    G = np.zeros((4, 4, blk), np.uint32)
    dummy = np.zeros((1, 1), np.uint32)
    CH._run_block(np.asarray(code, np.int64), np.zeros(1, np.uint32), main, dummy, aux,
                  np.zeros(1, np.uint32), np.zeros(8, np.uint32), np.zeros((1, 4), np.uint32),
                  np.zeros(2, np.int64), np.zeros(2, np.int64), V, G, G[0], np.int64(lo),
                  np.int64(w), np.int64(M), np.int64(1), np.int64(nxt), np.int64(0))
    idx = (lo + np.arange(w) + (nxt if nx else 0)) % M
    assert np.array_equal(V[0, 0, :w], enc(main[2, idx]))
    assert np.array_equal(V[1, :, :w], enc(aux[4:8][:, idx]))


_CHILD = r"""
import hashlib, numpy as np
from steadfast.air import examples as ex
from steadfast.kernels import constraint_host as CH
from steadfast.kernels.constraint_lanes import LANES
from steadfast.verifier.proof_format import Params
from steadfast.verifier.protocol import SHIFT, table_shape
air = ex.pairs_air(4)
rng = np.random.default_rng(5)
r = lambda *s: rng.integers(0, CH.P, s, dtype=np.uint64).astype(np.uint32)
shape = table_shape(air, 4, Params(log_blowup=2, num_queries=2, pow_bits=0))
N = 1 << shape.log_lde
chal = {"logup_beta": r(4), "logup_gamma": r(4)}
pv = list(r(air.num_public))
q = CH.quotient_host(air, shape, r(air.main_width, N),
                     r(air.prep_width, N) if air.prep_width else None,
                     r(4 * air.aux_width, N), pv, chal, r(4), r(4), SHIFT, block=48)
h = CH.logup_h_host(air, r(16, air.main_width) % 16, pv, chal, block=24, stacked=True)
print(LANES, hashlib.sha256(q.tobytes() + np.asarray(h).tobytes()).hexdigest())
"""


def test_vector_widths_give_the_same_values():
    """512-bit (16 lanes) and 256-bit (8 lanes, the AVX2 build) code: one hash."""
    import os
    import subprocess
    import sys
    out = {}
    for extra in ({}, {"STEADFAST_VECTOR_WIDTH": "256"}):
        env = {k: v for k, v in os.environ.items()
               if k not in ("NUMBA_CPU_FEATURES", "STEADFAST_VECTOR_WIDTH")}
        env.update(extra)
        r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                           text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-2000:]
        lanes, digest = r.stdout.strip().splitlines()[-1].split()
        out[int(lanes)] = digest
    assert 8 in out and len(set(out.values())) == 1, out
