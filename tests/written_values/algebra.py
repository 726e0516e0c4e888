"""Polynomials mod p over an AIR's columns and domains (an integer interval inside
(-p/2, p/2) with a congruence) with their arithmetic: the written-values analysis's
algebra (tests/written_values/__init__.py)."""
from __future__ import annotations

import math

import numpy as np

from steadfast.air.expr import walk

P = 2013265921
HALF = (P - 1) // 2
TWO16 = 1 << 16
PREP0, PV0, VIRT0 = 1 << 20, 2 << 20, 3 << 20
EMPTY = "empty"


def slift(c: int) -> int:
    c %= P
    return c - P if c > HALF else c


# ------------------------------------------------------------------ polynomials
# {monomial: coefficient in [1, p)}, a monomial a sorted tuple of variable ids: main column
# i -> i, preprocessed j -> PREP0 + j, public value k -> PV0 + k, virtual -> VIRT0 + n.

def _accumulate(out: dict, m: tuple, c: int) -> None:
    """``out[m] += c`` mod p, the monomial dropped when its coefficient is 0."""
    v = (out.get(m, 0) + c) % P
    if v:
        out[m] = v
    else:
        out.pop(m, None)


def p_add(a, b, s=1):
    out = dict(a)
    for m, c in b.items():
        _accumulate(out, m, s * c)
    return out


def p_mul(a, b):
    out = {}
    for m1, c1 in a.items():
        for m2, c2 in b.items():
            _accumulate(out, tuple(sorted(m1 + m2)), c1 * c2)
    return out


def p_subst(poly, assign):
    out = {}
    for m, c in poly.items():
        if any(v in assign for v in m):
            rest = []
            for v in m:
                if v in assign:
                    c = c * assign[v] % P
                else:
                    rest.append(v)
            if not c:
                continue
            m = tuple(rest)
        _accumulate(out, m, c)
    return out


def p_vars(poly):
    return {v for m in poly for v in m}


def p_const(poly):
    """The constant a polynomial is, or None."""
    if not poly:
        return 0
    if len(poly) == 1 and () in poly:
        return poly[()]
    return None


def p_key(poly):
    return tuple(sorted(poly.items()))


def expand(roots):
    """id(node) -> polynomial for every node under ``roots``."""
    memo = {}
    for node in walk(roots):
        op, a = node.op, node.args
        if op == "const":
            poly = {(): node.payload} if node.payload else {}
        elif op in ("main", "prep"):
            if node.payload[1]:
                raise ValueError("a next-row reference")
            poly = {((0 if op == "main" else PREP0) + node.payload[0],): 1}
        elif op == "pv":
            poly = {(PV0 + node.payload,): 1}
        elif op == "add":
            poly = p_add(memo[id(a[0])], memo[id(a[1])])
        elif op == "sub":
            poly = p_add(memo[id(a[0])], memo[id(a[1])], -1)
        elif op == "neg":
            poly = {m: (-c) % P for m, c in memo[id(a[0])].items()}
        elif op == "mul":
            poly = p_mul(memo[id(a[0])], memo[id(a[1])])
        else:
            raise ValueError(f"{op} in a user expression")
        memo[id(node)] = poly
    return memo


# ------------------------------------------------------------------ domains
# (L, U, g, r): the integers in [L, U] congruent to r mod g (g = 0: exactly r); None: unknown.

def d_norm(L, U, g, r):
    if g == 0:
        return (r, r, 0, r) if L <= r <= U else EMPTY
    if g == 1:
        if L > U:
            return EMPTY
        return (L, L, 0, L) if L == U else (L, U, 1, 0)
    r %= g
    L2, U2 = L + ((r - L) % g), U - ((U - r) % g)
    if L2 > U2:
        return EMPTY
    return (L2, L2, 0, L2) if L2 == U2 else (L2, U2, g, r)


def d_const(v):
    v = slift(v)
    return (v, v, 0, v)


