"""Committed rows of a column-major LDE, without numpy gathers (issue: ``_tree_rows``).

An LDE is held as columns ``lde`` uint32[c, N] in natural order; its Merkle tree commits
the rows in bit-reversed order: tree position s holds the natural row bitrev(s).  Both
kernels here read the columns directly and walk a *chunk plan* chosen so that the reads
are whole cache lines where the layout allows it:

    chunk plan (hb, l, k), H = 2^hb, L = 2^l, K = N / (H L) chunks, k < K:
    tree positions  h N/H + k L + t          (h < H, t < L)
    natural rows    H (bitrev_K(k) + K u) + g    with u = bitrev_l(t), g = bitrev_hb(h)

so for one u the H natural rows are contiguous (H = 16: one 64-byte line of each column).
Chunk k covers H runs of L consecutive tree positions (H = 1: the single run
[k L, (k + 1) L), the old ``_tree_rows(lde, k L, L)``).  In the chunk's local row order
the run of h comes h-th: local row h L + t.

* :func:`gather_rows` writes the chunk's rows row-major into ``out`` uint32[H L, c]
  (tiled: a tile of u values times a tile of columns, so that the column reads stay in
  L1/L2 while each output row is written in contiguous runs).
* :func:`leaf_digests` is the SPEC §3 leaf sponge of those rows, read straight from the
  columns into the lane-major Poseidon2 state (no row-major copy at all): a block of
  BLOCK = 64 states is 64 / H values of u times the H contiguous rows of each.

Both take canonical values (an LDE from our own NTT); nothing is checked here.
"""
from __future__ import annotations

import functools

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from .host_pool import run_ranges
from .poseidon2 import _LANES, BLOCK, DIGEST, RATE, _fast_args, _permute_block

if _LANES:
    from .poseidon2_lanes import W as _W
    from .poseidon2_lanes import _permute_lanes as _permute32
else:                                   # STEADFAST_POSEIDON2_KERNEL=int64: _leaf_kernel only
    _W = 16

    @njit
    def _permute32(st, offset):        # never called
        pass

__all__ = ["bitrev_table", "chunk_plan", "gather_rows", "leaf_digests"]

#: columns per tile of the gather
_TC = 64
#: values of u per tile of the gather
_TU = 64


@functools.lru_cache(maxsize=64)
def bitrev_table(bits: int) -> np.ndarray:
    """int64[2^bits]: i -> bitrev_bits(i) (read-only, cached)."""
    a = np.arange(1 << bits, dtype=np.int64)
    out = np.zeros_like(a)
    for b in range(bits):
        out |= ((a >> b) & 1) << (bits - 1 - b)
    out.setflags(write=False)
    return out


def chunk_plan(log_n: int, hb: int, l: int, k: int):
    """(row0, rstride, brh, brl) of chunk k of the plan (hb, l) over N = 2^log_n rows:
    natural row of local (u, g) = row0 + rstride u + g; local row of (u, g) =
    brh[g] L + brl[u]."""
    kbits = log_n - hb - l
    if hb < 0 or l < 0 or kbits < 0 or not 0 <= k < (1 << kbits):
        raise ValueError(f"chunk_plan: hb={hb}, l={l}, k={k} over 2^{log_n} rows")
    kb = int(bitrev_table(kbits)[k]) if kbits else 0
    H = 1 << hb
    return H * kb, H << kbits, bitrev_table(hb), bitrev_table(l)


def _columns(lde: np.ndarray) -> np.ndarray:
    lde = np.ascontiguousarray(lde, dtype=np.uint32)
    ro = lde.view()
    ro.setflags(write=False)            # one compiled signature whatever the caller's flags
    return ro


