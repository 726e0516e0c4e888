"""Device kernels generated from a symbolic AIR: the R2 quotient and the LogUp aux trace.

For each AIR, :func:`generated` walks its straight-line programs (:mod:`air.program`:
one instruction per shared sub-expression, leaves ``main``/``prep``/``aux``/``pv``/
``chal``/``term``/``const``) and emits Python source for two numba.cuda kernels, one
statement per instruction, base values as one uint32 variable and EF values as four:

* ``quotient_<air>``: one thread per point j of the quotient coset g<w_M>; reads every
  column at j and at the next trace row (j + M/n mod M) straight from the natural-order
  LDE matrices (point j is LDE position j * N/M), evaluates every constraint, folds them
  with alpha (sum_k alpha^(K-1-k) sel_k C_k, powers passed in) and multiplies by 1/Z_H:
  exactly air.quotient_on_coset, i.e. HostStages.quotient.
* ``logup_<air>``: one thread per trace row; evaluates the interaction program and
  writes every interaction's denominator d = gamma - (bus_id + sum_j beta^(j+1) v_j)
  (EF) and signed multiplicity (sign * m).

The source is exec'd once per AIR with the filename ``<steadfast-air:NAME:FINGERPRINT>``
(registered with linecache), kept in :data:`SOURCES`, and the kernels are cached for the
process in :data:`_CACHE` keyed by ``air.fingerprint()``; each python function is also
registered in ``kernels.devicelib.KERNELS`` with its PTX signature, so ``python -m
kernels.ptx_check`` compiles the kernels of :func:`register_example_airs`.

The LogUp wrapper :func:`aux_build_device` then inverts the denominators (EF Montgomery
trick), sums the h columns per batch and runs the running-sum scan (kernels in
:mod:`kernels.stage_device`), reproducing HostStages.aux_build.
"""
from __future__ import annotations

import linecache
import re
import threading

import numpy as np
from numba import cuda

from air import field as AF
from .devicelib import DF, KERNELS, grid_1d, kernel
from .field import P
from .stage_device import (DEFAULT_BLOCK, MAX_SHARED_BLOCK, bitrev, check_device_array,
                           device_empty, ef_batch_inverse_device, ef_prefix_sum_device,
                           ef_scalar, fetch, matrix_geometry, quotient_selectors_device)

__all__ = ["generated", "quotient_device", "aux_build_device", "register_example_airs",
           "SOURCES", "GeneratedKernels"]

#: filename -> generated source, for every AIR generated in this process
SOURCES: dict[str, str] = {}
_CACHE: dict[tuple, "GeneratedKernels"] = {}
_LOCK = threading.Lock()

_M2 = "uint32[:, ::1]"
_QUOTIENT_SIG = ("void(uint32[::1], int64, int64, uint32[::1], int64, int64, uint32[::1], int64, "
                 f"int64, uint32[::1], uint32[::1], {_M2}, {_M2}, {_M2}, int64, int64, int64, "
                 f"int64, int64, {_M2})")
_LOGUP_SIG = f"void(uint32[::1], int64, int64, uint32[::1], uint32[::1], {_M2}, {_M2}, {_M2}, " \
             f"uint32[::1])"
_CHAL_SLOT = {"logup_beta": 0, "logup_gamma": 4}
_TERM_SLOT = 8
_SEL_ROW = {"first": 0, "last": 1}


class GeneratedKernels:
    """The generated kernels of one AIR (``quotient``, ``logup`` or None without
    interactions) with their source and exec filename."""

    def __init__(self, name, filename, source, quotient, logup):
        self.name, self.filename, self.source = name, filename, source
        self.quotient, self.logup = quotient, logup


# ----------------------------------------------------------------------------- codegen

