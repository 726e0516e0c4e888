"""Proving blocks of RISC-V transactions (block format version 2, rv32/blockfile.py):
:class:`TxBlockProver` adds to :class:`prover.engine.prover_core.ProverCore` what such a block needs --
running every transaction on the machine, checking the block's claims, building the
block's tables (rv32/block.py) and sizing a proof without making it.  The proof goes
through :meth:`ProverCore._prove` like every other: the same backends, device pipeline,
recovery, XCHECK, self-check, statistics, timeline, process lock, timeout and cancel.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from ...rv32 import block as rblock
from ...rv32.traces import committed_cells

from ..engine.control import PROVE_LOCK, limits
from ..engine.prover_core import ProverCore
from ..common.errors import UnprovableBlock
from ..common.stats import ProofStats, peak_rss_bytes
from ..common.text import show_output
from .transactions import _check_claims, _claims, run_transaction
from .proof import TxBlockLike, TxBlockProof, as_txblock, dev_body, state_out_of


@dataclass(frozen=True)
class TxReport:
    """One transaction as executed: cycles, exit code, output (and stderr)."""
    index: int
    name: str
    cycles: int
    exit_code: int
    output: bytes
    stderr: bytes = b""
    claims_ok: bool | None = None      # the block's claims for it hold (None: it claims none)
    claim_error: str | None = None

    def to_json(self) -> dict:
        return {"index": self.index, "program": self.name, "cycles": self.cycles,
                "exit_code": self.exit_code, "output": self.output.hex(),
                "stderr": self.stderr.decode("utf-8", "replace"), "claims_ok": self.claims_ok,
                "claim_error": self.claim_error}


@dataclass(frozen=True)
class TxBlockReport:
    """What ``prove --execute-only`` reports for a block: every transaction, the block's
    cycles, every table's padded height and committed cells, the state after the block."""
    transactions: tuple[TxReport, ...]
    cycles: int
    max_cycles: int
    state_in: bytes
    state_out: bytes
    tables: tuple[tuple[str, int, int, int, int, int], ...] = field(default=())
    # (name, rows, main, aux, parts, cells) per table
    committed_cells: int = 0
    log_blowup: int = 2
    seconds: float = 0.0
    security_bits: int = 0                     # the configured parameters' for these heights
    #: a block in epochs: its parts ({kind, first, count, cycles, segments}); ``tables``
    #: are then the first part's (a long part's: its first segment's)
    parts: tuple[dict, ...] = ()
    segment_cycles: int | None = None

    @property
    def claims_ok(self) -> bool:
        """Every claim the block makes holds (a false one is reported, not raised)."""
        return all(t.claims_ok is not False for t in self.transactions)

    def to_json(self) -> dict:
        return {"claims_ok": self.claims_ok, "transactions": [t.to_json() for t in self.transactions],
                "cycles": self.cycles, "max_cycles": self.max_cycles,
                "state_in": self.state_in.hex(), "state_out": self.state_out.hex(),
                "tables": [{"table": n, "rows": r, "main": m, "aux": a, "parts": p,
                            "committed_cells": c} for n, r, m, a, p, c in self.tables],
                "committed_cells": self.committed_cells, "log_blowup": self.log_blowup,
                "security_bits": self.security_bits, "seconds": round(self.seconds, 4),
                "segment_cycles": self.segment_cycles, "parts": list(self.parts)}

    def summary(self) -> str:
        lines = [f"{len(self.transactions)} transactions, {self.cycles:,} cycles"]
        for t in self.transactions:
            # the outputs as prove and verify print them (prover/common/text.py)
            lines.append(f"  tx {t.index} ({t.name}): exit code {t.exit_code}, {t.cycles:,} "
                         f"cycles, output ({len(t.output):,} bytes): {show_output(t.output)}")
            if t.claims_ok is False:
                lines.append(f"    FALSE CLAIM: {t.claim_error}")
        lines.append(f"state out {self.state_out.hex()}")
        if self.parts:
            lines.append(f"proved in {len(self.parts)} parts (epochs of "
                         f"{self.segment_cycles:,} cycles); the tables below are part 0's:")
            for j, p in enumerate(self.parts):
                last = p["first"] + p["count"] - 1
                txs = f"tx {p['first']}" + (f"..{last}" if last != p["first"] else "")
                seg = f", {p['segments']} segments" if p["kind"] == "long" else ""
                lines.append(f"  part {j}: {p['kind']}, {txs}, {p['cycles']:,} cycles{seg}")
        lines.append(f"{len(self.tables)} tables, {self.committed_cells:,} committed cells "
                     f"per unit of blowup; log_blowup {self.log_blowup}: "
                     f"{self.security_bits} conjectured security bits; {self.seconds:.2f}s")
        return "\n".join(lines)


