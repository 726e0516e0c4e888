"""Poseidon2, width 16, over BabyBear (SPEC §2): permutation, sponge and 2-to-1 compression.

Two implementations of the same permutation live here:

* ``build_permutation(jit, F)`` -- the permutation written once, state by state, in
  terms of the scalar field functions ``F`` of :func:`kernels.field.build`.  It keeps the
  state in Montgomery form (x·2^32 mod p) so that every product is one ``F.mont_mul``;
  adds are canonical.  The device kernels compile it with ``cuda.jit(device=True)``
  (kernels/poseidon2_device.py); the tests also run it as plain Python.  It is not
  compiled for the host: a scalar host kernel would cost seconds of cold compile and the
  batched path below is just as fast on a single state once the call overhead counts.

* the batched host path -- the hot loop of Merkle commitments.  States are processed in
  chunks of ``BLOCK`` held "structure of arrays" (lane-major ``[16, BLOCK]``), so every
  inner loop runs over the batch and LLVM vectorises it across states (8 per ``zmm``
  with AVX-512, 4 per ``ymm`` with AVX2).  Each round is one pass over the chunk whose
  loop body reads a column's 16 lanes, applies the S-boxes and the linear layer in
  registers and writes them back (one load and one store per lane and round; the
  earlier form made three passes, 1.7x slower per core).  It uses two
  Montgomery flavours, each where it is cheapest (see the comments at ``_smm`` and
  ``_umm``), and tracks a per-round *scale*: a lane holds ``v·c mod p`` for the true
  value ``v`` and a known constant ``c``; round constants are pre-multiplied by the scale
  of their round, so no instruction is spent converting in or out of Montgomery form.

Public functions take and return canonical uint32 arrays (values in [0, p)).
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from numba import njit

from .field import MONT_R2, P
from .poseidon2_constants import (DIGEST, RATE, RC_FULL, RC_PARTIAL_M, ROUNDS_F_HALF, ROUNDS_P,
                                  V16_M, WIDTH)

# ----------------------------------------------------------------------------------------
# The permutation written once (canonical in/out, Montgomery inside)
# ----------------------------------------------------------------------------------------

_R2_32 = np.uint32(MONT_R2)
_ONE32 = np.uint32(1)


def build_permutation(jit, F):
    """Compile the scalar permutation with decorator ``jit`` over field functions ``F``.

    Returns a namespace with ``permute(s, rcf_m, rcp_m, v_m)``: ``s`` is a writable
    length-16 uint32 array (canonical in, canonical out), the constants are the Montgomery
    tables ``RC_FULL_M``, ``RC_PARTIAL_M``, ``V16_M`` of :mod:`kernels.poseidon2_constants`.
    """
    # numba resolves closure variables that are compiled functions, not attributes
    mont_mul = F.mont_mul
    add = F.add

    @jit
    def sbox(x):
        # x^7 in Montgomery form: x^2, x^3, x^6, x^7 (4 products)
        x2 = mont_mul(x, x)
        x3 = mont_mul(x2, x)
        x6 = mont_mul(x3, x3)
        return mont_mul(x6, x)

    @jit
    def m4(s, o):
        # circ(2,3,1,1) on lanes o..o+3, Plonky3's addition chain (8 additions)
        x0 = s[o]
        x1 = s[o + 1]
        x2 = s[o + 2]
        x3 = s[o + 3]
        t01 = add(x0, x1)
        t23 = add(x2, x3)
        t0123 = add(t01, t23)
        t01123 = add(t0123, x1)
        t01233 = add(t0123, x3)
        s[o + 3] = add(t01233, add(x0, x0))    # 3x0 + x1 + x2 + 2x3
        s[o + 1] = add(t01123, add(x2, x2))    # x0 + 2x1 + 3x2 + x3
        s[o] = add(t01123, t01)                # 2x0 + 3x1 + x2 + x3
        s[o + 2] = add(t01233, t23)            # x0 + x1 + 2x2 + 3x3

    @jit
    def external(s):
        # M_E: M4 on each block of 4, then lane i += sum over blocks of lane (i mod 4)
        for o in range(0, 16, 4):
            m4(s, o)
        for k in range(4):
            t = add(add(s[k], s[k + 4]), add(s[k + 8], s[k + 12]))
            for o in range(0, 16, 4):
                s[o + k] = add(s[o + k], t)

    @jit
    def internal(s, v_m):
        # M_I = J + diag(V16): y_i = sum_j s_j + V16_i * s_i
        t = s[0]
        for i in range(1, 16):
            t = add(t, s[i])
        for i in range(16):
            s[i] = add(t, mont_mul(s[i], v_m[i]))

    @jit
    def permute(s, rcf_m, rcp_m, v_m):
        for i in range(16):
            s[i] = mont_mul(s[i], _R2_32)              # to Montgomery form
        external(s)
        for r in range(ROUNDS_F_HALF):                 # initial full rounds
            for i in range(16):
                s[i] = sbox(add(s[i], rcf_m[r, i]))
            external(s)
        for r in range(ROUNDS_P):                      # partial rounds: S-box on lane 0
            s[0] = sbox(add(s[0], rcp_m[r]))
            internal(s, v_m)
        for r in range(ROUNDS_F_HALF, 2 * ROUNDS_F_HALF):   # final full rounds
            for i in range(16):
                s[i] = sbox(add(s[i], rcf_m[r, i]))
            external(s)
        for i in range(16):
            s[i] = mont_mul(s[i], _ONE32)              # back to canonical

    class Poseidon2Scalar:
        pass

    ns = Poseidon2Scalar()
    ns.sbox, ns.m4, ns.external, ns.internal, ns.permute = sbox, m4, external, internal, permute
    return ns


# ----------------------------------------------------------------------------------------
# The batched host path
# ----------------------------------------------------------------------------------------
#
# Two Montgomery multiplications, both computing a*b*2^-32 mod p:
#
# * signed (_smm): operands are int32 values in [-2^31, 2^31).  t = a*b is a signed
#   64-bit product, q = t*p^-1 mod 2^32 taken as a signed int32, and (t - q*p) is an exact
#   multiple of 2^32, so r = (t - q*p) >> 32 with |r| < |t|/2^32 + p/2.  For |a|,|b| < 2^31
#   that is < 2^30 + p/2 < 0.97*2^31: the result is again a valid operand, so S-box chains
#   need no correction step at all (AVX2: pmuldq, pmuludq, pmuldq, sub, shift).  With one
#   operand a constant centred in (-p/2, p/2), |r| < p/4 + p/2 = 0.75p.
#   _sred(s) = s*2^-32 mod p for any |s| < 2^62 (the same without the product); it is
#   how unreduced linear-layer sums are brought back to int32 range: |r| < |s|/2^32 + p/2.
#
# * unsigned (_umm): operands in [0, 2^32); r = t_hi - (q*p)_hi + (p if negative), so
#   r < 2^32 always and r < p when a*b < p*2^32.  Used in the partial rounds, where the
#   internal layer multiplies 16 lanes by constants and reduces the lane sum only once.
#
# Scale bookkeeping.  A lane holds v*c mod p for a per-round scale c (the same on all lanes
# so that the linear layers, which are sums, stay correct).  _sred divides the scale by R
# (R = 2^32 mod p), _smm/_umm multiply the scales of their operands and divide by R.  The
# full rounds run signed: (input scale c) -> _sred -> c/R; add the round constant
# premultiplied by c/R; x^7 by 4 products -> (c/R)^7 / R^6.  The partial rounds run
# unsigned in plain Montgomery form (scale R, which x^7 by 4 products preserves), so the
# standard Montgomery constants work there.  Entering them we multiply by K_IN, leaving
# them the next _sred lands on scale 1; at the end one product by K_OUT restores scale 1.
# All scale constants are computed below in Python and stored centred in (-p/2, p/2).

BLOCK = 64                      # states per chunk (lane-major [16, BLOCK] working set)

_R = (1 << 32) % P
_RINV = pow(_R, -1, P)


def _centred(k: int) -> int:
    k %= P
    return k if k <= P // 2 else k - P


def _scaled_constants():
    rcf = np.zeros((2 * ROUNDS_F_HALF, WIDTH), dtype=np.int64)
    c = 1                                            # input is canonical: scale 1
    for r in range(2 * ROUNDS_F_HALF):
        if r == ROUNDS_F_HALF:
            k_in = _centred(_R ** 3 * pow(c, -1, P))  # (c/R)*K_IN/R = R: Montgomery form
            c = _R                                   # scale after the partial rounds
        d = c * _RINV % P                            # after _sred
        rcf[r] = [_centred(int(x) * d) for x in RC_FULL[r]]
        c = pow(d, 7, P) * pow(_RINV, 6, P) % P       # after the 4-product S-box
    k_out = _centred(_R * _R * pow(c, -1, P))        # (c/R)*K_OUT/R = 1
    return rcf, k_in, k_out


_RCF_S, _K_IN, _K_OUT = _scaled_constants()
_RCP_U = RC_PARTIAL_M.astype(np.uint64)
_V_U = V16_M.astype(np.uint64)
_K_IN64 = np.int64(_K_IN)
_K_OUT64 = np.int64(_K_OUT)

_P_S = np.int64(P)
_P_U = np.uint64(P)
_PINV = np.uint64(pow(P, -1, 1 << 32))          # p^-1 mod 2^32
_S32 = np.int64(32)
_U32 = np.uint64(32)
_M32 = np.uint64(0xFFFFFFFF)
_M31 = np.uint64((1 << 31) - 1)
_U31 = np.uint64(31)
_U27 = np.uint64(27)


@njit
def _smm(a, b):
    t = np.int64(np.int32(a)) * np.int64(np.int32(b))
    q = np.int64(np.int32(np.uint64(t) * _PINV))
    return (t - q * _P_S) >> _S32


@njit
def _sred(s):
    q = np.int64(np.int32(np.uint64(s) * _PINV))
    return (s - q * _P_S) >> _S32


@njit
def _ssbox(x):
    x2 = _smm(x, x)
    x3 = _smm(x2, x)
    x6 = _smm(x3, x3)
    return _smm(x6, x)


@njit
def _umm(a, b):
    t = (a & _M32) * (b & _M32)
    q = (t * _PINV) & _M32
    th = t >> _U32
    qh = (q * _P_U) >> _U32
    return th + _P_U - qh if th < qh else th - qh


@njit
def _fold(s):
    # s < 2^37 -> s' < 2^31 + 2^29 (< 2^32), s' = s mod p, using 2^31 = 2^27 - 1 (mod p)
    h = s >> _U31
    s = (s & _M31) + (h << _U27) - h
    h = s >> _U31
    return (s & _M31) + (h << _U27) - h


@njit
def _usbox(x):
    x2 = _umm(x, x)
    x3 = _umm(x2, x)
    x6 = _umm(x3, x3)
    return _umm(x6, x)


@njit
def _external_block(st):
    # M_E on every column of st (int64, lazily: inputs |x| < 2^31 give |y| < 35*2^31)
    for j in range(BLOCK):
        x0 = st[0, j]; x1 = st[1, j]; x2 = st[2, j]; x3 = st[3, j]
        x4 = st[4, j]; x5 = st[5, j]; x6 = st[6, j]; x7 = st[7, j]
        x8 = st[8, j]; x9 = st[9, j]; x10 = st[10, j]; x11 = st[11, j]
        x12 = st[12, j]; x13 = st[13, j]; x14 = st[14, j]; x15 = st[15, j]
        a = x0 + x1; b = x2 + x3; c = a + b; d = c + x1; e = c + x3
        y0 = d + a; y1 = d + x2 + x2; y2 = e + b; y3 = e + x0 + x0
        a = x4 + x5; b = x6 + x7; c = a + b; d = c + x5; e = c + x7
        y4 = d + a; y5 = d + x6 + x6; y6 = e + b; y7 = e + x4 + x4
        a = x8 + x9; b = x10 + x11; c = a + b; d = c + x9; e = c + x11
        y8 = d + a; y9 = d + x10 + x10; y10 = e + b; y11 = e + x8 + x8
        a = x12 + x13; b = x14 + x15; c = a + b; d = c + x13; e = c + x15
        y12 = d + a; y13 = d + x14 + x14; y14 = e + b; y15 = e + x12 + x12
        s0 = y0 + y4 + y8 + y12; s1 = y1 + y5 + y9 + y13
        s2 = y2 + y6 + y10 + y14; s3 = y3 + y7 + y11 + y15
        st[0, j] = y0 + s0; st[1, j] = y1 + s1; st[2, j] = y2 + s2; st[3, j] = y3 + s3
        st[4, j] = y4 + s0; st[5, j] = y5 + s1; st[6, j] = y6 + s2; st[7, j] = y7 + s3
        st[8, j] = y8 + s0; st[9, j] = y9 + s1; st[10, j] = y10 + s2; st[11, j] = y11 + s3
        st[12, j] = y12 + s0; st[13, j] = y13 + s1; st[14, j] = y14 + s2; st[15, j] = y15 + s3


@njit
def _full_rounds(st, rcf, r0, r1):
    # rounds r0..r1-1; input |x| < 2^37 (scale c), output |x| < 35*2^31 (next scale).
    # One pass per round: the loop body takes one state (column j) through the S-boxes
    # (|sred + k| < p + 32) and M_E with its 16 lanes in registers; LLVM vectorises the
    # j loop across states.
    for r in range(r0, r1):
        k0 = rcf[r, 0]
        k1 = rcf[r, 1]
        k2 = rcf[r, 2]
        k3 = rcf[r, 3]
        k4 = rcf[r, 4]
        k5 = rcf[r, 5]
        k6 = rcf[r, 6]
        k7 = rcf[r, 7]
        k8 = rcf[r, 8]
        k9 = rcf[r, 9]
        k10 = rcf[r, 10]
        k11 = rcf[r, 11]
        k12 = rcf[r, 12]
        k13 = rcf[r, 13]
        k14 = rcf[r, 14]
        k15 = rcf[r, 15]
        for j in range(BLOCK):
            x0 = _ssbox(_sred(st[0, j]) + k0)
            x1 = _ssbox(_sred(st[1, j]) + k1)
            x2 = _ssbox(_sred(st[2, j]) + k2)
            x3 = _ssbox(_sred(st[3, j]) + k3)
            x4 = _ssbox(_sred(st[4, j]) + k4)
            x5 = _ssbox(_sred(st[5, j]) + k5)
            x6 = _ssbox(_sred(st[6, j]) + k6)
            x7 = _ssbox(_sred(st[7, j]) + k7)
            x8 = _ssbox(_sred(st[8, j]) + k8)
            x9 = _ssbox(_sred(st[9, j]) + k9)
            x10 = _ssbox(_sred(st[10, j]) + k10)
            x11 = _ssbox(_sred(st[11, j]) + k11)
            x12 = _ssbox(_sred(st[12, j]) + k12)
            x13 = _ssbox(_sred(st[13, j]) + k13)
            x14 = _ssbox(_sred(st[14, j]) + k14)
            x15 = _ssbox(_sred(st[15, j]) + k15)
            a = x0 + x1; b = x2 + x3; c = a + b; d = c + x1; e = c + x3
            y0 = d + a; y1 = d + x2 + x2; y2 = e + b; y3 = e + x0 + x0
            a = x4 + x5; b = x6 + x7; c = a + b; d = c + x5; e = c + x7
            y4 = d + a; y5 = d + x6 + x6; y6 = e + b; y7 = e + x4 + x4
            a = x8 + x9; b = x10 + x11; c = a + b; d = c + x9; e = c + x11
            y8 = d + a; y9 = d + x10 + x10; y10 = e + b; y11 = e + x8 + x8
            a = x12 + x13; b = x14 + x15; c = a + b; d = c + x13; e = c + x15
            y12 = d + a; y13 = d + x14 + x14; y14 = e + b; y15 = e + x12 + x12
            s0 = y0 + y4 + y8 + y12; s1 = y1 + y5 + y9 + y13
            s2 = y2 + y6 + y10 + y14; s3 = y3 + y7 + y11 + y15
            st[0, j] = y0 + s0; st[1, j] = y1 + s1; st[2, j] = y2 + s2; st[3, j] = y3 + s3
            st[4, j] = y4 + s0; st[5, j] = y5 + s1; st[6, j] = y6 + s2; st[7, j] = y7 + s3
            st[8, j] = y8 + s0; st[9, j] = y9 + s1; st[10, j] = y10 + s2; st[11, j] = y11 + s3
            st[12, j] = y12 + s0; st[13, j] = y13 + s1; st[14, j] = y14 + s2; st[15, j] = y15 + s3


@njit
def _partial_rounds(us, rcp, v_m):
    # Montgomery form; invariant: every lane < 2p at the start of a round.  One pass per
    # round, the 16 lanes of a column in registers (vectorised across states, as above):
    # lane 0's S-box, the canonical lane sum, then lane i = sum + V16_i * lane i (< 2p).
    v0 = v_m[0]
    v1 = v_m[1]
    v2 = v_m[2]
    v3 = v_m[3]
    v4 = v_m[4]
    v5 = v_m[5]
    v6 = v_m[6]
    v7 = v_m[7]
    v8 = v_m[8]
    v9 = v_m[9]
    v10 = v_m[10]
    v11 = v_m[11]
    v12 = v_m[12]
    v13 = v_m[13]
    v14 = v_m[14]
    v15 = v_m[15]
    for r in range(rcp.shape[0]):
        rc = rcp[r]
        for j in range(BLOCK):
            u0 = _usbox(_fold(us[0, j] + rc))               # fold: < 2^31.3, S-box safe
            u1 = us[1, j]
            u2 = us[2, j]
            u3 = us[3, j]
            u4 = us[4, j]
            u5 = us[5, j]
            u6 = us[6, j]
            u7 = us[7, j]
            u8 = us[8, j]
            u9 = us[9, j]
            u10 = us[10, j]
            u11 = us[11, j]
            u12 = us[12, j]
            u13 = us[13, j]
            u14 = us[14, j]
            u15 = us[15, j]
            s = _fold(u0 + u1 + u2 + u3 + u4 + u5 + u6 + u7 + u8 + u9 + u10 + u11 + u12
                      + u13 + u14 + u15)                   # < 31p < 2^36
            s = s - _P_U if s >= _P_U else s                # canonical lane sum
            us[0, j] = s + _umm(u0, v0)
            us[1, j] = s + _umm(u1, v1)
            us[2, j] = s + _umm(u2, v2)
            us[3, j] = s + _umm(u3, v3)
            us[4, j] = s + _umm(u4, v4)
            us[5, j] = s + _umm(u5, v5)
            us[6, j] = s + _umm(u6, v6)
            us[7, j] = s + _umm(u7, v7)
            us[8, j] = s + _umm(u8, v8)
            us[9, j] = s + _umm(u9, v9)
            us[10, j] = s + _umm(u10, v10)
            us[11, j] = s + _umm(u11, v11)
            us[12, j] = s + _umm(u12, v12)
            us[13, j] = s + _umm(u13, v13)
            us[14, j] = s + _umm(u14, v14)
            us[15, j] = s + _umm(u15, v15)


@njit
def _permute_block(st, us, rcf, rcp, v_m, k_in, k_out):
    """Permute the BLOCK states held in st (int64 [16, BLOCK], canonical in and out)."""
    half = rcf.shape[0] // 2
    _external_block(st)
    _full_rounds(st, rcf, 0, half)
    for i in range(16):
        for j in range(BLOCK):
            us[i, j] = np.uint64(_smm(_sred(st[i, j]), k_in) + _P_S)   # (0, 2p)
    _partial_rounds(us, rcp, v_m)
    for i in range(16):
        for j in range(BLOCK):
            st[i, j] = np.int64(us[i, j])
    _full_rounds(st, rcf, half, 2 * half)
    for i in range(16):
        for j in range(BLOCK):
            x = _smm(_sred(st[i, j]), k_out)                 # |x| < 0.75p, scale 1
            st[i, j] = x + _P_S if x < 0 else x


@njit(cache=True, nogil=True)
def _sponge_kernel(m, out, rate, c0, c1, rcf, rcp, v_m, k_in, k_out):
    """Chunks c0..c1-1 (BLOCK rows each) of an overwrite-mode sponge over the rows of m.

    m uint32[n, w] -> out uint32[n, k]: state 16 zeros; each block of ``rate`` inputs
    overwrites lanes 0..rate-1 (a short last block only its own lanes), then permute;
    output lanes 0..k-1.  rate = 8 is the SPEC §3 leaf hash; rate = 16 with w = 16 is a
    single permutation of each row (and k = 8 the 2-to-1 compression).
    """
    n, w = m.shape
    k = out.shape[1]
    st = np.empty((16, BLOCK), np.int64)
    us = np.empty((16, BLOCK), np.uint64)
    for c in range(c0, c1):
        lo = c * BLOCK
        nb = min(BLOCK, n - lo)
        st[:, :] = 0
        for b0 in range(0, w, rate):
            for i in range(min(rate, w - b0)):
                for j in range(nb):
                    st[i, j] = np.int64(m[lo + j, b0 + i])
            _permute_block(st, us, rcf, rcp, v_m, k_in, k_out)
        for i in range(k):
            for j in range(nb):
                out[lo + j, i] = np.uint32(st[i, j])


_POOL: ThreadPoolExecutor | None = None
_POOL_SIZE = 0
_POOL_LOCK = threading.Lock()


def _fast_args():
    return (_RCF_S, _RCP_U, _V_U, _K_IN64, _K_OUT64)


def _sponge(m: np.ndarray, out: np.ndarray, rate: int) -> None:
    """Overwrite-mode sponge of every row of m (uint32[n, w], canonical, C-contiguous) into
    out (uint32[n, k], k <= 16, C-contiguous); see _sponge_kernel."""
    global _POOL, _POOL_SIZE
    if m.shape[0] == 0:
        return
    ro = m.view()
    ro.setflags(write=False)        # one compiled signature whatever the caller's flags
    nchunks = (m.shape[0] + BLOCK - 1) // BLOCK
    workers = min(numba.get_num_threads(), max(1, nchunks // 4))
    if workers <= 1:
        _sponge_kernel(ro, out, rate, 0, nchunks, *_fast_args())
        return
    with _POOL_LOCK:
        if _POOL is None or _POOL_SIZE < workers:
            _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="poseidon2")
            _POOL_SIZE = workers
        pool = _POOL
    # contiguous chunk ranges, one per worker; the kernel releases the GIL
    bounds = [nchunks * t // workers for t in range(workers + 1)]
    futs = [pool.submit(_sponge_kernel, ro, out, rate, bounds[t], bounds[t + 1], *_fast_args())
            for t in range(workers)]
    for f in futs:
        f.result()


# ----------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------

def _check_u32(a, name: str) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a numpy uint32 array, got {type(a).__name__}")
    if a.dtype != np.uint32:
        raise TypeError(f"{name}: expected dtype uint32, got {a.dtype}")
    return np.ascontiguousarray(a)


def _check_canonical(a: np.ndarray, name: str) -> None:
    if a.size and int(a.max()) >= P:
        raise ValueError(f"{name}: values must be canonical field elements < p = {P}")


def poseidon2_permute(states: np.ndarray) -> np.ndarray:
    """Poseidon2-16 permutation of every state: uint32[..., 16] -> uint32[..., 16]."""
    states = _check_u32(states, "states")
    if states.ndim == 0 or states.shape[-1] != WIDTH:
        raise ValueError(f"states: last axis must have {WIDTH} lanes, got shape {states.shape}")
    _check_canonical(states, "states")
    flat = states.reshape(-1, WIDTH)
    out = np.empty_like(flat)
    _sponge(flat, out, WIDTH)
    return out.reshape(states.shape)


def hash_rows(m: np.ndarray) -> np.ndarray:
    """Merkle leaf hash of every row (SPEC §3 sponge): uint32[n, w] -> uint32[n, 8], w >= 1."""
    m = _check_u32(m, "m")
    if m.ndim != 2:
        raise ValueError(f"m: expected a 2-d matrix uint32[n, w], got shape {m.shape}")
    if m.shape[1] == 0:
        raise ValueError("m: rows must have at least one element (w >= 1)")
    _check_canonical(m, "m")
    out = np.empty((m.shape[0], DIGEST), np.uint32)
    _sponge(m, out, RATE)
    return out


def sponge_hash(elems: np.ndarray) -> np.ndarray:
    """Sponge hash of vectors along the last axis: uint32[..., w] -> uint32[..., 8], w >= 1.

    ``sponge_hash(v)`` for one vector v (uint32[w]) returns its digest uint32[8].
    """
    elems = _check_u32(elems, "elems")
    if elems.ndim == 0:
        raise ValueError("elems: expected at least one axis uint32[..., w]")
    lead = elems.shape[:-1]
    return hash_rows(elems.reshape(-1, elems.shape[-1])).reshape(*lead, DIGEST)


def compress(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """2-to-1 compression: first 8 lanes of permute(left || right); uint32[n, 8] x2 -> [n, 8]."""
    left = _check_u32(left, "left")
    right = _check_u32(right, "right")
    if left.ndim != 2 or left.shape[1] != DIGEST or left.shape != right.shape:
        raise ValueError(f"left/right: expected two uint32[n, {DIGEST}] arrays, got "
                         f"{left.shape} and {right.shape}")
    return compress_pairs(np.concatenate([left, right], axis=1))


def compress_pairs(pairs: np.ndarray) -> np.ndarray:
    """compress on concatenated pairs: uint32[n, 16] (left || right) -> uint32[n, 8].

    A Merkle level of 2m digests, viewed as uint32[m, 16], is exactly such an array.
    """
    pairs = _check_u32(pairs, "pairs")
    if pairs.ndim != 2 or pairs.shape[1] != WIDTH:
        raise ValueError(f"pairs: expected uint32[n, {WIDTH}], got shape {pairs.shape}")
    _check_canonical(pairs, "pairs")
    out = np.empty((pairs.shape[0], DIGEST), np.uint32)
    _sponge(pairs, out, WIDTH)
    return out


__all__ = ["poseidon2_permute", "hash_rows", "sponge_hash", "compress", "compress_pairs",
           "build_permutation", "BLOCK"]
