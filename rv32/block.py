"""The statement of a block proof: a block's transactions (rv32/blockfile.py) in one proof.

A proof of a block of n transactions says: for every i in order, transaction i's program
run on its input within the block's max_cycles exits with ``exit_code[i]`` having written
``output[i]`` to fd 1 -- each transaction exactly the single-program statement of
rv32/statement.py.  The proof holds, in this order,

* for each transaction i, the 16 tables of :data:`TX_TABLES` (all of an RV32 proof's
  tables but the two stateless lookup tables), built under the bus namespace ``tx{i}/``
  (air/builder.py ``bus_namespace``): every stateful bus of transaction i -- execution,
  program, memory, image, exit, I/O, the POSEIDON2 call's memory side -- is its own, so
  no two transactions' tuples can balance each other, and each transaction's tables are
  sound exactly as a program proof's;
* once, the two stateless tables of :data:`SHARED` -- BYTES (byte and 16-bit range
  lookups) and POSEIDON2 (input -> output pairs of the permutation) -- on the un-prefixed
  buses every transaction sends to.  A lookup is a fact about its tuple, not about a
  transaction, so sharing them is sound; their multiplicities are the sums over the
  transactions.  The multiplicity argument needs every tuple's total sends below p
  (chips/bytes.py): :func:`check_block_size` refuses a proof whose tables could send p
  lookups in all.
* then, for every split chip of a transaction (docs/rv32.md "Split chips"), its piece
  ``tx{i}/alu+``, by transaction and then table order, built in the transaction's bus
  namespace and labelled by one public value, ``tables.piece_label`` = 18 i + the chip's
  index (:func:`pieces_of` reads and checks them; a block without pieces is the block
  proof of earlier releases).

Public values: each transaction's registers, io and ecall tables carry rv32/statement.py's
values (program digest, input SHA-256, max_cycles, exit code, output); the shared tables
none.  The transaction order is the table order, which the transcript absorbs.

**Chain state.**  Programs are pure functions of (image, input), so a block's effect is
its list of receipts (program digest, input digest, exit code, output).  A block extends
the chain state ``state_in`` (32 bytes; zeros at genesis) to :func:`state_out`, a SHA-256
over ``state_in`` and every receipt in order.  The verifier computes it from values the
proof binds, so a valid proof of a block fixes its state_out, and a node checks that
block N+1's state_in is block N's state_out.  A program that needs the chain's data
receives it as input (bound by the input digest) and returns the new data as output
(bound by the proof): state images travel as inputs and outputs, and the chain commits to
them through the receipts.  (The retired field-element VM kept a shared memory between
transactions and proved its initial and final digests; RISC-V programs each get a fresh
machine, which keeps a transaction's proof independent of every other's.)
"""
from __future__ import annotations

import hashlib
import struct

import numpy as np

from ..air.builder import bus_namespace
from ..verifier.errors import PublicValuesError, ShapeError
from ..verifier.poseidon2 import P

from . import abi
from .chips import bytes as bytes_chip
from .chips.common import AND8, PAIR8, POSEIDON2, RANGE16
from .chips.poseidon2_trace import poseidon2_trace
from .chips.program import image_of
from .statement import (PV_EXIT, PV_OUT_LEN, claimed_output, public_values)
from .tables import INDEX, SLOTTED, SPLITTABLE, TABLES, base_name, choose_slots, is_piece, \
    k_of_width, piece_label, piece_name, read_piece_labels, slot_mode, slots_from_widths, \
    static_air, table_airs

SHARED = ("bytes", "poseidon2")
MAX_PROOF_TABLES = 0xFFFF       # the proof format counts tables in a u16 (docs/protocol.md)
SHARED_BUSES = (RANGE16, PAIR8, AND8, POSEIDON2)
TX_TABLES = tuple(n for n in TABLES if n not in SHARED)
STATE_DOMAIN = b"steadfast/block-state/v2\x00"


def tx_prefix(i: int) -> str:
    return f"tx{int(i)}/"


