"""Check mode: evaluate every constraint on the trace itself and balance the buses.

The prover runs this before committing anything (unless told not to), so a wrong trace
is reported as "table T, constraint C, row r" instead of as a proof that fails to verify.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from . import field as F
from .builder import Air, AirError, check_buses
from .eval import domain_leaf
from .program import evaluate
from steadfast.errors import SteadfastError


class ConstraintViolation(SteadfastError, ValueError):
    """A constraint is nonzero on a row it applies to."""

    def __init__(self, table: str, constraint: str, row: int, value: int):
        self.table, self.constraint, self.row, self.value = table, constraint, row, value
        super().__init__(f"table {table!r}: constraint {constraint!r} fails at row {row} "
                         f"(value {value})")


class LookupImbalance(SteadfastError, ValueError):
    """A bus's sends and receives do not cancel."""

    def __init__(self, bus: str, values: tuple, net: int):
        self.bus, self.values, self.net = bus, values, net
        super().__init__(f"bus {bus!r}: tuple {values} is unbalanced (net multiplicity "
                         f"{net} = sends - receives mod p)")


def check_shapes(air: Air, main: np.ndarray, public_values: Sequence[int]) -> None:
    """Validate one table's witness against its AIR (dtype, width, height, values)."""
    if not isinstance(main, np.ndarray):
        raise TypeError(f"{air.name}: trace must be a numpy uint32 array")
    if main.dtype != np.uint32:
        raise TypeError(f"{air.name}: trace dtype must be uint32, got {main.dtype}")
    if main.ndim != 2 or main.shape[1] != air.main_width:
        raise AirError(f"{air.name}: trace shape {main.shape}, expected (n, {air.main_width})")
    n = main.shape[0]
    if n < 2 or n & (n - 1):
        raise AirError(f"{air.name}: trace height {n} is not a power of two >= 2")
    if air.fixed_height is not None and n != air.fixed_height:
        raise AirError(f"{air.name}: trace height {n} != preprocessed height {air.fixed_height}")
    if np.any(main >= F.P):
        raise AirError(f"{air.name}: trace holds non-canonical values (>= p)")
    if len(public_values) != air.num_public:
        raise AirError(f"{air.name}: {len(public_values)} public values given, the AIR "
                       f"declares {air.num_public} ({', '.join(air.public_names)})")
    for v in public_values:
        if not 0 <= int(v) < F.P:
            raise AirError(f"{air.name}: public value {v} is not a canonical field element")


def _trace_leaf(air: Air, main: np.ndarray, public_values):
    prep = None if air.preprocessed is None else air.preprocessed.T
    return domain_leaf(main.T, prep, None, 1, [int(v) for v in public_values], {})


def check_constraints(air: Air, main: np.ndarray, public_values: Sequence[int] = ()) -> None:
    """Raise :class:`ConstraintViolation` naming the first failing row and, at that row,
    the first failing user constraint in declaration order.  LogUp constraints are covered by
    :func:`check_lookups` (they only hold for the honest aux trace)."""
    check_shapes(air, main, public_values)
    n = main.shape[0]
    leaf = _trace_leaf(air, main, public_values)
    user = air.user_constraints
    if not user:
        return
    values = evaluate(air.user_program, leaf)   # LogUp constraints need challenges
    rows = np.arange(n)
    first_bad = None                      # (row, constraint index, value)
    for i, (c, v) in enumerate(zip(user, values)):
        v = np.broadcast_to(np.asarray(v, dtype=np.uint64), (n,))
        mask = {"all": np.ones(n, bool), "first": rows == 0, "last": rows == n - 1,
                "transition": rows < n - 1}[c.when]
        bad = np.nonzero((v != 0) & mask)[0]
        if bad.size and (first_bad is None or bad[0] < first_bad[0]):
            first_bad = (int(bad[0]), i, int(v[bad[0]]))
    if first_bad is not None:
        r, i, val = first_bad
        raise ConstraintViolation(air.name, user[i].name, r, val)


def interaction_rows(air: Air, main: np.ndarray, public_values: Sequence[int] = ()):
    """Per interaction: (values uint64[k, n], multiplicity uint64[n]) on the trace rows."""
    n = main.shape[0]
    outs = evaluate(air.interaction_program, _trace_leaf(air, main, public_values))
    result = []
    pos = 0
    for it in air.interactions:
        k = len(it.values)
        vals = np.stack([np.broadcast_to(np.asarray(v, dtype=np.uint64), (n,)) for v in outs[pos:pos + k]])
        mult = np.broadcast_to(np.asarray(outs[pos + k], dtype=np.uint64), (n,))
        result.append((vals, mult))
        pos += k + 1
    return result


def check_lookups(airs: Sequence[Air], mains: Sequence[np.ndarray],
                  public_values: Sequence[Sequence[int]] | None = None) -> None:
    """Exact multiset check: for every bus and tuple, sends - receives = 0 (mod p)."""
    check_buses(airs)
    if public_values is None:
        public_values = [()] * len(airs)
    per_bus: dict[str, list] = {}
    for air, main, pv in zip(airs, mains, public_values):
        if not air.interactions:
            continue
        for it, (vals, mult) in zip(air.interactions, interaction_rows(air, main, pv)):
            signed = mult.astype(np.int64) if it.sign > 0 else -mult.astype(np.int64)
            per_bus.setdefault(it.bus, []).append((vals.T.astype(np.int64), signed))
    for bus in sorted(per_bus):
        keys = np.concatenate([k for k, _ in per_bus[bus]])
        mult = np.concatenate([m for _, m in per_bus[bus]])
        if keys.shape[0] == 0:
            continue
        # group equal tuples: sort rows lexicographically (first field most significant),
        # then sum each run of equal rows (np.unique(axis=0) did the same, 10x slower)
        order = np.lexsort(keys.T[::-1]) if keys.shape[1] else np.arange(keys.shape[0])
        ks, ms = keys[order], mult[order]
        new = np.ones(ks.shape[0], dtype=bool)
        new[1:] = np.any(ks[1:] != ks[:-1], axis=1)
        starts = np.flatnonzero(new)
        net = np.add.reduceat(ms, starts) % F.P
        bad = np.flatnonzero(net)
        if bad.size:
            i = int(bad[0])
            raise LookupImbalance(bus, tuple(int(x) for x in ks[starts[i]]), int(net[i]))


def check_traces(airs: Sequence[Air], mains: Sequence[np.ndarray],
                 public_values: Sequence[Sequence[int]] | None = None) -> None:
    """Check mode for a whole block: every table's constraints (tables in order), then
    every bus.  Raises ConstraintViolation / LookupImbalance / AirError."""
    if len(airs) != len(mains):
        raise AirError(f"{len(airs)} AIRs but {len(mains)} traces")
    if public_values is None:
        public_values = [()] * len(airs)
    if len(public_values) != len(airs):
        raise AirError(f"{len(public_values)} public-value lists for {len(airs)} tables")
    for air, main, pv in zip(airs, mains, public_values):
        check_constraints(air, main, pv)
    check_lookups(airs, mains, public_values)
