"""NTT and coset LDE on the device (numba.cuda), bit-identical to :mod:`kernels.ntt_host`.

Same mathematics as the host (see that module's docstring): radix-2 butterflies on
Montgomery twiddles -- the *same* butterfly source, :func:`kernels.ntt_host.build_butterflies`
compiled over the device field functions ``DF`` -- and the same twiddle table layout
``tw[h + j] = omega_{2h}^(+-j)``, uploaded once per direction and process (grown on demand).

Data are 2-D device arrays uint32[rows, n]: every row is one transform (the prover keeps
tables column-major, so a row is a column of the trace).

Kernels
* ``_gather_kernel``: dst[r, i] = src[r, rev(i)] * factor (bit reversal; factor 1, n^-1 or
  a table), one thread per element.  DIT then runs on natural-order output.
* ``_stages_kernel``: a *stage group* in shared memory.  Stages s_lo <= s < s_hi only pair
  indices differing in bits [s_lo, s_hi); a block loads a slab -- 2^(s_hi - s_lo) rows of
  lc = min(32, 2^s_lo) consecutive words, row stride 2^s_lo (for s_lo = 0: one contiguous
  tile of SHARED_WORDS words) -- runs all those butterfly stages with a barrier between
  stages, and writes it back (slabs smaller than the tile are packed several per block).
  Loads and stores are coalesced (runs of >= 32 words, or whole tiles).  On a GPU: short
  spans in one group of 11 stages, long spans in groups of 6.
* ``_scale_replicate_kernel``: the LDE middle, o[r, i] = t[r, i >> k] * scale[i >> k].
* ``_scale_kernel``: x[r, i] *= tab[i] (coset_intt).

Wrappers validate dtype/shape, return early on empty input, take ``stream=`` (None/0:
default stream) and ``out=``, and never copy data to the host.
"""
from __future__ import annotations

import threading

import numpy as np
from numba import cuda, uint32

from .ntt_host import build_butterflies
from .ntt_tables import _check_blowup, _check_shift, _log2_size, _table as _host_table
from .ntt_tables import twiddles as _host_twiddles
from .backend import shared_allocations
from .devicelib import DF, device_function, grid_1d, is_simulator, kernel
from .field import GENERATOR, P, to_mont_host

__all__ = ["ntt_device", "intt_device", "coset_ntt_device", "coset_intt_device",
           "coset_lde_device", "SHARED_WORDS"]

# Launch geometry.  Under numba's CUDA simulator every thread is a Python thread, so the
# simulator build uses a smaller tile (same code, same index math, smaller constants) to
# keep tests that straddle the tile and slab boundaries fast.
if is_simulator():
    _LOG_SHARED, _LOG_SLAB_W, _TPB = 8, 3, 32
else:
    _LOG_SHARED, _LOG_SLAB_W, _TPB = 11, 5, 256
#: words of shared memory per stage-group block (8 KiB on a GPU); the short-span tile size
SHARED_WORDS = 1 << _LOG_SHARED
# 2^_LOG_SLAB_W: slab row width for long spans (32 words = one 128-byte segment)
# _TPB: threads per block of the stage kernel
_BLOCK = 256                    # threads per block of the elementwise kernels

_BF = build_butterflies(DF, device_function(inline="always"))
_dit, _dif, _mm = _BF.dit, _BF.dif, DF.mont_mul


# ----------------------------------------------------------------------------- kernels
@kernel("void(uint32[:, ::1], uint32[:, ::1], int64, int64, uint32, uint32[::1])")
def _gather_kernel(src, dst, log_n, mode, c_m, tab):
    # dst[r, i] = src[r, j] * factor(j), j = rev(i); factor: 1, c_m, tab[j] (Montgomery)
    t = cuda.grid(1)
    n = 1 << log_n
    if t < src.shape[0] * n:
        r = t >> log_n
        i = t & (n - 1)
        j = 0
        for b in range(log_n):
            j |= ((i >> b) & 1) << (log_n - 1 - b)
        v = src[r, j]
        if mode == 1:
            v = _mm(v, c_m)
        elif mode == 2:
            v = _mm(v, tab[j])
        dst[r, i] = v


