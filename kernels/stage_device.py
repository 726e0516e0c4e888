"""Device (numba.cuda) kernels for the AIR-independent prover stages, bit-identical to
:class:`prover.core.stages.HostStages`.

* :func:`ef_batch_inverse_device` -- EF inverses with Montgomery's trick (one ``ef_inv``
  per thread; each thread takes the interleaved subset t, t + T, t + 2T, ... so that
  neighbouring threads touch neighbouring rows).
* :func:`ef_prefix_sum_device` -- inclusive running sum of EF values (a parallel scan:
  Hillis-Steele inside a block in shared memory, the block totals scanned recursively,
  then added back).  EF addition is coefficient-wise, so it is 4 exact scans mod p.
* :func:`ood_device` (R3) -- every column's polynomial at an EF point from its coefficients.
* :func:`deep_quotient_device` (R4) -- the DEEP quotient, bit-reversed (FRI layer 0).
* (the FRI of proof format 3 -- one for all tables -- is in :mod:`kernels.fri_device`)
* :func:`bit_reverse_device` -- bit-reversal permutation of the rows / columns of a matrix.

Arrays are numba device arrays (``cuda.to_device`` under the simulator; objects with
``__cuda_array_interface__`` such as cupy arrays are wrapped) of canonical uint32; EF
arrays are uint32[n, 4] (coefficients on the last axis) unless stated.  LDE matrices
come in either layout (:func:`matrix_geometry`): ``"cols"`` uint32[c, N] in natural
order, or ``"rows"`` uint32[N, c] with rows in bit-reversed order (the committed /
Merkle matrix).  All field arithmetic is exact and canonical, so the results equal the
host's bit for bit whatever the evaluation order.  Wrappers validate, accept
``stream=``, ``out=`` and ``alloc=`` (a callable shape -> device array used for their
outputs, e.g. a budgeted pool), and copy nothing to the host unless documented (zero
checks copy one word).  Kernels are compiled once (module scope), never per call.
"""
from __future__ import annotations

import numpy as np
from numba import cuda, uint32

from ..air import field as AF
from .devicelib import DF, device_function, fetch, grid_1d, kernel
from .field import P, to_mont_host
from .hostlib import ef_powers

__all__ = ["ef_batch_inverse_device", "ef_prefix_sum_device", "ood_device",
           "deep_quotient_device", "bit_reverse_device", "bitrev",
           "check_device_array", "device_empty", "matrix_geometry", "ef_scalar", "fetch",
           "SHIFT", "DEFAULT_BLOCK", "MAX_SHARED_BLOCK"]

SHIFT = 31                  # the coset shift g (verifier.protocol.SHIFT)
DEFAULT_BLOCK = 128
MAX_SHARED_BLOCK = 256      # shared-memory kernels (scan, reductions): block <= this
OOD_ELEMS = 8               # elements per thread in the OOD dot-product pass
POW_TILE = 32               # consecutive powers per thread