class _Emitter:
    """Straight-line source in SSA form: every value gets a fresh name (numba's SSA
    reconstruction of a reassigned name scans its whole block, quadratic in a big
    kernel), and a redundant guard ``if <guard>: return`` every ``SPLIT`` statements
    cuts the body into small basic blocks (numba's lowering checks block-local
    variables per block, also quadratic in the block size).  LLVM folds the repeated
    guards away."""

    SPLIT = 24

    def __init__(self, guard: str, indent: str = "    "):
        self.guard, self.ind = guard, indent
        self.lines: list[str] = []
        self.count = 0
        self.since = 0

    def fresh(self, base: str, ef: bool = False):
        self.count += 1
        v = f"{base}_{self.count}"                    # never clashes with the fixed locals
        return tuple(f"{v}_{c}" for c in range(4)) if ef else v

    def emit(self, stmt: str) -> None:
        """One (possibly compound, multi-line) statement."""
        for line in stmt.split("\n"):
            self.lines.append(self.ind + line)
        self.since += 1
        if self.since >= self.SPLIT:
            self.lines.append(f"{self.ind}if {self.guard}:")
            self.lines.append(f"{self.ind}    return")
            self.since = 0

    def assign(self, base: str, ef: bool, rhs: str):
        """Emit ``<fresh> = rhs``; returns the new name (a 4-tuple of names for EF)."""
        v = self.fresh(base, ef)
        self.emit(f"{', '.join(v) if ef else v} = {rhs}")
        return v

    def program(self, program, leaf) -> list:
        """One statement per instruction; returns the output values' names."""
        is_ef = program.is_ef
        names: list = []
        for i, (op, a, b, payload) in enumerate(program.ops):
            if a < 0:
                rhs = f"_u32({int(payload)})" if op == "const" else leaf(op, payload)
            else:
                rhs = _binary(op, names[a], is_ef[a], names[b] if b >= 0 else None,
                              is_ef[b] if b >= 0 else False)
            names.append(self.assign("v", is_ef[i], rhs))
        return [names[o] for o in program.outputs]


def _binary(op, x, xe, y, ye) -> str:
    """Source for one interior instruction (mirrors air.program._add/_sub/_mul)."""
    X = ", ".join(x) if xe else x
    Y = (", ".join(y) if ye else y) if y is not None else None
    if op == "neg":
        return f"_neg({x[0]}), _neg({x[1]}), _neg({x[2]}), _neg({x[3]})" if xe else f"_neg({x})"
    if op == "add":
        if xe and ye:
            return f"_ef_add({X}, {Y})"
        if xe or ye:
            e, s = (x, y) if xe else (y, x)
            return f"_add({e[0]}, {s}), {e[1]}, {e[2]}, {e[3]}"
        return f"_add({x}, {y})"
    if op == "sub":
        if xe and ye:
            return f"_ef_sub({X}, {Y})"
        if xe:
            return f"_sub({x[0]}, {y}), {x[1]}, {x[2]}, {x[3]}"
        if ye:
            return f"_sub({x}, {y[0]}), _neg({y[1]}), _neg({y[2]}), _neg({y[3]})"
        return f"_sub({x}, {y})"
    if op == "mul":
        if xe and ye:
            return f"_ef_mul({X}, {Y})"
        if xe or ye:
            e, s = (x, y) if xe else (y, x)
            return f"_ef_mul_base({', '.join(e)}, {s})"
        return f"_mul({x}, {y})"
    raise ValueError(f"unknown op {op!r}")  # pragma: no cover


def _quotient_leaf(op, payload):
    # flat matrices: column j at position q is X[j * Xcs + q * Xps]; o<nx> = q<nx> * Xps
    if op in ("main", "prep"):
        j, nx = payload
        m = "m" if op == "main" else "r"
        return f"{op}[{int(j)} * {m}cs + {m}{int(bool(nx))}]"
    if op == "aux":
        j, nx = payload
        return ", ".join(f"aux[{4 * int(j) + c} * acs + a{int(bool(nx))}]" for c in range(4))
    if op == "pv":
        return f"pv[{int(payload)}]"
    if op == "chal":
        s = _CHAL_SLOT[payload]
        return ", ".join(f"scal[{s + c}]" for c in range(4))
    if op == "term":
        return ", ".join(f"scal[{_TERM_SLOT + c}]" for c in range(4))
    raise ValueError(f"unknown leaf {op!r}")


def _logup_leaf(op, payload):
    # main / prep are flat views: element (column j, row i) at j * s_col + i * s_row
    if op == "main":
        return f"main[{int(payload[0])} * ms0 + i * ms1]"
    if op == "prep":
        return f"prep[{int(payload[0])} * n + i]"
    if op == "pv":
        return f"pv[{int(payload)}]"
    raise ValueError(f"interaction values cannot read {op!r}")


