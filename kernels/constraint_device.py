"""Device kernels generated from a symbolic AIR: the R2 quotient and the LogUp aux trace.

For each AIR, :func:`generated` walks its straight-line programs (:mod:`air.program`:
one instruction per shared sub-expression, leaves ``main``/``prep``/``aux``/``pv``/
``chal``/``term``/``const``) and emits Python source for two numba.cuda kernels, one
statement per instruction, base values as one uint32 variable and EF values as four:

* ``quotient_<air>``: one thread per point j of the quotient coset g<w_M> (natural
  order); reads every column at j and at the next trace row (j + M/n mod M) straight
  from the LDE matrices -- natural columns (c, N), point j at position j N/M, or the
  committed bit-reversed rows (N, c), point j at row bitrev_M(j) -- evaluates every
  constraint, folds them with alpha (sum_k alpha^(K-1-k) sel_k C_k, the powers passed
  in) and multiplies by 1/Z_H: exactly air.quotient_on_coset, i.e. HostStages.quotient.
* ``logup_<air>``: one thread per trace row; evaluates the interaction program and
  writes every interaction's denominator d = gamma - (bus_id + sum_j beta^(j+1) v_j)
  (EF) and signed multiplicity (sign * m).

The kernels are cached for the process, looked up by ``air.fingerprint()``, and on disk
(:mod:`kernels.kernel_cache`, ``PROVER_KERNEL_CACHE``): a new source is written to the
module file ``<cache>/gen/NAME_DIGEST.py`` (DIGEST: of the source, so AIRs differing only
in preprocessed values share kernels), indexed by the fingerprint, and exec'd from there,
so numba-cuda's disk cache can hold the compiled kernels and a second process neither
generates nor compiles them; with the cache off the filename is
``<steadfast-air:NAME:DIGEST>`` (registered with linecache).  Sources are kept in
:data:`SOURCES`; numba compiles each kernel on its first launch, or ahead of the proof
with :func:`precompile`.  The kernel body computes in Montgomery form (inputs converted
on load, one 32-bit Montgomery reduction per product, outputs converted back).  Each python function is registered in
``kernels.devicelib.KERNELS`` with its PTX signature; :func:`ptx_examples` (called by
``python -m steadfast.kernels.ptx_check``) generates the kernels of :func:`register_example_airs`.
The generated code calls :data:`DFC`, the field functions of :mod:`kernels.field` built
as plain device functions (see there), and is written so that numba compiles it in time
linear in its length (see :class:`_Emitter`).

:func:`aux_build_device` then inverts the denominators (EF Montgomery trick), sums the h
columns per batch and runs the running-sum scan (kernels of :mod:`kernels.stage_device`),
reproducing HostStages.aux_build; :func:`quotient_device` reproduces HostStages.quotient.
"""
from __future__ import annotations

import hashlib
import linecache
import re
import threading

import numpy as np
from numba import cuda

from steadfast.air import field as AF
from .devicelib import DF, device_function, grid_1d, kernel
from . import field, kernel_cache
from .field import P
from .field_device import batch_inverse
from .stage_device import (DEFAULT_BLOCK, MAX_SHARED_BLOCK, SHIFT, bitrev, check_device_array,
                           device_empty, ef_batch_inverse_device, ef_prefix_sum_device,
                           ef_scalar, fetch, matrix_geometry)

__all__ = ["generated", "precompile", "quotient_device", "quotient_selectors_device", "aux_build_device",
           "register_example_airs", "SOURCES", "GeneratedKernels", "DFC"]

#: filename -> generated source, for every AIR generated in this process
SOURCES: dict[str, str] = {}
_BY_FP: dict[tuple, "GeneratedKernels"] = {}     # air.fingerprint() -> kernels
_BY_SRC: dict[str, "GeneratedKernels"] = {}      # source digest -> kernels

#: The field functions of kernels.field (the source DF is built from) as plain CUDA device
#: functions: numba's IR-level ``inline="always"`` (DF) costs ~15x the compile time in
#: kernels of hundreds of field operations; NVVM still inlines every call (the PTX of the
#: generated kernels contains no calls).
DFC = field.build(device_function())
_LOCK = threading.Lock()

