"""Drain -> retry once -> downgrade, at every recovery site (SPEC §6, issue #6).

A device stage is run through :meth:`Recovery.run`.  If it declines with
:class:`~kernels.backend.DeviceOOM` (a real out-of-memory, a budget refusal or an
injected ``oom`` fault) -- or with cupy's or numba's own out-of-memory error from a
kernel's temporaries, mapped to ``DeviceOOM`` by :func:`kernels.backend.as_device_oom`:

1. **drain** -- synchronise the device, give the pool's cached blocks back, so that work
   still queued that may read pooled memory finishes before that memory is reused;
2. **retry** the device stage once;
3. if it declines again, **downgrade**: the stage's input handles are materialised on the
   host (only the side that is missing -- a handle already on the host costs nothing) and
   the host implementation of the same stage runs.  The table then continues on the host.

Each event is logged once, with the table and the site, and counted per site.

Injected faults (``PROVER_FAULTS``) are not drawn here: under a fault plan the stages'
recovery is a :class:`prover.device.faulting.FaultingRecovery`, which draws ``lost`` and
``oom`` at the start of each attempt and raises them into this same path.

A :class:`~kernels.backend.DeviceLost` (an injected ``lost`` fault, or a real sticky CUDA
error mapped by :func:`kernels.backend.as_device_lost`) is never retried: it is recorded
once per proof (:meth:`Recovery.lost`: logged, counted at its site) and raised, and the
pipeline finishes the proof on the host (:mod:`prover.device.lost`).

``PROVER_GPU_FORCE_DOWNGRADE=1`` makes every device-only table take this path at every
site (the device attempt is declined without running).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from ...kernels.backend import DeviceLost, DeviceOOM, as_device_lost, as_device_oom

from .faults import SITES, FaultPlan
from ..common.timeline import Timeline

log = logging.getLogger("steadfast.recovery")


@dataclass
class SiteCounters:
    retries: int = 0
    downgrades: int = 0
    host_materialisations: int = 0


@dataclass
class RecoveryCounters:
    """Per-site counters; all zero on a happy path."""
    sites: dict = field(default_factory=lambda: {s: SiteCounters() for s in SITES})

    def as_dict(self) -> dict:
        return {s: vars(c).copy() for s, c in self.sites.items()}

    #: per site: device losses and corruptions recovered (prover.device.lost); apart from
    #: ``sites`` so that the retry/downgrade records keep their shape
    events: dict = field(default_factory=lambda: {s: {"device_lost": 0,
                                                      "corruptions_recovered": 0}
                                                  for s in SITES})
    lost_at: dict | None = None      # the first loss: site, table, error, injected

    def bump_event(self, site: str | None, what: str) -> None:
        """Count ``what`` at ``site``; an event found outside every site (a sticky error
        raised by a synchronisation between stages) under ``"other"``."""
        key = site if site in SITES else "other"
        c = self.events.setdefault(key, {"device_lost": 0, "corruptions_recovered": 0})
        c[what] += 1

    def events_dict(self) -> dict:
        return {s: dict(c) for s, c in self.events.items()}

    def total(self) -> int:
        return sum(c.retries + c.downgrades + c.host_materialisations for c in self.sites.values())


class ForcedDecline(DeviceOOM):
    """The device attempt was declined on purpose (FORCE_DOWNGRADE or an injected OOM)."""

    def __init__(self, why: str):
        super().__init__(0, 0, None, why)


class Recovery:
    """The recovery of one proof's device stages.  ``faults`` and ``proof`` are the fault
    plan and the proof's number in its draws: only a :class:`prover.device.faulting.
    FaultingRecovery` draws from them (a plain one never injects anything)."""

    def __init__(self, mem, faults: FaultPlan | None = None,
                 counters: RecoveryCounters | None = None, timeline: Timeline | None = None,
                 force_downgrade: bool = False, proof: int = 0):
        self.mem = mem
        self.faults = faults or FaultPlan()
        self.counters = counters if counters is not None else RecoveryCounters()
        self.timeline = timeline or Timeline(enabled=False)
        self.force_downgrade = force_downgrade
        self.proof = proof
        self._lock = threading.Lock()

    def _bump(self, site: str, what: str, n: int = 1) -> None:
        with self._lock:
            c = self.counters.sites[site]
            setattr(c, what, getattr(c, what) + n)

    def lost(self, site: str, table: str, exc: DeviceLost) -> DeviceLost:
        """Record a device loss (once per proof: the first one is logged and counted;
        other workers that hit the same lost device after it are not) -> ``exc`` with its
        site and table filled in."""
        exc.site = exc.site or site
        exc.table = exc.table or table
        with self._lock:
            first = self.counters.lost_at is None
            if first:
                self.counters.lost_at = {"site": exc.site, "table": exc.table,
                                         "error": exc.detail, "injected": exc.injected}
                self.counters.bump_event(exc.site, "device_lost")
        if first:
            log.error("device lost at %s for table %s (%s): nothing more runs on the device; "
                      "finishing the proof on the host", exc.site, exc.table, exc.detail)
            self.timeline.instant("device_lost", table, site=site)
        return exc

    def drain(self) -> None:
        if self.mem is not None:
            self.mem.release_pool()

    def run(self, site: str, table: str, device_fn, host_fn, inputs=()):
        """Run ``device_fn()``; on decline drain, retry once, then downgrade to ``host_fn()``.

        ``inputs`` are the :class:`~prover.device.residency.ResidentHandle` objects the stage
        reads; on downgrade each is materialised on the host (counted only if a download
        was actually needed).
        """
        if site not in SITES:
            raise ValueError(f"unknown recovery site {site!r}")
        last = None
        for attempt in (0, 1):
            try:
                if self.force_downgrade:
                    raise ForcedDecline("PROVER_GPU_FORCE_DOWNGRADE=1")
                return device_fn()
            except Exception as raw:
                # a sticky device error: never retried, the proof finishes on the host
                gone = as_device_lost(raw)
                if gone is not None:
                    self.lost(site, table, gone)
                    if gone is raw:
                        raise
                    raise gone from raw
                # a real CUDA out-of-memory raised inside a kernel's own temporaries (numba
                # or cupy, outside DeviceMemory.empty) declines like a budget refusal
                exc = as_device_oom(raw, ledger=getattr(self.mem, "ledger", None))
                if exc is None:
                    raise
                last = exc
                if attempt == 0:
                    self._bump(site, "retries")
                    log.warning("device declined %s for table %s (%s): drain and retry once",
                                site, table, exc.detail or exc)
                    self.timeline.instant("retry", table, site=site, reason=str(exc.detail or exc))
                    self.drain()
        # downgrade
        self._bump(site, "downgrades")
        log.warning("device declined %s for table %s again (%s): downgrading the table to the host",
                    site, table, getattr(last, "detail", "") or last)
        self.timeline.instant("downgrade", table, site=site)
        for h in inputs:
            if not h.on_host:
                h.host()
                self._bump(site, "host_materialisations")
        return host_fn()