class TxBlockProver(ProverCore):
    """Proves blocks of RISC-V transactions (the generic guarantees are ProverCore's)."""

    def prove_txblock(self, block: TxBlockLike, *, timeout: float | None = None,
                      cancel: threading.Event | None = None) -> TxBlockProof:
        """Run every transaction of ``block`` (a :class:`rv32.blockfile.Block`, its JSON
        object, JSON text or a path) and prove them in one proof (rv32/block.py) ->
        :class:`TxBlockProof` (``exit_codes``, ``outputs``, ``state_out``, ``stats``);
        a block that does not fit one epoch of ``config.segment_cycles`` cycles (a
        transaction or the transactions together longer) is proved in parts ->
        :class:`prover.blocks.epochs.BlockEpochsProof`, the same attributes (docs/rv32.md
        "Blocks in epochs").
        Raises :class:`rv32.blockfile.BlockError` for a malformed block and
        :class:`UnprovableBlock` naming the transaction when one fails to execute or
        does not bear out the block's claims."""
        with limits(timeout, cancel):
            t0 = time.perf_counter()
            blk = as_txblock(block)
            phases: dict = {}
            S = self.config.segment_cycles
            from .epoch_prover import surely_one_epoch
            if S is not None and not self.dev_mode and not surely_one_epoch(blk, S):
                from .epoch_prover import block_plan, one_epoch, prove_epochs, size_block
                with self._phase("size", phases):
                    runs = size_block(blk, S)
                plan = block_plan(runs, S)
                if not one_epoch(plan):
                    return prove_epochs(self, blk, runs, plan, t0, phases)
            exs, bt = self._build_txblock(blk, phases)
            state = state_out_of(blk, exs)
            if self.dev_mode:
                with PROVE_LOCK:
                    self._check_txblock(bt.airs, bt.traces, bt.table_public_values, phases)
                # a development proof carries the block's tables' values, not the pieces'
                body = dev_body(bt.table_public_values[:rblock.num_tables(len(bt.txs))])
                phases["total"] = time.perf_counter() - t0
                stats = ProofStats(counters={"dev_mode": True}, backend=self.backend,
                                   cycles=bt.cycles, phases=phases, proof_bytes=len(body),
                                   peak_rss_bytes=peak_rss_bytes())
                return TxBlockProof(len(blk.transactions), body, stats, True, state)
            proof, stats = self._prove(bt.airs, bt.traces, bt.table_public_values, bt.cycles,
                                       phases, t0, self._check_txblock)
            return TxBlockProof(len(blk.transactions), proof, stats, False, state)

    def _check_txblock(self, airs, tables, table_pv, phases: dict) -> None:
        self._check_unprovable(UnprovableBlock, airs, tables, table_pv, phases)

    def _build_txblock(self, blk, phases: dict, claims: bool = True):
        """Run every transaction, check the block's claims (``claims``), build the tables
        -> (executions, rv32.block.BlockTraces)."""
        with self._phase("execute", phases):
            exs = [run_transaction(i, tx, blk.max_cycles, claims)
                   for i, tx in enumerate(blk.transactions)]
        with self._phase("traces", phases):
            bt = rblock.build_block_traces([t.program for t in blk.transactions], exs,
                                           blk.max_cycles, **self.config.trace_options())
        return exs, bt

    def execute_txblock(self, block: TxBlockLike) -> TxBlockReport:
        """Run ``block`` and size its proof without proving it (:class:`TxBlockReport`,
        with the configured parameters' security for these heights; a false claim is
        reported, not raised); errors as :meth:`prove_txblock`'s (:class:`UnprovableBlock`
        also when a table is taller than the protocol supports).  A block in epochs is
        reported with its ``parts`` and part 0's tables."""
        t0 = time.perf_counter()
        blk = as_txblock(block)
        S = self.config.segment_cycles
        from .epoch_prover import surely_one_epoch
        if S is not None and not surely_one_epoch(blk, S):
            from .epoch_prover import block_plan, one_epoch, size_block
            runs = size_block(blk, S, claims=False)
            plan = block_plan(runs, S)
            if not one_epoch(plan):
                return self._execute_epochs(blk, runs, plan, S, t0)
        exs, bt = self._build_txblock(blk, {}, claims=False)
        rows, sec = self._table_rows(bt.names, bt.airs, bt.traces)
        params = self.config.params()
        txs = tuple(TxReport(i, tx.name, int(ex.cycles), int(ex.exit_code), bytes(ex.output),
                             bytes(ex.stderr), *_claims(i, tx, ex))
                    for i, (tx, ex) in enumerate(zip(blk.transactions, exs)))
        return TxBlockReport(txs, sum(t.cycles for t in txs), blk.max_cycles, blk.state_in,
                             state_out_of(blk, exs), tuple(rows), sum(r[5] for r in rows),
                             params.log_blowup, time.perf_counter() - t0, int(sec.bits))

    def _execute_epochs(self, blk, runs, plan, S: int, t0: float) -> TxBlockReport:
        """:meth:`execute_txblock` of a block in epochs: every transaction (its sizing
        run), the parts, and part 0's tables."""
        from ...rv32.segments import run_segments
        from ...rv32.traces import build_traces
        from .epochs import KIND_NAMES, LONG
        kind, first, count = plan[0]
        txs0 = blk.transactions[first:first + count]
        if kind == LONG:
            seg = next(iter(run_segments(txs0[0].program, txs0[0].input, blk.max_cycles, S)))
            tr = build_traces(txs0[0].program, None, blk.max_cycles, segment=seg,
                              **self.config.trace_options())
            names, airs, traces = tr.names, tr.airs, tr.traces
        else:
            exs = [run_transaction(first + k, tx, blk.max_cycles, False)
                   for k, tx in enumerate(txs0)]
            bt = rblock.build_block_traces([t.program for t in txs0], exs, blk.max_cycles,
                                           **self.config.trace_options())
            names, airs, traces = bt.names, bt.airs, bt.traces
        rows, sec = self._table_rows(names, airs, traces)
        parts = tuple({"kind": KIND_NAMES[k], "first": a, "count": c,
                       "cycles": sum(r.cycles for r in runs[a:a + c]),
                       "segments": -(-runs[a].cycles // S) if k == LONG else 0}
                      for k, a, c in plan)
        txs = tuple(TxReport(i, tx.name, r.cycles, r.exit_code, r.output, r.stderr,
                             *_claims(i, tx, r))
                    for i, (tx, r) in enumerate(zip(blk.transactions, runs)))
        return TxBlockReport(txs, sum(t.cycles for t in txs), blk.max_cycles, blk.state_in,
                             state_out_of(blk, runs), tuple(rows), sum(r[5] for r in rows),
                             self.config.params().log_blowup, time.perf_counter() - t0,
                             int(sec.bits), parts, S)

    def _table_rows(self, names, airs, traces) -> tuple:
        """Each table's (name, rows, main, aux, parts, cells) and the configured
        parameters' security for these heights; a table taller than the protocol
        supports is an :class:`UnprovableBlock`."""
        from ...verifier.protocol import table_shape
        from ...verifier.security import proof_security
        params = self.config.params()
        rows, log_ns = [], []
        for name, air, t in zip(names, airs, traces):
            n = int(t.shape[0])
            try:
                table_shape(air, n.bit_length() - 1, params)
            except ValueError as exc:
                raise UnprovableBlock(f"{name}: cannot be proven with these parameters: "
                                      f"{exc}") from None
            rows.append((name, n, air.main_width, air.aux_width, air.num_parts,
                         committed_cells(air, n)))
            log_ns.append(n.bit_length() - 1)
        return rows, proof_security(params, airs, log_ns)

    def precompile_txblock(self, block: TxBlockLike,
                           progress: Callable[[dict], None] | None = None) -> list[dict]:
        """Compile the device kernels a proof of ``block`` launches (its AIRs at the slots
        its tables get) for this prover's backend, through the kernel cache (``[]`` on
        host and emu, which launch none); ``progress(step)`` is called per kernel."""
        if self.backend not in ("cuda", "sim"):
            return []
        from ...kernels.constraint_device import precompile
        blk = as_txblock(block)
        S = self.config.segment_cycles
        from .epoch_prover import surely_one_epoch
        if S is not None and not surely_one_epoch(blk, S):
            from .epoch_prover import block_plan, one_epoch, part_airs, size_block
            runs = size_block(blk, S)
            plan = block_plan(runs, S)
            if not one_epoch(plan):         # every part's AIRs, one part at a time
                steps: list = []
                for part in plan:
                    steps += precompile(part_airs(self, blk, part), progress=progress,
                                        compile=self.backend == "cuda")
                return steps
        _, bt = self._build_txblock(blk, {})
        return precompile(bt.airs, compile=self.backend == "cuda", progress=progress)


    # -- the block names of the public API (docs/api.md) ------------------------------
    def prove_block(self, block: TxBlockLike, *, timeout: float | None = None,
                    cancel: threading.Event | None = None) -> TxBlockProof:
        """:meth:`prove_txblock`: run and prove a block of RISC-V transactions.
        ``timeout`` (seconds) and ``cancel`` (a :class:`threading.Event` another thread
        may set) stop the proof with :class:`ProofAborted` at the next protocol stage
        boundary, or while it waits for the process lock."""
        return self.prove_txblock(block, timeout=timeout, cancel=cancel)

    def execute(self, block: TxBlockLike) -> "TxBlockReport":
        """:meth:`execute_txblock`: run a block and size its proof without proving it."""
        return self.execute_txblock(block)

    def precompile(self, block: TxBlockLike,
                   progress: Callable[[dict], None] | None = None) -> list[dict]:
        """:meth:`precompile_txblock`: compile the device kernels a block's proof needs."""
        return self.precompile_txblock(block, progress)


@dataclass(frozen=True)
class TxBlockAirs:
    """What rebuilds a block proof's AIRs elsewhere (a cluster worker): every
    transaction's program, input and claimed output, the slots, the blowup.  ``airs()`` is
    cached per process, one block at a time."""
    programs: tuple
    inputs: tuple
    outputs: tuple
    tx_slots: tuple                 # per transaction: ((table, k), ...) sorted
    p2_slots: int
    log_blowup: int
    key: bytes = field(default=b"", compare=False)

    def airs(self) -> list:
        hit = _AIRS.get(self.key)
        if hit is None or hit[0] != self:
            hit = (self, rblock.block_airs(self.programs, self.inputs, self.outputs,
                                           self.log_blowup, [dict(s) for s in self.tx_slots],
                                           self.p2_slots))
            _AIRS.clear()
            _AIRS[self.key] = hit
        return hit[1]


_AIRS: dict = {}


def txblock_airs_spec(blk, exs, bt, log_blowup: int) -> TxBlockAirs:
    """The :class:`TxBlockAirs` of a built block (its executions and traces)."""
    import hashlib
    progs = tuple(t.program for t in blk.transactions)
    ins = tuple(bytes(t.input) for t in blk.transactions)
    outs = tuple(bytes(e.output) for e in exs)
    slots = tuple(tuple(sorted((k, int(v)) for k, v in tr.slots.items() if k != "poseidon2"))
                  for tr in bt.txs)
    h = hashlib.sha256(repr((slots, bt.p2_slots, log_blowup)).encode())
    for prog, d, o in zip(progs, ins, outs):
        h.update(prog.digest() + hashlib.sha256(d).digest() + hashlib.sha256(o).digest())
    return TxBlockAirs(progs, ins, outs, slots, int(bt.p2_slots), log_blowup, h.digest())


__all__ = ["TxBlockProver", "TxBlockReport", "TxReport", "run_transaction", "TxBlockAirs",
           "txblock_airs_spec"]