@kernel("void(uint32[:, ::1], uint32[::1], int64, int64, int64, int64)")
def _stages_kernel(x, tw, log_n, s_lo, s_hi, forward):
    # Slab Q (over all rows) for stages [s_lo, s_hi): element (i, l) of the slab is
    # x[r, base + i 2^s_lo + l], i < 2^(s_hi - s_lo), l < lc; the butterfly of span
    # h = 2^s pairs slab rows i and i + h / 2^s_lo with twiddle
    # tw[h + (i mod h/2^s_lo) 2^s_lo + l0 + l].  A block holds 2^lspb slabs (small
    # groups are packed so that every block fills its shared tile).  All sizes are powers
    # of two: indices use shifts and masks.
    sm = cuda.shared.array(SHARED_WORDS, uint32)
    llc = min(_LOG_SLAB_W, s_lo)
    lsize = (s_hi - s_lo) + llc
    lspb = max(0, _LOG_SHARED - lsize)
    lper_g = s_lo - llc
    lper_row = (log_n - s_hi) + lper_g
    total = x.shape[0] << lper_row
    lc = 1 << llc
    size = 1 << lsize
    tid = cuda.threadIdx.x
    first = cuda.blockIdx.x << lspb
    for e in range(tid, size << lspb, _TPB):
        slab = first + (e >> lsize)
        if slab < total:
            i = (e & (size - 1)) >> llc
            q = slab & ((1 << lper_row) - 1)
            col = ((q >> lper_g) << s_hi) + ((q & ((1 << lper_g) - 1)) << llc) + (e & (lc - 1))
            sm[e] = x[slab >> lper_row, col + (i << s_lo)]
    cuda.syncthreads()
    half = size >> 1
    for st in range(s_hi - s_lo):
        s = s_lo + st if forward else s_hi - 1 - st
        lhr = s - s_lo
        for f in range(tid, half << lspb, _TPB):
            z = f >> (lsize - 1)
            g = f & (half - 1)
            l = g & (lc - 1)
            pi = g >> llc
            ii = pi & ((1 << lhr) - 1)
            i = ((pi >> lhr) << (lhr + 1)) + ii
            slab = first + z
            if slab < total:
                q = slab & ((1 << lper_row) - 1)
                l0 = (q & ((1 << lper_g) - 1)) << llc
                w = tw[(1 << s) + (ii << s_lo) + l0 + l]
                ea = (z << lsize) + (i << llc) + l
                eb = ea + (1 << (lhr + llc))
                a = sm[ea]
                b = sm[eb]
                if forward:
                    a, b = _dit(a, b, w)
                else:
                    a, b = _dif(a, b, w)
                sm[ea] = a
                sm[eb] = b
        cuda.syncthreads()
    for e in range(tid, size << lspb, _TPB):
        slab = first + (e >> lsize)
        if slab < total:
            i = (e & (size - 1)) >> llc
            q = slab & ((1 << lper_row) - 1)
            col = ((q >> lper_g) << s_hi) + ((q & ((1 << lper_g) - 1)) << llc) + (e & (lc - 1))
            x[slab >> lper_row, col + (i << s_lo)] = sm[e]


@kernel("void(uint32[:, ::1], uint32[:, ::1], uint32[::1], int64)")
def _scale_replicate_kernel(t, o, scale, k):
    # o[r, i] = t[r, i >> k] * scale[i >> k]: scaled bit-reversed coefficients, each
    # repeated 2^k times (the first k DIT stages of the zero-padded vector)
    g = cuda.grid(1)
    big = o.shape[1]
    if g < o.shape[0] * big:
        r = g // big
        j = (g % big) >> k
        o[r, g % big] = _mm(t[r, j], scale[j])


