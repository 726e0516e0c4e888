"""Many proofs, one device: a proof service (issue #26 item 4).

A process that proves several blocks at once -- a node with concurrent blocks, a proving
service -- shares one device through one admission gate (:class:`ServiceGate`) instead of
the process lock (:data:`prover.engine.control.PROVE_LOCK`, one proof at a time):

* The gate has ``concurrency`` slots and the device budget ``budget``; each slot owns a
  fixed share ``budget // concurrency`` (none: unbounded) and its own device memory
  (:func:`prover.device.pipeline.device_memory` keyed by the slot: its own ledger, pool, epochs,
  drains).  A proof waits for a free slot, runs in it, and hands it back when it ends --
  so the shares of the proofs in flight never add up to more than the budget.
* Inside its share a proof is an ordinary device proof: its tables are admitted against
  the share (prover.device.pipeline.Admission), spilled, retried, downgraded and recovered as
  in a proof of its own.  An OOM is an OOM of its share (its ledger refuses, nobody
  else's); a downgrade is its own; a corruption or a failed self-check is recomputed or
  re-proved by its own :class:`Prover`; an injected lost device marks only its own
  Prover (each proof gets a fresh one), so the others stay on the device.  A *real*
  sticky CUDA error is different: the context is dead for the process, so every later
  proof runs on the host (prover.device.lost.process_lost) -- still identical bytes.
* A failure (an exception) is that proof's future's, never another's.
* Host-side work (the numba kernels, the host completion of a lost proof, the
  self-check) runs concurrently across slots: every backend already requires numba's
  thread-safe threading layer (omp or tbb, kernels.backend_select) because the pipeline
  calls parallel kernels from several table workers.  Serialised across proofs, as they
  are within one: the device R2 windows (prover.device.locks.R2_LOCK, process-wide) and
  the simulator's kernel submission.

Each proof's fault plan is its own (``submit(..., faults="oom@r2:0.5,seed=3")``, the
``PROVER_FAULTS`` syntax; None: the process's ``PROVER_FAULTS``), and so is its XCHECK
switch.  Proof bytes are those of a host proof of the same block and parameters; the
single-proof API (``Prover.prove_block`` under the process lock) is unchanged.

Usage::

    with ProofService(ProverConfig(backend="emu"), concurrency=4, budget="64MiB") as svc:
        futures = [svc.submit(block) for block in blocks]
        proofs = [f.result() for f in futures]     # TxBlockProof, stats.counters["service"]
"""
from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from .engine.config import ProverConfig
from .engine.control import admitted
from .common.errors import ConfigError
from .device.faults import FaultPlan, parse_faults

_SERVICES = itertools.count(1)


class ServiceGate:
    """``concurrency`` slots, each with a fixed share of ``budget`` bytes (None: no
    budget): :meth:`acquire` waits for a free slot and returns it, :meth:`release` hands
    it back.  Counters: ``admitted``, ``in_flight``, ``max_in_flight``, ``wait_s`` (all
    proofs' waits), ``max_booked`` (the most bytes the slots in use held as shares at
    once; never above the budget)."""

    def __init__(self, budget: int | None, concurrency: int):
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"concurrency must be a positive integer, got {concurrency!r}",
                              "concurrency")
        self.budget = budget
        self.concurrency = concurrency
        self.share = None if budget is None else budget // concurrency
        if self.share is not None and self.share < 1:
            raise ConfigError(f"a budget of {budget} B cannot be split {concurrency} ways",
                              "budget")
        self._free = list(range(concurrency - 1, -1, -1))
        self._cond = threading.Condition()
        self.admitted = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.wait_s = 0.0
        self.max_booked = 0

    def acquire(self, cancel=None) -> int:
        t0 = time.perf_counter()
        with self._cond:
            while not self._free:
                if cancel is not None and cancel.is_set():
                    from .common.errors import ProofAborted
                    raise ProofAborted("proof cancelled while waiting for a service slot",
                                       "cancelled")
                self._cond.wait(timeout=0.1)
            slot = self._free.pop()
            self.admitted += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self.share is not None:
                self.max_booked = max(self.max_booked, self.in_flight * self.share)
            self.wait_s += time.perf_counter() - t0
            return slot

    def release(self, slot: int) -> None:
        with self._cond:
            self.in_flight -= 1
            self._free.append(slot)
            self._cond.notify()

    def as_dict(self) -> dict:
        with self._cond:
            return {"budget": self.budget, "concurrency": self.concurrency,
                    "share": self.share, "admitted": self.admitted,
                    "in_flight": self.in_flight, "max_in_flight": self.max_in_flight,
                    "wait_s": round(self.wait_s, 4), "max_booked": self.max_booked}


def _slot_prover(config: ProverConfig, memory_key, faults: FaultPlan | None,
                 xcheck: bool | None):
    """A fresh :class:`prover.api.Prover` for one admitted proof: the slot's share as its
    budget, the slot's device memory, the proof's own fault plan and XCHECK switch."""
    from .api import Prover

    class SlotProver(Prover):
        def _device_config(self):
            cfg = super()._device_config()
            cfg.memory_key = memory_key
            if faults is not None:
                cfg.faults = faults
            if xcheck is not None:
                cfg.xcheck = bool(xcheck)
            return cfg

    return SlotProver(config)


