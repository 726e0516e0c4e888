"""docs/rv32.md "No count wraps mod p", re-derived from the AIRs: the premise of the
written-values inventory (tests/test_rv32_written_values.py) that no multiplicity count on
the BYTES buses reaches p (the BYTES lookups a row of each kind makes:
tests/written_values/analysis.py)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from written_values.algebra import P  # noqa: E402
from written_values.analysis import lookup_figures  # noqa: E402


def test_no_count_wraps():
    """docs/rv32.md "No count wraps mod p", re-derived: at most 2^24 cycles, each of one
    kind of one chip (a POSEIDON2 ECALL is its ECALL row and its P2CALL row), plus at most
    2^24 MEMORY rows and 2^24 IOWORD rows."""
    per, cycle, mem, iow = lookup_figures()
    worst = max(cycle, key=cycle.get)
    total = cycle[worst] * (1 << 24) + (mem + iow) * (1 << 24)
    print("\nBYTES lookups per row: " + "; ".join(
        f"{chip} {', '.join(f'{k}={v}' for k, v in kinds.items())}" for chip, kinds in per.items()))
    print(f"most per cycle: {worst} = {cycle[worst]}; memory {mem}, ioword {iow} per row; "
          f"2^24 * ({cycle[worst]} + {mem} + {iow}) = {total} < p = {P}")
    assert per["ecall"]["k_p2"] == 14 and per["p2call"]["real"] == 88
    assert per["div"]["f_div"] == 29 and mem == 4 and iow == 4
    assert worst == "ecall:k_p2" and cycle[worst] == 102
    assert total < P


def test_exec_bus_count_with_split_chips():
    """docs/rv32.md "No count wraps mod p" and "Split chips": the execution chain's raw
    interactions, every instruction chip and its possible piece at the widest slot menu,
    2^24 rows each, plus ECALL's 2^24, stay below p of each sign."""
    from steadfast.rv32 import tables as T
    chips = [c for c in T.CHIPS if c != "ecall"]       # the chips on rv32_exec but ECALL
    assert set(chips) <= set(T.SPLITTABLE) and "ecall" not in T.SPLITTABLE
    assert set(T.SPLITTABLE) - set(chips) == {"p2call"}        # not on rv32_exec
    assert 2 * (1 << 24) < P                                   # rv32_p2call with its piece
    widest = max(max(T.slot_menu(c)) for c in chips)
    total = 2 * len(chips) * widest * (1 << 24) + (1 << 24)
    print(f"\nrv32_exec: 2 x {len(chips)} tables x {widest} slots x 2^24 + 2^24 = {total} < p")
    assert total < P and total < 1.23e9