def _quotient_source(air, fname: str) -> str:
    prog = air.constraint_program
    em = _Emitter("i >= M")
    head = [f"def {fname}(main, mcs, mps, prep, rcs, rps, aux, acs, aps, pv, scal, apow, sel, "
            "zh, M, log_m, stride, nxt, brev, out):",
            "    # generated from the AIR's constraint program (kernels/constraint_device.py)",
            "    i = cuda.grid(1)",
            "    if i >= M:",
            "        return",
            "    i1 = (i + nxt) % M",
            "    if brev:",
            "        q0 = _bitrev(i, log_m)",
            "        q1 = _bitrev(i1, log_m)",
            "    else:",
            "        q0 = i * stride",
            "        q1 = i1 * stride",
            "    m0 = q0 * mps",
            "    m1 = q1 * mps",
            "    r0 = q0 * rps",
            "    r1 = q1 * rps",
            "    a0 = q0 * aps",
            "    a1 = q1 * aps"]
    outs = em.program(prog, _quotient_leaf)
    K = len(air.constraints)
    groups: dict[str, tuple] = {}
    # N = sum_k alpha^(K-1-k) C_k, accumulated per row condition (air.eval.fold_constraints)
    for k, (c, val) in enumerate(zip(air.constraints, outs)):
        a = K - 1 - k
        co = em.assign("c", True, ", ".join(f"apow[{a}, {j}]" for j in range(4)))
        if prog.is_ef[prog.outputs[k]]:
            t = em.assign("t", True, f"_ef_mul({', '.join(co)}, {', '.join(val)})")
        else:
            t = em.assign("t", True, f"_ef_mul_base({', '.join(co)}, {val})")
        if c.when in groups:
            g = groups[c.when]
            groups[c.when] = em.assign("g", True, f"_ef_add({', '.join(g)}, {', '.join(t)})")
        else:
            groups[c.when] = t
    zk = em.assign("zk", False, "i % zh.shape[1]")
    q = em.assign("q", True, "_u32(0), _u32(0), _u32(0), _u32(0)")
    for when, g in groups.items():
        if when != "all":
            if when == "transition":
                sv = em.assign("s", False, "sel[2, i]")
            else:
                sv = em.assign("s", False, f"_mul(zh[0, {zk}], sel[{_SEL_ROW[when]}, i])")
            g = em.assign("t", True, f"_ef_mul_base({', '.join(g)}, {sv})")
        q = em.assign("q", True, f"_ef_add({', '.join(q)}, {', '.join(g)})")
    q = em.assign("q", True, f"_ef_mul_base({', '.join(q)}, zh[1, {zk}])")
    for c in range(4):
        em.emit(f"out[{c}, i] = {q[c]}")
    return "\n".join(head + em.lines) + "\n"


def _logup_source(air, fname: str) -> str:
    prog = air.interaction_program
    em = _Emitter("i >= n")
    head = [f"def {fname}(main, ms0, ms1, prep, pv, bpow, dens, sm, zero_flag):",
            "    # generated from the AIR's interaction program (kernels/constraint_device.py)",
            "    n = sm.shape[1]",
            "    i = cuda.grid(1)",
            "    if i >= n:",
            "        return"]
    outs = em.program(prog, _logup_leaf)
    pos = 0
    for t, it in enumerate(air.interactions):
        k = len(it.values)
        # d = gamma - (bus_id + sum_j beta^(j+1) v_j);  bpow[0] = gamma, bpow[j] = beta^j
        f = em.assign("f", True, f"_u32({it.bus_id}), _u32(0), _u32(0), _u32(0)")
        for j in range(k):
            bj = ", ".join(f"bpow[{j + 1}, {c}]" for c in range(4))
            e = em.assign("e", True, f"_ef_mul_base({bj}, {outs[pos + j]})")
            f = em.assign("f", True, f"_ef_add({', '.join(f)}, {', '.join(e)})")
        g = ", ".join(f"bpow[0, {c}]" for c in range(4))
        d = em.assign("d", True, f"_ef_sub({g}, {', '.join(f)})")
        for c in range(4):
            em.emit(f"dens[{t} * n + i, {c}] = {d[c]}")
        em.emit(f"if {' and '.join(f'{x} == 0' for x in d)}:\n    zero_flag[0] = _u32(1)")
        m = outs[pos + k]
        em.emit(f"sm[{t}, i] = {m if it.sign > 0 else f'_neg({m})'}")
        pos += k + 1
    return "\n".join(head + em.lines) + "\n"


def _ident(name: str) -> str:
    s = re.sub(r"[^0-9A-Za-z_]", "_", name)
    return s if s and not s[0].isdigit() else "_" + s


