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

Cache blocking.  Stages with span below a block (2^_LOG_BLOCK words, L1/L2-resident) run
block by block, all such stages on a block before the next block; longer spans run one
pass per stage in chunks.  Batched transforms either run one whole row per thread (rows
stay cache-resident) or, for few long rows, parallelise blocks/chunks inside each pass.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numba
import numpy as np
from numba import njit, prange

from . import field
from .field import P, TWO_ADICITY, root_of_unity, to_mont_host
from .hostlib import HF

_LOG_BLOCK = 13                 # in-cache block: 2^13 words = 32 KiB
_BLOCK = 1 << _LOG_BLOCK
_CHUNK = 1 << 12                # work unit of a long-span stage
_TILE = 16                      # spans below 16 run in 16 x 16 tiles
_MODE_COPY, _MODE_CONST, _MODE_TABLE = 0, 1, 2
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


# --------------------------------------------------------------------------- stages
# The helpers below are ordinary (non-inlined) numba functions: each is compiled once and
# linked into the parallel drivers, which keeps cold compile time low.  Their inner loops
# are contiguous so that LLVM vectorises the Montgomery butterflies.

@njit(cache=True)
def _dit_part(x, lo, size, h, j0, ln, tw):
    """DIT butterflies of span h on x[lo:lo+size] restricted to offsets j0 <= j < j0+ln in
    each block of 2h (a whole stage: j0 = 0, ln = h; a chunk of a long stage: size = 2h)."""
    w = tw[h + j0:h + j0 + ln]
    for s in range(lo + j0, lo + size, 2 * h):
        u = x[s:s + ln]
        v = x[s + h:s + h + ln]
        for j in range(ln):
            u[j], v[j] = _dit(u[j], v[j], w[j])


@njit(cache=True)
def _dif_part(x, lo, size, h, j0, ln, tw):
    """DIF counterpart of :func:`_dit_part`."""
    w = tw[h + j0:h + j0 + ln]
    for s in range(lo + j0, lo + size, 2 * h):
        u = x[s:s + ln]
        v = x[s + h:s + h + ln]
        for j in range(ln):
            u[j], v[j] = _dif(u[j], v[j], w[j])


@njit(cache=True)
def _dit_strided(u, v, w):
    # one twiddle, strided operands: the butterflies with offset j of a short-span stage
    for i in range(u.size):
        u[i], v[i] = _dit(u[i], v[i], w)


@njit(cache=True)
def _dif_strided(u, v, w):
    for i in range(u.size):
        u[i], v[i] = _dif(u[i], v[i], w)


@njit(cache=True)
def _dit_block(x, lo, size, h0, tw):
    """DIT stages of span h0, 2h0, ..., size/2 on the block x[lo:lo+size].  Spans below 8
    run offset by offset over strided views, so that every inner loop is long."""
    h = h0
    while h < size:
        if h >= 8:
            _dit_part(x, lo, size, h, 0, h, tw)
        else:
            for j in range(h):
                _dit_strided(x[lo + j:lo + size:2 * h], x[lo + j + h:lo + size:2 * h], tw[h + j])
        h *= 2


@njit(cache=True)
def _dif_block(x, lo, size, itw):
    """All DIF stages (spans size/2, ..., 1) on the block x[lo:lo+size]."""
    h = size // 2
    while h >= 1:
        if h >= 8:
            _dif_part(x, lo, size, h, 0, h, itw)
        else:
            for j in range(h):
                _dif_strided(x[lo + j:lo + size:2 * h], x[lo + j + h:lo + size:2 * h], itw[h + j])
        h //= 2


