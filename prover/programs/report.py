"""What :meth:`Prover.execute_program` reports about a program run without proving it
(:class:`ProgramReport`, one :class:`ProgramTableEstimate` per table; docs/api.md
"Proving programs"); a block's report is :class:`prover.blocks.prover.TxBlockReport`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TableEstimate:
    """One table of a proof that has not been made: its height and what committing it costs.
    ``rows``: rows the execution fills; ``padded_rows``: the committed height (a power of
    two, or the table's fixed height); ``committed_cells``: padded_rows * 2^log_blowup *
    (main_width + 4 * aux_width + 4 * parts) -- base-field cells on the LDE domain;
    ``device_bytes``: the device pipeline's estimate of the table's peak residency
    (:func:`prover.device.pipeline.estimate_bytes`, the figure admission uses)."""
    name: str
    rows: int
    padded_rows: int
    main_width: int
    aux_width: int                   # EF columns (LogUp)
    parts: int
    committed_cells: int
    device_bytes: int


@dataclass(frozen=True)
class ProgramTableEstimate(TableEstimate):
    """One RV32IM table: :class:`TableEstimate`'s figures (``committed_cells`` on the LDE
    domain: padded_rows * 2^log_blowup * (main + 4 aux + 4 parts)) plus ``slots`` (k items
    a row, tables.SLOTTED; 1 elsewhere), ``items`` (what the execution fills: cycles of the
    chip, image words, permutations, ...) and ``trace_cells`` = padded_rows * (main + 4
    aux + 4 parts), the per-unit-of-blowup count that docs/rv32.md and
    bench/rv32_cells.py divide by the cycles."""
    slots: int
    items: int
    trace_cells: int


@dataclass(frozen=True)
class ProgramReport:
    """A program's run and the size of its proof: ``cycles`` (the exit ECALL included),
    ``exit_code``, ``output`` (fd 1's bytes), every table's height and cells, the memory
    a proof would need (``host_bytes``: the tables' buffers a host proof holds at once
    plus the traces; ``device_bytes``: every table held at once; ``device_bytes_min``: the
    largest single table), ``cells_per_cycle`` (``trace_cells`` /
    cycles) and the configured parameters' ``security_bits`` for these heights."""
    cycles: int
    exit_code: int
    output: bytes
    stderr: bytes
    max_cycles: int
    input_len: int
    program_digest: str              # hex of rv32 Program.digest()
    input_sha256: str                # hex
    tables: tuple[ProgramTableEstimate, ...]
    log_blowup: int
    committed_cells: int
    trace_cells: int
    host_bytes: int
    device_bytes: int
    device_bytes_min: int
    security_bits: int
    seconds: float
    segment_cycles: int | None = None     # a run longer than one segment: its size
    segments: tuple = ()                  # ... and each segment's cycles (else empty)

    @property
    def _per(self) -> int:
        """The cycles the tables are of: the run's, or its first segment's."""
        return self.segments[0] if self.segments else self.cycles

    @property
    def cells_per_cycle(self) -> float:
        return self.trace_cells / max(1, self._per)

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in (
            "cycles", "exit_code", "max_cycles", "input_len", "program_digest",
            "input_sha256", "log_blowup", "committed_cells", "trace_cells", "host_bytes",
            "device_bytes", "device_bytes_min", "security_bits", "seconds")}
        d["output"] = self.output.hex()
        d["output_len"] = len(self.output)
        d["stderr"] = self.stderr.hex()
        d["cells_per_cycle"] = round(self.cells_per_cycle, 3)
        d["tables"] = [dict(vars(t), cells_per_cycle=round(t.trace_cells / max(1, self._per), 3))
                       for t in self.tables]
        d["segments"] = max(1, len(self.segments))
        d["segment_cycles"] = self.segment_cycles
        d["segment_cycle_counts"] = list(self.segments) if self.segments else [self.cycles]
        d["tables_of"] = "segment 0" if self.segments else "the run"
        return d

    def summary(self) -> str:
        """A few lines for humans."""
        out = self.output[:64]
        more = f" ... ({len(self.output):,} bytes)" if len(self.output) > 64 else ""
        lines = [f"{self.cycles:,} cycles (max_cycles {self.max_cycles:,}); exit code "
                 f"{self.exit_code}; output {out!r}{more}"]
        if self.segments:
            lines.append(f"{len(self.segments):,} segments of {self.segment_cycles:,} cycles "
                         f"(the last {self.segments[-1]:,}); the tables below are of segment 0 "
                         "(each segment is proved alone)")
        lines += [
                 f"{'table':<14} {'items':>9} {'k':>2} {'rows':>9} {'padded':>9} {'cols':>5} "
                 f"{'aux':>4} {'parts':>5} {'committed cells':>16} {'per cycle':>9} "
                 f"{'device MiB':>10}"]
        for t in self.tables:
            lines.append(f"{t.name:<14} {t.items:>9,} {t.slots:>2} {t.rows:>9,} "
                         f"{t.padded_rows:>9,} {t.main_width:>5} {t.aux_width:>4} {t.parts:>5} "
                         f"{t.committed_cells:>16,} {t.trace_cells / max(1, self._per):>9.1f} "
                         f"{t.device_bytes / 2**20:>10.1f}")
        lines.append(f"committed cells {self.committed_cells:,} (log_blowup {self.log_blowup}); "
                     f"{self.cells_per_cycle:,.1f} cells per cycle (per unit of blowup); host "
                     f"~{self.host_bytes / 2**20:,.0f} MiB for the tables; device "
                     f"~{self.device_bytes / 2**20:,.0f} MiB all tables resident, "
                     f"~{self.device_bytes_min / 2**20:,.0f} MiB the largest alone")
        lines.append(f"program digest {self.program_digest}; input {self.input_len:,} bytes; "
                     f"parameters give {self.security_bits} conjectured security bits; "
                     f"{self.seconds:.2f}s")
        return "\n".join(lines)


__all__ = ["ProgramReport", "ProgramTableEstimate", "TableEstimate"]
