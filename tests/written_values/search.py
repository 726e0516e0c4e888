"""The bound of one written value (tests/written_values/__init__.py): a search over case
splits (one-hot groups, then boolean variables) of the target's column component,
propagating domains through the constraints on each case; the sources of a bound, for the
inventory."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .algebra import (EMPTY, HALF, P, PREP0, PV0, VIRT0, and8_range, d_add, d_const, d_meet,
                      d_mul, d_norm, d_scale, enum_bools, is_bool, p_add, p_const, p_subst,
                      p_vars, slift, within)
from .model import Model, Target

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
