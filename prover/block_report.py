"""What :meth:`Prover.execute` reports about a block without proving it
(:class:`ExecutionReport`, one :class:`TableEstimate` per table: docs/api.md "Execute
only"), and the one digest notation of the CLI, the stats and the reports
(:func:`digest_hex`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


@dataclass(frozen=True)
class TableEstimate:
    """One table of a proof that has not been made: its height and what committing it costs.
    ``rows``: rows the execution fills; ``padded_rows``: the committed height (a power of
    two, or the table's fixed height); ``committed_cells``: padded_rows * 2^log_blowup *
    (main_width + 4 * aux_width + 4 * parts) -- base-field cells on the LDE domain;
    ``device_bytes``: the device pipeline's estimate of the table's peak residency
    (:func:`prover.pipeline.estimate_bytes`, the figure admission uses)."""
    name: str
    rows: int
    padded_rows: int
    main_width: int
    aux_width: int                   # EF columns (LogUp)
    parts: int
    committed_cells: int
    device_bytes: int


@dataclass(frozen=True)
class ExecutionReport:
    """What :meth:`Prover.execute` finds without proving: the cycles, every table's height
    and commitment size, the memory a proof would need and whether the block's claimed
    outputs are what execution writes.

    ``host_bytes``: the tables' buffers a host proof holds at once (every table's LDEs,
    trees, quotient and first FRI layers: the sum of ``device_bytes``, plus the traces),
    on top of the process's own footprint; ``device_bytes``: the device bytes to hold
    every table at once (no spilling); ``device_bytes_min``: the largest single table, the
    smallest budget under which no table runs oversize.  Estimates from the shapes, not
    measurements.  ``security_bits``: the conjectured security the configured parameters
    give these shapes (docs/protocol.md section 7)."""
    cycles: int
    tables: tuple[TableEstimate, ...]
    claims_ok: bool
    mismatches: tuple[str, ...]
    final_digest: tuple[int, ...]
    log_blowup: int
    committed_cells: int
    host_bytes: int
    device_bytes: int
    device_bytes_min: int
    security_bits: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("cycles", "claims_ok", "log_blowup",
                                           "committed_cells", "host_bytes", "device_bytes",
                                           "device_bytes_min", "security_bits", "seconds")}
        d["mismatches"] = list(self.mismatches)
        d["final_digest"] = digest_hex(self.final_digest)
        d["tables"] = [dict(vars(t)) for t in self.tables]
        return d

    def summary(self) -> str:
        """A few lines for humans."""
        lines = [f"{self.cycles:,} cycles; claimed outputs "
                 + ("match execution" if self.claims_ok else
                    "DO NOT match execution: " + ", ".join(self.mismatches)),
                 f"{'table':<10} {'rows':>9} {'padded':>9} {'cols':>5} {'aux':>4} "
                 f"{'parts':>5} {'committed cells':>16} {'device MiB':>10}"]
        for t in self.tables:
            lines.append(f"{t.name:<10} {t.rows:>9,} {t.padded_rows:>9,} {t.main_width:>5} "
                         f"{t.aux_width:>4} {t.parts:>5} {t.committed_cells:>16,} "
                         f"{t.device_bytes / 2**20:>10.1f}")
        lines.append(f"committed cells {self.committed_cells:,} (log_blowup {self.log_blowup}); "
                     f"host ~{self.host_bytes / 2**20:,.0f} MiB for the tables; device "
                     f"~{self.device_bytes / 2**20:,.0f} MiB all tables resident, "
                     f"~{self.device_bytes_min / 2**20:,.0f} MiB the largest alone")
        lines.append(f"final state digest {digest_hex(self.final_digest)}; parameters give "
                     f"{self.security_bits} conjectured security bits; {self.seconds:.2f}s")
        return "\n".join(lines)


def digest_hex(words: Sequence[int] | np.ndarray) -> str:
    """The one digest notation of the CLI, the stats and the reports: the 8 u32 words of a
    state digest, each as 8 lowercase hex digits, in order (word 0 first)."""
    return "".join(f"{int(x):08x}" for x in words)


__all__ = ["ExecutionReport", "TableEstimate", "digest_hex"]
