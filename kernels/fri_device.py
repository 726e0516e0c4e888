"""Device (numba.cuda) kernels for the proof format version 3 join (one FRI for all
tables, Merkle caps, multiproofs), bit-identical to the host stages.

* :func:`ef_axpy_device` -- ``acc = acc + s·x`` on EF arrays (``init``: ``acc = s·x``):
  the μ-combine F_h = Σ_j μ^j DQ_j and the roll-in f_{i+1} += β^(a) F_h.
* :func:`mu_combine_device` -- F_h of a list of DEEP quotients of one height.
* :func:`fri_fold_arity_device` -- one layer's fold by a = 2^k on the rescaled domain
  (k binary folds with β, β^2, ..., β^(2^(k-1)) done in registers, one thread per
  output position), with the optional roll-in fused.
* :func:`multiproof_rows` (host) -- the flat node-array rows of a multiproof, in the
  spec's order; :func:`gather_node_rows_device` gathers them (or any rows of a 2-D
  device array, e.g. a FRI layer's opened EF values) and copies only those to the host.
* :func:`cap_device` -- the cap (2^c nodes of level h - c) of a device tree, on the host.

Domain (docs/notes v3 spec, step 6): position p of a layer of height h is the point
x_p = g·ω_{2^h}^{bitrev_h(p)} (g = 31 for every layer), so x_{2u+1} = -x_{2u} and one
binary fold with challenge b is
    f'(u) = (f(2u) + f(2u+1))/2 + b·(f(2u) - f(2u+1)) / (2·x_{2u}),
the value at position u of height h - 1.  Arrays are numba device arrays of canonical
uint32 (EF arrays uint32[n, 4]); wrappers validate, accept ``stream=``, ``out=`` and
``alloc=`` like :mod:`kernels.stage_device`.  Kernels are compiled once (module scope).
"""
from __future__ import annotations

import numpy as np
from numba import cuda, uint32

from ..air import field as AF
from .devicelib import DF, fetch, grid_1d, kernel
from .field import P
from .merkle import level_offsets
from .merkle_device import _gather_rows_kernel      # dst[q, c] = src[idx[q], c]
from .stage_device import (DEFAULT_BLOCK, SHIFT, _out, _u32s, bitrev, check_device_array,
                           ef_scalar)

__all__ = ["ef_axpy_device", "mu_combine_device", "fri_fold_arity_device",
           "multiproof_rows", "gather_node_rows_device", "cap_device", "MAX_LOG_ARITY"]

MAX_LOG_ARITY = 4            # log_fri_arity is 1..4 (spec header)
_MAX_ARITY = 1 << MAX_LOG_ARITY

_add, _sub, _mul, _pow = DF.add, DF.sub, DF.mul, DF.pow_
_ef_add, _ef_sub, _ef_mul, _ef_mul_base = DF.ef_add, DF.ef_sub, DF.ef_mul, DF.ef_mul_base
_INV2 = np.uint32((P + 1) // 2)
_Z32 = np.uint32(0)
_SIG2 = "uint32[:, ::1]"


# ----------------------------------------------------------------------------- kernels

@kernel(f"void({_SIG2}, {_SIG2}, uint32, uint32, uint32, uint32, int64)")
def _ef_axpy_kernel(acc, x, s0, s1, s2, s3, init):
    # acc[i] = (0 if init else acc[i]) + s * x[i]
    i = cuda.grid(1)
    if i < acc.shape[0]:
        t0, t1, t2, t3 = _ef_mul(s0, s1, s2, s3, x[i, 0], x[i, 1], x[i, 2], x[i, 3])
        if init == 0:
            t0, t1, t2, t3 = _ef_add(acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3], t0, t1, t2, t3)
        acc[i, 0] = t0
        acc[i, 1] = t1
        acc[i, 2] = t2
        acc[i, 3] = t3


