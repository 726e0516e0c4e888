"""Your own AIRs (docs/api.md "Your own AIRs"): Prover.prove_airs and verify_airs on an
air.examples AIR set -- two LogUp buses, a preprocessed table, public values, three
heights -- on host and emu (the same bytes, the self-check, the statistics, recovery,
cancel); a tampered proof or the wrong statement is refused; wrong shapes are clear
errors before any work.

WEAK PARAMETERS: the proofs here use 8 queries and little grinding, so they are verified
with min_security_bits=0 -- these tests check the door, not security (one test checks
that the default minimum refuses them)."""
from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from steadfast.air import AirError, ConstraintViolation
from steadfast.air import examples as ex
from steadfast.prover.api import (AirProof, ProofAborted, ProofSelfCheckFailure, Prover,
                                  ProverConfig, verify_airs)
from steadfast.verifier.errors import ParameterError, PublicValuesError, VerificationError

WEAK = ProverConfig(backend="host", num_queries=8, pow_bits=2, logup_pow_bits=2,
                    deep_pow_bits=2, commit_pow_bits=2)


def _statement():
    airs, traces, pvs = ex.lookup_block()
    fib_trace, fib_pv = ex.fibonacci_trace(7)
    return airs + [ex.fibonacci_air()], traces + [fib_trace], pvs + [fib_pv]


@pytest.fixture(scope="module")
def statement():
    return _statement()


@pytest.fixture(scope="module")
def proofs(statement):
    airs, traces, pvs = statement
    return {be: Prover(dataclasses.replace(WEAK, backend=be)).prove_airs(airs, traces, pvs)
            for be in ("host", "emu")}


def test_proves_and_verifies_on_host_and_emu(statement, proofs, tmp_path):
    airs, traces, pvs = statement
    host, emu = proofs["host"], proofs["emu"]
    assert isinstance(host, AirProof) and host.proof == emu.proof      # backend-free bytes
    for proof in (host, host.proof, AirProof.from_bytes(host.to_bytes())):
        res = verify_airs(proof, airs, pvs, min_security_bits=0)
        assert res.public_values == [[int(v) for v in pv] for pv in pvs]
    path = tmp_path / "custom.proof"
    host.save(path)
    assert AirProof.load(path) == host and path.read_bytes() == host.proof
    assert verify_airs(str(path), airs, min_security_bits=0).public_values[-1] == pvs[-1]
    assert host.public_values[-1] == list(pvs[-1])
    assert host.params == WEAK.params()
    for name, proof in proofs.items():
        st = proof.stats
        assert st.backend == name and st.cycles == 0 and st.proof_bytes == len(proof.proof)
        assert [t.name for t in st.tables] == [a.name for a in airs]
        assert [t.rows for t in st.tables] == [t.shape[0] for t in traces]
        assert st.counters["self_check"]["checked"] == 1
        assert {"prove", "self_check", "total"} <= set(st.phases)
    assert "device" in proofs["emu"].stats.counters
    assert "device" not in proofs["host"].stats.counters


def test_default_minimum_refuses_weak_parameters(statement, proofs):
    airs, _, pvs = statement
    with pytest.raises(ParameterError, match="below the required 100"):
        verify_airs(proofs["host"], airs, pvs)


