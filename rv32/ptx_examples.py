"""The RV32IM tables' device kernels for the PTX check (``python -m steadfast.kernels.ptx_check
... steadfast.rv32.ptx_examples``, tests/test_ptx.py): the protocol core registers no
machine's tables (kernels/constraint_device.register_example_airs generates air/examples
AIRs only), so this front-end module passes its own.

:func:`airs` builds the statement's tables for guests/bin/hello.elf (PROGRAM's kernel does
not depend on the ROM's values, IO's not on the bytes: they are preprocessed data) at the
default log_blowup and their default slots (k = 1, what :func:`rv32.tables.choose_slots`
picks for the smallest proof), plus POSEIDON2's two device parts (PARTS;
rv32/chips/poseidon2.py ``device_split``): one slot's permutation constraints, the kernel
every k shares, and the LogUp-only AIR; the whole POSEIDON2 AIR generates only its LogUp
kernel.  :func:`ptx_examples` is the hook kernels/ptx_check.py calls after importing a
module: every table and part, or the comma-separated names of
``$STEADFAST_PTX_RV32_TABLES``.  All of them take many minutes of NVVM on the 2-core
machine, the slot's quotient (282 constraints in one kernel) about 50 s of CPU by itself,
twice the device modules' whole check; tests/test_ptx.py compiles a subset::

    python -m steadfast.kernels.ptx_check steadfast.rv32.ptx_examples   # every RV32 kernel
    STEADFAST_PTX_RV32_TABLES=poseidon2_slot python -m steadfast.kernels.ptx_check \
        steadfast.rv32.ptx_examples                          # the slot kernel alone
"""
from __future__ import annotations

import os
from pathlib import Path

HELLO = Path(__file__).resolve().parents[1] / "guests" / "bin" / "hello.elf"


PARTS = ("poseidon2_slot", "poseidon2_logup")     # POSEIDON2's device split, by AIR name


def airs(names=None, log_blowup: int | None = None) -> list:
    """The RV32 tables' AIRs at their default slots: every table, each followed by its
    device split's AIRs (POSEIDON2: the slot and LogUp-only AIRs), or those ``names``
    give -- rv32/tables.py table names (the table's AIR alone) and PARTS (a split part
    alone), in the order given."""
    from ..kernels.constraint_device import split_of
    from ..verifier.proof_format import Params
    from .chips.program import image_of
    from .elf import load_elf
    from .tables import TABLES, table_airs
    bad = [n for n in (names or ()) if n not in TABLES and n not in PARTS]
    if bad:
        raise ValueError(f"no RV32 table {', '.join(bad)} (tables: {', '.join(TABLES)}; "
                         f"parts: {', '.join(PARTS)})")
    lb = Params().log_blowup if log_blowup is None else log_blowup
    by_name = dict(zip(TABLES, table_airs(image_of(load_elf(HELLO)), b"abc",
                                          b"hello from rv32im\ncba", lb)))
    slot, _, _, logup = split_of(by_name["poseidon2"])
    parts = {"poseidon2_slot": slot, "poseidon2_logup": logup}
    if names is None:
        names = [n for t in TABLES for n in ((t,) + PARTS if t == "poseidon2" else (t,))]
    return [by_name[n] if n in by_name else parts[n] for n in names]


def ptx_examples(names=None) -> list:
    """Generate (and so register for kernels.ptx_check) the kernels of :func:`airs` of
    ``names`` (default: ``$STEADFAST_PTX_RV32_TABLES``, else every table and part) -> those
    AIRs."""
    from ..kernels.constraint_device import generated
    if names is None and os.environ.get("STEADFAST_PTX_RV32_TABLES"):
        names = [n.strip() for n in os.environ["STEADFAST_PTX_RV32_TABLES"].split(",")
                 if n.strip()]
    out = airs(names)
    for a in out:
        generated(a)
    return out


__all__ = ["airs", "ptx_examples", "HELLO", "PARTS"]
