"""The verifier: parse and shape-check, replay the transcript, then check per table the
composition at z, proof-of-work, every Merkle path, DEEP and FRI; finally the LogUp
terminals.  Mirrors the prover's rounds step for step (docs/protocol.md)."""
from __future__ import annotations

import hashlib
import operator
import time
from dataclasses import dataclass, field
from typing import Collection, Sequence

import numpy as np
from numba import njit

from steadfast.air import CHALLENGE_NAMES, check_buses, numerator_at_point, point_leaf
from steadfast.air.builder import AirError

from . import merkle
from .errors import (CompositionError, FriError, LogUpError, MerkleError, ParameterError,
                     PowError, PublicValuesError, ShapeError)
from .field import F, P, bitrev, ef_col, barycentric_at, pow_scalar_arr
from .proof_format import Params, Proof, TableProof, decode
from .protocol import SHIFT, TableShape, absorb_statement, deep_groups, table_shape
from .security import SecurityReport, proof_security

#: the security minimum every verification requires unless told otherwise (conjectured
#: bits, docs/protocol.md section 7); the ``verify`` command and the library share it
DEFAULT_MIN_SECURITY_BITS = 100
from .transcript import Transcript


@dataclass
class VerifyResult:
    """What a successful verification returns."""
    public_values: list
    logs: list = field(default_factory=list)       # [main log, table 0 log, ...]
    seconds: float = 0.0
    security: SecurityReport | None = None         # the proof's security figure
    tables_prechecked: int = 0                     # tables skipped via verified_tables


def _expect(cond: bool, what: str, table: str, got, expected) -> None:
    if not cond:
        raise ShapeError(f"{what}: got {got}, expected {expected}", table)


def _check_table_shape(tp: TableProof, sh: TableShape, q: int) -> None:
    name = sh.name
    a = lambda arr: tuple(arr.shape)  # noqa: E731
    _expect(a(tp.public_values) == (sh.num_public,), "public_values shape", name,
            a(tp.public_values), (sh.num_public,))
    _expect(a(tp.main_root) == (8,), "main_root shape", name, a(tp.main_root), (8,))
    has_aux = sh.aux_cols > 0
    _expect(a(tp.aux_root) == ((8,) if has_aux else (0,)), "aux_root shape", name,
            a(tp.aux_root), (8,) if has_aux else (0,))
    _expect(a(tp.terminal) == ((4,) if has_aux else (0,)), "terminal shape", name,
            a(tp.terminal), (4,) if has_aux else (0,))
    _expect(a(tp.parts_root) == (8,), "parts_root shape", name, a(tp.parts_root), (8,))
    w, aw, pw = sh.main_width, sh.aux_width, sh.parts_width
    wn = w if sh.uses_next_main else 0
    for nm, shape in (("ood_main", (w, 4)), ("ood_main_next", (wn, 4)),
                      ("ood_aux", (aw, 4)), ("ood_aux_next", (aw, 4)),
                      ("ood_parts", (pw, 4)), ("fri_roots", (sh.num_fri_layers, 8)),
                      ("final_poly", (sh.final_poly_len, 4)),
                      ("fold_nonces", (sh.num_fri_layers,)),
                      ("main_rows", (q, w)), ("main_paths", (q, sh.log_lde, 8)),
                      ("parts_rows", (q, pw)), ("parts_paths", (q, sh.log_lde, 8))):
        _expect(a(getattr(tp, nm)) == shape, f"{nm} shape", name, a(getattr(tp, nm)), shape)
    aux_rows = (q, aw) if has_aux else (0, 0)
    aux_paths = (q, sh.log_lde, 8) if has_aux else (0, 0, 8)
    _expect(a(tp.aux_rows) == aux_rows, "aux_rows shape", name, a(tp.aux_rows), aux_rows)
    _expect(a(tp.aux_paths) == aux_paths, "aux_paths shape", name, a(tp.aux_paths), aux_paths)
    _expect(len(tp.fri_leaves) == sh.num_fri_layers, "FRI layer count", name,
            len(tp.fri_leaves), sh.num_fri_layers)
    for i, (lv, pth) in enumerate(zip(tp.fri_leaves, tp.fri_paths)):
        depth = sh.log_lde - 1 - i
        _expect(a(lv) == (q, 8), f"fri_leaves[{i}] shape", name, a(lv), (q, 8))
        _expect(a(pth) == (q, depth, 8), f"fri_paths[{i}] shape", name, a(pth), (q, depth, 8))


