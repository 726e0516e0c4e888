"""The generic prover: a configuration resolved once, then any AIRs proven with the same
guarantees whatever the statement -- the backend (host, or the device pipeline with its
admission and recovery), the self-check (no proof that fails the verifier's own code is
ever returned), the statistics, one proof at a time per process, and the caller's
timeout and cancel event.

:class:`ProverCore` knows nothing of the machine: the block methods are
:class:`prover.blocks.prover.TxBlockProver`'s and the program methods
:class:`prover.programs.prover.ProgramProver`'s, built on it, and
:class:`prover.api.Prover` is the class a node uses.  :meth:`ProverCore.prove_airs` is the public door for a team's
own AIRs (docs/api.md "Your own AIRs"); its proofs verify with
:func:`prover.engine.air_proof.verify_airs`.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence, Union

import numpy as np

from ...air import ConstraintViolation, LookupImbalance, check_traces
from ...verifier import verify as _verify_proof
from ...verifier.errors import VerificationError

from ..common import spans as _spans
from .air_proof import AirProof
from .config import ProverConfig, _host_diagnostics
from .control import ProgressSpans, current_abort, limits, locked
from ..common.errors import ConfigError, ProofSelfCheckFailure
from ..core.prove import prepare, prove as _prove_protocol
from ..core.scratch import HoldBudget
from ..core.stages import HostStages
from ..common.stats import ProofStats, peak_rss_bytes, table_stats
from ..common.timeline import Timeline

#: ``progress(table, stage, event, seconds)``: table None for whole-proof stages,
#: event "start" or "end" (seconds 0.0 at the start).
ProgressCallback = Callable[[Union[str, None], str, str, float], None]

log = logging.getLogger("steadfast.prover")


class ProverCore:
    """Proves statements, one after another, with one configuration.

    ``progress(table, stage, event, seconds)`` is called as protocol stages start and end
    (``table`` is None for whole-proof stages).  Construction validates the configuration
    (:class:`ConfigError`)."""

    def __init__(self, config: ProverConfig | None = None,
                 progress: ProgressCallback | None = None,
                 timeline: Timeline | None = None) -> None:
        self.config = config or ProverConfig()
        self.backend, self.vram_budget = self.config.resolve()
        self.dev_mode = self.config.dev()
        if self.dev_mode:
            log.warning("DEVELOPMENT MODE (PROVER_DEV_MODE / dev_mode=True): proofs are fakes "
                        "-- execution and constraint check only, no STARK; verify refuses "
                        "them unless told accept_dev=True")
        self.progress = progress
        self.timeline = timeline        # a prover.common.timeline.Timeline, or None
        self.self_check_failures = 0    # failed self-checks (a device proof retried included)
        self.lost_device: dict | None = None   # the device loss that moved it to the host
        # the budget a host proof's held LDEs draw on: None, each proof its own of
        # config.host_hold; a cluster worker sets its own, shared with its sharded tables
        self.hold_pool: HoldBudget | None = None
        if self.backend != "host":
            self._device_config()            # the env switches, validated up front
        else:
            _host_diagnostics(timeline is not None)

    def _device_config(self):
        """The device pipeline's configuration: this config plus the SPEC §7 switches."""
        from ..device.pipeline import PipelineConfig
        try:
            return PipelineConfig.from_env(self.backend, budget=self.vram_budget,
                                           timeline=self.timeline,
                                           postmortem_dir=self.config.postmortem_dir,
                                           precheck=bool(self.config.self_check))
        except ValueError as exc:           # a bad PROVER_* switch or PROVER_FAULTS term
            raise ConfigError(str(exc)) from None

    # -- your own AIRs ----------------------------------------------------------------
    def prove_airs(self, airs: Sequence[Any], traces: Sequence[np.ndarray],
                   public_values: Sequence[Sequence[int]] | None = None, *,
                   timeout: float | None = None,
                   cancel: threading.Event | None = None) -> AirProof:
        """Prove that ``traces[i]`` (uint32[n_i, w_i], n_i a power of two) satisfies
        ``airs[i]`` (:class:`air.Air`, e.g. from :mod:`air.examples`) for every i, with
        their LogUp buses balanced across all tables; ``public_values``: one list per table
        (None: no table has any).  The guarantees of :meth:`prover.api.Prover.prove_block`:
        this prover's backend (the device pipeline with its admission and recovery on
        ``emu``/``sim``/``cuda``; the same bytes as ``host``), the self-check
        (:class:`ProofSelfCheckFailure` instead of a proof that does not verify), the
        statistics, one proof at a time per process, ``timeout`` / ``cancel`` as for
        ``prove_block`` (:class:`ProofAborted`); ``config.check`` runs the AIR check mode
        first (:class:`air.ConstraintViolation` / :class:`air.LookupImbalance` naming
        table, constraint and row).  Development mode applies to blocks only: this always
        proves.  Wrong shapes are refused before any work, naming the table: a count that
        does not match (``ValueError``), a trace that is not a 2-d uint32 array
        (``TypeError``), a width, height, value or public-value count the AIR does not
        take (:class:`air.AirError`, a ``ValueError``).  Verify the result with
        :func:`prover.engine.air_proof.verify_airs`."""
        t0 = time.perf_counter()
        airs, traces, pvs = _check_statement(airs, traces, public_values)
        prepare(traces, airs, pvs, self.config.params(), check=False)   # shapes, buses
        with limits(timeout, cancel):
            proof, stats = self._prove(airs, traces, pvs, 0, {}, t0, self._check_airs)
        return AirProof(proof, stats)

    def _check_airs(self, airs, tables, table_pv, phases: dict) -> None:
        """The AIR check mode on every table (phase ``check``): its own errors, as they are."""
        with self._phase("check", phases):
            check_traces(airs, tables, table_pv)

    def _check_unprovable(self, error: type, airs, tables, table_pv, phases: dict) -> None:
        """The AIR check mode on every table (phase ``check``) for a machine's front end:
        a violation is ``error`` (:class:`UnprovableBlock` or a subclass) naming table,
        constraint and row."""
        with self._phase("check", phases):
            try:
                check_traces(airs, tables, table_pv)
            except ConstraintViolation as exc:
                raise error(f"trace check failed: {exc}", table=exc.table,
                            constraint=exc.constraint) from None
            except LookupImbalance as exc:
                raise error(f"trace check failed: {exc}") from None

    # -- the proof itself -----------------------------------------------------------
    def _self_check(self, proof: bytes, airs, table_pv, device_stats, retry: bool = False) -> int:
        """Verify ``proof`` with the verifier (its own code: parsing, transcript, every
        check); on failure write a post-mortem and raise :class:`ProofSelfCheckFailure`.
        On device backends the per-table checks already ran as each table finished,
        overlapped with the other tables' device work (pipeline ``precheck``); the
        verifier skips a table only when its recomputed check key -- fork state, AIR,
        section bytes, parameters, challenges -- matches one of those passes.  Returns
        the number of tables so skipped.
        No security minimum here: the parameters are the caller's choice (``prove`` warns
        about weak ones); this checks that the bytes are a valid proof of the statement."""
        keys = device_stats[0].precheck_keys if device_stats else ()
        try:
            res = _verify_proof(proof, airs, table_pv, min_security_bits=0, verified_tables=keys)
            return res.tables_prechecked
        except VerificationError as exc:
            err = exc
        extra = {"proof_bytes": len(proof),
                 "retry": "the proof proved again on the host, once" if retry else "none"}
        if device_stats:
            extra["device"] = device_stats[0].as_dict()
        path, report = self._postmortem(err.table or "block", err, extra)
        if retry:       # logged once: the caller proves it again on the host
            log.warning("self-check: the %s proof does not verify at table %s (%s: %s); "
                        "post-mortem %s; proving it again on the host, once", self.backend,
                        err.table or "block", type(err).__name__, err, path)
        else:
            log.error("self-check: the proof does not verify (%s: %s); not emitted; "
                      "post-mortem %s", type(err).__name__, err, path)
        raise ProofSelfCheckFailure(f"self-check: the finished proof does not verify "
                                    f"({type(err).__name__}: {err}); no proof emitted; "
                                    f"post-mortem {path}", path, report)

    def _refuse_device_result(self, err) -> None:
        """The self-check's refusal of a proof the device pipeline could not finish
        because one of its results failed the prover's own check
        (:class:`prover.device.stages.DeviceResultError`): post-mortem, then
        :class:`ProofSelfCheckFailure`."""
        path, report = self._postmortem("join", err, {})
        log.error("self-check: a device result failed the prover's check (%s); no proof "
                  "emitted; post-mortem %s", err, path)
        raise ProofSelfCheckFailure(f"self-check: the device proof failed the prover's own "
                                    f"check ({err}); no proof emitted; post-mortem {path}",
                                    path, report) from err

    def _postmortem(self, table: str, err, extra: dict) -> tuple[str | None, dict]:
        """A self-check failure counted and its post-mortem written -> (path, report)."""
        self.self_check_failures += 1
        from ..device.xcheck import write_postmortem
        report = {"table": table, "check": "self_check", "backend": self.backend,
                  "error": type(err).__name__, "message": str(err),
                  "faults": os.environ.get("PROVER_FAULTS", ""),
                  "xcheck": os.environ.get("PROVER_GPU_XCHECK", ""),
                  "params": dict(vars(self.config.params())), **extra,
                  "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        return write_postmortem(report, self.config.postmortem_dir), report

    def _device_lost(self) -> dict | None:
        """Why this prover's proofs run on the host although its backend is a device one:
        the device was lost in one of its proofs, or (a real sticky error) in this
        process; None while the device is usable (prover.device.lost)."""
        from ..device.lost import process_lost
        return self.lost_device or process_lost(self.backend)

    def _note_device_loss(self, pstats) -> None:
        """After a device proof: a loss moves this prover's later proofs to the host
        (logged once per prover).  No context is re-created: docs/design.md, "Recovery"."""
        if pstats.device_lost and self.lost_device is None:
            self.lost_device = dict(pstats.counters.lost_at or {"site": None, "table": None})
            log.warning("the %s device was lost (at %s, table %s); this prover's later proofs "
                        "run on the host", self.backend, self.lost_device.get("site"),
                        self.lost_device.get("table"))

    def _reprove_on_host(self, failure, tables, airs, table_pv, spans, abort,
                         phases: dict) -> tuple[bytes, int]:
        """A device proof failed the self-check (its post-mortem is written): prove the
        statement again on the host, once, and self-check that (a failure now is fatal:
        the host is the reference)."""
        t = time.perf_counter()
        with locked(abort):
            try:
                proof = _prove_protocol(tables, airs, table_pv, self.config.params(),
                                        spans=spans, check=False)
            finally:
                _release_memory()
        phases["host_retry"] = time.perf_counter() - t
        with self._phase("self_check_retry", phases):
            pre = self._self_check(proof, airs, table_pv, [])
        return proof, pre

    @contextmanager
    def _phase(self, name: str, phases: dict) -> Iterator[None]:
        """Time a phase outside the protocol (execute, traces, check) and report it."""
        if self.progress:
            self.progress(None, name, "start", 0.0)
        t = time.perf_counter()
        yield
        phases[name] = time.perf_counter() - t
        if self.progress:
            self.progress(None, name, "end", phases[name])

    def _prove(self, airs, tables, table_pv, cycles: int, phases: dict, t0: float,
               check, proof_id: int = 0) -> tuple[bytes, ProofStats]:
        """Prove, under the process lock, then self-check outside it -> (the proof bytes,
        its :class:`ProofStats`).  ``check(airs, tables, table_pv, phases)``: the AIR check
        mode, run first when ``config.check`` is on.  ``proof_id``: the proof's number in
        the device fault plan's draws (a segment's index)."""
        cfg = self.config
        abort = current_abort()
        spans = (ProgressSpans(self.progress, abort) if (self.progress or abort)
                 else _spans.Spans())
        t_wait = time.perf_counter()
        with locked(abort):
            lock_wait = time.perf_counter() - t_wait
            from ..device.xcheck import POSTMORTEM_CONTEXT
            POSTMORTEM_CONTEXT.update(params=dict(vars(cfg.params())))
            if cfg.threads is not None:
                import numba
                numba.set_num_threads(cfg.threads)
            if cfg.check:
                check(airs, tables, table_pv, phases)
            t1 = time.perf_counter()
            device, device_stats = None, []  # type: Any, list[Any]
            lost_before = self._device_lost() if self.backend != "host" else None
            if self.backend != "host" and lost_before is None:
                device = self._device_config()
                if proof_id:
                    import dataclasses as _dc
                    device = _dc.replace(device, proof_id=int(proof_id))
            # the host stages of this proof, their LDEs held within cfg's budget
            host = (None if device is not None
                    else HostStages(table_roots=False, hold_bytes=cfg.host_hold_bytes(),
                                    hold_pool=self.hold_pool))
            try:
                proof = _prove_protocol(tables, airs, table_pv, cfg.params(), spans=spans,
                                        check=False, device=device, device_stats=device_stats,
                                        stages=host)
            except Exception as exc:
                # a device result the join's own check refused (v3: the final
                # polynomial's degree) is the self-check's failure: no proof emitted
                from ..device.stages import DeviceResultError
                if isinstance(exc, DeviceResultError) and cfg.self_check:
                    self._refuse_device_result(exc)
                raise
            finally:
                if host is not None:          # what it held, then a shared budget's bytes back
                    held = dict(host.held)
                    host.give_back()
                _release_memory()
            phases["prove"] = time.perf_counter() - t1
        if device_stats:
            self._note_device_loss(device_stats[0])
        # Never a wrong proof: the verifier's own code checks the bytes before they are
        # returned.  Outside the process lock, on the CPU: another thread's proof can
        # already use the device.
        self_check = {"enabled": bool(cfg.self_check), "checked": 0, "failed": 0, "seconds": 0.0}
        if cfg.self_check:
            self_check["retried"] = 0
            # a device proof that fails is proved again on the host, once (the post-mortem
            # stays); not on the host backend, nor with PROVER_ABORT_ON_CORRUPTION=1, nor
            # when the device proof already finished on the host
            retry = (device is not None and device.recover_corruption
                     and not (device_stats and device_stats[0].host_completion))
            try:
                with self._phase("self_check", phases):
                    pre = self._self_check(proof, airs, table_pv, device_stats, retry=retry)
                self_check.update(checked=1, seconds=round(phases["self_check"], 4))
            except ProofSelfCheckFailure as exc:
                if not retry:
                    raise
                proof, pre = self._reprove_on_host(exc, tables, airs, table_pv, spans, abort,
                                                   phases)
                self_check.update(checked=2, failed=1, retried=1, retried_postmortem=exc.postmortem,
                                  seconds=round(phases["self_check_retry"], 4))
            self_check["tables_prechecked"] = pre
            if device_stats:        # CPU time of the per-table checks overlapped with the device
                self_check["precheck_s"] = round(device_stats[0].precheck_s, 4)
        phases["total"] = time.perf_counter() - t0
        raw = spans.stats
        counters = dict(raw.counters)
        counters["self_check"] = self_check
        if host is not None:                # host LDEs held between rounds (design.md)
            counters["host_hold"] = held
        if device_stats:                    # the device pipeline's record: bytes, recoveries
            counters["device"] = device_stats[0].as_dict()
        elif lost_before is not None:       # a device backend whose device was lost earlier
            counters["device"] = {"device_lost": 0, "corruptions_recovered": 0,
                                  "on_host": "the device was lost earlier",
                                  "device_lost_at": dict(lost_before)}
        stats = ProofStats(records=list(raw.records), counters=counters,
                           backend=self.backend, cycles=cycles, phases=phases,
                           proof_bytes=len(proof), peak_rss_bytes=peak_rss_bytes(),
                           lock_wait_s=lock_wait)
        stats.tables.extend(table_stats(airs, tables, raw.records))
        log.info("proof: backend %s, %d cycles, %d tables, %d bytes, %.2fs (proving %.2fs, "
                 "waiting for the process lock %.2fs, self-check %.2fs)", self.backend, cycles,
                 len(tables), len(proof), phases["total"], phases.get("prove", 0.0), lock_wait,
                 phases.get("self_check", 0.0))
        return proof, stats


def _check_statement(airs, traces, public_values) -> tuple[list, list, list]:
    """The counts and kinds of a :meth:`ProverCore.prove_airs` statement, before any work:
    ``ValueError`` / ``TypeError`` naming what is wrong (the shapes are
    :func:`prover.core.prove.prepare`'s to check)."""
    from ...air import Air
    airs, traces = list(airs), list(traces)
    if not airs:
        raise ValueError("prove_airs needs at least one AIR")
    for i, air in enumerate(airs):
        if not isinstance(air, Air):
            raise TypeError(f"airs[{i}] is a {type(air).__name__}, not an air.Air")
    if len(traces) != len(airs):
        raise ValueError(f"{len(traces)} traces for {len(airs)} AIRs "
                         f"({', '.join(a.name for a in airs)})")
    for air, t in zip(airs, traces):
        if not isinstance(t, np.ndarray) or t.ndim != 2:
            raise TypeError(f"{air.name}: a trace is a 2-d numpy uint32 array (uint32[n, "
                            f"{air.main_width}]), got {type(t).__name__} of shape {np.shape(t)}")
    if public_values is None:
        pvs: list = [[] for _ in airs]
    else:
        pvs = [list(pv or ()) for pv in public_values]
        if len(pvs) != len(airs):
            raise ValueError(f"{len(pvs)} public-value lists for {len(airs)} AIRs "
                             "(one per table, [] for none)")
    return airs, traces, pvs


_FROZEN = [False]


def _release_memory() -> None:
    """Between proofs: collect garbage and hand freed heap pages back to the OS (glibc's
    malloc_trim), so that a long-lived node's RSS reflects what it still holds rather than
    the high-water mark of the last proof's buffers.

    After the first proof's collection the survivors are frozen (``gc.freeze``, once per
    process): they are numba's compiled kernels, types and IR (~750k tracked objects after
    a block proof) and the package's caches, which live as long as the process; a full
    collection walked them all, ~0.29 s after every proof, and later collections (this
    one and the interpreter's own) now scan only what later proofs allocate. Reference
    counting still frees frozen objects; only a reference cycle among them would outlive
    its last use (at most the first proof's survivors, once).

    The first call collects the young generations only, then freezes: a full collection
    there walked every survivor (~0.12-0.15 s of a warm ``prove examples/block.json``, and
    found nothing to free -- measured: 0 objects); what is in the old generation by then
    is the process's long-lived state.  Later calls collect fully, over what later proofs
    allocated."""
    import gc
    if not _FROZEN[0]:
        gc.collect(1)
        gc.freeze()
        _FROZEN[0] = True
    else:
        gc.collect()
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):   # not glibc: nothing to trim
        pass


__all__ = ["ProverCore", "ProgressCallback"]
