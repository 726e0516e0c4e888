"""Issue #27, item 1: a shared NTT table must stay allocated while another stream's
queued kernel still reads it.

kernels/ntt_device.py keeps the twiddle tables (grown on demand) and a few coset tables
(LRU, ``_MAX_TABLES``) on the device, shared by every worker's stream.  A worker takes
the table, launches on its own stream and returns; if another worker has meanwhile
grown (or evicted) the table, the worker's reference was the last one, and numba drops
the array as the worker returns -- before its kernels have run.  Through the pooled
memory manager the block went straight back to cupy's pool, on the stream that
*allocated* it (the publishing worker's), whose next allocation may take it at once:
stream-ordered reuse protects that one stream only.

Reproduced on the strict stand-in (``fake_cupy.install(strict=True)``): launches on a
worker's stream are deferred to a sync point and do not keep their arguments' blocks
allocated (as on a GPU), blocks go back to the free list of the stream that allocated
them, and a block handed out again poisons its last owner's memory (0xFFFFFFFF words,
in that stream's order).  The interleaving is forced, not timed: worker A takes the
table, worker B grows/evicts it before A launches, A returns, B allocates the size of
the old table on its stream, then A's stream runs.  Before the fix A's transform read the
poison; now a shared table's block is released only after a device-wide
synchronisation that follows numba dropping it (kernels.backend.shared_allocations).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
_MARK = "RESULT "


def _in_thread(fn):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc
    t = threading.Thread(target=run, name="worker-B")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _child(cfg: dict) -> dict:
    import numpy as np

    import fake_cupy
    fake_cupy.install(strict=True)
    from numba import cuda

    from steadfast.kernels import backend as kb
    from steadfast.kernels import ntt_device as nd
    from steadfast.kernels import ntt_host
    from steadfast.kernels.field import P

    mem = kb.DeviceMemory("cuda")                 # installs the pooled memory manager
    rng = np.random.default_rng(7)
    log_n, rows = 5, 2
    x = rng.integers(0, P, (rows, 1 << log_n), dtype=np.uint32)
    kind = cfg["kind"]
    if kind == "twiddles":
        run, want = nd.ntt_device, ntt_host.ntt(x)
        hooked = "_twiddles"
    else:                                         # the coset tables' LRU eviction
        run, want = nd.coset_ntt_device, ntt_host.coset_ntt(x)
        hooked = "_table"
    orig = getattr(nd, hooked)
    state = {"armed": False, "old_nbytes": None}

    def b_publish():
        with mem.stream_scope() as sb:            # B publishes the table on its stream
            run(cuda.to_device(x, stream=sb), stream=sb)

    def b_grow_or_evict():
        with mem.stream_scope() as sb:
            if kind == "twiddles":
                orig(log_n + 3, False, sb)        # grown: the old table is retired
            else:
                for shift in range(2, 2 + nd._MAX_TABLES + 1):
                    orig("pre", log_n, shift, sb)  # evicted (LRU)

    def hook(*a, **k):
        d = orig(*a, **k)
        if state["armed"] and threading.current_thread().name == "worker-A":
            state["armed"] = False
            state["old_nbytes"] = int(d.nbytes)
            _in_thread(b_grow_or_evict)           # before A launches with ``d``
        return d
    setattr(nd, hooked, hook)

    def b_reuse():
        with mem.stream_scope():                  # B allocates the old table's size
            held = [cuda.device_array(state["old_nbytes"] // 4, dtype=np.uint32)
                    for _ in range(4)]
            del held

    out: dict = {}

    def worker_a():
        with mem.stream_scope() as sa:
            _in_thread(b_publish)
            d_x = cuda.to_device(x, stream=sa)
            state["armed"] = True
            d_o = run(d_x, stream=sa)             # queued on A's stream
            _in_thread(b_reuse)
            got = d_o.copy_to_host(stream=sa)
            sa.synchronize()                      # now A's kernels run
        out["identical"] = bool(np.array_equal(got, want))
        out["poison_words"] = int(np.count_nonzero(got == 0xFFFFFFFF))
    t = threading.Thread(target=worker_a, name="worker-A")
    t.start()
    t.join()
    out["reuse_poison"] = fake_cupy.DEFERRED.get("reuse_poison", 0)
    out["retired_before_sync"] = kb.retired_shared_count() if hasattr(kb, "retired_shared_count") else None
    live = mem.external_live_bytes
    mem.synchronize()                             # a device-wide sync releases them
    out["retired_after_sync"] = kb.retired_shared_count() if hasattr(kb, "retired_shared_count") else None
    out["live_before_sync"], out["live_after_sync"] = live, mem.external_live_bytes
    out["device_syncs"] = fake_cupy.HOST_WAITS.get("device", 0)
    return out


def _scenario(**cfg) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVER_")}
    env["NUMBA_ENABLE_CUDASIM"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(TESTS)])
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), json.dumps(cfg)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)]
    if proc.returncode != 0 or not lines:
        pytest.fail(f"scenario {cfg} exited {proc.returncode}\n{proc.stderr[-5000:]}"
                    f"\n{proc.stdout[-2000:]}")
    return json.loads(lines[-1][len(_MARK):])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["twiddles", "lru"])
def test_a_retired_shared_table_outlives_the_kernels_that_read_it(kind):
    r = _scenario(kind=kind)
    assert r["identical"], (f"A's transform read a reissued block ({r['poison_words']} "
                            f"poison words): {r}")
    assert r["poison_words"] == 0
    # the retired table waited for a device-wide synchronisation, and was then released
    assert r["retired_before_sync"] and r["retired_before_sync"] >= 1, r
    assert r["retired_after_sync"] == 0, r
    assert r["live_after_sync"] < r["live_before_sync"], r
    # retiring no longer synchronises the whole device (the one device sync: ours)
    assert r["device_syncs"] == 1, r


if __name__ == "__main__":
    print(_MARK + json.dumps(_child(json.loads(sys.argv[1]))), flush=True)