@njit(cache=True)
def _dit_chunk(x, h, c, tw):
    # chunk c of a long-span stage: min(h, _CHUNK) consecutive butterflies of one block
    ln = min(h, _CHUNK)
    per_block = h // ln
    _dit_part(x, (c // per_block) * 2 * h, 2 * h, h, (c % per_block) * ln, ln, tw)


@njit(cache=True)
def _dif_chunk(x, h, c, tw):
    ln = min(h, _CHUNK)
    per_block = h // ln
    _dif_part(x, (c // per_block) * 2 * h, 2 * h, h, (c % per_block) * ln, ln, tw)


# --------------------------------------------------------------------------- 16 x 16 tiles
# Spans 1..8 pair elements inside aligned groups of 16, which gives short inner loops.  A
# 16 x 16 tile S holds 16 groups transposed (S[p, g] = element p of group g), so those
# stages become butterflies between tile *rows*, vectorised across the 16 groups.

@njit(cache=True)
def _tile_dit(S, h0, tw):
    """DIT spans h0, ..., 8 along the rows of tile S."""
    h = h0
    while h < _TILE:
        for p in range(_TILE):
            if p & h == 0:
                w = tw[h + (p & (h - 1))]
                u = S[p]
                v = S[p + h]
                for g in range(_TILE):
                    u[g], v[g] = _dit(u[g], v[g], w)
        h *= 2


@njit(cache=True)
def _tile_dif(S, itw):
    """DIF spans 8, 4, 2, 1 along the rows of tile S."""
    h = _TILE // 2
    while h >= 1:
        for p in range(_TILE):
            if p & h == 0:
                w = itw[h + (p & (h - 1))]
                u = S[p]
                v = S[p + h]
                for g in range(_TILE):
                    u[g], v[g] = _dif(u[g], v[g], w)
        h //= 2


@njit(cache=True)
def _rev_bits(v, bits):
    r = 0
    for _ in range(bits):
        r = (r << 1) | (v & 1)
        v >>= 1
    return r


@njit(cache=True)
def _gather_dit(src, dst, log_n, m, mode, c_m, tab, tw, S):
    """Piece m of: dst[i] = src[rev(i)] * factor(rev(i)), then DIT spans 1, 2, 4, 8.

    factor(j) is 1 (mode 0), c_m (mode 1) or tab[j] (mode 2), Montgomery form, indexed by
    the *source* position.  For n = 2^L >= 256 write i = (a, mid, b) with 4-bit a and b:
    rev(i) = (rev b, rev mid, rev a).  Piece m fixes mid: it reads 16 whole source cache
    lines (rev b = row, rev a = column), runs the first four DIT stages along b, which are
    row butterflies in the tile S[b, a'] = src[(rev b, rev m, a')], and writes 16 whole
    destination lines dst[(a, m, 0..15)].  Smaller n: one piece, element-wise, no stages.
    """
    if log_n < 8:
        for i in range(1 << log_n):
            j = _rev_bits(i, log_n)
            v = src[j]
            if mode == 1:
                v = _mm(v, c_m)
            elif mode == 2:
                v = _mm(v, tab[j])
            dst[i] = v
        return
    hi = log_n - 4
    rm = _rev_bits(m, log_n - 8) << 4
    for b in range(_TILE):
        j0 = (_REV4[b] << hi) | rm
        row = S[b]
        for a in range(_TILE):
            v = src[j0 + a]
            if mode == 1:
                v = _mm(v, c_m)
            elif mode == 2:
                v = _mm(v, tab[j0 + a])
            row[a] = v
    _tile_dit(S, 1, tw)
    for a in range(_TILE):
        d0 = (a << hi) | (m << 4)
        ra = _REV4[a]
        for b in range(_TILE):
            dst[d0 + b] = S[b, ra]


@njit(cache=True)
def _scale(x, tab, lo, hi):
    for i in range(lo, hi):
        x[i] = _mm(x[i], tab[i])


@njit(cache=True)
def _lde_block(t, o, itw, tw, scale, k, bn, blk, S, O):
    """Fused middle of the LDE on n-block blk (x = t[blk bn : (blk+1) bn]):
    remaining DIF spans, scale by shift^rev(j)/n, replicate 2^k times into the o-block
    o[blk bn 2^k : ...], and the o-block's DIT spans 2^k ... bo/2."""
    lo = blk * bn
    r = 1 << k
    bo = bn << k
    if bn < _TILE * _TILE:                    # whole (small) transform in one block
        _dif_block(t, lo, bn, itw)
        for j in range(lo, lo + bn):
            v = _mm(t[j], scale[j])
            for q in range(j * r, j * r + r):
                o[q] = v
        _dit_block(o, blk * bo, bo, r, tw)
        return
    h = bn // 2
    while h >= _TILE:
        _dif_part(t, lo, bn, h, 0, h, itw)
        h //= 2
    # 256-element tiles: the scale table is stored tile-transposed (see _table)
    for base in range(lo, lo + bn, _TILE * _TILE):
        for p in range(_TILE):
            row = S[p]
            for g in range(_TILE):
                row[g] = t[base + _TILE * g + p]
        _tile_dif(S, itw)
        for p in range(_TILE):
            row = S[p]
            sc = scale[base + _TILE * p:base + _TILE * p + _TILE]
            for g in range(_TILE):
                row[g] = _mm(row[g], sc[g])
        ob = base << k
        if r >= _TILE:                        # no short DIT spans: plain replication
            for g in range(_TILE):
                for p in range(_TILE):
                    v = S[p, g]
                    q0 = ob + ((_TILE * g + p) << k)
                    for q in range(q0, q0 + r):
                        o[q] = v
        else:                                 # o-group c of group g: rows (16c + s) >> k
            for c in range(r):
                for s in range(_TILE):
                    O[s, :] = S[(_TILE * c + s) >> k]
                _tile_dit(O, r, tw)
                for g in range(_TILE):
                    q0 = ob + (g << (4 + k)) + _TILE * c
                    for s in range(_TILE):
                        o[q0 + s] = O[s, g]
    _dit_block(o, blk * bo, bo, max(r, _TILE), tw)


@njit(cache=True)
def _lde_blocks(log_n, k):
    """(n-block, o-block) sizes: o-block about 2^_LOG_BLOCK words, n-block >= 256 or all of n."""
    n = 1 << log_n
    bo = max(min(n, _TILE * _TILE) << k, min(n << k, _BLOCK))
    return bo >> k, bo


# --------------------------------------------------------------------------- drivers
@njit(cache=True)
def _xform_row(src, dst, tw, log_n, mode, c_m, pre, post):
    """One row: gather + first DIT spans, remaining DIT stages, optional post table."""
    n = 1 << log_n
    S = np.empty((_TILE, _TILE), np.uint32)
    h = 1
    if log_n < 8:
        _gather_dit(src, dst, log_n, 0, mode, c_m, pre, tw, S)
    else:
        for m in range(1 << (log_n - 8)):
            _gather_dit(src, dst, log_n, m, mode, c_m, pre, tw, S)
        h = _TILE
    b = min(n, _BLOCK)
    for blk in range(n // b):
        _dit_block(dst, blk * b, b, h, tw)
    h = b
    while h < n:
        for c in range(n // (2 * min(h, _CHUNK))):
            _dit_chunk(dst, h, c, tw)
        h *= 2
    if post.size:
        _scale(dst, post, 0, n)


@njit(cache=True)
def _lde_row(x, y, itw, tw, scale, log_n, k):
    """One column: DIF long spans on x, fused blocks into y, DIT long spans on y."""
    n = 1 << log_n
    big = n << k
    S = np.empty((_TILE, _TILE), np.uint32)
    O = np.empty((_TILE, _TILE), np.uint32)
    bn, bo = _lde_blocks(log_n, k)
    h = n // 2
    while h >= bn:
        for c in range(n // (2 * min(h, _CHUNK))):
            _dif_chunk(x, h, c, itw)
        h //= 2
    for blk in range(n // bn):
        _lde_block(x, y, itw, tw, scale, k, bn, blk, S, O)
    h = bo
    while h < big:
        for c in range(big // (2 * min(h, _CHUNK))):
            _dit_chunk(y, h, c, tw)
        h *= 2


# Operations of the one parallel kernel.  The *_ROWS operations do a whole row per task
# (rows stay cache-resident); the others are the passes of a transform split into tasks,
# sequenced from Python (for few long rows).
OP_XFORM_ROWS, OP_LDE_ROWS, OP_GATHER, OP_DIT_BLOCKS, OP_DIT_CHUNKS, OP_DIF_CHUNKS, \
    OP_LDE_BLOCKS, OP_SCALE, OP_TRANSPOSE = range(9)
_GATHER_PIECES = 16             # gather pieces per task


@njit(cache=True)
def _task_count(op, a, b, i0, i1):
    rows = a.shape[0]
    if op == OP_XFORM_ROWS or op == OP_LDE_ROWS:
        return rows
    if op == OP_GATHER:
        return rows * max(1, (1 << i0) // (256 * _GATHER_PIECES))
    if op == OP_DIT_BLOCKS or op == OP_SCALE:
        return rows * ((1 << i0) // i1)
    if op == OP_DIT_CHUNKS or op == OP_DIF_CHUNKS:
        return rows * ((1 << i0) // (2 * min(i1, _CHUNK)))
    if op == OP_LDE_BLOCKS:
        return rows * ((1 << i0) // _lde_blocks(i0, i1)[0])
    return ((a.shape[0] + 31) // 32) * ((a.shape[1] + 31) // 32)     # OP_TRANSPOSE


@njit(cache=True)
def _task(op, q, ntasks, a, b, tw, itw, tab, tab2, i0, i1, i2, c_m):
    per_row = ntasks // a.shape[0]
    r = q // per_row
    u = q % per_row
    if op == OP_XFORM_ROWS:          # i0 = log n, i1 = mode, tab = pre, tab2 = post
        _xform_row(a[q], b[q], tw, i0, i1, c_m, tab, tab2)
    elif op == OP_LDE_ROWS:          # i0 = log n, i1 = k, tab = scale
        _lde_row(a[q], b[q], itw, tw, tab, i0, i1)
    elif op == OP_GATHER:            # i0 = log n, i1 = mode, tab = pre
        S = np.empty((_TILE, _TILE), np.uint32)
        pieces = max(1, (1 << i0) >> 8)
        for m in range(u * pieces // per_row, (u + 1) * pieces // per_row):
            _gather_dit(a[r], b[r], i0, m, i1, c_m, tab, tw, S)
    elif op == OP_DIT_BLOCKS:        # i0 = log n, i1 = block, i2 = first span
        _dit_block(b[r], u * i1, i1, i2, tw)
    elif op == OP_DIT_CHUNKS:        # i1 = span
        _dit_chunk(b[r], i1, u, tw)
    elif op == OP_DIF_CHUNKS:
        _dif_chunk(a[r], i1, u, itw)
    elif op == OP_LDE_BLOCKS:        # i0 = log n, i1 = k, tab = scale
        S = np.empty((_TILE, _TILE), np.uint32)
        O = np.empty((_TILE, _TILE), np.uint32)
        _lde_block(a[r], b[r], itw, tw, tab, i1, _lde_blocks(i0, i1)[0], u, S, O)
    elif op == OP_SCALE:             # i1 = block
        _scale(b[r], tab, u * i1, (u + 1) * i1)
    else:                            # OP_TRANSPOSE: b[j, i] = a[i, j], 32 x 32 tiles
        tj = (a.shape[1] + 31) // 32
        i_0 = (q // tj) * 32
        j_0 = (q % tj) * 32
        for j in range(j_0, min(a.shape[1], j_0 + 32)):
            for i in range(i_0, min(a.shape[0], i_0 + 32)):
                b[j, i] = a[i, j]


@njit(cache=True, parallel=True)
def _par(op, a, b, tw, itw, tab, tab2, i0, i1, i2, c_m):
    """The one parallel kernel: run every task of operation ``op``."""
    ntasks = _task_count(op, a, b, i0, i1)
    for q in prange(ntasks):
        _task(op, q, ntasks, a, b, tw, itw, tab, tab2, i0, i1, i2, c_m)


# --------------------------------------------------------------------------- tables
_LOCK = threading.Lock()
_TWIDDLES: dict[bool, np.ndarray] = {}          # inverse? -> tw[h + j] = w_{2h}^(+-j), Montgomery
_TABLES: OrderedDict = OrderedDict()             # (kind, log_n, shift) -> uint32[n], Montgomery
_MAX_TABLES = 8


def _powers(base: int, count: int) -> np.ndarray:
    """base^0, ..., base^(count-1) mod p as uint64 (vectorised by doubling)."""
    out = np.empty(max(count, 1), np.uint64)
    out[0] = 1
    m = 1
    while m < count:
        take = min(m, count - m)
        out[m:m + take] = out[:take] * np.uint64(pow(base, m, P)) % np.uint64(P)
        m += take
    return out[:count]


def _rev_index(log_n: int) -> np.ndarray:
    i = np.arange(1 << log_n, dtype=np.int64)
    r = np.zeros_like(i)
    for b in range(log_n):
        r |= ((i >> b) & 1) << (log_n - 1 - b)
    return r


def twiddles(log_n: int, inverse: bool = False) -> np.ndarray:
    """uint32 table with tw[h + j] = omega_{2h}^(+-j) (Montgomery) for every h < 2^log_n.

    The entry for a span h does not depend on the transform size, so the cached table
    is grown to the largest size asked for and serves every smaller one.
    """
    log_n = max(int(log_n), 3)
    with _LOCK:
        tab = _TWIDDLES.get(inverse)
        if tab is None or tab.size < (1 << log_n):
            n = 1 << log_n
            w = root_of_unity(log_n)
            if inverse:
                w = pow(w, P - 2, P)
            full = _powers(w, n // 2)                # w_n^i, i < n/2
            tab = np.empty(n, np.uint64)
            tab[0] = 1
            h = 1
            while h < n:
                tab[h:2 * h] = full[::n // (2 * h)][:h]    # w_{2h}^j = w_n^(j n / 2h)
                h *= 2
            tab = to_mont_host(tab)
            _TWIDDLES[inverse] = tab
        return tab


def _table(kind: str, log_n: int, shift: int) -> np.ndarray:
    """Cached per-index factor tables, Montgomery form:

    * ``pre``:  shift^j (natural order; coset_ntt scales coefficient j by it);
    * ``post``: shift^-j (coset_intt unscales coefficient j);
    * ``lde``:  shift^rev(j) / n for the bit-reversed coefficients of the LDE, stored
      tile-transposed (entry 256 t + 16 p + g holds index 256 t + 16 g + p) when n >= 256,
      as :func:`_lde_block` reads it.
    """
    key = (kind, log_n, shift)
    with _LOCK:
        tab = _TABLES.get(key)
        if tab is not None:
            _TABLES.move_to_end(key)
            return tab
    n = 1 << log_n
    if kind == "pre":
        tab = _powers(shift, n)
    elif kind == "post":
        tab = _powers(pow(shift, P - 2, P), n)
    else:
        tab = _powers(shift, n)[_rev_index(log_n)] * np.uint64(pow(n, P - 2, P)) % np.uint64(P)
        if n >= _TILE * _TILE:
            tab = np.ascontiguousarray(tab.reshape(-1, _TILE, _TILE).transpose(0, 2, 1)).reshape(n)
    tab = to_mont_host(tab)
    with _LOCK:
        _TABLES[key] = tab
        while len(_TABLES) > _MAX_TABLES:
            _TABLES.popitem(last=False)
    return tab


_NONE = np.empty(0, np.uint32)


# --------------------------------------------------------------------------- validation
def _check_array(a, name: str) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a numpy uint32 array, got {type(a).__name__}")
    if a.dtype != np.uint32:
        raise TypeError(f"{name}: expected dtype uint32, got {a.dtype}")
    return a


def _log2_size(n: int, what: str, extra: int = 0) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"{what}: length {n} is not a power of two")
    log_n = n.bit_length() - 1
    if log_n + extra > TWO_ADICITY:
        raise ValueError(f"{what}: size 2^{log_n + extra} exceeds the two-adicity 2^{TWO_ADICITY}")
    return log_n


def _check_shift(shift) -> int:
    if isinstance(shift, (bool, np.bool_)) or not isinstance(shift, (int, np.integer)):
        raise TypeError(f"shift must be an integer field element, got {type(shift).__name__}")
    shift = int(shift)
    if not 0 < shift < P:
        raise ValueError(f"shift must be a nonzero canonical field element, got {shift}")
    return shift


def _check_blowup(log_blowup) -> int:
    if isinstance(log_blowup, (bool, np.bool_)) or not isinstance(log_blowup, (int, np.integer)):
        raise TypeError(f"log_blowup must be an integer, got {type(log_blowup).__name__}")
    if log_blowup < 0:
        raise ValueError(f"log_blowup must be >= 0, got {log_blowup}")
    return int(log_blowup)


def _use_rows(rows: int, log_n: int) -> bool:
    """One row per thread when that keeps the threads busy (or rows are short); else split
    each pass of the transform into tasks."""
    t = numba.get_num_threads()
    return (t == 1 or log_n < 14 or rows >= 2 * t or (rows >= t and rows % t == 0))


def _run(op, a, b, tw=_NONE, itw=_NONE, tab=_NONE, tab2=_NONE, i0=0, i1=0, i2=0, c_m=0):
    _par(op, a, b, tw, itw, tab, tab2, i0, i1, i2, np.uint32(c_m))


# --------------------------------------------------------------------------- transforms
def _xform_into(src, dst, log_n, inverse, pre, post):
    """dst[r] = transform of src[r] (uint32[rows, n] C-contiguous, distinct arrays)."""
    n = 1 << log_n
    tw = twiddles(log_n, inverse)
    mode, c_m = _MODE_COPY, 0
    if inverse:
        mode, c_m = _MODE_CONST, int(to_mont_host(pow(n, P - 2, P)))
    if pre.size:
        mode = _MODE_TABLE
    if _use_rows(src.shape[0], log_n):
        _run(OP_XFORM_ROWS, src, dst, tw, tab=pre, tab2=post, i0=log_n, i1=mode, c_m=c_m)
        return
    _run(OP_GATHER, src, dst, tw, tab=pre, i0=log_n, i1=mode, c_m=c_m)
    b = min(n, _BLOCK)
    _run(OP_DIT_BLOCKS, dst, dst, tw, i0=log_n, i1=b, i2=_TILE)
    h = b
    while h < n:
        _run(OP_DIT_CHUNKS, dst, dst, tw, i0=log_n, i1=h)
        h *= 2
    if post.size:
        _run(OP_SCALE, dst, dst, tab=post, i0=log_n, i1=b)


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
    itw = twiddles(log_n, True)
    tw = twiddles(log_n + k, False)
    scale = _table("lde", log_n, shift)
    if _use_rows(t.shape[0], log_n + k):
        _run(OP_LDE_ROWS, t, o, tw, itw, scale, i0=log_n, i1=k)
        return
    n = 1 << log_n
    bn, bo = _lde_blocks(log_n, k)
    h = n // 2
    while h >= bn:
        _run(OP_DIF_CHUNKS, t, t, tw, itw, i0=log_n, i1=h)
        h //= 2
    _run(OP_LDE_BLOCKS, t, o, tw, itw, scale, i0=log_n, i1=k)
    h = bo
    while h < n << k:
        _run(OP_DIT_CHUNKS, o, o, tw, itw, i0=log_n + k, i1=h)
        h *= 2


def _transpose(a, out):
    _run(OP_TRANSPOSE, a, out)


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


def bit_reverse_permutation(a: np.ndarray, axis: int = -1) -> np.ndarray:
    """Copy of ``a`` with the indices along ``axis`` (length 2^L) bit-reversed."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"bit_reverse_permutation: expected a numpy array, got {type(a).__name__}")
    if a.ndim == 0:
        raise ValueError("bit_reverse_permutation: expected at least one axis")
    n = a.shape[axis]
    log_n = _log2_size(n, "bit_reverse_permutation")
    return np.take(a, _rev_index(log_n), axis=axis)


__all__ = ["ntt", "intt", "coset_ntt", "coset_intt", "coset_lde", "lde_columns",
           "bit_reverse_permutation", "twiddles", "build_butterflies"]
