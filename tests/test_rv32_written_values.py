"""The written-values inventory (docs/rv32.md "Written values: the inventory"): a mechanical
check of the rule that every limb a chip *writes* to the memory argument is a canonical
integer below 2^16, derived from the AIRs alone.

For every AIR of an RV32 proof (the 18 tables; the slotted ones at k = 1 and k = 2) each
send on ``rv32_mem`` gives two targets, its lo and hi values (positions 2 and 3), to be
shown in [0, 2^16) on every row where the send's multiplicity is nonzero.  Also covered:
``rv32_io`` sends (IOWORD), position 2, a byte; ``rv32_exit`` (ECALL's exit code), a byte;
``rv32_p2call`` positions 1 and 2 and ``rv32_iochain`` position 2 as sent by ECALL (the
word addresses that start a POSEIDON2 call and an IOWORD chain), below 2^30.  Not covered
locally: IOWORD's own ``rv32_iochain`` send (wa + 1; the chain starts below 2^30 at the
ECALL and MEMORY has no row at or above 2^30, so an access past it cannot balance).

The analysis (sound: a bound it reports holds on every row that satisfies the AIR, given
the premises below) works on polynomial expansions mod p of the AIR's expressions:

* a *domain* per variable: an integer interval [L, U] inside (-p/2, p/2) with a congruence
  (value = r mod g), meaning "the field value's signed representative lies in it";
* sources of domains: ``assert_bool`` columns ([0, 1]); preprocessed columns (their range
  over the preprocessed matrix, or for the statement's tables the declared range, checked
  against a sample statement); public values (unknown); and the tuples of the row's
  interactions whose multiplicity is the constant 1 in the current case: lookups into
  fixed tables (``rv32_range16``, ``rv32_pair8``, ``rv32_and8`` -> BYTES,
  ``rv32_program`` -> PROGRAM, ``rv32_image`` <- PROGRAM, ``rv32_io`` -> IO: the sent value
  equals a value the table holds) and the values *received* on ``rv32_mem`` (the previous
  value of an access: valid by induction, every value in memory was checked when it was
  written -- exactly what this test checks for the sends);
* propagation: a user constraint (``when = "all"``) in which a variable v appears only in
  the linear monomial c v gives v = -R / c: with c = +-1 (or R exact) the domain of -R / c;
  otherwise the domain of v must already be known and, when c v and -R lie in a window
  narrower than p, the integer division (with the congruence) refines it.  Domains of R:
  interval arithmetic with congruences, exact enumeration of parts over boolean variables,
  and the exact range of c_x x + c_y y + c_z z over BYTES' AND table for an active and8
  tuple (x, y, z); a target that is a looked-up or received expression plus a constant
  takes that fact's range;
* case splits: one-hot flag groups (flags whose sum is asserted boolean, pairs with
  x y = 0, and "sum = 1" constraints), then boolean-valued variables (including derived
  ones such as IOWORD's f_j or DIV's x), chosen breadth-first from the target through the
  constraints; a case whose constraints contradict the domains is vacuous.

Premises: "No count wraps mod p" (every sender's multiplicity is 0 or 1 and the counts are
below p, so a tuple sent with a nonzero multiplicity is in the table: re-derived below from
the AIRs, ``test_no_count_wraps``), and the induction over memory: every rv32_mem send's
limbs bounded, except the cursor registers 33..35, whose lo slot is one field element (a
byte count) by design (``EXEMPT``): the receive of that access is not used as a fact, and
``test_cursor_addresses_are_separate`` checks that no other register access can reach
addresses 33..35 (instruction chips address registers through PROGRAM's rd / rs1 / rs2,
at most 32; ECALL's other registers are constants).

Regenerate the docs table: ``python tests/test_rv32_written_values.py`` (prints markdown),
or ``python -m pytest tests/test_rv32_written_values.py -s`` (prints the inventory).
"""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from steadfast.air import AirBuilder
from steadfast.air.expr import walk
from steadfast.rv32 import tables as T
from steadfast.rv32.chips import common as C
from steadfast.rv32.statement import program_airs

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rv32_samples as S  # noqa: E402

P = 2013265921
HALF = (P - 1) // 2
TWO16 = 1 << 16
PREP0, PV0, VIRT0 = 1 << 20, 2 << 20, 3 << 20
EMPTY = "empty"

# written values that are not 16-bit limbs by design: (air, access, limb) -> why
EXEMPT = {("rv32_ecall", "cur", "lo"):
          "a cursor (registers 33..35): one field element, a byte count, not a limb"}

# the declared range of the statement-dependent preprocessed values that other tables look
# up: (bus, position) -> [lo, hi]; chips/program.py builds them as 16-bit limbs (& 0xFFFF,
# >> 16 of 32-bit words) and register numbers (rd = 32 for x0), chips/io.py from bytes.
# test_declared_prep_ranges checks them against a sample statement's matrices.
DECLARED = {("rv32_program", 2): (0, 32), ("rv32_program", 3): (0, 31),
            ("rv32_program", 4): (0, 31), ("rv32_program", 5): (0, TWO16 - 1),
            ("rv32_program", 6): (0, TWO16 - 1), ("rv32_program", 7): (0, TWO16 - 1),
            ("rv32_program", 8): (0, TWO16 - 1), ("rv32_image", 1): (0, TWO16 - 1),
            ("rv32_image", 2): (0, TWO16 - 1), ("rv32_io", 2): (0, 255)}
STATEMENT_TABLES = ("rv32_program", "rv32_registers", "rv32_io")
FIXED_BUSES = {C.RANGE16: "range16", C.PAIR8: "pair8", C.AND8: "and8",
               C.PROGRAM: "program", C.IMAGE: "image", C.IO: "io"}


def slift(c: int) -> int:
    c %= P
    return c - P if c > HALF else c


# ------------------------------------------------------------------ polynomials
# {monomial: coefficient in [1, p)}, a monomial a sorted tuple of variable ids: main column
# i -> i, preprocessed j -> PREP0 + j, public value k -> PV0 + k, virtual -> VIRT0 + n.

def p_add(a, b, s=1):
    out = dict(a)
    for m, c in b.items():
        v = (out.get(m, 0) + s * c) % P
        if v:
            out[m] = v
        else:
            out.pop(m, None)
    return out


