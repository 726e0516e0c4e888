"""Host twin of the R2 quotient kernel: an AIR's constraint program run by one compiled CPU
kernel, block of points by block of points, on every core.

``HostStages.quotient``'s reference interprets the AIR's straight-line program
(:mod:`air.program`) with one numpy operation per instruction per 2^14-point chunk; the
device backend runs a per-AIR generated CUDA kernel (:mod:`kernels.constraint_device`).
On the CPU a per-AIR generated ``njit`` kernel (the device body with ``prange`` over the
points) was built first and is **not** used: numba/LLVM compile such a straight-line
body in super-linear time (measured: the CPU table's 1,900-statement kernel 82 CPU-s,
POSEIDON2's 4,200 statements over 10 minutes), far more than a proof.  Instead:

* :func:`encode` turns a program into an instruction table (``int64[ops, 4]``: opcode,
  two operand slots / leaf arguments, destination slot), the opcode already specialised
  on the operands' base/EF kinds, and assigns value slots by liveness
  (``Program.last_use``), so a few dozen slots hold the live values -- never writing an
  instruction's result into an operand's slot (numba's own loops, which the instructions
  were until the lanes below, ran scalar behind LLVM's runtime overlap check when one
  did: 2.9x slower);
* :func:`_quotient_kernel` (compiled once for every AIR, numba ``cache=True``) walks the
  table for a block of ``B`` points at a time: every arithmetic instruction and FOLD is a
  loop of ``<16 x i32>`` vectors over the block (kernels/constraint_lanes.py: explicit
  LLVM IR, Montgomery form, the extension-field product summing its centred products
  before one reduction a coefficient; 1.7-1.9x numba's 64-bit-lane loops on the RV32
  tables, and half their compile time), the loads from the LDE columns vectors too;
  the blocks run on numba's thread count as nogil threads (:func:`_run`; a ``prange``
  around the walk compiled several times slower for the same speed).  After the program
  it folds the constraint values exactly as :func:`air.eval.fold_constraints` / ``quotient_on_coset``:
  sum_k alpha^(K-1-k) sel_k C_k, times 1/Z_H.

The result is bit-identical to the interpreter (field arithmetic is exact; Montgomery
form is internal, converted on load and back on store) and generic over the program:
every leaf kind (``main``/``prep``/``aux`` at the row or the next row, ``pv``, ``chal``,
``term``, ``const``), every op the program has (add/sub/mul/neg over base and EF),
row conditions all/first/last/transition; next row = (i + M/n) mod M as the numpy path.

``HostStages.quotient`` uses it unless ``PROVER_HOST_QUOTIENT=numpy`` (docs/diagnostics.md)
or its ``compiled=False`` argument selects the interpreter.

:func:`logup_h_host` is the same for ``HostStages.aux_build``'s h columns:
:func:`_logup_h_kernel` over blocks of trace rows (threads as above, the trace read in place,
row-major, no transposed copy): the interaction program through the same block kernel
(outputs stored into the block's scratch instead of folded), then every interaction's fingerprint
and denominator vectorised across the block's rows in Montgomery form, the inverses by
Montgomery's trick (prefix products over the interactions per row, then over the block's
rows: one EF inversion per block of LOGUP_BLOCK rows x T interactions, ~3 EF products a
fraction), the signed multiplicities summed per lookup batch (the accumulator stays
numpy, in aux_build).  A vanishing denominator sets a flag -> ValueError.
"""
from __future__ import annotations

import os
import threading

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from ..air import eval as air_eval
from ..air import field as AF
from ..air.kernel_program import kernel_program
from . import constraint_lanes as CL
from . import field, host_pool, hostlib
from .constraint_lanes import LANES
from .field import P
from .logup_block import logup_block

__all__ = ["quotient_host", "logup_h_host", "encode", "Encoded", "host_selectors", "compiled_quotient_enabled",
           "ENV", "BLOCK", "OPCODE_NAMES"]

#: the switch between this kernel (default) and the numpy interpreter in HostStages.quotient
ENV = "PROVER_HOST_QUOTIENT"
#: points per block (every instruction is a loop over one block; slots * 16 * BLOCK bytes
#: of scratch per thread)
BLOCK = 128

_F = field.build(njit(inline="always"))
_add, _mmul = _F.add, _F.mont_mul
_tm, _fm = _F.to_mont, _F.from_mont