@njit(cache=True, nogil=True)
def _gather_kernel(lde, out, hb, row0, rstride, brh, brl, u0, u1):
    """out[brh[g] L + brl[u], col] = lde[col, row0 + rstride u + g] for u in [u0, u1)."""
    w = lde.shape[0]
    H = 1 << hb
    L = brl.shape[0]
    for ut in range(u0, u1, _TU):
        ue = min(u1, ut + _TU)
        for c0 in range(0, w, _TC):
            c1 = min(w, c0 + _TC)
            for u in range(ut, ue):
                src = row0 + rstride * u
                t = brl[u]
                for g in range(H):
                    r = brh[g] * L + t
                    for col in range(c0, c1):
                        out[r, col] = lde[col, src + g]


@njit(inline="always")
def _stage(lde, stage, hb, row0, rstride, c, n):
    """Block c's rows into stage[:, :nb], column-major (= lane-major): one burst of
    independent line reads; -> (nb, nq, ub): its states, its values of u, its first u."""
    H = 1 << hb
    lo = c * BLOCK
    nb = min(BLOCK, n - lo)                 # a multiple of H (H | BLOCK, H | n)
    nq = nb >> hb
    ub = lo >> hb
    for col in range(lde.shape[0]):
        for q in range(nq):
            src = row0 + rstride * (ub + q)
            d = q * H
            for g in range(H):
                stage[col, d + g] = lde[col, src + g]
    return nb, nq, ub


@njit(cache=True, nogil=True)
def _leaf_kernel(lde, out, hb, row0, rstride, brh, brl, S, base, c0, c1, rcf, rcp, k_in, k_r2,
                 k_out):
    """Blocks c0..c1-1 (BLOCK states each) of the leaf sponge (rate 8, overwrite mode, as
    kernels/poseidon2._sponge_kernel) of the chunk's rows, read from the columns: state
    j = u H + g is the natural row row0 + rstride u + g; its digest goes to out[brh[g] S
    + base + brl[u]] (S = L, base = 0: the chunk's local order)."""
    w = lde.shape[0]
    H = 1 << hb
    L = brl.shape[0]
    n = H * L
    st = np.empty(16 * BLOCK, np.int64)
    # the block's rows, column-major (= lane-major): one burst of independent line reads
    # per block, then the sponge reads L1/L2-resident contiguous runs
    stage = np.zeros((w, BLOCK), np.uint32)
    for c in range(c0, c1):
        nb, nq, ub = _stage(lde, stage, hb, row0, rstride, c, n)
        st[:] = 0
        for b0 in range(0, w, RATE):
            for i in range(min(RATE, w - b0)):
                for j in range(BLOCK):
                    st[i * BLOCK + j] = np.int64(stage[b0 + i, j])
            _permute_block(st, rcf, rcp, k_in, k_r2, k_out)
        for q in range(nq):
            t = brl[ub + q]
            for g in range(H):
                dst = brh[g] * S + base + t
                j = q * H + g
                for i in range(DIGEST):
                    out[dst, i] = np.uint32(st[i * BLOCK + j])


@njit(cache=True, nogil=True)
def _leaf_kernel32(lde, out, hb, row0, rstride, brh, brl, S, base, c0, c1):
    """:func:`_leaf_kernel` with the 32-bit-lane permutation on a uint32 state of W
    states (kernels/poseidon2_lanes.py, as kernels/poseidon2's row sponge): the staged
    block's rate rows are copied into the lanes as they are (no int64 state, no
    conversions in and out of every permutation); BLOCK / W groups a block."""
    w = lde.shape[0]
    H = 1 << hb
    L = brl.shape[0]
    n = H * L
    st = np.empty(16 * _W, np.uint32)
    stage = np.zeros((w, BLOCK), np.uint32)
    for c in range(c0, c1):
        nb, nq, ub = _stage(lde, stage, hb, row0, rstride, c, n)
        for j0 in range(0, nb, _W):
            # a short group's lanes past nb hold zeros or earlier canonical rows: hashed,
            # never stored
            st[:] = 0
            for b0 in range(0, w, RATE):
                for i in range(min(RATE, w - b0)):
                    for t in range(_W):
                        st[i * _W + t] = stage[b0 + i, j0 + t]
                _permute32(st, 0)
            for t in range(min(_W, nb - j0)):
                j = j0 + t
                dst = brh[j & (H - 1)] * S + base + brl[ub + (j >> hb)]
                for i in range(DIGEST):
                    out[dst, i] = st[i * _W + t]