def p_mul(a, b):
    out = {}
    for m1, c1 in a.items():
        for m2, c2 in b.items():
            m = tuple(sorted(m1 + m2))
            v = (out.get(m, 0) + c1 * c2) % P
            if v:
                out[m] = v
            else:
                out.pop(m, None)
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
        v = (out.get(m, 0) + c) % P
        if v:
            out[m] = v
        else:
            out.pop(m, None)
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


# ------------------------------------------------------------------ the model of one AIR

@dataclass
class Inter:
    idx: int
    bus: str
    sign: int
    values: list
    mult: dict
    access: str | None = None


@dataclass
class Target:
    air: str
    inter: int
    pos: int
    bound: int            # the value must lie in [0, bound)
    access: str
    limb: str
    expr: str
    read: bool = False    # the access sends back the value it received
    exempt: str | None = None


class Model:
    """One AIR's polynomials, facts, groups and targets."""

    def __init__(self, air, fixed_ranges):
        self.air = air
        self.name = air.name
        self.names = {i: n for i, n in enumerate(air.main_names)}
        self.names.update({PREP0 + j: n for j, n in enumerate(air.prep_names)})
        self.names.update({PV0 + k: n for k, n in enumerate(air.public_names)})
        roots = [c.expr for c in air.user_constraints if c.when == "all" and not c.expr.uses_next]
        for it in air.interactions:
            roots.extend(it.values)
            roots.append(it.multiplicity)
        memo = expand(roots)
        self.cons = []                       # (name, poly): the user constraints, all rows
        for c in air.user_constraints:
            if c.when == "all" and not c.expr.uses_next:
                poly = memo[id(c.expr)]
                if poly:
                    self.cons.append((c.name, poly))
        self.inters = [Inter(i, it.bus, it.sign, [memo[id(v)] for v in it.values],
                             memo[id(it.multiplicity)])
                       for i, it in enumerate(air.interactions)]
        self._name_accesses()
        # boolean columns and one-hot groups
        self.bools = set()
        for _, poly in self.cons:
            if len(poly) == 2:
                (m1, c1), (m2, c2) = sorted(poly.items(), key=lambda t: -len(t[0]))
                if len(m1) == 2 and m1[0] == m1[1] and m2 == (m1[0],) and (c1 + c2) % P == 0:
                    self.bools.add(m1[0])
        self.groups = []                      # tuples of bool vars, at most one of them is 1
        for _, poly in self.cons:
            lin = [m[0] for m, c in poly.items() if len(m) == 1 and c == P - 1]
            if len(lin) >= 2 and all(v in self.bools for v in lin):
                s = {(v,): 1 for v in lin}
                if p_add(p_mul(s, s), s, -1) == poly:
                    self.groups.append(tuple(sorted(lin)))
        grouped = {v for g in self.groups for v in g}
        for _, poly in self.cons:
            if len(poly) == 1:
                (m, _c), = poly.items()
                if (len(m) == 2 and m[0] != m[1] and all(v in self.bools for v in m)
                        and not set(m) & grouped):
                    self.groups.append(tuple(m))
                    grouped |= set(m)
        self.group_of = {v: g for g in self.groups for v in g}
        # preprocessed domains
        self.base = {}
        for v in self.bools:
            self.base[v] = (0, 1, 1, 0)
        if air.preprocessed is not None:
            for j, n in enumerate(air.prep_names):
                col = [slift(int(x)) for x in np.unique(air.preprocessed[:, j])]
                self.base[PREP0 + j] = d_of_values(col)
        # facts: one virtual constraint "value - t = 0" per fact, t of a fixed domain
        self.facts = {}                       # interaction idx -> [(label, poly)]
        self.and8 = {}                        # interaction idx -> (x, y, z) vars
        nv = 0
        for it in self.inters:
            pos_doms = []
            if it.bus in fixed_ranges and it.sign == fixed_ranges[it.bus][0]:
                for j, d in fixed_ranges[it.bus][1].items():
                    pos_doms.append((j, d, FIXED_BUSES[it.bus]))
            elif (it.bus == C.MEM and it.sign < 0
                  and (_base(self.name), it.access) not in _EXEMPT_ACC):
                for j in (2, 3):
                    pos_doms.append((j, (0, TWO16 - 1, 1, 0), f"read {it.access}"))
            fl = []
            for j, d, label in pos_doms:
                t = VIRT0 + nv
                nv += 1
                self.base[t] = d
                fl.append((f"{self.fmt(it.values[j])}: {label}",
                           p_add(it.values[j], {(t,): 1}, -1)))
            if fl:
                self.facts[it.idx] = fl
            if it.bus == C.AND8 and all(len(v) == 1 and list(v.values()) == [1]
                                        and len(next(iter(v))) == 1 for v in it.values):
                self.and8[it.idx] = tuple(next(iter(v))[0] for v in it.values)
        self.targets = self._targets()

    # -- names
    def var_name(self, v):
        return self.names.get(v, f"t{v - VIRT0}")

    def fmt(self, poly):
        if not poly:
            return "0"
        parts = []
        for m, c in sorted(poly.items(), key=lambda t: (len(t[0]) == 0, t[0])):
            c = slift(c)
            body = "*".join(self.var_name(v) for v in m)
            if not body:
                parts.append(str(c))
            elif c == 1:
                parts.append(body)
            elif c == -1:
                parts.append("-" + body)
            else:
                parts.append(f"{c}*{body}")
        return " + ".join(parts).replace("+ -", "- ")

    def _name_accesses(self):
        """Access names from common.access's ``{name}_pts`` column (the receive's ts); the
        send that follows a receive of the same (space, address) is the same access."""
        last = {}
        for it in self.inters:
            if it.bus != C.MEM:
                continue
            key = (p_key(it.values[0]), p_key(it.values[1]))
            ts = it.values[4]
            if it.sign < 0:
                name = "final"
                if len(ts) == 1 and len(next(iter(ts))) == 1:
                    col = self.names.get(next(iter(ts))[0], "")
                    base, _, slot = col.partition("@")
                    if base.endswith("_pts"):
                        name = base[:-4] + ("@" + slot if slot else "")
                it.access = name
                last[key] = it
            else:
                prev = last.get(key)
                it.access = "init" if p_const(ts) == 0 else (prev.access if prev else "?")

    def _targets(self):
        out = []
        for it in self.inters:
            if it.sign < 0:
                continue
            spec = []
            if it.bus == C.MEM:
                spec = [(2, TWO16, "lo"), (3, TWO16, "hi")]
            elif it.bus == C.IO:
                spec = [(2, 256, "byte")]
            elif it.bus == C.EXIT:
                spec = [(0, 256, "code")]
            elif it.bus == C.P2CALL:
                spec = [(1, 1 << 30, "wa_in"), (2, 1 << 30, "wa_out")]
            elif it.bus == C.IOCHAIN and self.name.endswith("rv32_ecall"):
                spec = [(2, 1 << 30, "wa")]
            read = False
            if it.bus == C.MEM:
                prev = [r for r in self.inters if r.bus == C.MEM and r.sign < 0
                        and r.access == it.access]
                read = bool(prev) and all(p_key(prev[0].values[j]) == p_key(it.values[j])
                                          for j in (2, 3))
            for pos, bound, limb in spec:
                acc = it.access or it.bus
                out.append(Target(self.name, it.idx, pos, bound, acc, limb,
                                  self.fmt(it.values[pos]), read,
                                  EXEMPT.get((_base(self.name), acc, limb))))
        return out