@kernel("void(uint32[:, ::1], uint32[::1])")
def _scale_kernel(x, tab):
    g = cuda.grid(1)
    n = x.shape[1]
    if g < x.shape[0] * n:
        x[g // n, g % n] = _mm(x[g // n, g % n], tab[g % n])


# ----------------------------------------------------------------------------- tables
# Device tables shared by every worker's stream.  A table leaves the cache when the
# twiddles grow or the coset tables' LRU evicts it; a worker that took it before may still
# have kernels queued on its own stream, so its memory must outlive them.  The tables are
# allocated inside ``backend.shared_allocations()``: on ``cuda`` (the pooled memory
# manager) numba dropping a table hands its block to the pool only after the next
# device-wide synchronisation (end of the proof's epoch, a drain, a pool trim), not at
# once to the allocating stream's next allocation.  Retiring a table therefore only drops
# the cache's reference: no synchronisation under the lock.  (Off the pooled manager,
# numba's own frees are deferred and cuMemFree waits for the device.)
_LOCK = threading.Lock()
_DEV_TW: dict = {}              # inverse -> device copy of ntt.twiddles (largest so far)
_DEV_TABLES: dict = {}          # (kind, log_n, shift) -> device table (a few, LRU)
_MAX_TABLES = 8


def _publish(host: np.ndarray, stream):
    """Upload a table shared by every stream: on the caller's stream, complete before it
    is published (another worker's non-blocking stream may read it next), as a shared
    allocation (released only after a device-wide synchronisation)."""
    with shared_allocations():
        d = cuda.to_device(host, stream=stream)
    if stream:
        stream.synchronize()
    return d


def _retire(old) -> None:
    """A cached table leaves the cache: drop the reference (its memory is released after
    the next device-wide synchronisation; see above)."""


def _twiddles(log_n: int, inverse: bool, stream=0):
    """Device twiddle table covering spans < 2^log_n, uploaded once (grown on demand)."""
    with _LOCK:
        d = _DEV_TW.get(inverse)
        if d is None or d.shape[0] < (1 << max(log_n, 3)):
            _retire(d)
            d = _publish(_host_twiddles(log_n, inverse), stream)
            _DEV_TW[inverse] = d
        return d


def _table(kind: str, log_n: int, shift: int, stream=0):
    key = (kind, log_n, shift)
    with _LOCK:
        d = _DEV_TABLES.pop(key, None)
        if d is None:
            d = _publish(_host_table(kind, log_n, shift), stream)
        _DEV_TABLES[key] = d
        while len(_DEV_TABLES) > _MAX_TABLES:
            _retire(_DEV_TABLES.pop(next(iter(_DEV_TABLES))))
        return d


_EMPTY = None


def _empty_table(stream=0):
    global _EMPTY
    with _LOCK:
        if _EMPTY is None:
            _EMPTY = _publish(np.zeros(1, np.uint32), stream)
        return _EMPTY


# ----------------------------------------------------------------------------- launches
def _stage_groups(s: int, e: int, max_stages: int = 64) -> list:
    """Stage ranges [lo, hi) covering [s, e), each fitting one shared-memory slab."""
    out = []
    while s < e:
        hi = min(e, s + _LOG_SHARED - min(_LOG_SLAB_W, s), s + max_stages)
        out.append((s, hi))
        s = hi
    return out


def _run_stages(x, s: int, e: int, forward: bool, tw, stream, max_stages: int = 64) -> None:
    """DIT stages s..e-1 (ascending) or DIF stages e-1..s (descending) on every row of x
    (``max_stages`` < the natural group size only to exercise more groups in tests)."""
    rows, n = x.shape
    log_n = n.bit_length() - 1
    groups = _stage_groups(s, e, max_stages)
    for lo, hi in (groups if forward else groups[::-1]):
        llc = min(_LOG_SLAB_W, lo)
        slabs = rows << ((log_n - hi) + (lo - llc))
        per_block = 1 << max(0, _LOG_SHARED - (hi - lo) - llc)
        blocks = (slabs + per_block - 1) // per_block
        _stages_kernel[blocks, _TPB, stream](x, tw, log_n, lo, hi, 1 if forward else 0)


def _stream(stream):
    """None/0 -> the default stream; a cupy stream (``.ptr``) -> a numba external stream."""
    if stream is None or (isinstance(stream, int) and stream == 0):
        return 0
    if hasattr(stream, "ptr"):
        return cuda.external_stream(stream.ptr)
    return stream


def _check_dev(a, name: str):
    if isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a device array, got a host numpy array")
    if not hasattr(a, "copy_to_host"):
        if not hasattr(a, "__cuda_array_interface__"):
            raise TypeError(f"{name}: expected a device array, got {type(a).__name__}")
        a = cuda.as_cuda_array(a, sync=False)    # the caller's stream orders it
    if np.dtype(a.dtype) != np.uint32:
        raise TypeError(f"{name}: expected dtype uint32, got {a.dtype}")
    if len(a.shape) != 2:
        raise ValueError(f"{name}: expected a 2-d device array [rows, n], got shape {a.shape}")
    return a


def _out(out, shape, stream, name="out"):
    if out is None:
        return cuda.device_array(shape, dtype=np.uint32, stream=stream)
    out = _check_dev(out, name)
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(out.shape)}")
    return out


