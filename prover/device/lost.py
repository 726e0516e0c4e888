"""Device failures that end in a correct proof: a lost device, a caught corruption.

Issue #26: every detected device failure is a slower proof, never a failed or a wrong one.

* **A lost device** (:class:`~kernels.backend.DeviceLost`: an injected ``lost`` fault, or
  a real sticky CUDA error -- illegal address, launch failure, ECC uncorrectable, context
  destroyed, ...; the mapping is :func:`kernels.backend.as_device_lost`).  Nothing more
  runs on the device: the pipeline's epoch ends (its cleanup tolerates a dead context)
  and :func:`run_with_recovery` proves the statement on the host from what the host
  holds -- the traces, the public values and the parameters.  Every commitment and the
  whole transcript are re-derived from them (they are pure functions of the statement),
  so the bytes are those of a host proof.  Counted ``device_lost`` (stats and per site),
  logged once.  A real loss marks the backend lost for the process
  (:func:`process_lost`): a CUDA context after a sticky error answers every later call
  with the same error, and the only way back, a device reset, destroys every allocation
  and loaded module of every library sharing the primary context (numba's kernels,
  cupy's pools, a host application's buffers) -- neither numba nor cupy supports that
  under live objects -- so no context is re-created in-process: later proofs run on the
  host until the process restarts.  An injected loss leaves the device usable, so it
  marks only the :class:`prover.engine.prover_core.ProverCore` that saw it.
* **A caught corruption** (``PipelineConfig.recover_corruption``, on under the prover
  unless ``PROVER_ABORT_ON_CORRUPTION=1``).  XCHECK's composition check after R3
  (:func:`xcheck_table`) writes its post-mortem as before; then that table's chain is
  recomputed on the host (:func:`_recompute_on_host`: its main, aux and parts
  commitments rebuilt from the trace and each checked against the table's own root --
  the one whose leaves went into the round's mixed tree --, its fork rewound to the
  pristine copy, R2 and R3 again on the host) and the proof continues -- once per table
  per proof: a second failure stops the proof.  A corruption the transcript already
  absorbed (a wrong main, aux or parts commitment: the mixed caps every fork absorbed,
  proof format 6), or one caught after the join (XCHECK's check of the finished proof,
  the join's final-polynomial check), cannot be mended table by table: the proof
  finishes on the host, as for a lost device.  Counted ``corruptions_recovered`` (stats
  and per site).
"""
from __future__ import annotations

import copy
import dataclasses
import logging
import os
import threading
import time

import numpy as np

from ...kernels.backend import as_device_lost

from ..core.rounds import prove_statement, r1_aux, r2_quotient, r3_ood
from ..core.stages import HostStages

log = logging.getLogger("steadfast.recovery")

#: XCHECK's diverged stage -> the site that produced the diverged buffer
STAGE_SITE = {"lde": "r1.main", "aux": "r1.aux", "constraints": "r2", "decomposition": "r2",
              "ood": "r3"}

_LOST_LOCK = threading.Lock()
_PROCESS_LOST: dict = {}        # backend -> the first real loss in this process


def process_lost(backend: str) -> dict | None:
    """The record of a real (not injected) loss of ``backend``'s device in this process."""
    with _LOST_LOCK:
        return _PROCESS_LOST.get(backend)


def _mark_process_lost(backend: str, record: dict) -> None:
    with _LOST_LOCK:
        _PROCESS_LOST.setdefault(backend, dict(record))


class CorruptionRestart(RuntimeError):
    """A caught corruption that a per-table recomputation cannot mend (the transcript
    already holds a wrong commitment): the proof finishes on the host."""

    def __init__(self, table: str, site: str, postmortem: str | None, why: str):
        super().__init__(f"table {table}: {why}")
        self.table, self.site, self.postmortem, self.why = table, site, postmortem, why


def _site_of_report(report: dict) -> str:
    stage = str(report.get("diverged_stage", ""))
    if stage in STAGE_SITE:
        return STAGE_SITE[stage]
    return "r4.open" if "openings" in stage else "r4.fri"


