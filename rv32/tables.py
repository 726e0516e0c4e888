"""The tables of an RV32IM proof, in proof order, and their AIRs.

==========  ============================================================  ============
table       rows                                                          module
==========  ============================================================  ============
program     the image's nonzero words (preprocessed, decoded)             chips.program
memory      every touched or image word, sorted (boundary)                chips.memory
registers   x0..x31, the sink, the cursors (preprocessed; boundary)       chips.registers
io          the input and output bytes (preprocessed)                     chips.io
bytes       2^16 rows: AND, byte pairs, 16-bit range (preprocessed)       chips.bytes
alu         ADD SUB SLT SLTU (+ I forms)                                  chips.alu
bitwise     XOR OR AND (+ I forms)                                        chips.alu
shift       SLL SRL SRA (+ I forms)                                       chips.shift
branch      the six branches                                              chips.branch
load        LB LH LW LBU LHU                                              chips.loadstore
store       SB SH SW                                                      chips.loadstore
jump        LUI AUIPC JAL JALR FENCE                                      chips.jump
mul         MUL MULH MULHSU MULHU                                         chips.muldiv
div         DIV DIVU REM REMU                                             chips.muldiv
ecall       the system calls                                              chips.ecall
ioword      the words read(0) writes and write(1) reads                   chips.io
p2call      the memory side of SYS_POSEIDON2                              chips.precompile
poseidon2   the permutations                                              chips.poseidon2
==========  ============================================================  ============

Only program (the image), registers (the entry point) and io (input and output) depend on
the statement; the others are built once per (k, LogUp degree cap) (air/builder.py
``logup_degree_cap``: the AIR depends on log_blowup only through it).  The instruction
chips and POSEIDON2 hold k items a row (chips/slots.py, ``SLOTTED``), k chosen per proof
(:func:`choose_slots`: by default for the smallest proof, else the fewest cells) and read
back off the widths.  A proof may list after the 18 a second table for chips of
:data:`SPLITTABLE`, their pieces (``alu+``; :func:`choose_split`, :func:`table_names`,
docs/rv32.md "Split chips"), read back off the pieces' one public value.
"""
from __future__ import annotations

import threading

import numpy as np

from ..air.builder import (current_bus_namespace, gc_paused, logup_degree_cap,
                           outside_bus_namespace)

from .chips.alu import build_alu, build_bitwise
from .slot_shapes import SHAPES as PINNED_SHAPES
from .chips.branch import build_branch
from .chips.bytes import build_bytes
from .chips.ecall import build_ecall
from .chips.io import build_io, build_ioword
from .chips.jump import build_jump
from .chips.loadstore import build_load, build_store
from .chips.memory import build_memory
from .chips.muldiv import build_div, build_mul
from .chips.poseidon2 import P2_SLOTS, build_poseidon2
from .chips.precompile import build_p2call
from .chips.program import build_program
from .chips.registers import build_registers
from .chips.shift import build_shift
from .chips.slots import PIECE_SUFFIX, SLOT_MENU
from .chips.common import pow2_rows

TABLES = ("program", "memory", "registers", "io", "bytes", "alu", "bitwise", "shift", "branch",
          "load", "store", "jump", "mul", "div", "ecall", "ioword", "p2call", "poseidon2")
INDEX = {name: i for i, name in enumerate(TABLES)}
CHIPS = ("alu", "bitwise", "shift", "branch", "load", "store", "jump", "mul", "div", "ecall")
_BUILDERS = {"memory": build_memory, "bytes": build_bytes, "alu": build_alu,
             "bitwise": build_bitwise, "shift": build_shift, "branch": build_branch, "load": build_load,
             "store": build_store, "jump": build_jump, "mul": build_mul, "div": build_div,
             "ecall": build_ecall, "ioword": build_ioword, "p2call": build_p2call}
_CACHE: dict = {}
_LOCK = threading.Lock()
# Tables whose rows may hold k items side by side (chips/slots.py), with their menus of k;
# POSEIDON2's are chips/poseidon2.py's.  The others have k = 1.
SLOTTED = {name: SLOT_MENU for name in ("alu", "bitwise", "shift", "branch", "load", "store",
                                        "jump", "mul", "div")}
SLOTTED["poseidon2"] = P2_SLOTS

