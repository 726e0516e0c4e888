"""The verifier's numpy field helpers, vectorised over queries.

Base arithmetic and EF = F_p[X]/(X^4 - 11) come from :mod:`air.field` (numpy only, the
statement's own arithmetic; EF coefficients on the first axis).  This module adds what
the verifier needs on top: bit reversal, powers with per-element exponents, conversions
between the proof's EF layout (last axis) and the evaluator's (first axis), and the
barycentric evaluation of preprocessed columns at the out-of-domain point.
"""
from __future__ import annotations

import numpy as np

from ..air import field as F
from ..air.field import P, GENERATOR, u64

__all__ = ["F", "P", "GENERATOR", "bitrev", "pow_scalar_arr", "ef_col", "ef_rows",
           "ef_basis_combine", "barycentric_at", "inv2"]

inv2 = (P + 1) // 2


def bitrev(idx, bits: int) -> np.ndarray:
    """Reverse the low ``bits`` bits of every index."""
    idx = np.asarray(idx, dtype=np.int64)
    out = np.zeros_like(idx)
    for b in range(bits):
        out |= ((idx >> b) & 1) << (bits - 1 - b)
    return out


def pow_scalar_arr(base: int, exps) -> np.ndarray:
    """base^e for a scalar base and an array of exponents (< 2^63)."""
    exps = np.asarray(exps, dtype=np.int64)
    result = np.ones(exps.shape, dtype=np.uint64)
    b = np.uint64(base % P)
    e = exps.copy()
    while np.any(e):
        bit = (e & 1).astype(bool)
        result = np.where(bit, F.mul(result, b), result)
        e >>= 1
        b = np.uint64(int(b) * int(b) % P)
    return result


def ef_col(a) -> np.ndarray:
    """Proof layout (..., 4) -> evaluator layout (4, ...)."""
    return np.moveaxis(u64(a), -1, 0)


def ef_rows(a) -> np.ndarray:
    """Evaluator layout (4, ...) -> proof layout (..., 4), uint32."""
    return np.moveaxis(np.asarray(a), 0, -1).astype(np.uint32)


def ef_basis_combine(coeff_values) -> np.ndarray:
    """EF value of an EF column from the values of its 4 coefficient columns:
    sum_c X^c * v_c, with each v_c an EF value (4, ...); X^4 = 11."""
    out = None
    for c, v in enumerate(coeff_values):
        v = u64(v)
        # multiply by X^c: shift coefficients up by c, wrapping with factor W
        shifted = np.empty_like(v)
        for k in range(4):
            src = (k - c) % 4
            shifted[k] = v[src] if k >= c else F.mul(v[src], F.W)
        out = shifted if out is None else F.add(out, shifted)
    return out


def barycentric_at(columns: np.ndarray, z, log_n: int) -> np.ndarray:
    """Evaluate the polynomials through ``columns`` (uint32[n, k], values on <w_n> in
    natural order) at the EF point z: f(z) = (z^n - 1)/n * sum_i f_i w^i / (z - w^i).
    Returns EF values in proof layout (k, 4)."""
    n = 1 << log_n
    z = u64(z).reshape(4, 1)
    pts = F.powers(F.root_of_unity(log_n), n)                    # w^i, (n,)
    diff = F.ef_sub(z, F.ef_from_base(pts))                      # z - w^i, (4, n)
    weights = F.ef_mul_base(F.ef_inv(diff), pts)                 # w^i / (z - w^i)
    zh = F.ef_add_base(F.ef_pow(z, n), P - 1)
    scale = F.ef_mul_base(zh, pow(n, P - 2, P))                  # (z^n - 1) / n
    cols = u64(columns).T                                         # (k, n)
    out = np.empty((cols.shape[0], 4), dtype=np.uint64)
    for j in range(cols.shape[0]):
        # sum_i f_i * weight_i: each product reduced (< p), sums of n < 2^27 terms fit
        acc = ((weights * cols[j][None, :]) % np.uint64(P)).sum(axis=1) % np.uint64(P)
        out[j] = F.ef_mul(acc.reshape(4, 1), scale).reshape(4)
    return out.astype(np.uint32)
