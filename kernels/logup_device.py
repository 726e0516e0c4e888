"""R1's LogUp aux trace on the device (HostStages.aux_build): :func:`aux_build_device`.

Per chunk of trace rows, the AIR's generated ``logup`` kernel
(:mod:`kernels.constraint_codegen`) writes every interaction's denominator d and signed
multiplicity; the denominators are inverted together (EF Montgomery trick,
:mod:`kernels.stage_device`) and :func:`_logup_h_kernel` sums each batch's fractions into
its h column and the row total; a device scan of the totals and
:func:`_logup_place_kernel` give the running-sum column acc (acc[i] = sum_(j<i) r_j -
i T / n) and the terminal U = T / n.  A vanishing denominator is reported, never divided.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ..air import field as AF
from .constraint_codegen import M2, dummy, generated, pv_device
from .devicelib import DF, grid_1d, kernel
from . import field
from .field import P
from .stage_device import (DEFAULT_BLOCK, MAX_SHARED_BLOCK, check_device_array, device_empty,
                           ef_batch_inverse_device, ef_prefix_sum_device, ef_scalar, fetch)

_ef_add, _ef_sub, _ef_mul_base = DF.ef_add, DF.ef_sub, DF.ef_mul_base
_mulp = DF.mul


@kernel(f"void({M2}, {M2}, int64[::1], int64, {M2}, {M2}, int64)")
def _logup_h_kernel(dinv, sm, bstart, r0, aux, tot, transposed):
    # trace row i = r0 + il of a chunk: h_k = sum_{t in batch k} sm[t, il] / d_t, stored
    # for every batch but the last (which has no column: it lives in acc's constraint);
    # tot[i] = sum_k h_k.  dinv row t * rows + il holds 1/d_t at that row.
    il = cuda.grid(1)
    rows = sm.shape[1]
    if il >= rows:
        return
    i = r0 + il
    s0, s1, s2, s3 = np.uint32(0), np.uint32(0), np.uint32(0), np.uint32(0)
    nb = bstart.shape[0] - 1
    for k in range(nb):
        h0, h1, h2, h3 = np.uint32(0), np.uint32(0), np.uint32(0), np.uint32(0)
        for t in range(bstart[k], bstart[k + 1]):
            r = t * rows + il
            e0, e1, e2, e3 = _ef_mul_base(dinv[r, 0], dinv[r, 1], dinv[r, 2], dinv[r, 3], sm[t, il])
            h0, h1, h2, h3 = _ef_add(h0, h1, h2, h3, e0, e1, e2, e3)
        if k < nb - 1:
            if transposed:
                aux[4 * k, i] = h0
                aux[4 * k + 1, i] = h1
                aux[4 * k + 2, i] = h2
                aux[4 * k + 3, i] = h3
            else:
                aux[i, 4 * k] = h0
                aux[i, 4 * k + 1] = h1
                aux[i, 4 * k + 2] = h2
                aux[i, 4 * k + 3] = h3
        s0, s1, s2, s3 = _ef_add(s0, s1, s2, s3, h0, h1, h2, h3)
    tot[i, 0] = s0
    tot[i, 1] = s1
    tot[i, 2] = s2
    tot[i, 3] = s3


@kernel(f"void({M2}, {M2}, int64, int64, uint32, uint32[::1], uint32[::1])")
def _logup_place_kernel(incl, aux, col0, transposed, ninv, zero_flag, fin):
    # incl[i] = sum_(j<=i) r_j (the inclusive scan of the row sums), T = incl[n-1]:
    # acc[i] = incl[i-1] - i T / n (acc[0] = 0) into the aux trace (HostStages'
    # logup_accumulator); U = T / n (the terminal) and the zero flag -> fin
    i = cuda.grid(1)
    n = incl.shape[0]
    if i < n:
        w = _mulp(np.uint32(i), ninv)
        e0, e1, e2, e3 = _ef_mul_base(incl[n - 1, 0], incl[n - 1, 1], incl[n - 1, 2],
                                      incl[n - 1, 3], w)
        p0, p1, p2, p3 = np.uint32(0), np.uint32(0), np.uint32(0), np.uint32(0)
        if i > 0:
            p0, p1, p2, p3 = incl[i - 1, 0], incl[i - 1, 1], incl[i - 1, 2], incl[i - 1, 3]
        a0, a1, a2, a3 = _ef_sub(p0, p1, p2, p3, e0, e1, e2, e3)
        if transposed:
            aux[col0, i] = a0
            aux[col0 + 1, i] = a1
            aux[col0 + 2, i] = a2
            aux[col0 + 3, i] = a3
        else:
            aux[i, col0] = a0
            aux[i, col0 + 1] = a1
            aux[i, col0 + 2] = a2
            aux[i, col0 + 3] = a3
        if i == n - 1:
            u0, u1, u2, u3 = _ef_mul_base(incl[i, 0], incl[i, 1], incl[i, 2], incl[i, 3], ninv)
            fin[0] = u0
            fin[1] = u1
            fin[2] = u2
            fin[3] = u3
            fin[4] = zero_flag[0]


def aux_build_device(air, shape, main, public_values, challenges: dict, prep=None,
                     layout: str = "cols", columns: bool = False, stream=None,
                     block: int = DEFAULT_BLOCK, scan_block: int = MAX_SHARED_BLOCK,
                     row_chunk: int = 1 << 16, alloc=None):
    """R1 LogUp (HostStages.aux_build) on the device.

    ``main``: the main trace on H as device uint32[w, n] (``layout="cols"``, the column
    layout of the LDE) or uint32[n, w] (``layout="rows"``, the trace as given).  ``prep``:
    device uint32[k, n] preprocessed columns (uploaded from ``air.preprocessed`` when
    None).  Returns (aux device uint32[n, 4a] -- or uint32[4a, n] with ``columns=True`` --,
    terminal U host uint32[4]); EF column k is base columns 4k..4k+3 (h_0 .. h_(B-2), acc).
    Raises ValueError if a denominator vanishes (the terminal and that flag come back in
    one 5-word copy)."""
    if not air.interactions:
        raise ValueError(f"{air.name}: no interactions, no LogUp aux trace")
    n, w = shape.n, air.main_width
    s = stream or 0
    main = check_device_array(main, "main", 2)
    if layout == "cols":
        if tuple(main.shape) != (w, n):
            raise ValueError(f"main: shape {tuple(main.shape)}, expected {(w, n)} (layout 'cols')")
        ms0, ms1 = n, 1
    elif layout == "rows":
        if tuple(main.shape) != (n, w):
            raise ValueError(f"main: shape {tuple(main.shape)}, expected {(n, w)} (layout 'rows')")
        ms0, ms1 = 1, w
    else:
        raise ValueError(f"layout must be 'cols' or 'rows', got {layout!r}")
    if air.prep_width:
        if prep is None:
            prep = cuda.to_device(np.ascontiguousarray(air.preprocessed.T), stream=s)
        prep = check_device_array(prep, "prep", 2)
        if tuple(prep.shape) != (air.prep_width, n):
            raise ValueError(f"prep: shape {tuple(prep.shape)}, expected {(air.prep_width, n)}")
        prep_flat = prep.reshape(air.prep_width * n)
    else:
        prep_flat = dummy((1,), s)
    gk = generated(air)
    beta = ef_scalar(challenges["logup_beta"], "logup_beta").astype(np.uint64).reshape(4, 1)
    gamma = ef_scalar(challenges["logup_gamma"], "logup_gamma")
    arity = max(len(it.values) for it in air.interactions)
    bpow = np.empty((arity + 1, 4), np.uint32)          # gamma, beta, beta^2, ...
    bpow[0] = gamma
    bpow[1:] = AF.ef_mul(AF.ef_powers(beta, arity), beta).T
    T = len(air.interactions)
    B = len(air.lookup_batches)
    # batches are consecutive runs of interactions in declaration order
    bstart = np.concatenate([[0], np.cumsum([len(bt) for bt in air.lookup_batches])])
    a = B                                       # h_0 .. h_(B-2), acc
    aux = device_empty((4 * a, n) if columns else (n, 4 * a), s, alloc)
    tot = cuda.device_array((n, 4), dtype=np.uint32, stream=s)
    flag = cuda.to_device(np.zeros(1, np.uint32), stream=s)
    d_bpow = cuda.to_device(field.to_mont_host(bpow.reshape(-1)), stream=s)   # Montgomery
    d_bstart = cuda.to_device(bstart.astype(np.int64), stream=s)
    d_pv = pv_device(air, public_values, s)
    flat = main.reshape(w * n)
    rows = min(n, max(1, int(row_chunk)))
    dens = cuda.device_array((T * rows, 4), dtype=np.uint32, stream=s)
    dinv = cuda.device_array((T * rows, 4), dtype=np.uint32, stream=s)
    sm = cuda.device_array((T, rows), dtype=np.uint32, stream=s)
    for r0 in range(0, n, rows):
        if r0 + rows > n:                       # last, shorter chunk
            rows = n - r0
            dens, dinv = dens[:T * rows], dinv[:T * rows]
            sm = cuda.device_array((T, rows), dtype=np.uint32, stream=s)
        g, b = grid_1d(rows, block)
        gk.logup[g, b, s](flat, ms0, ms1, prep_flat, n, d_pv, d_bpow, r0, dens, sm, flag)
        ef_batch_inverse_device(dens, out=dinv, zero_flag=flag, stream=s, block=block)
        _logup_h_kernel[g, b, s](dinv, sm, d_bstart, r0, aux, tot, int(columns))
    ef_prefix_sum_device(tot, out=tot, stream=s, block=scan_block)
    fin = cuda.device_array(5, dtype=np.uint32, stream=s)
    g, b = grid_1d(n, block)
    _logup_place_kernel[g, b, s](tot, aux, 4 * (B - 1), int(columns),
                                 np.uint32(pow(n, P - 2, P)), flag, fin)
    host = fetch(fin, stream)
    if host[4]:
        raise ValueError(f"{air.name}: a LogUp denominator vanished (resample: "
                         "the challenges hit a tuple's fingerprint)")
    return aux, host[:4].copy()


__all__ = ["aux_build_device"]
