"""Poseidon2-16 over BabyBear in 32-bit lanes: the host permutation as explicit LLVM IR.

The whole permutation of ``W`` states (``W`` = 16 with 512-bit code generation, 8 with
256-bit) is emitted as one straight-line LLVM IR body through a numba ``@intrinsic``:
state lane ``i`` of the ``W`` states is one ``<W x i32>`` vector (a ``zmm`` / ``ymm``
register), so a vector instruction does 16 (8) states' worth of one lane operation.
Values stay canonical in ``[0, p)`` between the linear-layer operations (adds are
``add; sub p; unsigned min``, three instructions for 16 lanes), in Montgomery form
``x·2^32 mod p``.

Montgomery products are the even/odd schedule of 32-bit lanes: the vector viewed as
``W/2`` 64-bit lanes, ``vpmuldq`` on the even elements and on the odd ones shifted down,
``q = lo(t)·p^-1`` by ``vpmuludq``, ``t - q·p`` by ``vpmuldq`` and a 64-bit subtract, and
the two halves' high words recombined by one shuffle.  Signed operands: for ``|a|, |b| <
2^31`` the result ``r ≡ a·b·2^-32`` has ``|r| < |a·b|/2^32 + p/2``, so the S-box chain
``x^2, x^3, x^6, x^7`` of an input in ``[-p, p)`` stays in ``(-p, p)`` without a
correction step (bounds below, ``_sbox``); one ``min`` makes the output canonical.

The internal diagonal V16 = (-2, 1, 2, 1/2, 3, 4, -1/2, -3, -4, 2^-8, 1/4, 1/8, 2^-27,
-2^-8, -1/16, -2^-27) is adds, doublings, a halving and the split ``x·2^-k = (x >> k) -
(x & (2^k - 1))·(p-1)/2^k`` (one ``vpmulld``); no Montgomery product.

Public entry: :func:`sponge_lanes` (the overwrite sponge / permutation / compression of
kernels/poseidon2.py's ``_sponge``), canonical uint32 in and out, bit-identical to the
scalar references (tests/test_poseidon2*.py, tests/test_poseidon2_lanes.py).
"""
from __future__ import annotations

import os

import numpy as np
from llvmlite import ir
from numba import njit, types

from steadfast._jit_cache import adopt
from numba.extending import intrinsic

from .field import P
from .poseidon2_constants import RC_FULL, RC_PARTIAL, ROUNDS_F_HALF, ROUNDS_P, V16_RATIONAL

_R = (1 << 32) % P
_R2 = _R * _R % P
_MU = pow(P, -1, 1 << 32)                     # p^-1 mod 2^32 = 0x88000001
_MASK32 = (1 << 32) - 1
SBOX_GROUP = 16                                # full-round S-boxes emitted side by side


def _codegen_features() -> str:
    """The CPU feature string numba's CPU code generator of this process uses -- the one
    in its on-disk cache keys (``magic_tuple``): the created generator's own, else what it
    will take when created (``config.CPU_FEATURES``, which steadfast's 512-bit choice or
    an explicit ``NUMBA_CPU_FEATURES`` sets; "" for the host's defaults)."""
    from numba.core import config, registry
    ctx = registry.cpu_target.__dict__.get("_toplevel_target_context")
    if ctx is not None:
        try:
            return str(ctx._internal_codegen._tm_features or "")
        except AttributeError:                # pragma: no cover - numba internals moved
            pass
    return str(config.CPU_FEATURES or os.environ.get("NUMBA_CPU_FEATURES") or "")