@kernel(f"void({_SIG2}, {_SIG2}, uint32, uint32, uint32, uint32, int64, int64, uint32, uint32, "
        f"uint32, {_SIG2}, uint32, uint32, uint32, uint32, int64)")
def _fold_arity_kernel(vals, out, b0, b1, b2, b3, k, log_h, g_inv, w_inv_h, wk_inv,
                       roll, r0, r1, r2, r3, has_roll):
    # Thread u: the a = 2^k values at positions u*a .. u*a + a - 1 (height log_h) folded k
    # times into position u of height log_h - k.  Level l (height hl = log_h - l) folds
    # the pairs (2v, 2v + 1), v = u * 2^(k-1-l) + t, with
    #   1/x_{2v} = g^-1 w_{2^hl}^-bitrev_{hl-1}(v)
    #            = g^-1 (w_{2^h}^-bitrev_{h-k}(u))^(2^l) (w_{2^(k-l)}^-1)^bitrev_{k-1-l}(t)
    # (bitrev_{hl-1}(v) = bitrev_{k-1-l}(t) 2^(h-k) + bitrev_{h-k}(u)), and challenge
    # beta^(2^l).  Then, with has_roll, out[u] += beta^a roll[u].
    u = cuda.grid(1)
    if u >= out.shape[0]:
        return
    loc = cuda.local.array((_MAX_ARITY, 4), uint32)
    a = 1 << k
    base = u * a
    for j in range(a):
        for c in range(4):
            loc[j, c] = vals[base + j, c]
    hk = log_h - k
    winv_u = _pow(w_inv_h, bitrev(u, hk))            # w_{2^h}^-bitrev_{h-k}(u)
    wsmall = wk_inv                                    # w_{2^(k-l)}^-1
    c0, c1, c2, c3 = b0, b1, b2, b3                    # beta^(2^l)
    half = a >> 1
    lev = 0
    while lev < k:
        for t in range(half):
            inv_x = _mul(_mul(g_inv, winv_u), _pow(wsmall, bitrev(t, k - 1 - lev)))
            e0, e1, e2, e3 = loc[2 * t, 0], loc[2 * t, 1], loc[2 * t, 2], loc[2 * t, 3]
            o0, o1, o2, o3 = loc[2 * t + 1, 0], loc[2 * t + 1, 1], loc[2 * t + 1, 2], loc[2 * t + 1, 3]
            s0, s1, s2, s3 = _ef_add(e0, e1, e2, e3, o0, o1, o2, o3)
            s0, s1, s2, s3 = _ef_mul_base(s0, s1, s2, s3, _INV2)
            d0, d1, d2, d3 = _ef_sub(e0, e1, e2, e3, o0, o1, o2, o3)
            d0, d1, d2, d3 = _ef_mul_base(d0, d1, d2, d3, _mul(inv_x, _INV2))
            t0, t1, t2, t3 = _ef_mul(c0, c1, c2, c3, d0, d1, d2, d3)
            q0, q1, q2, q3 = _ef_add(s0, s1, s2, s3, t0, t1, t2, t3)
            loc[t, 0] = q0
            loc[t, 1] = q1
            loc[t, 2] = q2
            loc[t, 3] = q3
        winv_u = _mul(winv_u, winv_u)
        wsmall = _mul(wsmall, wsmall)
        c0, c1, c2, c3 = _ef_mul(c0, c1, c2, c3, c0, c1, c2, c3)
        half >>= 1
        lev += 1
    f0, f1, f2, f3 = loc[0, 0], loc[0, 1], loc[0, 2], loc[0, 3]
    if has_roll:
        t0, t1, t2, t3 = _ef_mul(r0, r1, r2, r3, roll[u, 0], roll[u, 1], roll[u, 2], roll[u, 3])
        f0, f1, f2, f3 = _ef_add(f0, f1, f2, f3, t0, t1, t2, t3)
    out[u, 0] = f0
    out[u, 1] = f1
    out[u, 2] = f2
    out[u, 3] = f3


