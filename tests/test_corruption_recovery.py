"""A caught corruption is recovered, not fatal (issue #26 item 2).

With XCHECK on, a corruption its composition check catches after R3 writes the
post-mortem as before, then that table's chain is recomputed on the host and the proof
goes on; one a per-table recomputation cannot mend (a wrong main, aux or parts commitment
already in the mixed trees whose caps the transcript absorbed -- proof format 6; one
caught after the join, by XCHECK's proof check or the join's own final-polynomial check)
finishes the proof on the host.  Always the host proof's bytes,
counted ``corruptions_recovered``; at most one recomputation per table per proof;
``PROVER_ABORT_ON_CORRUPTION=1`` keeps the stop (``XcheckFailure``: the CLI's exit 4, no
proof).  emu through ``Prover.prove_airs``, sim (one 8-row table) and the strict stand-in.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from steadfast.air import examples as ex
from steadfast.prover import prove
from steadfast.prover.api import Prover, ProverConfig
from steadfast.prover.device.faults import parse_faults
from steadfast.prover.device.xcheck import XcheckFailure

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
WEAK = ProverConfig(backend="host", num_queries=8, pow_bits=2, logup_pow_bits=2,
                    deep_pow_bits=2, commit_pow_bits=2)
_MARK = "RESULT "


@pytest.fixture(scope="module")
def lookup():
    airs, traces, pvs = ex.lookup_block(4, 5)
    return airs, traces, pvs, Prover(WEAK).prove_airs(airs, traces, pvs).proof


def _xcheck_prover(monkeypatch, tmp_path, faults: str, abort: bool = False) -> Prover:
    monkeypatch.setenv("PROVER_FAULTS", faults)
    monkeypatch.setenv("PROVER_GPU_XCHECK", "1")
    monkeypatch.setenv("PROVER_ABORT_ON_CORRUPTION", "1" if abort else "0")
    return Prover(dataclasses.replace(WEAK, backend="emu", postmortem_dir=str(tmp_path)))


def _reports(tmp_path) -> list:
    return [json.loads(p.read_text()) for p in sorted(tmp_path.iterdir())]


@pytest.mark.parametrize("spec,site", [("corrupt-input@r3:1,seed=1", "r3"),
                                       ("corrupt-input@r3:1,seed=2", "r3")])
def test_xcheck_corruption_recomputes_the_table_on_the_host(lookup, monkeypatch, tmp_path,
                                                            caplog, spec, site):
    airs, traces, pvs, host = lookup
    r = _xcheck_prover(monkeypatch, tmp_path, spec).prove_airs(airs, traces, pvs)
    assert r.proof == host
    d = r.stats.counters["device"]
    n = d["corruptions_recovered"]
    assert n >= 1 and d["recovered_by_site"][site]["corruptions_recovered"] == n
    assert d["host_completion"] is None                  # table by table, the proof went on
    assert d["device_lost"] == 0 and r.stats.counters["self_check"]["retried"] == 0
    reports = _reports(tmp_path)
    assert len(reports) == n                             # the post-mortem, as before
    assert all(rep["recovery"].startswith("the table's chain recomputed") for rep in reports)
    recomputed = {rep["table"] for rep in reports}
    assert all(d["tables"][t]["downgraded"] for t in recomputed)
    logged = [rec.getMessage() for rec in caplog.records if "recomputing" in rec.getMessage()]
    assert len(logged) == n and all(site in m for m in logged)      # once per table


@pytest.mark.parametrize("spec,site", [("corrupt@r1.main:1", "r1.main"),
                                       ("corrupt-input@r1.aux:1,seed=1", "r1.aux"),
                                       ("corrupt@r2:1,seed=1", "r2"),
                                       ("corrupt@r4.fri:1", "r4.fri"),
                                       ("corrupt-input@r4.open:1", "r4.open")])
def test_corruption_the_table_cannot_mend_finishes_on_the_host(lookup, monkeypatch, tmp_path,
                                                               spec, site):
    airs, traces, pvs, host = lookup
    r = _xcheck_prover(monkeypatch, tmp_path, spec).prove_airs(airs, traces, pvs)
    assert r.proof == host
    d = r.stats.counters["device"]
    # after the join the site is the one the verifier's error points at (a corrupted
    # opening can surface as a proof-of-work or FRI error): r4.fri or r4.open
    sites = {site} if site in ("r1.main", "r1.aux", "r2") else {"r4.fri", "r4.open"}
    assert d["corruptions_recovered"] == 1
    assert sum(d["recovered_by_site"][s]["corruptions_recovered"] for s in sites) == 1
    assert d["host_completion"]["reason"] == "corruption"
    assert d["host_completion"]["site"] in sites
    assert os.path.exists(d["host_completion"]["postmortem"])


def test_join_check_without_xcheck_is_recovered_too(lookup, monkeypatch, tmp_path):
    """The join's own final-polynomial check is an in-prover integrity check as well."""
    airs, traces, pvs, host = lookup
    monkeypatch.delenv("PROVER_GPU_XCHECK", raising=False)
    monkeypatch.setenv("PROVER_FAULTS", "corrupt@r4.fri:1")
    r = Prover(dataclasses.replace(WEAK, backend="emu", postmortem_dir=str(tmp_path))) \
        .prove_airs(airs, traces, pvs)
    assert r.proof == host and r.stats.counters["device"]["corruptions_recovered"] == 1
    (rep,) = _reports(tmp_path)
    assert rep["recovery"] == "proof finished on the host"