_M2 = "uint32[:, ::1]"
_QUOTIENT_SIG = ("void(uint32[::1], int64, int64, uint32[::1], int64, int64, uint32[::1], int64, "
                 f"int64, uint32[::1], uint32[::1], uint32[::1], {_M2}, {_M2}, int64, int64, "
                 f"int64, int64, int64, {_M2})")
_LOGUP_SIG = f"void(uint32[::1], int64, int64, uint32[::1], int64, uint32[::1], uint32[::1], " \
             f"int64, {_M2}, {_M2}, uint32[::1])"
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
    """Straight-line kernel source, written so that numba compiles it in linear time:

    * SSA: every value gets a fresh name (numba re-splits a reassigned name by scanning
      its whole block: quadratic in a big kernel);
    * a redundant guard ``if <guard>: return`` every ``SPLIT`` statements cuts the body
      into small basic blocks (numba's lowering checks every block-local variable against
      its block: also quadratic); LLVM folds the repeated guards away;
    * EF values are 4 names; component-wise results (leaf loads, EF +/- base) are 4
      plain assignments, not a tuple; constants are module globals (no call to type).
    """

    SPLIT = 24

    def __init__(self, guard: str, indent: str = "    "):
        self.guard, self.ind = guard, indent
        self.lines: list[str] = []
        self.consts: dict[str, int] = {}
        self.count = 0
        self.since = 0

    def const(self, v: int) -> str:
        """A field constant, in Montgomery form (as every value in the kernel body)."""
        name = f"_K{int(v)}"
        self.consts[name] = int(v) * (1 << 32) % P
        return name

    def raw(self, v: int) -> str:
        """A plain uint32 constant (a flag value)."""
        name = f"_R{int(v)}"
        self.consts[name] = int(v)
        return name

    def emit(self, stmt: str) -> None:
        """One (possibly compound, multi-line) statement."""
        for line in stmt.split("\n"):
            self.lines.append(self.ind + line)
        self.since += 1
        if self.since >= self.SPLIT:
            self.lines.append(f"{self.ind}if {self.guard}:")
            self.lines.append(f"{self.ind}    return")
            self.since = 0

    def assign(self, base: str, rhs):
        """Bind rhs to fresh names and return them: a str is a base value; a list of 4
        str an EF value given component-wise; ("call", src) a call returning an EF
        4-tuple (EF values come back as a tuple of 4 names)."""
        self.count += 1
        v = f"{base}_{self.count}"                    # never clashes with the fixed locals
        if isinstance(rhs, str):
            self.emit(f"{v} = {rhs}")
            return v
        names = tuple(f"{v}_{c}" for c in range(4))
        if isinstance(rhs, tuple):                    # ("call", "...") -> 4-tuple result
            self.emit(f"{', '.join(names)} = {rhs[1]}")
        else:
            for n, r in zip(names, rhs):
                self.emit(f"{n} = {r}")
        return names

    def program(self, program, leaf) -> list:
        """One statement per instruction; returns the output values' names."""
        is_ef = program.is_ef
        names: list = []
        for op, a, b, payload in program.ops:
            if a < 0:
                rhs = self.const(payload) if op == "const" else leaf(op, payload)
            else:
                rhs = _binary(op, names[a], is_ef[a], names[b] if b >= 0 else None,
                              is_ef[b] if b >= 0 else False)
            names.append(self.assign("v", rhs))
        return [names[o] for o in program.outputs]


def _call(fn: str, *parts) -> tuple:
    """An EF-valued call: ("call", source)."""
    args = ", ".join(", ".join(p) if isinstance(p, tuple) else p for p in parts)
    return ("call", f"{fn}({args})")


