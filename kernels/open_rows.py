"""Committed LDE rows at a few tree positions, straight from the coefficients (issue #12).

An opening needs the rows of a committed matrix at the queried tree positions and, because
the host trees drop their lowest levels (prover/core/ldetree.py), every row of each queried
2^b-row group, to rehash the nodes below the kept levels.  Recomputing the whole LDE
(N = n 2^k points per column) for ~50 groups of 64 rows wastes most of the work.  Instead:

Tree position s holds the natural LDE point x = g w_N^bitrev_L(s) (L = log N).  The group
of positions G j .. G j + G - 1 (G = 2^b) is the coset x_j <w_G>, x_j = g w_N^bitrev_(L-b)(j),
and position G j + t holds the point x_j w_G^bitrev_b(t).  On that coset a polynomial f
agrees with f mod (X^G - x_j^G), which is reached by halving the modulus: with
c = x_j^m,  f mod (X^m - c) = r_lo + c r_hi  where r = f mod (X^(2m) - c^2) (r_lo, r_hi its
low and high m coefficients), starting from r = f itself once 2m >= n.  Groups whose
points share x^m share that remainder, so level m holds min(N/m, groups) remainders of m
coefficients: about (log2(groups) + 2) N products per column in all instead of the
N log N of an LDE.  The last step scales the G coefficients by x_j^i and runs a G-point
decimation-in-frequency transform, whose bit-reversed output order is the tree order.

Stored level by level (``_open_groups``, ``method="tree"``), the first levels stream the
whole column through memory several times (every child reads its parent), ~60 MB a
column of 2^19 coefficients at blowup 4.  The default (``_open_groups_fused``) runs only
the first d levels -- those whose keys many groups share -- and reaches each group's
remainder from there by Horner's rule, f mod (X^H - C) = sum_s C^s r_s over the level-d
remainder's blocks r_s of H coefficients, from the top block down (H = G, or a vector's
width where G is narrower: those rows are halved down to G per group at the end).  Neither the level-d
remainders nor any level above are stored: for each s the d levels are computed on the
2^d blocks of f that block s depends on (a few KB of scratch), and every group's
accumulator row stays in L1, so a column is read once.  d is chosen per call for the
fewest products (:func:`fused_depth`: n (sum_(l <= d) products_l / 2^l + groups / 2^d)).
A level's keys come in pairs: key + N/(2m) holds x^m w_N^(N/2) = -x^m and has the same
parent, so the two children lo + c hi and lo - c hi share the product c hi (:func:`_bfly`,
:func:`_entries`) -- the first levels, where every key is present, cost half of their
keys, as an NTT's butterflies do.  The products are the NTT's 32-bit lane Montgomery
products (kernels/poseidon2_lanes.py's ``_Gen``), the scalar loop for the tails
(``STEADFAST_NTT_KERNEL=scalar``: the scalar loop alone).  52 columns of 2^19 at blowup
4, 50 groups of 64 rows: 0.53 s -> 0.095 s on this project's 2-core host
(docs/benchmarks.md); with the pairs, 299 columns of 2^14 at blowup 4, 50 groups of 16
rows: 30.5 -> 16.5 ms.  The constants of one shape and one set of groups are built once
(:func:`_plan`): a proof opens every table of a height at the same groups.
"""
from __future__ import annotations

import os
from functools import lru_cache

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from steadfast._jit_cache import adopt

from .field import P, root_of_unity
from .host_pool import run_ranges
from .hostlib import HF
from .ntt_host import bit_reverse_indices
from .poseidon2_lanes import W as LANES
from .poseidon2_lanes import _Gen, _vec_ptr

#: "fused" (the default: the halving tree's first levels and Horner's rule below them in
#: one pass over each column, in 32-bit lanes: _open_groups_fused) or "tree" (every level
#: of the halving tree stored in turn: _open_groups); per process, the same rows either
#: way (tests/test_open_rows.py)
METHOD = os.environ.get("STEADFAST_OPEN_ROWS", "fused").strip().lower()
if METHOD not in ("fused", "tree"):
    raise ValueError(f"STEADFAST_OPEN_ROWS must be 'fused' or 'tree', got {METHOD!r}")