# Split chips (docs/rv32.md "Split chips"): an instruction chip's items (or P2CALL's: like
# them it has no transition constraint) may fill two tables,
# the chip's own (a power of two, full) and after the 18 its second table, the piece
# ``name+`` (the same AIR with the public value piece_of = INDEX[name]).  A proof lists its
# pieces in TABLES order, at most one a chip; a proof without pieces is the 18-table proof.
SPLITTABLE = ("alu", "bitwise", "shift", "branch", "load", "store", "jump", "mul", "div",
              "p2call")
SPLIT_MIN_ROWS = 1 << 12      # no split of a table under 2^13 rows: too few cells to matter
# A piece costs its opened rows (about num_queries rows of its width, whatever its height:
# 10-20 KB at the default parameters) and Merkle nodes: a split must save at least this
# many committed cells per cycle of the run (the whole proof commits 80-170 a cycle).
SPLIT_MIN_SAVING = 2


def piece_name(chip: str) -> str:
    return chip + PIECE_SUFFIX


def base_name(name: str) -> str:
    """The chip a table's rows belong to: ``alu`` for ``alu`` and ``alu+``."""
    return name[:-len(PIECE_SUFFIX)] if name.endswith(PIECE_SUFFIX) else name


def is_piece(name: str) -> bool:
    return name.endswith(PIECE_SUFFIX) and base_name(name) in SPLITTABLE


def table_names(split=()) -> tuple:
    """A proof's tables in proof order: TABLES, then the pieces of the chips ``split``
    (each in SPLITTABLE, at most once, in TABLES order)."""
    split = tuple(split)
    for c in split:
        if c not in SPLITTABLE:
            raise ValueError(f"{c!r} is not a chip that splits ({', '.join(SPLITTABLE)})")
    if [INDEX[c] for c in split] != sorted({INDEX[c] for c in split}):
        raise ValueError(f"split chips {list(split)}: each at most once, in table order")
    return TABLES + tuple(piece_name(c) for c in split)


def piece_label(chip: str, tx: int = 0) -> int:
    """A piece's one public value: 18 tx + the chip's index in TABLES (a program's or a
    segment's proof is transaction 0; a block's transaction tx, rv32/block.py)."""
    return len(TABLES) * int(tx) + INDEX[chip]


def read_piece_labels(pvs, n_tx: int = 1, first: int = len(TABLES)) -> list:
    """The (transaction, chip) pieces named by ``pvs``, the public values of a proof's
    tables after its fixed ones (table ``first`` on): each exactly one value, the
    :func:`piece_label` of a chip of SPLITTABLE and a transaction below ``n_tx``,
    strictly increasing.  ValueError naming the first table that is not."""
    out, last = [], -1
    for j, pv in enumerate(pvs):
        pv = [int(v) for v in pv]
        tx, c = divmod(pv[0], len(TABLES)) if len(pv) == 1 else (-1, 0)
        if not (0 <= tx < n_tx and TABLES[c] in SPLITTABLE and pv[0] > last):
            what = "the index" if n_tx == 1 else "18 x transaction + the index"
            raise ValueError(f"table {first + j}: public values {pv} name no piece (one "
                             f"value, {what} of one of {', '.join(SPLITTABLE)}, "
                             f"increasing)")
        last = pv[0]
        out.append((tx, TABLES[c]))
    return out


def split_of_public_values(pvs) -> tuple:
    """The split chips of a program's or segment's proof from its tables' public values
    (proof order): the 18 tables, then the pieces (:func:`read_piece_labels`).  ValueError
    naming what is wrong (too few tables, a piece's values)."""
    pvs = list(pvs)
    if len(pvs) < len(TABLES):
        raise ValueError(f"an RV32 proof has at least {len(TABLES)} tables, this one "
                         f"{len(pvs)}")
    return tuple(c for _, c in read_piece_labels(pvs[len(TABLES):]))


def piece_public_values(split) -> list:
    """The pieces' public values (after the 18 tables'), for the chips ``split``."""
    return [[piece_label(c)] for c in split]


#: ``ProverConfig.slots`` -> (the objective of every slotted table's k, whether chips
#: split): "split" and "cells-split" are "size" and "cells" with split chips, the piece
#: at the same objective (prover/engine/config.py SLOT_OBJECTIVES lists the same names)
SLOT_MODES = {"size": ("size", False), "cells": ("cells", False),
              "split": ("size", True), "cells-split": ("cells", True)}


def slot_mode(objective: str) -> tuple:
    """(k objective, splits) of a slot objective (:data:`SLOT_MODES`); ValueError naming
    the objectives for any other."""
    if objective not in SLOT_MODES:
        raise ValueError(f"objective {objective!r}: one of {', '.join(map(repr, SLOT_MODES))}")
    return SLOT_MODES[objective]