def generated(air) -> GeneratedKernels:
    """The generated kernels of ``air`` (built on first use, then cached by fingerprint)."""
    key = tuple(air.fingerprint())
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
        fp = "".join(f"{x:04x}" for x in key)[:16]
        base = f"{_ident(air.name)}_{fp}"
        qname, lname = f"quotient_{base}", f"logup_{base}"
        src = _quotient_source(air, qname)
        if air.interactions:
            src += "\n\n" + _logup_source(air, lname)
        filename = f"<steadfast-air:{air.name}:{fp}>"
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        SOURCES[filename] = src
        glb = {"__name__": "kernels.constraint_device.generated", "cuda": cuda, "_u32": np.uint32,
               "_add": DF.add, "_sub": DF.sub, "_neg": DF.neg, "_mul": DF.mul,
               "_ef_add": DF.ef_add, "_ef_sub": DF.ef_sub, "_ef_mul": DF.ef_mul,
               "_ef_mul_base": DF.ef_mul_base, "_bitrev": bitrev}
        exec(compile(src, filename, "exec"), glb)
        quot = kernel(_QUOTIENT_SIG)(glb[qname])
        logup = kernel(_LOGUP_SIG)(glb[lname]) if air.interactions else None
        gk = GeneratedKernels(air.name, filename, src, quot, logup)
        _CACHE[key] = gk
        return gk


# ----------------------------------------------------------------------------- wrappers

_ef_add, _ef_mul_base = DF.ef_add, DF.ef_mul_base


def _dummy(shape, stream):
    return cuda.device_array(shape, dtype=np.uint32, stream=stream)


