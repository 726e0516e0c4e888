"""Many proofs, one device (issue #26 item 4): prover.service.ProofService proves several
statements at once through one admission gate, each proof in its own slot's budget share
and device memory, with its own fault plan and its own Prover.  Every proof is the host
proof's bytes; one proof's OOM, corruption, lost device or failure stays its own.  emu,
small generic AIRs (air.examples.lookup_block: three tables, two buses)."""
from __future__ import annotations

import dataclasses
import threading

import pytest

from steadfast.air import examples as ex
from steadfast.prover.engine import control
from steadfast.prover.api import Prover, ProverConfig
from steadfast.prover.device.lost import process_lost
from steadfast.prover.common.errors import ConfigError
from steadfast.prover.service import ProofService, ServiceGate, recoveries

WEAK = ProverConfig(backend="host", num_queries=8, pow_bits=2, logup_pow_bits=2,
                    deep_pow_bits=2, commit_pow_bits=2)


@pytest.fixture(scope="module")
def statements():
    """Two distinct statements, their host proofs, and one proof's device peak alone."""
    out = []
    for seed in (2, 3):
        airs, traces, pvs = ex.lookup_block(4, 5, seed=seed)
        out.append(((airs, traces, pvs), Prover(WEAK).prove_airs(airs, traces, pvs).proof))
    alone = Prover(dataclasses.replace(WEAK, backend="emu")).prove_airs(*out[0][0])
    assert alone.proof == out[0][1]
    return out, alone.stats.counters["device"]["peak_device_bytes"]


def _service(tmp_path, concurrency, budget):
    return ProofService(dataclasses.replace(WEAK, backend="emu", postmortem_dir=str(tmp_path)),
                        concurrency=concurrency, budget=budget)


MIX = ["", "oom@r2:0.5,seed=1", "lost@r3:1", "corrupt@r2:1,seed=2", "oom@*:0.3,seed=4",
       "lost@r1.main:1", "corrupt@r4.fri:1,seed=3", "oom@r4.open:1,lost@r4.deep:1",
       "corrupt@r1.main:1,seed=5", "", "oom@r1.aux:1,corrupt@r3:1,seed=6", "lost@r4.open:1"]


def test_twelve_proofs_three_at_a_time_faults_mixed_all_identical(statements, tmp_path):
    stmts, peak = statements
    budget = peak * 3 // 4                  # below the peak of one proof alone
    with _service(tmp_path, 3, budget) as svc:
        futures = [svc.submit(stmts[i % 2][0], method="prove_airs", faults=spec,
                              xcheck=bool(i % 3 == 0)) for i, spec in enumerate(MIX)]
        proofs = [f.result() for f in futures]
        st = svc.stats()
    share = svc.gate.share
    assert share == budget // 3
    assert [p.proof == stmts[i % 2][1] for i, p in enumerate(proofs)] == [True] * 12
    rec = [recoveries(p.stats) for p in proofs]
    for p, spec, r in zip(proofs, MIX, rec):
        dev = p.stats.counters["device"]
        assert 0 < dev["peak_device_bytes"] <= share          # each proof within its share
        assert dev["budget"] == share
        assert p.stats.counters["service"]["share"] == share
        assert r["device_lost"] == ("lost@" in spec)
    assert sum(r["corruptions_recovered"] + r["self_check_retried"] for r in rec) >= 3
    assert sum(r["retries"] + r["downgrades"] for r in rec) > 0
    g = st["gate"]
    assert g["admitted"] == 12 and g["in_flight"] == 0
    assert 1 <= g["max_in_flight"] <= 3 and g["max_booked"] <= budget
    assert st["failed"] == 0 and st["on_host_after_loss"] == 0
    assert process_lost("emu") is None                      # injected losses stay per proof


def test_a_lost_device_in_one_proof_does_not_mark_the_others(statements, tmp_path):
    stmts, _ = statements
    with _service(tmp_path, 2, None) as svc:
        lost = svc.submit(stmts[0][0], method="prove_airs", faults="lost@r1.main:1")
        others = [svc.submit(stmts[i % 2][0], method="prove_airs", faults="")
                  for i in range(4)]
        lp = lost.result()
        assert lp.stats.counters["device"]["device_lost"] == 1
        assert lp.proof == stmts[0][1]
        for i, f in enumerate(others):
            dev = f.result().stats.counters["device"]
            assert f.result().proof == stmts[i % 2][1]
            assert dev["device_lost"] == 0 and dev["host_completion"] is None
            # it ran on the device: its own tables' uploads (the peak is the slot's)
            assert sum(t["h2d_bytes"] for t in dev["tables"].values()) > 0
            assert "on_host" not in dev
    assert process_lost("emu") is None


def test_a_failure_is_its_own_futures(statements, tmp_path):
    stmts, _ = statements
    airs, traces, pvs = stmts[0][0]
    with _service(tmp_path, 2, None) as svc:
        bad = svc.submit((airs, traces[:2], pvs), method="prove_airs")
        good = svc.submit(stmts[1][0], method="prove_airs", faults="oom@r2:1")
        with pytest.raises(ValueError, match="traces for 3 AIRs"):
            bad.result()
        assert good.result().proof == stmts[1][1]
        assert svc.stats()["failed"] == 1 and svc.stats()["proofs"] == 2


def test_the_gate_and_the_process_lock():
    g = ServiceGate(100, 3)
    assert g.share == 33
    slots = [g.acquire() for _ in range(3)]
    assert sorted(slots) == [0, 1, 2] and g.max_in_flight == 3
    got = []
    t = threading.Thread(target=lambda: got.append(g.acquire()))
    t.start()
    t.join(0.3)
    assert not got                                  # a fourth proof waits for a slot
    g.release(1)
    t.join(5)
    assert got == [1]
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(control.ProofAborted):
        g.acquire(cancel)
    for bad in (0, -1, True):
        with pytest.raises(ConfigError):
            ServiceGate(None, bad)
    with pytest.raises(ConfigError):
        ServiceGate(2, 3)
    # a plain caller still takes the process lock; a thread the gate admitted does not
    with control.locked(None):
        assert control.PROVE_LOCK.locked()
    with control.admitted(0):
        assert control.current_slot() == 0
        with control.locked(None):
            assert not control.PROVE_LOCK.locked()
    assert control.current_slot() is None