def table_names(n_tx: int, pieces=()) -> list:
    """The block proof's tables in order: ``tx0/program`` ... ``tx{n-1}/p2call``, then
    ``bytes``, ``poseidon2``, then the split chips' pieces ``tx{i}/alu+`` (``pieces``:
    (transaction, chip) pairs, :func:`pieces_in`)."""
    return [tx_prefix(i) + t for i in range(n_tx) for t in TX_TABLES] + list(SHARED) + \
        [tx_prefix(i) + piece_name(c) for i, c in pieces]


def num_tables(n_tx: int) -> int:
    """The tables of a block proof without pieces (each piece is one more)."""
    return len(TX_TABLES) * n_tx + len(SHARED)


def pieces_in(tx_slots) -> list:
    """The (transaction, chip) pairs of the pieces in per-transaction slots (a piece
    ``alu+`` has its own k there), in proof order: by transaction, then TABLES order."""
    out = []
    for i, s in enumerate(tx_slots):
        chips = sorted((base_name(n) for n in s if is_piece(n)), key=INDEX.get)
        out += [(i, c) for c in chips]
    return out


def pieces_of(proof, n_tx: int) -> list:
    """The pieces of a block proof, from the public values of its tables after
    :func:`num_tables` (``tables.read_piece_labels``: each exactly one value, the
    ``piece_label`` of a transaction of the block and a chip of SPLITTABLE, strictly
    increasing; PublicValuesError, site ``rv32_pieces``, otherwise; ShapeError for too
    few tables)."""
    base = num_tables(n_tx)
    if len(proof.tables) < base:
        raise ShapeError(f"a proof of a block of {n_tx} transactions has {base} tables "
                         f"(and its split chips' pieces), this one {len(proof.tables)}")
    try:
        return read_piece_labels([tp.public_values for tp in proof.tables[base:]], n_tx, base)
    except ValueError as e:
        raise PublicValuesError(str(e), "rv32_pieces") from None


def _pick(rows: list) -> list:
    return [rows[INDEX[t]] for t in TX_TABLES]


def tx_airs(i: int, program, input: bytes, output: bytes, log_blowup: int, slots=None,
            image=None) -> list:
    """Transaction i's 16 AIRs (TX_TABLES order) in its bus namespace."""
    image = image_of(program) if image is None else image
    with bus_namespace(tx_prefix(i), SHARED_BUSES):
        return table_airs(image, bytes(input), bytes(output), log_blowup, slots, TX_TABLES)


def shared_airs(log_blowup: int, p2_slots: int = 1) -> list:
    return [static_air("bytes", log_blowup), static_air("poseidon2", log_blowup, p2_slots)]


def block_airs(programs, inputs, outputs, log_blowup: int, tx_slots, p2_slots: int) -> list:
    """Every AIR of a block proof in order (module docstring); a split chip's piece
    where a transaction's slots hold one (``"alu+"``: its k; docs/rv32.md "Split
    chips"), in its transaction's bus namespace."""
    out = []
    for i, (prog, data, outp) in enumerate(zip(programs, inputs, outputs)):
        out += tx_airs(i, prog, data, outp, log_blowup, tx_slots[i])
    out += shared_airs(log_blowup, p2_slots)
    for i, c in pieces_in(tx_slots):
        with bus_namespace(tx_prefix(i), SHARED_BUSES):
            out.append(static_air(piece_name(c), log_blowup, int(tx_slots[i][piece_name(c)])))
    return out


def stark_limit(max_cycles: int) -> int:
    """The cycle limit a block STARK's transactions carry: min(max_cycles, 2^24) (a
    transaction proved inside a block STARK runs within one epoch, at most 2^22 cycles,
    so within the block's limit; the ECALL chip holds its public limit below 2^24)."""
    return min(int(max_cycles), abi.MAX_CYCLES_CEILING)


