"""Cluster mode's worker pool (:mod:`prover.cluster`): start the Ray actors
(:class:`prover.cluster.worker._Worker`, one per worker, on a GPU each when the cluster has
GPUs), know which are live, launch pieces on the least busy one and re-run a piece whose
worker died (a killed process, a node gone) -- at most ``max_retries`` times, every wait
bounded.  A piece's result is taken once; a worker's own error comes back as itself.
"""
from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass

from ..api import Prover, ProverConfig
from .worker import _Worker
from ..common.errors import ClusterError, ConfigError

DEFAULT_MAX_RETRIES = 3          # re-runs of one piece after its worker died
DEFAULT_START_TIMEOUT = 300.0    # seconds for the workers to come up


def _ray():
    try:
        import ray
    except ImportError:                  # pragma: no cover - exercised where ray is absent
        raise ConfigError("cluster mode needs Ray: pip install 'steadfast[cluster]'") from None
    return ray


@dataclass
class _Piece:
    """One piece of work for a worker: ``method`` of the actor with ``args``; ``tag``
    names it (a block index, a table); ``ref`` the pending result, ``gen`` the worker's
    deaths when it was launched, ``attempts`` its re-runs."""
    worker: int
    method: str
    args: tuple
    tag: object = None
    attempts: int = 0
    ref: object = None
    gen: int = 0
    start: float = 0.0
    block: object = None            # the parsed block of a whole-block piece


