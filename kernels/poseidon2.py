"""Poseidon2, width 16, over BabyBear (SPEC §2): permutation, sponge and 2-to-1 compression.

Two implementations of the same permutation live here:

* ``build_permutation(jit, F)`` -- the permutation written once, state by state, in
  terms of the scalar field functions ``F`` of :func:`kernels.field.build`.  It keeps the
  state in Montgomery form (x·2^32 mod p) so that every product is one ``F.mont_mul``;
  adds are canonical.  The device kernels compile it with ``cuda.jit(device=True)``
  (kernels/poseidon2_device.py); the tests also run it as plain Python.  It is not
  compiled for the host: a scalar host kernel would cost seconds of cold compile and the
  batched path below is just as fast on a single state once the call overhead counts.

* the batched host path -- the hot loop of Merkle commitments.  By default it runs
  kernels/poseidon2_lanes.py (32-bit lanes, 16 states a ``zmm``, the permutation as
  explicit LLVM IR; ``KERNEL``); the int64 kernel below stays selectable with
  ``STEADFAST_POSEIDON2_KERNEL=int64`` (same outputs).  In the int64 kernel states are
  processed in chunks of ``BLOCK`` held "structure of arrays" (lane-major, a flat int64
  ``[16 * BLOCK]`` so that every row offset is a compile-time constant and LLVM needs no
  run-time aliasing checks), so every inner loop runs over the batch and LLVM vectorises
  it across states (8 per ``zmm`` with AVX-512, 4 per ``ymm`` with AVX2).  Each round is
  one pass over the chunk whose loop body reads a column's 16 lanes, applies the S-boxes
  and the linear layer in registers and writes them back.  All arithmetic is signed
  Montgomery (``_smm``/``_sred``) with lazy bounds; the partial rounds' diagonal is adds,
  shifts and the 2^-k split (no product per lane).  A per-round *scale* is tracked: a
  lane holds ``v·c mod p`` for the true value ``v`` and a known constant ``c``; round
  constants are pre-multiplied by the scale of their round, so no instruction is spent
  converting in or out of Montgomery form.

Public functions take and return canonical uint32 arrays (values in [0, p)).
"""
from __future__ import annotations

import os

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from .field import MONT_R2, P
from .host_pool import run_ranges
from .poseidon2_constants import (DIGEST, RATE, RC_FULL, RC_PARTIAL_M, ROUNDS_F_HALF, ROUNDS_P,
                                  V16_RATIONAL, WIDTH)

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
# Signed Montgomery multiplication (_smm), a*b*2^-32 mod p: operands are int32 values in
# [-2^31, 2^31).  t = a*b is a signed 64-bit product, q = t*p^-1 mod 2^32 taken as a
# signed int32, and (t - q*p) is an exact multiple of 2^32, so r = (t - q*p) >> 32 with
# |r| < |t|/2^32 + p/2.  For |a|,|b| < 2^31 that is < 2^30 + p/2 < 0.97*2^31: the result is
# again a valid operand, so S-box chains need no correction step at all (pmuldq, pmuludq,
# pmuldq, sub, shift).  With one operand a constant centred in (-p/2, p/2), |r| < 0.75p.
# _sred(s) = s*2^-32 mod p for any |s| < 2^62 (the same without the product); it is how
# unreduced linear-layer sums are brought back to int32 range: |r| < |s|/2^32 + p/2.
#
# Scale bookkeeping.  A lane holds v*c mod p for a per-round scale c (the same on all lanes
# so that the linear layers, which are sums, stay correct).  _sred divides the scale by R
# (R = 2^32 mod p), _smm multiplies the scales of its operands and divides by R.  Full
# rounds: (input scale c) -> _sred -> c/R; add the round constant premultiplied by c/R;
# x^7 by 4 products -> (c/R)^7 / R^6.  The partial rounds run in plain Montgomery form
# (scale R, which x^7 by 4 products preserves; _smm(_sred(x), R^2) keeps it while
# reducing), so the standard Montgomery constants work there.  Entering them we multiply
# by K_IN, leaving them the next _sred lands on scale 1; at the end one product by K_OUT
# restores scale 1.  All scale constants are computed below in Python and stored centred
# in (-p/2, p/2).