_add, _sub, _neg, _mul, _pow = DF.add, DF.sub, DF.neg, DF.mul, DF.pow_
_mont_mul = DF.mont_mul
_ef_add, _ef_sub, _ef_mul, _ef_mul_base = DF.ef_add, DF.ef_sub, DF.ef_mul, DF.ef_mul_base
_ef_inv, _ef_pow = DF.ef_inv, DF.ef_pow
_P64 = np.uint64(P)
_INV2 = np.uint32((P + 1) // 2)
_Z32 = np.uint32(0)
_ONE32 = np.uint32(1)
_SIG2 = "uint32[:, ::1]"


@device_function(inline="always")
def bitrev(i, log):
    """Reverse the low ``log`` bits of the (int64) index i."""
    r = i - i
    for _ in range(log):
        r = (r << 1) | (i & 1)
        i >>= 1
    return r


# ----------------------------------------------------------------------------- kernels

@kernel(f"void({_SIG2}, {_SIG2}, int64, uint32[::1])")
def _ef_batch_inv_kernel(a, out, nthreads, zero_flag):
    # Thread t inverts a[t], a[t + T], ... (T = nthreads): prefix products into out, one
    # EF inversion of the total, then a backward sweep.  A zero element zeroes the subset
    # (its product is 0 and ef_inv(0) = 0) and raises zero_flag.
    t = cuda.grid(1)
    n = a.shape[0]
    if t >= nthreads or t >= n:
        return
    c0, c1, c2, c3 = _ONE32, _Z32, _Z32, _Z32
    i = t
    while i < n:
        out[i, 0] = c0
        out[i, 1] = c1
        out[i, 2] = c2
        out[i, 3] = c3
        x0, x1, x2, x3 = a[i, 0], a[i, 1], a[i, 2], a[i, 3]
        if x0 == 0 and x1 == 0 and x2 == 0 and x3 == 0:
            zero_flag[0] = _ONE32
        c0, c1, c2, c3 = _ef_mul(c0, c1, c2, c3, x0, x1, x2, x3)
        i += nthreads
    v0, v1, v2, v3 = _ef_inv(c0, c1, c2, c3)
    i = t + ((n - 1 - t) // nthreads) * nthreads
    while i >= t:
        x0, x1, x2, x3 = a[i, 0], a[i, 1], a[i, 2], a[i, 3]
        r0, r1, r2, r3 = _ef_mul(out[i, 0], out[i, 1], out[i, 2], out[i, 3], v0, v1, v2, v3)
        out[i, 0] = r0
        out[i, 1] = r1
        out[i, 2] = r2
        out[i, 3] = r3
        v0, v1, v2, v3 = _ef_mul(v0, v1, v2, v3, x0, x1, x2, x3)
        i -= nthreads


@kernel(f"void({_SIG2}, {_SIG2}, {_SIG2})")
def _scan_block_kernel(src, dst, sums):
    # Inclusive Hillis-Steele scan of one block of EF values (4 independent exact scans
    # mod p): after the step with offset d, slot t holds the sum of src[t-2d+1 .. t].
    sh = cuda.shared.array((MAX_SHARED_BLOCK, 4), uint32)
    tid = cuda.threadIdx.x
    bsz = cuda.blockDim.x
    i = cuda.blockIdx.x * bsz + tid
    n = src.shape[0]
    for c in range(4):
        sh[tid, c] = src[i, c] if i < n else _Z32
    cuda.syncthreads()
    off = 1
    while off < bsz:
        v0, v1, v2, v3 = _Z32, _Z32, _Z32, _Z32
        if tid >= off:
            v0, v1, v2, v3 = sh[tid - off, 0], sh[tid - off, 1], sh[tid - off, 2], sh[tid - off, 3]
        cuda.syncthreads()
        if tid >= off:
            sh[tid, 0] = _add(sh[tid, 0], v0)
            sh[tid, 1] = _add(sh[tid, 1], v1)
            sh[tid, 2] = _add(sh[tid, 2], v2)
            sh[tid, 3] = _add(sh[tid, 3], v3)
        cuda.syncthreads()
        off *= 2
    if i < n:
        for c in range(4):
            dst[i, c] = sh[tid, c]
    if tid == bsz - 1:
        for c in range(4):
            sums[cuda.blockIdx.x, c] = sh[tid, c]


@kernel(f"void({_SIG2}, {_SIG2}, int64)")
def _scan_add_kernel(data, sums, block):
    # data[i] += (inclusive scan of the block totals)[b - 1] for i in block b >= 1
    i = cuda.grid(1)
    if i < data.shape[0]:
        b = i // block
        if b > 0:
            for c in range(4):
                data[i, c] = _add(data[i, c], sums[b - 1, c])


@kernel(f"void({_SIG2}, uint32, uint32, uint32, uint32, int64)")
def _ef_powers_kernel(out, z0, z1, z2, z3, tile):
    # out[i] = z^i; thread t fills [t*tile, (t+1)*tile) starting from one ef_pow
    t = cuda.grid(1)
    n = out.shape[0]
    lo = t * tile
    if lo < n:
        p0, p1, p2, p3 = _ef_pow(z0, z1, z2, z3, lo)
        hi = min(n, lo + tile)
        for i in range(lo, hi):
            out[i, 0] = p0
            out[i, 1] = p1
            out[i, 2] = p2
            out[i, 3] = p3
            p0, p1, p2, p3 = _ef_mul(p0, p1, p2, p3, z0, z1, z2, z3)


@device_function(inline="always")
def _tree_reduce(sh, tid, bsz):
    # sum sh[0..bsz) into sh[0] (bsz a power of two); every thread of the block calls it
    half = bsz // 2
    while half > 0:
        if tid < half:
            for c in range(4):
                sh[tid, c] = _add(sh[tid, c], sh[tid + half, c])
        cuda.syncthreads()
        half //= 2


@kernel(f"void({_SIG2}, {_SIG2}, uint32[:, :, ::1], int64)")
def _dot_partial_kernel(mat, zp, partial, span):
    # block (col, tile): partial[col, tile] = sum over i in the tile of mat[col, i] * zp[i]
    sh = cuda.shared.array((MAX_SHARED_BLOCK, 4), uint32)
    ntiles = partial.shape[1]
    col = cuda.blockIdx.x // ntiles
    tile = cuda.blockIdx.x - col * ntiles
    tid = cuda.threadIdx.x
    bsz = cuda.blockDim.x
    n = mat.shape[1]
    lo = tile * span
    hi = min(n, lo + span)
    a0 = np.uint64(0)
    a1 = np.uint64(0)
    a2 = np.uint64(0)
    a3 = np.uint64(0)
    # each term < p; at most span / bsz terms per thread (< 2^33 keeps the sum < 2^64)
    for i in range(lo + tid, hi, bsz):
        v = mat[col, i]
        a0 += np.uint64(_mul(v, zp[i, 0]))
        a1 += np.uint64(_mul(v, zp[i, 1]))
        a2 += np.uint64(_mul(v, zp[i, 2]))
        a3 += np.uint64(_mul(v, zp[i, 3]))
    sh[tid, 0] = np.uint32(a0 % _P64)
    sh[tid, 1] = np.uint32(a1 % _P64)
    sh[tid, 2] = np.uint32(a2 % _P64)
    sh[tid, 3] = np.uint32(a3 % _P64)
    cuda.syncthreads()
    _tree_reduce(sh, tid, bsz)
    if tid == 0:
        for c in range(4):
            partial[col, tile, c] = sh[0, c]


@kernel(f"void(uint32[:, :, ::1], {_SIG2})")
def _reduce_partials_kernel(partial, out):
    # block col: out[col] = sum_t partial[col, t]
    sh = cuda.shared.array((MAX_SHARED_BLOCK, 4), uint32)
    col = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    bsz = cuda.blockDim.x
    a0, a1, a2, a3 = _Z32, _Z32, _Z32, _Z32
    for t in range(tid, partial.shape[1], bsz):
        a0 = _add(a0, partial[col, t, 0])
        a1 = _add(a1, partial[col, t, 1])
        a2 = _add(a2, partial[col, t, 2])
        a3 = _add(a3, partial[col, t, 3])
    sh[tid, 0] = a0
    sh[tid, 1] = a1
    sh[tid, 2] = a2
    sh[tid, 3] = a3
    cuda.syncthreads()
    _tree_reduce(sh, tid, bsz)
    if tid == 0:
        for c in range(4):
            out[col, c] = sh[0, c]


@kernel(f"void({_SIG2}, uint32, uint32, int64, int64, {_SIG2})")
def _deep_den_kernel(pts, g, w, log_n, brev, out):
    # out[k N + s] = x_s - pts[k] (EF), x_s = g w^e the LDE point at position s:
    # e = s (natural order) or bitrev(s) (brev: the committed, bit-reversed row order)
    s = cuda.grid(1)
    N = out.shape[0] // pts.shape[0]
    if s < N:
        e = bitrev(s, log_n) if brev else s
        x = _mul(g, _pow(w, e))
        for k in range(pts.shape[0]):
            r = k * N + s
            out[r, 0] = _sub(x, pts[k, 0])
            out[r, 1] = _neg(pts[k, 1])
            out[r, 2] = _neg(pts[k, 2])
            out[r, 3] = _neg(pts[k, 3])


@kernel(f"void(uint32[::1], int64, int64, int64, {_SIG2}, {_SIG2}, {_SIG2}, int64, int64, "
        f"int64, {_SIG2})")
def _deep_combine_kernel(mat, c, cs, ps, lpm, cst, inv, off0, off1, mode, total):
    # mat: a flat matrix, column j of position x at j * cs + x * ps.
    # comb(x) = sum_j lam_j mat(j, x) (lam_j in Montgomery form: mont_mul gives the
    # canonical product; c < 2^33 terms < p cannot wrap the uint64 sums), then
    # total[x] (+)= (comb - cst[0]) inv[off0 + x]  and, with mode & 1, the same matrix
    # at the next point: (cst[1] * comb - cst[2]) inv[off1 + x]  (cst[1] = lam^c).
    # mode & 2: overwrite total instead of accumulating.
    x = cuda.grid(1)
    if x >= total.shape[0]:
        return
    a0 = np.uint64(0)
    a1 = np.uint64(0)
    a2 = np.uint64(0)
    a3 = np.uint64(0)
    base = x * ps
    for j in range(c):
        v = mat[j * cs + base]
        a0 += np.uint64(_mont_mul(v, lpm[j, 0]))
        a1 += np.uint64(_mont_mul(v, lpm[j, 1]))
        a2 += np.uint64(_mont_mul(v, lpm[j, 2]))
        a3 += np.uint64(_mont_mul(v, lpm[j, 3]))
    c0 = np.uint32(a0 % _P64)
    c1 = np.uint32(a1 % _P64)
    c2 = np.uint32(a2 % _P64)
    c3 = np.uint32(a3 % _P64)
    q0, q1, q2, q3 = _ef_mul(_sub(c0, cst[0, 0]), _sub(c1, cst[0, 1]), _sub(c2, cst[0, 2]),
                             _sub(c3, cst[0, 3]), inv[off0 + x, 0], inv[off0 + x, 1],
                             inv[off0 + x, 2], inv[off0 + x, 3])
    if mode & 1:
        d0, d1, d2, d3 = _ef_mul(c0, c1, c2, c3, cst[1, 0], cst[1, 1], cst[1, 2], cst[1, 3])
        e0, e1, e2, e3 = _ef_mul(_sub(d0, cst[2, 0]), _sub(d1, cst[2, 1]), _sub(d2, cst[2, 2]),
                                 _sub(d3, cst[2, 3]), inv[off1 + x, 0], inv[off1 + x, 1],
                                 inv[off1 + x, 2], inv[off1 + x, 3])
        q0, q1, q2, q3 = _ef_add(q0, q1, q2, q3, e0, e1, e2, e3)
    if mode & 2:
        total[x, 0] = q0
        total[x, 1] = q1
        total[x, 2] = q2
        total[x, 3] = q3
    else:
        total[x, 0] = _add(total[x, 0], q0)
        total[x, 1] = _add(total[x, 1], q1)
        total[x, 2] = _add(total[x, 2], q2)
        total[x, 3] = _add(total[x, 3], q3)


@kernel(f"void({_SIG2}, {_SIG2}, int64, int64)")
def _bitrev_kernel(src, dst, log_n, axis):
    # one thread per element; axis 0 permutes rows, axis 1 permutes columns
    t = cuda.grid(1)
    rows = src.shape[0]
    cols = src.shape[1]
    if t < rows * cols:
        r = t // cols
        c = t - r * cols
        if axis == 0:
            dst[bitrev(r, log_n), c] = src[r, c]
        else:
            dst[r, bitrev(c, log_n)] = src[r, c]


# ----------------------------------------------------------------------------- helpers

def check_device_array(a, name: str, ndim: int, last: int | None = None):
    """Validate a C-contiguous uint32 device array of ``ndim`` dimensions and return it
    as a numba device array (objects exposing ``__cuda_array_interface__``, e.g. cupy
    arrays, are wrapped without a copy).  TypeError for host arrays or other dtypes,
    ValueError for shapes."""
    if isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a device array, got a host numpy array")
    if not hasattr(a, "copy_to_host"):
        if hasattr(a, "__cuda_array_interface__") and hasattr(cuda, "as_cuda_array"):
            a = cuda.as_cuda_array(a, sync=False)    # one thread owns the stream: no host wait
        else:
            raise TypeError(f"{name}: expected a device array, got {type(a).__name__}")
    if np.dtype(a.dtype) != np.uint32:
        raise TypeError(f"{name}: expected dtype uint32, got {a.dtype}")
    shape = tuple(a.shape)
    if len(shape) != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {shape}")
    if last is not None and shape[-1] != last:
        raise ValueError(f"{name}: last axis must be {last}, got shape {shape}")
    if not a.is_c_contiguous():
        raise ValueError(f"{name}: expected a C-contiguous device array")
    return a


def device_empty(shape, stream=None, alloc=None):
    """A fresh uint32 device array: ``alloc(shape)`` when given (e.g. a budgeted pool;
    it may return a numba or a cupy array), else ``cuda.device_array``."""
    shape = tuple(int(x) for x in shape)
    if alloc is None:
        return cuda.device_array(shape, dtype=np.uint32, stream=stream or 0)
    return check_device_array(alloc(shape), "alloc()", len(shape))


def _out(out, shape, stream, name="out", alloc=None):
    if out is None:
        return device_empty(shape, stream, alloc)
    out = check_device_array(out, name, len(shape))
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(out.shape)}")
    return out


def _log2(n: int, name: str) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"{name}: length {n} is not a power of two")
    return n.bit_length() - 1


