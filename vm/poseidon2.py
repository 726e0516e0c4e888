"""Poseidon2 (width 16, BabyBear; SPEC §2) as the VM uses it.

Three forms of the same permutation:

* :func:`permute_one` -- one state, Python ints; used by the interpreter for every HASH,
  state-sponge and I/O-chain call (it delegates to a numba kernel -- the verifier's, else
  ``kernels.poseidon2.poseidon2_permute`` -- when one is importable, else runs the
  pure-Python rounds).
* :func:`permute_rows` -- a batch ``uint32[n, 16]`` in numpy, keeping every intermediate the
  POSEIDON2 table lays out in columns (S-box cubes and S-box outputs of every round).
* :func:`external_linear` / :func:`internal_linear` -- the linear layers written over any
  values supporting ``+`` and ``*`` by an int (numpy arrays with a reducer, or AIR
  expressions), so the AIR in :mod:`vm.airs` states exactly the rounds computed here.

Round structure (SPEC §2):  s = M_E(in);  4 x full;  13 x partial;  4 x full, where
a full round is  x_i = s_i + rc_i,  y_i = x_i^7,  s = M_E(y)  and a partial round is
x_0 = s_0 + rc,  y_0 = x_0^7,  s = M_I(y_0, s_1..s_15).  The S-box x^7 is split as
t = x^3, y = t^2 * x so that each step is a degree-3 polynomial in stored values.

Derived primitives (all over the full 16-lane permutation):

* ``sponge(values)``: SPEC §3 leaf hash -- state of 16 zeros, blocks of 8 overwrite lanes
  0..7, permute; digest = lanes 0..7.  Padding-free: it binds the length only where the
  length is fixed (Merkle leaves of one table all have its width).  Not used for the
  block statement.
* ``statement_digest(values)``: the same sponge started from the state whose lane 8 (the
  first capacity lane) holds ``len(values)``.  Used for the memory-state and program
  digests of the block statement: inputs of different lengths start from different
  states, and for one length the overwrite blocks are an injective encoding, so a digest
  collision needs a Poseidon2 collision (the padding-free form collides on a partial last
  block: appending the state's own lanes to it changes nothing).
* ``compress(left, right)``: lanes 0..7 of permute(left || right) (the Merkle inner node);
  the I/O chains use it as acc' = compress(event, acc).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..kernels.poseidon2_constants import RC_FULL, RC_PARTIAL, V16

P = 2013265921
WIDTH = 16
RATE = 8
N_FULL_HALF = 4
N_PARTIAL = 13

_RC_FULL = [[int(x) for x in row] for row in RC_FULL]
_RC_PART = [int(x) for x in RC_PARTIAL]
_V16 = [int(x) for x in V16]
_P64 = np.uint64(P)


# --------------------------------------------------------------------------- linear layers

def _m4(x0, x1, x2, x3):
    # circ(2,3,1,1): rows [2,3,1,1], [1,2,3,1], [1,1,2,3], [3,1,1,2]
    return (2 * x0 + 3 * x1 + x2 + x3,
            x0 + 2 * x1 + 3 * x2 + x3,
            x0 + x1 + 2 * x2 + 3 * x3,
            3 * x0 + x1 + x2 + 2 * x3)


def external_linear(s: Sequence, reduce=lambda v: v) -> list:
    """M_E: M4 on each block of 4 lanes, then add to lane i the sum over blocks of lane
    (i mod 4).  ``reduce`` is applied to each output (``% P`` for integer data)."""
    blocks = [_m4(*(reduce(x) for x in s[4 * k:4 * k + 4])) for k in range(4)]
    blocks = [[reduce(x) for x in b] for b in blocks]
    sums = [reduce(blocks[0][i] + blocks[1][i] + blocks[2][i] + blocks[3][i]) for i in range(4)]
    return [reduce(blocks[k][i] + sums[i]) for k in range(4) for i in range(4)]


def internal_linear(s: Sequence, reduce=lambda v: v) -> list:
    """M_I: y_i = sum_j s_j + V16_i * s_i."""
    total = s[0]
    for x in s[1:]:
        total = total + x
    total = reduce(total)
    return [reduce(total + _V16[i] * s[i]) for i in range(WIDTH)]


# --------------------------------------------------------------------------- one state

def _permute_py(state: Sequence[int]) -> list[int]:
    red = lambda v: v % P  # noqa: E731
    s = external_linear([int(x) % P for x in state], red)
    for r in range(2 * N_FULL_HALF):
        if r == N_FULL_HALF:
            for rc in _RC_PART:
                x = (s[0] + rc) % P
                s[0] = pow(x, 7, P)
                s = internal_linear(s, red)
        rcs = _RC_FULL[r]
        s = external_linear([pow((s[i] + rcs[i]) % P, 7, P) for i in range(WIDTH)], red)
    return s


_kernel = None


def _load_kernel():
    global _kernel
    if _kernel is None:
        _kernel = False
        # the verifier's kernel first: it is a plain (not parallel) njit function, safe to
        # call from any thread; numba's parallel pool (the host kernels) is not re-entrant
        for mod, name in (("steadfast.verifier.poseidon2", "permute"),
                          ("steadfast.kernels.poseidon2", "poseidon2_permute")):
            try:
                import importlib
                _kernel = getattr(importlib.import_module(mod), name)
                break
            except Exception:   # not available here: try the next, else pure Python
                continue
    return _kernel


def permute_one(state: Sequence[int]) -> list[int]:
    """Poseidon2 of one 16-element state (canonical ints in, canonical ints out)."""
    k = _load_kernel()
    if k:
        return [int(x) for x in k(np.asarray(state, dtype=np.uint32).reshape(1, WIDTH))[0]]
    return _permute_py(state)


def compress(left: Sequence[int], right: Sequence[int]) -> list[int]:
    """Lanes 0..7 of permute(left || right)."""
    return permute_one(list(left) + list(right))[:RATE]


def sponge(values: Sequence[int]) -> list[int]:
    """Padding-free overwrite-mode sponge of SPEC §3 (rate 8); the empty input hashes to
    lanes 0..7 of the zero state (no permutation)."""
    state = [0] * WIDTH
    for k in range(0, len(values), RATE):
        block = values[k:k + RATE]
        state[:len(block)] = [int(v) % P for v in block]
        state = permute_one(state)
    return state[:RATE]


def statement_digest(values: Sequence[int]) -> list[int]:
    """The length-binding digest of the block statement (docs/vm.md "Sponge and chains"):
    the overwrite-mode sponge of :func:`sponge`, started from 16 zeros except lane 8 =
    ``len(values)``.  The CPU table's ABSORB rows compute it for the memory states (their
    first capacity is (M, 0, ..., 0)).  Long inputs (a ROM of up to 2^20 rows arrives in
    an untrusted block proof) take one compiled call, :func:`_statement_digest_compiled`."""
    if len(values) > 4 * RATE:
        fast = _statement_digest_compiled(values)
        if fast is not None:
            return fast
    state = [0] * WIDTH
    state[RATE] = len(values) % P
    for k in range(0, len(values), RATE):
        block = values[k:k + RATE]
        state[:len(block)] = [int(v) % P for v in block]
        state = permute_one(state)
    return state[:RATE]


def _statement_digest_compiled(values) -> list[int] | None:
    """:func:`statement_digest` as one call of the verifier's compiled duplex sponge (the
    same overwrite-mode rounds), instead of one Python-level permutation per 8 elements:
    a 2^20-row ROM took 32 s that way, about 2 s this way.  None when that kernel is not
    importable or the values do not fit int64 (the caller then runs the loop)."""
    try:
        from ..verifier.poseidon2 import _duplex_blocks
        arr = np.asarray(values, dtype=np.int64)
    except (ImportError, OverflowError, TypeError, ValueError):
        return None
    if arr.ndim != 1 or arr.size == 0:
        return None
    state = np.zeros(WIDTH, dtype=np.uint32)
    state[RATE] = arr.size % P
    out = _duplex_blocks(state, np.ascontiguousarray(arr % P, dtype=np.uint32))
    return [int(x) for x in out[:RATE]]


# --------------------------------------------------------------------------- batched, with trace

def _pow3(x):
    return (x * x % _P64) * x % _P64


def permute_rows(states: np.ndarray) -> dict:
    """Permute a batch ``uint32[n, 16]`` and return every intermediate the POSEIDON2 table
    stores, as uint32 arrays:

    * ``full_cube``  [8, n, 16]: t = (s + rc)^3 in each full round,
    * ``full_sbox``  [8, n, 16]: y = t^2 (s + rc) = (s + rc)^7,
    * ``part_cube``  [13, n] and ``part_sbox`` [13, n]: the same for lane 0 of partial rounds,
    * ``out``        [n, 16]: the permutation output.
    """
    states = np.asarray(states)
    if states.ndim != 2 or states.shape[1] != WIDTH:
        raise ValueError(f"expected states of shape (n, 16), got {states.shape}")
    n = states.shape[0]
    red = lambda v: v % _P64  # noqa: E731
    s = external_linear([states[:, i].astype(np.uint64) for i in range(WIDTH)], red)
    full_cube = np.empty((2 * N_FULL_HALF, n, WIDTH), np.uint32)
    full_sbox = np.empty((2 * N_FULL_HALF, n, WIDTH), np.uint32)
    part_cube = np.empty((N_PARTIAL, n), np.uint32)
    part_sbox = np.empty((N_PARTIAL, n), np.uint32)
    for r in range(2 * N_FULL_HALF):
        if r == N_FULL_HALF:
            for k, rc in enumerate(_RC_PART):
                x = (s[0] + np.uint64(rc)) % _P64
                t = _pow3(x)
                y = t * t % _P64 * x % _P64
                part_cube[k] = t
                part_sbox[k] = y
                s = internal_linear([y] + s[1:], red)
        ys = []
        for i in range(WIDTH):
            x = (s[i] + np.uint64(_RC_FULL[r][i])) % _P64
            t = _pow3(x)
            y = t * t % _P64 * x % _P64
            full_cube[r, :, i] = t
            full_sbox[r, :, i] = y
            ys.append(y)
        s = external_linear(ys, red)
    out = np.stack(s, axis=1).astype(np.uint32)
    return {"full_cube": full_cube, "full_sbox": full_sbox, "part_cube": part_cube,
            "part_sbox": part_sbox, "out": out}


__all__ = ["permute_one", "permute_rows", "compress", "sponge", "statement_digest", "external_linear",
           "internal_linear", "WIDTH", "RATE", "N_FULL_HALF", "N_PARTIAL"]
