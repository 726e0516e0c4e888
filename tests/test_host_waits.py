"""Issue #27, item 7: host waits per stage on the strict stand-in.

Every host wait the stand-in sees is counted (``fake_cupy.HOST_WAITS``: stream, numba
stream, device and event synchronisations, blocking downloads, array-interface hand-offs)
with its thread and its caller.  A proof of the tiny lookup block with backend ``cuda``
and two workers: the table workers' waits per table and where they come from.

Measured on this stand-in (tiny lookup block, 3 tables, 2 workers, 2026-12-01), table
workers' waits before -> after: 90 -> 72 (30 -> 24 a table).  Gone: the 18 waits of
``DeviceMemory.free`` for the worker's stream (a buffer freed on the stream that allocated
it needs none: cupy's pool reuses the block only for later work of that stream, queued
after everything that read it).  On the calling thread (teardown, spills) the 39
device-wide synchronisations of frees outside a stream scope became waits for the null
stream alone (one device-wide sync is left: ``end_epoch``).  What remains per table:
7 CUDA-event syncs of the stage clock (prover/device/pipeline.py, at the table's end), 3 Merkle
root fetches (one per commit, kernels/merkle_device.py: the next one to remove -- format 3
puts caps, not roots, in the proof), 4-5 OOD fetches (the values R3 needs), 2 stream-scope
ends (4 since proof format 6: R1 main and the three passes), 2 cap downloads, the LogUp terminal and DEEP flag fetches, and the one-off uploads of
shared NTT tables (3 a table here, once per process and key).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
_MARK = "RESULT "


def _child(cfg: dict) -> dict:
    import fake_cupy
    fake_cupy.install(strict=True)
    from test_cuda_paths import _probe_and_adapt
    _probe_and_adapt(fake_cupy)
    from steadfast.prover.device.pipeline import PipelineConfig, run_pipeline
    from test_pipeline import _statement, tiny_lookup_block

    airs, traces, pvs, ref = tiny_lookup_block()
    proof, stats = run_pipeline(_statement(airs, traces, pvs),
                                PipelineConfig(backend="cuda", workers=cfg["workers"]))
    worker = [w for w in fake_cupy.HOST_WAIT_LOG if w[0].startswith("table")]
    sites: Counter = Counter()
    for _, kind, caller in worker:
        path, _, line = caller.rpartition(":")
        sites[f"{kind} @ {Path(path).parent.name}/{Path(path).name}:{line}"] += 1
    return dict(identical=proof == ref, tables=len(stats.tables),
                waits=dict(fake_cupy.HOST_WAITS), worker_waits=len(worker),
                worker_kinds=dict(Counter(k for _, k, _ in worker)),
                sites=dict(sites.most_common()))


def _scenario(**cfg) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVER_")}
    env["NUMBA_ENABLE_CUDASIM"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(TESTS)])
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), json.dumps(cfg)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)]
    if proc.returncode != 0 or not lines:
        pytest.fail(f"scenario {cfg} exited {proc.returncode}\n{proc.stderr[-5000:]}")
    return json.loads(lines[-1][len(_MARK):])


def _free_waits(sites: dict) -> int:
    return sum(n for s, n in sites.items() if "kernels/device_memory.py" in s)


@pytest.mark.timeout(480)
def test_table_workers_wait_less_per_stage():
    r = _scenario(workers=2)
    assert r["identical"], r
    n = r["tables"]
    # in kernels/device_memory.py only the stream-scope ends are left (four phases a
    # table since proof format 6: R1 main and the three passes between the mixed
    # commitments): no free on the allocating stream waits (before: 18 more, one per free)
    assert _free_waits(r["sites"]) <= 4 * n, r["sites"]
    assert r["worker_waits"] <= 25 * n, (r["worker_waits"], r["sites"])       # before: 30 n
    # frees outside a stream scope wait for the null stream, not the device (before: 39)
    assert r["waits"].get("device", 0) <= 2, r["waits"]


if __name__ == "__main__":
    print(_MARK + json.dumps(_child(json.loads(sys.argv[1]))), flush=True)