def _base(name):
    return name.split("/")[-1]


_EXEMPT_ACC = {(air, acc) for (air, acc, _limb) in EXEMPT}


# ------------------------------------------------------------------ the search

class Node:
    __slots__ = ("dom", "prov", "polys", "pending", "and8", "infeasible", "path")

    def copy(self):
        n = Node()
        n.dom, n.prov, n.polys = dict(self.dom), dict(self.prov), dict(self.polys)
        n.pending, n.and8, n.infeasible, n.path = set(self.pending), self.and8, False, self.path
        return n


class Component:
    """The constraints and interactions of one connected set of columns (a slot)."""

    MAX_STEPS = 20000

    def __init__(self, model: Model, cols: set, exclude=frozenset()):
        self.m = model
        self.exclude = exclude
        self.cons = {}                        # ci -> (label, poly, is_fact)
        for i, (name, poly) in enumerate(model.cons):
            if p_vars(poly) & cols:
                self.cons[i] = (name, poly, False)
        self.fact_ids = {}                    # interaction idx -> [ci]
        ci = len(model.cons)
        self.inters = [it for it in model.inters
                       if (p_vars(it.mult) | set().union(*map(p_vars, it.values))) & cols]
        for it in self.inters:
            if it.idx in model.facts and it.idx not in exclude:
                ids = []
                for label, poly in model.facts[it.idx]:
                    self.cons[ci] = (label, poly, True)
                    ids.append(ci)
                    ci += 1
                self.fact_ids[it.idx] = ids
        self.index = {}
        for i, (_, poly, _) in self.cons.items():
            for v in p_vars(poly):
                self.index.setdefault(v, set()).add(i)
        self.mult_index = {}
        for it in self.inters:
            if it.idx in self.fact_ids:
                for v in p_vars(it.mult):
                    self.mult_index.setdefault(v, set()).add(it.idx)
        self.by_idx = {it.idx: it for it in self.inters}
        self.memo = {}
        self.root = self._root()

    # -- nodes
    def _root(self):
        n = Node()
        n.dom = dict(self.m.base)
        n.prov = {}
        n.polys = {i: poly for i, (_, poly, fact) in self.cons.items() if not fact}
        n.pending = set(self.fact_ids)
        n.and8 = ()
        n.infeasible = False
        n.path = ()
        queue = set(n.polys)
        for idx in list(n.pending):
            self._check_pending(n, idx, queue)
        self._propagate(n, queue)
        return n

    def child(self, parent, assign):
        key = frozenset(parent.path + tuple(assign.items()))
        if key in self.memo:
            return self.memo[key]
        n = parent.copy()
        n.path = parent.path + tuple(assign.items())
        queue = set()
        for v, val in assign.items():
            if not self._set(n, v, (val, val, 0, val), -3, queue):
                break
        if not n.infeasible:
            self._propagate(n, queue)
        self.memo[key] = n
        return n

    def _set(self, n, v, d, why, queue):
        old = n.dom.get(v)
        new = d_meet(old, d)
        if new == EMPTY:
            n.infeasible = True
            return False
        if new != old:
            n.dom[v] = new
            n.prov[v] = n.prov.get(v, ()) + (why,)
            queue |= self.index.get(v, set())
            if new[2] == 0:
                for idx in list(self.mult_index.get(v, ())):
                    if idx in n.pending:
                        self._check_pending(n, idx, queue)
                g = self.m.group_of.get(v)
                if g is not None and new[3] == 1:
                    for u in g:
                        if u != v and not self._set(n, u, (0, 0, 0, 0), -4, queue):
                            return False
        return True

    def _singletons(self, n, vars_):
        return {v: n.dom[v][3] % P for v in vars_ if v in n.dom and n.dom[v][2] == 0}

    def _check_pending(self, n, idx, queue):
        it = self.by_idx[idx]
        mult = p_subst(it.mult, self._singletons(n, p_vars(it.mult)))
        c = p_const(mult)
        if c is None:
            return
        n.pending.discard(idx)
        if c != 1:
            return          # 0: no tuple; any other constant: not counted as a lookup
        for ci in self.fact_ids[idx]:
            n.polys[ci] = self.cons[ci][1]
            queue.add(ci)
        if idx in self.m.and8:
            x, y, z = self.m.and8[idx]
            n.and8 = n.and8 + ((x, y, z),)
            for v in (x, y, z):
                queue |= self.index.get(v, set())

    def _propagate(self, n, queue):
        steps = 0
        while queue and steps < self.MAX_STEPS:
            steps += 1
            ci = queue.pop()
            poly = n.polys.get(ci)
            if poly is None:
                continue
            vs = p_vars(poly)
            single = self._singletons(n, vs)
            if single:
                poly = p_subst(poly, single)
                n.polys[ci] = poly
                vs = p_vars(poly)
            c = p_const(poly)
            if c is not None:
                if c:
                    n.infeasible = True
                    return
                del n.polys[ci]
                continue
            count = {}
            for m in poly:
                for v in set(m):
                    count[v] = count.get(v, 0) + 1
            for v in vs:
                if count[v] == 1 and (v,) in poly:
                    d = self._project(n, poly, v)
                    if d is EMPTY:
                        n.infeasible = True
                        return
                    if d is not None and not self._set(n, v, d, ci, queue):
                        return

    def _project(self, n, poly, v):
        c = poly[(v,)]
        rest = {m: k for m, k in poly.items() if m != (v,)}
        dr = self.eval(n, rest)
        if dr is None or dr == EMPTY:
            return dr
        cs = slift(c)
        neg = d_scale(dr, -1)
        if cs == 1:
            return neg
        if cs == -1:
            return dr
        if dr[2] == 0:
            return d_const(-dr[3] * pow(c, -1, P))
        dv = n.dom.get(v)
        if dv is None:
            return None
        jl, ju = sorted((cs * dv[0], cs * dv[1]))
        if max(ju, neg[1]) - min(jl, neg[0]) >= P:
            return None
        if cs > 0:
            lo, hi = -((-neg[0]) // cs), neg[1] // cs
        else:
            lo, hi = -((-neg[1]) // cs), neg[0] // cs
        g, r = neg[2], neg[3]
        if g > 1:
            h = math.gcd(abs(cs), g)
            if r % h:
                return EMPTY
            mod = g // h
            x0 = (r // h) * pow((cs // h) % mod, -1, mod) % mod if mod > 1 else 0
            return d_norm(lo, hi, mod, x0)
        return d_norm(lo, hi, 1, 0)

    def eval(self, n, poly, window=True):
        """The domain of a polynomial's value in node n (None: unknown).  With ``window``
        a domain of the signed representative (inside (-p/2, p/2)); without, the integer
        range of sum(signed coefficient * product of signed representatives), which is
        congruent to the value: when it lies in [0, p) it is the value's canonical form."""
        dom = n.dom
        total = (0, 0, 0, 0)
        items = dict(poly)
        for (x, y, z) in n.and8:
            cs = [items.get((w,), 0) for w in (x, y, z)]
            if sum(1 for c in cs if c) >= 2:
                d = and8_range(*(slift(c) for c in cs), dom.get(x), dom.get(y), dom.get(z))
                if d == EMPTY:
                    return EMPTY
                total = d_add(total, d)
                for w in (x, y, z):
                    items.pop((w,), None)
        bool_parts = []
        for m, c in items.items():
            if m and len(set(m)) <= 12 and all(is_bool(dom.get(v)) for v in m):
                bool_parts.append((m, c))
                continue
            d = d_const(c)
            for v in m:
                dv = dom.get(v)
                if dv is None:
                    return None
                d = d_mul(d, dv)
                if d == EMPTY:
                    return EMPTY
            total = d_add(total, d)
            if total == EMPTY:
                return EMPTY
        if bool_parts:
            if len({v for m, _ in bool_parts for v in m}) <= 12:
                total = d_add(total, enum_bools(sorted(bool_parts)))
            else:
                for m, c in bool_parts:
                    d = d_const(c)
                    for v in m:
                        d = d_mul(d, dom[v])
                    total = d_add(total, d)
        if total == EMPTY:
            return None
        if window and (total[0] < -HALF or total[1] > HALF):
            return None
        return total

    def match_fact(self, n, poly):
        """A fact "E in D" of node n with poly = E + c (a value sent as it was received, or
        looked up elsewhere in the row): (D + c, the fact's label), or (None, None).  D is
        the range of t's signed representative, t = E, so poly = t + c as integers mod p."""
        for ci, fp in n.polys.items():
            label, _, fact = self.cons[ci]
            if not fact:
                continue
            t = next((m[0] for m in fp if len(m) == 1 and m[0] >= VIRT0), None)
            if t is None or fp[(t,)] != P - 1:
                continue
            c = p_const(p_add(poly, p_add(fp, {(t,): 1}), -1))
            if c is not None:
                return d_add(n.dom[t], d_const(c)), label
        return None, None

    # -- splitting
    def split_choice(self, n, start_vars):
        """A group or boolean-valued variable to split on: breadth-first from start_vars
        through the node's constraints and pending facts."""
        seen = set(start_vars)
        frontier = set(start_vars)
        used_cons, used_int = set(), set()
        while frontier:
            cands = sorted(v for v in frontier if is_bool(n.dom.get(v)))
            for v in cands:
                g = self.m.group_of.get(v)
                if g is not None and all(is_bool(n.dom.get(u)) for u in g):
                    return ("group", g)
            for v in cands:
                g = self._exact_group(n, v)
                if g is not None:
                    return ("exact", g)
            if cands:
                return ("bool", cands[0])
            nxt = set()
            for v in frontier:
                for ci in self.index.get(v, ()):
                    if ci in n.polys and ci not in used_cons:
                        used_cons.add(ci)
                        nxt |= p_vars(n.polys[ci])
                for idx, it in self.by_idx.items():
                    if idx in n.pending and idx not in used_int and (
                            v in p_vars(it.mult) or any(v in p_vars(x) for x in it.values)):
                        used_int.add(idx)
                        nxt |= p_vars(it.mult)
                        for x in it.values:
                            nxt |= p_vars(x)
            nxt = {v for v in nxt if v < VIRT0} - seen
            seen |= nxt
            frontier = nxt
        return None

    def _exact_group(self, n, v):
        """A constraint sum(bools) = 1 holding v (after the node's substitutions)."""
        for ci in self.index.get(v, ()):
            poly = n.polys.get(ci)
            if poly is None or len(poly) < 3 or () not in poly:
                continue
            c = poly[()]
            lin = [m for m in poly if m]
            if all(len(m) == 1 and poly[m] == (P - c) % P and is_bool(n.dom.get(m[0]))
                   for m in lin):
                return tuple(m[0] for m in lin)
        return None

    def children(self, n, choice):
        kind, what = choice
        if kind == "bool":
            return [self.child(n, {what: 0}), self.child(n, {what: 1})]
        out = [self.child(n, {u: int(u == v) for u in what}) for v in what]
        if kind == "group":
            out.append(self.child(n, {u: 0 for u in what}))
        return out


@dataclass
class Result:
    target: Target
    ok: bool
    leaves: list = field(default_factory=list)     # (kind, other splits, sources)
    failure: str = ""


def solve(comp: Component, target: Target, self_bound=None, max_leaves=3000, max_depth=14):
    """Bound target's value on every case of comp's search tree where its multiplicity is
    nonzero; returns a Result with one entry per leaf."""
    it = comp.by_idx.get(target.inter) or next(i for i in comp.m.inters if i.idx == target.inter)
    value, mult = it.values[target.pos], it.mult
    res = Result(target, True)
    stack = [(comp.root, 0)]
    while stack:
        n, depth = stack.pop()
        if n.infeasible:
            continue
        m = p_subst(mult, comp._singletons(n, p_vars(mult)))
        c = p_const(m)
        if c == 0:
            continue
        choice = None
        if c is None:
            choice = comp.split_choice(n, p_vars(m) - set(comp._singletons(n, p_vars(m))))
        if choice is None:
            val = p_subst(value, comp._singletons(n, p_vars(value)))
            d = comp.eval(n, val, window=False)
            if within(d, 0, target.bound - 1):
                res.leaves.append((_kind(comp, n), _splits(comp, n, mult), sources(comp, n, val)))
                continue
            got, fact = comp.match_fact(n, val)
            if fact is not None and within(got, 0, target.bound - 1):
                res.leaves.append((_kind(comp, n), _splits(comp, n, mult), {fact}))
                continue
            if self_bound is not None and within(self_bound, 0, target.bound - 1):
                # the tuple is looked up in a fixed table: it is one of the table's values
                if comp.split_choice(n, p_vars(val)) is None:
                    res.leaves.append((_kind(comp, n), _splits(comp, n, mult),
                                       {"the lookup itself (IO's byte)"}))
                    continue
            choice = comp.split_choice(n, p_vars(val))
            if choice is None or depth >= max_depth:
                res.ok = False
                why = "nothing left to split" if choice is None else "too many splits"
                res.failure = (f"case {_path(comp, n) or 'all'}: {target.expr} in "
                               f"{_dstr(d)}, {why}")
                return res
        kids = comp.children(n, choice)
        if len(res.leaves) + len(stack) + len(kids) > max_leaves:
            res.ok = False
            res.failure = f"case {_path(comp, n)}: search budget exhausted"
            return res
        stack.extend((k, depth + 1) for k in kids)
    return res


def _dstr(d):
    if d is None:
        return "(unknown)"
    if d == EMPTY:
        return "(empty)"
    return f"[{d[0]}, {d[1]}]" + (f" mod {d[2]}" if d[2] > 1 else "")


def _kind(comp, n):
    """The flags of the AIR's one-hot groups set in node n (the row's kind)."""
    return "|".join(comp.m.var_name(v) for v, val in n.path if val == 1 and v in comp.m.group_of)


def _splits(comp, n, mult):
    """The variables (not of a kind, nor the multiplicity's) split on to reach node n."""
    return {comp.m.var_name(v) for v, _ in n.path
            if v not in comp.m.group_of and v not in p_vars(mult)}


def _path(comp, n):
    return ", ".join(f"{comp.m.var_name(v)}={val}" for v, val in n.path
                     if val == 1 or v not in comp.m.group_of)


def _natural(name):
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", name)]


_INDEXED = re.compile(r"^(\[?[A-Za-z_]+\[?)(\d+)(\]?(?::.*)?)$")


def compress(items, min_run=2):
    """["a[0]: pair8", "a[1]: pair8", "x"] -> ["a[0..1]: pair8", "x"] (sorted; groups of
    fewer than min_run stay as they are)."""
    groups, out = {}, []
    for it in items:
        m = _INDEXED.match(it)
        if m:
            groups.setdefault((m.group(1), m.group(3)), []).append(int(m.group(2)))
        else:
            out.append(it)
    for (before, after), idx in groups.items():
        idx = sorted(set(idx))
        if len(idx) < min_run or idx != list(range(idx[0], idx[-1] + 1)):
            out.extend(f"{before}{i}{after}" for i in idx)
        else:
            out.append(f"{before}{idx[0]}..{idx[-1]}{after}")
    return sorted(out, key=_natural)


def sources(comp, n, poly, depth=2):
    """What bounds the variables of ``poly`` in node n: the facts and constraints that
    narrowed their domains, followed through the constraints to ``depth``."""
    out, seen = set(), set()
    m = comp.m

    def visit(v, d):
        if v in seen or v >= VIRT0:
            return
        seen.add(v)
        dv = n.dom.get(v)
        if dv is not None and dv[2] == 0:
            return
        prov = n.prov.get(v, ())
        if not prov:
            if v in m.bools:
                out.add(f"{m.var_name(v)}: bool")
            elif v >= PREP0 and v < PV0:
                out.add(f"{m.var_name(v)}: preprocessed {_dstr(dv)}")
            return
        for ci in prov:
            if ci < 0:
                continue
            label, cpoly, fact = comp.cons[ci]
            out.add(label if fact else f"[{label}]")
            cpoly = p_subst(cpoly, comp._singletons(n, p_vars(cpoly)))
            if d > 0:
                for u in p_vars(cpoly):
                    if u != v:
                        visit(u, d - 1)

    for v in p_vars(poly):
        visit(v, depth)
    return out


# ------------------------------------------------------------------ whole proofs

def components(model: Model):
    """Connected sets of columns (union-find over constraints and interactions)."""
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(vs):
        vs = [v for v in vs if v < PV0]
        for a in vs[1:]:
            parent[find(a)] = find(vs[0])

    for _, poly in model.cons:
        union(sorted(p_vars(poly)))
    for it in model.inters:
        union(sorted(p_vars(it.mult).union(*map(p_vars, it.values))))
    groups = {}
    for v in list(parent):
        groups.setdefault(find(v), set()).add(v)
    return list(groups.values())


def fixed_ranges(airs):
    """bus -> (sign of the lookups, {position: domain}) for the buses whose other side is a
    fixed table (preprocessed values): BYTES' ranges from its matrix, the statement
    tables' declared ranges (DECLARED)."""
    out = {}
    by = {_base(a.name): a for a in airs}
    b = by["rv32_bytes"]
    prep = b.preprocessed.astype(np.int64)
    x, y = prep[:, 0], prep[:, 1]
    out[C.RANGE16] = (+1, {0: d_of_values(np.unique(x + 256 * y))})
    out[C.PAIR8] = (+1, {0: d_of_values(np.unique(x)), 1: d_of_values(np.unique(y))})
    out[C.AND8] = (+1, {0: d_of_values(np.unique(x)), 1: d_of_values(np.unique(y)),
                        2: d_of_values(np.unique(prep[:, 2]))})
    for bus, sign in ((C.PROGRAM, +1), (C.IMAGE, -1), (C.IO, +1)):
        out[bus] = (sign, {j: d_norm(lo, hi, 1, 0) for (bb, j), (lo, hi) in DECLARED.items()
                           if bb == bus})
    return out


@dataclass
class AirReport:
    air: str
    k: int
    results: list


def analyse(air, ranges, only=None):
    """Every target of one AIR, each in its own column component."""
    model = Model(air, ranges)
    comps = components(model)
    out = []
    cache = {}
    for t in model.targets:
        if only is not None and not only(t):
            continue
        it = model.inters[t.inter]
        cols = p_vars(it.mult).union(*map(p_vars, it.values))
        comp_cols = set().union(*[c for c in comps if c & cols])
        excl = frozenset([t.inter]) if t.inter in model.facts else frozenset()
        key = (frozenset(comp_cols), excl)
        if key not in cache:
            cache[key] = Component(model, comp_cols, excl)
        self_bound = None
        if excl:
            self_bound = ranges[it.bus][1].get(t.pos)
        out.append(solve(cache[key], t, self_bound))
    return out


def proof_airs(k: int):
    prog = S.program(S.ALL_CLASSES, data=[(0x30000, bytes(range(1, 9)))])
    slots = {name: k for name in T.SLOTTED if k in T.slot_menu(name)}
    return program_airs(prog, S.ALL_INPUT, b"ell", log_blowup=2, slots=slots)


_REPORTS: dict = {}


def reports(k: int):
    if k not in _REPORTS:
        airs = proof_airs(k)
        ranges = fixed_ranges(airs)
        _REPORTS[k] = [AirReport(a.name, k, analyse(a, ranges)) for a in airs]
    return _REPORTS[k]


def summarize(res: Result) -> str:
    """Leaves grouped by their kind (the flags set), merged where the sources agree."""
    if not res.ok:
        return "UNBOUNDED: " + res.failure
    by, splits = {}, {}
    for kind, split, srcs in res.leaves:
        by.setdefault(kind, set()).update(srcs)
        splits.setdefault(kind, set()).update(split)
    if not by:
        return "never written (multiplicity 0)"
    merged = {}
    for kind, srcs in by.items():
        key = tuple(compress(srcs))
        if splits[kind]:
            key += (f"cases on {', '.join(compress(splits[kind]))}",)
        merged.setdefault(key, []).append(kind)
    parts = []
    for srcs, kinds in sorted(merged.items(), key=lambda t: sorted(t[1])):
        label = "|".join(sorted(k for k in kinds if k))
        body = "; ".join(srcs) if srcs else "constant"
        parts.append(f"{label}: {body}" if label else body)
    return " / ".join(parts)


def inventory_rows(k: int = 1):
    rows = []
    for rep in reports(k):
        for r in rep.results:
            t = r.target
            if t.read and r.ok:
                continue
            rows.append((_base(t.air), t, summarize(r)))
    return rows


def read_accesses(k: int = 1):
    out = {}
    for rep in reports(k):
        for r in rep.results:
            if r.target.read and r.ok and r.target.limb == "lo":
                out.setdefault(_base(r.target.air), []).append(r.target.access)
    return out


def markdown(k: int = 1) -> str:
    """The inventory as a markdown table; rows that differ only in an access's index (P2CALL's
    out0..out7) are merged, written with k."""
    rows, merged = [], {}
    for chip, t, s in inventory_rows(k):
        what = s if t.exempt is None else f"exempt: {t.exempt}"
        plain = (chip, t.access, t.limb, t.expr, what)
        key, m = plain, re.match(r"^([a-z]+)(\d+)$", t.access)
        if m:
            pat = re.compile(rf"\b{m.group(1)}{m.group(2)}(?=_|\b)")
            key = (chip,) + tuple(pat.sub(m.group(1) + "{k}", x) for x in plain[1:])
        if key not in merged:
            merged[key] = []
            rows.append(key)
        merged[key].append((int(m.group(2)) if m else None, plain))
    lines = ["| table | written (access: limb = value) | what bounds it |", "|---|---|---|"]
    for key in rows:
        members = merged[key]
        if len(members) == 1:
            (chip, access, limb, expr, what), note = members[0][1], ""
        else:
            (chip, access, limb, expr, what) = key
            ks = [i for i, _ in members]
            note = f" (k = {min(ks)}..{max(ks)})"
        table = chip[5:] if chip.startswith("rv32_") else chip
        lines.append(f"| {table} | {access}: {limb} = `{expr}`{note} | "
                     f"{what.replace('|', '/')} |")
    reads = read_accesses(k)
    lines.append("")
    lines.append("Reads (the value sent is the value received, valid by induction): "
                 + "; ".join(f"{c[5:]} {', '.join(compress(a, 3))}" for c, a in reads.items())
                 + ".")
    return "\n".join(lines)


def unbounded(k: int):
    return [(rep.air, r.target.access, r.target.limb, r.failure)
            for rep in reports(k) for r in rep.results
            if not r.ok and r.target.exempt is None]


# ------------------------------------------------------------------ tests

@pytest.mark.parametrize("k", [1, 2])
def test_every_written_value_is_bounded(k):
    bad = unbounded(k)
    assert not bad, "\n".join(f"{a} {acc}.{limb}: {why}" for a, acc, limb, why in bad)
    reps = reports(k)
    assert len(reps) == 18
    n = sum(len(r.results) for r in reps)
    names = {_base(r.air) for r in reps if r.results}
    assert {"rv32_alu", "rv32_bitwise", "rv32_shift", "rv32_load", "rv32_store", "rv32_jump",
            "rv32_mul", "rv32_div", "rv32_ecall", "rv32_ioword", "rv32_p2call", "rv32_memory",
            "rv32_registers", "rv32_branch"} <= names
    if k == 1:
        print(f"\n{n} written values in {len(names)} tables, all bounded:")
        for chip, t, s in inventory_rows(1):
            print(f"  {chip} {t.access}.{t.limb} = {t.expr}: "
                  f"{s if t.exempt is None else 'EXEMPT (' + t.exempt + ')'}")
        print("  reads:", read_accesses(1))


def test_slots_agree():
    """k = 2: each slotted table has every k = 1 target once per slot, with its verdict."""
    one, count1, count2 = {}, {}, {}
    for rep in reports(1):
        for r in rep.results:
            key = (_base(r.target.air), r.target.access, r.target.limb, r.target.expr)
            one[key] = r.ok
            count1[key] = count1.get(key, 0) + 1
    for rep in reports(2):
        for r in rep.results:
            t = r.target
            key = (_base(t.air), t.access.split("@")[0], t.limb, re.sub(r"@\d", "", t.expr))
            assert one[key] == r.ok, t
            count2[key] = count2.get(key, 0) + 1
    assert set(count2) == set(count1)
    for key, n in count2.items():
        assert n == count1[key] * (2 if key[0][5:] in T.SLOTTED else 1), key


def test_exempt_cursor_is_not_a_limb():
    """The exemption is needed (the analysis cannot bound the cursor as a limb) and is the
    only one; its hi slot is bounded (0)."""
    rep = {r.target.access + "." + r.target.limb: r
           for a in reports(1) if _base(a.air) == "rv32_ecall" for r in a.results}
    assert not rep["cur.lo"].ok and rep["cur.lo"].target.exempt
    assert rep["cur.hi"].ok


def test_expected_sources():
    """Spot checks of the inventory: the reason found is the intended one."""
    inv = {(chip, t.access, t.limb): s for chip, t, s in inventory_rows(1)}
    assert "u_lo: range16" in inv[("rv32_alu", "rd", "lo")]
    assert "k1: bool" in inv[("rv32_alu", "rd", "lo")]
    assert "out3_hi: range16" in inv[("rv32_p2call", "out3", "hi")]
    assert "v_lo: program" in inv[("rv32_jump", "rd", "lo")]
    assert "and8" in inv[("rv32_bitwise", "rd", "lo")]
    assert "pair8" in inv[("rv32_shift", "rd", "hi")]
    assert "image" in inv[("rv32_memory", "init", "lo")]
    assert "code: pair8" in inv[("rv32_ecall", "rv32_exit", "code")]


def _p2call_without_output_limbs(monkeypatch):
    from steadfast.rv32.chips import precompile
    monkeypatch.setattr(precompile, "_output_limbs", lambda b, lo, hi, real: None)
    return precompile.build_p2call(2)


def test_catches_issue_40(monkeypatch):
    """Without _output_limbs (the #40 bug) every output limb of P2CALL is unbounded: lo
    only by (1 - beta) lo = 0, hi only by range16(0x7800 - hi - beta)."""
    ranges = fixed_ranges(proof_airs(1))      # before the patch: static_air caches p2call
    air = _p2call_without_output_limbs(monkeypatch)
    res = {(r.target.access, r.target.limb): r for r in analyse(air, ranges)}
    from steadfast.rv32.chips.precompile import N_IN, N_OUT
    for k in range(N_OUT):
        for limb in ("lo", "hi"):
            r = res[(f"out{k}", limb)]
            assert not r.ok, (k, limb)
            assert r.target.expr == f"out{k}_{limb}"
    for k in range(N_IN):
        assert res[(f"in{k}", "lo")].ok and res[(f"in{k}", "hi")].ok
    # with the fix, the same analysis bounds them
    from steadfast.rv32.chips.precompile import build_p2call
    monkeypatch.undo()
    fixed = {(r.target.access, r.target.limb): r for r in analyse(build_p2call(2), ranges)}
    assert all(r.ok for r in fixed.values())


def _tiny(body):
    """A one-access chip: real, x, y (and body's extra columns) writing (lo, hi) = body()."""
    b = AirBuilder("tiny")
    real, addr, clk = b.main("real"), b.main("addr"), b.main("clk")
    b.assert_bool(real, name="real_bool")
    lo, hi = body(b, real)
    C.write(b, "w", C.MEMORY, addr, (lo, hi), C.ts_of(clk, 3), real)
    return b.build(log_blowup=2)


def _verdicts(air):
    ranges = fixed_ranges(proof_airs(1))
    return {r.target.limb: r.ok for r in analyse(air, ranges)}


def test_negative_unchecked_column():
    def body(b, real):
        x, y = b.main("x"), b.main("y")
        C.range16(b, y, real)
        return x, y
    assert _verdicts(_tiny(body)) == {"lo": False, "hi": True}


def test_negative_hi_minus_beta():
    """range16(0x7800 - hi - beta) alone: hi could be p - t (issue #40's pattern); with
    range16(hi) too it is bounded."""
    def body(b, real, checked=False):
        lo, hi, beta = b.main("lo"), b.main("hi"), b.main("beta")
        b.assert_bool(beta, name="beta_bool")
        b.assert_zero((1 - beta) * lo, name="canonical")
        C.range16(b, 0x7800 - hi - beta, real)
        C.range16(b, lo, real)
        if checked:
            C.range16(b, hi, real)
        return lo, hi
    assert _verdicts(_tiny(body)) == {"lo": True, "hi": False}
    assert _verdicts(_tiny(lambda b, r: body(b, r, True))) == {"lo": True, "hi": True}


def test_negative_scaled_and_selected():
    """4 x with range16(4 x) is no limb bound on x; 2 x with x a limb is no limb; a
    selection s ? x : y is bounded only when s is boolean; a range check under another
    flag than the write's does not count."""
    def scaled(b, real):
        x, y = b.main("x"), b.main("y")
        C.range16(b, 4 * x, real)
        C.range16(b, y, real)
        return x, 2 * y
    assert _verdicts(_tiny(scaled)) == {"lo": False, "hi": False}

    def selected(b, real, boolean):
        s, x, y, z = b.main("s"), b.main("x"), b.main("y"), b.main("z")
        if boolean:
            b.assert_bool(s, name="s_bool")
        C.range16(b, x, real)
        C.range16(b, y, real)
        b.assert_zero(z - x - s * (y - x), name="select")
        return z, 0
    assert _verdicts(_tiny(lambda b, r: selected(b, r, True))) == {"lo": True, "hi": True}
    assert _verdicts(_tiny(lambda b, r: selected(b, r, False))) == {"lo": False, "hi": True}

    def other_flag(b, real):
        f, g, x = b.main("f"), b.main("g"), b.main("x")
        for name, v in (("f", f), ("g", g)):
            b.assert_bool(v, name=f"{name}_bool")
        b.assert_bool(f + g, name="one")
        b.assert_zero(real - f - g, name="real")
        C.range16(b, x, f)
        return x, 0
    assert _verdicts(_tiny(other_flag)) == {"lo": False, "hi": True}


def test_declared_prep_ranges():
    """The statement tables' preprocessed values lie in their DECLARED ranges (a sample
    statement; the declared ranges are how chips/program.py and chips/io.py build them)."""
    airs = {_base(a.name): a for a in proof_airs(1)}
    for (bus, j), (lo, hi) in DECLARED.items():
        air = airs["rv32_io" if bus == C.IO else "rv32_program"]
        model = Model(air, {})
        it = next(i for i in model.inters if i.bus == bus)
        (m, c), = it.values[j].items()
        assert c == 1 and len(m) == 1 and m[0] >= PREP0
        col = air.preprocessed[:, m[0] - PREP0].astype(np.int64)
        assert lo <= col.min() and col.max() <= hi, (bus, j)


def test_cursor_addresses_are_separate():
    """The exempt cursor tuples (registers 33..35) never meet another access: every other
    register access's address is below 33 (constants, PROGRAM's rd / rs1 / rs2) and the
    cursor access's is in [33, 36)."""
    airs = proof_airs(1)
    ranges = fixed_ranges(airs)
    for air in airs:
        if _base(air.name) in ("rv32_registers",):
            continue                      # the boundary: one tuple per register, 0..35
        model = Model(air, ranges)
        comps = components(model)
        for it in model.inters:
            if it.bus != C.MEM or p_const(it.values[0]) != C.REG:
                continue
            cursor = (_base(air.name), it.access) in _EXEMPT_ACC
            lo, hi = (33, 36) if cursor else (0, 33)
            t = Target(air.name, it.idx, 1, hi, it.access, "addr", model.fmt(it.values[1]))
            cols = p_vars(it.mult).union(*map(p_vars, it.values))
            comp = Component(model, set().union(*[c for c in comps if c & cols]))
            r = solve(comp, t)
            assert r.ok, (air.name, it.access, r.failure)
            if cursor:
                # and at least 33 wherever the access is made
                t2 = Target(air.name, it.idx, 1, 3, it.access, "addr", "")
                shifted = Inter(it.idx, it.bus, it.sign,
                                [it.values[0], p_add(it.values[1], {(): 33}, -1)] + it.values[2:],
                                it.mult)
                comp.by_idx[it.idx] = shifted
                assert solve(comp, t2).ok
                comp.by_idx[it.idx] = it


def test_docs_inventory_is_current():
    """docs/rv32.md holds this test's table (python tests/test_rv32_written_values.py)."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "rv32.md").read_text()
    assert "### Written values: the inventory" in doc
    assert markdown(1) in doc, "regenerate the table: python tests/test_rv32_written_values.py"


# ------------------------------------------------------------------ No count wraps mod p

BYTES_BUSES = (C.RANGE16, C.PAIR8, C.AND8)


def lookups_per_kind(air):
    """kind -> the number of BYTES lookups a row of that kind makes (multiplicities with the
    kind's flags set; any other boolean left counts at its maximum)."""
    model = Model(air, {})
    kinds = []
    for g in model.groups:
        kinds.extend(({u: int(u == v) for u in g}, model.var_name(v)) for v in g)
    if not kinds:
        flags = sorted({v for it in model.inters if it.bus in BYTES_BUSES
                        for v in p_vars(it.mult)})
        kinds = [({v: 1 for v in flags}, "+".join(model.var_name(v) for v in flags) or "row")]
    out = {}
    for assign, name in kinds:
        assign = {v: val for v, val in assign.items()}
        total = 0
        for it in model.inters:
            if it.bus not in BYTES_BUSES or it.sign < 0:
                continue
            m = p_subst(it.mult, assign)
            c = p_const(m)
            if c is None:
                vs = p_vars(m)
                assert all(v in model.bools for v in vs), (air.name, model.fmt(m))
                d = enum_bools(sorted(m.items()))
                assert 0 <= d[0] and d[1] <= 1, (air.name, model.fmt(m))
                total += d[1]
            else:
                assert 0 <= slift(c) <= 1, (air.name, model.fmt(m))
                total += slift(c)
        out[name] = total
    return out


def lookup_figures():
    st = {name: T.static_air(name, 2, 1) for name in T.CHIPS + ("memory", "ioword", "p2call")}
    per = {name: lookups_per_kind(st[name]) for name in st}
    p2call = max(per["p2call"].values())
    cycle = {}
    for chip in T.CHIPS:
        for kind, n in per[chip].items():
            cycle[f"{chip}:{kind}"] = n + (p2call if kind == "k_p2" else 0)
    return per, cycle, max(per["memory"].values()), max(per["ioword"].values())


def test_no_count_wraps():
    """docs/rv32.md "No count wraps mod p", re-derived: at most 2^24 cycles, each of one
    kind of one chip (a POSEIDON2 ECALL is its ECALL row and its P2CALL row), plus at most
    2^24 MEMORY rows and 2^24 IOWORD rows."""
    per, cycle, mem, iow = lookup_figures()
    worst = max(cycle, key=cycle.get)
    total = cycle[worst] * (1 << 24) + (mem + iow) * (1 << 24)
    print(f"\nBYTES lookups per row: " + "; ".join(
        f"{chip} {', '.join(f'{k}={v}' for k, v in kinds.items())}" for chip, kinds in per.items()))
    print(f"most per cycle: {worst} = {cycle[worst]}; memory {mem}, ioword {iow} per row; "
          f"2^24 * ({cycle[worst]} + {mem} + {iow}) = {total} < p = {P}")
    assert per["ecall"]["k_p2"] == 14 and per["p2call"]["real"] == 88
    assert per["div"]["f_div"] == 29 and mem == 4 and iow == 4
    assert worst == "ecall:k_p2" and cycle[worst] == 102
    assert total < P


if __name__ == "__main__":
    print(markdown(1))


def test_segment_boundary_tables_write_bounded_values():
    """A segment proof's boundary tables (chips/segment.py: PAGEMEM, SEGREGS) send only
    verifier-built words on rv32_mem: the analysis bounds every one of them."""
    import test_rv32_segments as TS
    from steadfast.rv32.chips.program import image_of
    from steadfast.rv32.segments import run_segments, segment_airs
    prog = TS.program(300)
    seg = list(run_segments(prog, TS.INPUT, 1 << 20, TS.SEG))[1]
    ranges = fixed_ranges(proof_airs(1))
    for a in segment_airs(image_of(prog), TS.INPUT, seg, 2):
        if a.name in ("rv32_pagemem", "rv32_segregs"):
            res = analyse(a, ranges)
            assert res and all(r.ok for r in res), (a.name, [summarize(r) for r in res])