def _vector_lanes() -> int:
    """16 states per vector where numba's code generation is explicitly 512-bit (AVX-512 F
    and ``-prefer-256-bit`` in its feature string: steadfast's choice, or such a
    ``NUMBA_CPU_FEATURES``), else 8 (``STEADFAST_VECTOR_WIDTH=256`` / ``numba``, AVX2
    hosts, numba's host defaults).

    A function of the generator's features alone, which numba's cache keys hold: the
    kernels that use these intrinsics are compiled for W lanes, and a process whose
    generator was created before steadfast set its features (a numba kernel compiled
    before ``import steadfast``) shares its cache key with a ``STEADFAST_VECTOR_WIDTH=256``
    process -- both get 8, so neither loads the other's kernels for the wrong W (they
    did, and hashed wrongly: tests/test_vector_width.py)."""
    width = os.environ.get("STEADFAST_VECTOR_WIDTH", "auto").strip().lower()
    if width in ("256", "numba"):
        return 8
    try:
        feats = _codegen_features().split(",")
    except Exception:                         # pragma: no cover - package layout
        return 8
    return 16 if "+avx512f" in feats and "-prefer-256-bit" in feats else 8


W = _vector_lanes()

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)

# Montgomery forms of the round constants, as the kernel adds them: x + (rc·R - p) for a
# canonical x lies in [-p, p), an S-box operand.
_RCF = [[int(c) * _R % P - P for c in row] for row in RC_FULL]
_RCP = [int(c) * _R % P - P for c in RC_PARTIAL]

_DIAG = ((-2, 1), (1, 1), (2, 1), (1, 2), (3, 1), (4, 1), (-1, 2), (-3, 1), (-4, 1),
         (1, 1 << 8), (1, 4), (1, 8), (1, 1 << 27), (-1, 1 << 8), (-1, 16), (-1, 1 << 27))
if tuple(V16_RATIONAL) != _DIAG:              # pragma: no cover - constants are fixed
    raise RuntimeError("kernels/poseidon2_lanes.py: the diagonal is hard-coded for V16 = "
                       + repr(_DIAG))


def _s32(c: int) -> int:
    c &= _MASK32
    return c - (1 << 32) if c >= 1 << 31 else c


