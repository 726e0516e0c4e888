"""The constraint interpreter's instructions in 32-bit lanes: explicit LLVM IR.

kernels/constraint_host.py runs an AIR's constraint program one instruction at a time
over a block of points.  numba compiled each instruction's loop into 64-bit lanes (8 to
a 512-bit register: every uint32 operand widened, every product reduced by a uint64
Montgomery step); here one call does ``LANES`` consecutive points of one instruction as
``<LANES x i32>`` vectors (16 with 512-bit code generation, 8 with 256-bit), with
kernels/poseidon2_lanes.py's field operations (:class:`_Gen`): canonical additions as
``add; sub p; unsigned min``, Montgomery products on the even/odd 64-bit halves.
The RV32 tables' quotients: 0.39-0.41 -> 0.21-0.23 s for a 2^18-cycle block's 58
tables, the kernels' cold compile 9-11 -> 5-6 s (tests/test_constraint_lanes.py against
air.field).

The extension-field product (``MUL_EE`` and the extension-valued ``FOLD``) sums its
products before reducing: with both operands centred into ``[-(p-1)/2, (p-1)/2]`` every
product is at most ``((p-1)/2)^2`` in absolute value, so each output coefficient's four
products ``x0·y3 + x1·y2 + x2·y1 + x3·y0`` (the ``W``-terms take ``W·y_j`` as their
operand, one product earlier) sum to at most ``(p-1)^2 < 2^31·p``, inside the signed
Montgomery step's bound (``_Gen._redc_half``: |t| < 2^31·p gives |r| < p): 4
reductions an extension product instead of the 64-bit loops' 9.

Same values, bit for bit, as the 64-bit loops had: every slot holds a canonical
Montgomery-form value, and the canonical representative of a field value is unique
(tests/test_constraint_lanes.py checks every opcode, the FOLD and the loads against
air.field, the centred product at its edge values; tests/test_constraint_host.py whole
quotients and LogUp h columns against the numpy interpreter).  The last vector of an
instruction may run past the block's points into its scratch (``_run_block`` allocates
whole vectors); the loads stop at the block's end.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .field import EXT_W, P
from .poseidon2_lanes import W as LANES
from .poseidon2_lanes import _Gen, _vec_ptr

__all__ = ["LANES", "ef_mul", "add_bb", "sub_bb", "mul_bb", "add_ee", "sub_ee", "mul_ee",
           "add_eb", "sub_eb", "mul_eb", "sub_be", "neg_b", "neg_e", "load_mont",
           "fold_base", "fold_ext", "ef_mul_into", "sub_scaled", "add_scaled"]

_I32 = ir.IntType(32)
_HALF = (P - 1) // 2
_WM = (EXT_W << 32) % P                    # W in Montgomery form: mont(y, _WM) = W y


def _center(g: _Gen, a):
    """Canonical a in [0, p) -> the same residue in [-(p-1)/2, (p-1)/2] (signed i32)."""
    b = g.b
    return b.select(b.icmp_unsigned(">", a, g.c(_HALF)), b.sub(a, g.c(P)), a)


def _prod(g: _Gen, sa, sb):
    """The 64-bit even and odd products of two split signed vectors."""
    b = g.b
    return b.mul(g._sx(sa[0]), g._sx(sb[0])), b.mul(sa[1], sb[1])


def _sum_redc(g: _Gen, prods):
    """sum of (even, odd) 64-bit products -> canonical Montgomery reduction."""
    b = g.b
    e, o = prods[0]
    for pe, po in prods[1:]:
        e = b.add(e, pe)
        o = b.add(o, po)
    re = g._redc_half(e)
    ro = g._redc_half(o)
    return g.canon(b.shuffle_vector(b.bitcast(re, g.V), b.bitcast(ro, g.V), g._hi))


def _mul(g: _Gen, a, b):
    return g.canon(g.mont(g.split(a), g.split(b)))


def ef_mul(g: _Gen, x, y):
    """(x0..x3) * (y0..y3) in F_p[X]/(X^4 - W), canonical Montgomery-form vectors."""
    yw = [None] + [_mul(g, v, g.c(_WM)) for v in y[1:]]          # W y1, W y2, W y3
    sx = [g.split(_center(g, v)) for v in x]
    sy = [g.split(_center(g, v)) for v in y]
    sw = [None] + [g.split(_center(g, v)) for v in yw[1:]]
    P_ = lambda i, s: _prod(g, sx[i], s)                         # noqa: E731
    c0 = _sum_redc(g, [P_(0, sy[0]), P_(1, sw[3]), P_(2, sw[2]), P_(3, sw[1])])
    c1 = _sum_redc(g, [P_(0, sy[1]), P_(1, sy[0]), P_(2, sw[3]), P_(3, sw[2])])
    c2 = _sum_redc(g, [P_(0, sy[2]), P_(1, sy[1]), P_(2, sy[0]), P_(3, sw[3])])
    c3 = _sum_redc(g, [P_(0, sy[3]), P_(1, sy[2]), P_(2, sy[1]), P_(3, sy[0])])
    return [c0, c1, c2, c3]


def _ptr(builder, ary, index):
    return _vec_ptr(builder, ary, index, LANES)


def _off(builder, base, c, cs):
    """base + c * cs (int64 IR values; c a Python int)."""
    if c == 0:
        return base
    return builder.add(base, builder.mul(cs, ir.Constant(cs.type, c)))


def _splat(builder, g: _Gen, scalar):
    v = builder.insert_element(ir.Constant(g.V, ir.Undefined), scalar, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, v, ir.Constant(g.V, [0] * LANES))


def _make_bin(kind: str):
    @intrinsic
    def op(typingctx, V, ia, ib, id_):
        """One vector of a base-field instruction: V[id:] = V[ia:] (op) V[ib:]."""
        sig = types.void(V, ia, ib, id_)

        def codegen(context, builder, signature, args):
            va = context.make_array(signature.args[0])(context, builder, value=args[0])
            g = _Gen(builder, LANES)
            a = builder.load(_ptr(builder, va, args[1]), align=4)
            b = builder.load(_ptr(builder, va, args[2]), align=4)
            r = {"add": g.add, "sub": g.sub, "mul": lambda x, y: _mul(g, x, y)}[kind](a, b)
            builder.store(r, _ptr(builder, va, args[3]), align=4)
            return context.get_dummy_value()

        return sig, codegen
    return op


def _make_ef(kind: str):
    @intrinsic
    def op(typingctx, V, ia, ib, id_, cs):
        """One vector of an extension-field instruction (components cs apart)."""
        sig = types.void(V, ia, ib, id_, cs)

        def codegen(context, builder, signature, args):
            va = context.make_array(signature.args[0])(context, builder, value=args[0])
            g = _Gen(builder, LANES)
            ia, ib, id_, cs = args[1:]
            x = [builder.load(_ptr(builder, va, _off(builder, ia, c, cs)), align=4)
                 for c in range(4)]
            y = [builder.load(_ptr(builder, va, _off(builder, ib, c, cs)), align=4)
                 for c in range(4)]
            if kind == "mul":
                r = ef_mul(g, x, y)
            else:
                f = g.add if kind == "add" else g.sub
                r = [f(u, v) for u, v in zip(x, y)]
            for c in range(4):
                builder.store(r[c], _ptr(builder, va, _off(builder, id_, c, cs)), align=4)
            return context.get_dummy_value()

        return sig, codegen
    return op


def _make_mixed(kind: str):
    @intrinsic
    def op(typingctx, V, ia, ib, id_, cs):
        """One vector of an EF (op) base instruction (``mul``, ``add``, ``sub``: EF a,
        base b) or base - EF (``rsub``: base a, EF b); every operand is loaded before
        any component is stored, so d may be a's or b's slot."""
        sig = types.void(V, ia, ib, id_, cs)

        def codegen(context, builder, signature, args):
            va = context.make_array(signature.args[0])(context, builder, value=args[0])
            g = _Gen(builder, LANES)
            ia, ib, id_, cs = args[1:]
            if kind == "rsub":
                a = builder.load(_ptr(builder, va, ia), align=4)
                y = [builder.load(_ptr(builder, va, _off(builder, ib, c, cs)), align=4)
                     for c in range(4)]
                zero = g.c(0)
                r = [g.sub(a, y[0])] + [g.sub(zero, v) for v in y[1:]]
            else:
                x = [builder.load(_ptr(builder, va, _off(builder, ia, c, cs)), align=4)
                     for c in range(4)]
                b = builder.load(_ptr(builder, va, ib), align=4)
                if kind == "mul":
                    sb = g.split(b)
                    r = [g.canon(g.mont(g.split(v), sb)) for v in x]
                else:
                    r = [(g.add if kind == "add" else g.sub)(x[0], b)] + x[1:]
            for c in range(4):
                builder.store(r[c], _ptr(builder, va, _off(builder, id_, c, cs)), align=4)
            return context.get_dummy_value()

        return sig, codegen
    return op


@intrinsic
def neg_b(typingctx, V, ia, id_):
    """One vector of V[id:] = -V[ia:]."""
    sig = types.void(V, ia, id_)

    def codegen(context, builder, signature, args):
        va = context.make_array(signature.args[0])(context, builder, value=args[0])
        g = _Gen(builder, LANES)
        a = builder.load(_ptr(builder, va, args[1]), align=4)
        builder.store(g.sub(g.c(0), a), _ptr(builder, va, args[2]), align=4)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def neg_e(typingctx, V, ia, id_, cs):
    """One vector of the EF negation (components cs apart)."""
    sig = types.void(V, ia, id_, cs)

    def codegen(context, builder, signature, args):
        va = context.make_array(signature.args[0])(context, builder, value=args[0])
        g = _Gen(builder, LANES)
        ia, id_, cs = args[1:]
        x = [builder.load(_ptr(builder, va, _off(builder, ia, c, cs)), align=4)
             for c in range(4)]
        for c in range(4):
            builder.store(g.sub(g.c(0), x[c]), _ptr(builder, va, _off(builder, id_, c, cs)),
                          align=4)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def load_mont(typingctx, src, isrc, V, id_):
    """One vector of a leaf load: V[id:] = to_mont(src.flat[isrc:]) (canonical in)."""
    sig = types.void(src, isrc, V, id_)

    def codegen(context, builder, signature, args):
        sa = context.make_array(signature.args[0])(context, builder, value=args[0])
        va = context.make_array(signature.args[2])(context, builder, value=args[2])
        g = _Gen(builder, LANES)
        x = builder.load(_ptr(builder, sa, args[1]), align=4)
        builder.store(g.to_mont(x), _ptr(builder, va, args[3]), align=4)
        return context.get_dummy_value()

    return sig, codegen


def _make_fold(ext: bool):
    @intrinsic
    def fold(typingctx, G, ig, V, is_, cs, a0, a1, a2, a3):
        """One vector of a FOLD: G[ig:] (4 components cs apart) += a * V[is_:], a the EF
        constant (a0..a3, Montgomery form), V's value EF (``ext``) or base."""
        sig = types.void(G, ig, V, is_, cs, a0, a1, a2, a3)

        def codegen(context, builder, signature, args):
            ga = context.make_array(signature.args[0])(context, builder, value=args[0])
            va = context.make_array(signature.args[2])(context, builder, value=args[2])
            g = _Gen(builder, LANES)
            ig, is_, cs = args[1], args[3], args[4]
            av = [_splat(builder, g, builder.trunc(s, _I32)
                         if s.type != _I32 else s) for s in args[5:9]]
            if ext:
                x = [builder.load(_ptr(builder, va, _off(builder, is_, c, cs)), align=4)
                     for c in range(4)]
                r = ef_mul(g, x, av)
            else:
                sx = g.split(builder.load(_ptr(builder, va, is_), align=4))
                r = [g.canon(g.mont(sx, g.split(v))) for v in av]
            for c in range(4):
                p = _ptr(builder, ga, _off(builder, ig, c, cs))
                builder.store(g.add(builder.load(p, align=4), r[c]), p, align=4)
            return context.get_dummy_value()

        return sig, codegen
    return fold


