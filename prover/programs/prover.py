"""Proving RV32IM programs (docs/api.md "Proving programs"): :class:`ProgramProver` adds to
the generic :class:`prover.engine.prover_core.ProverCore` what a program needs -- running it on the
machine (rv32/), building its tables (rv32/traces.py), sizing a proof without making it,
development-mode fakes and the kernels its proof launches.  The proofs go through
:meth:`ProverCore._prove` like a block's: the same backends, device pipeline, recovery,
XCHECK, self-check, statistics, timeline, process lock, timeout and cancel.  They are
:class:`prover.programs.proof.ProgramProof`; they verify with
:func:`prover.programs.verify.verify_program`.
"""
from __future__ import annotations

import threading
import time

import numpy as np
from dataclasses import dataclass, field
from typing import Callable

from ...rv32 import abi
from ...rv32.errors import ExecutionError
from ...rv32.run import execute as rv32_execute
from ...rv32.statement import program_airs
from ...rv32.tables import SLOTTED, TABLES
from ...rv32.traces import build_traces, committed_cells

from ..engine.control import PROVE_LOCK, limits
from ..engine.prover_core import ProverCore
from ..common.errors import UnprovableProgram
from .proof import (ElfLike, ProgramProof, as_input, as_program, check_max_cycles,
                    dev_body)
from .report import ProgramReport, ProgramTableEstimate
from ..common.stats import ProofStats, peak_rss_bytes

import logging
log = logging.getLogger("steadfast.prover")

#: a program's default cycle limit (segmented; a one-proof carries at most 2^24)
DEFAULT_MAX_CYCLES = 1 << 30
#: ``prove_program(segment_cycles=CONFIG)``: the config's segment size
CONFIG = object()


@dataclass(frozen=True)
class ProgramAirs:
    """What rebuilds a program proof's AIRs elsewhere (a cluster worker): the program, the
    input, the output the proof claims, the slots and the blowup.  ``airs()`` is cached
    per process (the PROGRAM and IO AIRs depend on the statement; the others are cached by
    rv32.tables)."""
    program: object
    input: bytes
    output: bytes
    slots: tuple                    # ((table, k), ...) sorted
    log_blowup: int
    key: bytes = field(default=b"", compare=False)
    split: tuple = ()                # the chips with a second table (rv32/tables.py)

    def airs(self) -> list:
        hit = _AIRS.get(self.key)
        if hit is None or hit[0] != self:
            hit = (self, program_airs(self.program, self.input, self.output, self.log_blowup,
                                      dict(self.slots), split=self.split))
            _AIRS.clear()                # one statement at a time per worker
            _AIRS[self.key] = hit
        return hit[1]


_AIRS: dict = {}


