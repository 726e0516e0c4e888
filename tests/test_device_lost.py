"""A lost device (issue #26 item 1): a sticky device error at any site ends in the host
proof's bytes, counted and logged once; the prover's later proofs run on the host.

* fault kind ``lost`` (``PROVER_FAULTS=lost@SITE:RATE``) at each of the 8 sites on
  ``emu`` through the public door for any AIRs (``Prover.prove_airs``);
* on ``sim`` (one 8-row table: the simulator runs every device thread in Python);
* on the strict cupy stand-in (backend ``cuda``), injected and as a real
  ``cupy.cuda.driver.CUDADriverError(700)`` raised by a kernel call: mapped, the backend
  marked lost for the process, the next proof on the host at once;
* the mapping of numba-cuda's real ``CudaAPIError`` and cupy's error types.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from steadfast.air import examples as ex
from steadfast.kernels.backend import DeviceLost, as_device_lost, as_device_oom
from steadfast.prover import prove
from steadfast.prover.api import Prover, ProverConfig
from steadfast.prover.device.faults import SITES, FaultSpecError, parse_faults

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
WEAK = ProverConfig(backend="host", num_queries=8, pow_bits=2, logup_pow_bits=2,
                    deep_pow_bits=2, commit_pow_bits=2)
_MARK = "RESULT "


@pytest.fixture(scope="module")
def lookup():
    airs, traces, pvs = ex.lookup_block(4, 5)
    return airs, traces, pvs, Prover(WEAK).prove_airs(airs, traces, pvs).proof


def _emu(monkeypatch, faults: str) -> Prover:
    monkeypatch.setenv("PROVER_FAULTS", faults)
    for var in ("PROVER_GPU_XCHECK", "PROVER_GPU_FORCE_DOWNGRADE", "PROVER_ABORT_ON_CORRUPTION"):
        monkeypatch.delenv(var, raising=False)
    return Prover(dataclasses.replace(WEAK, backend="emu"))


def test_lost_is_a_fault_kind_at_every_site():
    plan = parse_faults("lost@r2:1,lost@*:0.25,seed=3")
    assert plan.rate("lost", "r2") == 1.0 and plan.rate("lost", "r4.open") == 0.25
    with pytest.raises(FaultSpecError):
        parse_faults("lost@r9:1")


def test_happy_path_new_counters_are_zero(lookup, monkeypatch):
    airs, traces, pvs, host = lookup
    r = _emu(monkeypatch, "").prove_airs(airs, traces, pvs)
    assert r.proof == host
    d, sc = r.stats.counters["device"], r.stats.counters["self_check"]
    assert d["device_lost"] == 0 and d["corruptions_recovered"] == 0
    assert d["host_completion"] is None and d["device_lost_at"] is None
    assert all(v == {"device_lost": 0, "corruptions_recovered": 0}
               for v in d["recovered_by_site"].values())
    assert sorted(d["recovered_by_site"]) == sorted(SITES)
    assert sc["retried"] == 0 and sc["failed"] == 0 and sc["checked"] == 1


@pytest.mark.parametrize("site", SITES)
def test_lost_at_each_site_finishes_on_the_host(lookup, monkeypatch, caplog, site):
    airs, traces, pvs, host = lookup
    prover = _emu(monkeypatch, f"lost@{site}:1")
    with caplog.at_level(logging.WARNING):
        r = prover.prove_airs(airs, traces, pvs)
    assert r.proof == host                              # the host proof's bytes
    d = r.stats.counters["device"]
    assert d["device_lost"] == 1 and d["recovered_by_site"][site]["device_lost"] == 1
    assert sum(v["device_lost"] for v in d["recovered_by_site"].values()) == 1
    assert d["device_lost_at"]["site"] == site and d["device_lost_at"]["injected"] is True
    assert d["host_completion"]["reason"] == "device lost"
    assert d["host_completion"]["seconds"] >= 0
    lost_lines = [rec for rec in caplog.records if "device lost at" in rec.getMessage()]
    assert len(lost_lines) == 1 and site in lost_lines[0].getMessage()   # logged once
    assert prover.lost_device["site"] == site
    # later proofs on this prover: on the host, the same bytes; no retry of the device
    again = prover.prove_airs(airs, traces, pvs)
    assert again.proof == host
    assert again.stats.counters["device"]["on_host"] == "the device was lost earlier"
    assert again.stats.counters["device"]["device_lost"] == 0
    # an injected loss leaves the device usable: another prover still uses it
    other = Prover(dataclasses.replace(WEAK, backend="emu"))
    monkeypatch.delenv("PROVER_FAULTS")
    r3 = other.prove_airs(airs, traces, pvs)
    assert r3.proof == host and "recovery" in r3.stats.counters["device"]


def test_lost_at_random_sites_with_oom_mixed_in(lookup, monkeypatch):
    airs, traces, pvs, host = lookup
    for seed in range(3):
        r = _emu(monkeypatch, f"lost@*:0.05,oom@*:0.3,seed={seed}").prove_airs(airs, traces, pvs)
        assert r.proof == host, seed


def test_lost_on_the_simulator():
    from steadfast.prover.device.pipeline import PipelineConfig, run_pipeline
    from test_pipeline import FAST, _statement
    tr, pv = ex.fibonacci_trace(3)
    airs, traces, pvs = [ex.fibonacci_air()], [tr], [pv]
    ref = prove(traces, airs, pvs, FAST)
    proof, stats = run_pipeline(_statement(airs, traces, pvs),
                                PipelineConfig(backend="sim", workers=1,
                                               faults=parse_faults("lost@r2.tree:1")))
    assert proof == ref and stats.device_lost == 1
    assert stats.counters.events["r2.tree"]["device_lost"] == 1


# -------------------------------------------------------------- real error types, mapped
_MAPPING_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from cuda.bindings import driver as binding
from numba.cuda.cudadrv.driver import CudaAPIError
from steadfast.kernels.backend import as_device_lost, as_device_oom
import fake_cupy
out = {}
for name in ("ILLEGAL_ADDRESS", "LAUNCH_FAILED", "ECC_UNCORRECTABLE", "CONTEXT_IS_DESTROYED",
             "OUT_OF_MEMORY", "INVALID_VALUE"):
    code = getattr(binding.CUresult, "CUDA_ERROR_" + name)
    exc = CudaAPIError(code, "Call to cuStreamSynchronize results in CUDA_ERROR_" + name)
    lost = as_device_lost(exc)
    out[name] = [lost.code if lost else None, as_device_oom(exc) is not None]
for cls in (fake_cupy.CUDADriverError, fake_cupy.CUDARuntimeError):
    for status in (700, 719, 214, 709, 2):
        lost = as_device_lost(cls(status))
        out[f"{cls.__name__}-{status}"] = lost.code if lost else None
try:                          # raised while handling another: the chain is followed
    try:
        raise CudaAPIError(binding.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, "launch")
    except Exception:
        raise RuntimeError("the stream scope's synchronisation failed")
except RuntimeError as exc:
    out["chained"] = as_device_lost(exc).code
print("RESULT " + json.dumps(out))
"""