def gather_rows(lde: np.ndarray, hb: int, l: int, k: int, out: np.ndarray | None = None) -> np.ndarray:
    """The rows of chunk k of the plan (hb, l) of the columns ``lde`` (c, N), row-major in
    the chunk's local order: uint32[2^(hb + l), c] (written into ``out`` when given)."""
    lde = _columns(lde)
    c, N = lde.shape
    row0, rstride, brh, brl = chunk_plan(N.bit_length() - 1, hb, l, k)
    n = (1 << hb) << l
    if out is None:
        out = np.empty((n, c), np.uint32)
    elif out.shape != (n, c) or out.dtype != np.uint32 or not out.flags.c_contiguous:
        raise ValueError(f"gather_rows: out must be a C-contiguous uint32[{n}, {c}]")
    nu = 1 << l
    # split over threads only when there is enough to copy (a 64-row opening group: one call)
    tiles = -(-nu // _TU)
    if n * c < (1 << 16):
        _gather_kernel(lde, out, hb, row0, rstride, brh, brl, 0, nu)
    else:
        run_ranges(lambda t0, t1: _gather_kernel(lde, out, hb, row0, rstride, brh, brl,
                                                  t0 * _TU, min(nu, t1 * _TU)), tiles, 1)
    return out


def leaf_digests(lde: np.ndarray, hb: int, l: int, k: int, out: np.ndarray | None = None,
                 stride: int | None = None, base: int = 0) -> np.ndarray:
    """The leaf digests (SPEC §3 sponge) of the rows of chunk k of the plan (hb, l) of the
    columns ``lde`` (c, N), in the chunk's local order: uint32[2^(hb + l), 8] (written into
    ``out``, C-contiguous, when given).  Equal to ``hash_rows(gather_rows(...))``.

    ``stride``: the chunk's local row h L + t goes to ``out`` row h stride + base + t
    instead (``out`` uint32[>= (H - 1) stride + base + L, 8], given): a whole tree's
    leaves (stride N / H, base k L) written in place by the hashing threads."""
    lde = _columns(lde)
    c, N = lde.shape
    if (1 << hb) > BLOCK:
        raise ValueError(f"leaf_digests: 2^hb = {1 << hb} must divide BLOCK = {BLOCK}")
    row0, rstride, brh, brl = chunk_plan(N.bit_length() - 1, hb, l, k)
    n = (1 << hb) << l
    if stride is None:
        S, base = 1 << l, 0
        if out is None:
            out = np.empty((n, DIGEST), np.uint32)
        elif out.shape != (n, DIGEST) or out.dtype != np.uint32 or not out.flags.c_contiguous:
            raise ValueError(f"leaf_digests: out must be a C-contiguous uint32[{n}, {DIGEST}]")
    else:
        S, base = int(stride), int(base)
        need = ((1 << hb) - 1) * S + base + (1 << l)
        if (out is None or out.ndim != 2 or out.shape[1] != DIGEST or out.dtype != np.uint32
                or not out.flags.c_contiguous or S < (1 << l) or base < 0
                or out.shape[0] < need):
            raise ValueError(f"leaf_digests: stride {S}, base {base} need a C-contiguous "
                             f"uint32[>= {need}, {DIGEST}] out")
    nblocks = -(-n // BLOCK)
    if _LANES:
        run_ranges(lambda b0, b1: _leaf_kernel32(lde, out, hb, row0, rstride, brh, brl, S,
                                                  base, b0, b1), nblocks, 4)
        return out
    args = _fast_args()
    run_ranges(lambda b0, b1: _leaf_kernel(lde, out, hb, row0, rstride, brh, brl, S, base,
                                           b0, b1, *args), nblocks, 4)
    return out


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("poseidon2.py", "poseidon2_lanes.py", "poseidon2_constants.py", "field.py"))
