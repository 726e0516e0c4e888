"""Compile expression trees into a straight-line program and evaluate it with numpy.

A :class:`Program` is the backend-neutral form of a set of expressions (the AIR's
constraints, or the values/multiplicities of its interactions):

* ``ops``: a list of instructions in evaluation order, each ``(op, a, b, payload)``:
  leaves carry their ``payload`` (``("main", j, next)`` etc., see :mod:`air.expr`) and
  interior nodes refer to earlier instruction indices ``a`` / ``b`` (``b = -1`` for
  ``neg``).  Structurally equal sub-expressions are shared (hash-consing), so an
  expression written with repeated sub-terms is evaluated once.
* ``is_ef[i]``: whether instruction ``i`` produces an extension-field value.
* ``outputs``: the instruction index of every root expression, in order.
* ``last_use[i]``: the last instruction reading ``i`` (values are freed after it).

That list is all a code generator needs (a numba or CUDA kernel is one statement per
instruction); :func:`evaluate` interprets it with whole-array numpy operations, so one
instruction processes every point of the domain at once.

Values during evaluation: base-field values are uint64 arrays of shape ``(M,)`` (or
Python ints for constants and public values); EF values are ``(4, M)`` arrays, or
``(4, 1)`` for challenges -- numpy broadcasting does the rest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from . import field as F
from .expr import Expr, walk


@dataclass(frozen=True)
class Program:
    ops: tuple            # ((op, a, b, payload), ...)
    is_ef: tuple          # (bool, ...)
    outputs: tuple        # (index, ...)
    last_use: tuple       # (index, ...)

    def text(self) -> str:
        """One line per instruction; deterministic (used by the AIR fingerprint).  Made
        once per program object (a block's re-tagged AIRs share their interaction
        program), and a re-tagged program (:meth:`with_payloads`) copies its base's lines
        but the changed ones."""
        got = self.__dict__.get("_text")
        if got is None:
            got = "\n".join([*self._lines(), "out:" + ",".join(map(str, self.outputs))])
            object.__setattr__(self, "_text", got)
        return got

    def _lines(self) -> list:
        got = self.__dict__.get("_line_cache")
        if got is None:
            got = [f"{i}:{op}:{a}:{b}:{payload!r}" for i, (op, a, b, payload) in enumerate(self.ops)]
            object.__setattr__(self, "_line_cache", got)
        return got

    def with_payloads(self, kind: str, mapping: dict) -> "Program":
        """This program with the payload of every ``kind`` leaf found in ``mapping``
        replaced by its value (the same instructions, order and sharing otherwise): the
        text is this one's but the changed lines."""
        idx = self.__dict__.get("_leaf_idx", {}).get(kind)
        if idx is None:
            idx = tuple(i for i, (op, _, _, _) in enumerate(self.ops) if op == kind)
            object.__setattr__(self, "_leaf_idx", {**self.__dict__.get("_leaf_idx", {}),
                                                   kind: idx})
        ops = list(self.ops)
        lines = list(self._lines())
        for i in idx:
            op, a, b, payload = ops[i]
            new = mapping.get(payload, payload)
            if new != payload:
                ops[i] = (op, a, b, new)
                lines[i] = f"{i}:{op}:{a}:{b}:{new!r}"
        out = Program(tuple(ops), self.is_ef, self.outputs, self.last_use)
        object.__setattr__(out, "_line_cache", lines)
        return out

    def leaves(self, kind: str) -> set:
        """Payloads of the leaves of a kind, e.g. ``leaves("main")`` -> {(j, next), ...}."""
        return {payload for op, _, _, payload in self.ops if op == kind}