def _xform(a, name, inverse, pre_kind=None, post_kind=None, shift=1, stream=None, out=None):
    a = _check_dev(a, name)
    rows, n = a.shape
    log_n = _log2_size(n, name)
    stream = _stream(stream)
    out = _out(out, (rows, n), stream)
    if rows == 0:
        return out
    mode, c_m, pre = 0, 0, _empty_table(stream)
    if inverse:
        mode, c_m = 1, int(to_mont_host(pow(n, P - 2, P)))
    if pre_kind is not None:
        mode, pre = 2, _table(pre_kind, log_n, shift, stream)
    tw = _twiddles(log_n, inverse, stream)
    grid, blk = grid_1d(rows * n, _BLOCK)
    _gather_kernel[grid, blk, stream](a, out, log_n, mode, np.uint32(c_m), pre)
    _run_stages(out, 0, log_n, True, tw, stream)
    if post_kind is not None:
        _scale_kernel[grid, blk, stream](out, _table(post_kind, log_n, shift, stream))
    return out


def ntt_device(a, stream=None, out=None):
    """Forward NTT of every row of device uint32[rows, n] (natural order in and out)."""
    return _xform(a, "ntt_device", False, stream=stream, out=out)


def intt_device(a, stream=None, out=None):
    """Inverse NTT of every row of device uint32[rows, n]."""
    return _xform(a, "intt_device", True, stream=stream, out=out)


def coset_ntt_device(coeffs, shift: int = GENERATOR, stream=None, out=None):
    """Evaluate every coefficient row on shift*<omega_n> (see :func:`kernels.ntt_host.coset_ntt`)."""
    return _xform(coeffs, "coset_ntt_device", False, "pre", shift=_check_shift(shift),
                  stream=stream, out=out)


def coset_intt_device(evals, shift: int = GENERATOR, stream=None, out=None):
    """Interpolate every row from shift*<omega_n> (see :func:`kernels.ntt_host.coset_intt`)."""
    return _xform(evals, "coset_intt_device", True, post_kind="post",
                  shift=_check_shift(shift), stream=stream, out=out)


def coset_lde_device(dev_cols_T, log_blowup: int, shift: int = GENERATOR, stream=None,
                     out=None, scratch=None):
    """Coset LDE of column-major device data: uint32[w, n] (row c = values of polynomial c
    on <omega_n>) -> uint32[w, n 2^k], row c = its values on shift*<omega_{n 2^k}>.

    Same result as :func:`kernels.ntt_host.lde_columns`.  ``scratch`` (optional device
    uint32[w, n]) receives the intermediate coefficients; by default it is allocated.
    """
    a = _check_dev(dev_cols_T, "coset_lde_device")
    k = _check_blowup(log_blowup)
    rows, n = a.shape
    log_n = _log2_size(n, "coset_lde_device", k)
    shift = _check_shift(shift)
    stream = _stream(stream)
    out = _out(out, (rows, n << k), stream)
    if rows == 0:
        return out
    t = _out(scratch, (rows, n), stream, "scratch")
    t.copy_to_device(a, stream=stream)
    _run_stages(t, 0, log_n, False, _twiddles(log_n, True, stream), stream)
    grid, blk = grid_1d(rows * (n << k), _BLOCK)
    _scale_replicate_kernel[grid, blk, stream](t, out, _table("bitrev", log_n, shift, stream), k)
    _run_stages(out, k, log_n + k, True, _twiddles(log_n + k, False, stream), stream)
    return out
