"""Deterministic fault injection (``PROVER_FAULTS``) for tests and soak runs.

Syntax: a comma-separated list of ``KIND@SITE:RATE`` terms plus an optional ``seed=N``::

    PROVER_FAULTS="oom@r2:0.3,corrupt@r4.fri:0.05,corrupt-input@r1.aux:0.1,race@r2:0.5,lost@r3:0.01,seed=7"

* ``oom``           -- the device stage raises :class:`DeviceOOM` (transient: the retry
                       draws again, so a rate below 1 usually recovers on retry).
* ``corrupt``       -- the stage's device *output* gets wrong values (transient: a rerun
                       of the device chain on the same inputs is clean).
* ``corrupt-input`` -- a resident *input* buffer of the stage is corrupted in place
                       (persistent: every rerun on the same resident inputs diverges).
* ``lost``          -- the device is lost at this stage (a sticky error, as after an
                       illegal address or an uncorrectable ECC error): the stage raises
                       :class:`~kernels.backend.DeviceLost`; nothing is retried on the
                       device and the proof finishes on the host.
* ``race``          -- only at ``r2``: corrupts the R2 output only when this table's R2
                       window overlapped another table's (the race serialisation removes).
* ``SITE`` is one of :data:`SITES` or ``*`` for all of them.

Decisions are a pure function of (seed, kind, site, table, attempt), never of the thread
schedule, so a run with faults is reproducible.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

SITES = ("r1.main", "r1.aux", "r2", "r2.tree", "r3", "r4.deep", "r4.fri", "r4.open")
KINDS = ("oom", "corrupt", "corrupt-input", "race", "lost")


class FaultSpecError(ValueError):
    """PROVER_FAULTS could not be parsed (the message names the bad term)."""


@dataclass(frozen=True)
class FaultPlan:
    rules: tuple = ()          # (kind, site, rate)
    seed: int = 0

    @property
    def active(self) -> bool:
        return bool(self.rules)

    def rate(self, kind: str, site: str) -> float:
        r = 0.0
        for k, s, rate in self.rules:
            if k == kind and (s == "*" or s == site):
                r = max(r, rate)
        return r

    def fires(self, kind: str, site: str, table: str, attempt: int, proof: int = 0) -> bool:
        """Does fault ``kind`` fire at ``site`` for ``table`` on this attempt of this proof?"""
        rate = self.rate(kind, site)
        if rate <= 0.0:
            return False
        if rate >= 1.0:
            return True
        key = f"{self.seed}|{proof}|{kind}|{site}|{table}|{attempt}".encode()
        u = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") / 2.0**64
        return u < rate

    def corruption_rows(self, n: int, table: str, site: str) -> list[int]:
        """Which rows a corruption hits: deterministic, sometimes one row, sometimes many."""
        if n <= 0:
            return []
        h = int.from_bytes(hashlib.blake2b(f"{self.seed}|rows|{table}|{site}".encode(),
                                           digest_size=8).digest(), "little")
        if h & 1:
            return [h % n]
        start = (h >> 1) % n
        return list(range(start, min(n, start + max(1, n // 8))))


def parse_faults(text: str | None) -> FaultPlan:
    if not text or not text.strip():
        return FaultPlan()
    rules = []
    seed = 0
    for term in text.split(","):
        term = term.strip()
        if not term:
            continue
        if term.startswith("seed="):
            try:
                seed = int(term[5:])
            except ValueError:
                raise FaultSpecError(f"PROVER_FAULTS: bad seed in {term!r}") from None
            continue
        if "@" not in term or ":" not in term:
            raise FaultSpecError(f"PROVER_FAULTS: {term!r} is not KIND@SITE:RATE")
        kind, rest = term.split("@", 1)
        site, rate_s = rest.rsplit(":", 1)
        if kind not in KINDS:
            raise FaultSpecError(f"PROVER_FAULTS: unknown fault kind {kind!r} in {term!r} "
                                 f"(kinds: {', '.join(KINDS)})")
        if site != "*" and site not in SITES:
            raise FaultSpecError(f"PROVER_FAULTS: unknown site {site!r} in {term!r} "
                                 f"(sites: {', '.join(SITES)}, *)")
        if kind == "race" and site not in ("r2", "*"):
            raise FaultSpecError(f"PROVER_FAULTS: race faults exist only at r2, not {site!r}")
        try:
            rate = float(rate_s)
        except ValueError:
            raise FaultSpecError(f"PROVER_FAULTS: bad rate {rate_s!r} in {term!r}") from None
        if not 0.0 <= rate <= 1.0:
            raise FaultSpecError(f"PROVER_FAULTS: rate must be in [0, 1], got {rate} in {term!r}")
        rules.append((kind, "r2" if kind == "race" else site, rate))
    return FaultPlan(tuple(rules), seed)


def faults_from_env() -> FaultPlan:
    return parse_faults(os.environ.get("PROVER_FAULTS"))
