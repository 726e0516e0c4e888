"""Number-theoretic transforms and coset low-degree extension over BabyBear (host).

Conventions (SPEC §1).  For n = 2^L, omega_n = 31^((p-1)/n) (:func:`field.root_of_unity`);
``ntt`` maps a[0..n) to  A[k] = sum_j a[j] * omega_n^(j*k)  and ``intt`` is its inverse
(divides by n).  Both work along the last axis, natural order in and out.  ``coset_lde``
takes evaluations of degree < n polynomials on <omega_n> and returns their evaluations on
the coset shift*<omega_N>, N = n * 2^k, again in natural order.

Algorithm.  Everything is radix-2 Cooley-Tukey on Montgomery twiddles, so a butterfly is
one 32-bit Montgomery multiplication (``mont_mul``, vectorised by LLVM) plus an add and a
subtract:
    DIT (decimation in time):       (a, b) -> (a + w b, a - w b)   bit-reversed in, natural out
    DIF (decimation in frequency):  (a, b) -> (a + b, (a - b) w)   natural in, bit-reversed out
For a stage of span h the butterflies pair x[s + j] with x[s + j + h] (s a multiple of 2h,
0 <= j < h) with twiddle w_{2h}^j, read from a table ``tw[h + j]`` that is the same for
every transform size, so one table (grown on demand) serves every n.

* ntt / intt: a bit-reversal *gather* copies the input into the output (optionally times a
  constant or a per-index table), then the DIT stages run in place.  No separate copy.
* coset LDE: DIF inverse NTT (natural in) gives the coefficients in bit-reversed order c'.
  Scaling c'_j by shift^rev(j) / n gives the bit-reversed coefficients of f(shift X).  The
  zero-padded size-N bit-reversed vector holds c'_j at position j*2^k and zeros elsewhere, so
  the first k DIT stages only copy (a, 0) -> (a, a): they are a replication by 2^k, and the
  remaining log n DIT stages produce the natural-order evaluations.  No bit reversal at all.
* coset LDE from coefficients (``lde_from_coeffs``): the same from its middle on; the scaled
  bit-reversed coefficients come from one bit-reversing gather of the coefficients times
  shift^j (no size-n transform at all).

Memory hierarchy.  Spans 1..8 run in 16 x 16 transposed tiles (fused with the gather, or
with the LDE's scaling and replication) so that their butterflies are long vector loops;
spans 16..2^11 run block by block (2^12 words, L1-resident); longer spans run in "slabs"
(up to 2^9 rows of 64 words, copied to a contiguous scratch), up to 9 stages per pass.

Threads.  A transform is a small program of such passes, interpreted by one nogil numba
function; Python threads (``numba.get_num_threads()`` of them, the calling one and the
shared pool's: :mod:`kernels.host_pool`) run one whole row each (rows stay cache-resident)
or, for few long rows, split every pass into tasks.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from . import field, host_pool, ntt_lanes
from .field import P, to_mont_host
from .hostlib import HF
from .ntt_tables import (_TILE, _check_array, _check_blowup, _check_shift, _log2_size,
                         _table, twiddles)

_LOG_BLOCK = 12                 # in-cache block of the short spans: 2^12 words = 16 KiB
_BLOCK = 1 << _LOG_BLOCK
_LC = 64                        # slab width: contiguous words per slab row
_MAX_SLAB = 9                   # at most 2^9 slab rows (stages) per slab pass
_MODE_COPY, _MODE_CONST, _MODE_TABLE, _MODE_POW = 0, 1, 2, 3
_REV4 = np.array([int(f"{i:04b}"[::-1], 2) for i in range(16)], np.int64)   # 4-bit reversal


def build_butterflies(F, jit):
    """The two radix-2 butterflies over field functions ``F`` (host HF or device DF).

    ``w_m`` is a twiddle in Montgomery form, so ``mont_mul(b, w_m) = b * w`` canonical.
    Written once, compiled for the CPU here and for CUDA in :mod:`kernels.ntt_device`.
    """
    add, sub, mont_mul = F.add, F.sub, F.mont_mul

    @jit
    def dit(a, b, w_m):
        t = mont_mul(b, w_m)
        return add(a, t), sub(a, t)

    @jit
    def dif(a, b, w_m):
        return add(a, b), mont_mul(sub(a, b), w_m)

    class Butterflies:
        pass

    ns = Butterflies()
    ns.dit, ns.dif = dit, dif
    return ns


BF = build_butterflies(HF, njit(inline="always"))
_dit, _dif, _mm = BF.dit, BF.dif, HF.mont_mul


# --------------------------------------------------------------------------- short spans
# numba links every callee into each compiled caller and re-optimises the whole, so compile
# time grows with the number of compiled entry points times their call trees.  Hence few
# helpers (DIT and DIF share each one, ``forward`` selects) and a single serial entry point
# (:func:`_tasks`), parallelised by a Python thread pool (it releases the GIL).
# Inner loops are contiguous and long so that LLVM vectorises the Montgomery butterflies.

@njit(cache=True)
def _strided(u, v, w, forward):
    # one twiddle, strided operands: offset j of a stage with span < 16 (small sizes only)
    if forward:
        for i in range(u.size):
            u[i], v[i] = _dit(u[i], v[i], w)
    else:
        for i in range(u.size):
            u[i], v[i] = _dif(u[i], v[i], w)


@njit(cache=True)
def _block(x, lo, size, h0, tw, forward, lanes):
    """On the block x[lo:lo+size]: DIT spans h0, 2 h0, ..., size/2 (forward) or DIF spans
    size/2, ..., h0.  ``lanes``: the butterflies of spans >= 16 in 32-bit lanes
    (kernels/ntt_lanes.py; the same values)."""
    h = h0 if forward else size // 2
    while h >= h0 and h < size:
        if h < _TILE:
            for j in range(h):
                _strided(x[lo + j:lo + size:2 * h], x[lo + j + h:lo + size:2 * h], tw[h + j],
                         forward)
        elif lanes:
            for s in range(lo, lo + size, 2 * h):
                ntt_lanes.run(x, s, s + h, tw, h, h, forward)
        else:
            w = tw[h:2 * h]
            for s in range(lo, lo + size, 2 * h):
                u = x[s:s + h]
                v = x[s + h:s + 2 * h]
                if forward:
                    for j in range(h):
                        u[j], v[j] = _dit(u[j], v[j], w[j])
                else:
                    for j in range(h):
                        u[j], v[j] = _dif(u[j], v[j], w[j])
        h = h * 2 if forward else h // 2


# Spans 1..8 pair elements inside aligned groups of 16.  A 16 x 16 tile S (flat
# uint32[256]) holds 16 groups transposed, S[16 p + g] = element p of group g, so those
# stages become butterflies between tile rows, vectorised across the 16 groups.
@njit(cache=True)
def _tile(S, h0, tw, forward, lanes):
    """DIT spans h0, ..., 8 (forward) or DIF spans 8, ..., h0 along the rows of tile S."""
    h = h0 if forward else _TILE // 2
    while h >= h0 and h < _TILE:
        for p in range(_TILE):
            if p & h:
                continue
            w = tw[h + (p & (h - 1))]
            if lanes:
                ntt_lanes.run_splat(S, _TILE * p, _TILE * (p + h), w, _TILE, forward)
            else:
                u = S[_TILE * p:_TILE * p + _TILE]
                v = S[_TILE * (p + h):_TILE * (p + h) + _TILE]
                if forward:
                    for g in range(_TILE):
                        u[g], v[g] = _dit(u[g], v[g], w)
                else:
                    for g in range(_TILE):
                        u[g], v[g] = _dif(u[g], v[g], w)
        h = h * 2 if forward else h // 2


# --------------------------------------------------------------------------- long spans
# Stages s_lo <= s < s_hi (spans 2^s >= block) only pair indices that differ in bits
# [s_lo, s_hi).  Writing an index as (g, i, l) with l < 2^s_lo, i < 2^(s_hi - s_lo), each
# (g, run of _LC consecutive l) is an independent "slab" of 2^(s_hi-s_lo) rows of _LC
# contiguous words (stride 2^s_lo) that goes through all those stages while in L1/L2; the
# twiddle of row i at span h is tw[h + (i mod h/2^s_lo) 2^s_lo + l], contiguous in l.

@njit(cache=True)
def _slab(x, s_lo, s_hi, q, tw, forward, buf, lanes):
    """Slab q of the pass over stages [s_lo, s_hi): DIT ascending or DIF descending.

    The slab is copied into the contiguous scratch ``buf`` first: its rows sit 2^s_lo
    words apart, a power-of-two stride that maps them all onto a few cache sets."""
    stride = 1 << s_lo
    lc = min(_LC, stride)
    per_g = stride // lc
    base = ((q // per_g) << s_hi) + (q % per_g) * lc
    l0 = (q % per_g) * lc
    rows = 1 << (s_hi - s_lo)
    for i in range(rows):
        src = x[base + i * stride:base + i * stride + lc]
        for j in range(lc):
            buf[i * lc + j] = src[j]
    for st in range(s_hi - s_lo):
        s = s_lo + st if forward else s_hi - 1 - st
        h = 1 << s
        hr = h >> s_lo
        for i0 in range(0, rows, 2 * hr):
            for ii in range(hr):
                p = (i0 + ii) * lc
                t0 = h + ii * stride + l0
                if lanes:
                    ntt_lanes.run(buf, p, p + hr * lc, tw, t0, lc, forward)
                    continue
                u = buf[p:p + lc]
                v = buf[p + hr * lc:p + hr * lc + lc]
                w = tw[t0:t0 + lc]
                if forward:
                    for j in range(lc):
                        u[j], v[j] = _dit(u[j], v[j], w[j])
                else:
                    for j in range(lc):
                        u[j], v[j] = _dif(u[j], v[j], w[j])
    for i in range(rows):
        dst = x[base + i * stride:base + i * stride + lc]
        for j in range(lc):
            dst[j] = buf[i * lc + j]


# --------------------------------------------------------------------------- fused passes
@njit(cache=True)
def _gather_dit(src, dst, log_n, m, mode, c_m, tab, tw, S, stages, lanes):
    """Piece m of: dst[i] = src[rev(i)] * factor(rev(i)), then DIT spans 1, 2, 4, 8
    (only the gather when ``stages`` is false; then piece m is the one with rev mid = m).

    factor(j) is 1 (mode 0), c_m (mode 1), tab[j] (mode 2) or x^j from the small powers
    table of :func:`kernels.ntt_tables._table` kind ``pow`` (mode 3, n >= 256 only),
    Montgomery form, indexed by the *source* position.  For n = 2^L >= 256 write
    i = (a, mid, b) with 4-bit a and b: rev(i) = (rev b, rev mid, rev a).  Piece m fixes
    mid: it reads 16 whole source cache lines into the tile S[16 b + a'] =
    src[(rev b, rev m, a')], runs the first four DIT stages (along b) as tile-row
    butterflies, and writes 16 whole destination lines dst[(a, m, 0..15)] = S[16 b + rev a].
    Smaller n: one piece, element-wise, no stages.
    """
    if log_n < 8:
        for i in range(1 << log_n):
            j = 0
            for bit in range(log_n):
                j |= ((i >> bit) & 1) << (log_n - 1 - bit)
            v = src[j]
            if mode == 1:
                v = _mm(v, c_m)
            elif mode == 2:
                v = _mm(v, tab[j])
            dst[i] = v
        return
    hi = log_n - 4
    rv = 0
    for bit in range(log_n - 8):
        rv |= ((m >> bit) & 1) << (log_n - 9 - bit)
    md = m if stages else rv        # the plain gather numbers its pieces by source lines:
    rm = (rv if stages else m) << 4     # consecutive pieces read consecutive lines
    for b in range(_TILE):
        j0 = (_REV4[b] << hi) | rm
        for a in range(_TILE):              # explicit loops: numba slice assignment
            S[_TILE * b + a] = src[j0 + a]  # may allocate a temporary
        if mode == 2:
            for a in range(_TILE):
                S[_TILE * b + a] = _mm(S[_TILE * b + a], tab[j0 + a])
        elif mode == 3:                     # x^j0 x^a = x^(rev b << hi) x^rm x^a
            f = _mm(tab[_TILE + b], tab[2 * _TILE + (rm >> 4)])
            for a in range(_TILE):
                S[_TILE * b + a] = _mm(_mm(S[_TILE * b + a], tab[a]), f)
    if mode == 1:
        for i in range(_TILE * _TILE):
            S[i] = _mm(S[i], c_m)
    if stages:
        _tile(S, np.int64(1), tw, np.bool_(True), lanes)   # the other call site's types
    for a in range(_TILE):
        d0 = (a << hi) | (md << 4)
        ra = _REV4[a]
        for b in range(_TILE):
            dst[d0 + b] = S[_TILE * b + ra]


@njit(cache=True)
def _lde_tiles(t, o, itw, tw, scale, k, lo, bn, S, O, raw, lanes):
    """Middle of the LDE for the n-block t[lo:lo+bn] (its spans >= 16 already done, DIF):
    DIF spans 8..1, scale by shift^rev(j)/n, replicate 2^k times into o[lo 2^k : ...] and
    the DIT spans 2^k..8 there.  Small transforms (bn < 256, whole row in one block) have
    had all their DIF spans and only get the scale and replication.  ``raw``: t already
    holds the scaled bit-reversed coefficients (:func:`lde_from_coeffs`), so no DIF spans
    and no scale, only the replication and the DIT spans."""
    r = 1 << k
    if bn < _TILE * _TILE:
        for j in range(lo, lo + bn):
            v = t[j] if raw else _mm(t[j], scale[j])
            for q in range(j * r, j * r + r):
                o[q] = v
        return
    for base in range(lo, lo + bn, _TILE * _TILE):      # 256-word tiles
        for p in range(_TILE):
            for g in range(_TILE):
                S[_TILE * p + g] = t[base + _TILE * g + p]
        ob = base << k
        # phase 0: DIF spans 8..1 on S, then scale (the table is tile-transposed);
        # phase c + 1 (k < 4): o-group c of each group g holds S rows (16 c + s) >> k,
        # copied into O, DIT spans 2^k..8, stored back transposed.
        for phase in range(1 + (r if r < _TILE else 0)):
            c = phase - 1
            if phase > 0:
                for s in range(_TILE):
                    p = (_TILE * c + s) >> k
                    for g in range(_TILE):
                        O[_TILE * s + g] = S[_TILE * p + g]
            if phase > 0 or not raw:
                _tile(S if phase == 0 else O, 1 if phase == 0 else r,
                      itw if phase == 0 else tw, phase > 0, lanes)
            if phase == 0:
                if not raw:
                    for i in range(_TILE * _TILE):
                        S[i] = _mm(S[i], scale[base + i])
            else:
                for g in range(_TILE):
                    q0 = ob + (g << (4 + k)) + _TILE * c
                    for s in range(_TILE):
                        o[q0 + s] = O[_TILE * s + g]
        if r >= _TILE:                                  # no short DIT spans: replicate
            for g in range(_TILE):
                for p in range(_TILE):
                    v = S[_TILE * p + g]
                    q0 = ob + ((_TILE * g + p) << k)
                    for q in range(q0, q0 + r):
                        o[q] = v


# --------------------------------------------------------------------------- passes
# A transform is a small *program* of passes, each a set of independent tasks over the
# rows (tile pieces, blocks, slabs).  Program rows: (op, i1, i2, tasks per row, group).
# Consecutive passes of one group run task by task together (the LDE's DIF block, tiles
# and DIT block of one n-block stay in cache).  :func:`_tasks` interprets the program,
# calling each helper from one place only (numba inlines callees into every call site).
#   ntt/intt:  GATHER, DIT_BLOCKS, DIT_SLABS..., [SCALE]
#   LDE:       DIF_SLABS..., {DIF_BLOCKS, LDE_TILES, DIT_BLOCKS}, DIT_SLABS...
#   LDE from coefficients:  BITREV, {LDE_RAW, DIT_BLOCKS}, DIT_SLABS...
# Rows mode runs the whole program on row q per task q (rows stay cache-resident);
# otherwise Python runs one group at a time with tasks over rows x tasks-per-row.
OP_GATHER, OP_DIT_BLOCKS, OP_DIF_BLOCKS, OP_DIT_SLABS, OP_DIF_SLABS, OP_LDE_TILES, \
    OP_SCALE, OP_TRANSPOSE, OP_BITREV, OP_LDE_RAW = range(10)
_PIECES_PER_TASK = 16


@njit(cache=True, nogil=True)
def _tasks(prog, rows_mode, a, b, c, tw, itw, tab, tab2, log_n, c_m, lanes, q_lo, q_hi):
    """Run tasks q_lo <= q < q_hi of ``prog`` (the only compiled entry point).

    a, b: uint32[rows, *]: the source (and DIF work) rows and the destination rows;
    c: uint32[rows, n], BITREV's source rows (else empty).
    GATHER a -> b (i1 = mode, tab = pre); BITREV c -> a (the gather alone, i1 = mode,
    tab = pre or pow); DIT_BLOCKS on b, DIF_BLOCKS on a (i1 = block, i2 = smallest span);
    *_SLABS (stages [i1, i2)); LDE_TILES a -> b (i1 = k, i2 = n-block, tab = scale);
    LDE_RAW a -> b (the same without DIF spans and scale); SCALE b by tab2 (i1 = block);
    TRANSPOSE b[j, i] = a[i, j] (tile q).  ``lanes``: butterflies in 32-bit lanes
    (kernels/ntt_lanes.py, ``STEADFAST_NTT_KERNEL``), else the scalar loops; same values.
    """
    n = 1 << log_n
    S = np.empty(_TILE * _TILE, np.uint32)
    O = np.empty(_TILE * _TILE, np.uint32)
    buf = np.empty(_LC << _MAX_SLAB, np.uint32)
    for q in range(q_lo, q_hi):
        if prog[0, 0] == OP_TRANSPOSE:          # 32 x 32 tile q
            tj = (a.shape[1] + 31) // 32
            r0 = (q // tj) * 32
            c0 = (q % tj) * 32
            for j in range(c0, min(a.shape[1], c0 + 32)):
                for i in range(r0, min(a.shape[0], r0 + 32)):
                    b[j, i] = a[i, j]
            continue
        r = q if rows_mode else q // prog[0, 3]
        x = a[r]
        y = b[r]
        z = c[r] if c.shape[0] > 0 else x
        p = 0
        while p < prog.shape[0]:
            p_end = p + 1
            while p_end < prog.shape[0] and prog[p_end, 4] == prog[p, 4]:
                p_end += 1
            u_lo = 0 if rows_mode else q % prog[p, 3]
            u_hi = prog[p, 3] if rows_mode else u_lo + 1
            for u in range(u_lo, u_hi):
                for pp in range(p, p_end):
                    op, i1, i2, per = prog[pp, 0], prog[pp, 1], prog[pp, 2], prog[pp, 3]
                    if op == OP_GATHER or op == OP_BITREV:
                        gat = op == OP_GATHER
                        pieces = max(1, n >> 8)
                        for m in range(u * pieces // per, (u + 1) * pieces // per):
                            _gather_dit(x if gat else z, y if gat else x, log_n, m, i1, c_m,
                                        tab, tw, S, gat, lanes)
                    elif op == OP_DIT_BLOCKS or op == OP_DIF_BLOCKS:
                        fwd = op == OP_DIT_BLOCKS
                        _block(y if fwd else x, u * i1, i1, i2, tw if fwd else itw, fwd,
                               lanes)
                    elif op == OP_DIT_SLABS or op == OP_DIF_SLABS:
                        fwd = op == OP_DIT_SLABS
                        _slab(y if fwd else x, i1, i2, u, tw if fwd else itw, fwd, buf,
                              lanes)
                    elif op == OP_LDE_TILES or op == OP_LDE_RAW:
                        _lde_tiles(x, y, itw, tw, tab, i1, u * i2, i2, S, O, op == OP_LDE_RAW,
                                   lanes)
                    elif op == OP_SCALE:
                        for i in range(u * i1, (u + 1) * i1):
                            y[i] = _mm(y[i], tab2[i])
            p = p_end


def _lde_blocks(log_n: int, k: int) -> tuple[int, int]:
    """(n-block, o-block): o-block about 2^_LOG_BLOCK words, n-block >= 256 or all of n."""
    n = 1 << log_n
    bo = max(min(n, _TILE * _TILE) << k, min(n << k, _BLOCK))
    return bo >> k, bo


def _slab_passes(op: int, log_size: int, s: int, e: int, group: int) -> list:
    """Slab passes over stages [s, e) of rows of 2^log_size words, at most _MAX_SLAB stages
    each; DIF ones in descending order.  Rows: (op, s_lo, s_hi, slabs per row, group)."""
    out = []
    for lo in range(s, e, _MAX_SLAB):
        hi = min(e, lo + _MAX_SLAB)
        per = (1 << (log_size - hi)) * ((1 << lo) // min(_LC, 1 << lo))
        out.append([op, lo, hi, per, group + len(out)])
    return out[::-1] if op == OP_DIF_SLABS else out


def _xform_program(log_n: int, mode: int, post: bool) -> np.ndarray:
    n = 1 << log_n
    blk = min(n, _BLOCK)
    prog = [[OP_GATHER, mode, 0, max(1, n // (256 * _PIECES_PER_TASK)), 0],
            [OP_DIT_BLOCKS, blk, _TILE if log_n >= 8 else 1, n // blk, 1]]
    prog += _slab_passes(OP_DIT_SLABS, log_n, _LOG_BLOCK, log_n, 2)
    if post:
        prog.append([OP_SCALE, blk, 0, n // blk, 99])
    return np.array(prog, np.int64)


def _lde_program(log_n: int, k: int) -> np.ndarray:
    bn, bo = _lde_blocks(log_n, k)
    lb = bn.bit_length() - 1
    tiles = bn >= _TILE * _TILE
    per = (1 << log_n) // bn
    prog = _slab_passes(OP_DIF_SLABS, log_n, lb, log_n, 0)
    prog += [[OP_DIF_BLOCKS, bn, _TILE if tiles else 1, per, 50],
             [OP_LDE_TILES, k, bn, per, 50],
             [OP_DIT_BLOCKS, bo, max(1 << k, _TILE) if tiles else 1 << k, per, 50]]
    prog += _slab_passes(OP_DIT_SLABS, log_n + k, lb + k, log_n + k, 60)
    return np.array(prog, np.int64)


def _lde_coeffs_program(log_n: int, k: int) -> np.ndarray:
    """The LDE's program with its first half (DIF spans, scale) replaced by one gather of
    the coefficients into bit-reversed order times shift^j (BITREV, c -> a)."""
    n = 1 << log_n
    prog = _lde_program(log_n, k)
    prog = prog[(prog[:, 4] >= 50) & (prog[:, 0] != OP_DIF_BLOCKS)]
    prog[prog[:, 0] == OP_LDE_TILES, 0] = OP_LDE_RAW
    mode = _MODE_POW if log_n >= 8 else _MODE_TABLE
    gather = [[OP_BITREV, mode, 0, max(1, n // (256 * _PIECES_PER_TASK)), 0]]
    return np.concatenate([np.array(gather, np.int64), prog])


_NONE = np.empty(0, np.uint32)
_NONE2 = np.empty((0, 0), np.uint32)


_MIN_PARALLEL_WORDS = 1 << 15
#: the butterflies in 32-bit lanes (kernels/ntt_lanes.py) unless STEADFAST_NTT_KERNEL=scalar
_LANES = np.bool_(ntt_lanes.ENABLED)


def _run(prog, a, b, tw=_NONE, itw=_NONE, tab=_NONE, tab2=_NONE, log_n=0, c_m=0, words=0,
         c=_NONE2):
    """Run ``prog`` over all rows of a/b: one row per task (rows mode) when that keeps the
    threads busy, else group by group with tasks over rows x tasks-per-row.  Tasks are
    split in contiguous ranges over numba.get_num_threads() threads."""
    rows = a.shape[0]
    t = numba.get_num_threads()
    rows_mode = t == 1 or log_n < 14 or rows >= 2 * t or (rows >= t and rows % t == 0)
    if prog[0, 0] == OP_TRANSPOSE or rows_mode:
        _launch(prog, rows_mode, rows if prog[0, 0] != OP_TRANSPOSE else int(prog[0, 3]),
                (a, b, c, tw, itw, tab, tab2, log_n, np.uint32(c_m), _LANES), words)
        return
    start = 0
    while start < len(prog):
        end = start + 1
        while end < len(prog) and prog[end, 4] == prog[start, 4]:
            end += 1
        _launch(prog[start:end], False, rows * int(prog[start, 3]),
                (a, b, c, tw, itw, tab, tab2, log_n, np.uint32(c_m), _LANES), words)
        start = end


def _launch(prog, rows_mode, ntasks, args, words):
    t = min(numba.get_num_threads(), ntasks)
    if t <= 1 or words < _MIN_PARALLEL_WORDS:
        _tasks(prog, rows_mode, *args, 0, ntasks)
        return
    host_pool.run_dynamic(lambda t0, t1: _tasks(prog, rows_mode, *args, t0, t1), ntasks, t)


# --------------------------------------------------------------------------- transforms
def _xform_into(src, dst, log_n, inverse, pre, post):
    """dst[r] = transform of src[r] (uint32[rows, n] C-contiguous, distinct arrays)."""
    n = src.shape[1]
    tw = twiddles(log_n, inverse)
    mode, c_m = _MODE_COPY, 0
    if inverse:
        mode, c_m = _MODE_CONST, int(to_mont_host(pow(n, P - 2, P)))
    if pre.size:
        mode = _MODE_TABLE
    _run(_xform_program(log_n, mode, post.size > 0), src, dst, tw, tab=pre, tab2=post,
         log_n=log_n, c_m=c_m, words=src.size)


def _xform(a, name, inverse, pre_kind=None, post_kind=None, shift=1):
    a = _check_array(a, name)
    if a.ndim == 0:
        raise ValueError(f"{name}: expected at least one axis, got a 0-d array")
    n = a.shape[-1]
    log_n = _log2_size(n, name)
    out = np.empty(a.shape, np.uint32)
    if out.size == 0:
        return out
    pre = _NONE if pre_kind is None else _table(pre_kind, log_n, shift)
    post = _NONE if post_kind is None else _table(post_kind, log_n, shift)
    _xform_into(np.ascontiguousarray(a).reshape(-1, n), out.reshape(-1, n), log_n, inverse,
                pre, post)
    return out


def ntt(a: np.ndarray) -> np.ndarray:
    """Forward NTT along the last axis: out[k] = sum_j a[j] omega_n^(jk), natural order.

    ``a``: uint32 (canonical), any leading batch shape, last axis n = 2^L <= 2^27.
    Returns a new array of the same shape.
    """
    return _xform(a, "ntt", False)


def intt(a: np.ndarray) -> np.ndarray:
    """Inverse NTT along the last axis: out[j] = n^-1 sum_k a[k] omega_n^(-jk)."""
    return _xform(a, "intt", True)


def coset_ntt(coeffs: np.ndarray, shift: int = field.GENERATOR) -> np.ndarray:
    """Evaluate coefficient rows (last axis, degree < n) on shift*<omega_n>, natural order:
    out[i] = sum_j coeffs[j] (shift omega_n^i)^j."""
    return _xform(coeffs, "coset_ntt", False, pre_kind="pre", shift=_check_shift(shift))


def coset_intt(evals: np.ndarray, shift: int = field.GENERATOR) -> np.ndarray:
    """Interpolate from shift*<omega_n> (last axis, natural order) back to coefficients;
    the inverse of :func:`coset_ntt` with the same shift."""
    return _xform(evals, "coset_intt", True, post_kind="post", shift=_check_shift(shift))


def _lde_into(t, o, log_n, k, shift):
    """t: uint32[w, n] owned scratch (overwritten), o: uint32[w, n 2^k] output."""
    _run(_lde_program(log_n, k), t, o, twiddles(log_n + k, False), twiddles(log_n, True),
         _table("lde", log_n, shift), log_n=log_n, words=o.size)


def lde_from_coeffs(coeffs: np.ndarray, log_blowup: int, shift: int = field.GENERATOR,
                    out: np.ndarray | None = None, work: np.ndarray | None = None) -> np.ndarray:
    """Column-major coset LDE from coefficients: uint32[w, n] (row c = the coefficients of
    polynomial c, natural order, degree < n) -> uint32[w, n 2^k], row c = its evaluations on
    shift*<omega_{n 2^k}>, natural order.  The same bits as
    ``lde_columns(ntt(coeffs), log_blowup, shift)`` at the cost of the size-n 2^k forward
    transform only: one bit-reversing gather scales coefficient j by shift^j into the
    bit-reversed order the DIT stages read, and the LDE's replication and DIT passes
    follow (no size-n forward or inverse transform).  The coset shift*<omega_{n 2^j}> of a
    smaller blowup j is ``log_blowup = j`` with the same shift.

    ``out``: optional uint32[w, n 2^k] C-contiguous array to write into (returned); it must
    not overlap ``coeffs``.  ``work``: optional uint32[w, n] C-contiguous scratch (its
    contents are overwritten; it must overlap neither), else one is allocated.
    """
    a = _check_array(coeffs, "lde_from_coeffs")
    if a.ndim != 2:
        raise ValueError(f"lde_from_coeffs: expected a 2-d array [w, n], got shape {a.shape}")
    k = _check_blowup(log_blowup)
    w, n = a.shape
    log_n = _log2_size(n, "lde_from_coeffs", k)
    shift = _check_shift(shift)
    if out is None:
        out = np.empty((w, n << k), np.uint32)
    else:
        _check_array(out, "lde_from_coeffs: out")
        if out.shape != (w, n << k):
            raise ValueError(f"lde_from_coeffs: out has shape {out.shape}, expected {(w, n << k)}")
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise ValueError("lde_from_coeffs: out must be a writeable C-contiguous array")
        if np.shares_memory(out, a):
            raise ValueError("lde_from_coeffs: out must not overlap coeffs")
    if out.size:
        if work is None:
            t = np.empty((w, n), np.uint32)
        else:
            _check_array(work, "lde_from_coeffs: work")
            if (work.shape != (w, n) or not work.flags.c_contiguous
                    or not work.flags.writeable):
                raise ValueError(f"lde_from_coeffs: work must be a writeable C-contiguous "
                                 f"uint32 array of shape {(w, n)}, got {work.shape}")
            if np.shares_memory(work, out) or np.shares_memory(work, a):
                raise ValueError("lde_from_coeffs: work must overlap neither coeffs nor out")
            t = work
        _run(_lde_coeffs_program(log_n, k), t, out, twiddles(log_n + k, False),
             tab=_table("pow" if log_n >= 8 else "pre", log_n, shift), log_n=log_n,
             words=out.size, c=np.ascontiguousarray(a))
    return out


def _transpose(a, out):
    """out = a.T for C-contiguous uint32 matrices, in 32 x 32 tiles."""
    tiles = ((a.shape[0] + 31) // 32) * ((a.shape[1] + 31) // 32)
    _run(np.array([[OP_TRANSPOSE, 0, 0, tiles, 0]], np.int64), a, out, words=a.size)


def transpose(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``a.T`` (2-d): uint32 matrices in 32 x 32 tiles on the host
    pool (3-6x numpy's strided copy for an (n, w) trace), other arrays by numpy."""
    a = np.asarray(a)
    if a.ndim != 2 or a.dtype != np.uint32 or a.size == 0:
        return np.ascontiguousarray(a.T)
    out = np.empty((a.shape[1], a.shape[0]), np.uint32)
    _transpose(np.ascontiguousarray(a), out)
    return out


def lde_columns(evals_T: np.ndarray, log_blowup: int, shift: int = field.GENERATOR) -> np.ndarray:
    """Column-major coset LDE: uint32[w, n] (row c = evaluations of polynomial c on
    <omega_n>) -> uint32[w, n 2^k], row c = evaluations on shift*<omega_{n 2^k}>."""
    a = _check_array(evals_T, "lde_columns")
    if a.ndim != 2:
        raise ValueError(f"lde_columns: expected a 2-d array [w, n], got shape {a.shape}")
    k = _check_blowup(log_blowup)
    log_n = _log2_size(a.shape[1], "lde_columns", k)
    shift = _check_shift(shift)
    o = np.empty((a.shape[0], a.shape[1] << k), np.uint32)
    if o.size:
        _lde_into(np.array(a, order="C", copy=True), o, log_n, k, shift)
    return o


def coset_lde(evals: np.ndarray, log_blowup: int, shift: int = field.GENERATOR) -> np.ndarray:
    """Coset low-degree extension (SPEC §1, §5).

    ``evals``: uint32[n, w], row i = the values of w polynomials (columns) at omega_n^i.
    Returns uint32[n 2^k, w] (k = ``log_blowup`` >= 0), row i = their values at
    shift * omega_{n 2^k}^i, natural order.  k = 0 re-evaluates on the coset itself.
    """
    a = _check_array(evals, "coset_lde")
    if a.ndim != 2:
        raise ValueError(f"coset_lde: expected a 2-d array [n, w], got shape {a.shape}")
    k = _check_blowup(log_blowup)
    n, w = a.shape
    log_n = _log2_size(n, "coset_lde", k)
    shift = _check_shift(shift)
    big = n << k
    if w == 0:
        return np.empty((big, 0), np.uint32)
    if w == 1:
        o = np.empty((1, big), np.uint32)
        _lde_into(a.reshape(1, n).copy(), o, log_n, k, shift)
        return o.reshape(big, 1)
    t = np.empty((w, n), np.uint32)
    _transpose(np.ascontiguousarray(a), t)
    o = np.empty((w, big), np.uint32)
    _lde_into(t, o, log_n, k, shift)
    out = np.empty((big, w), np.uint32)
    _transpose(o, out)
    return out


def bit_reverse_indices(idx, bits: int) -> np.ndarray:
    """rev_bits(i) of every integer in ``idx`` (int64 array of the same shape): the index
    form of :func:`bit_reverse_permutation`, for a few positions of a long axis."""
    idx = np.asarray(idx, dtype=np.int64)
    out = np.zeros_like(idx)
    for b in range(int(bits)):
        out |= ((idx >> b) & 1) << (bits - 1 - b)
    return out


def bit_reverse_permutation(a: np.ndarray, axis: int = -1) -> np.ndarray:
    """Copy of ``a`` (any dtype) with the indices along ``axis`` (length 2^L) bit-reversed:
    out[..., i, ...] = a[..., rev_L(i), ...]."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"bit_reverse_permutation: expected a numpy array, got {type(a).__name__}")
    if a.ndim == 0:
        raise ValueError("bit_reverse_permutation: expected at least one axis")
    log_n = _log2_size(a.shape[axis], "bit_reverse_permutation")
    rev = np.zeros(1, np.int64)
    for level in range(log_n):                    # same interleaving as _bitrev_powers
        rev = np.stack([rev, rev + (1 << level)], axis=1).reshape(-1)
    return np.take(a, rev, axis=axis)


__all__ = ["ntt", "intt", "coset_ntt", "coset_intt", "coset_lde", "lde_columns",
           "lde_from_coeffs", "bit_reverse_permutation", "twiddles", "build_butterflies",
           "transpose"]


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("ntt_lanes.py", "poseidon2_lanes.py", "field.py", "hostlib.py", "ntt_tables.py"))