def _completion_reason(exc: BaseException, cfg, stats) -> dict | None:
    """Whether a device proof that raised ``exc`` finishes on the host, and why."""
    from .join import JOIN, DeviceResultError
    from .xcheck import XcheckFailure
    lost = as_device_lost(exc)
    if lost is not None:
        at = stats.counters.lost_at or {}
        return {"reason": "device lost", "site": at.get("site") or lost.site,
                "table": at.get("table") or lost.table, "error": lost.detail,
                "injected": lost.injected, "code": lost.code}
    if not getattr(cfg, "recover_corruption", False) or getattr(exc, "final", False):
        return None
    if isinstance(exc, CorruptionRestart):
        return {"reason": "corruption", "site": exc.site, "table": exc.table,
                "error": exc.why, "postmortem": exc.postmortem}
    if isinstance(exc, XcheckFailure):
        rep = exc.report or {}
        return {"reason": "corruption", "site": _site_of_report(rep),
                "table": rep.get("table", "join"), "error": str(rep.get("check", exc)),
                "postmortem": exc.postmortem}
    if isinstance(exc, DeviceResultError):
        from .xcheck import write_postmortem
        report = {"table": "join", "check": f"device result ({exc.check})",
                  "backend": cfg.backend, "error": type(exc).__name__, "message": str(exc),
                  "faults": os.environ.get("PROVER_FAULTS", ""),
                  "recovery": "proof finished on the host"}
        return {"reason": "corruption", "site": "r4.fri", "table": JOIN, "error": str(exc),
                "postmortem": write_postmortem(report, cfg.postmortem_dir)}
    return None


def host_proof(st, spans, logs: list | None = None) -> bytes:
    """The statement ``st`` proven on the host (:func:`prover.core.prove.prove`'s host path):
    the transcript and every commitment re-derived from the traces."""
    from ...verifier.proof_format import encode
    proof = encode(prove_statement(st, HostStages(table_roots=False), spans, logs))
    spans.count("proof_bytes", len(proof))
    return proof


def run_with_recovery(device_proof, st, cfg, stats, spans, logs):
    """``device_proof()`` -> the proof bytes; a lost device or a corruption the pipeline
    cannot mend table by table finishes the proof on the host (module docstring)."""
    from ..common.spans import NullSpans
    spans = spans or NullSpans()
    earlier = process_lost(cfg.backend)
    if earlier is not None:
        reason = {"reason": "device lost earlier in this process", **earlier}
    else:
        try:
            return device_proof()
        except Exception as exc:         # noqa: BLE001 -- classified, else re-raised
            reason = _completion_reason(exc, cfg, stats)
            if reason is None:
                raise
        if reason["reason"] == "device lost":
            stats.device_lost += 1
            if stats.counters.lost_at is None:       # found outside a site: log it here
                stats.counters.lost_at = {k: reason[k] for k in ("site", "table", "error",
                                                                 "injected")}
                stats.counters.bump_event(reason["site"], "device_lost")
                log.error("device lost (%s): nothing more runs on the device; finishing the "
                          "proof on the host", reason["error"])
            if not reason["injected"]:
                _mark_process_lost(cfg.backend, {k: reason[k] for k in ("site", "table",
                                                                        "error", "code")})
        else:
            stats.corruptions_recovered += 1
            stats.counters.bump_event(reason["site"], "corruptions_recovered")
            log.warning("caught a corruption in table %s at %s (%s; post-mortem %s): "
                        "finishing the proof on the host", reason["table"], reason["site"],
                        reason["error"], reason.get("postmortem"))
    t0 = time.perf_counter()
    proof = host_proof(st, spans, logs)
    stats.host_completion = {**{k: v for k, v in reason.items() if v is not None},
                             "seconds": round(time.perf_counter() - t0, 4)}
    return proof