# opcodes: leaves (a, b = leaf arguments), then interior ops named by operand kinds
# (B base, E extension), e.g. ADD_EB = EF + base; FOLD (a = constraint k, b = its slot)
# adds alpha^(K-1-k) C_k into its row condition's sum right after C_k is computed, so a
# constraint's slot is free again at once (POSEIDON2: 848 constraints); STORE (a = output
# k, b = its slot) writes a base output, canonical, to row k of the output matrix
#: the opcodes' names, in opcode order (benches and diagnostics print them)
OPCODE_NAMES = ("LD_MAIN", "LD_PREP", "LD_AUX", "LD_PV", "LD_CHAL", "LD_CONST",
                "ADD_BB", "ADD_EB", "ADD_EE", "SUB_BB", "SUB_EB", "SUB_BE", "SUB_EE",
                "MUL_BB", "MUL_EB", "MUL_EE", "NEG_B", "NEG_E", "FOLD", "STORE")
(LD_MAIN, LD_PREP, LD_AUX, LD_PV, LD_CHAL, LD_CONST,
 ADD_BB, ADD_EB, ADD_EE, SUB_BB, SUB_EB, SUB_BE, SUB_EE,
 MUL_BB, MUL_EB, MUL_EE, NEG_B, NEG_E, FOLD, STORE) = range(len(OPCODE_NAMES))
_WHEN = {"all": 0, "first": 1, "last": 2, "transition": 3}
_CHAL_NAMES = ("logup_beta", "logup_gamma")

_LOCK = threading.Lock()
_ENCODED: dict = {}
_SEL: dict = {}


def compiled_quotient_enabled() -> bool:
    """``PROVER_HOST_QUOTIENT``: ``compiled`` (default, also unset/empty) or ``numpy``."""
    v = os.environ.get(ENV, "").strip().lower()
    if v in ("", "compiled", "1"):
        return True
    if v in ("numpy", "0"):
        return False
    raise ValueError(f"{ENV}={v!r}: expected 'compiled' or 'numpy'")


# ----------------------------------------------------------------------------- encoding

class Encoded:
    """An AIR's constraint program as the kernel's tables.

    ``code`` int64[ops, 4] (opcode, a, b, destination slot); ``consts`` uint32 (Montgomery)
    constants read by LD_CONST; ``chal_names``: the EF scalars LD_CHAL reads, in slot order
    (challenges by name, then ``"term"``); ``out_ef`` / ``out_when``: per constraint,
    whether its value is EF and its row condition (the FOLD instruction after it names its
    slot); ``slots``: value slots needed."""

    def __init__(self, code, consts, chal_names, out_ef, out_when, slots):
        self.code, self.consts, self.chal_names = code, consts, chal_names
        self.out_ef, self.out_when, self.slots = out_ef, out_when, slots


def _interior(op, xe, ye) -> tuple[int, bool]:
    """(opcode, operands swapped) for an interior instruction (mirrors air.program)."""
    if op == "neg":
        return (NEG_E if xe else NEG_B), False
    if op == "add":
        if xe and ye:
            return ADD_EE, False
        if xe or ye:
            return ADD_EB, not xe              # EF operand first
        return ADD_BB, False
    if op == "sub":
        return {(True, True): SUB_EE, (True, False): SUB_EB, (False, True): SUB_BE,
                (False, False): SUB_BB}[(xe, ye)], False
    if op == "mul":
        if xe and ye:
            return MUL_EE, False
        if xe or ye:
            return MUL_EB, not xe
        return MUL_BB, False
    raise ValueError(f"unknown op {op!r}")


def encode(air) -> Encoded:
    """The kernel tables of :func:`air.kernel_program.kernel_program` (cached per
    ``air.fingerprint()``)."""
    key = tuple(air.fingerprint())
    hit = _ENCODED.get(key)
    if hit is not None:
        return hit
    enc = _encode(air, kernel_program(air), FOLD)
    with _LOCK:
        _ENCODED[key] = enc
    return enc