def _binary(op, x, xe, y, ye):
    """Source for one interior instruction (mirrors air.program._add/_sub/_mul/neg)."""
    if op == "neg":
        return [f"_neg({c})" for c in x] if xe else f"_neg({x})"
    if op == "add":
        if xe and ye:
            return _call("_ef_add", x, y)
        if xe or ye:
            e, b = (x, y) if xe else (y, x)
            return [f"_add({e[0]}, {b})", e[1], e[2], e[3]]
        return f"_add({x}, {y})"
    if op == "sub":
        if xe and ye:
            return _call("_ef_sub", x, y)
        if xe:
            return [f"_sub({x[0]}, {y})", x[1], x[2], x[3]]
        if ye:
            return [f"_sub({x}, {y[0]})", f"_neg({y[1]})", f"_neg({y[2]})", f"_neg({y[3]})"]
        return f"_sub({x}, {y})"
    if op == "mul":
        if xe and ye:
            return _call("_ef_mmul", x, y)
        if xe or ye:
            e, b = (x, y) if xe else (y, x)
            return _call("_ef_mmul_base", e, b)
        return f"_mmul({x}, {y})"
    raise ValueError(f"unknown op {op!r}")  # pragma: no cover


def _quotient_leaf(op, payload):
    # flat matrices: column j at quotient point q is X[j * Xcs + q * Xps] (the offsets
    # m<nx> = q<nx> * mps etc. are computed once per thread, nx = next row)
    if op in ("main", "prep"):
        j, nx = payload
        m = "m" if op == "main" else "r"
        return f"_tm({op}[{int(j)} * {m}cs + {m}{int(bool(nx))}])"
    if op == "aux":
        j, nx = payload
        return [f"_tm(aux[{4 * int(j) + c} * acs + a{int(bool(nx))}])" for c in range(4)]
    if op == "pv":
        return f"pv[{int(payload)}]"
    if op == "chal":
        return [f"scal[{_CHAL_SLOT[payload] + c}]" for c in range(4)]
    if op == "term":
        return [f"scal[{_TERM_SLOT + c}]" for c in range(4)]
    raise ValueError(f"unknown leaf {op!r}")


def _logup_leaf(op, payload):
    # main is flat with element (column j, row i) at j * ms0 + i * ms1; prep is (k, n)
    if op == "main":
        return f"_tm(main[{int(payload[0])} * ms0 + i * ms1])"
    if op == "prep":
        return f"_tm(prep[{int(payload[0])} * n + i])"
    if op == "pv":
        return f"pv[{int(payload)}]"
    raise ValueError(f"interaction values cannot read {op!r}")


def _quotient_source(air, fname: str):
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
    # sum_k alpha^(K-1-k) C_k per row condition (air.eval.fold_constraints); apow is flat:
    # alpha^e at [4e, 4e + 4)
    for k, (c, val) in enumerate(zip(air.constraints, outs)):
        e = 4 * (K - 1 - k)
        co = tuple(f"apow[{e + j}]" for j in range(4))
        if prog.is_ef[prog.outputs[k]]:
            t = em.assign("t", _call("_ef_mmul", co, val))
        else:
            t = em.assign("t", _call("_ef_mmul_base", co, val))
        g = groups.get(c.when)
        groups[c.when] = t if g is None else em.assign("g", _call("_ef_add", g, t))
    zk = em.assign("zk", "i % zh.shape[1]")
    q = None
    for when, g in groups.items():
        if when != "all":
            if when == "transition":
                sv = em.assign("s", "_tm(sel[2, i])")
            else:
                sv = em.assign("s", f"_mmul(_tm(zh[0, {zk}]), _tm(sel[{_SEL_ROW[when]}, i]))")
            g = em.assign("t", _call("_ef_mmul_base", g, sv))
        q = g if q is None else em.assign("q", _call("_ef_add", q, g))
    if q is None:
        q = em.assign("q", [em.const(0)] * 4)
    q = em.assign("q", _call("_ef_mmul_base", q, f"_tm(zh[1, {zk}])"))
    for c in range(4):
        em.emit(f"out[{c}, i] = _fm({q[c]})")
    return "\n".join(head + em.lines) + "\n", em.consts