# ------------------------------------------------------------------- XCHECK recovery
def xcheck_table(stages, st, i, r1, ch, aux, r2, r3, cfg, pristine, commits, stats,
                 stats_lock, spans):
    """XCHECK's composition check of table i after R3; on a caught corruption (and
    ``cfg.recover_corruption``) the table's chain is recomputed on the host and checked
    again.  Returns the (possibly recomputed) ``(r1, aux, r2, r3)`` the chain goes on
    with."""
    from .xcheck import XcheckFailure, cross_check

    def check(r1_):
        t0 = time.perf_counter()
        try:
            cross_check(stages, st, i, r1_, ch, aux, r2, r3, cfg)
        finally:
            with stats_lock:
                stats.xcheck_s += time.perf_counter() - t0
    try:
        check(r1)
        return r1, aux, r2, r3
    except XcheckFailure as exc:
        if not cfg.recover_corruption:
            raise
        failure = exc
    r1, aux, r2, r3 = _recompute_on_host(stages, st, i, r1, ch, aux, r2, pristine, commits,
                                         failure, stats, stats_lock, spans)
    try:
        check(r1)               # one recomputation per table per proof: a failure now stops
    except XcheckFailure as exc:
        exc.final = True
        raise
    return r1, aux, r2, r3


def _same_root(a, b) -> bool:
    return np.array_equal(np.asarray(a.root, np.uint32), np.asarray(b.root, np.uint32))


def _recompute_on_host(stages, st, i, r1, ch, aux, r2, pristine, commits, failure, stats,
                       stats_lock, spans):
    shape = st.shapes[i]
    name = shape.name
    report = failure.report or {}
    site = _site_of_report(report)
    # the table's commitments rebuilt from the trace on the host: each must be the one
    # the round's mixed tree was built from (the table's own root), else the caps every
    # fork absorbed are wrong and only the whole proof mends it (proof format 6)
    hs = HostStages()
    main = hs.main_commit(st.traces[i], shape)
    if not np.array_equal(np.asarray(hs.cap(main.tree, st.params.log_cap), np.uint32),
                          np.asarray(commits.main_caps[i], np.uint32)):
        raise CorruptionRestart(name, "r1.main", failure.postmortem,
                                "the table's main commitment is not the trace's")
    r1 = dataclasses.replace(r1, main=r1.main[:i] + (main,) + r1.main[i + 1:])
    aux2 = r1_aux(i, st, ch, hs, spans)
    if aux2.aux is not None and not (_same_root(aux2.aux, aux.aux)
                                     and np.array_equal(aux2.terminal, aux.terminal)):
        raise CorruptionRestart(name, "r1.aux", failure.postmortem,
                                "the table's aux commitment is not the trace's")
    # the fork as it was before the table's passes (the device passes advanced it)
    ch.forks[i].__dict__.update(copy.deepcopy(pristine[i]).__dict__)
    r2b = r2_quotient(i, st, r1, ch, aux2, commits.aux_cap, hs, spans)
    if not _same_root(r2b.parts, r2.parts):
        raise CorruptionRestart(name, "r2", failure.postmortem,
                                "the table's quotient parts commitment is not the trace's")
    tst = stages.table(name)
    for h in tst.handles:               # the table's device buffers: suspect, given back
        h.release()
    tst.handles.clear()
    tst.outputs.clear()
    tst.tags.clear()
    tst.downgraded = True               # every later stage of the table runs on the host
    tst.recomputed = True
    with stats_lock:
        stats.corruptions_recovered += 1
        stats.counters.bump_event(site, "corruptions_recovered")
    log.warning("XCHECK caught a corruption in table %s at %s (diverged at %s, verdict %s; "
                "post-mortem %s): recomputing the table's chain on the host", name, site,
                report.get("diverged_stage"), report.get("verdict"), failure.postmortem)
    stages.timeline.instant("recompute", name, site=site)
    r3 = r3_ood(i, st, r1, ch, aux2, r2b, commits.parts_cap, stages, spans)
    return r1, aux2, r2b, r3


__all__ = ["CorruptionRestart", "STAGE_SITE", "host_proof", "process_lost",
           "run_with_recovery", "xcheck_table"]