BLOCK = 64                      # states per chunk (lane-major [16 * BLOCK] working set)

#: the batched host kernel: "lanes" (kernels/poseidon2_lanes.py, 32-bit lanes, the
#: default) or "int64" (the lane-major int64 kernel below); STEADFAST_POSEIDON2_KERNEL
#: picks one per process (same outputs, bit for bit; "int64" is the before of an A/B).
KERNEL = os.environ.get("STEADFAST_POSEIDON2_KERNEL", "lanes").strip().lower()
if KERNEL not in ("lanes", "int64"):
    raise ValueError(f"STEADFAST_POSEIDON2_KERNEL must be 'lanes' or 'int64', got {KERNEL!r}")
_LANES = KERNEL == "lanes"
if _LANES:
    from .poseidon2_lanes import permute_block_i64 as _lanes_block
else:
    @njit
    def _lanes_block(st, block):      # never called: _permute_block's branch is constant
        pass

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
# partial rounds, scale R: lane 0's round constants in Montgomery form, centred
_RCP_S = np.array([_centred(int(x)) for x in RC_PARTIAL_M], dtype=np.int64)
_K_IN64 = np.int64(_K_IN)
_K_OUT64 = np.int64(_K_OUT)
_K_R2 = np.int64(_centred(_R * _R))             # _smm(_sred(x), R^2) = x (mod p), scale kept

_P_S = np.int64(P)
_PINV = np.uint64(pow(P, -1, 1 << 32))          # p^-1 mod 2^32
_S32 = np.int64(32)

# The internal diagonal as the kernel applies it, lane by lane (_partial_rounds): small
# integers by adds and shifts, -/+ 2^-k by the split below.  Checked against SPEC §2's
# table here, so a change there cannot silently desynchronise the kernel.
_DIAG_KERNEL = ((-2, 1), (1, 1), (2, 1), (1, 2), (3, 1), (4, 1), (-1, 2), (-3, 1), (-4, 1),
                (1, 1 << 8), (1, 4), (1, 8), (1, 1 << 27), (-1, 1 << 8), (-1, 16),
                (-1, 1 << 27))
if tuple(V16_RATIONAL) != _DIAG_KERNEL:        # pragma: no cover - constants are fixed
    raise RuntimeError("kernels/poseidon2.py: the partial-round diagonal is hard-coded for "
                       "V16 = " + repr(_DIAG_KERNEL))