class WorkerPool:
    """The workers of a :class:`prover.cluster.ClusterProver` and the pieces they run (its
    parameters are documented there)."""

    def __init__(self, address: str | None = None, config: ProverConfig | None = None,
                 workers: int = 2, *, max_retries: int = DEFAULT_MAX_RETRIES,
                 start_timeout: float = DEFAULT_START_TIMEOUT, fault: str | None = None,
                 timeline=None, max_restarts: int = -1, worker_env: dict | None = None):
        ray = self._ray = _ray()
        self.timeline = timeline          # a prover.common.timeline.Timeline, or None
        self.config = config or ProverConfig()
        if not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"workers must be a positive integer, got {workers!r}")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {max_retries!r}")
        env = dict(worker_env or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise ConfigError("worker_env maps names to strings")
        if env.get("PROVER_FAULTS"):
            from ..device.faults import FaultSpecError, parse_faults
            try:
                parse_faults(env["PROVER_FAULTS"])
            except FaultSpecError as exc:
                raise ConfigError(str(exc)) from None
        self.worker_env = env
        self.local = Prover(self.config)      # validates the config; executes blocks here
        self.workers, self.max_retries, self.start_timeout = workers, max_retries, start_timeout
        self.retries = 0                 # pieces re-run after their worker died
        self.worker_deaths = 0
        self._owns_ray = False
        if not ray.is_initialized():
            if address is None:     # "local": a new instance, never a stale cluster file's
                ray.init(address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False,
                         object_store_memory=int(os.environ.get("STEADFAST_RAY_OBJECT_STORE",
                                                                256 << 20)))
            else:
                ray.init(address=address, log_to_driver=False)
            self._owns_ray = True
        res = ray.cluster_resources()
        self.gpus = int(res.get("GPU", 0))
        kind = "GPU" if self.gpus else "CPU"
        opts = dict(num_gpus=1, num_cpus=1) if self.gpus else dict(num_cpus=1)
        # never wait forever for a worker to fit (a few seconds for workers just killed
        # elsewhere to hand their resources back)
        wait_until = time.monotonic() + min(start_timeout, 30.0)
        while workers > ray.available_resources().get(kind, 0) and time.monotonic() < wait_until:
            time.sleep(0.25)
        free = ray.available_resources()
        if workers > free.get(kind, 0):
            if self._owns_ray:
                ray.shutdown()
            raise ConfigError(f"{workers} workers need {workers} free {kind}s (one each); the "
                              f"cluster has {res.get(kind, 0):g}, {free.get(kind, 0):g} free")
        self._fault_dir = tempfile.mkdtemp(prefix="steadfast-fault-") if fault else None
        actor = ray.remote(max_restarts=max_restarts, max_task_retries=0, **opts)(_Worker)
        self._actors = [actor.remote(self.config, fault, self._fault_dir, env)
                        for _ in range(workers)]
        self._inflight = [0] * workers
        self._gen = [0] * workers         # deaths seen per worker
        self._down: dict = {}             # worker -> its pending ping (dead, maybe restarting)
        try:
            where = ray.get([a.where.remote() for a in self._actors], timeout=start_timeout)
        except Exception as exc:
            self.shutdown()
            raise ClusterError(f"the workers did not start within {start_timeout:g}s: {exc}") from None
        self.pids = [pid for pid, _ in where]
        self.nodes = [node for _, node in where]     # Ray node id per worker


    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Stop the workers (and the local Ray instance if this prover started it)."""
        ray = self._ray
        for a in getattr(self, "_actors", []):
            try:
                ray.kill(a, no_restart=True)
            except Exception:            # pragma: no cover - already gone
                pass
        self._actors = []
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
        self._owns_ray = False

    def arm(self, worker: int, fault: str) -> str:
        """Test hook: set worker ``worker``'s fault terms (see ``fault``; a worker that
        reaches a "stall@KEY" piece writes ``stall_KEY`` into the returned folder and
        sleeps, so that a test can remove its node mid-piece)."""
        if self._fault_dir is None:
            self._fault_dir = tempfile.mkdtemp(prefix="steadfast-fault-")
        self._ray.get(self._actors[worker].arm.remote(fault, self._fault_dir),
                      timeout=self.start_timeout)
        return self._fault_dir

    # -- pieces: launch, wait, re-run ------------------------------------------------
    def _await_worker(self, w: int) -> None:
        """Wait until Ray has restarted worker ``w`` (bounded by ``start_timeout``); a
        worker out of restarts is a :class:`ClusterError` at once."""
        from ray.exceptions import ActorDiedError, RayActorError
        deadline = time.monotonic() + self.start_timeout
        while True:
            try:
                self.pids[w] = self._ray.get(self._actors[w].ping.remote(),
                                             timeout=max(0.1, deadline - time.monotonic()))
                self._down.pop(w, None)
                return
            except ActorDiedError as exc:
                raise ClusterError(f"worker {w} died and cannot be restarted: {exc}") from None
            except (RayActorError, self._ray.exceptions.GetTimeoutError):
                if time.monotonic() > deadline:
                    raise ClusterError(f"worker {w} did not restart within "
                                       f"{self.start_timeout:g}s") from None
                time.sleep(0.2)

    def _refresh_down(self) -> None:
        """Take back the dead workers that Ray has restarted (a ping answered); never
        waits."""
        from ray.exceptions import ActorDiedError, RayActorError
        for w, ref in list(self._down.items()):
            if ref is _GONE:
                continue
            if ref is None:
                self._down[w] = self._actors[w].ping.remote()
                continue
            ready, _ = self._ray.wait([ref], timeout=0)
            if not ready:
                continue
            try:
                self.pids[w] = self._ray.get(ref)
                del self._down[w]
            except ActorDiedError:
                self._down[w] = _GONE            # out of restarts: never again
            except RayActorError:
                self._down[w] = None             # still coming back: ask again

    def _live(self) -> list:
        self._refresh_down()
        return [w for w in range(self.workers) if w not in self._down]

    def _least_busy(self, avoid: int | None = None) -> int:
        """The least busy live worker (not ``avoid`` when another is live); with every
        worker dead, wait for ``avoid`` (or the first) to restart (ClusterError if it
        cannot)."""
        live = self._live()
        others = [w for w in live if w != avoid]
        if others or live:
            return min(others or live, key=lambda w: self._inflight[w])
        w = avoid if avoid is not None else min(self._down)
        if self._down.get(w) is _GONE:
            gone = [v for v in self._down if self._down[v] is not _GONE]
            if not gone:
                raise ClusterError("every worker died and none can be restarted")
            w = gone[0]
        self._await_worker(w)
        return w

    def _launch(self, p: _Piece) -> None:
        p.gen = self._gen[p.worker]
        p.start = time.perf_counter()
        p.ref = getattr(self._actors[p.worker], p.method).remote(
            *p.args, timeline=self.timeline is not None)
        self._inflight[p.worker] += 1

    def _merge_events(self, p: _Piece, events) -> None:
        """A worker's timeline events onto the coordinator's: process "worker W", its
        clock aligned at the piece's launch."""
        if self.timeline is not None:
            self.timeline.merge(events, pid=2 + p.worker, start=p.start,
                                process=f"worker {p.worker}", piece=f"{p.method}:{p.tag}")

    def _gather(self, pieces, timeout: float | None, feed=None, retry_errors: tuple = (),
                on_retry=None):
        """Yield (piece, value) as pieces finish.  A piece whose worker died (its process
        killed, its node gone) is re-run on the least busy live worker (at most
        ``max_retries`` times; counted); a worker's exception is re-raised as itself,
        unless it is one of ``retry_errors`` (a segment's self-check failure): then the
        piece is re-run alone on another worker, within the same ``max_retries``.
        ``on_retry(piece, reason, exc)`` (reason "worker_died" or "self_check") before
        each re-run.  ``feed()``: called after each finished piece, may return more
        pieces to launch."""
        ray = self._ray
        from ray.exceptions import (ObjectLostError, RayActorError, RayTaskError,
                                    WorkerCrashedError)
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = {}
        for p in pieces:
            if p.ref is None:
                self._launch(p)
            pending[p.ref] = p
        while pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=left)
            if not ready:
                raise TimeoutError(f"{len(pending)} cluster pieces unfinished after {timeout:g}s")
            p = pending.pop(ready[0])
            self._inflight[p.worker] -= 1
            try:
                value = ray.get(p.ref)
            except (RayActorError, WorkerCrashedError, ObjectLostError) as exc:
                p.attempts += 1
                self.retries += 1
                if self.timeline is not None:
                    self.timeline.instant("cluster:rerun", cat="recovery", worker=p.worker,
                                          piece=f"{p.method}:{p.tag}", attempt=p.attempts,
                                          error=type(exc).__name__)
                dead = p.worker
                if p.gen == self._gen[dead] and not isinstance(exc, ObjectLostError):
                    self._gen[dead] += 1                 # a new death of this worker
                    self.worker_deaths += 1
                    self._down.setdefault(dead, None)
                if p.attempts > self.max_retries:
                    raise ClusterError(f"{p.method} {p.tag}: the worker died {p.attempts} "
                                       f"times (max_retries {self.max_retries})") from exc
                if on_retry is not None:
                    on_retry(p, "worker_died", exc)
                p.worker = self._least_busy(avoid=dead)  # elsewhere if any worker lives
                self._launch(p)
                pending[p.ref] = p
                continue
            except RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if retry_errors and isinstance(cause, retry_errors) \
                        and p.attempts < self.max_retries:
                    p.attempts += 1
                    if self.timeline is not None:
                        self.timeline.instant("cluster:rerun", cat="recovery",
                                              worker=p.worker, piece=f"{p.method}:{p.tag}",
                                              attempt=p.attempts, error=type(cause).__name__)
                    if on_retry is not None:
                        on_retry(p, "self_check", cause)
                    p.worker = self._least_busy(avoid=p.worker)
                    self._launch(p)
                    pending[p.ref] = p
                    continue
                if isinstance(cause, BaseException):
                    try:
                        cause.cluster_piece = p.tag      # which block / table
                    except AttributeError:               # pragma: no cover
                        pass
                    raise cause from None
                raise                            # pragma: no cover
            if self.timeline is not None:       # coordinator's view: launch to result
                self.timeline.complete(f"cluster:{p.method}", p.start, time.perf_counter(),
                                       cat="cluster", worker=p.worker, piece=str(p.tag),
                                       attempts=p.attempts + 1)
                self._merge_events(p, value[-1])
            yield p, value
            for q in (feed() if feed else ()):
                self._launch(q)
                pending[q.ref] = q


_GONE = object()      # _down marker: a worker out of restarts


def _sum_recovery(items: list) -> dict:
    out: dict = {}
    for rec in items:
        for site, c in rec.items():
            o = out.setdefault(site, {})
            for k, v in c.items():
                o[k] = o.get(k, 0) + int(v)
    return out


__all__ = ["WorkerPool", "DEFAULT_MAX_RETRIES", "DEFAULT_START_TIMEOUT"]