def d_add(a, b):
    return d_norm(a[0] + b[0], a[1] + b[1], math.gcd(a[2], b[2]), a[3] + b[3])


def d_scale(a, c):
    if c == 0:
        return (0, 0, 0, 0)
    L, U = sorted((c * a[0], c * a[1]))
    return d_norm(L, U, abs(c) * a[2], c * a[3])


def d_mul(a, b):
    if a[2] == 0:
        return d_scale(b, a[3])
    if b[2] == 0:
        return d_scale(a, b[3])
    corners = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    g = (a[2] if a[3] == 0 else 1) * (b[2] if b[3] == 0 else 1)
    return d_norm(min(corners), max(corners), g, 0)


def _crt(g1, r1, g2, r2):
    if g1 == 0 and g2 == 0:
        return (0, r1) if r1 == r2 else None
    if g1 == 0:
        return (0, r1) if (r1 - r2) % g2 == 0 else None
    if g2 == 0:
        return (0, r2) if (r2 - r1) % g1 == 0 else None
    h = math.gcd(g1, g2)
    if (r2 - r1) % h:
        return None
    m = g2 // h
    k = ((r2 - r1) // h * pow(g1 // h, -1, m)) % m if m > 1 else 0
    lcm = g1 // h * g2
    return (lcm, (r1 + g1 * k) % lcm)


def d_meet(a, b):
    if a is None:
        return b
    if b is None:
        return a
    gr = _crt(a[2], a[3], b[2], b[3])
    if gr is None:
        return EMPTY
    return d_norm(max(a[0], b[0]), min(a[1], b[1]), gr[0], gr[1])


def d_of_values(vals):
    vals = [int(v) for v in vals]
    lo, hi = min(vals), max(vals)
    g = 0
    for v in vals:
        g = math.gcd(g, v - lo)
    return d_norm(lo, hi, g, lo)


def is_bool(d):
    return d is not None and d[2] != 0 and d[0] >= 0 and d[1] <= 1


def within(d, lo, hi):
    assert hi < P
    return d is not None and d != EMPTY and lo <= d[0] and d[1] <= hi


_AND_X = np.arange(1 << 16, dtype=np.int64) & 0xFF
_AND_Y = np.arange(1 << 16, dtype=np.int64) >> 8
_AND_Z = _AND_X & _AND_Y
_AND_CACHE: dict = {}
_ENUM_CACHE: dict = {}


def and8_range(cx, cy, cz, dx, dy, dz):
    """The exact range of cx x + cy y + cz (x AND y) over BYTES' rows within the domains."""
    key = (cx, cy, cz, dx, dy, dz)
    if key not in _AND_CACHE:
        mask = np.ones(_AND_X.size, dtype=bool)
        for arr, d in ((_AND_X, dx), (_AND_Y, dy), (_AND_Z, dz)):
            if d is not None:
                mask &= (arr >= d[0]) & (arr <= d[1])
        if not mask.any():
            _AND_CACHE[key] = EMPTY
        else:
            vals = cx * _AND_X[mask] + cy * _AND_Y[mask] + cz * _AND_Z[mask]
            _AND_CACHE[key] = d_of_values(np.unique(vals))
    return _AND_CACHE[key]


def enum_bools(parts):
    """The exact set of values of sum(c * prod(vars)) over 0/1 assignments of its vars."""
    key = tuple(parts)
    if key not in _ENUM_CACHE:
        vs = sorted({v for m, _ in parts for v in m})
        n = len(vs)
        pos = {v: i for i, v in enumerate(vs)}
        bits = (np.arange(1 << n)[:, None] >> np.arange(n)[None, :]) & 1
        total = np.zeros(1 << n, dtype=object)
        for m, c in parts:
            term = np.ones(1 << n, dtype=np.int64)
            for v in m:
                term = term * bits[:, pos[v]]
            total = total + slift(c) * term.astype(object)
        _ENUM_CACHE[key] = d_of_values(set(total.tolist()))
    return _ENUM_CACHE[key]