def block_public_values(programs, inputs, outputs, exit_codes, max_cycles: int,
                        tx_slots=()) -> list:
    """Every table's public values, in proof order (the limit: :func:`stark_limit`; the
    pieces' labels for the pieces in ``tx_slots``)."""
    max_cycles = stark_limit(max_cycles)
    out = []
    for prog, data, outp, code in zip(programs, inputs, outputs, exit_codes):
        out += _pick(public_values(prog, data, outp, code, max_cycles))
    return out + [[] for _ in SHARED] + [[piece_label(c, i)] for i, c in pieces_in(tx_slots)]


def state_out(state_in: bytes, receipts) -> bytes:
    """The chain state after a block: SHA-256 over the domain, ``state_in``, the count and
    each receipt ``(program digest, input, exit_code, output)`` as digest(32) ||
    SHA-256(input) || u32 exit code || u32 len(output) || SHA-256(output)."""
    receipts = list(receipts)
    h = hashlib.sha256(STATE_DOMAIN)
    h.update(bytes(state_in))
    h.update(struct.pack("<I", len(receipts)))
    for digest, data, code, outp in receipts:
        h.update(bytes(digest))
        h.update(hashlib.sha256(bytes(data)).digest())
        h.update(struct.pack("<II", int(code), len(outp)))
        h.update(hashlib.sha256(bytes(outp)).digest())
    return h.digest()


# --------------------------------------------------------------------------- traces

class BlockTraces:
    """AIRs, traces and public values of a block proof (proof order), with each
    transaction's :class:`rv32.traces.Rv32Traces` (``txs``)."""

    def __init__(self, airs, traces, table_public_values, txs, p2_slots):
        self.airs, self.traces, self.table_public_values = airs, traces, table_public_values
        self.txs, self.p2_slots = txs, p2_slots

    @property
    def cycles(self) -> int:
        return sum(int(t.cycles) for t in self.txs)

    @property
    def pieces(self) -> list:
        """(transaction, chip) of every split chip's piece, in proof order."""
        return [(i, c) for i, tr in enumerate(self.txs) for c in tr.split]

    @property
    def names(self) -> list:
        return table_names(len(self.txs), self.pieces)

    def __iter__(self):
        return iter((self.airs, self.traces, self.table_public_values))


def build_block_traces(programs, executions, max_cycles: int, log_blowup: int,
                       slot_objective: str = "size", images=None) -> BlockTraces:
    """The block proof's tables from each transaction's execution (run with record=True)."""
    from .traces import build_traces
    max_cycles = stark_limit(max_cycles)
    airs, traces, pvs, txs, states, pieces = [], [], [], [], [], []
    counts = {bus: np.zeros(bytes_chip.SIZE, np.int64) for bus in bytes_chip.BUSES}
    # pieces only while the proof's table count stays within the format's u16, a
    # transaction adding at most one a SPLITTABLE table (4,095 transactions of 16 fill it)
    executions = list(executions)
    room = MAX_PROOF_TABLES - num_tables(len(executions))
    for i, (prog, ex) in enumerate(zip(programs, executions)):
        image = None if images is None else images[i]
        objective = slot_objective
        base, splits = slot_mode(objective)
        if splits and room - len(pieces) < len(SPLITTABLE):
            objective = base
        with bus_namespace(tx_prefix(i), SHARED_BUSES):
            tr = build_traces(prog, ex, max_cycles, log_blowup, image=image,
                              slot_objective=objective)
        airs += _pick(tr.airs)
        traces += _pick(tr.traces)
        pvs += _pick(tr.table_public_values)
        for c in tr.split:                  # the pieces go after the shared tables
            j = tr.names.index(piece_name(c))
            pieces.append((tr.airs[j], tr.traces[j], [piece_label(c, i)]))
        for bus in counts:
            counts[bus] += tr.lookup_counts[bus]
        states.append(tr.p2_states)
        txs.append(tr)
    for bus, c in counts.items():
        if c.max(initial=0) >= P:
            raise ValueError(f"{bus}: a tuple is looked up p times or more in one block")
    all_states = np.concatenate(states) if states else np.zeros((0, 16), np.uint32)
    k = choose_slots("poseidon2", max(1, all_states.shape[0]), log_blowup, slot_objective)
    airs += shared_airs(log_blowup, k)
    traces += [bytes_chip.bytes_trace(counts), poseidon2_trace(all_states, k)]
    pvs += [[] for _ in SHARED]
    for air, trace, pv in pieces:
        airs.append(air)
        traces.append(trace)
        pvs.append(pv)
    return BlockTraces(airs, traces, pvs, txs, k)


