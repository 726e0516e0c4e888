"""Slots: k independent copies of a chip's row side by side in one table row.

An instruction chip has no transition constraint -- its rows are tied together only by
the buses -- so a table row may hold k of them (the POSEIDON2 table's slots,
docs/rv32.md): slot j's columns and constraints are the one-slot chip's, named
``name@j``, in columns [j w, (j + 1) w), each slot with its own sends and receives.  The
k-slot AIR accepts a trace exactly when the k = 1 AIR accepts the trace of its n k
one-slot rows (item i in row i // k, slot i % k), so each k is sound on its own.  Slots
cut padding (a table's height is next_pow2(ceil(items / k))) and share the quotient parts
among k items.  k = 1 is the plain AIR (names unchanged).

The verifier reads k off a table's main width (k times the one-slot width).
"""
from __future__ import annotations

from ...air import AirBuilder

SLOT_MENU = (1, 2, 3, 4)
PIECE_SUFFIX = "+"        # a split chip's second table: "alu+", AIR "rv32_alu+"


class SlotBuilder:
    """The AirBuilder calls a chip's body makes, with every column and constraint name of
    slot j suffixed ``@j`` (nothing changes when k = 1)."""

    def __init__(self, b: AirBuilder, j: int, k: int):
        self._b = b
        self._sfx = "" if k == 1 else f"@{j}"

    def _n(self, name):
        return None if name is None else f"{name}{self._sfx}"

    def main(self, name):
        return self._b.main(self._n(name))

    def main_cols(self, name, count):
        return [self._b.main(f"{name}[{i}]{self._sfx}") for i in range(count)]

    def pv(self, name):
        return self._b.pv(name)

    def assert_zero(self, expr, name=None):
        self._b.assert_zero(expr, name=self._n(name))

    def assert_bool(self, x, name=None):
        self._b.assert_bool(x, name=self._n(name))

    def when_transition(self, expr, name=None):
        self._b.when_transition(expr, name=self._n(name))

    def send(self, bus, values, multiplicity=1):
        self._b.send(bus, values, multiplicity)

    def receive(self, bus, values, multiplicity=1):
        self._b.receive(bus, values, multiplicity)


def slotted(name: str, body, k: int, log_blowup: int, public=(), piece: bool = False):
    """The AIR ``name`` with k slots of ``body(builder)``; ``piece``: the AIR of the
    chip's second table (rv32/tables.py "Split chips"), named ``name+``, the same columns
    and constraints with one public value more, ``piece_of`` (the chip's table index),
    which no constraint reads: the verifier takes the table's identity from it."""
    if k not in SLOT_MENU:
        raise ValueError(f"{name}: k = {k!r} slots is not in {SLOT_MENU}")
    if piece:
        name, public = name + PIECE_SUFFIX, tuple(public) + ("piece_of",)
    b = AirBuilder(name, public=public)
    for j in range(k):
        body(SlotBuilder(b, j, k))
    return b.build(log_blowup=log_blowup)


def base_names(air, k: int) -> list:
    """Slot 0's column names without the suffix: the one-slot column order."""
    w = air.main_width // k
    names = list(air.main_names[:w])
    return names if k == 1 else [n[:-2] for n in names]


__all__ = ["SlotBuilder", "slotted", "base_names", "SLOT_MENU", "PIECE_SUFFIX"]