def _shared_block(block: int) -> int:
    if block < 1 or block & (block - 1) or block > MAX_SHARED_BLOCK:
        raise ValueError(f"block must be a power of two <= {MAX_SHARED_BLOCK}, got {block}")
    return block


def ef_scalar(v, name: str = "value") -> np.ndarray:
    """An EF scalar (any layout of 4 canonical ints) -> host uint32[4]."""
    a = np.asarray(v, dtype=np.int64).reshape(-1)
    if a.shape != (4,) or np.any(a < 0) or np.any(a >= P):
        raise ValueError(f"{name}: expected 4 canonical field elements, got {v!r}")
    return a.astype(np.uint32)


def matrix_geometry(a, name: str, width: int, N: int, layout: str) -> tuple:
    """(flat view, column stride, position stride) of an LDE matrix: ``layout="rows"``:
    uint32[N, width] with rows in bit-reversed order (the committed / Merkle layout,
    ``Committed.rows``); ``layout="cols"``: uint32[width, N] in natural order."""
    a = check_device_array(a, name, 2)
    if layout == "rows":
        want, cs, ps = (N, width), 1, width
    elif layout == "cols":
        want, cs, ps = (width, N), N, 1
    else:
        raise ValueError(f"layout must be 'rows' or 'cols', got {layout!r}")
    if tuple(a.shape) != want:
        raise ValueError(f"{name}: shape {tuple(a.shape)}, expected {want} (layout {layout!r})")
    return a.reshape(width * N), cs, ps


