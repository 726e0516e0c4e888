"""The record of one proof: :class:`ProofStats` (the protocol's spans and counters, plus
the backend, phases, per-table figures, size and peak memory) with one
:class:`TableStats` per table (docs/api.md "ProofStats")."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from . import spans as _spans


@dataclass(frozen=True)
class TableStats:
    """One table of a proof: its shape and the seconds each round spent on it."""
    name: str
    rows: int
    main_width: int
    aux_width: int                   # EF columns (LogUp)
    parts: int
    seconds: dict[str, float]        # round -> seconds

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


@dataclass
class ProofStats(_spans.ProofStats):
    """The record of one proof: the raw spans (``records``, ``counters`` -- device work adds
    its counters there: retries, downgrades, bytes moved), plus per-phase and per-table
    figures.  ``phases``: execute / traces / check / prove / total seconds.
    ``lock_wait_s``: seconds this proof waited for the process lock while another proof
    ran (in ``phases["total"]``, never in ``phases["prove"]``)."""
    backend: str = "host"
    cycles: int = 0
    tables: list[TableStats] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    proof_bytes: int = 0
    peak_rss_bytes: int = 0
    lock_wait_s: float = 0.0         # waiting for the process lock (another proof ran)

    def rounds(self) -> dict[str, float]:
        """Wall seconds per protocol round (a round's whole-proof span when there is one,
        else the sum over tables)."""
        out: dict[str, float] = {}
        for name in self.names():
            if name == "table":
                continue
            whole = [s for n, t, s in self.records if n == name and t is None]
            out[name] = sum(whole) if whole else self.total(name)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "cycles": self.cycles, "proof_bytes": self.proof_bytes,
                "peak_rss_bytes": self.peak_rss_bytes, "phases": dict(self.phases),
                "lock_wait_s": self.lock_wait_s,
                "rounds": self.rounds(), "counters": dict(self.counters),
                "tables": [{"name": t.name, "rows": t.rows, "main_width": t.main_width,
                            "aux_width": t.aux_width, "parts": t.parts, "seconds": dict(t.seconds)}
                           for t in self.tables]}

    def summary(self) -> str:
        """A few lines for humans: tables, time per round, size, throughput."""
        lines = [f"{'table':<10} {'rows':>9} {'cols':>5} {'parts':>5} {'seconds':>8}"]
        for t in self.tables:
            lines.append(f"{t.name:<10} {t.rows:>9} {t.main_width:>5} {t.parts:>5} {t.total:>8.2f}")
        r = self.rounds()
        lines.append("rounds: " + ", ".join(f"{k} {v:.2f}s" for k, v in r.items()))
        total = self.phases.get("total", 0.0)
        rate = f", {self.cycles / total:,.0f} cycles/s" if total and self.cycles else ""
        lines.append(f"protocol proof {self.proof_bytes:,} bytes; {total:.2f}s total{rate}; "
                     f"backend {self.backend}")
        return "\n".join(lines)


def table_stats(airs: Sequence, traces: Sequence, records) -> list[TableStats]:
    """One :class:`TableStats` per table: its shape (``airs``, ``traces``) and the seconds
    each round spent on it, summed from the span ``records`` ((round, table, seconds);
    the whole-table ``table`` span left out).  One pass over the records, grouped by
    table: a block of thousands of tables has ~8 records a table, and a scan of every
    record for every table was quadratic (0.27 s at 482 tables)."""
    by_table: dict = {}
    for name, tab, s in records:
        if name != "table":
            per = by_table.setdefault(tab, {})
            per[name] = per.get(name, 0.0) + s
    return [TableStats(air.name, int(t.shape[0]), air.main_width, air.aux_width,
                       air.num_parts, dict(by_table.get(air.name, {})))
            for air, t in zip(airs, traces)]


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far, in bytes."""
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


__all__ = ["ProofStats", "TableStats", "table_stats", "peak_rss_bytes"]