add_bb, sub_bb, mul_bb = _make_bin("add"), _make_bin("sub"), _make_bin("mul")
add_ee, sub_ee, mul_ee = _make_ef("add"), _make_ef("sub"), _make_ef("mul")
add_eb, sub_eb, mul_eb, sub_be = (_make_mixed("add"), _make_mixed("sub"),
                                  _make_mixed("mul"), _make_mixed("rsub"))
fold_base, fold_ext = _make_fold(False), _make_fold(True)


# ----------------------------------------------------------------------------- LogUp h
# kernels/logup_block.py's row loops: one vector of rows of an EF array (4 components
# cs apart, any array layout numba hands over: a flat index into its data)

@intrinsic
def ef_mul_into(typingctx, X, ix, csx, Y, iy, csy):
    """X[ix + c csx ..] *= Y[iy + c csy ..] (EF, Montgomery form), one vector of rows."""
    sig = types.void(X, ix, csx, Y, iy, csy)

    def codegen(context, builder, signature, args):
        xa = context.make_array(signature.args[0])(context, builder, value=args[0])
        ya = context.make_array(signature.args[3])(context, builder, value=args[3])
        g = _Gen(builder, LANES)
        ix, csx, iy, csy = args[1], args[2], args[4], args[5]
        px = [_ptr(builder, xa, _off(builder, ix, c, csx)) for c in range(4)]
        x = [builder.load(p, align=4) for p in px]
        y = [builder.load(_ptr(builder, ya, _off(builder, iy, c, csy)), align=4)
             for c in range(4)]
        for p, r in zip(px, ef_mul(g, x, y)):
            builder.store(r, p, align=4)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def sub_scaled(typingctx, D, id_, cs, O, io, b0, b1, b2, b3):
    """D[id + c cs ..] -= mont(O[io ..], b_c): one value's term of a denominator (v
    canonical, b_c = beta^(j+1)_c R^2: v beta^(j+1) in Montgomery form)."""
    sig = types.void(D, id_, cs, O, io, b0, b1, b2, b3)

    def codegen(context, builder, signature, args):
        da = context.make_array(signature.args[0])(context, builder, value=args[0])
        oa = context.make_array(signature.args[3])(context, builder, value=args[3])
        g = _Gen(builder, LANES)
        id_, cs = args[1], args[2]
        sv = g.split(builder.load(_ptr(builder, oa, args[4]), align=4))
        for c in range(4):
            p = _ptr(builder, da, _off(builder, id_, c, cs))
            r = g.canon(g.mont(sv, g.split(_splat(builder, g, args[5 + c]))))
            builder.store(g.sub(builder.load(p, align=4), r), p, align=4)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def add_scaled(typingctx, H, ih, csh, X, ix, csx, O, io, neg):
    """H[ih + c csh ..] += mont(X[ix + c csx ..], +-O[io ..]): a fraction m / d into its
    batch's h column (X = 1/d in Montgomery form, m canonical, negated when ``neg``)."""
    sig = types.void(H, ih, csh, X, ix, csx, O, io, neg)

    def codegen(context, builder, signature, args):
        ha = context.make_array(signature.args[0])(context, builder, value=args[0])
        xa = context.make_array(signature.args[3])(context, builder, value=args[3])
        oa = context.make_array(signature.args[6])(context, builder, value=args[6])
        g = _Gen(builder, LANES)
        ih, csh, ix, csx = args[1], args[2], args[4], args[5]
        m = builder.load(_ptr(builder, oa, args[7]), align=4)
        isneg = builder.icmp_signed("!=", args[8], ir.Constant(args[8].type, 0))
        m = builder.select(isneg, g.sub(g.c(0), m), m)
        sm = g.split(m)
        for c in range(4):
            x = builder.load(_ptr(builder, xa, _off(builder, ix, c, csx)), align=4)
            p = _ptr(builder, ha, _off(builder, ih, c, csh))
            builder.store(g.add(builder.load(p, align=4), g.canon(g.mont(g.split(x), sm))),
                          p, align=4)
        return context.get_dummy_value()

    return sig, codegen