def _u32s(a) -> tuple:
    return tuple(np.uint32(x) for x in a)



# ----------------------------------------------------------------------------- wrappers

def ef_batch_inverse_device(a, out=None, zero_flag=None, stream=None, block: int = DEFAULT_BLOCK,
                            chunk: int = 32, alloc=None):
    """EF inverses of device uint32[n, 4] (one ``ef_inv`` per ``chunk`` elements).

    With ``zero_flag`` (device uint32[1], preset by the caller) a zero element only sets
    it; without, the wrapper checks on the host (one word) and raises ZeroDivisionError
    like :func:`kernels.hostlib.ef_inverse`.  ``out`` must not alias ``a``."""
    a = check_device_array(a, "a", 2, 4)
    if chunk < 1:
        raise ValueError("chunk must be >= 1")
    n = a.shape[0]
    out = _out(out, (n, 4), stream, alloc=alloc)
    if n == 0:
        return out
    s = stream or 0
    own = zero_flag is None
    if own:
        zero_flag = cuda.to_device(np.zeros(1, np.uint32), stream=s)
    nthreads = (n + chunk - 1) // chunk
    g, b = grid_1d(nthreads, block)
    _ef_batch_inv_kernel[g, b, s](a, out, nthreads, zero_flag)
    if own and fetch(zero_flag, stream)[0]:
        raise ZeroDivisionError("inverse of zero in the extension field")
    return out