def test_mapping_of_numba_and_cupy_sticky_errors():
    """numba-cuda's real ``CudaAPIError`` (its ``.code`` a cuda.bindings ``CUresult``) and
    the stand-in's copies of cupy's ``CUDADriverError`` / ``CUDARuntimeError``
    (``.status``): the sticky codes are lost devices, out-of-memory is not (it is a
    DeviceOOM), nor is any other error.  In a subprocess: numba.cuda's real driver module,
    without the simulator."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", _MAPPING_CHILD, str(TESTS)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(lines[-1][len(_MARK):])
    assert r["ILLEGAL_ADDRESS"] == [700, False] and r["LAUNCH_FAILED"] == [719, False]
    assert r["ECC_UNCORRECTABLE"] == [214, False] and r["CONTEXT_IS_DESTROYED"] == [709, False]
    assert r["OUT_OF_MEMORY"] == [None, True] and r["INVALID_VALUE"] == [None, False]
    for cls in ("CUDADriverError", "CUDARuntimeError"):
        assert [r[f"{cls}-{s}"] for s in (700, 719, 214, 709, 2)] == [700, 719, 214, 709, None]
    assert r["chained"] == 700


def test_mapping_in_process_by_name_and_message():
    class CUDADriverError(Exception):      # as cupy_backends.cuda.api.driver's
        def __init__(self, status):
            self.status = status
    assert as_device_lost(CUDADriverError(700)).code == 700
    assert as_device_lost(CUDADriverError(1)) is None
    assert as_device_lost(RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS")) is None   # a name alone
    injected = DeviceLost("injected lost@r3", injected=True)
    assert as_device_lost(injected) is injected
    assert as_device_oom(injected) is None


def test_real_loss_outside_a_site_marks_the_backend_for_the_process(lookup, monkeypatch):
    """A sticky error raised between stages (here by the caps' read after R1, as a stream
    synchronisation would raise it): mapped from the exception, counted under ``other``;
    a real loss marks the backend lost for the process, so a new prover starts on the
    host.  (The process-wide record is this test's own: restored after it.)"""
    from steadfast.prover.device import lost as device_lost
    from steadfast.prover.device.stages import DeviceStages
    monkeypatch.setattr(device_lost, "_PROCESS_LOST", {})

    class CUDARuntimeError(RuntimeError):          # cupy_backends.cuda.api.runtime's shape
        def __init__(self, status):
            self.status = status
            super().__init__("cudaErrorIllegalAddress: an illegal memory access")

    def sync_fails(self, tree, log_cap):
        raise CUDARuntimeError(700)
    airs, traces, pvs, host = lookup
    prover = _emu(monkeypatch, "")
    with monkeypatch.context() as m:
        m.setattr(DeviceStages, "cap", sync_fails)
        r = prover.prove_airs(airs, traces, pvs)
    assert r.proof == host
    d = r.stats.counters["device"]
    assert d["device_lost"] == 1 and d["recovered_by_site"]["other"]["device_lost"] == 1
    assert d["host_completion"]["code"] == 700 and d["device_lost_at"]["injected"] is False
    assert device_lost.process_lost("emu")["code"] == 700
    fresh = Prover(dataclasses.replace(WEAK, backend="emu")).prove_airs(airs, traces, pvs)
    assert fresh.proof == host and fresh.stats.counters["device"]["on_host"]


# ---------------------------------------------------------------------- the stand-in
def _child(cfg: dict) -> dict:
    import fake_cupy
    fake_cupy.install(strict=True)
    from test_cuda_paths import _probe_and_adapt
    _probe_and_adapt(fake_cupy)
    from steadfast.prover.device.lost import process_lost
    from steadfast.prover.device.engines import CudaEngine
    from steadfast.prover.device.pipeline import PipelineConfig, run_pipeline
    from test_pipeline import FAST, _statement
    tr, pv = ex.fibonacci_trace(3)
    airs, traces, pvs = [ex.fibonacci_air()], [tr], [pv]
    ref = prove(traces, airs, pvs, FAST)
    st = _statement(airs, traces, pvs)
    out = {}
    # injected: the device still works, nothing marked for the process
    proof, stats = run_pipeline(st, PipelineConfig(backend="cuda", workers=1,
                                                   faults=parse_faults("lost@r3:1")))
    out["injected"] = [proof == ref, stats.device_lost, process_lost("cuda")]
    # a real sticky error from a kernel call: cupy's driver error, status 700
    import cupy

    def illegal_address(self, *a, **k):
        raise cupy.cuda.driver.CUDADriverError(700)
    CudaEngine.ood = illegal_address
    proof, stats = run_pipeline(st, PipelineConfig(backend="cuda", workers=1))
    out["real"] = [proof == ref, stats.device_lost, stats.counters.lost_at,
                   stats.host_completion, process_lost("cuda")]
    # the backend is lost for the process: the next proof goes to the host at once
    proof, stats = run_pipeline(st, PipelineConfig(backend="cuda", workers=1))
    out["after"] = [proof == ref, stats.device_lost, stats.host_completion]
    return out


@pytest.mark.timeout(240)
def test_lost_on_the_strict_stand_in():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVER_")
           or k == "PROVER_POSTMORTEM_DIR"}
    env["NUMBA_ENABLE_CUDASIM"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(TESTS)])
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "{}"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=220)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)]
    text = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode == 0 and lines, text
    r = json.loads(lines[-1][len(_MARK):])
    assert r["injected"] == [True, 1, None], text
    ok, lost, at, completion, marked = r["real"]
    assert ok and lost == 1, text
    assert at["site"] == "r3" and at["injected"] is False and "700" in at["error"], at
    assert completion["reason"] == "device lost" and completion["code"] == 700
    assert marked["code"] == 700 and marked["site"] == "r3"
    ok, lost, completion = r["after"]
    assert ok and lost == 0 and completion["reason"] == "device lost earlier in this process"


if __name__ == "__main__":
    print(_MARK + json.dumps(_child(json.loads(sys.argv[1])), default=str), flush=True)
