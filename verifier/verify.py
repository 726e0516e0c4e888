"""The verifier (proof format v3): parse and shape-check, replay the transcript; per
table (on its fork) the composition at z and the table digest; then the join -- one FRI
for all tables: mu, the layer caps and challenges, the final polynomial, the queries;
every opening (deduplicated rows, Merkle multiproofs against caps), the DEEP quotients,
the folds with their roll-ins, the final polynomial.  Mirrors the prover's rounds step
for step (docs/protocol.md).

Public entry points besides :func:`verify` (the prover's self-check uses them):

* :func:`verify_table` ``(fork, air, shape, section, params, challenges, composition=True)
  -> TableState``: one table's fork replayed up to its ``table_digest`` (proof-of-work
  checks, the composition check at z unless ``composition=False``);
* :func:`composition_check`: the composition identity at z alone;
* :func:`check_table_shape` ``(section, shape, params)``: a section's shapes that follow
  from the AIR, its height and the parameters (no hashing);
* :func:`verify_join` ``(tr, params, shapes, sections, states, fri)``: the join on the main
  transcript (after every fork): the one FRI, the openings of every table, the final
  polynomial.
"""
from __future__ import annotations

import hashlib
import operator
import time
from dataclasses import dataclass, field
from typing import Collection, Sequence

import numpy as np
from numba import njit

from steadfast.air import CHALLENGE_NAMES, check_buses
from steadfast.air.builder import AirError

from . import merkle
from .errors import (CompositionError, FriError, LogUpError, MerkleError, ParameterError,
                     PowError, PublicValuesError, ShapeError)
from .field import F, P, ef_col, barycentric_at
from .proof_format import FriProof, Params, Proof, TableProof, decode
from .protocol import SHIFT, TableShape, absorb_statement, deep_groups, fri_layer_heights, table_shape
from .security import SecurityReport, proof_security
from .transcript import Transcript

#: the security minimum every verification requires unless told otherwise (conjectured
#: bits, docs/protocol.md section 7); the ``verify`` command and the library share it
DEFAULT_MIN_SECURITY_BITS = 100


@dataclass
class VerifyResult:
    """What a successful verification returns."""
    public_values: list
    logs: list = field(default_factory=list)       # [main log, table 0 log, ...]
    seconds: float = 0.0
    security: SecurityReport | None = None         # the proof's security figure
    tables_prechecked: int = 0                     # tables whose composition check was skipped


@dataclass
class TableState:
    """What one table's fork hands to the join: its challenges z and lambda (uint64[4])
    and its ``table_digest`` (8 base elements)."""
    z: np.ndarray
    lam: np.ndarray
    digest: list


def _expect(cond: bool, what: str, table: str | None, got, expected) -> None:
    if not cond:
        raise ShapeError(f"{what}: got {got}, expected {expected}", table)


def _check_table_shape(tp: TableProof, sh: TableShape, params: Params) -> None:
    """Every shape of a section that follows from the AIR, the table height and the
    parameters (the opened-row and node counts need the queries: :func:`verify_join`)."""
    if not isinstance(params, Params):
        raise TypeError("check_table_shape(section, shape, params): params must be a "
                        f"verifier.proof_format.Params (v3), got {type(params).__name__}")
    name = sh.name
    a = lambda arr: tuple(np.shape(arr))  # noqa: E731
    _expect(tp.log_n == sh.log_n, "log_n", name, tp.log_n, sh.log_n)
    caps = 1 << merkle.cap_height(sh.log_lde, params.log_cap)
    has_aux = sh.aux_cols > 0
    w, aw, pw = sh.main_width, sh.aux_width, sh.parts_width
    wn = w if sh.uses_next_main else 0
    expected = [("public_values", (sh.num_public,)), ("main_cap", (caps, 8)),
                ("aux_cap", (caps if has_aux else 0, 8)), ("terminal", (4,) if has_aux else (0,)),
                ("parts_cap", (caps, 8)), ("ood_main", (w, 4)), ("ood_main_next", (wn, 4)),
                ("ood_aux", (aw, 4)), ("ood_aux_next", (aw, 4)), ("ood_parts", (pw, 4))]
    for nm, shape in expected:
        _expect(a(getattr(tp, nm)) == shape, f"{nm} shape", name, a(getattr(tp, nm)), shape)
    d = a(tp.main_rows)[0] if len(a(tp.main_rows)) == 2 else -1
    _expect(1 <= d <= params.num_queries, "opened rows", name, d, f"1..{params.num_queries}")
    rows = [("main_rows", (d, w)), ("parts_rows", (d, pw)),
            ("aux_rows", (d, aw) if has_aux else (0, 0))]
    for nm, shape in rows:
        _expect(a(getattr(tp, nm)) == shape, f"{nm} shape", name, a(getattr(tp, nm)), shape)
    for nm in ("main_nodes", "aux_nodes", "parts_nodes"):
        s = a(getattr(tp, nm))
        _expect(len(s) == 2 and s[1] == 8, f"{nm} shape", name, s, "(m, 8)")
    _expect(has_aux or a(tp.aux_nodes)[0] == 0, "aux_nodes shape", name, a(tp.aux_nodes), (0, 8))