def compile_program(roots: Sequence[Expr]) -> Program:
    """The straight-line program of ``roots``: every distinct node (by identity) in
    depth-first post-order (children left to right, then the node; roots in order), each
    interned by its structural key ``(op, a, b, payload)`` (``add``/``mul`` with their
    operand indices in ascending order), so structurally equal sub-expressions share one
    instruction.

    The same result as :func:`compile_program_reference` (the plain transcription over
    :func:`air.expr.walk`), computed without a generator: one explicit stack holds the path
    from the root to the node being finished, and leaves are interned where they are met
    (AIR construction compiles ~10^4 nodes per table on every verifier start).  Nodes are
    dict keys by identity (:class:`Expr` keeps object's hash and equality)."""
    roots = list(roots)
    index: dict = {}                    # node -> instruction index
    interned: dict[tuple, int] = {}     # structural key -> instruction index
    ops: list = []
    is_ef: list = []
    get = index.get
    iget = interned.get

    def intern(key, node) -> int:
        slot = iget(key)
        if slot is None:
            slot = len(ops)
            interned[key] = slot
            ops.append(key)
            is_ef.append(node.is_ef)
        index[node] = slot
        return slot

    for root in roots:
        if root in index:
            continue
        if not root.args:
            intern((root.op, -1, -1, root.payload), root)
            continue
        stack = [root]                  # interior nodes only
        while stack:
            node = stack[-1]
            args = node.args
            x = args[0]
            a = get(x)
            if a is None:
                if x.args:
                    stack.append(x)     # finish the left child first
                    continue
                a = intern((x.op, -1, -1, x.payload), x)
            if len(args) > 1:
                y = args[1]
                b = get(y)
                if b is None:
                    if y.args:
                        stack.append(y)
                        continue
                    b = intern((y.op, -1, -1, y.payload), y)
                op = node.op
                if b < a and (op == "add" or op == "mul"):
                    a, b = b, a         # commutative: canonical operand order
                key = (op, a, b, None)
            else:
                key = (node.op, a, -1, None)
            stack.pop()
            slot = iget(key)
            if slot is None:
                slot = len(ops)
                interned[key] = slot
                ops.append(key)
                is_ef.append(node.is_ef)
            index[node] = slot
    outputs = tuple(index[r] for r in roots)
    return Program(tuple(ops), tuple(is_ef), outputs, _last_use(ops, outputs))


def _last_use(ops: list, outputs: tuple) -> tuple:
    """The last instruction reading each value (outputs: ``len(ops)``, they live to the end)."""
    last_use = list(range(len(ops)))
    for i, (op, a, b, _) in enumerate(ops):
        if a >= 0:
            last_use[a] = i
        if b >= 0:
            last_use[b] = i
    for o in outputs:
        last_use[o] = len(ops)            # outputs live to the end
    return tuple(last_use)


def compile_program_reference(roots: Sequence[Expr]) -> Program:
    """The definition of :func:`compile_program`, written plainly over :func:`walk` (kept as
    the reference the fast version is tested against, tests/test_air_build.py)."""
    roots = list(roots)
    index: dict[int, int] = {}          # id(node) -> instruction index
    interned: dict[tuple, int] = {}     # structural key -> instruction index
    ops: list = []
    is_ef: list = []
    for node in walk(roots):
        if node.args:
            a = index[id(node.args[0])]
            b = index[id(node.args[1])] if len(node.args) > 1 else -1
            if node.op in ("add", "mul") and b < a:
                a, b = b, a               # commutative: canonical operand order
            key = (node.op, a, b, None)
        else:
            key = (node.op, -1, -1, node.payload)
        slot = interned.get(key)
        if slot is None:
            slot = len(ops)
            interned[key] = slot
            ops.append(key)
            is_ef.append(node.is_ef)
        index[id(node)] = slot
    outputs = tuple(index[id(r)] for r in roots)
    last_use = list(range(len(ops)))
    for i, (op, a, b, _) in enumerate(ops):
        if a >= 0:
            last_use[a] = i
        if b >= 0:
            last_use[b] = i
    for o in outputs:
        last_use[o] = len(ops)            # outputs live to the end
    return Program(tuple(ops), tuple(is_ef), outputs, tuple(last_use))


# ------------------------------------------------------------------ numpy interpreter

def _add(x, y, xe, ye):
    if xe and ye:
        return F.ef_add(x, y)
    if xe:
        return F.ef_add_base(x, y)
    if ye:
        return F.ef_add_base(y, x)
    return F.add(x, y)


def _sub(x, y, xe, ye):
    if xe and ye:
        return F.ef_sub(x, y)
    if xe:
        return F.ef_add_base(x, F.neg(y))
    if ye:
        return F.ef_add_base(F.ef_neg(y), x)
    return F.sub(x, y)


def _mul(x, y, xe, ye):
    if xe and ye:
        return F.ef_mul(x, y)
    if xe:
        return F.ef_mul_base(x, y)
    if ye:
        return F.ef_mul_base(y, x)
    return F.mul(x, y)


def ef_flags(program: Program, ef_kinds) -> list:
    """Which instructions produce EF values when the leaves of ``ef_kinds`` are EF."""
    flags: list = []
    for op, a, b, payload in program.ops:
        if a < 0:
            flags.append(op in ef_kinds)
        else:
            flags.append(flags[a] or (b >= 0 and flags[b]))
    return flags


