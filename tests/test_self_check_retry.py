"""A failed self-check is retried once (issue #26 item 3): on a device backend a proof
that fails the final self-check is proved again on the host -- the whole proof -- and the
correct proof is returned, the failure's post-mortem kept, counted
``counters.self_check.retried``; on the host backend a failure stays fatal, as it does
when the host proof fails too, and with ``PROVER_ABORT_ON_CORRUPTION=1``."""
from __future__ import annotations

import dataclasses
import json
import logging

import pytest

from steadfast.air import examples as ex
from steadfast.prover.api import ProofSelfCheckFailure, Prover, ProverConfig

WEAK = ProverConfig(backend="host", num_queries=8, pow_bits=2, logup_pow_bits=2,
                    deep_pow_bits=2, commit_pow_bits=2)


@pytest.fixture(scope="module")
def lookup():
    airs, traces, pvs = ex.lookup_block(4, 5)
    return airs, traces, pvs, Prover(WEAK).prove_airs(airs, traces, pvs).proof


def _env(monkeypatch, faults: str, abort: bool = False) -> None:
    monkeypatch.setenv("PROVER_FAULTS", faults)
    monkeypatch.delenv("PROVER_GPU_XCHECK", raising=False)
    monkeypatch.setenv("PROVER_ABORT_ON_CORRUPTION", "1" if abort else "0")


def test_device_proof_failing_the_self_check_is_proved_again_on_the_host(lookup, monkeypatch,
                                                                         tmp_path, caplog):
    airs, traces, pvs, host = lookup
    _env(monkeypatch, "corrupt@r2:1,seed=1")          # no XCHECK: only the self-check sees it
    prover = Prover(dataclasses.replace(WEAK, backend="emu", postmortem_dir=str(tmp_path)))
    with caplog.at_level(logging.WARNING, logger="steadfast.prover"):
        r = prover.prove_airs(airs, traces, pvs)
    assert r.proof == host
    sc = r.stats.counters["self_check"]
    assert sc["retried"] == 1 and sc["failed"] == 1 and sc["checked"] == 2
    rep = json.loads(open(sc["retried_postmortem"]).read())        # the failure's, kept
    assert rep["check"] == "self_check" and rep["backend"] == "emu"
    assert rep["retry"].startswith("the proof proved again on the host")
    assert prover.self_check_failures == 1
    assert "host_retry" in r.stats.phases
    lines = [m.getMessage() for m in caplog.records if "proving it again" in m.getMessage()]
    assert len(lines) == 1 and "table" in lines[0]                  # logged once
    # the prover keeps its device: the next proof is a device proof again
    monkeypatch.delenv("PROVER_FAULTS")
    again = prover.prove_airs(airs, traces, pvs)
    assert again.proof == host and again.stats.counters["self_check"]["retried"] == 0


def test_retried_once_only(lookup, monkeypatch, tmp_path):
    """A statement that does not hold fails on the host as well: fatal after one retry."""
    airs, traces, pvs, _ = lookup
    bad = traces[0].copy()
    bad[1, 2] = (int(bad[1, 2]) + 1) % ex.P
    _env(monkeypatch, "")
    prover = Prover(dataclasses.replace(WEAK, backend="emu", postmortem_dir=str(tmp_path)))
    with pytest.raises(ProofSelfCheckFailure) as err:
        prover.prove_airs(airs, [bad] + list(traces[1:]), pvs)
    assert prover.self_check_failures == 2
    reports = [json.loads(p.read_text()) for p in sorted(tmp_path.iterdir())]
    assert sorted(r["backend"] for r in reports) == ["emu", "emu"]
    assert sorted(r["retry"] for r in reports)[0] == "none"
    assert err.value.report["retry"] == "none"


def test_host_backend_failure_stays_fatal(lookup, monkeypatch, tmp_path):
    airs, traces, pvs, _ = lookup
    bad = traces[0].copy()
    bad[1, 2] = (int(bad[1, 2]) + 1) % ex.P
    prover = Prover(dataclasses.replace(WEAK, postmortem_dir=str(tmp_path)))
    with pytest.raises(ProofSelfCheckFailure) as err:
        prover.prove_airs(airs, [bad] + list(traces[1:]), pvs)
    assert prover.self_check_failures == 1 and err.value.report["retry"] == "none"


def test_abort_on_corruption_keeps_the_refusal(lookup, monkeypatch, tmp_path):
    airs, traces, pvs, _ = lookup
    _env(monkeypatch, "corrupt@r2:1,seed=1", abort=True)
    prover = Prover(dataclasses.replace(WEAK, backend="emu", postmortem_dir=str(tmp_path)))
    with pytest.raises(ProofSelfCheckFailure):
        prover.prove_airs(airs, traces, pvs)


def test_retried_on_the_simulator(monkeypatch, tmp_path):
    tr, pv = ex.fibonacci_trace(3)
    airs, traces, pvs = [ex.fibonacci_air()], [tr], [pv]
    host = Prover(WEAK).prove_airs(airs, traces, pvs).proof
    _env(monkeypatch, "corrupt@r2:1,seed=1")
    r = Prover(dataclasses.replace(WEAK, backend="sim", postmortem_dir=str(tmp_path))) \
        .prove_airs(airs, traces, pvs)
    assert r.proof == host and r.stats.counters["self_check"]["retried"] == 1