def check_shapes(proof: Proof, airs: Sequence) -> list[TableShape]:
    """Shape-check the whole proof against the AIRs and parameters (no hashing)."""
    if len(proof.tables) != len(airs):
        raise ShapeError(f"proof has {len(proof.tables)} tables, the statement {len(airs)}")
    shapes = []
    for air, tp in zip(airs, proof.tables):
        try:
            sh = table_shape(air, tp.log_n, proof.params)
        except (ValueError, AirError) as e:
            raise ShapeError(str(e), air.name) from None
        _check_table_shape(tp, sh, proof.params.num_queries)
        shapes.append(sh)
    return shapes


def _ef_eq(a, b) -> bool:
    return bool(np.array_equal(np.asarray(a, np.uint64).reshape(4, -1),
                               np.asarray(b, np.uint64).reshape(4, -1)))


# ---------------------------------------------------------------- compiled helpers
# Scalar BabyBear / EF arithmetic on canonical np.uint64 values: a product of two residues
# is < p^2 < 2^62 and is reduced at once; sums of a few reduced terms stay far below 2^64.
_P64 = np.uint64(P)
_W64 = np.uint64(11)                      # X^4 = 11 in EF
_ZERO = np.uint64(0)
_ONE = np.uint64(1)
_TWO = np.uint64(2)
_PM2 = P - 2


@njit(inline="always")
def _mul(a, b):
    return (a * b) % _P64


@njit(inline="always")
def _add(a, b):
    s = a + b
    return s - _P64 if s >= _P64 else s


@njit(inline="always")
def _sub(a, b):
    s = a + _P64 - b
    return s - _P64 if s >= _P64 else s


@njit(inline="always")
def _inv(a):
    """a^(p-2) (0 maps to 0, like air.field.inv)."""
    r = _ONE
    b = a % _P64
    e = _PM2
    while e:
        if e & 1:
            r = _mul(r, b)
        b = _mul(b, b)
        e >>= 1
    return r


@njit(inline="always")
def _ef_mul(a0, a1, a2, a3, b0, b1, b2, b3):
    """Schoolbook product mod X^4 - 11: each partial product reduced (< p); the sums of
    at most 4 residues plus 11 times a sum of 3 (< 15p < 2^35) cannot wrap."""
    c0 = _mul(a0, b0) + _mul(_W64, (_mul(a1, b3) + _mul(a2, b2) + _mul(a3, b1)) % _P64)
    c1 = _mul(a0, b1) + _mul(a1, b0) + _mul(_W64, (_mul(a2, b3) + _mul(a3, b2)) % _P64)
    c2 = _mul(a0, b2) + _mul(a1, b1) + _mul(a2, b0) + _mul(_W64, _mul(a3, b3))
    c3 = _mul(a0, b3) + _mul(a1, b2) + _mul(a2, b1) + _mul(a3, b0)
    return c0 % _P64, c1 % _P64, c2 % _P64, c3 % _P64


@njit(inline="always")
def _ef_inv(a0, a1, a2, a3):
    """Inverse via the norm (as air.field.ef_inv): with conj = (a0, -a1, a2, -a3),
    a conj = e0 + e2 X^2 and N = e0^2 - 11 e2^2; a^-1 = conj (e0 - e2 X^2) / N.
    Zero maps to zero."""
    n1 = _sub(_ZERO, a1)
    n3 = _sub(_ZERO, a3)
    e0, _, e2, _ = _ef_mul(a0, a1, a2, a3, a0, n1, a2, n3)
    ni = _inv(_sub(_mul(e0, e0), _mul(_W64, _mul(e2, e2))))
    c0, c1, c2, c3 = _ef_mul(a0, n1, a2, n3, e0, _ZERO, _sub(_ZERO, e2), _ZERO)
    return _mul(c0, ni), _mul(c1, ni), _mul(c2, ni), _mul(c3, ni)


