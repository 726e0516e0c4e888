"""One AIR as the written-values analysis sees it (tests/written_values/__init__.py): its
constraints and interactions as polynomials, the facts its lookups and receives give, its
one-hot flag groups and its targets (every value it writes), with the exemptions and the
statement tables' declared ranges."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from steadfast.rv32.chips import common as C

from .algebra import (P, PREP0, PV0, TWO16, VIRT0, d_of_values, expand, p_add, p_const,
                      p_key, p_mul, slift)

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
