"""R2's quotient on the device from the AIR's generated kernel (HostStages.quotient):
:func:`quotient_device` and the row-condition data it reads
(:func:`quotient_selectors_device`); :func:`precompile` of a proof's device kernels; the
PTX-check examples.

Q(x) = sum_k alpha^(K-1-k) sel_k(x) C_k(x) / Z_H(x) on the quotient coset g<w_M>, one
thread per point, in the AIR's ``quotient`` kernel (:mod:`kernels.constraint_codegen`
generates it).  A slotted AIR whose ``device_split`` names a slot AIR and a LogUp-only AIR
is launched as those two kernels, the slots' results folded in with their alpha powers
(:func:`_quotient_split`): one generated kernel serves every slot count.

Also here for the callers of this module (re-exported): :func:`generated`,
:data:`SOURCES`, :class:`GeneratedKernels`, :data:`DFC` (:mod:`kernels.constraint_codegen`)
and :func:`aux_build_device` (:mod:`kernels.logup_device`, R1's LogUp aux trace).
:func:`ptx_examples` (called by ``python -m steadfast.kernels.ptx_check``) generates the
kernels of :func:`register_example_airs`.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ..air import field as AF
from .constraint_codegen import (CHAL_SLOT, DFC, M2, SOURCES, TERM_SLOT, GeneratedKernels,
                                 dummy, generated, pv_device, split_of)
from .constraint_codegen import _module_source  # noqa: F401  (tests/test_kernel_cache.py)
from .devicelib import DF, grid_1d, kernel
from . import field, kernel_cache
from .field import P
from .field_device import batch_inverse
from .logup_device import aux_build_device
from .stage_device import (DEFAULT_BLOCK, SHIFT, check_device_array, device_empty, ef_scalar,
                           matrix_geometry)

__all__ = ["generated", "precompile", "quotient_device", "quotient_selectors_device", "aux_build_device",
           "register_example_airs", "SOURCES", "GeneratedKernels", "DFC"]


# ----------------------------------------------------------------------------- quotient

_ef_add, _ef_mul = DF.ef_add, DF.ef_mul
_mulp, _subp, _powp = DF.mul, DF.sub, DF.pow_


@kernel(f"void(uint32, uint32, uint32, int64, {M2}, {M2})")
def _coset_diffs_kernel(g, w, w_inv_n, M, tmp, sel):
    # x_j = g w^j on the quotient coset: tmp = (x - 1, x - w_n^-1) (to be inverted),
    # sel[2] = x - w_n^-1 (the transition selector itself)
    j = cuda.grid(1)
    if j < M:
        x = _mulp(g, _powp(w, j))
        d = _subp(x, w_inv_n)
        tmp[0, j] = _subp(x, np.uint32(1))
        tmp[1, j] = d
        sel[2, j] = d


def quotient_selectors_device(log_n: int, log_m: int, stream=None, block: int = DEFAULT_BLOCK):
    """Row-condition data on the quotient coset g<w_M> (natural order), as the generated
    quotient kernels read it: ``sel`` device uint32[3, M] = (1/(x-1), 1/(x-w_n^-1),
    x - w_n^-1) and ``zh`` device uint32[2, M/n] = (Z_H, 1/Z_H) at x_j for j mod M/n
    (Z_H(x_j) = g^n w_(M/n)^j - 1 takes M/n values).  Then first = Z_H/(x-1), last =
    Z_H/(x-w^-1), transition = x - w^-1, exactly as air.selectors_on_coset."""
    if not 0 <= log_n <= log_m <= AF.TWO_ADICITY:
        raise ValueError(f"quotient domain 2^{log_m} must contain the trace domain 2^{log_n}")
    n, M = 1 << log_n, 1 << log_m
    r = M // n
    distinct = AF.sub(AF.mul(AF.powers(AF.root_of_unity(log_m - log_n), r), pow(SHIFT, n, P)), 1)
    if np.any(distinct == 0):
        raise ValueError("the coset meets the trace domain (Z_H vanishes)")
    s = stream or 0
    zh = cuda.to_device(np.stack([distinct, AF.inv(distinct)]).astype(np.uint32), stream=s)
    sel = cuda.device_array((3, M), dtype=np.uint32, stream=s)
    tmp = cuda.device_array((2, M), dtype=np.uint32, stream=s)
    w_inv_n = pow(AF.root_of_unity(log_n), P - 2, P)
    g, b = grid_1d(M, block)
    _coset_diffs_kernel[g, b, s](np.uint32(SHIFT), np.uint32(AF.root_of_unity(log_m)),
                                 np.uint32(w_inv_n), M, tmp, sel)
    # base-field Montgomery trick straight into rows 0 and 1 of sel (x - 1, x - w^-1 are
    # never zero: g = 31 generates F_p^*, so the coset g<w_M> misses the subgroup <w_M>)
    batch_inverse(tmp.reshape(2 * M), out=sel.reshape(3 * M)[:2 * M], stream=s)
    return sel, zh



def quotient_device(air, shape, main_lde, prep_lde, aux_lde, public_values, challenges: dict,
                    alpha, terminal, layout: str = "cols", selectors=None, out=None, stream=None,
                    block: int = DEFAULT_BLOCK, alloc=None):
    """R2 (HostStages.quotient): Q(x) = sum_k alpha^(K-1-k) sel_k(x) C_k(x) / Z_H(x) on the
    quotient coset g<w_M> -> device uint32[4, M] in natural order.

    main_lde / prep_lde / aux_lde: the LDE matrices on g<w_N> in ``layout``: "rows" =
    uint32[N, c] with rows in bit-reversed order (``Committed.rows``, the committed
    matrix; quotient point j is row bitrev_M(j)), "cols" = uint32[c, N] natural order
    (point j is column position j N/M).  aux: EF column k's coefficient c is column
    4k + c.  prep_lde / aux_lde (and terminal) may be None when the AIR has none.
    ``selectors``: ``quotient_selectors_device(shape.log_n, shape.log_quotient)`` (cache
    it per shape), computed here when None.  The kernel is generated once per AIR."""
    N, M = 1 << shape.log_lde, 1 << shape.log_quotient
    if not shape.log_n <= shape.log_quotient <= shape.log_lde:
        raise ValueError("quotient domain must lie between the trace and LDE domains")
    s = stream or 0
    main, mcs, mps = matrix_geometry(main_lde, "main_lde", air.main_width, N, layout)
    split = split_of(air)
    if split is not None:
        return _quotient_split(air, split, shape, (main, mcs, mps), prep_lde, aux_lde,
                               public_values, challenges, alpha, terminal, layout, selectors,
                               out, s, block, alloc)
    return _quotient_launch(air, shape, (main, mcs, mps), prep_lde, aux_lde, public_values,
                            challenges, alpha, terminal, layout, selectors, out, s, block, alloc)


def _quotient_split(air, split, shape, geom, prep_lde, aux_lde, public_values, challenges,
                    alpha, terminal, layout, selectors, out, s, block, alloc):
    """The quotient of a slotted AIR whose k slots are copies of one AIR ``slot`` (no
    interactions, no public values) on consecutive column ranges of width ``W``, followed
    by the LogUp constraints, which ``logup`` (the same interactions alone, same batches)
    holds: with U = len(slot.constraints) and K = len(air.constraints), slot j's i-th
    constraint is air's constraint j U + i and is folded with alpha^(K-1-jU-i) =
    alpha^(K-(j+1)U) alpha^(U-1-i), so Q = sum_j alpha^(K-(j+1)U) Q_slot(columns of slot
    j) + Q_logup.  One generated kernel serves every slot and every k."""
    slot, k, W, logup = split
    U, K = len(slot.constraints), len(air.constraints)
    if K != k * U + len(logup.constraints) or air.main_width != k * W or slot.main_width != W:
        raise ValueError(f"{air.name}: device_split does not match the AIR")
    if slot.num_public or slot.prep_width or slot.interactions or prep_lde is not None:
        raise ValueError(f"{air.name}: a slot AIR has no public values, preprocessed columns "
                         "or interactions")
    main, mcs, mps = geom
    M = 1 << shape.log_quotient
    if selectors is None:
        selectors = quotient_selectors_device(shape.log_n, shape.log_quotient, stream=s)
    out = _quotient_launch(logup, shape, geom, None, aux_lde, public_values, challenges, alpha,
                           terminal, layout, selectors, out, s, block, alloc)
    a = ef_scalar(alpha, "alpha").astype(np.uint64).reshape(4, 1)
    part = device_empty((4, M), s, alloc)
    g, b = grid_1d(M, block)
    for j in range(k):
        # slot j's columns: the same strides, the flat view starting at its first column
        view = (main[j * W * mcs:], mcs, mps)
        _quotient_launch(slot, shape, view, None, None, [], {}, alpha, None, layout, selectors,
                         part, s, block, alloc)
        c = AF.ef_pow(a, K - (j + 1) * U).reshape(4).astype(np.uint32)
        _ef_axpy_kernel[g, b, s](out, part, c[0], c[1], c[2], c[3])
    return out


@kernel(f"void({M2}, {M2}, uint32, uint32, uint32, uint32)")
def _ef_axpy_kernel(out, x, c0, c1, c2, c3):
    # out[:, j] += c * x[:, j]  (EF, canonical)
    j = cuda.grid(1)
    if j < out.shape[1]:
        e0, e1, e2, e3 = _ef_mul(c0, c1, c2, c3, x[0, j], x[1, j], x[2, j], x[3, j])
        f0, f1, f2, f3 = _ef_add(out[0, j], out[1, j], out[2, j], out[3, j], e0, e1, e2, e3)
        out[0, j] = f0
        out[1, j] = f1
        out[2, j] = f2
        out[3, j] = f3


def _quotient_launch(air, shape, geom, prep_lde, aux_lde, public_values, challenges, alpha,
                     terminal, layout, selectors, out, s, block, alloc):
    N, M = 1 << shape.log_lde, 1 << shape.log_quotient
    main, mcs, mps = geom
    if air.prep_width:
        if prep_lde is None:
            raise ValueError(f"{air.name}: prep_lde is required (the AIR has preprocessed columns)")
        prep, rcs, rps = matrix_geometry(prep_lde, "prep_lde", air.prep_width, N, layout)
    else:
        prep, rcs, rps = dummy((1,), s), 0, 0
    if air.aux_width:
        if aux_lde is None or terminal is None:
            raise ValueError(f"{air.name}: aux_lde and terminal are required (LogUp)")
        aux, acs, aps = matrix_geometry(aux_lde, "aux_lde", 4 * air.aux_width, N, layout)
    else:
        aux, acs, aps = dummy((1,), s), 0, 0
    gk = generated(air)
    scal = np.zeros(12, np.uint32)
    for name, slot in CHAL_SLOT.items():
        if name in challenges:
            scal[slot:slot + 4] = ef_scalar(challenges[name], name)
    if terminal is not None:
        scal[TERM_SLOT:TERM_SLOT + 4] = ef_scalar(terminal, "terminal")
    K = max(1, len(air.constraints))
    apow = AF.ef_powers(ef_scalar(alpha, "alpha").astype(np.uint64).reshape(4, 1), K)
    if selectors is None:
        selectors = quotient_selectors_device(shape.log_n, shape.log_quotient, stream=s)
    sel, zh = selectors
    if tuple(sel.shape) != (3, M) or tuple(zh.shape) != (2, M >> shape.log_n):
        raise ValueError("selectors: computed for another shape")
    out = _out4(out, M, s, alloc)
    g, b = grid_1d(M, block)
    # scalars, alpha powers and public values enter the kernel in Montgomery form
    gk.quotient[g, b, s](main, mcs, mps, prep, rcs, rps, aux, acs, aps,
                         pv_device(air, public_values, s),
                         cuda.to_device(field.to_mont_host(scal), stream=s),
                         cuda.to_device(field.to_mont_host(np.ascontiguousarray(apow.T).reshape(-1)),
                                        stream=s),
                         sel, zh, M, shape.log_quotient, N // M, M >> shape.log_n,
                         int(layout == "rows"), out)
    return out


def _out4(out, M, s, alloc):
    if out is None:
        return device_empty((4, M), s, alloc)
    out = check_device_array(out, "out", 2)
    if tuple(out.shape) != (4, M):
        raise ValueError(f"out: expected shape {(4, M)}, got {tuple(out.shape)}")
    return out


# ----------------------------------------------------------------------------- precompile

def _counts(disp) -> tuple[int, int]:
    return (sum(getattr(disp, "_cache_hits", {}).values()),
            sum(getattr(disp, "_cache_misses", {}).values()))


def precompile(airs, compile: bool = True, progress=None) -> list[dict]:
    """Generate (or load from the kernel cache) the kernels of ``airs`` and, with
    ``compile`` (the cuda backend; the simulator compiles nothing), compile every device
    kernel a proof launches -- the generated ones and the stage kernels -- for its declared
    signatures: loaded from numba's disk cache when there, else compiled and stored.
    -> one dict per step: name, seconds, how (``generated`` / ``cache`` / ``compiled``).
    ``progress(row)`` is called after each."""
    import time
    from . import devicelib, ptx_check
    rows = []

    def done(row):
        rows.append(row)
        if progress:
            progress(row)
    names = []
    todo = []
    for air in airs:
        todo.append((air, True))
        split = split_of(air)
        if split is not None:       # its quotient: the slot's and the LogUp part's kernels
            todo += [(split[0], False), (split[3], False)]
    for air, want_logup in todo:
        before = dict(kernel_cache.STATS)
        t0 = time.perf_counter()
        gk = generated(air)
        how = "cache" if kernel_cache.STATS["codegen"] == before["codegen"] else "generated"
        done(dict(name=f"source {air.name}", seconds=time.perf_counter() - t0, how=how))
        gq = gk.quotient.py_func if gk.quotient is not None and split_of(air) is None else None
        gl = gk.logup.py_func if (gk.logup is not None and want_logup) else None
        names += [f"steadfast.kernels.constraint_device.generated.{k.__name__}"
                  for k in (gq, gl) if k]
    if not compile:
        return rows
    ptx_check.registered_kernels([m for m in ptx_check.DEVICE_MODULES
                                  if not m.endswith("constraint_device")])
    stage = [q for q, _, _ in devicelib.KERNELS if ".generated." not in q]
    sigs = {q: s for q, _, s in devicelib.KERNELS}
    for q in dict.fromkeys(names + stage):
        disp = devicelib.DISPATCHERS[q]
        for sig in sigs[q]:
            hits, misses = _counts(disp)
            t0 = time.perf_counter()
            disp.compile(sig)
            dt = time.perf_counter() - t0
            h2, m2 = _counts(disp)
            done(dict(name=q.replace("steadfast.kernels.", ""), seconds=dt,
                      how="compiled" if m2 > misses else "cache" if h2 > hits else "in memory"))
    return rows


# ----------------------------------------------------------------------------- PTX check

def register_example_airs(extra=()) -> list:
    """Generate (and so register for kernels.ptx_check) the kernels of representative
    AIRs: Fibonacci (public values, first/last/transition), degree 3 (two parts), the
    LogUp trio adder/range/pairs (multi-batch, preprocessed) and the counter (air/examples),
    then ``extra``: AIRs a caller adds (a machine's tables -- the protocol core imports no
    VM, so a front end passes its own)."""
    from ..air import examples as ex
    airs = [ex.fibonacci_air(), ex.cubic_air(), ex.adder_air(), ex.range_air(8), ex.pairs_air(4),
            ex.counter_air()]
    return [generated(a) for a in airs + list(extra)]


def ptx_examples() -> None:
    """Hook called by kernels.ptx_check after importing this module."""
    register_example_airs()
