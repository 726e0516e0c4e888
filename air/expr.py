"""Symbolic expressions over trace cells, public values and challenges.

An :class:`Expr` is an immutable tree.  Leaves:

==========  ===========================================  =========  =======
op          payload                                      field      degree
==========  ===========================================  =========  =======
``const``   canonical int in [0, p)                      base       0
``main``    (column index, next_row: bool)               base       1
``prep``    (column index, next_row: bool)               base       1
``aux``     (column index, next_row: bool) -- LogUp      EF         1
``pv``      public-value index                           base       0
``chal``    challenge name (``logup_beta``/``gamma``)    EF         0
``term``    this table's LogUp sum / n (the terminal U)  EF         0
==========  ===========================================  =========  =======

Interior nodes: ``add``, ``sub``, ``mul`` (two children) and ``neg`` (one).  Python ints
are coerced to constants (reduced mod p, so ``-1`` is ``p - 1``); ``e ** k`` expands to
repeated multiplication.  ``x.next`` on a column gives the same column on the next row
(cyclically: the last row's next row is row 0, which only transition constraints may
read meaningfully).

Degrees count trace columns (main, preprocessed, aux) as 1, constants / public values /
challenges as 0; ``mul`` adds, ``add``/``sub`` take the maximum (no cancellation analysis).
"""
from __future__ import annotations

from .field import P

_LEAVES = ("const", "main", "prep", "aux", "pv", "chal", "term")
_EF_LEAVES = ("aux", "chal", "term")
_COLUMNS = ("main", "prep", "aux")
# leaf op -> (degree, is_ef, is_column): the per-leaf bookkeeping, looked up once
_LEAF_INFO = {op: (1 if op in _COLUMNS else 0, op in _EF_LEAVES, op in _COLUMNS)
              for op in _LEAVES}


class Expr:
    """A node of an AIR expression tree; build them with the operators."""

    __slots__ = ("op", "args", "payload", "degree", "is_ef", "uses_next", "name", "__weakref__")

    def __init__(self, op: str, args: tuple = (), payload=None, name: str | None = None):
        # The bookkeeping (degree, is_ef, uses_next) is read off the children's, once per
        # node: AIR construction makes tens of thousands of nodes (POSEIDON2 with k slots),
        # so the binary case avoids generator expressions.
        self.op = op
        self.args = args
        self.payload = payload
        self.name = name
        info = _LEAF_INFO.get(op)
        if info is not None:
            self.degree = info[0]
            self.is_ef = info[1]
            self.uses_next = info[2] and bool(payload[1])
        elif len(args) == 2:
            x, y = args
            dx, dy = x.degree, y.degree
            if op == "mul":
                self.degree = dx + dy
            else:
                self.degree = dx if dx >= dy else dy
            self.is_ef = x.is_ef or y.is_ef
            self.uses_next = x.uses_next or y.uses_next
        else:
            if op == "mul":
                self.degree = args[0].degree + args[1].degree
            else:
                self.degree = max(a.degree for a in args)
            self.is_ef = any(a.is_ef for a in args)
            self.uses_next = any(a.uses_next for a in args)

    # -- construction helpers
    def __add__(self, other):
        return Expr("add", (self, lift(other)))

    def __radd__(self, other):
        return Expr("add", (lift(other), self))

    def __sub__(self, other):
        return Expr("sub", (self, lift(other)))

    def __rsub__(self, other):
        return Expr("sub", (lift(other), self))

    def __mul__(self, other):
        return Expr("mul", (self, lift(other)))

    def __rmul__(self, other):
        return Expr("mul", (lift(other), self))

    def __neg__(self):
        return Expr("neg", (self,))

    def __pow__(self, k: int):
        if not isinstance(k, int) or k < 0:
            raise ValueError(f"exponent must be a non-negative int, got {k!r}")
        if k == 0:
            return const(1)
        # square-and-multiply keeps the tree shallow; the compiler shares common nodes
        result = None
        base = self
        while k:
            if k & 1:
                result = base if result is None else result * base
            k >>= 1
            if k:
                base = base * base
        return result

    def __bool__(self):
        raise TypeError("an AIR expression has no truth value (did you mean assert_zero?)")

    # -- columns
    @property
    def next(self) -> "Expr":
        """The same column on the next row (only for column leaves)."""
        if self.op not in ("main", "prep", "aux"):
            raise TypeError(f".next is only defined on trace columns, not on {self.op!r}")
        if self.payload[1]:
            raise TypeError("already a next-row reference")
        return Expr(self.op, (), (self.payload[0], True), self.name)

    def __repr__(self):
        return to_text(self)


def lift(x) -> Expr:
    """Coerce an int (mod p) or an Expr to an Expr."""
    if isinstance(x, Expr):
        return x
    if type(x) is int:                 # the common case (constants in the DSL), no import
        return const(x)
    if isinstance(x, bool):
        raise TypeError("bool is not a field element")
    try:
        import numpy as np
        if isinstance(x, np.integer):
            x = int(x)
    except ImportError:  # pragma: no cover
        pass
    if isinstance(x, int):
        return const(x)
    raise TypeError(f"cannot use {type(x).__name__} in an AIR expression")


def const(v: int) -> Expr:
    return Expr("const", (), int(v) % P)


def column(kind: str, index: int, name: str | None = None) -> Expr:
    return Expr(kind, (), (int(index), False), name)


def to_text(e: Expr, limit: int = 4000) -> str:
    """Deterministic text rendering for debugging (shared nodes are expanded; the result
    is cut at ``limit`` characters).  Iterative, so deep sums do not hit the recursion
    limit."""
    text: dict[int, str] = {}
    for node in walk([e]):
        op = node.op
        if op == "const":
            s = str(node.payload)
        elif op in ("main", "prep", "aux"):
            s = node.name or f"{op}[{node.payload[0]}]"
            s = s + "'" if node.payload[1] else s
        elif op == "pv":
            s = node.name or f"pv[{node.payload}]"
        elif op == "chal":
            s = node.payload
        elif op == "term":
            s = "terminal"
        elif op == "neg":
            s = f"(-{text[id(node.args[0])]})"
        else:
            sym = {"add": "+", "sub": "-", "mul": "*"}[op]
            s = f"({text[id(node.args[0])]} {sym} {text[id(node.args[1])]})"
        text[id(node)] = s[:limit]
    return text[id(e)]


def walk(roots):
    """Yield every distinct node (by identity) reachable from roots, children first."""
    seen = set()
    stack = [(r, False) for r in reversed(list(roots))]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen:
            continue
        if expanded or not node.args:
            seen.add(id(node))
            yield node
        else:
            stack.append((node, True))
            for a in reversed(node.args):
                if id(a) not in seen:
                    stack.append((a, False))
