"""One long program run proved as linked segments on a cluster's workers
(:meth:`prover.cluster.ClusterProver.prove_program_segmented`, ``prove --cluster
PROGRAM.elf``; docs/rv32.md "Long programs: segments").

The coordinator executes the program once and cuts it into segments
(:class:`prover.programs.segment_prover.SegmentFeed`); each segment goes to the least busy live
worker as its checkpoint -- its in-boundary and the words it touches, a few bytes per
touched word, never its trace -- with the program and the input put once in Ray's object
store.  The worker re-runs the segment from the checkpoint, refusing a re-run that does
not end where the cut did, builds its tables, proves it on its warm Prover (its backend,
admission and recovery) and sends back the segment's protocol proof.  At most one segment
per live worker is in flight.  The proof is the one machine's, byte for byte: a segment's
proof depends only on its checkpoint, the program, the input and the configuration.

Faults: a worker that dies mid-segment (its process killed, its node gone) costs that
segment a re-run on the least busy live worker (:mod:`prover.cluster.pool`); a worker
whose segment fails its self-check (:class:`ProofSelfCheckFailure`, after the worker's own
recovery) has that segment re-run alone on another worker; at most ``max_retries`` re-runs
per segment.  ``stats.counters["cluster"]["segment_retries"]`` says how many segments were
re-run and why (``worker_died``, ``self_check``); every re-run is logged once with its
segment and its reason.
"""
from __future__ import annotations

import dataclasses
import logging
import pickle
import time

from .pool import WorkerPool, _Piece
from ..common.errors import ProofSelfCheckFailure

log = logging.getLogger("steadfast.prover")


def prove_program_segmented(pool: WorkerPool, elf, input: bytes = b"",
                            max_cycles: int | None = None, segment_cycles=None,
                            timeout: float | None = None, progress=None):
    """Prove ``elf`` on ``input`` in segments across ``pool``'s workers -> a
    SegmentedProof (or, for a run within one segment, the one-proof ProgramProof proved
    on one worker) -- the bytes :meth:`Prover.prove_program` makes on one machine.
    ``segment_cycles``: None for the config's; ``progress(done, total, cut, seconds)``
    after each segment (total None until the execution has ended)."""
    from ..programs.proof import as_input, as_program
    from ..programs.prover import CONFIG
    from ..programs.segment_proof import SegmentedProof
    from ..programs.segment_prover import (SegmentFeed, SegmentTotals, segment_downgrades,
                                           segment_record)
    from ..common.stats import ProofStats, peak_rss_bytes
    t0 = time.perf_counter()
    local = pool.local
    program, data = as_program(elf), as_input(input)
    S, limit = local._segmenting(CONFIG if segment_cycles is None else segment_cycles,
                                 max_cycles)
    if S is None or local.dev_mode or local._fits(program, data, limit, S):
        return pool.submit_program(program, data, limit).result(timeout)
    ray = pool._ray
    feed = SegmentFeed(program, data, limit, S)
    feed.fill()
    prog_ref, data_ref = ray.put(program), ray.put(data)
    shipped = [0]
    retries = {"worker_died": 0, "self_check": 0}
    done: dict = {}
    starts: dict = {}
    boundary: dict = {}           # segment -> its file record without the proof

    def piece(ck) -> _Piece:
        args = (prog_ref, data_ref, limit, S, ck, f"segment:{ck.index}")
        shipped[0] += len(pickle.dumps(ck))
        boundary[ck.index] = segment_record(ck, b"")
        starts[ck.index] = time.perf_counter()
        return _Piece(pool._least_busy(), "prove_segment", args, ck.index)

    it = iter(feed)

    def take(n: int) -> list:
        out = []
        for _ in range(max(0, n)):
            ck = next(it, None)
            if ck is None:
                break
            p = piece(ck)
            pool._inflight[p.worker] += 1        # reserve while choosing the next
            out.append(p)
        for p in out:
            pool._inflight[p.worker] -= 1
        return out

    def feed_more() -> list:
        # one of this run's segments in flight per live worker (the pool may hold other
        # pieces, e.g. a long block's group parts: they do not stop the feed)
        return take(len(pool._live()) - (len(boundary) - len(done)))

    def on_retry(p: _Piece, reason: str, exc) -> None:
        retries[reason] += 1
        log.warning("cluster: segment %s re-run (attempt %d) after %s on worker %d: %s",
                    p.tag, p.attempts + 1, reason, p.worker, type(exc).__name__)

    totals = SegmentTotals()
    deaths0 = pool.worker_deaths
    for p, value in pool._gather(take(pool.workers), timeout, feed_more,
                                 retry_errors=(ProofSelfCheckFailure,), on_retry=on_retry):
        proof, st, _ = value
        done[p.tag] = (proof, st, p.worker, time.perf_counter() - starts[p.tag])
        totals.add(st)
        if progress is not None:
            progress(len(done), feed.total, feed.cut, done[p.tag][3])
    n = feed.total
    records, seconds = [], []
    for j in range(n):
        proof, st, _, secs = done[j]
        records.append(dataclasses.replace(boundary.pop(j), proof=proof))
        seconds.append(secs)
    totals.phases["total"] = time.perf_counter() - t0
    per_segment = [segment_downgrades(done[j][1]) for j in range(n)]
    totals.counters["segments"] = {"proved": n, "retried": sum(retries.values()),
                                   "downgrades": per_segment}
    totals.counters["cluster"] = {
        "mode": "segments", "workers": pool.workers, "gpus": pool.gpus,
        "segments": n, "segment_retries": dict(retries), "retries": sum(retries.values()),
        "worker_deaths_total": pool.worker_deaths, "worker_deaths": pool.worker_deaths - deaths0,
        "device_downgrades": sum(per_segment),
        "segments_per_worker": _per_worker(done, pool.workers),
        "bytes_through_object_store": shipped[0] + sum(len(done[j][0]) for j in range(n))
        + len(pickle.dumps(program)) + len(data),
        "seconds": round(time.perf_counter() - t0, 4)}
    stats = ProofStats(counters=totals.counters, backend=local.backend,
                       cycles=sum(r.cycles for r in records), phases=totals.phases,
                       proof_bytes=0, peak_rss_bytes=peak_rss_bytes())
    return SegmentedProof(S, limit, tuple(records), stats, segment_seconds=tuple(seconds))


def _per_worker(done: dict, workers: int) -> list:
    out = [0] * workers
    for _, _, w, _ in done.values():
        out[w] += 1
    return out


__all__ = ["prove_program_segmented"]