def _logup_source(air, fname: str):
    prog = air.interaction_program
    em = _Emitter("il >= rows")
    arity = max(len(it.values) for it in air.interactions)
    # rows r0 .. r0 + rows - 1 of the trace (a chunk bounds the temporaries dens / sm)
    head = [f"def {fname}(main, ms0, ms1, prep, n, pv, bpow, r0, dens, sm, zero_flag):",
            "    # generated from the AIR's interaction program (kernels/constraint_device.py)",
            "    rows = sm.shape[1]",
            "    il = cuda.grid(1)",
            "    if il >= rows:",
            "        return",
            "    i = r0 + il"]
    # bpow (flat): gamma at [0, 4), beta^j at [4j, 4j + 4); loaded once per thread
    bp = [em.assign("b", [f"bpow[{4 * j + c}]" for c in range(4)]) for j in range(arity + 1)]
    outs = em.program(prog, _logup_leaf)
    pos = 0
    zero = em.const(0)
    for t, it in enumerate(air.interactions):
        k = len(it.values)
        # d = gamma - (bus_id + sum_j beta^(j+1) v_j)
        f = (em.const(it.bus_id), zero, zero, zero)
        for j in range(k):
            e = em.assign("e", _call("_ef_mmul_base", bp[j + 1], outs[pos + j]))
            f = em.assign("f", _call("_ef_add", f, e))
        d = em.assign("d", _call("_ef_sub", bp[0], f))
        d = em.assign("d", [f"_fm({x})" for x in d])          # canonical again
        for c in range(4):
            em.emit(f"dens[{t} * rows + il, {c}] = {d[c]}")
        em.emit(f"if {' and '.join(f'{x} == 0' for x in d)}:\n    zero_flag[0] = {em.raw(1)}")
        m = outs[pos + k]
        em.emit(f"sm[{t}, il] = _fm({m if it.sign > 0 else f'_neg({m})'})")
        pos += k + 1
    return "\n".join(head + em.lines) + "\n", em.consts


def _ident(name: str) -> str:
    s = re.sub(r"[^0-9A-Za-z_]", "_", name)
    return s if s and not s[0].isdigit() else "_" + s


def _split_of(air):
    """``air.device_split()`` -- (slot AIR, k, slot width, LogUp-only AIR) of an AIR whose
    device quotient comes from those two AIRs' kernels (see _quotient_split) -- or None."""
    split = getattr(air, "device_split", None)
    return None if split is None else split()


def _module_source(air) -> tuple[str, str]:
    """(name base, module source) of ``air``'s kernels: the constants as module globals,
    then the quotient kernel and (with interactions) the LogUp kernel."""
    kernel_cache.count("codegen")
    has_quotient = _split_of(air) is None
    src, consts = _quotient_source(air, "quotient_kernel") if has_quotient else ("", {})
    if air.interactions:
        lsrc, lconsts = _logup_source(air, "logup_kernel")
        src += "\n\n" + lsrc
        consts.update(lconsts)
    digest = hashlib.sha256((src + repr(sorted(consts.items()))).encode()).hexdigest()[:16]
    base = f"{_ident(air.name)}_{digest}"
    src = src.replace("def quotient_kernel(", f"def quotient_{base}(", 1)
    src = src.replace("def logup_kernel(", f"def logup_{base}(", 1)
    head = [f'"""Device kernels of AIR {air.name!r}, generated by '
            'steadfast.kernels.constraint_device (do not edit)."""',
            f"AIR_NAME = {air.name!r}", f"KERNEL_BASE = {base!r}",
            f"HAS_LOGUP = {bool(air.interactions)}", f"HAS_QUOTIENT = {has_quotient}"]
    head += [f"{k} = _u32({int(v)})" for k, v in sorted(consts.items())]
    return base, "\n".join(head) + "\n\n\n" + src


