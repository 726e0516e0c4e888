"""The composition identity at the out-of-domain point z, for one table: N(z) = Z_H(z) Q(z).

N(z) is the AIR's constraints evaluated from the proof's opened values (the preprocessed
columns by barycentric evaluation over the trace domain, the aux and quotient-part
columns recombined from their EF coordinates), folded with alpha and the row-condition
selectors at z; Q(z) = sum_i z^(i n) q_i(z) from the opened quotient parts.  One compiled
kernel runs the AIR's constraint program (:mod:`air.program`) on EF values.

* :func:`composition_check` ``(air, shape, section, public_values, challenges, alpha, z)``:
  raises :class:`CompositionError` when the identity fails (the prover's XCHECK and
  :func:`verifier.table.verify_table` call it);
* :func:`_composition_values`: (N(z), Z_H(z), Z_H(z) Q(z)) themselves.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from ..air import CHALLENGE_NAMES

from .errors import CompositionError, ShapeError
from .field import F, P, barycentric_at
from .proof_format import TableProof
from .protocol import TableShape
from .scalar import ONE, P64, TWO, W64, ZERO, add, ef_inv, ef_mul, inv, mul, sub

# ---------------------------------------------------------------- opened values

# The kernels allocate nothing (verifier/poseidon2.py: an np.empty inside a cached
# kernel makes loading it import numba's array module): their callers pass the arrays.

@njit(cache=True, _nrt=False)
def _bary_kernel(cols, z, wn, scratch, out):
    """sum_i f_i w^i / (z - w^i) for every column f of cols (uint32[n, k]) at the EF point
    z (uint64[4]), w = wn a primitive n-th root of unity; returns (ok, sums (k, 4)); ok is False when some z - w^i is zero (the
    caller then falls back to verifier.field.barycentric_at, which maps 1/0 to 0).

    With a = z - t (t = w^i base): conj(a) = (a0, -a1, a2, -a3), a conj(a) = e0 + e2 X^2,
      e0 = a0^2 + 11 (a2^2 - 2 a1 a3),   e2 = 2 a0 a2 - a1^2 - 11 a3^2,
      N = e0^2 - 11 e2^2 (base), and 1/a = conj(a) (e0 - e2 X^2) / N
          = (a0 e0 - 11 a2 e2, 11 a3 e2 - a1 e0, a2 e0 - a0 e2, a1 e2 - a3 e0) / N.
    Only a0 and N depend on i, so with c_i = f_i t_i / N_i the sum needs four base sums
    A = sum c e0, B = sum c e2, C = sum c a0 e0, D = sum c a0 e2; the N_i are inverted
    together (Montgomery's trick: one inversion).  scratch uint64[6, n]; out uint64[k, 4]
    (the sums, when ok)."""
    n, k = cols.shape
    z0, a1, a2, a3 = z[0], z[1], z[2], z[3]
    k1 = mul(W64, sub(mul(a2, a2), mul(TWO, mul(a1, a3))))
    k2 = sub(ZERO, add(mul(a1, a1), mul(W64, mul(a3, a3))))
    a2x2 = mul(TWO, a2)
    w = ONE
    a0s = scratch[0]
    e0s = scratch[1]
    e2s = scratch[2]
    ts = scratch[3]
    pre = scratch[4]
    run = ONE
    for i in range(n):
        a0 = sub(z0, w)
        e0 = add(mul(a0, a0), k1)
        e2 = add(mul(a2x2, a0), k2)
        nrm = sub(mul(e0, e0), mul(W64, mul(e2, e2)))
        if nrm == 0:
            return False
        a0s[i], e0s[i], e2s[i], ts[i] = a0, e0, e2, w
        pre[i] = run                              # product of N_0 .. N_(i-1)
        run = mul(run, nrm)
        w = mul(w, wn)
    inv_run = inv(run)
    u = scratch[5]                                # u_i = t_i / N_i
    for i in range(n - 1, -1, -1):
        nrm = sub(mul(e0s[i], e0s[i]), mul(W64, mul(e2s[i], e2s[i])))
        u[i] = mul(ts[i], mul(inv_run, pre[i]))
        inv_run = mul(inv_run, nrm)
    for j in range(k):
        sa = ZERO
        sb = ZERO
        sc = ZERO
        sd = ZERO
        for i in range(n):
            c = mul(np.uint64(cols[i, j]) % P64, u[i])
            ca = mul(c, a0s[i])
            # each term < p; n < 2^27 terms sum to < 2^58: reduced once at the end
            sa += mul(c, e0s[i])
            sb += mul(c, e2s[i])
            sc += mul(ca, e0s[i])
            sd += mul(ca, e2s[i])
        sa %= P64
        sb %= P64
        sc %= P64
        sd %= P64
        out[j, 0] = sub(sc, mul(W64, mul(a2, sb)))
        out[j, 1] = sub(mul(W64, mul(a3, sb)), mul(a1, sa))
        out[j, 2] = sub(mul(a2, sa), sd)
        out[j, 3] = sub(mul(a1, sb), mul(a3, sa))
    return True


def _barycentric(columns, z, log_n: int) -> np.ndarray:
    """verifier.field.barycentric_at (same values, uint32 (k, 4)) through _bary_kernel;
    falls back to it when z lies in the domain (a zero denominator)."""
    cols = np.ascontiguousarray(columns, dtype=np.uint32)
    if not cols.flags.writeable:       # (a read-only array is another numba signature,
        cols = cols.copy()             # not loaded at import: copying is cheaper)
    zf = np.ascontiguousarray(np.asarray(z, np.uint64).reshape(4))
    n = 1 << log_n
    if cols.ndim != 2 or cols.shape[0] != n:
        return barycentric_at(columns, z, log_n)
    sums = np.empty((cols.shape[1], 4), dtype=np.uint64)
    ok = _bary_kernel(cols, zf, np.uint64(F.root_of_unity(log_n)),
                      np.empty((6, n), dtype=np.uint64), sums)
    if not ok:
        return barycentric_at(columns, z, log_n)
    zc = zf.reshape(4, 1)
    scale = F.ef_mul_base(F.ef_add_base(F.ef_pow(zc, n), P - 1), pow(n, P - 2, P))
    out = np.empty((cols.shape[1], 4), dtype=np.uint64)
    for j in range(cols.shape[1]):
        out[j] = F.ef_mul(sums[j].reshape(4, 1), scale).reshape(4)
    return out.astype(np.uint32)


def _combine_ef_columns(vals: np.ndarray) -> np.ndarray:
    """(4a, 4) opened coefficient columns -> (a, 4) EF column values (proof layout),
    vectorised over the EF columns: value k is
    sum_c X^c v_(4k+c), X^c shifting the coefficients up by c with X^4 = 11 on wrap.
    Each term is reduced (< p); a sum of 4 stays < 2^33."""
    a = vals.shape[0] // 4
    v = np.asarray(vals, np.uint64)[:4 * a].reshape(a, 4, 4) % np.uint64(P)   # (k, c, coeff)
    out = np.zeros((a, 4), dtype=np.uint64)
    for c in range(4):
        for j in range(4):
            term = v[:, c, (j - c) % 4]
            out[:, j] += (term * np.uint64(F.W)) % np.uint64(P) if j < c else term
    return out % np.uint64(P)


# ---------------------------------------------------------------- composition at z
# The AIR's constraint program (air.program: straight-line ops over shared sub-terms) is
# run by one compiled kernel, every value as an EF element (a base value v is (v, 0, 0, 0):
# the same arithmetic as air.eval.numerator_at_point's, which types values), then
# alpha-folded with the selectors at z (air.eval's formulas), and compared with
# Z_H(z) Q(z).  The program's arrays are built once per program object (_point_code).

_OP_LEAF, _OP_ADD, _OP_SUB, _OP_MUL, _OP_NEG = 0, 1, 2, 3, 4
#: leaf kinds in the order of the value blocks _composition_values stacks (then pv, chal,
#: term, the program's constants)
_LEAF_KINDS = {("main", False): 0, ("main", True): 1, ("prep", False): 2, ("prep", True): 3,
               ("aux", False): 4, ("aux", True): 5}
_WHEN = {"all": 0, "first": 1, "last": 2, "transition": 3}
_CODE_CACHE: dict = {}


def _point_code(air):
    """(code int64[nops, 3], leaf op positions int64[l], leaf kinds int64[l] (0..9),
    leaf column int64[l], constants uint64[c, 4], outputs int64[K], when int64[K]) for
    the AIR's constraint program; cached per program object (the cache keeps it alive, so
    its id is not reused)."""
    prog = air.constraint_program
    hit = _CODE_CACHE.get(id(prog))
    if hit is not None and hit[0] is prog:
        return hit[1]
    ops = prog.ops
    opc = {"add": _OP_ADD, "sub": _OP_SUB, "mul": _OP_MUL, "neg": _OP_NEG}
    code = np.empty((len(ops), 3), np.int64)
    if ops:
        names, a_col, b_col, _ = zip(*ops)
        code[:, 0] = [opc.get(op, _OP_LEAF) for op in names]
        code[:, 1] = a_col
        code[:, 2] = b_col
    bad = (code[:, 1] >= 0) & (code[:, 0] == _OP_LEAF)
    if bad.any():  # pragma: no cover - compile_program emits only these ops
        raise ShapeError(f"unknown op {ops[int(np.flatnonzero(bad)[0])][0]!r} in the "
                         "constraint program", air.name)
    code[code[:, 1] < 0] = (_OP_LEAF, -1, -1)
    lpos = [int(i) for i in np.flatnonzero(code[:, 1] < 0)]
    lkind, lcol, consts = [], [], []
    for i in lpos:
        op, _, _, payload = ops[i]
        if op in ("main", "prep", "aux"):
            lkind.append(_LEAF_KINDS[(op, bool(payload[1]))])
            lcol.append(int(payload[0]))
        elif op == "pv":
            lkind.append(6)
            lcol.append(int(payload))
        elif op == "chal":
            lkind.append(7)
            lcol.append(CHALLENGE_NAMES.index(payload))
        elif op == "term":
            lkind.append(8)
            lcol.append(0)
        elif op == "const":
            lkind.append(9)
            lcol.append(len(consts))
            consts.append([int(payload) % P, 0, 0, 0])
        else:  # pragma: no cover - compile_program emits only these leaves
            raise ShapeError(f"unknown leaf {op!r} in the constraint program", air.name)
    if len(prog.outputs) != len(air.constraints):
        raise ShapeError("constraint program and constraints disagree", air.name)
    res = (code, np.array(lpos, np.int64), np.array(lkind, np.int64),
           np.array(lcol, np.int64), np.array(consts, np.uint64).reshape(-1, 4),
           np.array(prog.outputs, np.int64),
           np.array([_WHEN[c.when] for c in air.constraints], np.int64))
    if len(_CODE_CACHE) > 256:
        _CODE_CACHE.clear()
    _CODE_CACHE[id(prog)] = (prog, res)
    return res


@njit(cache=True, _nrt=False)
def _composition_kernel(code, vals, outs, when, alpha, z, n, winv, parts, work):
    """N(z), Z_H(z) and Z_H(z) Q(z) (each uint64[4]) for one table.

    code int64[nops, 3] (op, a, b); vals uint64[nops, 4]: the leaves' EF values at their
    positions (canonical), the rest is computed here in place; outs / when int64[K]: the
    constraints' instructions and selectors (0 all, 1 first, 2 last, 3 transition);
    alpha, z uint64[4]; n = trace length, winv = omega_n^-1; parts uint64[s, 4]: q_i(z).
    N(z) = sum_k alpha^(K-1-k) sel_k(z) C_k(z) with sel_first = Z_H/(z-1),
    sel_last = Z_H/(z - winv), sel_transition = z - winv; Q(z) = sum_i z^(i n) q_i(z).
    work uint64[13, 4] (zeroed here): rows 0-3 acc, 4-7 sel, 8 zn, 9 zh, 10 num, 11 q,
    12 zq -- the results are rows 10, 9 and 12."""
    for i in range(13):
        for c in range(4):
            work[i, c] = 0
    for i in range(code.shape[0]):
        op = code[i, 0]
        if op == _OP_LEAF:
            continue
        a = code[i, 1]
        b = code[i, 2]
        if op == _OP_ADD:
            for c in range(4):
                vals[i, c] = add(vals[a, c], vals[b, c])
        elif op == _OP_SUB:
            for c in range(4):
                vals[i, c] = sub(vals[a, c], vals[b, c])
        elif op == _OP_NEG:
            for c in range(4):
                vals[i, c] = sub(ZERO, vals[a, c])
        else:
            m = ef_mul(vals[a, 0], vals[a, 1], vals[a, 2], vals[a, 3],
                       vals[b, 0], vals[b, 1], vals[b, 2], vals[b, 3])
            for c in range(4):
                vals[i, c] = m[c]
    acc = work[0:4]                             # per selector group
    p0, p1, p2, p3 = ONE, ZERO, ZERO, ZERO     # alpha^(K-1-k), k from the end
    for k in range(outs.shape[0] - 1, -1, -1):
        o = outs[k]
        g = when[k]
        m = ef_mul(p0, p1, p2, p3, vals[o, 0], vals[o, 1], vals[o, 2], vals[o, 3])
        for c in range(4):
            acc[g, c] = add(acc[g, c], m[c])
        p0, p1, p2, p3 = ef_mul(p0, p1, p2, p3, alpha[0], alpha[1], alpha[2], alpha[3])
    # z^n by squaring (n a power of two), Z_H(z) = z^n - 1
    z0, z1, z2, z3 = z[0], z[1], z[2], z[3]
    e = n
    while e > 1:
        z0, z1, z2, z3 = ef_mul(z0, z1, z2, z3, z0, z1, z2, z3)
        e >>= 1
    zn = work[8]
    zn[0], zn[1], zn[2], zn[3] = z0, z1, z2, z3
    zh = work[9]
    zh[0], zh[1], zh[2], zh[3] = sub(z0, ONE), z1, z2, z3
    sel = work[4:8]
    sel[0, 0] = ONE
    i0, i1, i2, i3 = ef_inv(sub(z[0], ONE), z[1], z[2], z[3])
    sel[1, 0], sel[1, 1], sel[1, 2], sel[1, 3] = ef_mul(zh[0], zh[1], zh[2], zh[3],
                                                        i0, i1, i2, i3)
    t0 = sub(z[0], winv)
    i0, i1, i2, i3 = ef_inv(t0, z[1], z[2], z[3])
    sel[2, 0], sel[2, 1], sel[2, 2], sel[2, 3] = ef_mul(zh[0], zh[1], zh[2], zh[3],
                                                        i0, i1, i2, i3)
    sel[3, 0], sel[3, 1], sel[3, 2], sel[3, 3] = t0, z[1], z[2], z[3]
    num = work[10]
    for g in range(4):
        m = ef_mul(sel[g, 0], sel[g, 1], sel[g, 2], sel[g, 3],
                   acc[g, 0], acc[g, 1], acc[g, 2], acc[g, 3])
        for c in range(4):
            num[c] = add(num[c], m[c])
    q = work[11]
    w0, w1, w2, w3 = ONE, ZERO, ZERO, ZERO
    for i in range(parts.shape[0]):
        m = ef_mul(w0, w1, w2, w3, parts[i, 0], parts[i, 1], parts[i, 2], parts[i, 3])
        for c in range(4):
            q[c] = add(q[c], m[c])
        w0, w1, w2, w3 = ef_mul(w0, w1, w2, w3, zn[0], zn[1], zn[2], zn[3])
    zq = work[12]
    zq[0], zq[1], zq[2], zq[3] = ef_mul(zh[0], zh[1], zh[2], zh[3], q[0], q[1], q[2], q[3])


def _composition_at(code, vals, outs, when, alpha, z, n, winv, parts):
    """:func:`_composition_kernel`: (N(z), Z_H(z), Z_H(z) Q(z)), uint64[4] each."""
    work = np.empty((13, 4), dtype=np.uint64)
    _composition_kernel(code, vals, outs, when, alpha, z, n, winv, parts, work)
    return work[10].copy(), work[9].copy(), work[12].copy()


def _composition_values(air, sh: TableShape, tp: TableProof, pv, chal, alpha, z):
    """(N(z), Z_H(z), Z_H(z) Q(z)), uint64[4] each, from the opened values through the
    AIR's constraint program (:func:`_composition_kernel`; the same values as
    air.eval.numerator_at_point)."""
    zf = np.asarray(z, np.uint64).reshape(4) % P64
    u64 = np.uint64
    blocks = [np.asarray(tp.ood_main, u64).reshape(-1, 4),
              np.asarray(tp.ood_main_next, u64).reshape(-1, 4)]
    if sh.prep_width:
        zc = zf.reshape(4, 1)
        blocks.append(np.asarray(_barycentric(air.preprocessed, zc, sh.log_n), u64))
        blocks.append(np.asarray(_barycentric(air.preprocessed, F.ef_mul_base(
            zc, F.root_of_unity(sh.log_n)), sh.log_n), u64) if sh.uses_next_prep
            else np.zeros((0, 4), u64))
    else:
        blocks += [np.zeros((0, 4), u64)] * 2
    if sh.aux_cols:
        blocks.append(_combine_ef_columns(tp.ood_aux))
        blocks.append(_combine_ef_columns(tp.ood_aux_next))
    else:
        blocks += [np.zeros((0, 4), u64)] * 2
    pvb = np.zeros((len(pv), 4), u64)
    pvb[:, 0] = np.asarray([int(v) for v in pv], u64).reshape(-1)
    blocks.append(pvb)
    blocks.append(np.stack([np.asarray(chal[nm], u64).reshape(4) for nm in CHALLENGE_NAMES]))
    blocks.append(np.asarray(tp.terminal if sh.aux_cols else np.zeros(4), u64).reshape(1, 4))
    code, lpos, lkind, lcol, consts, outs, when = _point_code(air)
    blocks.append(consts)
    sizes = np.array([b.shape[0] for b in blocks], np.int64)
    if lcol.size and bool(np.any(lcol >= sizes[lkind])):
        raise ShapeError("an opened value the constraints read is missing", sh.name)
    src = np.concatenate(blocks, axis=0) % P64
    offs = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    vals = np.zeros((code.shape[0], 4), u64)
    vals[lpos] = src[offs[lkind] + lcol]
    parts = _combine_ef_columns(tp.ood_parts)[:sh.num_parts]
    winv = pow(F.root_of_unity(sh.log_n), P - 2, P)
    num, zh, zq = _composition_at(code, vals, outs, when,
                                      np.asarray(alpha, u64).reshape(4) % P64, zf,
                                      sh.n, u64(winv), np.ascontiguousarray(parts, u64))
    return num, zh, zq


def composition_check(air, sh: TableShape, tp: TableProof, pv, chal, alpha, z) -> None:
    """The composition identity at z: N(z) = Z_H(z) Q(z) (CompositionError)."""
    num, zh, zq = _composition_values(air, sh, tp, pv, chal, alpha, z)
    if not zh.any():
        raise CompositionError("out-of-domain point lies in the trace domain", sh.name)
    if not np.array_equal(num, zq):
        raise CompositionError("constraints at z do not match the quotient parts", sh.name)


def warm_kernels() -> None:
    """Load (or compile, on a cold cache) the compiled helpers with exactly the argument
    types the verifier passes, like verifier.poseidon2 does (:func:`verifier.warm_kernels`)."""
    u64, u32, i64 = np.uint64, np.uint32, np.int64
    _barycentric(np.zeros((2, 1), u32), np.array([5, 1, 0, 0], u64), 1)
    _composition_at(np.zeros((1, 3), i64), np.zeros((1, 4), u64), np.zeros(1, i64),
                    np.zeros(1, i64), np.zeros(4, u64), np.array([5, 1, 0, 0], u64), 2,
                    u64(P - 1), np.zeros((1, 4), u64))


__all__ = ["composition_check"]


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("scalar.py", "field.py"))