def _encode(air, prog, sink: int) -> Encoded:
    """Encode ``prog``; after each output instruction a ``sink`` (FOLD or STORE) row."""
    ops, is_ef = prog.ops, prog.is_ef
    outs = prog.outputs
    # last reader of every value among the instructions (outputs are folded at once)
    last = list(range(len(ops)))
    for i, (_, a, b, _) in enumerate(ops):
        for o in (a, b):
            if o >= 0:
                last[o] = i
    folds: dict[int, list] = {}
    for k, o in enumerate(outs):
        folds.setdefault(o, []).append(k)
    rows: list = []
    consts: list[int] = []
    chal_names: list[str] = []
    slot_of = [-1] * len(ops)
    free: list[int] = []
    nslots = 0
    for i, (op, a, b, payload) in enumerate(ops):
        if a < 0:
            if op in ("main", "prep", "aux"):
                j, nx = payload
                oc, x, y = {"main": LD_MAIN, "prep": LD_PREP, "aux": LD_AUX}[op], int(j), int(bool(nx))
            elif op == "pv":
                oc, x, y = LD_PV, int(payload), 0
            elif op in ("chal", "term"):
                name = "term" if op == "term" else str(payload)
                if name not in chal_names:
                    chal_names.append(name)
                oc, x, y = LD_CHAL, chal_names.index(name), 0
            elif op == "const":
                consts.append(int(payload) % P)
                oc, x, y = LD_CONST, len(consts) - 1, 0
            else:
                raise ValueError(f"{air.name}: unknown leaf {op!r}")
        else:
            xe, ye = is_ef[a], (b >= 0 and is_ef[b])
            oc, swap = _interior(op, xe, ye)
            x, y = slot_of[a], (slot_of[b] if b >= 0 else 0)
            if swap:
                x, y = y, x
        # the destination is never an operand's slot: operands read for the last time here
        # free their slots only after it is chosen (a destination that aliases an operand
        # makes LLVM's runtime overlap check fail, and the op's loop runs scalar)
        if free:
            d = free.pop()
        else:
            d = nslots
            nslots += 1
        if a >= 0:
            for o in {a, b} - {-1}:
                if last[o] == i:
                    free.append(slot_of[o])
        slot_of[i] = d
        rows.append((oc, x, y, d))
        for k in folds.get(i, ()):
            rows.append((sink, k, d, 0))
        if last[i] == i:                   # not read by a later instruction
            free.append(d)
    code = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    if sink == STORE:
        if any(is_ef[o] for o in outs):
            raise ValueError(f"{air.name}: interaction values must be base-field expressions")
        return Encoded(code, field.to_mont_host(np.asarray(consts or [0], dtype=np.uint64)),
                       tuple(chal_names), np.zeros(0, np.int64), np.zeros(0, np.int64),
                       max(1, nslots))
    cons = air.constraints
    if len(cons) != len(outs):
        raise ValueError(f"{air.name}: {len(cons)} constraints, {len(outs)} program outputs")
    for c in cons:
        if c.when not in _WHEN:
            raise ValueError(f"{air.name}: unknown row condition {c.when!r}")
    enc = Encoded(code, field.to_mont_host(np.asarray(consts or [0], dtype=np.uint64)),
                  tuple(chal_names),
                  np.asarray([int(is_ef[o]) for o in outs], dtype=np.int64),
                  np.asarray([_WHEN[c.when] for c in cons], dtype=np.int64),
                  max(1, nslots))
    return enc


# ----------------------------------------------------------------------------- kernel

@njit(inline="always")
def _load(src, col, nx, Vd, lo, w, M, stride, nxt, rowmajor):
    # Vd[t] = point lo + t of column col: src[col, (i (+ nxt mod M)) * stride] (LDE columns),
    # or src[lo + t, col] when rowmajor (the trace's rows: the LogUp kernel, current row)
    if rowmajor:
        for t in range(w):
            Vd[t] = _tm(src[lo + t, col])
    elif nx:
        mask = M - 1                        # M is a power of two: (i + nxt) mod M
        for t in range(w):
            Vd[t] = _tm(src[col, ((lo + t + nxt) & mask) * stride])
    elif stride == 1:
        for t in range(w):
            Vd[t] = _tm(src[col, lo + t])
    else:
        for t in range(w):
            Vd[t] = _tm(src[col, (lo + t) * stride])


@njit(inline="always")
def _vload(src, col, nx, V, d, c, lo, w, M, nxt):
    # V[d, c, t] = point lo + t of column col of a column-major LDE at stride 1
    # (the next row's when nx): whole vectors up to the last one or the wrap at M,
    # then the scalar loads
    n = src.shape[1]
    iv = (4 * d + c) * V.shape[2]
    t0 = 0
    while t0 + LANES <= w:
        s = (lo + t0 + nxt) & (M - 1) if nx else lo + t0
        if s + LANES > M:
            break
        CL.load_mont(src, col * n + s, V, iv + t0)
        t0 += LANES
    for t in range(t0, w):
        s = (lo + t + nxt) & (M - 1) if nx else lo + t
        V[d, c, t] = _tm(src[col, s])