def _exec_module(src: str, filename: str) -> GeneratedKernels:
    """Exec a generated module (``filename``: its real path in the kernel cache, or a
    ``<steadfast-air:...>`` pseudo name registered with linecache) and declare its kernels."""
    glb = {"__name__": "steadfast.kernels.constraint_device.generated", "__file__": filename,
           "cuda": cuda, "_u32": np.uint32, "_add": DFC.add, "_sub": DFC.sub, "_neg": DFC.neg,
           "_mmul": DFC.mont_mul, "_ef_add": DFC.ef_add, "_ef_sub": DFC.ef_sub,
           "_ef_mmul": DFC.mont_ef_mul, "_ef_mmul_base": DFC.mont_ef_mul_base,
           "_tm": DFC.to_mont, "_fm": DFC.from_mont, "_bitrev": bitrev}
    exec(compile(src, filename, "exec"), glb)
    base = glb["KERNEL_BASE"]
    # a split AIR (``air.device_split``: its quotient comes from two smaller AIRs' kernels,
    # see quotient_device) has no quotient kernel of its own
    quot = kernel(_QUOTIENT_SIG)(glb[f"quotient_{base}"]) if glb.get("HAS_QUOTIENT", True) else None
    logup = kernel(_LOGUP_SIG)(glb[f"logup_{base}"]) if glb["HAS_LOGUP"] else None
    SOURCES[filename] = src
    gk = GeneratedKernels(glb["AIR_NAME"], filename, src, quot, logup)
    gk.base = base
    return gk


def generated(air) -> GeneratedKernels:
    """The generated kernels of ``air``: looked up by ``air.fingerprint()``, in this process
    and then in the on-disk kernel cache (:mod:`kernels.kernel_cache`: the module file
    named by the fingerprint's index entry, hash-checked; no code generation on a hit).
    On a miss the source is generated and named by its own digest, so AIRs that differ
    only in their preprocessed values (e.g. the VM's PROGRAM table, one ROM per block: the
    fingerprint changes, the kernel does not) share one module file and compiled kernel."""
    fpk = tuple(air.fingerprint())
    hit = _BY_FP.get(fpk)
    if hit is not None:
        return hit
    with _LOCK:
        hit = _BY_FP.get(fpk)
        if hit is not None:
            return hit
        gk = None
        got = kernel_cache.load_source(fpk)
        if got is not None:
            src, path = got
            gk = _BY_SRC.get(path.stem)
            if gk is None:
                try:
                    gk = _exec_module(src, str(path))
                except Exception:  # noqa: BLE001 - a foreign/broken file: regenerate it
                    kernel_cache.count("gen_rebuilt")
                    gk = None
        if gk is None:
            base, src = _module_source(air)
            gk = _BY_SRC.get(base)
            if gk is None:
                path = kernel_cache.store_source(fpk, base, src)
                if path is None:               # cache disabled or not writable
                    filename = f"<steadfast-air:{air.name}:{base.rsplit('_', 1)[-1]}>"
                    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
                else:
                    filename = str(path)
                gk = _exec_module(src, filename)
            else:
                kernel_cache.store_source(fpk, base, src)
        _BY_SRC[gk.base] = gk
        _BY_FP[fpk] = gk
        return gk


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
        split = _split_of(air)
        if split is not None:       # its quotient: the slot's and the LogUp part's kernels
            todo += [(split[0], False), (split[3], False)]
    for air, want_logup in todo:
        before = dict(kernel_cache.STATS)
        t0 = time.perf_counter()
        gk = generated(air)
        how = "cache" if kernel_cache.STATS["codegen"] == before["codegen"] else "generated"
        done(dict(name=f"source {air.name}", seconds=time.perf_counter() - t0, how=how))
        gq = gk.quotient.py_func if gk.quotient is not None and _split_of(air) is None else None
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


# ----------------------------------------------------------------------------- wrappers

_ef_add, _ef_sub, _ef_mul_base, _ef_mul = DF.ef_add, DF.ef_sub, DF.ef_mul_base, DF.ef_mul
_mulp, _subp, _powp = DF.mul, DF.sub, DF.pow_


@kernel(f"void(uint32, uint32, uint32, int64, {_M2}, {_M2})")
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