def choose_split(name: str, items: int, k: int, log_blowup: int, cycles: int = 0,
                 piece_objective: str = "size"):
    """Where ``name``'s ``items`` items (k a row) go when the chip may split: None (one
    table, pow2_rows(ceil(items / k)) rows) or (first, k2): the first ``first`` items
    fill the chip's table of first / k rows (a power of two) and the rest go to the
    piece with k2 a row (the smallest proof's k).  Split only where the one table has
    more than SPLIT_MIN_ROWS rows and the two tables commit fewer cells than the one (the
    rest fills at most half of the chip's power of two), by at least SPLIT_MIN_SAVING
    cells per cycle of the run's ``cycles``."""
    if name not in SPLITTABLE:
        return None
    rows = pow2_rows(-(-int(items) // k))
    if rows <= SPLIT_MIN_ROWS:
        return None
    half = rows // 2
    first = half * k
    rest = int(items) - first
    if rest <= 0:
        return None
    k2 = choose_slots(name, rest, log_blowup, piece_objective)
    cells = _slot_shape(name, log_blowup, k)[1]
    one, two = rows * cells, half * cells + \
        pow2_rows(-(-rest // k2)) * _slot_shape(name, log_blowup, k2)[1]
    return (first, k2) if one - two >= max(1, SPLIT_MIN_SAVING * int(cycles)) else None


def slot_menu(name: str) -> tuple:
    return SLOTTED.get(base_name(name), (1,))


def static_air(name: str, log_blowup: int, k: int = 1):
    """The AIR of a statement-independent table with k slots (cached per LogUp degree
    cap -- the AIR depends on log_blowup only through it -- and per bus namespace,
    air.builder.bus_namespace: a block's transaction i builds its tables in its own)."""
    if k not in slot_menu(name):
        raise ValueError(f"{name}: k = {k!r} slots is not in its menu {slot_menu(name)}")
    if base_name(name) != name and not is_piece(name):
        raise ValueError(f"{name}: no such table")
    ns = current_bus_namespace()
    key = (name, logup_degree_cap(log_blowup), k, ns)
    with _LOCK:
        got = _CACHE.get(key)
    if got is not None:
        return got
    if ns is not None:
        # a namespace renames buses and nothing else: the AIR built once outside it,
        # re-tagged (air.builder.Air.in_namespace; built afresh where it declines)
        with outside_bus_namespace():
            base = static_air(name, log_blowup, k)
        got = base.in_namespace(ns[0], ns[1])
    with _LOCK:
        if key not in _CACHE:
            if got is None:
                with gc_paused():
                    got = _build(name, log_blowup, k)
            _CACHE[key] = got
        return _CACHE[key]


def _build(name: str, log_blowup: int, k: int):
    if is_piece(name):
        if base_name(name) in SLOTTED:
            return _BUILDERS[base_name(name)](log_blowup, k, piece=True)
        return _BUILDERS[base_name(name)](log_blowup, piece=True)
    if name == "poseidon2":
        return build_poseidon2(k, log_blowup)
    if name in SLOTTED:
        return _BUILDERS[name](log_blowup, k)
    return _BUILDERS[name](log_blowup)


def cells_per_row(air) -> int:
    return air.main_width + 4 * air.aux_width + 4 * air.num_parts


def opening_bytes(air, rows: int, log_blowup: int, num_queries: int = 50) -> float:
    """A table's expected share of a proof (docs/protocol.md section 5), in bytes: its
    opened rows (the expected d distinct rows of q queries x the committed width, 4 bytes
    an element).  Its Merkle nodes are not its own since proof format 6 (one mixed tree
    per round kind for all tables, whose multiproofs hardly depend on one table's
    height).  The model behind :func:`choose_slots`' "size" objective."""
    return _opening_bytes(cells_per_row(air), rows, log_blowup, num_queries)


def _opening_bytes(cells: int, rows: int, log_blowup: int, num_queries: int = 50) -> float:
    h = max(1, int(rows).bit_length() - 1) + log_blowup
    q = float(num_queries)
    d = (1 << h) * -np.expm1(q * np.log1p(-1.0 / (1 << h)))     # distinct rows of q draws
    return 4 * d * cells


_SHAPES: dict = {}


def _slot_shape(name: str, log_blowup: int, k: int) -> tuple[int, int]:
    """(main width, cells_per_row) of ``name``'s AIR with k slots: the same in every bus
    namespace (a namespace renames buses, it changes no width or degree), so a block's
    later transactions choose their slots, and a proof's widths give back its slots,
    without building every k's AIR in each namespace."""
    name = base_name(name)           # a piece has its chip's columns and cells
    key = (name, logup_degree_cap(log_blowup), k)
    with _LOCK:
        got = _SHAPES.get(key) or PINNED_SHAPES.get(key)
    if got is None:
        air = static_air(name, log_blowup, k)
        got = (air.main_width, cells_per_row(air))
        with _LOCK:
            _SHAPES[key] = got
    return got


def measured_slot_shapes() -> dict:
    """Every slotted table's shape at both LogUp caps, from its AIR: what
    rv32/slot_shapes.py pins (the test's side)."""
    out = {}
    for lb in (1, 2):
        cap = logup_degree_cap(lb)
        for name in SLOTTED:
            for k in slot_menu(name):
                air = static_air(name, lb, k)
                out[(name, cap, k)] = (air.main_width, cells_per_row(air))
    return out


def choose_slots(name: str, items: int, log_blowup: int, objective: str = "size") -> int:
    """The k of ``name``'s menu for ``items`` items (rows = pow2_rows(ceil(items / k))):
    objective "size" (the default) takes the k with the smallest :func:`opening_bytes` --
    in practice k = 1, as a slot widens every opened row k times; "cells" the k committing the fewest cells (the faster prover, proofs
    up to 1.6 times larger).  Ties to the smaller k."""
    by_cells = slot_mode(objective)[0] == "cells"
    best = None
    for k in slot_menu(name):
        cells = _slot_shape(name, log_blowup, k)[1]
        rows = pow2_rows(-(-int(items) // k))
        cost = rows * cells if by_cells else \
            _opening_bytes(cells, rows, log_blowup)
        if best is None or cost < best[0]:
            best = (cost, k)
    return best[1]


def slots_from_widths(widths, log_blowup: int, names=TABLES) -> dict:
    """Every slotted table's k from the tables' main widths (proof order; ``names``: the
    proof's tables, :func:`table_names`); ValueError for a width that no k of the menu
    gives."""
    widths = list(widths)
    if len(widths) != len(names):
        raise ValueError(f"{len(widths)} tables, this RV32 proof has {len(names)}")
    return {name: k_of_width(name, widths[names.index(name)], log_blowup)
            for name in names if base_name(name) in SLOTTED}


def k_of_width(name: str, w: int, log_blowup: int) -> int:
    """The k of slotted table ``name`` (a piece too) whose main width is ``w``;
    ValueError if no k of its menu gives it."""
    # a slot adds columns: the widths increase with k (tests/test_rv32_airs.py), so the
    # menu is searched upwards and left at the first width past w
    for k in sorted(slot_menu(name)):
        got = _slot_shape(name, log_blowup, k)[0]
        if got >= w:
            break
    if got != w:
        raise ValueError(f"{name}: main width {w} is not that of k in {slot_menu(name)}")
    return k


def table_airs(image, input: bytes, output: bytes, log_blowup: int, slots=None,
               names=TABLES) -> list:
    """Every table's AIR in proof order (image: :func:`chips.program.image_of`; ``slots``:
    table -> k for the slotted tables, 1 where not given); ``names``: only these tables,
    in that order (a block's transaction builds none of the shared ones)."""
    slots = dict(slots or {})
    with gc_paused():
        out = []
        for name in names:
            if name == "program":
                out.append(build_program(image, log_blowup))
            elif name == "registers":
                out.append(build_registers(image.entry_w, log_blowup))
            elif name == "io":
                out.append(build_io(input, output, log_blowup))
            else:
                out.append(static_air(name, log_blowup, int(slots.get(name, 1))))
        return out


__all__ = ["TABLES", "INDEX", "CHIPS", "SLOTTED", "slot_menu", "static_air", "table_airs",
           "choose_slots", "slots_from_widths", "cells_per_row", "opening_bytes",
           "SPLITTABLE", "table_names", "split_of_public_values", "piece_public_values",
           "piece_label", "read_piece_labels", "SLOT_MODES", "slot_mode",
           "choose_split", "piece_name", "base_name", "is_piece", "k_of_width"]


if __name__ == "__main__":          # pragma: no cover - regenerates rv32/slot_shapes.py
    for key, v in measured_slot_shapes().items():
        print(f"    {key!r}: {v!r},")