# x * 2^-k (mod p) for p = 15*2^27 + 1: x = hi*2^k + lo, 2^-k = -(p-1)/2^k (mod p), so
# x*2^-k = hi - lo*M_k with M_k = (p-1)/2^k = 15*2^(27-k); |hi - lo*M_k| <= |x|/2^k + p.
_M1 = np.int64((P - 1) >> 1)
_M2 = np.int64((P - 1) >> 2)
_M3 = np.int64((P - 1) >> 3)
_M4 = np.int64((P - 1) >> 4)
_M8 = np.int64((P - 1) >> 8)
_M27 = np.int64((P - 1) >> 27)
_L1 = np.int64(1)
_L2 = np.int64(3)
_L3 = np.int64(7)
_L4 = np.int64(15)
_L8 = np.int64(255)
_L27 = np.int64((1 << 27) - 1)
_S1 = np.int64(1)
_S2 = np.int64(2)
_S3 = np.int64(3)
_S4 = np.int64(4)
_S8 = np.int64(8)
_S27 = np.int64(27)


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
def _external_block(st):
    # M_E on every column of st (int64, lazily: inputs |x| < 2^31 give |y| < 35*2^31)
    for j in range(BLOCK):
        x0 = st[0 * BLOCK + j]; x1 = st[1 * BLOCK + j]
        x2 = st[2 * BLOCK + j]; x3 = st[3 * BLOCK + j]
        x4 = st[4 * BLOCK + j]; x5 = st[5 * BLOCK + j]
        x6 = st[6 * BLOCK + j]; x7 = st[7 * BLOCK + j]
        x8 = st[8 * BLOCK + j]; x9 = st[9 * BLOCK + j]
        x10 = st[10 * BLOCK + j]; x11 = st[11 * BLOCK + j]
        x12 = st[12 * BLOCK + j]; x13 = st[13 * BLOCK + j]
        x14 = st[14 * BLOCK + j]; x15 = st[15 * BLOCK + j]
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
        st[0 * BLOCK + j] = y0 + s0; st[1 * BLOCK + j] = y1 + s1
        st[2 * BLOCK + j] = y2 + s2; st[3 * BLOCK + j] = y3 + s3
        st[4 * BLOCK + j] = y4 + s0; st[5 * BLOCK + j] = y5 + s1
        st[6 * BLOCK + j] = y6 + s2; st[7 * BLOCK + j] = y7 + s3
        st[8 * BLOCK + j] = y8 + s0; st[9 * BLOCK + j] = y9 + s1
        st[10 * BLOCK + j] = y10 + s2; st[11 * BLOCK + j] = y11 + s3
        st[12 * BLOCK + j] = y12 + s0; st[13 * BLOCK + j] = y13 + s1
        st[14 * BLOCK + j] = y14 + s2; st[15 * BLOCK + j] = y15 + s3


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
            x0 = _ssbox(_sred(st[0 * BLOCK + j]) + k0)
            x1 = _ssbox(_sred(st[1 * BLOCK + j]) + k1)
            x2 = _ssbox(_sred(st[2 * BLOCK + j]) + k2)
            x3 = _ssbox(_sred(st[3 * BLOCK + j]) + k3)
            x4 = _ssbox(_sred(st[4 * BLOCK + j]) + k4)
            x5 = _ssbox(_sred(st[5 * BLOCK + j]) + k5)
            x6 = _ssbox(_sred(st[6 * BLOCK + j]) + k6)
            x7 = _ssbox(_sred(st[7 * BLOCK + j]) + k7)
            x8 = _ssbox(_sred(st[8 * BLOCK + j]) + k8)
            x9 = _ssbox(_sred(st[9 * BLOCK + j]) + k9)
            x10 = _ssbox(_sred(st[10 * BLOCK + j]) + k10)
            x11 = _ssbox(_sred(st[11 * BLOCK + j]) + k11)
            x12 = _ssbox(_sred(st[12 * BLOCK + j]) + k12)
            x13 = _ssbox(_sred(st[13 * BLOCK + j]) + k13)
            x14 = _ssbox(_sred(st[14 * BLOCK + j]) + k14)
            x15 = _ssbox(_sred(st[15 * BLOCK + j]) + k15)
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
            st[0 * BLOCK + j] = y0 + s0; st[1 * BLOCK + j] = y1 + s1
            st[2 * BLOCK + j] = y2 + s2; st[3 * BLOCK + j] = y3 + s3
            st[4 * BLOCK + j] = y4 + s0; st[5 * BLOCK + j] = y5 + s1
            st[6 * BLOCK + j] = y6 + s2; st[7 * BLOCK + j] = y7 + s3
            st[8 * BLOCK + j] = y8 + s0; st[9 * BLOCK + j] = y9 + s1
            st[10 * BLOCK + j] = y10 + s2; st[11 * BLOCK + j] = y11 + s3
            st[12 * BLOCK + j] = y12 + s0; st[13 * BLOCK + j] = y13 + s1
            st[14 * BLOCK + j] = y14 + s2; st[15 * BLOCK + j] = y15 + s3


