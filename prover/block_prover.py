"""Proving blocks of the reference VM (docs/api.md "Proving"): :class:`BlockProver` adds to
the generic :class:`prover.core.ProverCore` what a block needs -- executing it, building
its five tables and the claims check, the tables a node built itself, sizing a proof
without making it, development-mode fakes and the kernels a block's proof launches.  The
block's proofs are :class:`prover.block_proof.BlockProof`; they verify with
:func:`prover.block_verify.verify`.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Sequence

import numpy as np

from ..air import ConstraintViolation, check_constraints
from ..vm.airs import CPU_LAYOUT, SELECTORS, TABLES, block_airs, slots_from_widths
from ..vm.interpreter import ExecutionError, claim_mismatches, execute
from ..vm.statement import NUM_PUBLIC_VALUES
from ..vm.traces import build_traces

from .block_proof import DEV_NOTICE, BlockLike, BlockProof, as_block
from .block_report import ExecutionReport, TableEstimate
from .config import ProverConfig
from .control import PROVE_LOCK, limits
from .core import ProgressCallback, ProverCore
from .errors import UnprovableBlock
from .stats import ProofStats, peak_rss_bytes
from .timeline import Timeline
from .txblock_proof import is_txblock


class BlockProver(ProverCore):
    """Proves blocks, one after another, with one configuration (the generic guarantees
    are :class:`prover.core.ProverCore`'s).  Construction also builds the
    block-independent AIRs once."""

    def __init__(self, config: ProverConfig | None = None,
                 progress: ProgressCallback | None = None,
                 timeline: Timeline | None = None) -> None:
        super().__init__(config, progress, timeline)
        # build and cache the static AIRs (of this configuration's log_blowup)
        block_airs(np.zeros((2, 4), dtype=np.int64), log_blowup=self.config.params().log_blowup)

    def prove_block(self, block: BlockLike, *, timeout: float | None = None,
                    cancel: threading.Event | None = None) -> BlockProof:
        """Execute and prove ``block`` (see :meth:`_prove_block`).  ``timeout`` (seconds)
        and ``cancel`` (a :class:`threading.Event` another thread may set) stop the proof
        with :class:`ProofAborted` at the next protocol stage boundary, or while it waits
        for the process lock; stages are short (a fraction of the proof), so the stop is
        prompt, not instantaneous."""
        if is_txblock(block):                   # block format 2: RISC-V transactions
            return self.prove_txblock(block, timeout=timeout, cancel=cancel)
        with limits(timeout, cancel):
            return self._prove_block(block)

    def _prove_block(self, block: BlockLike) -> BlockProof:
        """Execute ``block`` (a :class:`vm.block.Block`, dict, JSON text or path) and prove
        it.  Raises :class:`vm.block.BlockError` for a malformed block and
        :class:`UnprovableBlock` when it cannot be proven.  In development mode
        (:attr:`dev_mode`) the result is a marked fake (``dev=True``), see :meth:`_dev_proof`."""
        t0 = time.perf_counter()
        if self.dev_mode:
            return self._dev_proof(block, t0)
        phases: dict = {}
        rec, bt = self._build(block, phases)
        return self._prove_tables_of(bt.airs, bt.traces, bt.table_public_values,
                                     rec.rom.rows, rec.cycles, phases, t0)

    def _build(self, block, phases: dict):
        """Execute ``block`` and build its tables -> (execution record, block traces);
        :class:`UnprovableBlock` when execution fails or the claims are false (shared with
        the cluster mode, :mod:`prover.cluster`, which proves the tables elsewhere)."""
        block = as_block(block)
        with self._phase("execute", phases):
            try:
                rec = execute(block)
            except ExecutionError as exc:
                raise UnprovableBlock(f"execution failed: {exc}") from None
        with self._phase("traces", phases):
            bt = build_traces(rec, log_blowup=self.config.params().log_blowup)
        wrong = claim_mismatches(rec)
        if wrong:
            # name the constraint that the false claim breaks (the trace check would)
            try:
                check_constraints(bt.airs[0], bt.traces[0], bt.table_public_values[0])
                table = constraint = None
            except ConstraintViolation as exc:
                table, constraint = exc.table, exc.constraint
            raise UnprovableBlock("the claimed outputs are not what execution writes",
                                  table, constraint, wrong)
        return rec, bt

    def _check_tables(self, airs, tables, table_pv, phases: dict) -> None:
        """The AIR check mode on every table: a violation is an :class:`UnprovableBlock`."""
        self._check_unprovable(UnprovableBlock, airs, tables, table_pv, phases)

    def prove_tables(self, tables: Sequence[np.ndarray], public_values: Sequence[int],
                     rom: np.ndarray) -> BlockProof:
        """Prove traces built by the caller: ``tables`` = (CPU, PROGRAM, MEMORY, RANGE,
        POSEIDON2) main traces (uint32[n, w]) in that order, ``public_values`` the 42 block
        values (vm/statement.py), ``rom`` the int[rows, 4] ROM (opcode, a, b, c).  A
        slotted table's k (vm/airs.py SLOTTED: POSEIDON2 packs k permutations per row) is
        read off its width, which must be that of a k in its menu (ValueError otherwise)."""
        t0 = time.perf_counter()
        tables = list(tables)
        if len(tables) != len(TABLES):
            raise ValueError(f"expected {len(TABLES)} tables ({', '.join(TABLES)}), got {len(tables)}")
        pv = [int(v) for v in public_values]
        if len(pv) != NUM_PUBLIC_VALUES:
            raise ValueError(f"expected {NUM_PUBLIC_VALUES} public values, got {len(pv)}")
        rom = np.asarray(rom)
        if rom.ndim != 2 or rom.shape[1] != 4 or rom.shape[0] < 1:
            raise ValueError(f"rom must have shape (rows, 4), got {rom.shape}")
        shapes = [np.shape(t) for t in tables]
        bad = [name for name, sh in zip(TABLES, shapes) if len(sh) != 2]
        if bad:
            raise ValueError(f"table {bad[0]} is not a 2-d trace (uint32[n, w])")
        airs = block_airs(rom.astype(np.int64), slots_from_widths([sh[1] for sh in shapes]),
                          self.config.params().log_blowup)
        table_pv = [pv, [], [pv[0]], [], []]
        sel = [CPU_LAYOUT.idx[f"is_{n.lower()}"] for n in SELECTORS]
        cycles = int(np.count_nonzero(np.asarray(tables[0])[:, sel].sum(axis=1)))
        return self._prove_tables_of(airs, tables, table_pv, rom.astype(np.int64), cycles, {},
                                     t0)

    def execute(self, block: BlockLike) -> ExecutionReport:
        """Run the VM on ``block`` and size its proof without proving it: cycles, every
        table's rows, padded height and committed cells, the host and device bytes a proof
        would need, the conjectured security of this configuration for those heights, and
        whether the claimed outputs are what execution writes (``claims_ok``; a false
        claim is reported, not raised).  :class:`UnprovableBlock` when execution fails or
        a table is taller than the protocol supports; :class:`vm.block.BlockError` for a
        malformed block."""
        if is_txblock(block):
            return self.execute_txblock(block)
        from ..verifier.protocol import table_shape
        from ..verifier.security import proof_security
        from ..vm.traces import memory_accesses
        from .pipeline import estimate_bytes
        t0 = time.perf_counter()
        block = as_block(block)
        try:
            rec = execute(block)
        except ExecutionError as exc:
            raise UnprovableBlock(f"execution failed: {exc}") from None
        wrong = claim_mismatches(rec)
        params = self.config.params()
        bt = build_traces(rec, log_blowup=params.log_blowup)
        used = {"cpu": rec.cycles, "program": int(rec.rom.rows.shape[0]),
                "memory": int(memory_accesses(bt.traces[0]).shape[0]),
                "poseidon2": int(rec.hash_in.shape[0])}
        for name, k in bt.slots.items():       # a slotted table fills ceil(items / k) rows
            used[name] = -(-used[name] // k)
        rows, log_ns = [], []
        for air, t in zip(bt.airs, bt.traces):
            n = int(t.shape[0])
            log_n = n.bit_length() - 1
            try:
                shape = table_shape(air, log_n, params)
            except ValueError as exc:
                raise UnprovableBlock(f"cannot be proven with these parameters: {exc}") from None
            cells = (n << params.log_blowup) * (air.main_width + 4 * air.aux_width
                                                + 4 * air.num_parts)
            rows.append(TableEstimate(air.name, used.get(air.name, n), n, air.main_width,
                                      air.aux_width, air.num_parts, cells,
                                      estimate_bytes(shape)))
            log_ns.append(log_n)
        sec = proof_security(params, bt.airs, log_ns)
        dev = [r.device_bytes for r in rows]
        return ExecutionReport(
            cycles=int(rec.cycles), tables=tuple(rows), claims_ok=not wrong,
            mismatches=tuple(wrong), final_digest=tuple(int(x) for x in rec.final_digest),
            log_blowup=params.log_blowup, committed_cells=sum(r.committed_cells for r in rows),
            host_bytes=sum(dev) + sum(int(t.nbytes) for t in bt.traces),
            device_bytes=sum(dev), device_bytes_min=max(dev), security_bits=int(sec.bits),
            seconds=time.perf_counter() - t0)

    def _dev_proof(self, block, t0: float) -> BlockProof:
        """Development mode: execute, build the tables, check the claims and every
        constraint and bus (the AIR check mode), and return a :class:`BlockProof` marked
        ``dev`` that carries the ROM and the public values -- and no STARK."""
        phases: dict = {}
        rec, bt = self._build(block, phases)
        with PROVE_LOCK:
            self._check_tables(bt.airs, bt.traces, bt.table_public_values, phases)
        body = DEV_NOTICE + np.asarray(bt.public_values, dtype="<u4").tobytes()
        phases["total"] = time.perf_counter() - t0
        stats = ProofStats(counters={"dev_mode": True}, backend=self.backend,
                           cycles=int(rec.cycles), phases=phases, proof_bytes=len(body),
                           peak_rss_bytes=peak_rss_bytes())
        return BlockProof(np.asarray(rec.rom.rows, dtype=np.int64), body, stats, dev=True)

    def precompile(self, block: BlockLike | None = None,
                   progress: Callable[[dict], None] | None = None) -> list[dict]:
        """Compile the device kernels ``block`` needs (its five AIRs' generated kernels and
        the stage kernels) for this prover's backend ahead of proving, through the on-disk
        kernel cache (``PROVER_KERNEL_CACHE``, :mod:`kernels.kernel_cache`): a later process
        starts warm.  ``block``: as for :meth:`prove_block` (with the slots its traces
        would get); None: what a block of the default shapes needs -- the AIRs of
        :func:`vm.airs.block_airs` with its default slots (every slotted table at k = 1)
        and an empty ROM (the PROGRAM kernel does not depend on the ROM's values); a
        slotted table at another k compiles its kernels when a proof first needs them
        (pass the block, or one of the same shapes, to include them).
        -> one dict per step (name, seconds, how: generated | cache | compiled | in memory);
        ``sim`` generates the sources only (the simulator compiles nothing); ``host`` and
        ``emu`` run host kernels, which numba caches itself: nothing to do, []."""
        if self.backend not in ("cuda", "sim"):
            return []
        from ..vm.traces import block_slots
        lb = self.config.params().log_blowup        # the AIRs' LogUp degree depends on it
        if block is None:       # the default shapes: k = 1 for every slotted table
            airs = block_airs(np.zeros((1, 4), dtype=np.int64), log_blowup=lb)
        else:
            try:
                rec = execute(as_block(block))
            except ExecutionError as exc:
                raise UnprovableBlock(f"execution failed: {exc}") from None
            airs = block_airs(rec.rom.rows, block_slots(rec, log_blowup=lb), lb)
        from ..kernels.constraint_device import precompile
        return precompile(airs, compile=self.backend == "cuda", progress=progress)


    def _prove_tables_of(self, airs, tables, table_pv, rom, cycles: int, phases: dict,
                         t0: float) -> BlockProof:
        """The generic proof (:meth:`ProverCore._prove`) of a block's tables, as a
        :class:`BlockProof` with its ROM."""
        proof, stats = self._prove(airs, tables, table_pv, cycles, phases, t0,
                                   self._check_tables)
        return BlockProof(np.asarray(rom, dtype=np.int64), proof, stats)


__all__ = ["BlockProver"]