@njit(cache=True)
def _deep_kernel(vals, lam, ood, nxt, x, pts):
    """DEEP quotient at the queries: sum over opened columns j (in DEEP order) of
    lam^j (f_j(x) - v_j) / (x - zeta_j), zeta_j = pts[nxt[j]].  vals (q, C) base rows,
    lam (4,) EF, ood (C, 4) opened EF values, x (q,) base points, pts (2, 4) EF points.
    Columns sharing a point share the division: sum_j a_j / d = (sum_j a_j) / d."""
    q, c = vals.shape
    lp = np.empty((c, 4), dtype=np.uint64)              # lam^j
    cst = np.zeros((2, 4), dtype=np.uint64)             # sum_j lam^j v_j per point
    p0, p1, p2, p3 = _ONE, _ZERO, _ZERO, _ZERO
    for j in range(c):
        lp[j, 0], lp[j, 1], lp[j, 2], lp[j, 3] = p0, p1, p2, p3
        v = _ef_mul(p0, p1, p2, p3, ood[j, 0] % _P64, ood[j, 1] % _P64, ood[j, 2] % _P64,
                    ood[j, 3] % _P64)
        f = 1 if nxt[j] else 0
        for k in range(4):
            cst[f, k] = _add(cst[f, k], v[k])
        p0, p1, p2, p3 = _ef_mul(p0, p1, p2, p3, lam[0], lam[1], lam[2], lam[3])
    out = np.empty((4, q), dtype=np.uint64)
    acc = np.empty((2, 4), dtype=np.uint64)
    for r in range(q):
        acc[:] = 0
        for j in range(c):
            f = 1 if nxt[j] else 0
            a = np.uint64(vals[r, j]) % _P64
            for k in range(4):
                acc[f, k] += _mul(a, lp[j, k])          # < C p < 2^40: no wrap
        t = np.zeros(4, dtype=np.uint64)
        for f in range(2):
            d0, d1, d2, d3 = _ef_inv(_sub(x[r] % _P64, pts[f, 0]), _sub(_ZERO, pts[f, 1]),
                                     _sub(_ZERO, pts[f, 2]), _sub(_ZERO, pts[f, 3]))
            n0 = _sub(acc[f, 0] % _P64, cst[f, 0])
            n1 = _sub(acc[f, 1] % _P64, cst[f, 1])
            n2 = _sub(acc[f, 2] % _P64, cst[f, 2])
            n3 = _sub(acc[f, 3] % _P64, cst[f, 3])
            m = _ef_mul(n0, n1, n2, n3, d0, d1, d2, d3)
            for k in range(4):
                t[k] = _add(t[k], m[k])
        for k in range(4):
            out[k, r] = t[k]
    return out