# ----------------------------------------------------------------------------- wrappers

def ef_axpy_device(acc, x, scalar, init: bool = False, stream=None, block: int = DEFAULT_BLOCK):
    """In place: ``acc = acc + scalar·x`` (``init``: ``acc = scalar·x``); device EF arrays
    uint32[n, 4] of equal shape (``acc`` may not alias ``x`` unless ``init`` is False and
    the caller wants acc·(1 + s))."""
    acc = check_device_array(acc, "acc", 2, 4)
    x = check_device_array(x, "x", 2, 4)
    if tuple(acc.shape) != tuple(x.shape):
        raise ValueError(f"ef_axpy_device: shapes differ: acc {tuple(acc.shape)}, x {tuple(x.shape)}")
    s = ef_scalar(scalar, "scalar")
    if acc.shape[0]:
        g, b = grid_1d(acc.shape[0], block)
        _ef_axpy_kernel[g, b, stream or 0](acc, x, *_u32s(s), int(bool(init)))
    return acc


def _ef_pow_host(x: np.ndarray, e: int) -> np.ndarray:
    return AF.ef_pow(np.asarray(x, np.uint64).reshape(4, 1), int(e)).reshape(4).astype(np.uint32)


def mu_combine_device(dqs, mu, out=None, stream=None, block: int = DEFAULT_BLOCK, alloc=None):
    """F = Σ_j μ^j dqs[j] (j = 0, 1, ... in list order) -> device uint32[N, 4]; every
    entry of ``dqs`` a device uint32[N, 4] of the same height."""
    if not dqs:
        raise ValueError("mu_combine_device: no quotients")
    dqs = [check_device_array(d, f"dqs[{j}]", 2, 4) for j, d in enumerate(dqs)]
    n = dqs[0].shape[0]
    for j, d in enumerate(dqs):
        if d.shape[0] != n:
            raise ValueError(f"mu_combine_device: dqs[{j}] has {d.shape[0]} rows, expected {n}")
    m = ef_scalar(mu, "mu")
    out = _out(out, (n, 4), stream, alloc=alloc)
    one = np.array([1, 0, 0, 0], np.uint32)
    p = one
    for j, d in enumerate(dqs):
        ef_axpy_device(out, d, p, init=(j == 0), stream=stream, block=block)
        p = AF.ef_mul(p.astype(np.uint64).reshape(4, 1),
                      m.astype(np.uint64).reshape(4, 1)).reshape(4).astype(np.uint32)
    return out


def fri_fold_arity_device(values, beta, log_arity: int, roll=None, out=None, stream=None,
                          block: int = DEFAULT_BLOCK, alloc=None):
    """Fold a bit-reversed layer device uint32[2^h, 4] on g<ω_{2^h}> by a = 2^log_arity
    -> device uint32[2^(h - log_arity), 4] on g<ω_{2^(h-k)}> (spec step 6: k binary folds
    with β, β^2, β^4, ...).  ``roll``: optional device uint32[2^(h-k), 4] added times
    β^a (the roll-in of the tables of the next height)."""
    values = check_device_array(values, "values", 2, 4)
    bf = ef_scalar(beta, "beta")
    k = int(log_arity)
    if not 1 <= k <= MAX_LOG_ARITY:
        raise ValueError(f"fri_fold_arity_device: log_arity must be 1..{MAX_LOG_ARITY}, got {k}")
    n = values.shape[0]
    if n < 1 or n & (n - 1):
        raise ValueError(f"fri_fold_arity_device: {n} values is not a power of two")
    h = n.bit_length() - 1
    if h < k or h > AF.TWO_ADICITY:
        raise ValueError(f"fri_fold_arity_device: a layer of height {h} cannot fold by 2^{k}")
    m = n >> k
    out = _out(out, (m, 4), stream, alloc=alloc)
    if roll is not None:
        roll = check_device_array(roll, "roll", 2, 4)
        if roll.shape[0] != m:
            raise ValueError(f"fri_fold_arity_device: roll has {roll.shape[0]} rows, expected {m}")
        rb = _ef_pow_host(bf, 1 << k)
        roll_arg, has_roll = roll, 1
    else:
        rb = np.zeros(4, np.uint32)
        roll_arg, has_roll = out, 0          # unread
    g_inv = pow(SHIFT, P - 2, P)
    w_inv_h = pow(AF.root_of_unity(h), P - 2, P)
    wk_inv = pow(AF.root_of_unity(k), P - 2, P)
    g, b = grid_1d(m, block)
    _fold_arity_kernel[g, b, stream or 0](values, out, *_u32s(bf), k, h, np.uint32(g_inv),
                                          np.uint32(w_inv_h), np.uint32(wk_inv), roll_arg,
                                          *_u32s(rb), has_roll)
    return out