@njit
def _partial_rounds(st, rcp, k_r2):
    # Scale R (Montgomery form), signed int64 lanes, reduced lazily.  One pass per round,
    # the 16 lanes of a column in registers (vectorised across states, as above):
    #   lane 0: x0 = S-box(R^2-corrected _sred(y0 + rc))   (|x0| < 2^31, scale R kept)
    #   s = sum of the 16 lanes, brought back by _smm(_sred(s), R^2) to |s| < 0.75p
    #   lane i = s + V16_i * lane i, V16_i by adds/shifts or the 2^-k split (no product
    #   per lane).  Lanes are not reduced between rounds: the +-4 lanes grow 4x a round,
    #   so after 13 rounds |lane| < 0.75p * 4^14 / 3 < 2^57.1 and the lane sum < 2^58.2,
    #   inside _sred's |s| < 2^62 (docs/benchmarks.md, "Poseidon2 host kernel: product-free
    #   partial rounds").
    for r in range(rcp.shape[0]):
        rc = rcp[r]
        for j in range(BLOCK):
            x0 = _ssbox(_smm(_sred(st[0 * BLOCK + j] + rc), k_r2))
            u1 = st[1 * BLOCK + j]
            u2 = st[2 * BLOCK + j]
            u3 = st[3 * BLOCK + j]
            u4 = st[4 * BLOCK + j]
            u5 = st[5 * BLOCK + j]
            u6 = st[6 * BLOCK + j]
            u7 = st[7 * BLOCK + j]
            u8 = st[8 * BLOCK + j]
            u9 = st[9 * BLOCK + j]
            u10 = st[10 * BLOCK + j]
            u11 = st[11 * BLOCK + j]
            u12 = st[12 * BLOCK + j]
            u13 = st[13 * BLOCK + j]
            u14 = st[14 * BLOCK + j]
            u15 = st[15 * BLOCK + j]
            s = (((u1 + u2) + (u3 + u4)) + ((u5 + u6) + (u7 + u8))
                 + (((u9 + u10) + (u11 + u12)) + ((u13 + u14) + u15)))
            s = _smm(_sred(s + x0), k_r2)
            st[0 * BLOCK + j] = s - (x0 + x0)                                       # -2
            st[1 * BLOCK + j] = s + u1                                              # 1
            st[2 * BLOCK + j] = s + (u2 + u2)                                       # 2
            st[3 * BLOCK + j] = s + (u3 >> _S1) - (u3 & _L1) * _M1                  # 1/2
            st[4 * BLOCK + j] = s + (u4 + u4 + u4)                                  # 3
            st[5 * BLOCK + j] = s + (u5 << _S2)                                     # 4
            st[6 * BLOCK + j] = s - (u6 >> _S1) + (u6 & _L1) * _M1                  # -1/2
            st[7 * BLOCK + j] = s - (u7 + u7 + u7)                                  # -3
            st[8 * BLOCK + j] = s - (u8 << _S2)                                     # -4
            st[9 * BLOCK + j] = s + (u9 >> _S8) - (u9 & _L8) * _M8                  # 1/2^8
            st[10 * BLOCK + j] = s + (u10 >> _S2) - (u10 & _L2) * _M2               # 1/4
            st[11 * BLOCK + j] = s + (u11 >> _S3) - (u11 & _L3) * _M3               # 1/8
            st[12 * BLOCK + j] = s + (u12 >> _S27) - (u12 & _L27) * _M27            # 1/2^27
            st[13 * BLOCK + j] = s - (u13 >> _S8) + (u13 & _L8) * _M8               # -1/2^8
            st[14 * BLOCK + j] = s - (u14 >> _S4) + (u14 & _L4) * _M4               # -1/16
            st[15 * BLOCK + j] = s - (u15 >> _S27) + (u15 & _L27) * _M27            # -1/2^27


