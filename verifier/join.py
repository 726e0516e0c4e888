"""The join, on the main transcript after every table's fork (docs/protocol.md): one FRI
for all tables and every opening.

:func:`verify_join` ``(tr, params, shapes, sections, states, fri, commits)`` absorbs the
table digests, draws mu, the layer challenges (each after its proof of work) and the
queries; checks every count the queries fix (ShapeError) and the tables' openings
against the three mixed-height commitments of format 6 -- main (every table), aux (the
tables with interactions), parts (every table): one multiproof each,
:func:`verifier.mmcs.verify_mixed` (MerkleError); evaluates each table's DEEP quotient at
its opened rows (:func:`_deep_at_rows`), combines the quotients of one height with powers
of mu, and folds them layer by layer with their roll-ins (:func:`_layer_kernel`: each
layer's leaves rebuilt from the verifier's values and the proof's others, checked against
the layer's cap) down to the final polynomial (:func:`_final_kernel`: FriError).  The
shapes that follow from the parameters alone are :func:`verifier.shapes.check_shapes`'
(run first).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from . import merkle, mmcs
from .errors import FriError, PowError
from .field import F, P
from .poseidon2 import hash_rows
from .proof_format import Commitments, FriProof, Params, TableProof
from .protocol import SHIFT, TableShape, deep_groups, fri_layer_heights
from .scalar import ONE, P64, ZERO, add, bitrev, ef_inv, ef_mul, inv, mul, power, sub
from .shapes import expect
from .table import TableState
from .transcript import Transcript


# ---------------------------------------------------------------- DEEP at the queries

# The kernels allocate nothing (verifier/poseidon2.py: an np.empty inside a cached
# kernel makes loading it import numba's array module): their callers pass the arrays.

@njit(cache=True, _nrt=False)
def _deep_kernel(vals, lam, ood, nxt, x, pts, lp, out):
    """DEEP quotient at the queries: sum over opened columns j (in DEEP order) of
    lam^j (f_j(x) - v_j) / (x - zeta_j), zeta_j = pts[nxt[j]].  vals (q, C) base rows,
    lam (4,) EF, ood (C, 4) opened EF values, x (q,) base points, pts (2, 4) EF points.
    Columns sharing a point share the division: sum_j a_j / d = (sum_j a_j) / d.
    lp uint64[C + 5, 4] scratch (lam^j, then the per-point sums); out uint64[4, q]."""
    q, c = vals.shape
    cst = lp[c:c + 2]                                   # sum_j lam^j v_j per point
    acc = lp[c + 2:c + 4]
    t = lp[c + 4]
    for f in range(2):
        for k in range(4):
            cst[f, k] = 0
    p0, p1, p2, p3 = ONE, ZERO, ZERO, ZERO
    for j in range(c):
        lp[j, 0], lp[j, 1], lp[j, 2], lp[j, 3] = p0, p1, p2, p3
        v = ef_mul(p0, p1, p2, p3, ood[j, 0] % P64, ood[j, 1] % P64, ood[j, 2] % P64,
                   ood[j, 3] % P64)
        f = 1 if nxt[j] else 0
        for k in range(4):
            cst[f, k] = add(cst[f, k], v[k])
        p0, p1, p2, p3 = ef_mul(p0, p1, p2, p3, lam[0], lam[1], lam[2], lam[3])
    for r in range(q):
        for f in range(2):
            for k in range(4):
                acc[f, k] = 0
        for j in range(c):
            f = 1 if nxt[j] else 0
            a = np.uint64(vals[r, j]) % P64
            for k in range(4):
                acc[f, k] += mul(a, lp[j, k])          # < C p < 2^40: no wrap
        for k in range(4):
            t[k] = 0
        for f in range(2):
            d0, d1, d2, d3 = ef_inv(sub(x[r] % P64, pts[f, 0]), sub(ZERO, pts[f, 1]),
                                    sub(ZERO, pts[f, 2]), sub(ZERO, pts[f, 3]))
            n0 = sub(acc[f, 0] % P64, cst[f, 0])
            n1 = sub(acc[f, 1] % P64, cst[f, 1])
            n2 = sub(acc[f, 2] % P64, cst[f, 2])
            n3 = sub(acc[f, 3] % P64, cst[f, 3])
            m = ef_mul(n0, n1, n2, n3, d0, d1, d2, d3)
            for k in range(4):
                t[k] = add(t[k], m[k])
        for k in range(4):
            out[k, r] = t[k]


def deep_values(vals, lam, ood, nxt, x, pts) -> np.ndarray:
    """:func:`_deep_kernel`: uint64[4, q]."""
    out = np.empty((4, vals.shape[0]), np.uint64)
    _deep_kernel(vals, lam, ood, nxt, x, pts, np.empty((vals.shape[1] + 5, 4), np.uint64),
                 out)
    return out


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
    return deep_values(vals, np.ascontiguousarray(np.asarray(lam, np.uint64).reshape(4)),
                       opened, nxt, np.ascontiguousarray(np.asarray(x, np.uint64).reshape(-1)),
                       pts)


# ---------------------------------------------------------------- FRI layers

@njit(cache=True, _nrt=False)
def _coset_kernel(idx, h, w, out):
    """out[r] = x_p = g w^bitrev_h(p) for every position p = idx[r] (w = omega_(2^h))."""
    g = np.uint64(SHIFT)
    for r in range(idx.shape[0]):
        out[r] = mul(g, power(w, bitrev(idx[r], h)))


def _coset_points(idx, h, w) -> np.ndarray:
    """x_p = g w^bitrev_h(p) for every position p of ``idx`` (w = omega_(2^h))."""
    out = np.empty(idx.shape[0], dtype=np.uint64)
    _coset_kernel(idx, h, w, out)
    return out


@njit(cache=True, _nrt=False)
def _layer_fold(pos, vals, proof_vals, k, h, w, beta, invw, ids, rows, folded, cur):
    """One FRI layer of height h and arity a = 2^k, batched over its touched leaves.

    pos int64[n]: the sorted distinct positions the verifier knows, vals uint64[4, n]
    their values; proof_vals uint32[nv, 4]: every other position of every touched leaf,
    leaf by leaf ascending, in position order (nv = leaves * a - n, checked by the
    caller).  w = omega_(2^h); beta uint64[4]; invw[kk, u] = omega_(2^kk)^-bitrev_(kk-1)(u).

    Returns (leaf ids int64[nl], leaf rows uint32[nl, 4a] -- the committed leaves, EF
    values c0..c3 in position order --, folded uint64[4, nl]: each leaf folded to its
    value at position (leaf id) of height h - k).  Leaf l holds the points
    x_(l a + e) = Y omega_(2^k)^bitrev_k(e), Y = g w^bitrev_(h-k)(l); the k binary folds
    use b = beta^(2^j); after each, Y <- Y^2 / g (the rescaled domain).
    (:func:`_layer_kernel` allocates the outputs and cur, uint64[a, 4] scratch.)"""
    n = pos.shape[0]
    a = 1 << k
    nl = ids.shape[0]
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
        iy = inv(mul(g, power(w, bitrev(leaf, h - k))))        # 1 / Y
        b0, b1, b2, b3 = beta[0], beta[1], beta[2], beta[3]
        for j in range(k):
            kk = k - j
            for u in range(1 << (kk - 1)):
                ix = mul(mul(iy, invw[kk, u]), inv2)          # 1 / (2 x_2u)
                p0, q0 = cur[2 * u, 0], cur[2 * u + 1, 0]
                p1, q1 = cur[2 * u, 1], cur[2 * u + 1, 1]
                p2, q2 = cur[2 * u, 2], cur[2 * u + 1, 2]
                p3, q3 = cur[2 * u, 3], cur[2 * u + 1, 3]
                m0, m1, m2, m3 = ef_mul(b0, b1, b2, b3, mul(sub(p0, q0), ix),
                                        mul(sub(p1, q1), ix), mul(sub(p2, q2), ix),
                                        mul(sub(p3, q3), ix))
                cur[u, 0] = add(mul(add(p0, q0), inv2), m0)
                cur[u, 1] = add(mul(add(p1, q1), inv2), m1)
                cur[u, 2] = add(mul(add(p2, q2), inv2), m2)
                cur[u, 3] = add(mul(add(p3, q3), inv2), m3)
            b0, b1, b2, b3 = ef_mul(b0, b1, b2, b3, b0, b1, b2, b3)
            iy = mul(mul(iy, iy), g)
        for c in range(4):
            folded[c, li] = cur[0, c]


def _layer_kernel(pos, vals, proof_vals, k, h, w, beta, invw):
    """:func:`_layer_fold` with its arrays: (leaf ids, leaf rows, folded)."""
    nl = int(np.count_nonzero(np.diff(pos >> k))) + 1 if pos.shape[0] else 0
    a = 1 << k
    ids = np.empty(nl, dtype=np.int64)
    rows = np.empty((nl, 4 * a), dtype=np.uint32)
    folded = np.empty((4, nl), dtype=np.uint64)
    _layer_fold(pos, vals, proof_vals, k, h, w, beta, invw, ids, rows, folded,
                np.empty((a, 4), dtype=np.uint64))
    return ids, rows, folded


@njit(cache=True, _nrt=False)
def _final_kernel(pos, vals, final, h, w):
    """The first index r whose value vals[:, r] differs from the final polynomial
    (uint32[L, 4], constant first) at x = g w^bitrev_h(pos[r]), or -1."""
    for r in range(pos.shape[0]):
        x = mul(np.uint64(SHIFT), power(w, bitrev(pos[r], h)))
        a0, a1, a2, a3 = ZERO, ZERO, ZERO, ZERO
        for j in range(final.shape[0] - 1, -1, -1):
            a0 = add(mul(a0, x), np.uint64(final[j, 0]))
            a1 = add(mul(a1, x), np.uint64(final[j, 1]))
            a2 = add(mul(a2, x), np.uint64(final[j, 2]))
            a3 = add(mul(a3, x), np.uint64(final[j, 3]))
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


# ---------------------------------------------------------------- the join

def _ef_scale(v: np.ndarray, c) -> np.ndarray:
    """c * v for an EF scalar c (4,) and EF values v (4, n)."""
    return F.ef_mul(np.asarray(c, np.uint64).reshape(4, 1), v)


def _ef_power(c, e: int) -> np.ndarray:
    return F.ef_pow(np.asarray(c, np.uint64).reshape(4, 1), e).reshape(4)


_KINDS = ("main", "aux", "parts")


def verify_join(tr: Transcript, params: Params, shapes: Sequence[TableShape],
                tables: Sequence[TableProof], states: Sequence[TableState],
                fri: FriProof, commits: Commitments) -> None:
    """The join on the main transcript (after every fork), docs/protocol.md: absorb the
    table digests, sample mu; per FRI layer absorb its cap, check its proof of work,
    sample beta_i; absorb the final polynomial; proof of work; the queries.  Then every
    count that follows from the queries (ShapeError: each table's row count d_t, the node
    count of each of the three multiproofs, every FRI layer's), the openings against the
    main / aux / parts commitments of ``commits`` (one mixed-height multiproof per kind:
    participants in table order -- aux: the tables with aux columns --, heights log_lde,
    top indices the distinct queries >> (h_max - H_kind): MerkleError) and the DEEP
    quotients at them, the FRI layers (leaves rebuilt from the verifier's own values and
    the proof's others: MerkleError; folded with roll-ins) and the final polynomial
    (FriError).  Shapes that follow from the parameters are
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
        expect(tp.main_rows.shape[0] == idx.size, "opened rows", sh.name,
                tp.main_rows.shape[0], idx.size)
    trees = []                       # (kind, cap, heights, top indices, nodes, [(sh, rows)])
    for kind in _KINDS:
        part = [(sh, getattr(tp, f"{kind}_rows")) for sh, tp in zip(shapes, tables)
                if kind != "aux" or sh.aux_cols]
        nodes = getattr(commits, f"{kind}_nodes")
        if not part:                 # no aux tree (check_shapes: aux_cap, aux_nodes [0, 8])
            expect(np.shape(nodes)[0] == 0, f"{kind}_nodes count", None, np.shape(nodes)[0], 0)
            continue
        for sh, rows in part:
            merkle.check_rows(rows, f"{kind} opening", sh.name)
        hts = [sh.log_lde for sh, _ in part]
        top = at[max(hts)]
        m = mmcs.mixed_multiproof_size(top, hts, params.log_cap)
        expect(np.shape(nodes)[0] == m, f"{kind}_nodes count", None, np.shape(nodes)[0], m)
        trees.append((kind, getattr(commits, f"{kind}_cap"), hts, top, nodes, part))
    for i in range(r):
        k = heights[i] - heights[i + 1]
        leaves = at[heights[i + 1]]                  # leaf ids = positions one layer down
        nv = leaves.size * (1 << k) - at[heights[i]].size
        expect(fri.values[i].shape[0] == nv, f"FRI layer {i} values count", None,
                fri.values[i].shape[0], nv)
        m = merkle.multiproof_size(leaves, heights[i + 1], params.log_cap)
        expect(fri.nodes[i].shape[0] == m, f"FRI layer {i} nodes count", None,
                fri.nodes[i].shape[0], m)
    # ---- the openings: one mixed-height multiproof per commitment (main, aux, parts)
    for kind, cap, hts, top, nodes, part in trees:
        digests = [hash_rows(np.ascontiguousarray(rows, dtype=np.uint32)) for _, rows in part]
        mmcs.verify_mixed(cap, hts, digests, top, nodes, params.log_cap, f"{kind} commitment")
    # ---- the tables' DEEP quotients at the opened rows, combined per height with mu
    combined: dict = {}
    counts: dict = {}
    for sh, tp, st in zip(shapes, tables, states):
        h = sh.log_lde
        idx = at[h]
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


def warm_kernels() -> None:
    """Load (or compile, on a cold cache) the compiled helpers with exactly the argument
    types the verifier passes, like verifier.poseidon2 does (:func:`verifier.warm_kernels`)."""
    u64, u32, i64 = np.uint64, np.uint32, np.int64
    deep_values(np.zeros((1, 1), u32), np.array([1, 0, 0, 0], u64), np.zeros((1, 4), u64),
                np.zeros(1, np.bool_), np.ones(1, u64), np.array([[5, 1, 0, 0]] * 2, u64))
    _coset_points(np.zeros(1, i64), 2, u64(F.root_of_unity(2)))
    _layer_kernel(np.zeros(1, i64), np.zeros((4, 1), u64), np.zeros((1, 4), u32), 1, 2,
                  u64(F.root_of_unity(2)), np.zeros(4, u64), _INVW)
    _final_kernel(np.zeros(1, i64), np.zeros((4, 1), u64), np.zeros((1, 4), u32), 1,
                  u64(F.root_of_unity(1)))


__all__ = ["verify_join"]


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("poseidon2.py", "merkle.py", "field.py", "scalar.py"))