@njit(cache=True)
def _run_block(code, consts, main, prep, aux, pv, scal, apow, out_ef, out_when, V, G, O, lo,
               w, M, stride, nxt, rowmajor):
    # every arithmetic instruction and FOLD in vectors of kernels/constraint_lanes.py
    # over the block's first wv >= w points (V's and G's last axis is a whole number of
    # vectors; the points past w are scratch: computed, never read); the column-major
    # LDE loads at stride 1 in vectors up to w, their tail scalar
    blk = V.shape[2]                   # V[d, c, t] is V.flat[(4 d + c) blk + t]
    wv = ((w + LANES - 1) // LANES) * LANES
    for ins in range(code.shape[0]):
        op = code[ins, 0]
        a = code[ins, 1]
        b = code[ins, 2]
        d = code[ins, 3]
        ia = 4 * a * blk
        ib = 4 * b * blk
        id_ = 4 * d * blk
        if op == LD_MAIN:
            if not rowmajor and stride == 1:
                _vload(main, a, b, V, d, 0, lo, w, M, nxt)
            else:
                _load(main, a, b, V[d, 0], lo, w, M, stride, nxt, rowmajor)
        elif op == LD_PREP:
            _load(prep, a, b, V[d, 0], lo, w, M, stride, nxt, 0)
        elif op == LD_AUX:
            for c in range(4):
                if stride == 1:
                    _vload(aux, 4 * a + c, b, V, d, c, lo, w, M, nxt)
                else:
                    _load(aux, 4 * a + c, b, V[d, c], lo, w, M, stride, nxt, 0)
        elif op == LD_PV:
            v = pv[a]
            for t in range(w):
                V[d, 0, t] = v
        elif op == LD_CHAL:
            for c in range(4):
                v = scal[4 * a + c]
                for t in range(w):
                    V[d, c, t] = v
        elif op == LD_CONST:
            v = consts[a]
            for t in range(w):
                V[d, 0, t] = v
        elif op == ADD_BB:
            for t in range(0, wv, LANES):
                CL.add_bb(V, ia + t, ib + t, id_ + t)
        elif op == ADD_EB:
            for t in range(0, wv, LANES):
                CL.add_eb(V, ia + t, ib + t, id_ + t, blk)
        elif op == ADD_EE:
            for t in range(0, wv, LANES):
                CL.add_ee(V, ia + t, ib + t, id_ + t, blk)
        elif op == SUB_BB:
            for t in range(0, wv, LANES):
                CL.sub_bb(V, ia + t, ib + t, id_ + t)
        elif op == SUB_EB:
            for t in range(0, wv, LANES):
                CL.sub_eb(V, ia + t, ib + t, id_ + t, blk)
        elif op == SUB_BE:
            for t in range(0, wv, LANES):
                CL.sub_be(V, ia + t, ib + t, id_ + t, blk)
        elif op == SUB_EE:
            for t in range(0, wv, LANES):
                CL.sub_ee(V, ia + t, ib + t, id_ + t, blk)
        elif op == MUL_BB:
            for t in range(0, wv, LANES):
                CL.mul_bb(V, ia + t, ib + t, id_ + t)
        elif op == MUL_EB:
            for t in range(0, wv, LANES):
                CL.mul_eb(V, ia + t, ib + t, id_ + t, blk)
        elif op == MUL_EE:
            for t in range(0, wv, LANES):
                CL.mul_ee(V, ia + t, ib + t, id_ + t, blk)
        elif op == NEG_B:
            for t in range(0, wv, LANES):
                CL.neg_b(V, ia + t, id_ + t)
        elif op == STORE:
            for t in range(w):
                O[a, t] = _fm(V[b, 0, t])
        elif op == FOLD:
            # sum_k alpha^(K-1-k) C_k per row condition (apow row k holds alpha^(K-1-k))
            g = out_when[a]
            ig = 4 * g * blk
            if out_ef[a]:
                for t in range(0, wv, LANES):
                    CL.fold_ext(G, ig + t, V, ib + t, blk, apow[a, 0], apow[a, 1],
                                apow[a, 2], apow[a, 3])
            else:
                for t in range(0, wv, LANES):
                    CL.fold_base(G, ig + t, V, ib + t, blk, apow[a, 0], apow[a, 1],
                                 apow[a, 2], apow[a, 3])
        else:  # NEG_E
            for t in range(0, wv, LANES):
                CL.neg_e(V, ia + t, id_ + t, blk)


@njit(cache=True, nogil=True)
def _quotient_kernel(code, consts, main, prep, aux, pv, scal, apow, out_ef, out_when, sel, M,
                     stride, nxt, nslots, block, b0, b1, out):
    # blocks b0 .. b1 - 1 of R2's quotient on M points (a range of _run's) -> out
    # (uint32[4, M]); sel (Montgomery, uint32[4, M]): the first, last and transition
    # selectors and 1/Z_H; main/prep/aux: LDE columns, point i at i * stride
    zero = b0 - b0                    # int64, not a literal: _run_block has one signature
    bv = ((block + LANES - 1) // LANES) * LANES          # whole vectors (_run_block)
    V = np.empty((nslots, 4, bv), dtype=np.uint32)
    G = np.empty((4, 4, bv), dtype=np.uint32)             # per row condition, EF
    for blk in range(b0, b1):
        lo = blk * block
        w = min(block, M - lo)
        G[:, :, :w] = 0
        _run_block(code, consts, main, prep, aux, pv, scal, apow, out_ef, out_when, V, G,
                   G[0], lo, w, M, stride, nxt, zero)
        for c in range(4):
            for t in range(w):
                i = lo + t
                q = _add(_add(G[0, c, t], _mmul(G[1, c, t], sel[0, i])),
                         _add(_mmul(G[2, c, t], sel[1, i]), _mmul(G[3, c, t], sel[2, i])))
                out[c, i] = _fm(_mmul(q, sel[3, i]))


@njit(cache=True, nogil=True)
def _logup_h_kernel(code, consts, main, prep, pv, nslots, it_pos, it_len, it_bus, it_sign,
                    it_batch, bpow, block, b0, b1, H, flag):
    # blocks b0 .. b1 - 1 of rows (a range of _run's): the interaction
    # program (values and multiplicities, canonical, into the block's Ob: the (values,
    # mult) rows never exist for the whole trace; main: the trace uint32[n, w], row-major,
    # read at the current row only), then the block's h columns (logup_block)
    n = H.shape[2]
    T = it_pos.shape[0]
    nout = it_pos[T - 1] + it_len[T - 1] + 1
    zero = b0 - b0                    # int64s, not literals: the quotient's _run_block
    one = zero + 1
    dummy_scal = np.zeros(4, np.uint32)
    dummy_apow = np.zeros((1, 4), np.uint32)
    dummy_i = np.zeros(1, np.int64)
    bv = ((block + LANES - 1) // LANES) * LANES          # whole vectors (_run_block)
    V = np.empty((nslots, 4, bv), dtype=np.uint32)
    G = np.empty((4, 4, bv), dtype=np.uint32)
    Ob = np.empty((nout, bv), dtype=np.uint32)
    D = np.empty((T, 4, bv), dtype=np.uint32)
    Pf = np.empty((T, 4, bv), dtype=np.uint32)
    A = np.empty((4, bv), dtype=np.uint32)
    Q = np.empty((4, bv), dtype=np.uint32)
    for blk in range(b0, b1):
        lo = blk * block
        w = min(block, n - lo)
        _run_block(code, consts, main, prep, prep, pv, dummy_scal, dummy_apow, dummy_i,
                   dummy_i, V, G, Ob, lo, w, n, one, zero, one)
        logup_block(Ob, it_pos, it_len, it_bus, it_sign, it_batch, bpow, lo, w, D, Pf, A, Q,
                    H, flag)


def _run(kernel, head: tuple, tail: tuple, nblocks: int) -> None:
    """``kernel(*head, b0, b1, *tail)`` over blocks [0, nblocks) in ranges taken in turn by
    numba's thread count of workers (kernels/host_pool.run_ranges: the caller one of
    them; a worker slowed down takes fewer ranges); every block writes its own rows, so
    the bytes do not depend on the split.  Threads, not ``prange``: a parfor around the
    program walk compiles several times slower, for the same speed (the work is in
    coarse blocks)."""
    host_pool.run_ranges(lambda b0, b1: kernel(*head, np.int64(b0), np.int64(b1), *tail),
                         int(nblocks), 1)


# ----------------------------------------------------------------------------- wrapper

def _inverses(a: np.ndarray) -> np.ndarray:
    """1/a for a non-zero canonical uint64 array whose size is a power of two: Montgomery's
    trick down the columns of a (R, L) view, R ~ sqrt(size) lanes at once (3 L products
    of R lanes and one Fermat inversion of R values instead of a Fermat inversion of every
    value: air.field.inv's ~45 products of the whole array).  The same values (an inverse
    is unique)."""
    size = a.size
    if size < 1 << 10:
        return AF.inv(a)
    L = 1 << min(8, (size.bit_length() - 1) // 2)         # steps of >= 4 K lanes
    cols = np.ascontiguousarray(a.reshape(-1, L).T)          # (L, R): column j of the view
    pre = np.empty_like(cols)
    acc = np.ones(cols.shape[1], np.uint64)
    for j in range(L):
        pre[j] = acc
        acc = AF.mul(acc, cols[j])
    inv = AF.inv(acc)
    for j in range(L - 1, -1, -1):
        pre[j] = AF.mul(pre[j], inv)
        inv = AF.mul(inv, cols[j])
    return np.ascontiguousarray(pre.T).reshape(size)


def _selectors(log_n: int, log_m: int, shift: int) -> tuple:
    """(first, last, transition, 1/Z_H) on shift<w_M>: air.eval.selectors_on_coset's
    values (its definition, the numpy path's), with the points doubled out (log_m
    products) and the divisions by x - 1 and x - w_n^-1 through :func:`_inverses`."""
    n, M, w = 1 << log_n, 1 << log_m, AF.root_of_unity(log_m)
    x = np.full(1, shift % AF.P, np.uint64)    # shift w^j, j < 2^i, doubled log_m times
    for i in range(log_m):
        x = np.concatenate([x, AF.mul(x, pow(w, 1 << i, AF.P))])
    # x^n - 1 depends on j mod M/n: its M/n values, then x - 1 and x - w_n^-1 (transition)
    subtrahends = np.repeat(np.array([1, pow(AF.root_of_unity(log_n), AF.P - 2, AF.P)],
                                     np.uint64), M)
    d = AF.sub(AF.mul(AF.powers(AF.root_of_unity(log_m - log_n), M // n),
                      pow(shift, n, AF.P)), 1)
    xs = AF.sub(np.concatenate([x, x]), subtrahends)
    if not (d.all() and xs.all()):             # the coset meets H: the reference's error
        s, inv_zh = air_eval.selectors_on_coset(log_n, shift, log_m)
        return s["first"], s["last"], s["transition"], inv_zh
    inv = _inverses(xs)
    zh = np.tile(d, n)
    return AF.mul(zh, inv[:M]), AF.mul(zh, inv[M:]), xs[M:], np.tile(AF.inv(d), n)


def host_selectors(log_n: int, log_m: int, shift: int) -> np.ndarray:
    """uint32[4, M] in Montgomery form: the first, last and transition selectors and 1/Z_H
    on the coset shift<w_M> (natural order), from :func:`air.eval.selectors_on_coset` (the
    numpy path's definition); cached per (log_n, log_m, shift)."""
    key = (int(log_n), int(log_m), int(shift))
    hit = _SEL.get(key)
    if hit is None:
        if not 0 <= log_n <= log_m <= AF.TWO_ADICITY:
            raise ValueError(f"quotient domain 2^{log_m} must contain the trace domain 2^{log_n}")
        from .selectors_host import selectors_mont
        hit = selectors_mont(log_n, log_m, shift)         # compiled, on the host pool
        if hit is None:                                   # the coset meets H: the reference
            hit = np.stack([field.to_mont_host(v) for v in _selectors(log_n, log_m, shift)])
        with _LOCK:
            _SEL[key] = hit
    return hit


def _matrix(m, name, rows, N):
    a = np.asarray(m)
    if a.dtype != np.uint32 or a.ndim != 2 or a.shape != (rows, N):
        raise ValueError(f"{name}: expected uint32[{rows}, {N}], got {a.dtype}{list(a.shape)}")
    return np.ascontiguousarray(a)


def _ef4(v, name) -> np.ndarray:
    a = np.asarray(v, dtype=np.int64).reshape(-1)
    if a.shape != (4,) or np.any(a < 0) or np.any(a >= P):
        raise ValueError(f"{name}: expected 4 canonical field coefficients")
    return a.astype(np.uint64)


def quotient_host(air, shape, main_lde, prep_lde, aux_lde, public_values, challenges: dict,
                  alpha, terminal, shift: int, out=None, block: int = BLOCK) -> np.ndarray:
    """R2 on the host, compiled: Q on the quotient coset g<w_M> (g = ``shift``) ->
    uint32[4, M], natural order; bit-identical to ``HostStages.quotient``'s interpreter.

    main_lde / prep_lde / aux_lde: natural-order LDE columns on g<w_N>, uint32[c, N]
    (``Committed.lde``); aux column 4k + c is EF column k's coefficient c.  prep_lde,
    aux_lde and terminal may be None when the AIR has none."""
    N, M = 1 << shape.log_lde, 1 << shape.log_quotient
    if not shape.log_n <= shape.log_quotient <= shape.log_lde:
        raise ValueError("quotient domain must lie between the trace and LDE domains")
    if not 1 <= int(block) <= 1 << 16:
        raise ValueError(f"block must be in [1, 65536], got {block}")
    dummy = np.zeros((1, 1), np.uint32)
    main = _matrix(main_lde, "main_lde", air.main_width, N)
    prep = aux = dummy
    if air.prep_width:
        if prep_lde is None:
            raise ValueError(f"{air.name}: prep_lde is required (the AIR has preprocessed columns)")
        prep = _matrix(prep_lde, "prep_lde", air.prep_width, N)
    if air.aux_width:
        if aux_lde is None or terminal is None:
            raise ValueError(f"{air.name}: aux_lde and terminal are required (LogUp)")
        aux = _matrix(aux_lde, "aux_lde", 4 * air.aux_width, N)
    pv = np.asarray([int(v) for v in public_values], dtype=np.int64)
    if pv.shape != (air.num_public,) or np.any(pv < 0) or np.any(pv >= P):
        raise ValueError(f"{air.name}: expected {air.num_public} canonical public values, "
                         f"got {list(public_values)}")
    enc = encode(air)
    scal = np.zeros(4 * max(1, len(enc.chal_names)), dtype=np.uint64)
    for k, name in enumerate(enc.chal_names):
        if name == "term":
            if terminal is None:
                raise ValueError(f"{air.name}: the constraints read the terminal; none given")
            scal[4 * k:4 * k + 4] = _ef4(terminal, "terminal")
        else:
            if name not in challenges:
                raise ValueError(f"{air.name}: challenge {name!r} missing")
            scal[4 * k:4 * k + 4] = _ef4(challenges[name], name)
    K = max(1, len(air.constraints))
    apow = hostlib.ef_powers(_ef4(alpha, "alpha"), K)                   # (4, K): alpha^k
    apow_rev = np.ascontiguousarray(apow[:, ::-1].T)                     # row k: alpha^(K-1-k)
    sel = host_selectors(shape.log_n, shape.log_quotient, shift)
    if out is None:
        out = np.empty((4, M), dtype=np.uint32)
    elif out.dtype != np.uint32 or out.shape != (4, M) or not out.flags.c_contiguous:
        raise ValueError(f"out: expected a C-contiguous uint32[4, {M}]")
    block = int(block)
    nblocks = (M + block - 1) // block
    _run(_quotient_kernel,
         (enc.code, enc.consts, main, prep, aux,
          field.to_mont_host(pv) if pv.size else np.zeros(1, np.uint32),
          field.to_mont_host(scal), field.to_mont_host(apow_rev),
          enc.out_ef, enc.out_when, sel, np.int64(M),
          np.int64(N // M), np.int64(M >> shape.log_n), np.int64(enc.slots),
          np.int64(block)), (out,), nblocks)
    return out


# ----------------------------------------------------------------------------- LogUp h

_VALUES: dict = {}
#: trace rows per block of the h kernel (its scratch per thread: 2 T + 2 EF rows and
#: the program's outputs and slots, of LOGUP_BLOCK each; 2^16 CPU rows, 1 thread:
#: 256 -> 512 measured 37 -> 30 ns a fraction)
LOGUP_BLOCK = 512


def logup_h_host(air, main: np.ndarray, public_values, challenges: dict,
                 block: int | None = None, stacked: bool = False):
    """The LogUp h columns of ``HostStages.aux_build``, compiled: one EF column per lookup
    batch, h_b[i] = sum_(t in batch b) sign_t m_t[i] / d_t[i] with
    d_t = gamma - (bus_t + sum_j beta^(j+1) v_tj) on trace row i.  ``main``: the trace
    uint32[n, w].  Returns a list of uint64[4, n] (canonical), bit-identical to the numpy
    loop (``stacked``: the columns as one uint32[B, 4, n]); ValueError when a denominator
    vanishes."""
    block = int(LOGUP_BLOCK if block is None else block)
    if not 1 <= block <= 1 << 16:
        raise ValueError(f"block must be in [1, 65536], got {block}")
    main = np.asarray(main)
    if main.ndim != 2 or main.shape[1] != air.main_width:
        raise ValueError(f"{air.name}: main must be [n, {air.main_width}], got {main.shape}")
    if main.dtype != np.uint32:
        if main.size and (main.min() < 0 or main.max() >= P):
            raise ValueError(f"{air.name}: main holds values outside [0, p)")
        main = main.astype(np.uint32)
    n = main.shape[0]
    if n < 1 or n & (n - 1):
        raise ValueError(f"{air.name}: the trace height {n} is not a power of two")
    key = tuple(air.fingerprint())
    enc = _VALUES.get(key)
    if enc is None:
        ops = air.interaction_program.ops
        kinds = {op for op, a, _, _ in ops if a < 0}
        if not kinds <= {"main", "prep", "pv", "const"}:
            raise ValueError(f"{air.name}: interaction values read {sorted(kinds)}")
        if any(op in ("main", "prep") and a < 0 and pl[1] for op, a, _, pl in ops):
            raise ValueError(f"{air.name}: interaction values read the next row")
        enc = _encode(air, air.interaction_program, STORE)
        with _LOCK:
            _VALUES[key] = enc
    pv = np.asarray([int(v) for v in public_values], dtype=np.int64)
    if pv.shape != (air.num_public,) or np.any(pv < 0) or np.any(pv >= P):
        raise ValueError(f"{air.name}: expected {air.num_public} canonical public values")
    main = np.ascontiguousarray(main)           # row-major: the kernel reads rows lo .. lo+w
    prep = np.zeros((1, n), np.uint32)                   # never read: no prep columns
    if air.prep_width:
        prep = np.ascontiguousarray(np.asarray(air.preprocessed, dtype=np.uint32).T)
        if prep.shape != (air.prep_width, n):
            raise ValueError(f"{air.name}: preprocessed height {prep.shape[1]} != trace height {n}")
    its = air.interactions
    batch_of = {id(it): b for b, batch in enumerate(air.lookup_batches) for it in batch}
    pos, p = [], 0
    for it in its:
        pos.append(p)
        p += len(it.values) + 1
    arity = max(len(it.values) for it in its)
    beta = _ef4(challenges["logup_beta"], "logup_beta").reshape(4, 1)
    # Montgomery form for the kernel: gamma and the bus ids x R, beta^(j+1) x R^2
    bpow = np.empty((arity + 1, 4), np.uint32)          # gamma, beta, beta^2, ...
    bpow[0] = field.to_mont_host(_ef4(challenges["logup_gamma"], "logup_gamma"))
    bpow[1:] = field.to_mont_host(field.to_mont_host(AF.ef_mul(hostlib.ef_powers(beta, arity), beta).T))
    B = len(air.lookup_batches)
    H = np.zeros((B, 4, n), dtype=np.uint32)
    flag = np.zeros(1, np.uint32)
    nblocks = (n + block - 1) // block
    _run(_logup_h_kernel,
         (enc.code, enc.consts, main, prep,
          field.to_mont_host(pv) if pv.size else np.zeros(1, np.uint32),
          np.int64(enc.slots), np.asarray(pos, np.int64),
          np.asarray([len(it.values) for it in its], np.int64),
          field.to_mont_host(np.asarray([it.bus_id % P for it in its], np.uint64)),
          np.asarray([it.sign for it in its], np.int64),
          np.asarray([batch_of[id(it)] for it in its], np.int64), bpow, np.int64(block)),
         (H, flag), nblocks)
    if flag[0]:
        raise ValueError(f"{air.name}: a LogUp denominator vanished (resample: "
                         "the challenges hit a tuple's fingerprint)")
    return H if stacked else [H[b].astype(np.uint64) for b in range(B)]


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("constraint_lanes.py", "poseidon2_lanes.py", "field.py", "logup_block.py"))
