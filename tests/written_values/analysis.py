"""The written-values analysis of whole proofs (tests/written_values/__init__.py): the
fixed tables' ranges, every AIR's report (one result per written value), the inventory and
its markdown table (docs/rv32.md), and the BYTES lookups a row makes (docs/rv32.md "No count
wraps mod p")."""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from steadfast.rv32 import tables as T
from steadfast.rv32.chips import common as C
from steadfast.rv32.statement import program_airs

from .algebra import PV0, d_norm, d_of_values, enum_bools, p_const, p_subst, p_vars, slift
from .model import DECLARED, Model, _base
from .search import Component, Result, compress, solve

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import rv32_samples as S  # noqa: E402

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