#: the fused kernel's per-thread scratch for the tree levels, at most (bytes)
_SCRATCH_BYTES = 32 << 10

_P = np.uint64(P)


_M32 = np.uint64(0xFFFFFFFF)
_NINV = np.uint64((-pow(P, -1, 1 << 32)) % (1 << 32))      # -p^-1 mod 2^32


@njit(inline="always")
def _dif_into(a, tw, out, q, col):
    """out[q, :, col] = the G-point decimation-in-frequency transform of a (natural-order
    input, bit-reversed output: the tree order); a is overwritten."""
    G = a.shape[0]
    half = G >> 1
    toff = 0
    while half >= 1:
        for s in range(0, G, 2 * half):
            for j in range(half):
                u = a[s + j]
                v = a[s + j + half]
                a[s + j] = (u + v) % _P
                a[s + j + half] = ((u + _P - v) * tw[toff + j]) % _P
        toff += half
        half >>= 1
    for t in range(G):
        out[q, t, col] = np.uint32(a[t])


@njit(cache=True, parallel=True)
def _open_groups(coeffs, sizes, nkeys, key_off, parent, cvals, final_idx, xpow, tw, out):
    # Folds in Montgomery form with lazy bounds: a remainder's coefficients are kept in
    # [0, 2p) (< 2^32: uint32), the constants c as c 2^32 mod p; mont(a, c) = a c 2^-32
    # mod p lies in [0, 2p) for a < 2^32, c < p (t + q p < 2^33 p < 2^64), so
    # lo + mont(hi, c) < 4p and one conditional subtraction of 2p keeps the bound.
    c, n = coeffs.shape
    L = sizes.shape[0]
    Q, G = xpow.shape
    for col in prange(c):
        cur = coeffs[col].copy()
        span = n                                   # coefficients per remainder at this level
        for lv in range(L):
            m = sizes[lv]
            k0 = key_off[lv]
            nk = nkeys[lv]
            nxt = np.empty(nk * m, np.uint32)
            for i in range(nk):
                src = parent[k0 + i] * span
                cv = cvals[k0 + i]
                dst = i * m
                for j in range(m):
                    t = np.uint64(cur[src + m + j]) * cv
                    q = ((t & _M32) * _NINV) & _M32
                    r = ((t + q * _P) >> np.uint64(32)) + np.uint64(cur[src + j])
                    if r >= np.uint64(2 * P):
                        r -= np.uint64(2 * P)
                    nxt[dst + j] = np.uint32(r)
            cur = nxt
            span = m
        a = np.empty(G, np.uint64)
        for q in range(Q):
            base = final_idx[q] * span
            for j in range(G):
                a[j] = (np.uint64(cur[base + j]) * xpow[q, j]) % _P if j < span else np.uint64(0)
            _dif_into(a, tw, out, q, col)


def _x_and_cy(context, builder, signature, args, ix: int):
    """The lane kernels' common part: args = (dst, <dst indices>, x, ix, y, iy, cm) with x
    at position ``ix``: (the emitter, dst's array, the x vector, canonical c y)."""
    da = context.make_array(signature.args[0])(context, builder, value=args[0])
    xa = context.make_array(signature.args[ix])(context, builder, value=args[ix])
    ya = context.make_array(signature.args[ix + 2])(context, builder, value=args[ix + 2])
    g = _Gen(builder, LANES)
    v = builder.insert_element(ir.Constant(g.V, ir.Undefined), args[ix + 4],
                               ir.Constant(ir.IntType(32), 0))
    c = builder.shuffle_vector(v, v, ir.Constant(g.V, [0] * LANES))
    xv = builder.load(_vec_ptr(builder, xa, args[ix + 1], LANES), align=4)
    yv = builder.load(_vec_ptr(builder, ya, args[ix + 3], LANES), align=4)
    return g, da, xv, g.canon(g.mont(g.split(yv), g.split(c)))