def _dummy(shape, stream):
    return cuda.device_array(shape, dtype=np.uint32, stream=stream)


def _pv_device(air, public_values, stream):
    pv = np.asarray([int(v) for v in public_values], dtype=np.int64)
    if pv.shape != (air.num_public,) or np.any(pv < 0) or np.any(pv >= P):
        raise ValueError(f"{air.name}: expected {air.num_public} canonical public values, "
                         f"got {list(public_values)}")
    if pv.size == 0:
        return _dummy((1,), stream)
    return cuda.to_device(field.to_mont_host(pv), stream=stream)     # Montgomery form


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
    split = _split_of(air)
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


@kernel(f"void({_M2}, {_M2}, uint32, uint32, uint32, uint32)")
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
    # scalars, alpha powers and public values enter the kernel in Montgomery form
    gk.quotient[g, b, s](main, mcs, mps, prep, rcs, rps, aux, acs, aps,
                         _pv_device(air, public_values, s),
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


@kernel(f"void({_M2}, {_M2}, int64[::1], int64, {_M2}, {_M2}, int64)")
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


@kernel(f"void({_M2}, {_M2}, int64, int64, uint32, uint32[::1], uint32[::1])")
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
    # batches are consecutive runs of interactions in declaration order
    bstart = np.concatenate([[0], np.cumsum([len(bt) for bt in air.lookup_batches])])
    a = B                                       # h_0 .. h_(B-2), acc
    aux = device_empty((4 * a, n) if columns else (n, 4 * a), s, alloc)
    tot = cuda.device_array((n, 4), dtype=np.uint32, stream=s)
    flag = cuda.to_device(np.zeros(1, np.uint32), stream=s)
    d_bpow = cuda.to_device(field.to_mont_host(bpow.reshape(-1)), stream=s)   # Montgomery
    d_bstart = cuda.to_device(bstart.astype(np.int64), stream=s)
    d_pv = _pv_device(air, public_values, s)
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


# ----------------------------------------------------------------------------- PTX check

def register_example_airs(vm: bool = True) -> list:
    """Generate (and so register for kernels.ptx_check) the kernels of representative
    AIRs: Fibonacci (public values, first/last/transition), degree 3 (two parts), the
    LogUp trio adder/range/pairs (multi-batch, preprocessed), and all five tables of the
    reference VM (the kernels a block proof runs; PROGRAM's kernel does not depend on the
    ROM's values, which are preprocessed data) at the default log_blowup 2, where CPU
    and MEMORY from k = 4 slots batch their LogUp to degree 5 (MEMORY k = 2 and CPU at
    log_blowup 1: degree 3; air/builder.py choose_logup_degree)."""
    from steadfast.air import examples as ex
    airs = [ex.fibonacci_air(), ex.cubic_air(), ex.adder_air(), ex.range_air(8), ex.pairs_air(4)]
    if vm:
        from steadfast.vm.airs import block_airs
        airs.extend(block_airs(np.zeros((1, 4), dtype=np.uint32)))
        airs.append(block_airs(np.zeros((1, 4), dtype=np.uint32), {"memory": 2})[2])  # slots
        airs.append(block_airs(np.zeros((1, 4), dtype=np.uint32), {"memory": 4})[2])  # degree 5
        airs.append(block_airs(np.zeros((1, 4), dtype=np.uint32), log_blowup=1)[0])   # degree 3
        # POSEIDON2's quotient on the device: one slot's kernel and the LogUp part's
        # (k = 2's; the slot kernel is every k's); the whole AIR generates only its logup
        p2 = block_airs(np.zeros((1, 4), dtype=np.uint32), {"poseidon2": 2})[4]
        airs += [p2, _split_of(p2)[0], _split_of(p2)[3]]
        airs.append(_split_of(block_airs(np.zeros((1, 4), dtype=np.uint32))[4])[3])
    return [generated(a) for a in airs]


def ptx_examples() -> None:
    """Hook called by kernels.ptx_check after importing this module."""
    register_example_airs()