@njit
def _permute_block(st, rcf, rcp, k_in, k_r2, k_out):
    """Permute the BLOCK states held in st (int64 [16, BLOCK], canonical in and out): the
    32-bit-lane kernel where KERNEL is "lanes" (kernels/lde_rows.py's fused leaf sponge
    calls this), else the int64 rounds below."""
    if _LANES:
        _lanes_block(st, BLOCK)
    else:
        _permute_block_i64(st, rcf, rcp, k_in, k_r2, k_out)


@njit
def _permute_block_i64(st, rcf, rcp, k_in, k_r2, k_out):
    """Permute the BLOCK states held in st (int64 [16, BLOCK], canonical in and out)."""
    half = rcf.shape[0] // 2
    _external_block(st)
    _full_rounds(st, rcf, 0, half)
    for i in range(16):
        for j in range(BLOCK):
            st[i * BLOCK + j] = _smm(_sred(st[i * BLOCK + j]), k_in)    # scale R, |x| < 0.75p
    _partial_rounds(st, rcp, k_r2)
    _full_rounds(st, rcf, half, 2 * half)
    for i in range(16):
        for j in range(BLOCK):
            x = _smm(_sred(st[i * BLOCK + j]), k_out)        # |x| < 0.75p, scale 1
            st[i * BLOCK + j] = x + _P_S if x < 0 else x


@njit(cache=True, nogil=True)
def _sponge_kernel(m, out, rate, c0, c1, rcf, rcp, k_in, k_r2, k_out):
    """Chunks c0..c1-1 (BLOCK rows each) of an overwrite-mode sponge over the rows of m.

    m uint32[n, w] -> out uint32[n, k]: state 16 zeros; each block of ``rate`` inputs
    overwrites lanes 0..rate-1 (a short last block only its own lanes), then permute;
    output lanes 0..k-1.  rate = 8 is the SPEC §3 leaf hash; rate = 16 with w = 16 is a
    single permutation of each row (and k = 8 the 2-to-1 compression).
    """
    n, w = m.shape
    k = out.shape[1]
    st = np.empty(16 * BLOCK, np.int64)
    for c in range(c0, c1):
        lo = c * BLOCK
        nb = min(BLOCK, n - lo)
        st[:] = 0
        for b0 in range(0, w, rate):
            for i in range(min(rate, w - b0)):
                for j in range(nb):
                    st[i * BLOCK + j] = np.int64(m[lo + j, b0 + i])
            _permute_block_i64(st, rcf, rcp, k_in, k_r2, k_out)
        for i in range(k):
            for j in range(nb):
                out[lo + j, i] = np.uint32(st[i * BLOCK + j])


def _fast_args():
    return (_RCF_S, _RCP_S, _K_IN64, _K_R2, _K_OUT64)