@intrinsic
def _axpy_lanes(typingctx, dst, idst, x, ix, y, iy, cm):
    """dst[idst : idst + LANES] = x[ix : ...] + y[iy : ...] * c (canonical values;
    cm = c 2^32 mod p, c's Montgomery form; dst may be y)."""
    sig = types.void(dst, idst, x, ix, y, iy, cm)

    def codegen(context, builder, signature, args):
        g, da, xv, t = _x_and_cy(context, builder, signature, args, 2)
        builder.store(g.add(xv, t), _vec_ptr(builder, da, args[1], LANES), align=4)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _bfly_lanes(typingctx, dst, ia, ib, x, ix, y, iy, cm):
    """t = y[iy : iy + LANES] * c; dst[ia : ...] = x[ix : ...] + t, dst[ib : ...] =
    x[ix : ...] - t (canonical values; cm = c 2^32 mod p): the two children c and -c of
    one parent share the product."""
    sig = types.void(dst, ia, ib, x, ix, y, iy, cm)

    def codegen(context, builder, signature, args):
        g, da, xv, t = _x_and_cy(context, builder, signature, args, 3)
        builder.store(g.add(xv, t), _vec_ptr(builder, da, args[1], LANES), align=4)
        builder.store(g.sub(xv, t), _vec_ptr(builder, da, args[2], LANES), align=4)
        return context.get_dummy_value()

    return sig, codegen


_mm, _fadd, _fsub = HF.mont_mul, HF.add, HF.sub
#: the kernel's vectors (off: its scalar loop alone, the tests' reference for them)
LANES_ON = os.environ.get("STEADFAST_NTT_KERNEL", "lanes").strip().lower() != "scalar"


@njit(inline="always")
def _axpy(dst, idst, x, ix, y, iy, cm, count, lanes):
    """dst[idst + j] = x[ix + j] + y[iy + j] * c for j < count: vectors, then scalars."""
    j = 0
    if lanes:
        while j + LANES <= count:
            _axpy_lanes(dst, idst + j, x, ix + j, y, iy + j, cm)
            j += LANES
    while j < count:
        dst[idst + j] = _fadd(x[ix + j], _mm(y[iy + j], cm))
        j += 1


@njit(inline="always")
def _bfly(dst, ia, ib, x, ix, y, iy, cm, count, lanes):
    """dst[ia + j] = x[ix + j] + y[iy + j] * c, dst[ib + j] = x[ix + j] - y[iy + j] * c."""
    j = 0
    if lanes:
        while j + LANES <= count:
            _bfly_lanes(dst, ia + j, ib + j, x, ix + j, y, iy + j, cm)
            j += LANES
    while j < count:
        t = _mm(y[iy + j], cm)
        dst[ia + j] = _fadd(x[ix + j], t)
        dst[ib + j] = _fsub(x[ix + j], t)
        j += 1