def _check_fri_shape(fri: FriProof, params: Params, heights: list) -> None:
    """The FRI section's shapes that follow from the parameters and the table heights:
    the layer count r, each layer's cap (its tree has 2^(h_i - log a_i) leaves), the fold
    nonces and the final polynomial's length L = 2^(h_final - log_blowup)."""
    if fri is None:
        raise ShapeError("the proof has no FRI section")
    r = len(heights) - 1
    a = lambda arr: tuple(np.shape(arr))  # noqa: E731
    _expect(len(fri.caps) == r, "FRI layer count", None, len(fri.caps), r)
    _expect(len(fri.values) == r and len(fri.nodes) == r, "FRI layer openings", None,
            (len(fri.values), len(fri.nodes)), (r, r))
    _expect(a(fri.fold_nonces) == (r,), "fold_nonces shape", None, a(fri.fold_nonces), (r,))
    for i in range(r):
        leaves_log = heights[i + 1]           # 2^(h_i - k_i) leaves, k_i = h_i - h_(i+1)
        caps = 1 << merkle.cap_height(leaves_log, params.log_cap)
        _expect(a(fri.caps[i]) == (caps, 8), f"fri_cap[{i}] shape", None, a(fri.caps[i]),
                (caps, 8))
        _expect(len(a(fri.values[i])) == 2 and a(fri.values[i])[1] == 4,
                f"fri values[{i}] shape", None, a(fri.values[i]), "(v, 4)")
        _expect(len(a(fri.nodes[i])) == 2 and a(fri.nodes[i])[1] == 8,
                f"fri nodes[{i}] shape", None, a(fri.nodes[i]), "(m, 8)")
    L = 1 << (heights[-1] - params.log_blowup)
    _expect(a(fri.final_poly) == (L, 4), "final_poly shape", None, a(fri.final_poly), (L, 4))


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
        _check_table_shape(tp, sh, proof.params)
        shapes.append(sh)
    _check_fri_shape(proof.fri, proof.params, fri_layer_heights(proof.params,
                                                                [sh.log_n for sh in shapes]))
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


@njit(inline="always")
def _pow(b, e):
    r = _ONE
    b = b % _P64
    while e:
        if e & 1:
            r = _mul(r, b)
        b = _mul(b, b)
        e >>= 1
    return r


@njit(inline="always")
def _bitrev(v, bits):
    r = 0
    for _ in range(bits):
        r = (r << 1) | (v & 1)
        v >>= 1
    return r


@njit(cache=True)
def _coset_points(idx, h, w):
    """x_p = g w^bitrev_h(p) for every position p of ``idx`` (w = omega_(2^h))."""
    out = np.empty(idx.shape[0], dtype=np.uint64)
    g = np.uint64(SHIFT)
    for r in range(idx.shape[0]):
        out[r] = _mul(g, _pow(w, _bitrev(idx[r], h)))
    return out


