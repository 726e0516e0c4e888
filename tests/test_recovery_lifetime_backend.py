"""Issue #28's findings in kernels/backend.py, each reproduced as it was found.

4. A buffer allocated outside a pipeline epoch (a sharded table on a cluster actor) was
   never reclaimed, and its later free was dropped as stale once a whole-block proof on
   the same memory had ended an epoch: its bytes stayed booked for the life of the
   process.  Now a free of a buffer no epoch reclaimed always unbooks it, and a job can
   own an epoch (``begin_epoch(default=False)`` + ``epoch_scope``).
5. Concurrent ``parallel=True`` host kernels abort the process under numba's
   ``workqueue`` threading layer: every backend now refuses it with one clear line.
8. ``_reclaim`` held the memory lock and took the ledger's; a numba finaliser (which may
   run from a garbage collection inside the ledger's lock) took the memory lock: a
   lock-order inversion.  Shown as a forced interleaving, not a timing hope.
Also: the transfer counters were ``+=`` without a lock from several worker threads.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from steadfast.kernels import backend as kb

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ 4. unowned buffers
def test_a_free_after_another_jobs_epoch_still_unbooks_the_buffer():
    mem = kb.DeviceMemory("emu", budget=1 << 20)
    shard = mem.to_device(np.arange(64, dtype=np.uint32), tag="shard/main")   # no epoch
    mem.begin_epoch()                                      # a whole-block proof ...
    mem.to_device(np.zeros(32, np.uint32), tag="block/main")
    assert mem.end_epoch() == 1                            # ... reclaims only its own
    assert not shard.freed and mem.ledger.in_use == 256
    assert mem.free(shard) is True                         # was dropped as stale
    assert mem.ledger.in_use == 0 and mem.stale_frees_dropped == 0


def test_a_sharded_job_owns_its_epoch():
    mem = kb.DeviceMemory("emu", budget=1 << 20)
    job = mem.begin_epoch(default=False)                   # the sharded job's epoch
    with mem.epoch_scope(job):
        held = mem.to_device(np.arange(16, dtype=np.uint32), tag="shard/tree")
    proof = mem.begin_epoch()                              # a block proof meanwhile
    with mem.epoch_scope(job):                             # the job's next piece
        more = mem.to_device(np.arange(8, dtype=np.uint32), tag="shard/dq")
    other = mem.to_device(np.arange(4, dtype=np.uint32), tag="block/x")
    assert (held.epoch, more.epoch, other.epoch) == (job, job, proof)
    assert mem.end_epoch() == 1 and not held.freed and not more.freed
    assert mem.to_host(held).tolist() == list(range(16))   # untouched by the proof's end
    assert mem.end_epoch(job) == 2 and held.freed and more.freed
    assert mem.ledger.in_use == 0
    assert mem.free(held) is False and mem.stale_frees_dropped == 1   # a late free


def test_a_shard_buffer_across_a_pipeline_proof_is_unbooked():
    """The reproduction's pattern with the real pipeline (emu): a buffer allocated on
    the process's DeviceMemory outside any epoch, a whole-block proof, then its free."""
    from steadfast.prover.device.pipeline import PipelineConfig, device_memory, run_pipeline
    sys.path.insert(0, str(ROOT / "tests"))
    from test_pipeline import _statement, tiny_lookup_block

    mem = device_memory("emu", None)
    base = mem.ledger.in_use
    shard = mem.to_device(np.arange(19448, dtype=np.uint32), tag="shard/main")  # 77,792 B
    airs, traces, pvs, ref = tiny_lookup_block()
    proof, _ = run_pipeline(_statement(airs, traces, pvs), PipelineConfig(backend="emu"))
    assert proof == ref
    assert mem.free(shard) is True
    assert mem.ledger.in_use == base


# ---------------------------------------------------------------- 5. threading layer
def _run(code: str, **env) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_THREADING", "PROVER_"))}
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=240)