@njit(cache=True, nogil=True)
def _open_groups_fused(coeffs, H, d, nkeys, ent_off, ea, eb, epar, ec, final_idx, cm, xh,
                       xpow, tw, out, lanes, c0, c1):
    # The halving tree's first d levels and Horner's rule below them, one pass over each
    # column.  The level-d remainder (M = n / 2^d coefficients) is never stored: its
    # coefficients s H .. s H + H - 1 come from f's 2^d blocks f[s H + t M], t < 2^d, by
    # the d levels (every key's blocks of one s in `scr`, a few KB), and every group's
    # f mod (X^H - C_q) = sum_s C_q^s r_s accumulates by Horner's rule from the top s
    # (H = max(G, a vector) -- or n where n < G --, C_q = x_q^H); rows narrower than
    # that are halved down to G per group after (xh[q, i] = x_q^(H / 2^(i+1))).
    # Canonical values throughout; cvals, cm and xh in Montgomery form (c 2^32 mod p).
    c, n = coeffs.shape
    Q, G = xpow.shape
    M = n >> d
    # scr: f's 2^d blocks of one s (level 0), then level l's keys' 2^(d-l) blocks each
    lvl_off = np.zeros(d + 1, np.int64)
    size = (1 << d) * H
    for l in range(d):
        lvl_off[l + 1] = size
        size += nkeys[l] * (1 << (d - l - 1)) * H
    for col in range(c0, c1):                # columns c0 .. c1 - 1: a host pool range
        f = coeffs[col]
        acc = np.zeros(Q * H, np.uint32)
        scr = np.empty(size, np.uint32)
        for s in range(M // H - 1, -1, -1):
            base = s * H
            for t in range(1 << d):
                scr[t * H:(t + 1) * H] = f[base + t * M:base + t * M + H]
            for l in range(d):
                cnt = 1 << (d - l - 1)              # blocks a key holds at level l + 1
                for e in range(ent_off[l], ent_off[l + 1]):
                    cv = ec[e]
                    da = lvl_off[l + 1] + ea[e] * cnt * H
                    pb = lvl_off[l] + epar[e] * (2 * cnt) * H
                    if eb[e] >= 0:                  # the keys c and -c: one product
                        db = lvl_off[l + 1] + eb[e] * cnt * H
                        for t in range(cnt):
                            _bfly(scr, da + t * H, db + t * H, scr, pb + t * H, scr,
                                  pb + (t + cnt) * H, cv, H, lanes)
                    else:
                        for t in range(cnt):
                            _axpy(scr, da + t * H, scr, pb + t * H, scr, pb + (t + cnt) * H,
                                  cv, H, lanes)
            for q in range(Q):
                _axpy(acc, q * H, scr, lvl_off[d] + final_idx[q] * H, acc, q * H, cm[q], H,
                      lanes)
        a = np.empty(G, np.uint64)
        for q in range(Q):
            h = H
            i = 0
            while h > G:                            # f mod (X^h - x^h) -> mod (X^(h/2) - x^(h/2))
                h >>= 1
                cv = xh[q, i]
                for j in range(h):
                    acc[q * H + j] = _fadd(acc[q * H + j], _mm(acc[q * H + h + j], cv))
                i += 1
            for j in range(G):
                a[j] = (np.uint64(acc[q * H + j]) * xpow[q, j]) % _P if j < h else \
                    np.uint64(0)
            _dif_into(a, tw, out, q, col)


def fused_depth(n: int, nkeys, groups: int, G: int, products=None) -> int:
    """How many halving levels the fused kernel runs before Horner's rule: the d (0 ..
    len(nkeys)) of the fewest products a column, n (sum_{l <= d} products_l / 2^l +
    groups / 2^d; products_l, a level's products per coefficient of its keys, is nkeys_l
    less its c/-c pairs, :func:`_entries`; nkeys_l when not given), whose scratch (f's 2^d
    blocks of G words, then sum_l nkeys_l 2^(d-l) of the levels') fits _SCRATCH_BYTES; the
    smallest d within 5 % of that fewest."""
    W = min(G, n)
    prods = nkeys if products is None else products
    best, cost = [], 0.0
    for d in range(len(nkeys) + 1):
        if d:
            cost += prods[d - 1] / (1 << d)
        scratch = ((1 << d) + sum(nkeys[l] * (1 << (d - l - 1)) for l in range(d))) * W * 4
        if d and scratch > _SCRATCH_BYTES:
            break
        best.append(cost + groups / (1 << d))
    low = min(best)
    return next(d for d, v in enumerate(best) if v <= 1.05 * low)


def _level_consts(shift: int, w_n: int, sizes, level_keys, levels: int) -> list:
    """c = x^m = shift^m w_N^(key m) of every key of the first ``levels`` halving levels,
    in Montgomery form (c 2^32 mod p): the only constants a kernel reads."""
    out = []
    for m, (keys, _) in zip(sizes[:levels], level_keys[:levels]):
        sm = pow(int(shift), m, P)
        out.append(np.array([(sm * pow(w_n, int(kk) * m, P) % P << 32) % P for kk in keys],
                            np.uint64))
    return out


def group_rows(coeffs: np.ndarray, log_blowup: int, shift: int, groups, log_group: int,
               method: str | None = None) -> np.ndarray:
    """The committed rows of tree groups ``groups`` (distinct group indices j: tree
    positions 2^log_group j .. 2^log_group (j + 1) - 1) of the coset LDE of ``coeffs``
    (uint32[c, n], degree < n, natural order) on shift<w_N>, N = n 2^log_blowup, tree
    position s = natural point bitrev_(log N)(s): uint32[len(groups), 2^log_group, c],
    equal to those rows of ``lde_columns(ntt(coeffs), log_blowup, shift)``."""
    coeffs = np.ascontiguousarray(coeffs, dtype=np.uint32)
    if coeffs.ndim != 2:
        raise ValueError(f"group_rows: coefficients must be uint32[c, n], got shape {coeffs.shape}")
    c, n = coeffs.shape
    if n < 1 or n & (n - 1):
        raise ValueError(f"group_rows: {n} coefficients per column is not a power of two")
    log_n = n.bit_length() - 1
    k, b = int(log_blowup), int(log_group)
    L = log_n + k
    if k < 0 or not 0 <= b <= L:
        raise ValueError(f"group_rows: log_blowup {k}, log_group {b} for 2^{log_n} rows")
    g = np.asarray(groups, dtype=np.int64).reshape(-1)
    if g.size and (g.min() < 0 or g.max() >= 1 << (L - b)):
        raise ValueError(f"group_rows: a group index is outside [0, 2^{L - b})")
    G = 1 << b
    out = np.empty((g.size, G, c), np.uint32)
    if g.size == 0 or c == 0:
        return out
    method = METHOD if method is None else method
    if method not in ("fused", "tree"):
        raise ValueError(f"group_rows: method must be 'fused' or 'tree', got {method!r}")
    plan = _plan(n, k, int(shift) % P, b, g.tobytes(), method, fused_depth)
    if method == "fused":
        args = (coeffs,) + plan + (out, LANES_ON and n >= LANES)
        run_ranges(lambda c0, c1: _open_groups_fused(*args, c0, c1), c, 1)
    else:
        _open_groups(coeffs, *plan, out)
    return out


@lru_cache(maxsize=128)
def _plan(n: int, k: int, shift: int, b: int, groups: bytes, method: str, depth) -> tuple:
    """Everything :func:`group_rows`' kernels read but the coefficients, for one shape and
    one set of groups: a proof opens every table of one height at the same groups, so a
    block's ~170 calls build ~15 of these (the Python ``pow`` loops were a third of the
    openings' time).  ``depth`` is :func:`fused_depth` (a key: tests replace it)."""
    g = np.frombuffer(groups, np.int64)
    L = n.bit_length() - 1 + k
    G, N = 1 << b, 1 << L
    w_n = root_of_unity(L)
    bj = bit_reverse_indices(g, L - b)                          # x_j = shift w_N^bj
    xs = [shift * pow(w_n, int(e), P) % P for e in bj]
    xpow = np.empty((g.size, G), np.uint64)         # x_q^j, a column at a time
    xpow[:, 0] = 1
    xv = np.asarray(xs, np.uint64)
    for j in range(1, G):
        xpow[:, j] = xpow[:, j - 1] * xv % np.uint64(P)
    tw = _dif_twiddles(G)
    # levels m = n/2, n/4, ..., G (none when G >= n: the remainder is f itself)
    sizes, nkeys, key_off, parent, level_keys = [], [], [], [], []
    prev_keys = np.zeros(1, np.int64)               # the root: f, one "key"
    prev_mod = 1
    m = n >> 1
    while m >= G and m >= 1:
        mod = N // m                                # x^m depends on bj mod (N/m)
        keys = np.unique(bj % mod)
        sizes.append(m)
        nkeys.append(keys.size)
        key_off.append(sum(nkeys[:-1]))
        parent.append(np.searchsorted(prev_keys, keys % prev_mod) if prev_mod > 1
                      else np.zeros(keys.size, np.int64))
        level_keys.append((keys, mod))
        prev_keys, prev_mod = keys, mod
        m >>= 1
    if method == "fused":
        # Horner's rows at least a vector wide (narrower ones would run the scalar loop
        # alone: slower than the stored tree's fewer products), halved down to G per
        # group at the end; a table of fewer rows than a vector in the scalar loop
        H = max(min(G, n), LANES) if n >= LANES else min(G, n)
        lv = [i for i, m in enumerate(sizes) if m >= H]             # the levels above H
        ents = [_entries(keys, mod) for keys, mod in level_keys[:len(lv)]]
        d = min(len(lv), max(0, int(depth(n, nkeys[:len(lv)], g.size, H,
                                          [len(e[0]) for e in ents]))))
        cvals = _level_consts(shift, w_n, sizes, level_keys, d)
        if d:
            keys, mod = level_keys[d - 1]
            final_idx = np.searchsorted(keys, bj % mod)
        else:
            final_idx = np.zeros(g.size, np.int64)
        cm = np.array([(pow(x, H, P) << 32) % P for x in xs], np.uint32)   # C_q = x_q^H
        steps = max(0, (H // min(G, n)).bit_length() - 1)
        xh = np.array([[(pow(x, H >> (i + 1), P) << 32) % P for i in range(steps)]
                       for x in xs], np.uint32).reshape(len(xs), steps)
        ent_off = np.zeros(d + 1, np.int64)
        ea, eb, epar, ec = [], [], [], []
        for l in range(d):
            a, bb = ents[l]
            ent_off[l + 1] = ent_off[l] + a.size
            ea.append(a)
            eb.append(bb)
            epar.append(parent[l][a])
            ec.append(cvals[l][a])
        cat = (lambda xs, t: np.concatenate(xs).astype(t) if xs else np.zeros(0, t))
        return (H, d, np.array(nkeys[:d], np.int64), ent_off, cat(ea, np.int64),
                cat(eb, np.int64), cat(epar, np.int64), cat(ec, np.uint32),
                np.asarray(final_idx, np.int64), cm, xh, xpow, tw)
    cvals = _level_consts(shift, w_n, sizes, level_keys, len(sizes))
    final_idx = (np.searchsorted(prev_keys, bj % prev_mod) if prev_mod > 1
                 else np.zeros(g.size, np.int64))
    return (np.array(sizes, np.int64), np.array(nkeys, np.int64),
            np.array(key_off, np.int64),
            np.concatenate(parent).astype(np.int64) if parent else np.zeros(0, np.int64),
            np.concatenate(cvals) if cvals else np.zeros(0, np.uint64),
            np.asarray(final_idx, np.int64), xpow, tw)


def _entries(keys: np.ndarray, mod: int) -> tuple[np.ndarray, np.ndarray]:
    """A halving level's products: its keys (sorted, in [0, mod)) paired as c and -c --
    key + mod/2 holds x^m w^(N/2) = -x^m, a child of the same parent -- so a pair costs one
    product (:func:`_bfly`): (a, b), key indices, b[i] = -1 where a[i]'s partner is not a
    key (a[i] is then the key present, lower or upper)."""
    half = mod >> 1
    j = np.searchsorted(keys, keys + half)
    has = (keys < half) & (j < keys.size)
    has[has] = keys[j[has]] == keys[has] + half
    lower_of = np.searchsorted(keys, keys - half)
    upper_alone = (keys >= half)
    upper_alone[upper_alone] = ~((lower_of[upper_alone] < keys.size)
                                 & (keys[np.minimum(lower_of[upper_alone], keys.size - 1)]
                                    == keys[upper_alone] - half))
    a = np.flatnonzero((keys < half) | upper_alone)
    b = np.where(has[a], j[a], -1).astype(np.int64)
    return a.astype(np.int64), b


@lru_cache(maxsize=None)
def _dif_twiddles(G: int) -> np.ndarray:
    """The G-point DIF's twiddles, stage by stage (half = G/2, G/4, ..., 1)."""
    tw = []
    half = G >> 1
    while half >= 1:
        w = root_of_unity((2 * half).bit_length() - 1)
        tw.extend(pow(w, j, P) for j in range(half))
        half >>= 1
    return np.array(tw or [1], np.uint64)


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("poseidon2_lanes.py", "hostlib.py", "field.py", "ntt_host.py"))