class _Gen:
    """IR emitter for one vector width: canonical field ops on ``<w x i32>`` values."""

    def __init__(self, builder: ir.IRBuilder, w: int):
        self.b = builder
        self.w = w
        self.V = ir.VectorType(_I32, w)
        self.V64 = ir.VectorType(_I64, w // 2)
        self._hi = ir.Constant(ir.VectorType(_I32, w),
                               [i + 1 if i % 2 == 0 else w + i for i in range(w)])

    def c(self, x: int):
        return ir.Constant(self.V, [_s32(x)] * self.w)

    def c64(self, x: int):
        return ir.Constant(self.V64, [x] * (self.w // 2))

    # -- canonical arithmetic, values in [0, p) -------------------------------------
    def umin(self, a, b):
        return self.b.select(self.b.icmp_unsigned("<", a, b), a, b)

    def add(self, a, b):
        t = self.b.add(a, b)                  # [0, 2p) fits 32 bits unsigned
        return self.umin(t, self.b.sub(t, self.c(P)))

    def sub(self, a, b):
        t = self.b.sub(a, b)                  # (-p, p): +p where it wrapped
        return self.umin(t, self.b.add(t, self.c(P)))

    def canon(self, r):
        """(-p, p) signed -> [0, p)."""
        return self.umin(r, self.b.add(r, self.c(P)))

    def dbl(self, a):
        return self.add(a, a)

    def half(self, a):
        """a/2 mod p: (a >> 1) + (a odd ? (p+1)/2 : 0), in [0, p)."""
        b = self.b
        odd = b.and_(a, self.c(1))
        return b.add(b.lshr(a, self.c(1)), b.mul(odd, self.c((P + 1) // 2)))

    def mul_2exp_neg(self, a, k: int):
        """a·2^-k mod p in [0, p): (a >> k) - (a & (2^k-1))·(p-1)/2^k lies in (-p, p/2^k)."""
        b = self.b
        r = b.sub(b.lshr(a, self.c(k)), b.mul(b.and_(a, self.c((1 << k) - 1)),
                                              self.c((P - 1) >> k)))
        return self.canon(r)

    # -- Montgomery products (even/odd 64-bit halves) --------------------------------
    def split(self, a):
        """(even, odd) operands for vpmuldq: the odd elements shifted into the low words."""
        a64 = self.b.bitcast(a, self.V64)
        return a64, self.b.ashr(a64, self.c64(32))

    def _sx(self, x64):
        s = self.c64(32)
        return self.b.ashr(self.b.shl(x64, s), s)

    def _redc_half(self, t):
        """t (|t| < 2^31·p, 64-bit) -> t - q·p with q = lo(t)·p^-1 signed (low word 0)."""
        b = self.b
        q = b.mul(b.and_(t, self.c64(_MASK32)), self.c64(_MU))
        return b.sub(t, b.mul(self._sx(q), self.c64(P)))

    def mont(self, sa, sb):
        """Signed Montgomery product of split operands: |r| < |a·b|/2^32 + p/2."""
        b = self.b
        pe = b.mul(self._sx(sa[0]), self._sx(sb[0]))
        po = b.mul(sa[1], sb[1])
        re = self._redc_half(pe)
        ro = self._redc_half(po)
        return b.shuffle_vector(b.bitcast(re, self.V), b.bitcast(ro, self.V), self._hi)

    def to_mont(self, a):
        """Canonical a -> a·R mod p, canonical."""
        return self.canon(self.mont(self.split(a), self.split(self.c(_R2))))

    def from_mont(self, a):
        """Canonical a -> a·R^-1 mod p, canonical: -hi(q·p) with q = a·p^-1 mod 2^32."""
        b = self.b
        q = b.bitcast(b.mul(a, self.c(_MU)), self.V64)
        pe = b.mul(b.and_(q, self.c64(_MASK32)), self.c64(P))
        po = b.mul(b.lshr(q, self.c64(32)), self.c64(P))
        h = b.shuffle_vector(b.bitcast(pe, self.V), b.bitcast(po, self.V), self._hi)
        r = b.sub(self.c(P), h)               # h in [0, p): p - h, and 0 for h = 0
        return self.umin(r, b.sub(r, self.c(P)))

    def sbox(self, u):
        """u^7 for u in [-p, p): x2 < 0.969p, x3 < 0.954p, x6 < 0.927p, x7 < 0.935p in
        absolute value (|r| < |a·b|/2^32 + p/2 each time); canonical output."""
        return self.sboxes([u])[0]

    def sboxes(self, us):
        """sbox of every vector of us, emitted level by level (all x^2, then all x^3, ...):
        independent chains side by side keep both multiply ports busy (one chain after
        another leaves the out-of-order window full of waiting multiplies: 16.7 vs 12.4
        cycles an S-box vector, 12 chains, Zen 5)."""
        su = [self.split(u) for u in us]
        s2 = [self.split(self.mont(s, s)) for s in su]
        s3 = [self.split(self.mont(a, s)) for a, s in zip(s2, su)]
        s6 = [self.split(self.mont(s, s)) for s in s3]
        return [self.canon(self.mont(a, s)) for a, s in zip(s6, su)]

    def full_sboxes(self, us):
        out = []
        for i in range(0, len(us), SBOX_GROUP):
            out += self.sboxes(us[i:i + SBOX_GROUP])
        return out

    # -- linear layers ----------------------------------------------------------------
    def external(self, s):
        y = []
        for o in range(0, 16, 4):
            x0, x1, x2, x3 = s[o:o + 4]
            t01 = self.add(x0, x1)
            t23 = self.add(x2, x3)
            t0123 = self.add(t01, t23)
            t01123 = self.add(t0123, x1)
            t01233 = self.add(t0123, x3)
            y += [self.add(t01123, t01), self.add(t01123, self.dbl(x2)),
                  self.add(t01233, t23), self.add(t01233, self.dbl(x0))]
        t = [self.add(self.add(y[k], y[k + 4]), self.add(y[k + 8], y[k + 12]))
             for k in range(4)]
        return [self.add(y[i], t[i % 4]) for i in range(16)]

    def internal(self, s):
        rest = s[1:]
        while len(rest) > 1:                  # pairwise tree: 15 lanes -> 1
            nxt = [self.add(rest[i], rest[i + 1]) for i in range(0, len(rest) - 1, 2)]
            if len(rest) % 2:
                nxt.append(rest[-1])
            rest = nxt
        tot = self.add(rest[0], s[0])
        out = []
        for i, (num, den) in enumerate(_DIAG):
            x = s[i]
            mag = abs(num)
            if den == 1:
                v = {1: x, 2: self.dbl(x), 3: None, 4: None}[mag]
                if mag == 3:
                    v = self.add(self.dbl(x), x)
                elif mag == 4:
                    v = self.dbl(self.dbl(x))
            elif den == 2:
                v = self.half(x)
            else:
                v = self.mul_2exp_neg(x, den.bit_length() - 1)
            out.append(self.add(tot, v) if num > 0 else self.sub(tot, v))
        return out

    def permute(self, s):
        return self.permute_many([s])[0]

    def _splat_load(self, gv, index):
        b = self.b
        x = b.load(b.gep(gv, [ir.Constant(_I32, 0), index]))
        v = b.insert_element(ir.Constant(self.V, ir.Undefined), x, ir.Constant(_I32, 0))
        return b.shuffle_vector(v, v, ir.Constant(self.V, [0] * self.w))

    def _table(self, name, values):
        mod = self.b.module
        if name in mod.globals:
            return mod.globals[name]
        ty = ir.ArrayType(_I32, len(values))
        gv = ir.GlobalVariable(mod, ty, name=name)
        gv.initializer = ir.Constant(ty, [_s32(v) for v in values])
        gv.global_constant = True
        gv.linkage = "internal"
        return gv

    def permute_many(self, groups):
        """Permute independent groups of 16 lane vectors.  The rounds are two IR loops (the
        8 full rounds, with the 13 partial rounds a loop entered after the 4th), their
        constants read from tables: a loop body stays in the op cache, where 21 unrolled
        rounds (~11,500 instructions) would not, and compiles ~10x faster."""
        b = self.b
        n = len(groups)
        flat = lambda gs: [x for s in gs for x in s]
        unflat = lambda xs: [list(xs[16 * q:16 * q + 16]) for q in range(n)]
        rcf = self._table("poseidon2_lanes_rcf", [k for row in _RCF for k in row])
        rcp = self._table("poseidon2_lanes_rcp", _RCP)
        gs = [self.external([self.to_mont(x) for x in s]) for s in groups]
        entry = b.block
        fblk = b.append_basic_block("p2_full")
        pblk = b.append_basic_block("p2_partial")
        done = b.append_basic_block("p2_done")
        b.branch(fblk)
        # full rounds
        b.position_at_end(fblk)
        r = b.phi(_I32)
        fphis = [b.phi(self.V) for _ in range(16 * n)]
        r.add_incoming(ir.Constant(_I32, 0), entry)
        for ph, x in zip(fphis, flat(gs)):
            ph.add_incoming(x, entry)
        cur = unflat(fphis)
        base = b.mul(r, ir.Constant(_I32, 16))
        ks = [self._splat_load(rcf, b.add(base, ir.Constant(_I32, i))) for i in range(16)]
        out = []
        for s in cur:
            s = self.full_sboxes([b.add(x, k) for x, k in zip(s, ks)])
            out.append(self.external(s))
        fout = flat(out)
        r1 = b.add(r, ir.Constant(_I32, 1))
        fend = b.block
        cont = b.append_basic_block("p2_full_next")
        b.cbranch(b.icmp_unsigned("==", r1, ir.Constant(_I32, ROUNDS_F_HALF)), pblk, cont)
        b.position_at_end(cont)
        b.cbranch(b.icmp_unsigned("<", r1, ir.Constant(_I32, 2 * ROUNDS_F_HALF)), fblk, done)
        for ph, x in zip(fphis, fout):
            ph.add_incoming(x, cont)
        r.add_incoming(r1, cont)
        # partial rounds
        b.position_at_end(pblk)
        k = b.phi(_I32)
        pphis = [b.phi(self.V) for _ in range(16 * n)]
        k.add_incoming(ir.Constant(_I32, 0), fend)
        for ph, x in zip(pphis, fout):
            ph.add_incoming(x, fend)
        cur = unflat(pphis)
        kv = self._splat_load(rcp, k)
        for s in cur:
            s[0] = self.sbox(b.add(s[0], kv))
            s[:] = self.internal(s)
        pout = flat(cur)
        k1 = b.add(k, ir.Constant(_I32, 1))
        pend = b.block
        b.cbranch(b.icmp_unsigned("<", k1, ir.Constant(_I32, ROUNDS_P)), pblk, fblk)
        for ph, x in zip(pphis, pout):
            ph.add_incoming(x, pend)
        k.add_incoming(k1, pend)
        for ph, x in zip(fphis, pout):
            ph.add_incoming(x, pend)
        r.add_incoming(ir.Constant(_I32, ROUNDS_F_HALF), pend)
        # done: from the last full round
        b.position_at_end(done)
        return [[self.from_mont(x) for x in s] for s in unflat(fout)]


def _block_transpose(b: ir.IRBuilder, vecs: list, n: int) -> list:
    """n vectors of L elements (L a multiple of n), each read as L/n blocks of n: within
    every block column, transpose the n x n matrix (log2 n stages of two-source shuffles)."""
    vecs = list(vecs)
    size = vecs[0].type.count
    s = n // 2
    while s:
        for i in range(n):
            if i & s:
                continue
            lo_mask = [c if (c % n) & s == 0 else size + c - s for c in range(size)]
            hi_mask = [c + s if (c % n) & s == 0 else size + c for c in range(size)]
            a, z = vecs[i], vecs[i + s]
            vecs[i] = b.shuffle_vector(a, z, ir.Constant(ir.VectorType(_I32, size), lo_mask))
            vecs[i + s] = b.shuffle_vector(a, z, ir.Constant(ir.VectorType(_I32, size), hi_mask))
        s //= 2
    return vecs


def _concat(b, x, y):
    n = x.type.count
    return b.shuffle_vector(x, y, ir.Constant(ir.VectorType(_I32, 2 * n), list(range(2 * n))))


def _half(b, x, which: int):
    n = x.type.count // 2
    return b.shuffle_vector(x, x, ir.Constant(ir.VectorType(_I32, n),
                                              list(range(which * n, which * n + n))))


def _rows_to_lanes(b, rows: list, w: int, c: int) -> list:
    """w rows of c elements (c in {8, 16}) -> c lane vectors of w elements."""
    if w == c:
        return _block_transpose(b, rows, w)
    if w == 16:                               # c == 8: pair rows j, j+8 into one vector
        return _block_transpose(b, [_concat(b, rows[j], rows[j + 8]) for j in range(8)], 8)
    lo = _block_transpose(b, [_half(b, r, 0) for r in rows], 8)     # w == 8, c == 16
    hi = _block_transpose(b, [_half(b, r, 1) for r in rows], 8)
    return lo + hi


def _lanes_to_rows(b, lanes: list, w: int, k: int) -> list:
    """k lane vectors of w elements -> w rows of k elements (the inverse shuffle)."""
    if w == k:
        return _block_transpose(b, lanes, w)
    if w == 16:                               # k == 8
        u = _block_transpose(b, lanes, 8)
        return [_half(b, x, 0) for x in u] + [_half(b, x, 1) for x in u]
    lo = _block_transpose(b, lanes[:8], 8)   # w == 8, k == 16
    hi = _block_transpose(b, lanes[8:], 8)
    return [_concat(b, x, y) for x, y in zip(lo, hi)]


def _vec_ptr(builder, ary, index, count):
    ptr = builder.gep(ary.data, [index])
    return builder.bitcast(ptr, ir.VectorType(_I32, count).as_pointer())


def _make_intrinsics(w: int):
    @intrinsic
    def permute_lanes(typingctx, st, off):
        """Permute the ``w`` lane-major states st[off : off + 16*w] (canonical uint32)."""
        sig = types.void(st, off)

        def codegen(context, builder, signature, args):
            ary = context.make_array(signature.args[0])(context, builder, value=args[0])
            g = _Gen(builder, w)
            ptr = _vec_ptr(builder, ary, args[1], w)
            lanes = [builder.load(builder.gep(ptr, [ir.Constant(_I64, i)]), align=4)
                     for i in range(16)]
            for i, v in enumerate(g.permute(lanes)):
                builder.store(v, builder.gep(ptr, [ir.Constant(_I64, i)]), align=4)
            return context.get_dummy_value()

        return sig, codegen

    def absorb(c: int):
        @intrinsic
        def absorb_rows(typingctx, st, m, off, stride):
            """st lanes 0..c-1 <- the w rows m.flat[off + j*stride : ... + c], transposed."""
            sig = types.void(st, m, off, stride)

            def codegen(context, builder, signature, args):
                sa = context.make_array(signature.args[0])(context, builder, value=args[0])
                ma = context.make_array(signature.args[1])(context, builder, value=args[1])
                rows = []
                for j in range(w):
                    idx = builder.add(args[2], builder.mul(args[3], ir.Constant(_I64, j)))
                    rows.append(builder.load(_vec_ptr(builder, ma, idx, c), align=4))
                sp = _vec_ptr(builder, sa, ir.Constant(_I64, 0), w)
                for i, v in enumerate(_rows_to_lanes(builder, rows, w, c)):
                    builder.store(v, builder.gep(sp, [ir.Constant(_I64, i)]), align=4)
                return context.get_dummy_value()

            return sig, codegen
        return absorb_rows

    def squeeze(k: int):
        @intrinsic
        def squeeze_rows(typingctx, st, out, off, stride):
            """out.flat[off + j*stride : ... + k] <- lanes 0..k-1 of state j, j < w."""
            sig = types.void(st, out, off, stride)

            def codegen(context, builder, signature, args):
                sa = context.make_array(signature.args[0])(context, builder, value=args[0])
                oa = context.make_array(signature.args[1])(context, builder, value=args[1])
                sp = _vec_ptr(builder, sa, ir.Constant(_I64, 0), w)
                lanes = [builder.load(builder.gep(sp, [ir.Constant(_I64, i)]), align=4)
                         for i in range(k)]
                for j, r in enumerate(_lanes_to_rows(builder, lanes, w, k)):
                    idx = builder.add(args[2], builder.mul(args[3], ir.Constant(_I64, j)))
                    builder.store(r, _vec_ptr(builder, oa, idx, k), align=4)
                return context.get_dummy_value()

            return sig, codegen
        return squeeze_rows

    @intrinsic
    def permute_i64(typingctx, st, off, stride):
        """Permute the ``w`` states st[off + i*stride + j] (lane i, state j < w) of an
        int64 lane-major buffer holding canonical values (kernels/poseidon2's layout)."""
        sig = types.void(st, off, stride)

        def codegen(context, builder, signature, args):
            ary = context.make_array(signature.args[0])(context, builder, value=args[0])
            g = _Gen(builder, w)
            v64 = ir.VectorType(_I64, w)
            ptrs = []
            for i in range(16):
                idx = builder.add(args[1], builder.mul(args[2], ir.Constant(_I64, i)))
                ptrs.append(builder.bitcast(builder.gep(ary.data, [idx]), v64.as_pointer()))
            lanes = [builder.trunc(builder.load(p, align=8), g.V) for p in ptrs]
            for p, v in zip(ptrs, g.permute(lanes)):
                builder.store(builder.zext(v, v64), p, align=8)
            return context.get_dummy_value()

        return sig, codegen

    return permute_lanes, absorb(8), absorb(16), squeeze(8), squeeze(16), permute_i64


(_permute_lanes, _absorb8, _absorb16, _squeeze8, _squeeze16,
 _permute_i64) = _make_intrinsics(W)


@njit(nogil=True)
def permute_block_i64(st, block):
    """kernels/poseidon2._permute_block's contract in 32-bit lanes: the ``block`` states of
    the int64 lane-major buffer st (lane i at st[i*block : (i+1)*block]), canonical in and
    out; ``block`` a multiple of W."""
    for g in range(block // W):
        _permute_i64(st, g * W, block)


@njit(cache=True, nogil=True)
def _sponge_lanes_kernel(m, m2, out, rate, g0, g1):
    """Groups g0..g1-1 (W rows each) of the overwrite-mode sponge over the rows of m
    (uint32[n, w] canonical, C-contiguous) into out (uint32[n, k], C-contiguous); see
    kernels/poseidon2._sponge.  Whole groups and whole rate blocks move by vector
    transposes, a short last group or block element by element.

    m2 of width 0: unused.  m2 uint32[n, 8] (m uint32[n, 8], rate 16): row j's state is
    m[j] || m2[j] -- the compression of two digest arrays without a concatenated copy
    (a mixed tree's fold of a shorter matrix's digests, kernels/mmcs.py).  out may be m
    itself: a group's rows are read before they are written."""
    n, w = m.shape
    w2 = m2.shape[1]
    k = out.shape[1]
    st = np.empty(16 * W, np.uint32)
    for g in range(g0, g1):
        lo = g * W
        nb = min(W, n - lo)
        if w2 > 0:
            if nb == W:
                _absorb8(st, m2, lo * 8, 8)
                for i in range(8 * W):
                    st[8 * W + i] = st[i]
                _absorb8(st, m, lo * 8, 8)
            else:
                st[:] = 0
                for j in range(nb):
                    for i in range(8):
                        st[i * W + j] = m[lo + j, i]
                        st[(8 + i) * W + j] = m2[lo + j, i]
            _permute_lanes(st, 0)
        else:
            st[:] = 0
            for b0 in range(0, w, rate):
                c = min(rate, w - b0)
                if nb == W and c == 16:
                    _absorb16(st, m, lo * w + b0, w)
                elif nb == W and c == 8:
                    _absorb8(st, m, lo * w + b0, w)
                else:
                    for j in range(nb):
                        for i in range(c):
                            st[i * W + j] = m[lo + j, b0 + i]
                _permute_lanes(st, 0)
        if nb == W and k == 16:
            _squeeze16(st, out, lo * 16, 16)
        elif nb == W and k == 8:
            _squeeze8(st, out, lo * 8, 8)
        else:
            for j in range(nb):
                for i in range(k):
                    out[lo + j, i] = st[i * W + j]


@njit(cache=True, nogil=True)
def _grind_kernel(base, lane, mask, slot, slots, best, found):
    """Proof-of-work search, worker ``slot`` of ``slots``: the chunks c = slot, slot +
    slots, ... of W nonces [c W, c W + W) in increasing order, each state ``base`` with
    the nonce at ``lane``, permuted; the first nonce whose output element 0 has no bit of
    ``mask`` set goes to found[slot] (else -1), its chunk to best[0] if lower.  A worker
    stops at a chunk above best[0] -- a chunk where some worker found one, so every nonce
    below the smallest found has been tried (best[0] read without a lock: a stale value
    only costs work)."""
    st = np.empty(16 * W, np.uint32)
    found[slot] = -1
    c = slot
    while c * W < P:
        if c > best[0]:
            return
        lo = c * W
        for i in range(16):
            v = base[i]
            for j in range(W):
                st[i * W + j] = v
        for j in range(W):
            st[lane * W + j] = min(lo + j, P - 1)
        _permute_lanes(st, 0)
        for j in range(W):
            if lo + j < P and (st[j] & mask) == 0:
                found[slot] = lo + j
                if c < best[0]:
                    best[0] = c
                return
        c += slots


#: the kernel's m2 when there is none (read-only, as every caller's m: one signature)
NO_M2 = np.empty((0, 0), np.uint32)
NO_M2.setflags(write=False)


__all__ = ["W", "sponge_lanes"]


def sponge_lanes(m: np.ndarray, out: np.ndarray, rate: int, g0: int, g1: int,
                 m2: np.ndarray | None = None) -> None:
    """Groups g0..g1-1 of W states (see _sponge_lanes_kernel); releases the GIL."""
    _sponge_lanes_kernel(m, NO_M2 if m2 is None else m2, out, rate, g0, g1)


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("poseidon2_constants.py", "field.py"))