def multiproof_rows(indices, log_n: int, cap_height: int) -> np.ndarray:
    """The node-array rows (int64[m]; :func:`kernels.merkle.level_offsets` layout) of the
    multiproof of leaf ``indices`` in a tree of 2^log_n leaves with cap height
    c = min(cap_height, log_n): for l = 0 .. log_n - c - 1, for j in S_l ascending with
    j^1 not in S_l, node (l, j^1); S_{l+1} = {j >> 1}."""
    log_n = int(log_n)
    c = min(int(cap_height), log_n)
    s = np.unique(np.asarray(indices, dtype=np.int64))
    if s.size and (s[0] < 0 or s[-1] >= (1 << log_n)):
        raise ValueError(f"multiproof_rows: leaf index out of range [0, {1 << log_n})")
    offs = level_offsets(log_n)
    rows = []
    for lev in range(log_n - c):
        sib = s ^ 1
        missing = sib[~np.isin(sib, s)]
        rows.append(offs[lev] + missing)       # s ascending -> missing in that order
        s = np.unique(s >> 1)
    return np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, np.int64)


def gather_node_rows_device(src, rows, stream=None, block: int = DEFAULT_BLOCK) -> np.ndarray:
    """Rows ``rows`` (int64[m], any order, repeats allowed) of a device uint32[n, w]
    gathered on the device -> host uint32[m, w] (only those rows cross)."""
    src = check_device_array(src, "src", 2)
    idx = np.ascontiguousarray(np.asarray(rows, dtype=np.int64).reshape(-1))
    w = src.shape[1]
    m = idx.shape[0]
    host = np.empty((m, w), np.uint32)
    if m == 0 or w == 0:
        return host
    if idx.min() < 0 or idx.max() >= src.shape[0]:
        raise ValueError(f"gather_node_rows_device: row index out of range [0, {src.shape[0]})")
    s = stream or 0
    d_idx = cuda.to_device(idx, stream=s)
    d_out = cuda.device_array((m, w), dtype=np.uint32, stream=s)
    g, b = grid_1d(m * w, block)
    _gather_rows_kernel[g, b, s](src, d_idx, d_out)
    return fetch(d_out, stream, host)


def cap_device(nodes, log_n: int, cap_height: int, stream=None) -> np.ndarray:
    """The cap of a device tree (nodes uint32[2n - 1, 8], ``level_offsets`` layout):
    the 2^c nodes of level log_n - c, c = min(cap_height, log_n) -> host uint32[2^c, 8]."""
    nodes = check_device_array(nodes, "nodes", 2, 8)
    log_n = int(log_n)
    if nodes.shape[0] != (2 << log_n) - 1:
        raise ValueError(f"cap_device: {nodes.shape[0]} nodes is not a tree of 2^{log_n} leaves")
    c = min(int(cap_height), log_n)
    off = int(level_offsets(log_n)[log_n - c])
    host = np.empty((1 << c, 8), np.uint32)
    return fetch(nodes[off:off + (1 << c)], stream, host)
