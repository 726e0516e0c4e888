"""Timing spans: the one mechanism for per-round and per-table durations (no prints).

    spans = Spans()
    with spans.span("r1_main", table="cpu"):
        ...
    spans.stats.total("r1_main")          # seconds, summed over tables
    spans.stats.as_rows()                 # [(round, table, seconds), ...] in record order

Spans nest; a span records its wall time when it closes.  Recording is thread-safe so
tables running concurrently can share one :class:`Spans`.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class ProofStats:
    """Durations recorded during one proof, plus a few sizes."""
    records: list = field(default_factory=list)      # (name, table or None, seconds)
    counters: dict = field(default_factory=dict)     # e.g. proof_bytes

    def total(self, name: str, table: str | None = None) -> float:
        return sum(s for n, t, s in self.records
                   if n == name and (table is None or t == table))

    def names(self) -> list[str]:
        seen: list[str] = []
        for n, _, _ in self.records:
            if n not in seen:
                seen.append(n)
        return seen

    def as_rows(self) -> list[tuple]:
        return list(self.records)

    def by_round(self) -> dict:
        return {n: self.total(n) for n in self.names()}


class Spans:
    """Context-manager factory that records into ``self.stats``."""

    def __init__(self) -> None:
        self.stats = ProofStats()
        self._lock = threading.Lock()

    @contextmanager
    def span(self, name: str, table: str | None = None):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            dt = time.perf_counter() - t0
            with self._lock:
                self.stats.records.append((name, table, dt))

    def count(self, key: str, value) -> None:
        with self._lock:
            self.stats.counters[key] = value


class NullSpans(Spans):
    """A Spans that records nothing (the default when the caller does not ask)."""

    @contextmanager
    def span(self, name: str, table: str | None = None):
        yield

    def count(self, key: str, value) -> None:
        pass