def test_abort_on_corruption_keeps_the_stop(lookup, monkeypatch, tmp_path):
    airs, traces, pvs, _ = lookup
    prover = _xcheck_prover(monkeypatch, tmp_path, "corrupt@r2:1,seed=1", abort=True)
    with pytest.raises(XcheckFailure) as err:
        prover.prove_airs(airs, traces, pvs)
    assert os.path.exists(err.value.postmortem)
    assert err.value.report["recovery"].startswith("none: the proof stops")


def test_one_recomputation_per_table_per_proof(lookup, monkeypatch, tmp_path):
    """A check that keeps failing after the host recomputation stops the proof."""
    from steadfast.prover.device import xcheck
    airs, traces, pvs, _ = lookup
    monkeypatch.setattr(xcheck, "composition_ok", lambda *a, **k: False)
    prover = _xcheck_prover(monkeypatch, tmp_path, "")
    with pytest.raises(XcheckFailure) as err:
        prover.prove_airs(airs, traces, pvs)
    assert getattr(err.value, "final", False)
    assert "already recomputed" in err.value.report["recovery"]


def test_recovered_on_the_simulator(monkeypatch):
    from steadfast.prover.device.pipeline import PipelineConfig, run_pipeline
    from test_pipeline import FAST, _statement
    tr, pv = ex.fibonacci_trace(3)
    airs, traces, pvs = [ex.fibonacci_air()], [tr], [pv]
    proof, stats = run_pipeline(_statement(airs, traces, pvs),
                                PipelineConfig(backend="sim", workers=1, xcheck=True,
                                               recover_corruption=True,
                                               faults=parse_faults("corrupt-input@r3:1,seed=1")))
    assert proof == prove(traces, airs, pvs, FAST)
    assert stats.corruptions_recovered == 1 and stats.host_completion is None


def _child() -> dict:
    import fake_cupy
    fake_cupy.install(strict=True)
    from test_cuda_paths import _probe_and_adapt
    _probe_and_adapt(fake_cupy)
    from steadfast.prover.device.pipeline import PipelineConfig, run_pipeline
    from test_pipeline import FAST, _statement
    tr, pv = ex.fibonacci_trace(3)
    airs, traces, pvs = [ex.fibonacci_air()], [tr], [pv]
    ref = prove(traces, airs, pvs, FAST)
    proof, stats = run_pipeline(_statement(airs, traces, pvs),
                                PipelineConfig(backend="cuda", workers=1, xcheck=True,
                                               recover_corruption=True,
                                               faults=parse_faults("corrupt-input@r3:1,seed=1")))
    return {"identical": proof == ref, "recovered": stats.corruptions_recovered,
            "by_site": stats.counters.events["r3"], "completion": stats.host_completion}


@pytest.mark.timeout(240)
def test_recovered_on_the_strict_stand_in():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVER_")
           or k == "PROVER_POSTMORTEM_DIR"}
    env["NUMBA_ENABLE_CUDASIM"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(TESTS)])
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve())], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=220)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)]
    text = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode == 0 and lines, text
    r = json.loads(lines[-1][len(_MARK):])
    assert r == {"identical": True, "recovered": 1,
                 "by_site": {"device_lost": 0, "corruptions_recovered": 1}, "completion": None}, text


if __name__ == "__main__":
    print(_MARK + json.dumps(_child(), default=str), flush=True)