def test_tampered_proof_or_wrong_statement_is_refused(statement, proofs):
    airs, _, pvs = statement
    data = bytearray(proofs["host"].proof)
    for at in (len(data) // 3, len(data) // 2, len(data) - 40):
        bad = bytearray(data)
        bad[at] ^= 0x01
        with pytest.raises(VerificationError):
            verify_airs(bytes(bad), airs, pvs, min_security_bits=0)
    wrong = [list(pv) for pv in pvs]
    wrong[-1][-1] = (wrong[-1][-1] + 1) % ex.P
    with pytest.raises(PublicValuesError):
        verify_airs(proofs["host"], airs, wrong, min_security_bits=0)
    with pytest.raises(VerificationError):                  # another AIR in table 0
        verify_airs(proofs["host"], [ex.cubic_air()] + airs[1:], pvs, min_security_bits=0)
    with pytest.raises(VerificationError):                  # a table missing
        verify_airs(proofs["host"], airs[:-1], pvs[:-1], min_security_bits=0)
    with pytest.raises(TypeError):
        verify_airs(12, airs)


def test_wrong_shapes_are_clear_errors_before_any_work(statement):
    airs, traces, pvs = statement
    prover = Prover(WEAK)

    def refuses(exc, match, a=airs, t=traces, p=pvs):
        with pytest.raises(exc, match=match):
            prover.prove_airs(a, t, p)
    refuses(ValueError, "3 traces for 4 AIRs", t=traces[:-1])
    refuses(ValueError, "3 public-value lists for 4 AIRs", p=pvs[:-1])
    refuses(ValueError, "at least one AIR", a=[], t=[], p=[])
    refuses(TypeError, r"airs\[1\] is a str", a=[airs[0], "range8", *airs[2:]])
    refuses(TypeError, "fibonacci: a trace is a 2-d numpy uint32 array",
            t=traces[:-1] + [traces[-1].tolist()])
    refuses(TypeError, "fibonacci: a trace is a 2-d", t=traces[:-1] + [traces[-1][:, 0]])
    refuses(TypeError, "fibonacci: trace dtype must be uint32",
            t=traces[:-1] + [traces[-1].astype(np.int64)])
    refuses(AirError, r"fibonacci: trace shape \(128, 3\), expected \(n, 2\)",
            t=traces[:-1] + [np.zeros((128, 3), np.uint32)])
    refuses(AirError, "fibonacci: trace height 96 is not a power of two",
            t=traces[:-1] + [traces[-1][:96]])
    refuses(AirError, "fibonacci: 2 public values given, the AIR declares 3",
            p=pvs[:-1] + [pvs[-1][:2]])
    refuses(AirError, "non-canonical", t=traces[:-1] + [np.full((128, 2), ex.P, np.uint32)])
    assert issubclass(AirError, ValueError)
    assert prover.self_check_failures == 0


def test_check_mode_names_the_violation_and_the_self_check_refuses_without_it(statement):
    airs, traces, pvs = statement
    bad = traces[-1].copy()
    bad[5, 1] = (int(bad[5, 1]) + 1) % ex.P
    broken = traces[:-1] + [bad]
    with pytest.raises(ConstraintViolation) as ei:
        Prover(dataclasses.replace(WEAK, check=True)).prove_airs(airs, broken, pvs)
    assert ei.value.table == "fibonacci"
    prover = Prover(WEAK)
    with pytest.raises(ProofSelfCheckFailure):
        prover.prove_airs(airs, broken, pvs)
    assert prover.self_check_failures == 1


def test_recovery_and_cancel(statement, proofs, monkeypatch):
    """emu with every R2 site out of memory: the tables downgrade to the host, the bytes
    do not change; a set cancel event stops the proof (ProofAborted), the prover stays
    usable; a bad timeout is a ConfigError."""
    from steadfast.prover.api import ConfigError
    airs, traces, pvs = statement
    monkeypatch.setenv("PROVER_FAULTS", "oom@r2:1")
    prover = Prover(dataclasses.replace(WEAK, backend="emu"))
    proof = prover.prove_airs(airs, traces, pvs)
    assert proof.proof == proofs["host"].proof
    rec = proof.stats.counters["device"]["recovery"]
    assert sum(c.get("downgrades", 0) for c in rec.values()) >= 1, rec
    monkeypatch.delenv("PROVER_FAULTS")
    ev = threading.Event()
    ev.set()
    with pytest.raises(ProofAborted) as ei:
        prover.prove_airs(airs, traces, pvs, cancel=ev)
    assert ei.value.reason == "cancelled"
    with pytest.raises(ConfigError):
        prover.prove_airs(airs, traces, pvs, timeout=-1)
    assert prover.prove_airs(airs, traces, pvs, timeout=3600).proof == proofs["host"].proof
