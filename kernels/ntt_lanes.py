"""The NTT's radix-2 butterflies in 32-bit lanes: explicit LLVM IR for the host transforms.

numba compiles kernels/ntt_host.py's scalar butterfly (``_dit`` / ``_dif``: a uint64
Montgomery product and two uint64 modular additions) into 64-bit vector lanes, 8 to a
512-bit register, ~0.5 ns a butterfly on one core with its operands in L1 (Zen 4,
2.6 GHz).  Here ``LANES`` consecutive butterflies are one ``<LANES x i32>`` vector each
(16 with 512-bit code generation, 8 with 256-bit: the width kernels/poseidon2_lanes.py
chose), with that file's field operations (:class:`kernels.poseidon2_lanes._Gen`): the
Montgomery product on the even/odd 64-bit halves, one shuffle to recombine, and the
additions as ``add; sub p; unsigned min``.  About 0.21-0.25 ns a butterfly on the same
core (2.0-2.1x).

Same values, bit for bit: every operand and result is canonical in [0, p) in both, the
twiddle ``w_m`` in Montgomery form (w 2^32 mod p), and for canonical a, b the signed
Montgomery product r of ``_Gen.mont`` has |r| < p^2 / 2^32 + p / 2 < p, so one ``canon``
gives the canonical a w -- the scalar ``mont_mul``'s value.

    DIT  (u, v) -> (u + w v, u - w v)        DIF  (u, v) -> (u + v, (u - v) w)

:func:`run` does ``count`` butterflies u = x[iu + j], v = x[iv + j], w = tw[iw + j] (the
twiddles contiguous), :func:`run_splat` 16 with one twiddle (a tile row of
kernels/ntt_host.py).  Both are ``inline="always"`` helpers of the transforms' one
compiled entry point (``ntt_host._tasks``), which takes the choice between these and the
scalar loops as an argument: ``STEADFAST_NTT_KERNEL=scalar`` (default ``lanes``) runs the
scalar ones, the before of an A/B (same outputs: tests/test_ntt_lanes.py).
"""
from __future__ import annotations

import os

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .hostlib import HF
from .poseidon2_lanes import W as LANES
from .poseidon2_lanes import _Gen, _vec_ptr

#: "lanes" (this module, the default) or "scalar" (ntt_host's scalar loops); per process
KERNEL = os.environ.get("STEADFAST_NTT_KERNEL", "lanes").strip().lower()
if KERNEL not in ("lanes", "scalar"):
    raise ValueError(f"STEADFAST_NTT_KERNEL must be 'lanes' or 'scalar', got {KERNEL!r}")
ENABLED = KERNEL == "lanes"


def _butterfly(builder, g: _Gen, pu, pv, w, forward: bool) -> None:
    u = builder.load(pu, align=4)
    v = builder.load(pv, align=4)
    if forward:
        t = g.canon(g.mont(g.split(v), g.split(w)))
        builder.store(g.add(u, t), pu, align=4)
        builder.store(g.sub(u, t), pv, align=4)
    else:
        s = g.sub(u, v)
        builder.store(g.add(u, v), pu, align=4)
        builder.store(g.canon(g.mont(g.split(s), g.split(w))), pv, align=4)


def _make(forward: bool):
    @intrinsic
    def lanes(typingctx, x, iu, iv, tw, iw):
        """One vector of butterflies: x[iu:iu+LANES], x[iv:iv+LANES], tw[iw:iw+LANES]."""
        sig = types.void(x, iu, iv, tw, iw)

        def codegen(context, builder, signature, args):
            xa = context.make_array(signature.args[0])(context, builder, value=args[0])
            ta = context.make_array(signature.args[3])(context, builder, value=args[3])
            g = _Gen(builder, LANES)
            w = builder.load(_vec_ptr(builder, ta, args[4], LANES), align=4)
            _butterfly(builder, g, _vec_ptr(builder, xa, args[1], LANES),
                       _vec_ptr(builder, xa, args[2], LANES), w, forward)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def splat(typingctx, x, iu, iv, wm):
        """One vector of butterflies with the one twiddle wm (uint32, Montgomery form)."""
        sig = types.void(x, iu, iv, wm)

        def codegen(context, builder, signature, args):
            xa = context.make_array(signature.args[0])(context, builder, value=args[0])
            g = _Gen(builder, LANES)
            v = builder.insert_element(ir.Constant(g.V, ir.Undefined), args[3],
                                       ir.Constant(ir.IntType(32), 0))
            w = builder.shuffle_vector(v, v, ir.Constant(g.V, [0] * LANES))
            _butterfly(builder, g, _vec_ptr(builder, xa, args[1], LANES),
                       _vec_ptr(builder, xa, args[2], LANES), w, forward)
            return context.get_dummy_value()

        return sig, codegen

    return lanes, splat


_dit_lanes, _dit_splat = _make(True)
_dif_lanes, _dif_splat = _make(False)
_mm, _add, _sub = HF.mont_mul, HF.add, HF.sub


@njit(inline="always")
def _one(x, iu, iv, wm, forward):
    """One scalar butterfly (x[iu], x[iv]) with twiddle wm: the vectors' tails."""
    a = x[iu]
    b = x[iv]
    if forward:
        t = _mm(b, wm)
        x[iu] = _add(a, t)
        x[iv] = _sub(a, t)
    else:
        x[iu] = _add(a, b)
        x[iv] = _mm(_sub(a, b), wm)


@njit(inline="always")
def run(x, iu, iv, tw, iw, count, forward):
    """``count`` butterflies (x[iu + j], x[iv + j]) with twiddles tw[iw + j], j < count:
    whole vectors, then the scalar butterflies for the rest.  x must not be tw."""
    j = 0
    while j + LANES <= count:
        if forward:
            _dit_lanes(x, iu + j, iv + j, tw, iw + j)
        else:
            _dif_lanes(x, iu + j, iv + j, tw, iw + j)
        j += LANES
    while j < count:
        _one(x, iu + j, iv + j, tw[iw + j], forward)
        j += 1


@njit(inline="always")
def run_splat(x, iu, iv, wm, count, forward):
    """``count`` butterflies (x[iu + j], x[iv + j]) with the one twiddle wm."""
    j = 0
    while j + LANES <= count:
        if forward:
            _dit_splat(x, iu + j, iv + j, wm)
        else:
            _dif_splat(x, iu + j, iv + j, wm)
        j += LANES
    while j < count:
        _one(x, iu + j, iv + j, wm, forward)
        j += 1


__all__ = ["LANES", "KERNEL", "ENABLED", "run", "run_splat"]
