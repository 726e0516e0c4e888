"""Poseidon2-16 on the device (numba.cuda): permutation, leaf sponge, Merkle level compression.

The permutation is :func:`kernels.poseidon2.build_permutation` -- the same source the host
scalar path compiles -- built here over the device field functions ``DF``.  Each thread
owns one 16-lane state in a local array (the constant-trip lane loops unroll, so it lives
in registers); the round constants are ``cuda.const`` arrays baked into the module, so
they are uploaded once with the code, never per call.

Wrappers take numba device arrays (under the simulator: ``cuda.to_device`` arrays) of
canonical uint32 values, validate dtype and shape, return early on empty input, accept
``stream=`` (None/0 = default stream) and ``out=``, and never copy data to the host.
Results are bit-identical to the host functions of :mod:`kernels.poseidon2`.
"""
from __future__ import annotations

import numpy as np
from numba import cuda, uint32

from .devicelib import DF, device_function, grid_1d, kernel
from .poseidon2 import build_permutation
from .poseidon2_constants import DIGEST, RATE, RC_FULL_M, RC_PARTIAL_M, V16_M, WIDTH

__all__ = ["permute_device", "hash_rows_device", "compress_pairs_device", "DEFAULT_BLOCK"]

#: threads per block (a state per thread is ~40 live registers; 128 keeps occupancy high)
DEFAULT_BLOCK = 128

# Module-level constant tables, embedded into each kernel with cuda.const.array_like.
_RCF = np.ascontiguousarray(RC_FULL_M)
_RCP = np.ascontiguousarray(RC_PARTIAL_M)
_VM = np.ascontiguousarray(V16_M)

_DP = build_permutation(device_function(), DF)
_permute = _DP.permute


@kernel("void(uint32[:, ::1], uint32[:, ::1], int64)")
def _sponge_rows_kernel(m, out, rate):
    # thread r: overwrite-mode sponge of row r (rate 8: leaf hash; rate 16 on 16-wide rows:
    # one permutation), writing the first out.shape[1] lanes.  Same contract as the host
    # _sponge_kernel in kernels/poseidon2.py.
    r = cuda.grid(1)
    if r < m.shape[0]:
        rcf = cuda.const.array_like(_RCF)
        rcp = cuda.const.array_like(_RCP)
        vm = cuda.const.array_like(_VM)
        s = cuda.local.array(16, uint32)
        for i in range(16):
            s[i] = uint32(0)
        w = m.shape[1]
        k = out.shape[1]
        for b0 in range(0, w, rate):
            lim = min(rate, w - b0)
            for i in range(16):               # constant lane indices: s stays in registers
                if i < lim:
                    s[i] = m[r, b0 + i]
            _permute(s, rcf, rcp, vm)
        for i in range(16):
            if i < k:
                out[r, i] = s[i]


@kernel("void(uint32[:, ::1], int64, int64, int64)")
def _merkle_level_kernel(nodes, src, dst, count):
    # thread i: nodes[dst + i] = compress(nodes[src + 2i], nodes[src + 2i + 1])
    i = cuda.grid(1)
    if i < count:
        rcf = cuda.const.array_like(_RCF)
        rcp = cuda.const.array_like(_RCP)
        vm = cuda.const.array_like(_VM)
        s = cuda.local.array(16, uint32)
        a = src + 2 * i
        for k in range(8):
            s[k] = nodes[a, k]
            s[k + 8] = nodes[a + 1, k]
        _permute(s, rcf, rcp, vm)
        for k in range(8):
            nodes[dst + i, k] = s[k]


# ----------------------------------------------------------------------------------------
# Wrappers
# ----------------------------------------------------------------------------------------

def _check_dev(a, name: str, ndim: int, last: int | None = None):
    """Validate a device array of uint32; returns it as a numba device array (a cupy or
    other ``__cuda_array_interface__`` array becomes a zero-copy numba view)."""
    if isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a device array, got a host numpy array")
    if not hasattr(a, "copy_to_host"):
        if not hasattr(a, "__cuda_array_interface__"):
            raise TypeError(f"{name}: expected a device array, got {type(a).__name__}")
        a = cuda.as_cuda_array(a, sync=False)    # one thread owns the stream: no host wait
    if np.dtype(a.dtype) != np.uint32:
        raise TypeError(f"{name}: expected dtype uint32, got {a.dtype}")
    shape = tuple(a.shape)
    if len(shape) != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {shape}")
    if last is not None and shape[-1] != last:
        raise ValueError(f"{name}: last axis must be {last}, got shape {shape}")
    return a


def _out(out, shape, stream, name="out"):
    if out is None:
        return cuda.device_array(shape, dtype=np.uint32, stream=stream or 0)
    out = _check_dev(out, name, len(shape))
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(out.shape)}")
    return out


def launch_sponge_rows(m, out, rate: int, stream=None, block: int = DEFAULT_BLOCK) -> None:
    """Sponge every row of device matrix m into device out (no validation; internal)."""
    n = m.shape[0]
    if n == 0:
        return
    grid, blk = grid_1d(n, block)
    _sponge_rows_kernel[grid, blk, stream or 0](m, out, rate)


def launch_merkle_level(nodes, src: int, dst: int, count: int, stream=None,
                        block: int = DEFAULT_BLOCK) -> None:
    """One Merkle level inside a flat node buffer (see kernels/merkle.py; internal)."""
    if count == 0:
        return
    grid, blk = grid_1d(count, block)
    _merkle_level_kernel[grid, blk, stream or 0](nodes, src, dst, count)


def permute_device(states, out=None, stream=None, block: int = DEFAULT_BLOCK):
    """Poseidon2-16 of every state: device uint32[n, 16] -> device uint32[n, 16]."""
    states = _check_dev(states, "states", 2, WIDTH)
    out = _out(out, (states.shape[0], WIDTH), stream)
    launch_sponge_rows(states, out, WIDTH, stream, block)
    return out


def hash_rows_device(m, out=None, stream=None, block: int = DEFAULT_BLOCK):
    """Leaf sponge of every row (SPEC §3): device uint32[n, w] -> device uint32[n, 8]."""
    m = _check_dev(m, "m", 2)
    if m.shape[1] == 0:
        raise ValueError("m: rows must have at least one element (w >= 1)")
    out = _out(out, (m.shape[0], DIGEST), stream)
    launch_sponge_rows(m, out, RATE, stream, block)
    return out


def compress_pairs_device(pairs, out=None, stream=None, block: int = DEFAULT_BLOCK):
    """2-to-1 compression of (left || right) rows: device uint32[n, 16] -> uint32[n, 8]."""
    pairs = _check_dev(pairs, "pairs", 2, WIDTH)
    out = _out(out, (pairs.shape[0], DIGEST), stream)
    launch_sponge_rows(pairs, out, WIDTH, stream, block)
    return out