def recoveries(stats) -> dict:
    """What a proof recovered from, from its stats' counters: device-stage retries,
    downgrades and host materialisations (injected OOMs and budget pressure alike),
    device losses, corruptions recomputed, self-checks re-proved on the host."""
    dev = stats.counters.get("device") or {}
    sites = (dev.get("recovery") or {}).values()
    sc = stats.counters.get("self_check") or {}
    return {"retries": sum(c.get("retries", 0) for c in sites),
            "downgrades": sum(c.get("downgrades", 0) for c in sites),
            "host_materialisations": sum(c.get("host_materialisations", 0) for c in sites),
            "device_lost": int(dev.get("device_lost", 0) or 0),
            "corruptions_recovered": int(dev.get("corruptions_recovered", 0) or 0),
            "self_check_retried": int(sc.get("retried", 0) or 0)}


class ProofService:
    """Proves several statements at once on one device (module docstring).

    ``config``: every proof's configuration (its ``vram_budget`` is replaced by the
    slot's share); ``budget``: the device budget the service splits (bytes or a size
    such as "64MiB"; None: ``config.vram_budget``, else ``PROVER_VRAM_BUDGET``, else
    unbounded).  :meth:`submit` returns a future of the proof."""

    def __init__(self, config: ProverConfig | None = None, concurrency: int = 2,
                 budget: int | str | None = None):
        from ..kernels.backend import budget_from_env, parse_bytes
        self.config = config or ProverConfig()
        if budget is None:
            budget = self.config.vram_budget
        try:
            total = parse_bytes(budget) if budget is not None else budget_from_env(None)
        except ValueError as exc:
            raise ConfigError(f"service budget: {exc}", "budget") from None
        self.gate = ServiceGate(total, concurrency)
        self.config = dataclasses.replace(self.config, vram_budget=self.gate.share)
        self.backend, _ = self.config.resolve()     # validated once, up front
        self.id = next(_SERVICES)
        self._pool = ThreadPoolExecutor(max_workers=concurrency,
                                        thread_name_prefix=f"proof-service-{self.id}")
        self._lock = threading.Lock()
        self.proofs = 0
        self.failed = 0
        self.on_host_after_loss = 0     # proofs that started on the host: a real loss earlier

    def submit(self, statement, *, method: str = "prove_block", faults=None,
               xcheck: bool | None = None, timeout: float | None = None,
               cancel: threading.Event | None = None) -> Future:
        """Prove ``statement`` with ``Prover.<method>`` (``prove_block``: a block of
        either format; ``prove_program``; ``prove_airs`` with ``statement`` a tuple of
        its positional arguments) in the next free slot -> a future of the proof, whose
        ``stats.counters["service"]`` says which slot, its share and the wait.
        ``faults``: this proof's fault plan (PROVER_FAULTS syntax or a FaultPlan; None:
        the process's), ``xcheck``: its XCHECK switch (None: PROVER_GPU_XCHECK)."""
        plan = parse_faults(faults) if isinstance(faults, str) else faults
        if plan is not None and not isinstance(plan, FaultPlan):
            raise ConfigError(f"faults must be a PROVER_FAULTS string or a FaultPlan, "
                              f"got {type(faults).__name__}", "faults")
        return self._pool.submit(self._run, statement, method, plan, xcheck, timeout, cancel)

    def _run(self, statement, method, plan, xcheck, timeout, cancel):
        t0 = time.perf_counter()
        slot = self.gate.acquire(cancel)
        wait = time.perf_counter() - t0
        try:
            prover = _slot_prover(self.config, ("service", self.id, slot), plan, xcheck)
            lost_before = prover._device_lost() if prover.backend != "host" else None
            args = statement if method == "prove_airs" else (statement,)
            with admitted(slot):
                proof = getattr(prover, method)(*args, timeout=timeout, cancel=cancel)
        except BaseException:
            with self._lock:
                self.proofs += 1
                self.failed += 1
            raise
        finally:
            self.gate.release(slot)
        proof.stats.counters["service"] = {"slot": slot, "share": self.gate.share,
                                           "gate_wait_s": round(wait, 4),
                                           "concurrency": self.gate.concurrency}
        with self._lock:
            self.proofs += 1
            self.on_host_after_loss += lost_before is not None
        return proof

    def stats(self) -> dict:
        """The gate's counters and the service's: proofs ended, failed, started on the
        host after a real device loss."""
        with self._lock:
            mine = {"proofs": self.proofs, "failed": self.failed,
                    "on_host_after_loss": self.on_host_after_loss}
        return {"gate": self.gate.as_dict(), **mine}

    def close(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait)

    def __enter__(self) -> "ProofService":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["ProofService", "ServiceGate", "recoveries"]
