"""The library: Prover reused across blocks, prove_tables, BlockProof bytes, verify with
typed errors and an opt-in minimum security, ProofStats, and soundness against altered
traces and false claims."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from steadfast.prover.api import (BlockProof, ConfigError, ProofStats, Prover, ProverConfig,
                        UnprovableBlock, verify)
from steadfast.verifier.errors import PublicValuesError, ShapeError, VerificationError
from steadfast.vm.airs import CPU_LAYOUT
from steadfast.vm.block import BlockError
from steadfast.vm.interpreter import execute
from steadfast.vm.statement import PV_FINAL
from steadfast.vm.traces import build_traces

from tests.vm_blocks import empty_block, hash_heavy_block, memory_heavy_block, one_tx_block

FAST = ProverConfig(backend="host", num_queries=8, pow_bits=2, check=True)


@pytest.fixture(scope="module")
def prover():
    return Prover(FAST)


@pytest.fixture(scope="module")
def proofs(prover):
    blocks = {"empty": empty_block(), "one_tx": one_tx_block(), "hash_heavy": hash_heavy_block(),
              "memory_heavy": memory_heavy_block()}
    return {k: (b, prover.prove_block(b)) for k, b in blocks.items()}


@pytest.mark.parametrize("name", ["empty", "one_tx", "hash_heavy", "memory_heavy"])
def test_completeness_one_prover_many_blocks(proofs, name):
    block, proof = proofs[name]
    res = verify(proof, block=block)
    rec = execute(block)
    assert res.final_digest == rec.final_digest == proof.final_digest
    assert res.memory_size == block.memory_size
    again = verify(BlockProof.from_bytes(proof.to_bytes()), block=block.to_json())
    assert again.public_values == res.public_values


def test_stats_record(proofs):
    _, proof = proofs["hash_heavy"]
    st = proof.stats
    assert isinstance(st, ProofStats)
    assert [t.name for t in st.tables] == ["cpu", "program", "memory", "range", "poseidon2"]
    by = {t.name: t for t in st.tables}
    assert by["range"].rows == 1 << 16 and by["cpu"].parts == 2 and by["program"].parts == 1
    assert st.proof_bytes == len(proof.proof) and st.cycles == execute(hash_heavy_block()).cycles
    assert {"execute", "traces", "check", "prove", "total"} <= set(st.phases)   # check is on
    rounds = st.rounds()
    assert {"r1_main", "r2_quotient", "r4_fri"} <= set(rounds) and "table" not in rounds
    assert all(t.seconds.get("r2_quotient", 0) > 0 for t in st.tables)
    j = st.to_json()
    assert j["tables"][0]["rows"] == by["cpu"].rows and j["backend"] == "host"
    assert "cycles/s" in st.summary()


def test_wrong_block_and_tampering_are_rejected(proofs):
    block, proof = proofs["one_tx"]
    other, _ = proofs["empty"]
    with pytest.raises(PublicValuesError, match="input_digest"):
        verify(proof, block=other)
    obj = block.to_json()
    obj["transactions"][0]["inputs"] = [2, 4]
    with pytest.raises(PublicValuesError, match="input_digest"):
        verify(proof, block=obj)
    data = bytearray(proof.to_bytes())
    data[-200] ^= 1
    with pytest.raises(VerificationError):
        verify(bytes(data))
    with pytest.raises(ShapeError):
        verify(b"STBP" + b"\0" * 20)
    with pytest.raises(ShapeError):
        verify(bytes(data[:-1]))
    # a ROM that does not match the program digest
    rom = proof.rom.copy()
    rom[-1, 1] += 1
    with pytest.raises(PublicValuesError, match="program digest"):
        verify(BlockProof(rom, proof.proof))


def test_min_security_bits_refuses_weak_proofs_before_hashing(proofs, monkeypatch):
    """FAST proofs carry 1 * 8 + 2 = 10 conjectured bits: accepted with no minimum (the
    default) or a minimum of 10, refused with ParameterError above that -- before the ROM
    digest, the AIRs or the protocol verifier run."""
    import importlib
    import steadfast.prover.api as api
    vv = importlib.import_module("steadfast.verifier.verify")   # the module, not the function
    from steadfast.verifier import verify as verify_protocol
    from steadfast.verifier.errors import ParameterError
    block, proof = proofs["one_tx"]
    res = verify(proof, block=block, min_security_bits=10)
    assert res.security_bits == 10 and res.params.num_queries == 8 and res.params.pow_bits == 2
    assert verify(proof).security_bits == 10
    for data in (proof, proof.to_bytes()):
        with pytest.raises(ParameterError, match="give 10 conjectured security bits, below "
                                                  "the required 100") as ei:
            verify(data, min_security_bits=100)
        assert isinstance(ei.value, VerificationError)
        assert (ei.value.bits, ei.value.required) == (10, 100)
    for bad, exc in ((-1, ValueError), ("100", TypeError), (True, TypeError), (1.5, TypeError)):
        with pytest.raises(exc, match="min_security_bits"):
            verify(proof, min_security_bits=bad)
    assert verify(proof, min_security_bits=np.int64(10)).security_bits == 10

    def expensive(*a, **k):
        raise AssertionError("expensive work before the parameter check")
    with monkeypatch.context() as m:
        for name in ("program_digest", "block_airs", "_verify_proof"):
            m.setattr(api, name, expensive)
        with pytest.raises(ParameterError):
            verify(proof, block=block, min_security_bits=11)
    # the protocol verifier takes the same argument, checked before shapes and hashing
    airs = api.block_airs(proof.rom)
    pvs = [proof.public_values, [], [block.memory_size], [], []]
    assert verify_protocol(proof.proof, airs, pvs, min_security_bits=10).public_values[0] == pvs[0]
    with monkeypatch.context() as m:
        m.setattr(vv, "check_shapes", expensive)
        with pytest.raises(ParameterError, match="below the required 11"):
            verify_protocol(proof.proof, airs, pvs, min_security_bits=11)


def test_false_claims_cannot_be_proven(prover):
    obj = one_tx_block().to_json()
    obj["transactions"][0]["outputs"] = [6]
    with pytest.raises(UnprovableBlock) as ei:
        prover.prove_block(obj)
    e = ei.value
    assert (e.table, e.constraint) == ("cpu", "output_digest[0]")
    assert e.details == ["$.transactions[0].outputs[0]: claims 6, execution wrote 5"]


def test_execution_failure_and_malformed_block(prover):
    obj = one_tx_block().to_json()
    obj["programs"][0]["code"][2] = ["NOPE"]
    with pytest.raises(UnprovableBlock, match=r"bad opcode 'NOPE'.*|.*\$\.programs\[0\]\.code\[2\]"):
        prover.prove_block(obj)
    with pytest.raises(BlockError):
        prover.prove_block({})


def test_altered_trace_proof_is_rejected(prover):
    """prove_tables with the check off: a hand-altered CPU trace yields a proof the
    verifier rejects (and the check, when on, names the constraint)."""
    block = one_tx_block()
    rec = execute(block)
    bt = build_traces(rec)
    cpu = bt.traces[0].copy()
    r = int(np.nonzero(cpu[:, CPU_LAYOUT.idx["is_add"]])[0][0])
    cpu[r, CPU_LAYOUT.idx["v"] + 16] += 1          # ADD writes 6 instead of 5 (bus stays in CPU)
    tables = [cpu] + bt.traces[1:]
    with pytest.raises(UnprovableBlock) as ei:
        prover.prove_tables(tables, bt.public_values, rec.rom.rows)
    assert ei.value.constraint == "add"
    unchecked = Prover(ProverConfig(backend="host", num_queries=8, pow_bits=2, check=False))
    bad = unchecked.prove_tables(tables, bt.public_values, rec.rom.rows)
    with pytest.raises(VerificationError):
        verify(bad)
    good = unchecked.prove_tables(bt.traces, bt.public_values, rec.rom.rows)
    assert verify(good, block=block).final_digest == bt.public_values[PV_FINAL]


def test_config_validation():
    for cfg, frag in ((ProverConfig(backend="gpu"), "unknown backend"),
                      (ProverConfig(backend="cuda"), "no usable CUDA device"),
                      (ProverConfig(vram_budget="lots"), "vram budget"),
                      (ProverConfig(num_queries=0), "num_queries"),
                      (ProverConfig(log_blowup=0), "log_blowup"),
                      (ProverConfig(threads=0), "threads")):
        with pytest.raises(ConfigError, match=frag):
            Prover(cfg)
    p = Prover(ProverConfig(backend="auto", vram_budget="6GiB", threads=1))
    assert p.backend == "host" and p.vram_budget == 6 << 30


def test_prove_tables_validates_shapes(prover):
    with pytest.raises(ValueError, match="expected 5 tables"):
        prover.prove_tables([], [0] * 41, np.zeros((2, 4)))
    with pytest.raises(ValueError, match="41 public values"):
        prover.prove_tables([np.zeros((2, 2), np.uint32)] * 5, [0], np.zeros((2, 4)))


def test_concurrent_calls_are_serialised(prover):
    block = empty_block()
    results, errors = [], []

    def work():
        try:
            results.append(prover.prove_block(block))
        except Exception as exc:    # pragma: no cover - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 2
    assert results[0].proof == results[1].proof       # bytes are a function of (block, params)
    verify(results[0], block=block)


def test_emu_backend_gives_the_same_bytes(proofs):
    """The device pipeline on the emulated backend: same proof bytes, device counters."""
    block, host_proof = proofs["empty"]
    emu = Prover(ProverConfig(backend="emu", vram_budget="1GiB", num_queries=8, pow_bits=2))
    proof = emu.prove_block(block)
    assert proof.proof == host_proof.proof
    dev = proof.stats.counters["device"]
    assert dev["backend"] == "emu" and dev["budget"] == 1 << 30
    assert proof.stats.backend == "emu"