@pytest.mark.timeout(300)
def test_workqueue_is_refused_with_one_clear_line():
    code = ("from steadfast.prover.engine.config import ProverConfig\n"
            "from steadfast.prover.common.errors import ConfigError\n"
            "try:\n    ProverConfig(backend='host').resolve()\n"
            "except ConfigError as exc:\n    print('REFUSED', exc)\nelse:\n    print('ACCEPTED')\n")
    r = _run(code, NUMBA_THREADING_LAYER="workqueue")
    assert r.returncode == 0, r.stderr[-3000:]
    line = r.stdout.strip().splitlines()[-1]
    assert line.startswith("REFUSED"), r.stdout
    assert "workqueue" in line and "NUMBA_THREADING_LAYER=omp" in line and "tbb" in line
    ok = _run(code)                                         # numba's default: omp or tbb here
    assert ok.stdout.strip().splitlines()[-1] == "ACCEPTED", ok.stdout + ok.stderr[-2000:]


@pytest.mark.timeout(300)
def test_what_the_refusal_prevents_concurrent_parallel_kernels_abort_under_workqueue():
    code = ("import threading, numpy as np\nfrom numba import njit, prange\n"
            "@njit(parallel=True)\ndef f(a):\n    s = 0.0\n"
            "    for i in prange(a.shape[0]):\n        s += np.sqrt(a[i])\n    return s\n"
            "a = np.ones(1 << 16); f(a)\n"
            "def w():\n    for _ in range(400):\n        f(a)\n"
            "ts = [threading.Thread(target=w) for _ in range(4)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\nprint('SURVIVED')\n")
    r = _run(code, NUMBA_THREADING_LAYER="workqueue", NUMBA_NUM_THREADS="2")
    assert r.returncode != 0 and "SURVIVED" not in r.stdout, (r.returncode, r.stdout)
    assert "workqueue" in (r.stdout + r.stderr).lower()


# ------------------------------------------------------------------ 8. lock order
def test_a_finaliser_inside_the_ledger_lock_does_not_deadlock_a_free():
    """T2 holds the ledger's lock (a garbage collection inside ``reserve`` running a
    numba finaliser), T1 frees a buffer.  The finaliser books through the ledger; before
    the fix the free held the memory lock while waiting for the ledger's, and the
    finaliser waited for the memory lock: both stuck."""
    mem = kb.DeviceMemory("emu", budget=1 << 20)
    arr = mem.to_device(np.arange(8, dtype=np.uint32))
    booked = mem._book_external(512)
    at_ledger = threading.Event()
    orig_release = mem.ledger.release

    def release(*a, **k):
        at_ledger.set()                     # T1 is about to wait for the ledger's lock
        return orig_release(*a, **k)
    mem.ledger.release = release
    done = {}

    def t2():
        with mem.ledger._lock:              # a GC inside the ledger's lock ...
            at_ledger.wait(5)
            mem._unbook_external(booked)    # ... runs the finaliser's unbook
        done["t2"] = True

    def t1():
        done["t1"] = mem.free(arr)
    a = threading.Thread(target=t2, daemon=True)
    a.start()
    b = threading.Thread(target=t1, daemon=True)
    b.start()
    a.join(10)
    b.join(10)
    assert done == {"t1": True, "t2": True}, f"deadlock: {done}"
    assert mem.ledger.in_use == 0 and mem.external_live_bytes == 0


# ------------------------------------------------------------- unlocked statistics
class _SlowInt(int):
    """An int whose ``+`` lets a second thread read the same old value first (if it can
    get there): a lost update shows deterministically where ``+=`` is unlocked."""

    gate = None

    def __add__(self, other):
        try:
            self.gate.wait(1.0)
        except threading.BrokenBarrierError:
            pass
        return int(self) + int(other)


def test_transfer_counters_do_not_lose_updates():
    mem = kb.DeviceMemory("emu")
    _SlowInt.gate = threading.Barrier(2)
    mem.bytes_h2d = _SlowInt(0)
    host = np.zeros(64, np.uint32)
    ts = [threading.Thread(target=mem.to_device, args=(host,)) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert int(mem.bytes_h2d) == 2 * host.nbytes