@njit(cache=True)
def _fri_kernel(leaves, s, x, values, betas, final):
    """All FRI folds of one table at once.  leaves (L, q, 8) opened pairs e0 | e1, s (q,)
    query indices, x (q,) points, values (4, q) layer-0 values, betas (L, 4), final
    (F, 4) final polynomial.  Returns (mismatch (L,) first query whose opened value differs
    from the folded value, or -1; the folded values (4, q); the final check).  The fold:
    v' = (e0 + e1)/2 + beta (e0 - e1) / (2 x_even), x_even = x if s is even else -x; then
    x <- x^2, s <- s >> 1.  Computed for every layer regardless of earlier failures (pure
    arithmetic), so the caller reports failures in protocol order."""
    nl = leaves.shape[0]
    q = s.shape[0]
    inv2 = np.uint64((P + 1) // 2)
    mismatch = np.full(nl, -1, dtype=np.int64)
    cur = values.copy()
    xs = np.empty(q, dtype=np.uint64)
    for r in range(q):
        sr = s[r]
        xr = x[r] % _P64
        ix = _inv(xr)
        v0, v1, v2, v3 = cur[0, r], cur[1, r], cur[2, r], cur[3, r]
        for i in range(nl):
            odd = sr & 1
            o = 4 if odd else 0
            if mismatch[i] < 0 and (np.uint64(leaves[i, r, o]) != v0 or
                                    np.uint64(leaves[i, r, o + 1]) != v1 or
                                    np.uint64(leaves[i, r, o + 2]) != v2 or
                                    np.uint64(leaves[i, r, o + 3]) != v3):
                mismatch[i] = r
            ixe = _mul(_sub(_ZERO, ix) if odd else ix, inv2)
            b0, b1, b2, b3 = betas[i, 0], betas[i, 1], betas[i, 2], betas[i, 3]
            # (e0 + e1) / 2 and (e0 - e1) / (2 x_even), coefficientwise
            e0 = np.uint64(leaves[i, r, 0]) % _P64
            e1 = np.uint64(leaves[i, r, 4]) % _P64
            h0, d0 = _mul(_add(e0, e1), inv2), _mul(_sub(e0, e1), ixe)
            e0 = np.uint64(leaves[i, r, 1]) % _P64
            e1 = np.uint64(leaves[i, r, 5]) % _P64
            h1, d1 = _mul(_add(e0, e1), inv2), _mul(_sub(e0, e1), ixe)
            e0 = np.uint64(leaves[i, r, 2]) % _P64
            e1 = np.uint64(leaves[i, r, 6]) % _P64
            h2, d2 = _mul(_add(e0, e1), inv2), _mul(_sub(e0, e1), ixe)
            e0 = np.uint64(leaves[i, r, 3]) % _P64
            e1 = np.uint64(leaves[i, r, 7]) % _P64
            h3, d3 = _mul(_add(e0, e1), inv2), _mul(_sub(e0, e1), ixe)
            m0, m1, m2, m3 = _ef_mul(b0, b1, b2, b3, d0, d1, d2, d3)
            v0, v1, v2, v3 = _add(h0, m0), _add(h1, m1), _add(h2, m2), _add(h3, m3)
            xr = _mul(xr, xr)
            ix = _mul(ix, ix)
            sr = sr >> 1
        cur[0, r], cur[1, r], cur[2, r], cur[3, r] = v0, v1, v2, v3
        xs[r] = xr
    # final polynomial, Horner at x
    ok = True
    for r in range(q):
        a0, a1, a2, a3 = _ZERO, _ZERO, _ZERO, _ZERO
        for j in range(final.shape[0] - 1, -1, -1):
            a0 = _add(_mul(a0, xs[r]), final[j, 0])
            a1 = _add(_mul(a1, xs[r]), final[j, 1])
            a2 = _add(_mul(a2, xs[r]), final[j, 2])
            a3 = _add(_mul(a3, xs[r]), final[j, 3])
        if a0 != cur[0, r] or a1 != cur[1, r] or a2 != cur[2, r] or a3 != cur[3, r]:
            ok = False
    return mismatch, cur, ok


@njit(cache=True)
def _bary_kernel(cols, z, wn):
    """sum_i f_i w^i / (z - w^i) for every column f of cols (uint32[n, k]) at the EF point
    z (uint64[4]), w = wn a primitive n-th root of unity; returns (ok, sums (k, 4)); ok is False when some z - w^i is zero (the
    caller then falls back to verifier.field.barycentric_at, which maps 1/0 to 0).

    With a = z - t (t = w^i base): conj(a) = (a0, -a1, a2, -a3), a conj(a) = e0 + e2 X^2,
      e0 = a0^2 + 11 (a2^2 - 2 a1 a3),   e2 = 2 a0 a2 - a1^2 - 11 a3^2,
      N = e0^2 - 11 e2^2 (base), and 1/a = conj(a) (e0 - e2 X^2) / N
          = (a0 e0 - 11 a2 e2, 11 a3 e2 - a1 e0, a2 e0 - a0 e2, a1 e2 - a3 e0) / N.
    Only a0 and N depend on i, so with c_i = f_i t_i / N_i the sum needs four base sums
    A = sum c e0, B = sum c e2, C = sum c a0 e0, D = sum c a0 e2; the N_i are inverted
    together (Montgomery's trick: one inversion)."""
    n, k = cols.shape
    z0, a1, a2, a3 = z[0], z[1], z[2], z[3]
    k1 = _mul(_W64, _sub(_mul(a2, a2), _mul(_TWO, _mul(a1, a3))))
    k2 = _sub(_ZERO, _add(_mul(a1, a1), _mul(_W64, _mul(a3, a3))))
    a2x2 = _mul(_TWO, a2)
    w = _ONE
    a0s = np.empty(n, dtype=np.uint64)
    e0s = np.empty(n, dtype=np.uint64)
    e2s = np.empty(n, dtype=np.uint64)
    ts = np.empty(n, dtype=np.uint64)
    pre = np.empty(n, dtype=np.uint64)
    run = _ONE
    for i in range(n):
        a0 = _sub(z0, w)
        e0 = _add(_mul(a0, a0), k1)
        e2 = _add(_mul(a2x2, a0), k2)
        nrm = _sub(_mul(e0, e0), _mul(_W64, _mul(e2, e2)))
        if nrm == 0:
            return False, np.zeros((k, 4), dtype=np.uint64)
        a0s[i], e0s[i], e2s[i], ts[i] = a0, e0, e2, w
        pre[i] = run                              # product of N_0 .. N_(i-1)
        run = _mul(run, nrm)
        w = _mul(w, wn)
    inv_run = _inv(run)
    u = np.empty(n, dtype=np.uint64)              # u_i = t_i / N_i
    for i in range(n - 1, -1, -1):
        nrm = _sub(_mul(e0s[i], e0s[i]), _mul(_W64, _mul(e2s[i], e2s[i])))
        u[i] = _mul(ts[i], _mul(inv_run, pre[i]))
        inv_run = _mul(inv_run, nrm)
    out = np.empty((k, 4), dtype=np.uint64)
    for j in range(k):
        sa = _ZERO
        sb = _ZERO
        sc = _ZERO
        sd = _ZERO
        for i in range(n):
            c = _mul(np.uint64(cols[i, j]) % _P64, u[i])
            ca = _mul(c, a0s[i])
            # each term < p; n < 2^27 terms sum to < 2^58: reduced once at the end
            sa += _mul(c, e0s[i])
            sb += _mul(c, e2s[i])
            sc += _mul(ca, e0s[i])
            sd += _mul(ca, e2s[i])
        sa %= _P64
        sb %= _P64
        sc %= _P64
        sd %= _P64
        out[j, 0] = _sub(sc, _mul(_W64, _mul(a2, sb)))
        out[j, 1] = _sub(_mul(_W64, _mul(a3, sb)), _mul(a1, sa))
        out[j, 2] = _sub(_mul(a2, sa), sd)
        out[j, 3] = _sub(_mul(a1, sb), _mul(a3, sa))
    return True, out


def _barycentric(columns, z, log_n: int) -> np.ndarray:
    """verifier.field.barycentric_at (same values, uint32 (k, 4)) through _bary_kernel;
    falls back to it when z lies in the domain (a zero denominator)."""
    cols = np.ascontiguousarray(columns, dtype=np.uint32)
    zf = np.ascontiguousarray(np.asarray(z, np.uint64).reshape(4))
    n = 1 << log_n
    if cols.ndim != 2 or cols.shape[0] != n:
        return barycentric_at(columns, z, log_n)
    ok, sums = _bary_kernel(cols, zf, np.uint64(F.root_of_unity(log_n)))
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


def _composition(air, sh: TableShape, tp: TableProof, pv, chal, alpha, z) -> None:
    zf = ef_col(z).reshape(4, 1)
    omega = F.root_of_unity(sh.log_n)
    z_next = F.ef_mul_base(zf, omega)
    opened = {("main", False): tp.ood_main, ("main", True): tp.ood_main_next}
    if sh.prep_width:
        opened[("prep", False)] = _barycentric(air.preprocessed, zf, sh.log_n)
        if sh.uses_next_prep:
            opened[("prep", True)] = _barycentric(air.preprocessed, z_next, sh.log_n)
    if sh.aux_cols:
        opened[("aux", False)] = _combine_ef_columns(tp.ood_aux)
        opened[("aux", True)] = _combine_ef_columns(tp.ood_aux_next)
    term = tp.terminal if sh.aux_cols else np.zeros(4, np.uint32)
    leaf = point_leaf(opened, [int(v) for v in pv], chal, term)
    num, zh = numerator_at_point(air, leaf, ef_col(alpha), zf, sh.log_n)
    if F.is_zero_ef(zh).all():
        raise CompositionError("out-of-domain point lies in the trace domain", sh.name)
    # Q(z) = sum_i z^(i n) q_i(z), q_i from its 4 coefficient columns
    zn = F.ef_pow(zf, sh.n)
    qz = np.zeros((4, 1), dtype=np.uint64)
    zpow = F.ef_from_base(np.ones(1, np.uint64))
    parts = _combine_ef_columns(tp.ood_parts)
    for i in range(sh.num_parts):
        qz = F.ef_add(qz, F.ef_mul(zpow, ef_col(parts[i]).reshape(4, 1)))
        zpow = F.ef_mul(zpow, zn)
    if not _ef_eq(num, F.ef_mul(zh, qz)):
        raise CompositionError("constraints at z do not match the quotient parts", sh.name)


def _deep_at_queries(sh: TableShape, tp: TableProof, rows: dict, x, z, lam) -> np.ndarray:
    """DEEP quotient at the queried points x (base, (q,)): (4, q) EF values,
    sum_j lam^j (f_j(x) - v_j) / (x - zeta_j) over the opened columns in DEEP order
    (one compiled call, :func:`_deep_kernel`)."""
    zf = np.asarray(z, np.uint64).reshape(4)
    z_next = F.ef_mul_base(zf.reshape(4, 1), F.root_of_unity(sh.log_n)).reshape(4)
    ood = {("main", False): tp.ood_main, ("main", True): tp.ood_main_next,
           ("aux", False): tp.ood_aux, ("aux", True): tp.ood_aux_next,
           ("parts", False): tp.ood_parts}
    groups = deep_groups(sh)
    vals = np.ascontiguousarray(np.concatenate([np.asarray(rows[m], np.uint32)
                                                for m, _ in groups], axis=1))
    opened = np.ascontiguousarray(np.concatenate([np.asarray(ood[g], np.uint64).reshape(-1, 4)
                                                  for g in groups], axis=0))
    nxt = np.concatenate([np.full(np.asarray(rows[m]).shape[1], bool(n)) for m, n in groups])
    pts = np.ascontiguousarray(np.stack([zf, z_next]).astype(np.uint64))
    return _deep_kernel(vals, np.ascontiguousarray(np.asarray(lam, np.uint64).reshape(4)),
                        opened, nxt, np.ascontiguousarray(np.asarray(x, np.uint64).reshape(-1)),
                        pts)


def _fri(sh: TableShape, tp: TableProof, queries, x, values, betas) -> None:
    """Check every FRI layer: the opened pair holds the current value, authenticate it,
    fold; finally compare with the final polynomial.  The folds of all layers are one
    compiled call (:func:`_fri_kernel`); failures are then reported in protocol order
    (layer by layer: value, then path; the final polynomial last)."""
    name = sh.name
    q = queries.shape[0]
    nl = sh.num_fri_layers
    leaves = (np.ascontiguousarray(np.stack([np.asarray(lv, np.uint32) for lv in tp.fri_leaves]))
              if nl else np.zeros((0, q, 8), np.uint32))
    bet = (np.ascontiguousarray(np.stack([np.asarray(b, np.uint64).reshape(4) for b in betas]))
           if nl else np.zeros((0, 4), np.uint64))
    mismatch, _, final_ok = _fri_kernel(
        leaves, np.ascontiguousarray(queries, dtype=np.int64),
        np.ascontiguousarray(x, dtype=np.uint64), np.ascontiguousarray(values, dtype=np.uint64),
        bet, np.ascontiguousarray(np.asarray(tp.final_poly, np.uint64).reshape(-1, 4)))
    s = queries.copy()
    for i in range(nl):
        if mismatch[i] >= 0:
            raise FriError(f"layer {i}: opened value differs from the folded value "
                           f"(query {int(mismatch[i])})", name)
        ok = merkle.check_rows(tp.fri_roots[i], tp.fri_leaves[i], s >> 1, tp.fri_paths[i])
        if not ok.all():
            raise MerkleError(f"FRI layer {i}: path of query {int(np.argmin(ok))} does not "
                              "authenticate", name)
        s = s >> 1
    if not final_ok:
        raise FriError("final polynomial disagrees with the folded values", name)


def _verify_table(tr: Transcript, air, sh: TableShape, tp: TableProof, params, chal,
                  composition: bool = True) -> None:
    """One table's checks on its transcript fork.  ``composition=False`` leaves out the
    composition at z: only for the prover's XCHECK (prover/xcheck.py check_section), which
    ran that same check on the same opened values after R3; :func:`verify` always checks
    it."""
    name = sh.name
    pv = tp.public_values
    # ---- R1 (fork): aux commitment and claimed LogUp terminal
    if sh.aux_cols:
        tr.absorb("aux_root", tp.aux_root)
        tr.absorb("logup_terminal", tp.terminal)
    # ---- R2: alpha, quotient parts
    alpha = tr.sample_ef("alpha")
    tr.absorb("parts_root", tp.parts_root)
    # ---- R3: z (after a proof of work) and the opened values
    if not tr.check_pow("zeta_pow", tp.zeta_nonce, params.commit_pow_bits):
        raise PowError(f"zeta nonce {tp.zeta_nonce} does not give {params.commit_pow_bits} "
                       "zero bits", name)
    z = tr.sample_ef("zeta")
    tr.absorb("ood_main", tp.ood_main)
    if sh.uses_next_main:
        tr.absorb("ood_main_next", tp.ood_main_next)
    if sh.aux_cols:
        tr.absorb("ood_aux", tp.ood_aux)
        tr.absorb("ood_aux_next", tp.ood_aux_next)
    tr.absorb("ood_parts", tp.ood_parts)
    if composition:
        _composition(air, sh, tp, pv, chal, alpha, z)
    # ---- R4: DEEP, FRI commitments, final polynomial, proof of work, queries
    if not tr.check_pow("deep_pow", tp.deep_nonce, params.deep_pow_bits):
        raise PowError(f"DEEP nonce {tp.deep_nonce} does not give {params.deep_pow_bits} "
                       "zero bits", name)
    lam = tr.sample_ef("deep_lambda")
    betas = []
    for i in range(sh.num_fri_layers):
        tr.absorb("fri_root", tp.fri_roots[i])
        if not tr.check_pow("fold_pow", int(tp.fold_nonces[i]), params.commit_pow_bits):
            raise PowError(f"FRI layer {i} nonce {int(tp.fold_nonces[i])} does not give "
                           f"{params.commit_pow_bits} zero bits", name)
        betas.append(tr.sample_ef("fri_beta"))
    tr.absorb("fri_final", tp.final_poly)
    if not tr.check_pow("pow", tp.pow_nonce, params.pow_bits):
        raise PowError(f"nonce {tp.pow_nonce} does not give {params.pow_bits} zero bits", name)
    queries = tr.sample_bits("queries", sh.log_lde, params.num_queries)
    # trace openings
    rows = {"main": tp.main_rows, "parts": tp.parts_rows}
    checks = [("main", tp.main_root, tp.main_rows, tp.main_paths),
              ("parts", tp.parts_root, tp.parts_rows, tp.parts_paths)]
    if sh.aux_cols:
        rows["aux"] = tp.aux_rows
        checks.insert(1, ("aux", tp.aux_root, tp.aux_rows, tp.aux_paths))
    for what, root, r, paths in checks:
        ok = merkle.check_rows(root, r, queries, paths)
        if not ok.all():
            raise MerkleError(f"{what} opening of query {int(np.argmin(ok))} does not "
                              "authenticate", name)
    # x_s = g * w_N^bitrev(s)
    x = F.mul(pow_scalar_arr(F.root_of_unity(sh.log_lde), bitrev(queries, sh.log_lde)), SHIFT)
    values = _deep_at_queries(sh, tp, rows, x, z, lam)
    _fri(sh, tp, queries, x, values, betas)


# Public per-table entry points (the prover's XCHECK runs them on a table's finished
# section and on its opened values; docs/diagnostics.md)
verify_table = _verify_table
composition_check = _composition
check_table_shape = _check_table_shape


def validate_min_security_bits(value) -> int | None:
    """Validate a ``min_security_bits`` argument: None, or an integer >= 0."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("min_security_bits must be an int or None, not bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"min_security_bits must be an int or None, not "
                        f"{type(value).__name__}") from None
    if value < 0:
        raise ValueError(f"min_security_bits must be >= 0, got {value}")
    return value


def check_security(params: Params, min_security_bits: int | None,
                   airs: Sequence = (), log_ns: Sequence[int] = ()) -> SecurityReport:
    """Refuse proofs whose parameters are too weak for their shapes: raise
    :class:`ParameterError` when the security figure of ``params`` for tables ``airs`` of
    heights 2^``log_ns`` (:func:`verifier.security.proof_security`: the sum of every
    soundness term -- FRI queries and proof of work, LogUp, alpha, OOD, DEEP, FRI folds --
    over the tables, docs/protocol.md section 7) is below ``min_security_bits``;
    ``None`` or 0 sets no minimum.  Returns the report.  Costs nothing: run it before any
    hashing, so that a cheap weak proof is turned away before the verifier spends work on
    it."""
    min_security_bits = validate_min_security_bits(min_security_bits)
    report = proof_security(params, airs, log_ns)
    if min_security_bits and report.bits < min_security_bits:
        raise ParameterError(
            f"proof parameters (log_blowup {params.log_blowup}, {params.num_queries} queries, "
            f"{params.pow_bits} query proof-of-work bits, LogUp/DEEP/commit grinding "
            f"{params.logup_pow_bits}/{params.deep_pow_bits}/{params.commit_pow_bits} bits) "
            f"give {report.bits} conjectured security bits for these tables, below the "
            f"required {min_security_bits} (weakest term: {report.limiting}, "
            f"{report.terms.get(report.limiting, 0):.1f} bits)",
            bits=report.bits, required=min_security_bits)
    return report


def table_check_key(fork: Transcript, air, section: bytes, params: Params, chal: dict) -> bytes:
    """A digest of everything :func:`verify_table` reads for one table: the transcript
    fork's state, the AIR fingerprint, the section's exact bytes, the parameters and the
    LogUp challenges.  Two checks with the same key are the same computation, so a key
    recorded after a passing check lets :func:`verify` skip that table (the prover checks
    tables as they finish, overlapped with device work, docs/diagnostics.md)."""
    h = hashlib.sha256(b"steadfast/table-check/v2")
    h.update(np.ascontiguousarray(fork.state, np.uint64).tobytes())
    h.update(np.asarray(list(fork.inbuf), np.uint64).tobytes() + b"|")
    h.update(np.asarray(list(fork.outbuf), np.uint64).tobytes() + b"|")
    h.update(np.asarray(air.fingerprint(), np.uint64).tobytes())
    h.update(repr(sorted(vars(params).items())).encode())
    for name in sorted(chal):
        h.update(name.encode() + np.ascontiguousarray(chal[name], np.uint64).tobytes())
    h.update(len(section).to_bytes(8, "little") + bytes(section))
    return h.digest()


def verify(proof_bytes: bytes, airs: Sequence, public_values: Sequence | None = None,
           *, min_security_bits: int | None = DEFAULT_MIN_SECURITY_BITS,
           verified_tables: Collection[bytes] = ()) -> VerifyResult:
    """Verify a proof for the tables ``airs`` (in table order).

    ``min_security_bits``: refuse (:class:`ParameterError`) a proof whose parameters give
    fewer conjectured security bits for its tables (:func:`check_security`), checked after
    parsing and the shape check, before any hashing.  The default is
    :data:`DEFAULT_MIN_SECURITY_BITS` (100); 0 or ``None`` accepts the proof's own
    parameters, whatever they are -- say so explicitly (tests with weak parameters do).

    ``public_values``: the expected public values per table (None: accept those in the
    proof and return them).  Raises a :class:`verifier.errors.VerificationError`
    subclass on rejection; returns a :class:`VerifyResult` on success.

    ``verified_tables``: keys (:func:`table_check_key`) of per-table checks that already
    passed on identical inputs; a table whose key is among them is not checked again
    (the prover's overlapped self-check).  Everything else -- parsing, shapes, the
    statement, the main transcript, the LogUp sum -- always runs.
    """
    t0 = time.perf_counter()
    min_security_bits = validate_min_security_bits(min_security_bits)   # before the proof
    airs = list(airs)
    proof = decode(proof_bytes)
    shapes = check_shapes(proof, airs)
    security = check_security(proof.params, min_security_bits, airs, [sh.log_n for sh in shapes])
    try:
        check_buses(airs)
    except AirError as e:
        raise ShapeError(str(e)) from None
    pvs = [[int(v) for v in tp.public_values] for tp in proof.tables]
    if public_values is not None:
        if len(public_values) != len(airs):
            raise PublicValuesError(f"{len(public_values)} public-value lists for {len(airs)} tables")
        for air, got, exp in zip(airs, pvs, public_values):
            exp = [int(v) for v in (exp or ())]
            if got != exp:
                raise PublicValuesError(f"proof has {got}, statement {exp}", air.name)
    tr = Transcript()
    absorb_statement(tr, proof.params, airs, shapes, pvs)
    for tp in proof.tables:
        tr.absorb("main_root", tp.main_root)
    if not tr.check_pow("logup_pow", proof.logup_nonce, proof.params.logup_pow_bits):
        raise PowError(f"LogUp nonce {proof.logup_nonce} does not give "
                       f"{proof.params.logup_pow_bits} zero bits")
    chal = {CHALLENGE_NAMES[0]: ef_col(tr.sample_ef("logup_beta")),
            CHALLENGE_NAMES[1]: ef_col(tr.sample_ef("logup_gamma"))}
    logs = [tr.log]
    skipped = 0
    for i, (air, sh, tp) in enumerate(zip(airs, shapes, proof.tables)):
        fork = tr.fork(i)
        if verified_tables and table_check_key(fork, air, tp.raw, proof.params,
                                               chal) in verified_tables:
            skipped += 1
            logs.append(None)           # (the check ran earlier, on this exact state)
            continue
        _verify_table(fork, air, sh, tp, proof.params, chal)
        logs.append(fork.log)
    # LogUp: the terminals of all tables must cancel
    total = np.zeros((4, 1), dtype=np.uint64)
    for sh, tp in zip(shapes, proof.tables):
        if sh.aux_cols:
            total = F.ef_add(total, ef_col(tp.terminal).reshape(4, 1))
    if np.any(total):
        raise LogUpError("the LogUp terminal sums of the tables do not add up to zero")
    return VerifyResult(public_values=pvs, logs=logs, seconds=time.perf_counter() - t0,
                        security=security, tables_prechecked=skipped)


def _warm_kernels() -> None:
    """Load (or compile, on a cold cache) the compiled helpers at import, with exactly
    the argument types the verifier passes, like verifier.poseidon2 does."""
    u64, u32 = np.uint64, np.uint32
    _bary_kernel(np.zeros((2, 1), u32), np.array([5, 1, 0, 0], u64), u64(P - 1))
    _deep_kernel(np.zeros((1, 1), u32), np.array([1, 0, 0, 0], u64), np.zeros((1, 4), u64),
                 np.zeros(1, np.bool_), np.ones(1, u64), np.array([[5, 1, 0, 0]] * 2, u64))
    _fri_kernel(np.zeros((1, 1, 8), u32), np.zeros(1, np.int64), np.ones(1, u64),
                np.zeros((4, 1), u64), np.zeros((1, 4), u64), np.zeros((1, 4), u64))


_warm_kernels()