class ProgramProver(ProverCore):
    """Proves RV32IM programs (the generic guarantees are :class:`ProverCore`'s)."""

    def prove_program(self, elf: ElfLike, input: bytes = b"", *,
                      max_cycles: int | None = None, timeout: float | None = None,
                      cancel: threading.Event | None = None,
                      segment_cycles: int | None | object = CONFIG):
        """Run ``elf`` (an :class:`rv32.Program`, the ELF's bytes or its path) on ``input``
        (fd 0's bytes) within ``max_cycles`` cycles and prove that it exits with its exit
        code having written its output to fd 1 (rv32/statement.py) -> a
        :class:`ProgramProof` (``exit_code``, ``output``, ``stats``), or for a run longer
        than one segment a :class:`prover.programs.segment_proof.SegmentedProof` (the same
        attributes; docs/rv32.md "Long programs: segments").

        ``segment_cycles``: a power of two in [2^10, 2^22] (default: the config's,
        2^20), or None for one proof only.  A run that ends within one segment is one
        :class:`ProgramProof`, byte for byte the proof made without segments; a longer
        one is proved as linked segments, one at a time from checkpoints of one
        execution (bounded memory, :mod:`prover.programs.segment_prover`).  ``max_cycles``: an
        int in [1, 2^32 - 1] (default 2^30); without segments in [1, 2^24] (default
        2^24).  A one-proof's statement carries min(max_cycles, 2^24): a run proved
        within one segment ends within 2^24 cycles, which is within the limit asked.

        Raises :class:`rv32.ElfError` (a ValueError) for a file the machine does not load,
        ``TypeError`` / ``ValueError`` for an input, ``max_cycles`` or segment size it
        does not take (before any work), :class:`UnprovableProgram` when the execution
        fails (``kind``, ``pc``, ``cycle``: an illegal instruction, a misaligned access,
        the cycle limit -- the message says how many cycles it ran --, ...) or --
        ``config.check`` -- a trace breaks a constraint, and
        :class:`ProofSelfCheckFailure` as for blocks.  ``timeout`` / ``cancel`` as for
        ``prove_block``.  In development mode the result is a marked fake (``dev``)."""
        S, max_cycles = self._segmenting(segment_cycles, max_cycles)
        if S is not None and not self.dev_mode and not self._fits(elf, input, max_cycles, S):
            from .segment_prover import prove_segments
            program, data = as_program(elf), as_input(input)
            with limits(timeout, cancel):
                return prove_segments(self, program, data, max_cycles, S)
        max_cycles = min(max_cycles, abi.MAX_CYCLES_CEILING)
        with limits(timeout, cancel):
            t0 = time.perf_counter()
            program, data, max_cycles = _arguments(elf, input, max_cycles)
            phases: dict = {}
            ex, tr = self._build_program(program, data, max_cycles, phases)
            if self.dev_mode:
                return self._dev_program_proof(ex, tr, phases, t0)
            proof, stats = self._prove(tr.airs, tr.traces, tr.table_public_values, ex.cycles,
                                       phases, t0, self._check_program_tables)
            return ProgramProof(proof, stats)

    def _segmenting(self, segment_cycles, max_cycles) -> tuple:
        """(segment size or None, max_cycles) checked before any work."""
        from ...rv32.segments import MAX_SEGMENTED_CYCLES, check_segment_cycles
        S = self.config.segment_cycles if segment_cycles is CONFIG else segment_cycles
        if S is not None:
            check_segment_cycles(S)
        if max_cycles is None:
            return S, (DEFAULT_MAX_CYCLES if S is not None else abi.MAX_CYCLES_CEILING)
        if S is None:
            return S, check_max_cycles(max_cycles)
        if isinstance(max_cycles, bool) or not isinstance(max_cycles, (int, np.integer)):
            raise TypeError(f"max_cycles must be an int, not {type(max_cycles).__name__}")
        if not 1 <= int(max_cycles) <= MAX_SEGMENTED_CYCLES:
            raise ValueError(f"max_cycles must be in [1, 2^32 - 1], got {int(max_cycles):,}")
        return S, int(max_cycles)

    def _fits(self, elf, input, max_cycles: int, segment_cycles: int) -> bool:
        """Whether the run ends within one segment (a run that fails is left to the
        one-proof path, which reports it as it always has; a fast run without the
        record, at most one segment long)."""
        program, data = as_program(elf), as_input(input)
        try:
            rv32_execute(program, data, min(max_cycles, segment_cycles))
        except ExecutionError as exc:
            return exc.kind != "cycles" or max_cycles <= segment_cycles
        return True

    def _build_program(self, program, data: bytes, max_cycles: int, phases: dict):
        """Run the program and build its tables -> (rv32 Execution, rv32 Rv32Traces);
        :class:`UnprovableProgram` when the execution fails (shared with cluster mode)."""
        with self._phase("execute", phases):
            ex = run_program(program, data, max_cycles)
        with self._phase("traces", phases):
            tr = build_traces(program, ex, max_cycles, **self.config.trace_options())
        return ex, tr

    def _check_program_tables(self, airs, tables, table_pv, phases: dict) -> None:
        """The AIR check mode on every table: a violation is an :class:`UnprovableProgram`."""
        self._check_unprovable(UnprovableProgram, airs, tables, table_pv, phases)

    def _dev_program_proof(self, ex, tr, phases: dict, t0: float) -> ProgramProof:
        """Development mode: the run and its tables are made and every constraint and bus
        checked (the AIR check mode); the fake carries the public values, no STARK."""
        with PROVE_LOCK:
            self._check_program_tables(tr.airs, tr.traces, tr.table_public_values, phases)
        body = dev_body(tr.table_public_values[:len(TABLES)])   # a piece's says nothing
        phases["total"] = time.perf_counter() - t0
        stats = ProofStats(counters={"dev_mode": True}, backend=self.backend,
                           cycles=int(ex.cycles), phases=phases, proof_bytes=len(body),
                           peak_rss_bytes=peak_rss_bytes())
        return ProgramProof(body, stats, dev=True)

    def execute_program(self, elf: ElfLike, input: bytes = b"", *,
                        max_cycles: int | None = None,
                        segment_cycles: int | None | object = CONFIG) -> ProgramReport:
        """Run ``elf`` on ``input`` and size its proof without proving it: cycles, exit
        code, output, every table's rows, padded height and cells, the host and device
        bytes a proof would need and the configured parameters' security for these
        heights (:class:`ProgramReport`).  Errors as :meth:`prove_program`'s
        (:class:`UnprovableProgram` also when a table is taller than the protocol
        supports).  A run longer than one segment is reported as its segments
        (``segments``: each one's cycles) with the tables of its first segment (every
        segment but the last is as long)."""
        from ...verifier.protocol import table_shape
        from ...verifier.security import proof_security
        from ...rv32.statement import input_sha256
        from ..device.pipeline import estimate_bytes
        t0 = time.perf_counter()
        S, max_cycles = self._segmenting(segment_cycles, max_cycles)
        seg_counts: tuple = ()
        if S is not None and not self._fits(elf, input, max_cycles, S):
            program, data = as_program(elf), as_input(input)
            ex, tr, seg_counts = self._execute_segments(program, data, max_cycles, S)
        else:
            max_cycles = min(max_cycles, abi.MAX_CYCLES_CEILING)
            program, data, max_cycles = _arguments(elf, input, max_cycles)
            ex, tr = self._build_program(program, data, max_cycles, {})
        params = self.config.params()
        rows, log_ns = [], []
        for name, air, t in zip(tr.names, tr.airs, tr.traces):
            n = int(t.shape[0])
            log_n = n.bit_length() - 1
            try:
                shape = table_shape(air, log_n, params)
            except ValueError as exc:
                raise UnprovableProgram(f"cannot be proven with these parameters: {exc}") from None
            k = int(tr.slots.get(name, 1))
            items = int(tr.real_rows.get(name, n))
            used = -(-items // k) if name in SLOTTED else items
            cells = committed_cells(air, n)
            rows.append(ProgramTableEstimate(
                air.name, used, n, air.main_width, air.aux_width, air.num_parts,
                cells << params.log_blowup, estimate_bytes(shape), k, items, cells))
            log_ns.append(log_n)
        sec = proof_security(params, tr.airs, log_ns)
        dev = [r.device_bytes for r in rows]
        sha = b"".join(int(v).to_bytes(2, "little") for v in input_sha256(data))
        return ProgramReport(
            cycles=int(ex.cycles), exit_code=int(ex.exit_code), output=bytes(ex.output),
            stderr=bytes(ex.stderr), max_cycles=max_cycles, input_len=len(data),
            program_digest=program.digest().hex(), input_sha256=sha.hex(), tables=tuple(rows),
            log_blowup=params.log_blowup,
            committed_cells=sum(r.committed_cells for r in rows),
            trace_cells=sum(r.trace_cells for r in rows),
            host_bytes=sum(dev) + sum(int(t.nbytes) for t in tr.traces), device_bytes=sum(dev),
            device_bytes_min=max(dev), security_bits=int(sec.bits),
            seconds=time.perf_counter() - t0, segment_cycles=S if seg_counts else None,
            segments=seg_counts)

    def _execute_segments(self, program, data: bytes, max_cycles: int, S: int):
        """Execute a long run in segments -> (a summary of the whole run standing in for
        an Execution, the first segment's tables, each segment's cycles)."""
        from types import SimpleNamespace
        from ...rv32.segments import run_segments
        counts, out, first, code = [], bytearray(), None, 0
        try:
            for seg in run_segments(program, data, max_cycles, S):
                if first is None:
                    first = build_traces(program, None, max_cycles, segment=seg,
                                         **self.config.trace_options())
                seg.execution = None
                counts.append(seg.cycles)
                out += seg.output
                code = int(seg.exit_code or 0)
        except ExecutionError as exc:
            raise UnprovableProgram(f"execution failed: {exc}", exc.kind, exc.pc,
                                    exc.cycle) from None
        ex = SimpleNamespace(cycles=sum(counts), exit_code=code, output=bytes(out), stderr=b"")
        return ex, first, tuple(counts)

    def precompile_program(self, elf: ElfLike, input: bytes = b"", *,
                           max_cycles: int | None = None,
                           progress: Callable[[dict], None] | None = None) -> list[dict]:
        """Compile the device kernels the proof of ``elf`` on ``input`` launches (its AIRs
        at the slots its tables get) for this prover's backend, through the kernel cache;
        as :meth:`prover.blocks.prover.TxBlockProver.precompile` (``[]`` on host and emu)."""
        if self.backend not in ("cuda", "sim"):
            return []
        S, max_cycles = self._segmenting(CONFIG, max_cycles)
        if S is not None and not self._fits(elf, input, max_cycles, S):
            _, tr, _ = self._execute_segments(as_program(elf), as_input(input), max_cycles, S)
        else:
            program, data, max_cycles = _arguments(elf, input,
                                                   min(max_cycles, abi.MAX_CYCLES_CEILING))
            _, tr = self._build_program(program, data, max_cycles, {})
        from ...kernels.constraint_device import precompile
        return precompile(tr.airs, compile=self.backend == "cuda", progress=progress)


def run_program(program, data: bytes, max_cycles: int):
    """rv32.execute with the record; an execution failure is an
    :class:`UnprovableProgram` with its kind, pc and cycle."""
    try:
        return rv32_execute(program, data, max_cycles, record=True)
    except ExecutionError as exc:
        raise UnprovableProgram(f"execution failed: {exc}", exc.kind, exc.pc,
                                exc.cycle) from None


def program_airs_spec(program, data: bytes, output: bytes, slots: dict,
                      log_blowup: int, split=()) -> ProgramAirs:
    """The :class:`ProgramAirs` of a proof of ``program`` on ``data`` claiming ``output``
    with ``slots`` (table -> k) at ``log_blowup``, the chips ``split`` over two tables."""
    import hashlib
    slots_t = tuple(sorted((k, int(v)) for k, v in slots.items()))
    split = tuple(split)
    key = hashlib.sha256(program.digest() + hashlib.sha256(data).digest()
                         + hashlib.sha256(output).digest()
                         + repr((slots_t, log_blowup, split)).encode()).digest()
    return ProgramAirs(program, bytes(data), bytes(output), slots_t, log_blowup, key, split)


def _arguments(elf, input, max_cycles):
    """(Program, input bytes, max_cycles) checked before any work."""
    return as_program(elf), as_input(input), check_max_cycles(max_cycles)


__all__ = ["ProgramProver", "ProgramAirs", "CONFIG", "run_program", "program_airs_spec",
           "DEFAULT_MAX_CYCLES"]