def _sponge(m: np.ndarray, out: np.ndarray, rate: int, m2: np.ndarray | None = None,
            serial: bool = False) -> None:
    """Overwrite-mode sponge of every row of m (uint32[n, w], canonical, C-contiguous) into
    out (uint32[n, k], k <= 16, C-contiguous); see _sponge_kernel.

    ``m2`` (uint32[n, 8], with m uint32[n, 8] and rate 16): the rows are m[j] || m2[j]
    instead -- out[j] = compress(m[j], m2[j]) without a concatenated copy; out may be m
    itself (a fold in place).  ``serial``: on the calling thread only (a caller that is
    itself one of the pool's parallel jobs, kernels/mmcs.py's build)."""
    if m.shape[0] == 0:
        return
    if m2 is not None:
        if m.shape != (m.shape[0], DIGEST) or m2.shape != m.shape or rate != WIDTH:
            raise ValueError(f"sponge of pairs: m {m.shape} and m2 {m2.shape} must both be "
                             f"uint32[n, {DIGEST}] at rate {WIDTH}")
        if KERNEL != "lanes":
            m = np.concatenate([m, m2], axis=1)     # the int64 kernel reads whole rows
            m2 = None
    ro = m.view()
    ro.setflags(write=False)        # one compiled signature whatever the caller's flags
    if KERNEL == "lanes":
        # groups of W states (16 per zmm, 8 per ymm) in 32-bit lanes; contiguous group
        # ranges, one per worker; the kernel releases the GIL.  Its vector loads and
        # stores address rows by flat offsets: C-contiguous arrays only.
        from .poseidon2_lanes import NO_M2, W, _sponge_lanes_kernel
        if not ro.flags.c_contiguous:
            ro = np.ascontiguousarray(ro)
            ro.setflags(write=False)
        r2 = NO_M2
        if m2 is not None:
            r2 = np.ascontiguousarray(m2).view()
            r2.setflags(write=False)
        dst = out if out.flags.c_contiguous else np.empty(out.shape, np.uint32)
        ngroups = (m.shape[0] + W - 1) // W
        if serial:
            _sponge_lanes_kernel(ro, r2, dst, rate, 0, ngroups)
        else:
            run_ranges(lambda g0, g1: _sponge_lanes_kernel(ro, r2, dst, rate, g0, g1),
                       ngroups, 16)
        if dst is not out:
            out[...] = dst
        return
    nchunks = (m.shape[0] + BLOCK - 1) // BLOCK
    args = _fast_args()
    if serial:
        _sponge_kernel(ro, out, rate, 0, nchunks, *args)
    else:
        run_ranges(lambda c0, c1: _sponge_kernel(ro, out, rate, c0, c1, *args), nchunks, 4)


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


#: proof-of-work searches of at most this many bits run on the calling thread alone (a
#: 2^11 search is ~0.15 ms of permutations, about a thread hand-off's cost)
GRIND_SERIAL_BITS = 11


def grind_search(base: np.ndarray, lane: int, bits: int) -> int | None:
    """The smallest nonce n in [0, p) such that the permutation of ``base`` (uint32[16],
    canonical) with n at ``lane`` has its element 0 divisible by 2^bits: the proof-of-work
    search of verifier.transcript.Transcript.grind, compiled (the 32-bit-lane kernel, W
    nonces a permutation, no batch arrays) and split over numba's threads in interleaved
    chunks that stop once a smaller chunk has a hit -- the same nonce, about the expected
    2^bits permutations instead of whole batches.  None where the lanes kernel is not in
    use (``STEADFAST_POSEIDON2_KERNEL=int64``): the caller's batch search then."""
    if not _LANES:
        return None
    from .host_pool import run_dynamic, threads
    from .poseidon2_lanes import _grind_kernel
    b = np.ascontiguousarray(base, np.uint32).reshape(-1)
    if b.size != WIDTH or not 0 <= int(lane) < WIDTH or not 0 <= int(bits) <= 30:
        raise ValueError(f"grind_search: base of {b.size} values, lane {lane}, bits {bits}")
    _check_canonical(b, "base")
    mask = np.uint32((1 << int(bits)) - 1)
    slots = 1 if bits <= GRIND_SERIAL_BITS else max(1, threads())
    best = np.array([np.iinfo(np.int64).max], np.int64)
    found = np.full(slots, -1, np.int64)

    def work(s0, s1):
        for s in range(s0, s1):
            _grind_kernel(b, int(lane), mask, s, slots, best, found)

    run_dynamic(work, slots, slots, grain=1)
    hits = found[found >= 0]
    if not hits.size:
        raise RuntimeError("no proof-of-work nonce found")     # pragma: no cover
    return int(hits.min())


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
    _check_canonical(left, "left")
    _check_canonical(right, "right")
    out = np.empty((left.shape[0], DIGEST), np.uint32)
    _sponge(left, out, WIDTH, m2=right)          # the pair read from both arrays
    return out


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


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("poseidon2_lanes.py", "poseidon2_constants.py", "field.py"))