@njit(cache=True)
def _layer_kernel(pos, vals, proof_vals, k, h, w, beta, invw):
    """One FRI layer of height h and arity a = 2^k, batched over its touched leaves.

    pos int64[n]: the sorted distinct positions the verifier knows, vals uint64[4, n]
    their values; proof_vals uint32[nv, 4]: every other position of every touched leaf,
    leaf by leaf ascending, in position order (nv = leaves * a - n, checked by the
    caller).  w = omega_(2^h); beta uint64[4]; invw[kk, u] = omega_(2^kk)^-bitrev_(kk-1)(u).

    Returns (leaf ids int64[nl], leaf rows uint32[nl, 4a] -- the committed leaves, EF
    values c0..c3 in position order --, folded uint64[4, nl]: each leaf folded to its
    value at position (leaf id) of height h - k).  Leaf l holds the points
    x_(l a + e) = Y omega_(2^k)^bitrev_k(e), Y = g w^bitrev_(h-k)(l); the k binary folds
    use b = beta^(2^j); after each, Y <- Y^2 / g (the rescaled domain)."""
    n = pos.shape[0]
    a = 1 << k
    nl = 0
    for r in range(n):
        if r == 0 or (pos[r] >> k) != (pos[r - 1] >> k):
            nl += 1
    ids = np.empty(nl, dtype=np.int64)
    rows = np.empty((nl, 4 * a), dtype=np.uint32)
    folded = np.empty((4, nl), dtype=np.uint64)
    cur = np.empty((a, 4), dtype=np.uint64)
    inv2 = np.uint64((P + 1) // 2)
    g = np.uint64(SHIFT)
    r = 0
    ptr = 0
    for li in range(nl):
        leaf = pos[r] >> k
        ids[li] = leaf
        base = leaf << k
        for e in range(a):
            if r < n and pos[r] == base + e:
                for c in range(4):
                    cur[e, c] = vals[c, r]
                r += 1
            else:
                for c in range(4):
                    cur[e, c] = np.uint64(proof_vals[ptr, c])
                ptr += 1
            for c in range(4):
                rows[li, 4 * e + c] = np.uint32(cur[e, c])
        iy = _inv(_mul(g, _pow(w, _bitrev(leaf, h - k))))        # 1 / Y
        b0, b1, b2, b3 = beta[0], beta[1], beta[2], beta[3]
        for j in range(k):
            kk = k - j
            for u in range(1 << (kk - 1)):
                ix = _mul(_mul(iy, invw[kk, u]), inv2)          # 1 / (2 x_2u)
                p0, q0 = cur[2 * u, 0], cur[2 * u + 1, 0]
                p1, q1 = cur[2 * u, 1], cur[2 * u + 1, 1]
                p2, q2 = cur[2 * u, 2], cur[2 * u + 1, 2]
                p3, q3 = cur[2 * u, 3], cur[2 * u + 1, 3]
                m0, m1, m2, m3 = _ef_mul(b0, b1, b2, b3, _mul(_sub(p0, q0), ix),
                                         _mul(_sub(p1, q1), ix), _mul(_sub(p2, q2), ix),
                                         _mul(_sub(p3, q3), ix))
                cur[u, 0] = _add(_mul(_add(p0, q0), inv2), m0)
                cur[u, 1] = _add(_mul(_add(p1, q1), inv2), m1)
                cur[u, 2] = _add(_mul(_add(p2, q2), inv2), m2)
                cur[u, 3] = _add(_mul(_add(p3, q3), inv2), m3)
            b0, b1, b2, b3 = _ef_mul(b0, b1, b2, b3, b0, b1, b2, b3)
            iy = _mul(_mul(iy, iy), g)
        for c in range(4):
            folded[c, li] = cur[0, c]
    return ids, rows, folded


@njit(cache=True)
def _final_kernel(pos, vals, final, h, w):
    """The first index r whose value vals[:, r] differs from the final polynomial
    (uint32[L, 4], constant first) at x = g w^bitrev_h(pos[r]), or -1."""
    for r in range(pos.shape[0]):
        x = _mul(np.uint64(SHIFT), _pow(w, _bitrev(pos[r], h)))
        a0, a1, a2, a3 = _ZERO, _ZERO, _ZERO, _ZERO
        for j in range(final.shape[0] - 1, -1, -1):
            a0 = _add(_mul(a0, x), np.uint64(final[j, 0]))
            a1 = _add(_mul(a1, x), np.uint64(final[j, 1]))
            a2 = _add(_mul(a2, x), np.uint64(final[j, 2]))
            a3 = _add(_mul(a3, x), np.uint64(final[j, 3]))
        if a0 != vals[0, r] or a1 != vals[1, r] or a2 != vals[2, r] or a3 != vals[3, r]:
            return r
    return -1


def _inv_twiddles() -> np.ndarray:
    """invw[kk, u] = omega_(2^kk)^-bitrev_(kk-1)(u) for kk = 1..4, u < 2^(kk-1)."""
    out = np.zeros((5, 8), dtype=np.uint64)
    for kk in range(1, 5):
        wi = pow(F.root_of_unity(kk), P - 2, P)
        for u in range(1 << (kk - 1)):
            rev = int(format(u, f"0{kk - 1}b")[::-1], 2) if kk > 1 else 0
            out[kk, u] = pow(wi, rev, P)
    return out


_INVW = _inv_twiddles()


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
    if not cols.flags.writeable:       # (a read-only array is another numba signature,
        cols = cols.copy()             # not loaded at import: copying is cheaper)
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


# ---------------------------------------------------------------- composition at z
# The AIR's constraint program (air.program: straight-line ops over shared sub-terms) is
# run by one compiled kernel, every value as an EF element (a base value v is (v, 0, 0, 0):
# the same arithmetic as air.eval.numerator_at_point's, which types values), then
# alpha-folded with the selectors at z (air.eval's formulas), and compared with
# Z_H(z) Q(z).  The program's arrays are built once per program object (_point_code).

_OP_LEAF, _OP_ADD, _OP_SUB, _OP_MUL, _OP_NEG = 0, 1, 2, 3, 4
#: leaf kinds in the order of the value blocks _composition stacks (then pv, chal, term,
#: the program's constants)
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
    code = np.array([(opc.get(op, _OP_LEAF), a, b) for op, a, b, _ in ops],
                    dtype=np.int64).reshape(-1, 3)
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


@njit(cache=True)
def _composition_kernel(code, vals, outs, when, alpha, z, n, winv, parts):
    """N(z), Z_H(z) and Z_H(z) Q(z) (each uint64[4]) for one table.

    code int64[nops, 3] (op, a, b); vals uint64[nops, 4]: the leaves' EF values at their
    positions (canonical), the rest is computed here in place; outs / when int64[K]: the
    constraints' instructions and selectors (0 all, 1 first, 2 last, 3 transition);
    alpha, z uint64[4]; n = trace length, winv = omega_n^-1; parts uint64[s, 4]: q_i(z).
    N(z) = sum_k alpha^(K-1-k) sel_k(z) C_k(z) with sel_first = Z_H/(z-1),
    sel_last = Z_H/(z - winv), sel_transition = z - winv; Q(z) = sum_i z^(i n) q_i(z)."""
    for i in range(code.shape[0]):
        op = code[i, 0]
        if op == _OP_LEAF:
            continue
        a = code[i, 1]
        b = code[i, 2]
        if op == _OP_ADD:
            for c in range(4):
                vals[i, c] = _add(vals[a, c], vals[b, c])
        elif op == _OP_SUB:
            for c in range(4):
                vals[i, c] = _sub(vals[a, c], vals[b, c])
        elif op == _OP_NEG:
            for c in range(4):
                vals[i, c] = _sub(_ZERO, vals[a, c])
        else:
            m = _ef_mul(vals[a, 0], vals[a, 1], vals[a, 2], vals[a, 3],
                        vals[b, 0], vals[b, 1], vals[b, 2], vals[b, 3])
            for c in range(4):
                vals[i, c] = m[c]
    acc = np.zeros((4, 4), dtype=np.uint64)         # per selector group
    p0, p1, p2, p3 = _ONE, _ZERO, _ZERO, _ZERO     # alpha^(K-1-k), k from the end
    for k in range(outs.shape[0] - 1, -1, -1):
        o = outs[k]
        g = when[k]
        m = _ef_mul(p0, p1, p2, p3, vals[o, 0], vals[o, 1], vals[o, 2], vals[o, 3])
        for c in range(4):
            acc[g, c] = _add(acc[g, c], m[c])
        p0, p1, p2, p3 = _ef_mul(p0, p1, p2, p3, alpha[0], alpha[1], alpha[2], alpha[3])
    # z^n by squaring (n a power of two), Z_H(z) = z^n - 1
    z0, z1, z2, z3 = z[0], z[1], z[2], z[3]
    e = n
    while e > 1:
        z0, z1, z2, z3 = _ef_mul(z0, z1, z2, z3, z0, z1, z2, z3)
        e >>= 1
    zn = np.array([z0, z1, z2, z3], dtype=np.uint64)
    zh = zn.copy()
    zh[0] = _sub(zh[0], _ONE)
    sel = np.zeros((4, 4), dtype=np.uint64)
    sel[0, 0] = _ONE
    i0, i1, i2, i3 = _ef_inv(_sub(z[0], _ONE), z[1], z[2], z[3])
    sel[1, 0], sel[1, 1], sel[1, 2], sel[1, 3] = _ef_mul(zh[0], zh[1], zh[2], zh[3],
                                                         i0, i1, i2, i3)
    t0 = _sub(z[0], winv)
    i0, i1, i2, i3 = _ef_inv(t0, z[1], z[2], z[3])
    sel[2, 0], sel[2, 1], sel[2, 2], sel[2, 3] = _ef_mul(zh[0], zh[1], zh[2], zh[3],
                                                         i0, i1, i2, i3)
    sel[3, 0], sel[3, 1], sel[3, 2], sel[3, 3] = t0, z[1], z[2], z[3]
    num = np.zeros(4, dtype=np.uint64)
    for g in range(4):
        m = _ef_mul(sel[g, 0], sel[g, 1], sel[g, 2], sel[g, 3],
                    acc[g, 0], acc[g, 1], acc[g, 2], acc[g, 3])
        for c in range(4):
            num[c] = _add(num[c], m[c])
    q = np.zeros(4, dtype=np.uint64)
    w0, w1, w2, w3 = _ONE, _ZERO, _ZERO, _ZERO
    for i in range(parts.shape[0]):
        m = _ef_mul(w0, w1, w2, w3, parts[i, 0], parts[i, 1], parts[i, 2], parts[i, 3])
        for c in range(4):
            q[c] = _add(q[c], m[c])
        w0, w1, w2, w3 = _ef_mul(w0, w1, w2, w3, zn[0], zn[1], zn[2], zn[3])
    zq = np.empty(4, dtype=np.uint64)
    zq[0], zq[1], zq[2], zq[3] = _ef_mul(zh[0], zh[1], zh[2], zh[3], q[0], q[1], q[2], q[3])
    return num, zh, zq


def _composition_values(air, sh: TableShape, tp: TableProof, pv, chal, alpha, z):
    """(N(z), Z_H(z), Z_H(z) Q(z)), uint64[4] each, from the opened values through the
    AIR's constraint program (:func:`_composition_kernel`; the same values as
    air.eval.numerator_at_point)."""
    zf = np.asarray(z, np.uint64).reshape(4) % _P64
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
    src = np.concatenate(blocks, axis=0) % _P64
    offs = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    vals = np.zeros((code.shape[0], 4), u64)
    vals[lpos] = src[offs[lkind] + lcol]
    parts = _combine_ef_columns(tp.ood_parts)[:sh.num_parts]
    winv = pow(F.root_of_unity(sh.log_n), P - 2, P)
    num, zh, zq = _composition_kernel(code, vals, outs, when,
                                      np.asarray(alpha, u64).reshape(4) % _P64, zf,
                                      sh.n, u64(winv), np.ascontiguousarray(parts, u64))
    return num, zh, zq


def _composition(air, sh: TableShape, tp: TableProof, pv, chal, alpha, z) -> None:
    """The composition identity at z: N(z) = Z_H(z) Q(z) (CompositionError)."""
    num, zh, zq = _composition_values(air, sh, tp, pv, chal, alpha, z)
    if not zh.any():
        raise CompositionError("out-of-domain point lies in the trace domain", sh.name)
    if not np.array_equal(num, zq):
        raise CompositionError("constraints at z do not match the quotient parts", sh.name)



def _deep_at_rows(sh: TableShape, tp: TableProof, x, z, lam) -> np.ndarray:
    """DEEP quotient at the opened positions (points x, base, (d,)): (4, d) EF values,
    sum_j lam^j (f_j(x) - v_j) / (x - zeta_j) over the opened columns in DEEP order
    (one compiled call, :func:`_deep_kernel`)."""
    zf = np.asarray(z, np.uint64).reshape(4)
    z_next = F.ef_mul_base(zf.reshape(4, 1), F.root_of_unity(sh.log_n)).reshape(4)
    ood = {("main", False): tp.ood_main, ("main", True): tp.ood_main_next,
           ("aux", False): tp.ood_aux, ("aux", True): tp.ood_aux_next,
           ("parts", False): tp.ood_parts}
    rows = {"main": tp.main_rows, "aux": tp.aux_rows, "parts": tp.parts_rows}
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


def _verify_table(tr: Transcript, air, sh: TableShape, tp: TableProof, params: Params, chal,
                  composition: bool = True) -> TableState:
    """One table's fork, replayed up to its ``table_digest``: the proof-of-work checks
    before z and lambda (PowError) and -- unless ``composition=False`` -- the composition
    check at z (CompositionError).  Returns the :class:`TableState` the join needs.  The
    openings are checked by :func:`verify_join` (the queries come from the join).
    ``composition=False`` is for a caller that ran :func:`composition_check` on the same
    opened values already (the prover's self-check); :func:`verify` skips it only for
    tables whose :func:`table_check_key` is among ``verified_tables``."""
    name = sh.name
    # ---- R1 (fork): aux commitment and claimed LogUp terminal
    if sh.aux_cols:
        tr.absorb("aux_cap", tp.aux_cap)
        tr.absorb("logup_terminal", tp.terminal)
    # ---- R2: alpha, quotient parts
    alpha = tr.sample_ef("alpha")
    tr.absorb("parts_cap", tp.parts_cap)
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
        _composition(air, sh, tp, tp.public_values, chal, alpha, z)
    # ---- R4: lambda (after a proof of work), then the table's digest for the join
    if not tr.check_pow("deep_pow", tp.deep_nonce, params.deep_pow_bits):
        raise PowError(f"DEEP nonce {tp.deep_nonce} does not give {params.deep_pow_bits} "
                       "zero bits", name)
    lam = tr.sample_ef("deep_lambda")
    digest = tr.sample_base("table_digest", 8)
    return TableState(z=np.asarray(z, np.uint64), lam=np.asarray(lam, np.uint64),
                      digest=[int(v) for v in digest])


def _ef_scale(v: np.ndarray, c) -> np.ndarray:
    """c * v for an EF scalar c (4,) and EF values v (4, n)."""
    return F.ef_mul(np.asarray(c, np.uint64).reshape(4, 1), v)


def _ef_power(c, e: int) -> np.ndarray:
    return F.ef_pow(np.asarray(c, np.uint64).reshape(4, 1), e).reshape(4)


def verify_join(tr: Transcript, params: Params, shapes: Sequence[TableShape],
                tables: Sequence[TableProof], states: Sequence[TableState],
                fri: FriProof) -> None:
    """The join on the main transcript (after every fork), docs/protocol.md: absorb the
    table digests, sample mu; per FRI layer absorb its cap, check its proof of work,
    sample beta_i; absorb the final polynomial; proof of work; the queries.  Then every
    count that follows from the queries (ShapeError), every table's openings against its
    caps (MerkleError) and DEEP quotients at them, the FRI layers (leaves rebuilt from the
    verifier's own values and the proof's others: MerkleError; folded with roll-ins) and
    the final polynomial (FriError).  Shapes that follow from the parameters are
    :func:`check_shapes`' (run it first)."""
    heights = fri_layer_heights(params, [sh.log_n for sh in shapes])
    r = len(heights) - 1
    h_max = heights[0]
    # ---- transcript
    for st in states:
        tr.absorb("table_digest", st.digest)
    if not tr.check_pow("mu_pow", int(fri.mu_nonce), params.commit_pow_bits):
        raise PowError(f"mu nonce {int(fri.mu_nonce)} does not give {params.commit_pow_bits} "
                       "zero bits")
    mu = np.asarray(tr.sample_ef("fri_mu"), np.uint64)
    betas = []
    for i in range(r):
        tr.absorb("fri_cap", fri.caps[i])
        if not tr.check_pow("fold_pow", int(fri.fold_nonces[i]), params.commit_pow_bits):
            raise PowError(f"FRI layer {i} nonce {int(fri.fold_nonces[i])} does not give "
                           f"{params.commit_pow_bits} zero bits")
        betas.append(np.asarray(tr.sample_ef("fri_beta"), np.uint64))
    tr.absorb("fri_final", fri.final_poly)
    if not tr.check_pow("pow", fri.pow_nonce, params.pow_bits):
        raise PowError(f"nonce {fri.pow_nonce} does not give {params.pow_bits} zero bits")
    queries = tr.sample_bits("queries", h_max, params.num_queries)
    # ---- every count the queries determine, before any hashing
    at = {h: merkle.leaf_set(queries >> (h_max - h)) for h in heights}   # positions per height
    for sh, tp in zip(shapes, tables):
        idx = at[sh.log_lde]
        _expect(tp.main_rows.shape[0] == idx.size, "opened rows", sh.name,
                tp.main_rows.shape[0], idx.size)
        m = merkle.multiproof_size(idx, sh.log_lde, params.log_cap)
        for nm in ("main_nodes", "aux_nodes", "parts_nodes"):
            if nm == "aux_nodes" and not sh.aux_cols:
                continue
            got = np.shape(getattr(tp, nm))[0]
            _expect(got == m, f"{nm} count", sh.name, got, m)
    for i in range(r):
        k = heights[i] - heights[i + 1]
        leaves = at[heights[i + 1]]                  # leaf ids = positions one layer down
        nv = leaves.size * (1 << k) - at[heights[i]].size
        _expect(fri.values[i].shape[0] == nv, f"FRI layer {i} values count", None,
                fri.values[i].shape[0], nv)
        m = merkle.multiproof_size(leaves, heights[i + 1], params.log_cap)
        _expect(fri.nodes[i].shape[0] == m, f"FRI layer {i} nodes count", None,
                fri.nodes[i].shape[0], m)
    # ---- the tables' openings and their DEEP quotients, combined per height with mu
    combined: dict = {}
    counts: dict = {}
    for sh, tp, st in zip(shapes, tables, states):
        h = sh.log_lde
        idx = at[h]
        merkle.check_opening(tp.main_cap, tp.main_rows, idx, tp.main_nodes, h,
                             params.log_cap, "main opening", sh.name)
        if sh.aux_cols:
            merkle.check_opening(tp.aux_cap, tp.aux_rows, idx, tp.aux_nodes, h,
                                 params.log_cap, "aux opening", sh.name)
        merkle.check_opening(tp.parts_cap, tp.parts_rows, idx, tp.parts_nodes, h,
                             params.log_cap, "parts opening", sh.name)
        x = _coset_points(idx, h, np.uint64(F.root_of_unity(h)))
        dq = _deep_at_rows(sh, tp, x, st.z, st.lam)
        j = counts.get(h, 0)
        counts[h] = j + 1
        term = dq if j == 0 else _ef_scale(dq, _ef_power(mu, j))
        combined[h] = term if h not in combined else F.ef_add(combined[h], term)
    # ---- FRI: layer by layer over the distinct positions (queries sharing a position
    # share its value, so a position never receives two values)
    vals = np.ascontiguousarray(combined[h_max], dtype=np.uint64)
    for i in range(r):
        h, k = heights[i], heights[i] - heights[i + 1]
        ids, rows, folded = _layer_kernel(at[h], vals,
                                          np.ascontiguousarray(fri.values[i], np.uint32), k, h,
                                          np.uint64(F.root_of_unity(h)), betas[i], _INVW)
        merkle.check_opening(fri.caps[i], rows, ids, fri.nodes[i], heights[i + 1],
                             params.log_cap, f"FRI layer {i}")
        if heights[i + 1] in combined:                # roll-in of the tables of that height
            folded = F.ef_add(folded, _ef_scale(combined[heights[i + 1]],
                                                _ef_power(betas[i], 1 << k)))
        vals = np.ascontiguousarray(folded, dtype=np.uint64)
    h = heights[-1]
    bad = _final_kernel(at[h], vals, np.ascontiguousarray(fri.final_poly, np.uint32), h,
                        np.uint64(F.root_of_unity(h)))
    if bad >= 0:
        raise FriError(f"final polynomial disagrees with the folded value at position "
                       f"{int(at[h][bad])}")


# Public per-table entry points (the prover's self-check runs them on a table's finished
# fork and on its opened values; docs/diagnostics.md)
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
    h = hashlib.sha256(b"steadfast/table-check/v3")
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

    ``proof_bytes``: the proof's bytes, or the :class:`verifier.proof_format.Proof` that
    :func:`verifier.proof_format.decode` made of them.

    ``public_values``: the expected public values per table (None: accept those in the
    proof and return them).  Raises a :class:`verifier.errors.VerificationError`
    subclass on rejection; returns a :class:`VerifyResult` on success.

    ``verified_tables``: keys (:func:`table_check_key`) of per-table checks that already
    passed on identical inputs; a table whose key is among them skips its composition
    check (the prover's overlapped self-check).  Everything else -- parsing, shapes, the
    statement, every transcript and proof of work, the LogUp sum, the join with every
    opening -- always runs.

    Order (docs/protocol.md section 6): decode, shapes (ShapeError) -> security minimum
    (ParameterError) -> public values -> main transcript, LogUp proof of work -> per table
    its fork (proofs of work, composition at z) -> LogUp terminals (LogUpError) -> the
    join (:func:`verify_join`).
    """
    t0 = time.perf_counter()
    min_security_bits = validate_min_security_bits(min_security_bits)   # before the proof
    airs = list(airs)
    # a Proof that verifier.proof_format.decode returned is accepted as well (a caller
    # that decoded the bytes already, as prover.api.verify does, saves the second parse)
    proof = proof_bytes if isinstance(proof_bytes, Proof) else decode(proof_bytes)
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
        tr.absorb("main_cap", tp.main_cap)
    if not tr.check_pow("logup_pow", proof.logup_nonce, proof.params.logup_pow_bits):
        raise PowError(f"LogUp nonce {proof.logup_nonce} does not give "
                       f"{proof.params.logup_pow_bits} zero bits")
    chal = {CHALLENGE_NAMES[0]: ef_col(tr.sample_ef("logup_beta")),
            CHALLENGE_NAMES[1]: ef_col(tr.sample_ef("logup_gamma"))}
    logs = [tr.log]
    skipped = 0
    states = []
    for i, (air, sh, tp) in enumerate(zip(airs, shapes, proof.tables)):
        fork = tr.fork(i)
        pre = bool(verified_tables) and table_check_key(fork, air, tp.raw, proof.params,
                                                        chal) in verified_tables
        skipped += pre
        states.append(_verify_table(fork, air, sh, tp, proof.params, chal,
                                    composition=not pre))
        logs.append(fork.log)
    # LogUp: a table's sum is n * U (U = its terminal, the mean row sum that its cyclic
    # accumulator constraint subtracts on every row); the sums of all tables must cancel
    total = np.zeros((4, 1), dtype=np.uint64)
    for sh, tp in zip(shapes, proof.tables):
        if sh.aux_cols:
            total = F.ef_add(total, F.ef_mul_base(ef_col(tp.terminal).reshape(4, 1),
                                                  sh.n % P))
    if np.any(total):
        raise LogUpError("the LogUp terminal sums of the tables do not add up to zero")
    verify_join(tr, proof.params, shapes, proof.tables, states, proof.fri)
    return VerifyResult(public_values=pvs, logs=logs, seconds=time.perf_counter() - t0,
                        security=security, tables_prechecked=skipped)


def _warm_kernels() -> None:
    """Load (or compile, on a cold cache) the compiled helpers at import, with exactly
    the argument types the verifier passes, like verifier.poseidon2 does."""
    u64, u32, i64 = np.uint64, np.uint32, np.int64
    _bary_kernel(np.zeros((2, 1), u32), np.array([5, 1, 0, 0], u64), u64(P - 1))
    _deep_kernel(np.zeros((1, 1), u32), np.array([1, 0, 0, 0], u64), np.zeros((1, 4), u64),
                 np.zeros(1, np.bool_), np.ones(1, u64), np.array([[5, 1, 0, 0]] * 2, u64))
    _coset_points(np.zeros(1, i64), 2, u64(F.root_of_unity(2)))
    _layer_kernel(np.zeros(1, i64), np.zeros((4, 1), u64), np.zeros((1, 4), u32), 1, 2,
                  u64(F.root_of_unity(2)), np.zeros(4, u64), _INVW)
    _final_kernel(np.zeros(1, i64), np.zeros((4, 1), u64), np.zeros((1, 4), u32), 1,
                  u64(F.root_of_unity(1)))
    _composition_kernel(np.zeros((1, 3), i64), np.zeros((1, 4), u64), np.zeros(1, i64),
                        np.zeros(1, i64), np.zeros(4, u64), np.array([5, 1, 0, 0], u64), 2,
                        u64(P - 1), np.zeros((1, 4), u64))


_warm_kernels()