#: leaf kinds that are EF-valued at the out-of-domain point (trace columns are opened
#: there as EF values too)
POINT_EF_KINDS = ("main", "prep", "aux", "chal", "term")


def evaluate(program: Program, leaf: Callable[[str, object], object], ef_kinds=None) -> list:
    """Run ``program``; ``leaf(op, payload)`` supplies every leaf value (base values as
    uint64 arrays / ints, EF values as ``(4, ...)`` arrays).  ``ef_kinds``: the leaf kinds
    whose values are EF (default: aux, challenges, terminal; use :data:`POINT_EF_KINDS`
    at the out-of-domain point).  Returns the output values in order (constants come back
    as 0-d arrays)."""
    vals: list = [None] * len(program.ops)
    is_ef = program.is_ef if ef_kinds is None else ef_flags(program, ef_kinds)
    last = program.last_use
    for i, (op, a, b, payload) in enumerate(program.ops):
        if a < 0:
            if op == "const":
                v = np.uint64(payload)
            else:
                v = leaf(op, payload)
        elif op == "add":
            v = _add(vals[a], vals[b], is_ef[a], is_ef[b])
        elif op == "sub":
            v = _sub(vals[a], vals[b], is_ef[a], is_ef[b])
        elif op == "mul":
            v = _mul(vals[a], vals[b], is_ef[a], is_ef[b])
        elif op == "neg":
            v = F.ef_neg(vals[a]) if is_ef[a] else F.neg(vals[a])
        else:  # pragma: no cover - compile_program only emits the ops above
            raise ValueError(f"unknown op {op!r}")
        vals[i] = v
        # free operands whose last reader is this instruction
        if a >= 0 and last[a] == i:
            vals[a] = None
        if b >= 0 and last[b] == i:
            vals[b] = None
    return [vals[o] for o in program.outputs]


# ------------------------------------------------------------------ scalar interpreter

_P = F.P


def _padd(x, y, xe, ye):
    if xe and ye:
        return [(a + b) % _P for a, b in zip(x, y)]
    if xe:
        return [(x[0] + y) % _P, x[1], x[2], x[3]]
    if ye:
        return [(y[0] + x) % _P, y[1], y[2], y[3]]
    return (x + y) % _P


def _pneg(x, xe):
    return [(-a) % _P for a in x] if xe else (-x) % _P


def _pmul(x, y, xe, ye):
    if xe and ye:
        return F._ef_mul_scalar(x, y)
    if xe:
        return [a * y % _P for a in x]
    if ye:
        return [x * b % _P for b in y]
    return x * y % _P


def evaluate_point(program: Program, leaf: Callable[[str, object], object],
                   ef_kinds=POINT_EF_KINDS) -> list:
    """:func:`evaluate` at a single point, on Python ints: the same results (EF values
    as ``(4, 1)`` uint64 arrays, base values as 0-d arrays), without numpy's per-call
    overhead on thousands of scalar operations (the verifier's and XCHECK's composition
    check at the out-of-domain point)."""
    is_ef = ef_flags(program, ef_kinds)
    vals: list = [None] * len(program.ops)
    last = program.last_use
    for i, (op, a, b, payload) in enumerate(program.ops):
        if a < 0:
            if op == "const":
                v = int(payload) % _P
            else:
                raw = np.asarray(leaf(op, payload), dtype=np.uint64).reshape(-1)
                v = [int(c) for c in raw] if is_ef[i] else int(raw[0])
        elif op == "add":
            v = _padd(vals[a], vals[b], is_ef[a], is_ef[b])
        elif op == "sub":
            v = _padd(vals[a], _pneg(vals[b], is_ef[b]), is_ef[a], is_ef[b])
        elif op == "mul":
            v = _pmul(vals[a], vals[b], is_ef[a], is_ef[b])
        elif op == "neg":
            v = _pneg(vals[a], is_ef[a])
        else:  # pragma: no cover - compile_program only emits the ops above
            raise ValueError(f"unknown op {op!r}")
        vals[i] = v
        if a >= 0 and last[a] == i:
            vals[a] = None
        if b >= 0 and last[b] == i:
            vals[b] = None
    out = []
    for o in program.outputs:
        v = vals[o]
        out.append(np.array(v, dtype=np.uint64).reshape(4, 1) if is_ef[o]
                   else np.asarray(v, dtype=np.uint64))
    return out