# --------------------------------------------------------------------------- reading a proof

def tx_public_values(pvs: list, i: int) -> list:
    """Transaction i's public values as a program proof's 18 tables (the shared ones
    empty), from a block proof's per-table public values."""
    rows = pvs[len(TX_TABLES) * i:len(TX_TABLES) * (i + 1)]
    full = [[] for _ in TABLES]
    for name, v in zip(TX_TABLES, rows):
        full[INDEX[name]] = list(v)
    return full


def check_shape(proof, n_tx: int) -> None:
    """The table count, and the pieces' labels after the block's tables (:func:`pieces_of`)."""
    pieces_of(proof, n_tx)


def claims_of(proof, n_tx: int) -> list:
    """Every transaction's (exit code, output) the proof claims (rv32.statement.Claim)."""
    check_shape(proof, n_tx)
    pvs = [list(tp.public_values) for tp in proof.tables]
    out = []
    for i in range(n_tx):
        try:
            out.append(claimed_output(tx_public_values(pvs, i)))
        except (ShapeError, PublicValuesError) as exc:
            raise type(exc)(f"transaction {i}: {exc}") from None
    return out


def slots_of(proof, n_tx: int) -> tuple:
    """(per-transaction slots, POSEIDON2's k) read off the proof's main widths."""
    check_shape(proof, n_tx)
    widths = [len(tp.ood_main) for tp in proof.tables]
    lb = proof.params.log_blowup
    tx_slots = []
    base = num_tables(n_tx)                 # the shared tables end there; then the pieces
    p2_width = widths[base - 1]
    for i in range(n_tx):
        w = [0] * len(TABLES)
        for name, x in zip(TX_TABLES, widths[len(TX_TABLES) * i:len(TX_TABLES) * (i + 1)]):
            w[INDEX[name]] = x
        w[INDEX["bytes"]] = widths[base - 2]
        w[INDEX["poseidon2"]] = p2_width
        try:
            s = slots_from_widths(w, lb)
        except ValueError as exc:
            raise ShapeError(f"transaction {i}: {exc}") from None
        p2 = s.pop("poseidon2")
        tx_slots.append(s)
    for j, (i, c) in enumerate(pieces_of(proof, n_tx)):
        try:
            tx_slots[i][piece_name(c)] = k_of_width(piece_name(c), widths[base + j], lb)
        except ValueError as exc:
            raise ShapeError(f"transaction {i}: {exc}") from None
    if n_tx == 0:
        by_width = {static_air("poseidon2", lb, k).main_width: k for k in SLOTTED["poseidon2"]}
        if p2_width not in by_width:
            raise ShapeError(f"poseidon2: main width {p2_width} is no k's")
        p2 = by_width[p2_width]
    return tx_slots, p2


def check_block_size(proof, airs) -> None:
    """Refuse a proof whose tables could send p lookups in all (module docstring): the sum
    over tables of height x the sends per row must stay below p."""
    total = 0
    for tp, air in zip(proof.tables, airs):
        sends = sum(1 for it in air.interactions if it.sign > 0)
        total += (1 << tp.log_n) * sends
    if total >= P:
        raise ShapeError(f"the block's tables send {total} lookups, p = {P} or more: the "
                         "lookup argument needs fewer")


__all__ = ["SHARED", "SHARED_BUSES", "TX_TABLES", "table_names", "num_tables", "tx_airs",
           "shared_airs", "block_airs", "block_public_values", "state_out", "BlockTraces",
           "build_block_traces", "tx_public_values", "claims_of", "slots_of",
           "check_block_size", "check_shape", "tx_prefix", "PV_EXIT", "PV_OUT_LEN",
           "pieces_of", "pieces_in", "MAX_PROOF_TABLES"]