def _pv_device(air, public_values, stream):
    pv = np.asarray([int(v) for v in public_values], dtype=np.int64)
    if pv.shape != (air.num_public,) or np.any(pv < 0) or np.any(pv >= P):
        raise ValueError(f"{air.name}: expected {air.num_public} canonical public values, "
                         f"got {list(public_values)}")
    if pv.size == 0:
        return _dummy((1,), stream)
    return cuda.to_device(pv.astype(np.uint32), stream=stream)


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
    if air.prep_width:
        if prep_lde is None:
            raise ValueError(f"{air.name}: prep_lde is required (the AIR has preprocessed columns)")
        prep, rcs, rps = matrix_geometry(prep_lde, "prep_lde", air.prep_width, N, layout)
    else:
        prep, rcs, rps = _dummy((1,), s), 0, 0
    if air.aux_width:
        if aux_lde is None or terminal is None:
            raise ValueError(f"{air.name}: aux_lde and terminal are required (LogUp)")
        aux, acs, aps = matrix_geometry(aux_lde, "aux_lde", 4 * air.aux_width, N, layout)
    else:
        aux, acs, aps = _dummy((1,), s), 0, 0
    gk = generated(air)
    scal = np.zeros(12, np.uint32)
    for name, slot in _CHAL_SLOT.items():
        if name in challenges:
            scal[slot:slot + 4] = ef_scalar(challenges[name], name)
    if terminal is not None:
        scal[_TERM_SLOT:_TERM_SLOT + 4] = ef_scalar(terminal, "terminal")
    K = max(1, len(air.constraints))
    apow = AF.ef_powers(ef_scalar(alpha, "alpha").astype(np.uint64).reshape(4, 1), K)
    if selectors is None:
        selectors = quotient_selectors_device(shape.log_n, shape.log_quotient, stream=s)
    sel, zh = selectors
    if tuple(sel.shape) != (3, M) or tuple(zh.shape) != (2, M >> shape.log_n):
        raise ValueError("selectors: computed for another shape")
    out = _out4(out, M, s, alloc)
    g, b = grid_1d(M, block)
    gk.quotient[g, b, s](main, mcs, mps, prep, rcs, rps, aux, acs, aps,
                         _pv_device(air, public_values, s), cuda.to_device(scal, stream=s),
                         cuda.to_device(np.ascontiguousarray(apow.T.astype(np.uint32)), stream=s),
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


@kernel(f"void({_M2}, {_M2}, int64[::1], {_M2}, {_M2}, int64)")
def _logup_h_kernel(dinv, sm, bstart, aux, tot, transposed):
    # row i: h_k = sum_{t in batch k} sm[t, i] / d_t[i]; tot[i] = sum_k h_k
    i = cuda.grid(1)
    n = sm.shape[1]
    if i >= n:
        return
    s0, s1, s2, s3 = np.uint32(0), np.uint32(0), np.uint32(0), np.uint32(0)
    for k in range(bstart.shape[0] - 1):
        h0, h1, h2, h3 = np.uint32(0), np.uint32(0), np.uint32(0), np.uint32(0)
        for t in range(bstart[k], bstart[k + 1]):
            r = t * n + i
            e0, e1, e2, e3 = _ef_mul_base(dinv[r, 0], dinv[r, 1], dinv[r, 2], dinv[r, 3], sm[t, i])
            h0, h1, h2, h3 = _ef_add(h0, h1, h2, h3, e0, e1, e2, e3)
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


@kernel(f"void({_M2}, {_M2}, int64, int64, uint32[::1], uint32[::1])")
def _logup_place_kernel(acc, aux, col0, transposed, zero_flag, fin):
    # acc column into the aux trace; the last row's acc (terminal) and the zero flag -> fin
    i = cuda.grid(1)
    n = acc.shape[0]
    if i < n:
        for c in range(4):
            if transposed:
                aux[col0 + c, i] = acc[i, c]
            else:
                aux[i, col0 + c] = acc[i, c]
        if i == n - 1:
            for c in range(4):
                fin[c] = acc[i, c]
            fin[4] = zero_flag[0]


def aux_build_device(air, shape, main, public_values, challenges: dict, prep=None,
                     layout: str = "cols", columns: bool = False, stream=None,
                     block: int = DEFAULT_BLOCK, scan_block: int = MAX_SHARED_BLOCK, alloc=None):
    """R1 LogUp (HostStages.aux_build) on the device.

    ``main``: the main trace on H as device uint32[w, n] (``layout="cols"``, the column
    layout of the LDE) or uint32[n, w] (``layout="rows"``, the trace as given).  ``prep``:
    device uint32[k, n] preprocessed columns (uploaded from ``air.preprocessed`` when
    None).  Returns (aux device uint32[n, 4a] -- or uint32[4a, n] with ``columns=True`` --,
    terminal host uint32[4]); EF column k is base columns 4k..4k+3 (h_0 .. h_(B-1), acc).
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
        prep_flat = _dummy((1,), s)
    gk = generated(air)
    beta = ef_scalar(challenges["logup_beta"], "logup_beta").astype(np.uint64).reshape(4, 1)
    gamma = ef_scalar(challenges["logup_gamma"], "logup_gamma")
    arity = max(len(it.values) for it in air.interactions)
    bpow = np.empty((arity + 1, 4), np.uint32)          # gamma, beta, beta^2, ...
    bpow[0] = gamma
    bpow[1:] = AF.ef_mul(AF.ef_powers(beta, arity), beta).T
    T = len(air.interactions)
    B = len(air.lookup_batches)
    dens = cuda.device_array((T * n, 4), dtype=np.uint32, stream=s)
    sm = cuda.device_array((T, n), dtype=np.uint32, stream=s)
    flag = cuda.to_device(np.zeros(1, np.uint32), stream=s)
    g, b = grid_1d(n, block)
    gk.logup[g, b, s](main.reshape(w * n), ms0, ms1, prep_flat,
                      _pv_device(air, public_values, s), cuda.to_device(bpow, stream=s),
                      dens, sm, flag)
    dinv = ef_batch_inverse_device(dens, zero_flag=flag, stream=s, block=block)
    # batches are consecutive runs of interactions in declaration order
    sizes = [len(bt) for bt in air.lookup_batches]
    bstart = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    a = B + 1
    aux = device_empty((4 * a, n) if columns else (n, 4 * a), s, alloc)
    tot = cuda.device_array((n, 4), dtype=np.uint32, stream=s)
    _logup_h_kernel[g, b, s](dinv, sm, cuda.to_device(bstart, stream=s), aux, tot, int(columns))
    ef_prefix_sum_device(tot, out=tot, stream=s, block=scan_block)
    fin = cuda.device_array(5, dtype=np.uint32, stream=s)
    _logup_place_kernel[g, b, s](tot, aux, 4 * B, int(columns), flag, fin)
    host = fetch(fin, stream)
    if host[4]:
        raise ValueError(f"{air.name}: a LogUp denominator vanished (resample: "
                         "the challenges hit a tuple's fingerprint)")
    return aux, host[:4].copy()


# ----------------------------------------------------------------------------- PTX check

def register_example_airs(vm: bool = True) -> list:
    """Generate (and so register for kernels.ptx_check) the kernels of representative
    AIRs: Fibonacci (public values, first/last/transition), degree 3 (two parts), the
    LogUp trio adder/range/pairs (multi-batch, preprocessed), and the VM MEMORY table."""
    from air import examples as ex
    airs = [ex.fibonacci_air(), ex.cubic_air(), ex.adder_air(), ex.range_air(8), ex.pairs_air(4)]
    if vm:
        from vm.airs import build_memory
        airs.append(build_memory())
    return [generated(a) for a in airs]


def ptx_examples() -> None:
    """Hook called by kernels.ptx_check after importing this module."""
    register_example_airs()


_ = KERNELS  # the registry the generated kernels are added to (via devicelib.kernel)