def _scan_inplace(data, block: int, stream) -> None:
    n = data.shape[0]
    nb = (n + block - 1) // block
    sums = cuda.device_array((nb, 4), dtype=np.uint32, stream=stream)
    _scan_block_kernel[nb, block, stream](data, data, sums)
    if nb > 1:
        _scan_inplace(sums, block, stream)
        g, b = grid_1d(n, block)
        _scan_add_kernel[g, b, stream](data, sums, block)


def ef_prefix_sum_device(a, out=None, stream=None, block: int = MAX_SHARED_BLOCK, alloc=None):
    """Inclusive running sum of device EF uint32[n, 4]: out[i] = a[0] + ... + a[i]
    (``out`` may be ``a`` for an in-place scan).  ``block``: a power of two <= 256; the
    block totals (n / block EF values per level) are scanned recursively."""
    a = check_device_array(a, "a", 2, 4)
    _shared_block(block)
    n = a.shape[0]
    out = _out(out, (n, 4), stream, alloc=alloc)
    if n == 0:
        return out
    s = stream or 0
    if out is not a:
        out.copy_to_device(a, stream=s)
    _scan_inplace(out, block, s)
    return out


def ood_device(coeffs, point, out=None, stream=None, block: int = DEFAULT_BLOCK, alloc=None):
    """R3 (HostStages.ood): coefficients device uint32[c, n] (column k's polynomial
    sum_i coeffs[k, i] X^i) at the EF point -> device uint32[c, 4].

    Pass 1 writes z^i (n, 4); pass 2: block (k, tile) reduces its slice of column k
    (per-thread sums, then a shared-memory tree); pass 3 reduces the tiles per column."""
    coeffs = check_device_array(coeffs, "coeffs", 2)
    z = ef_scalar(point, "point")
    _shared_block(block)
    c, n = coeffs.shape
    out = _out(out, (c, 4), stream, alloc=alloc)
    if c == 0:
        return out
    if n == 0:
        raise ValueError("coeffs: empty polynomials")
    s = stream or 0
    zp = cuda.device_array((n, 4), dtype=np.uint32, stream=s)
    g, b = grid_1d((n + POW_TILE - 1) // POW_TILE, block)
    _ef_powers_kernel[g, b, s](zp, *_u32s(z), POW_TILE)
    per_block = block * OOD_ELEMS
    ntiles = min(MAX_SHARED_BLOCK * 4, (n + per_block - 1) // per_block)
    span = (n + ntiles - 1) // ntiles
    partial = cuda.device_array((c, ntiles, 4), dtype=np.uint32, stream=s)
    _dot_partial_kernel[c * ntiles, block, s](coeffs, zp, partial, span)
    _reduce_partials_kernel[c, block, s](partial, out)
    return out


def deep_quotient_device(shape, groups, z, lam, layout: str = "cols", out=None, stream=None,
                         block: int = DEFAULT_BLOCK, alloc=None):
    """R4 (HostStages.deep_quotient): DQ(x) = sum_k lam^k (f_k(x) - v_k) / (x - zeta_k) on
    g<w_N> -> device uint32[N, 4] in bit-reversed order (FRI layer 0).

    ``shape``: anything with ``log_n`` and ``log_lde``; ``groups``: list of (matrix,
    opened values host (c, 4), at_next) in deep_groups order (zeta = z, or z w_n when
    at_next); each matrix a device LDE in ``layout`` ("rows": uint32[N, c] bit-reversed
    rows = Committed.rows; "cols": uint32[c, N] natural order, then the result is
    bit-reversed at the end).  Consecutive groups over the same matrix are fused (one
    pass: the second group's combination is lam^c times the first's).  The 2N
    denominators x - zeta are inverted with the EF Montgomery trick; raises
    ZeroDivisionError if zeta lies on the coset (a one-word copy)."""
    log_n, log_lde = int(shape.log_n), int(shape.log_lde)
    N = 1 << log_lde
    zf = ef_scalar(z, "z")
    lamf = ef_scalar(lam, "lam").astype(np.uint64).reshape(4, 1)
    if not groups:
        raise ValueError("deep_quotient_device: no groups")
    checked = []
    for gi, (mat, vals, at_next) in enumerate(groups):
        vals = np.asarray(vals)
        if vals.ndim != 2 or vals.shape[1] != 4:
            raise ValueError(f"groups[{gi}]: opened values must be (c, 4), got {vals.shape}")
        c = vals.shape[0]
        flat, cs, ps = matrix_geometry(mat, f"groups[{gi}] matrix", c, N, layout)
        checked.append((mat, flat, c, cs, ps, vals.astype(np.uint64), bool(at_next)))
    s = stream or 0
    z_next = AF.ef_mul_base(zf.astype(np.uint64).reshape(4, 1), AF.root_of_unity(log_n))
    pts = cuda.to_device(np.stack([zf, z_next.reshape(4).astype(np.uint32)]), stream=s)
    den = cuda.device_array((2 * N, 4), dtype=np.uint32, stream=s)
    g, b = grid_1d(N, block)
    _deep_den_kernel[g, b, s](pts, np.uint32(SHIFT), np.uint32(AF.root_of_unity(log_lde)),
                              log_lde, int(layout == "rows"), den)
    flag = cuda.to_device(np.zeros(1, np.uint32), stream=s)
    inv = ef_batch_inverse_device(den, zero_flag=flag, stream=s, block=block)
    del den
    if layout == "rows":
        total = _out(out, (N, 4), stream, alloc=alloc)
    else:
        total = cuda.device_array((N, 4), dtype=np.uint32, stream=s)
    k = 0
    gi = 0
    mode_init = 2
    lam_pows = ef_powers(lamf, sum(ch[2] for ch in checked))    # lam^0 .. lam^(K-1)
    while gi < len(checked):
        mat, flat, c, cs, ps, vals, at_next = checked[gi]
        lp = lam_pows[:, k:k + c]                                            # (4, c)
        cst = np.zeros((3, 4), np.uint32)
        cst[0] = AF.ef_mul(lp, vals.T).sum(axis=1) % np.uint64(P)
        mode, off0, off1 = mode_init, N if at_next else 0, 0
        nxt = checked[gi + 1] if gi + 1 < len(checked) else None
        if nxt is not None and nxt[0] is mat and nxt[6] != at_next:
            scale = AF.ef_pow(lamf, c)
            cst[1] = scale.reshape(4)
            cst[2] = AF.ef_mul(AF.ef_mul(lp, scale), nxt[5].T).sum(axis=1) % np.uint64(P)
            off1 = N if nxt[6] else 0
            mode |= 1
            k += c
            gi += 1
        lpm = cuda.to_device(to_mont_host(np.ascontiguousarray(lp.T)), stream=s)
        _deep_combine_kernel[g, b, s](flat, c, cs, ps, lpm, cuda.to_device(cst, stream=s), inv,
                                      off0, off1, mode, total)
        mode_init = 0
        k += c
        gi += 1
    if fetch(flag, stream)[0]:
        raise ZeroDivisionError("deep_quotient_device: the opening point lies on the LDE coset")
    if layout == "rows":
        return total
    return bit_reverse_device(total, axis=0, out=out, stream=s, block=block, alloc=alloc)


def bit_reverse_device(a, axis: int = 0, out=None, stream=None, block: int = DEFAULT_BLOCK,
                       alloc=None):
    """Copy of device uint32[r, c] with the rows (axis 0) or columns (axis 1) in
    bit-reversed order (kernels.ntt_host.bit_reverse_permutation).  ``out`` must not alias."""
    a = check_device_array(a, "a", 2)
    if axis not in (0, 1, -1):
        raise ValueError(f"axis must be 0 or 1, got {axis}")
    axis = 1 if axis == -1 else axis
    log_n = _log2(a.shape[axis], "a")
    out = _out(out, tuple(a.shape), stream, alloc=alloc)
    if a.shape[0] * a.shape[1]:
        g, b = grid_1d(a.shape[0] * a.shape[1], block)
        _bitrev_kernel[g, b, stream or 0](a, out, log_n, axis)
    return out
