"""The library: Prover reused across blocks, prove_tables, BlockProof bytes, verify with
typed errors and an opt-in minimum security, ProofStats, and soundness against altered
traces and false claims."""
from __future__ import annotations

import functools
import json
import threading

import numpy as np
import pytest

from steadfast.prover.api import (BlockProof, ConfigError, ProofSelfCheckFailure, ProofStats,
                                  Prover, ProverConfig, UnprovableBlock, verify)
from steadfast.verifier.errors import PublicValuesError, ShapeError, VerificationError
from steadfast.vm.airs import CPU_LAYOUT, block_airs
from steadfast.vm.block import BlockError
from steadfast.vm.interpreter import execute
from steadfast.vm.statement import NUM_PUBLIC_VALUES, PV_FINAL
from steadfast.vm.traces import build_traces

from tests.vm_blocks import empty_block, hash_heavy_block, memory_heavy_block, one_tx_block

FAST = ProverConfig(backend="host", num_queries=8, pow_bits=2, check=True)
# FAST proofs are weak on purpose; the tests that verify them say so explicitly (the
# library's default minimum is 100 bits: test_min_security_bits_... checks that)
_verify = verify
verify = functools.partial(_verify, min_security_bits=0)


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
    # CPU: LogUp batched to degree 5 at log_blowup 2 (format 5), 4 parts
    assert by["range"].rows == 1 << 16 and by["cpu"].parts == 4 and by["program"].parts == 1
    assert st.proof_bytes == len(proof.proof) and st.cycles == execute(hash_heavy_block()).cycles
    assert {"execute", "traces", "check", "prove", "self_check", "total"} <= set(st.phases)
    sc = st.counters["self_check"]          # the happy path: checked once, nothing refused
    assert sc["enabled"] and sc["checked"] == 1 and sc["failed"] == 0
    assert sc["seconds"] == pytest.approx(st.phases["self_check"], abs=1e-3)
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
    """Trust by default (issue #11, finding 1): the library's verify and the protocol
    verifier require 100 conjectured bits unless told otherwise.  A FAST proof (8 queries,
    2 bits of query grinding) is refused by a plain ``verify(proof, block=...)`` with
    ParameterError -- before the ROM digest or the protocol verifier run -- and accepted
    only when the caller explicitly lowers the minimum."""
    import importlib
    from steadfast.prover import block_verify
    from steadfast.verifier.proof_format import decode
    from steadfast.vm.airs import slots_from_widths
    vv = importlib.import_module("steadfast.verifier.verify")   # the module, not the function
    from steadfast.verifier import verify as verify_protocol
    from steadfast.verifier.errors import ParameterError
    from steadfast.verifier.security import proof_security
    block, proof = proofs["one_tx"]
    for data in (proof, proof.to_bytes()):
        with pytest.raises(ParameterError, match="below the required 100") as ei:
            _verify(data, block=block)                        # the default: 100 bits
        assert isinstance(ei.value, VerificationError)
        assert ei.value.required == 100 and ei.value.bits < 100
    res = _verify(proof, block=block, min_security_bits=0)
    bits = res.security_bits
    decoded = decode(proof.proof)
    airs = block_airs(proof.rom, slots_from_widths([len(t.ood_main) for t in decoded.tables]))
    expect = proof_security(decoded.params, airs, [t.log_n for t in decoded.tables])
    assert bits == expect.bits == ei.value.bits
    # 8 queries and 2 PoW bits: log_blowup*8 + 2 bits for the one FRI of format 3; the
    # other terms are far smaller but add up to more than that term's own share -> one less
    q_bits = res.params.log_blowup * 8 + 2
    assert bits == q_bits - 1 and res.security.limiting == "fri_queries"
    assert res.params.num_queries == 8 and res.params.pow_bits == 2
    assert _verify(proof, min_security_bits=bits).security_bits == bits
    assert _verify(proof, min_security_bits=None).security_bits == bits     # explicit opt-out
    for bad, exc in ((-1, ValueError), ("100", TypeError), (True, TypeError), (1.5, TypeError)):
        with pytest.raises(exc, match="min_security_bits"):
            _verify(proof, min_security_bits=bad)
    assert _verify(proof, min_security_bits=np.int64(bits)).security_bits == bits

    def expensive(*a, **k):
        raise AssertionError("expensive work before the parameter check")
    with monkeypatch.context() as m:
        for name in ("program_digest", "_verify_proof"):
            m.setattr(block_verify, name, expensive)
        with pytest.raises(ParameterError):
            _verify(proof, block=block, min_security_bits=bits + 1)
    # the protocol verifier has the same default, checked after shapes, before hashing
    pvs = [proof.public_values, [], [block.memory_size], [], []]
    with pytest.raises(ParameterError, match="below the required 100"):
        verify_protocol(proof.proof, airs, pvs)
    assert verify_protocol(proof.proof, airs, pvs, min_security_bits=bits).public_values[0] == pvs[0]
    with monkeypatch.context() as m:
        m.setattr(vv, "verify_table", expensive)
        m.setattr(vv, "Transcript", expensive)
        with pytest.raises(ParameterError, match=f"below the required {bits + 1}"):
            verify_protocol(proof.proof, airs, pvs, min_security_bits=bits + 1)


def test_default_parameters_give_100_bits_on_every_block(proofs):
    """The prover's defaults meet the default minimum by the honest figure: on the example
    block's shapes and at the protocol's 2^24-row limit for every table (docs/protocol.md
    section 7)."""
    from steadfast.verifier.proof_format import Params
    from steadfast.verifier.security import proof_security
    airs = block_airs(np.zeros((1, 4), np.int64))
    fixed = [a.fixed_height for a in airs]
    for log_n in (1, 12, 16, 20, 24):
        heights = [(f.bit_length() - 1) if f else log_n for f in fixed]
        rep = proof_security(Params(), airs, heights)
        assert rep.bits >= 100, (log_n, rep.describe())
    # without the grinding steps the same shapes would fall short (LogUp, DEEP)
    weak = Params(logup_pow_bits=0, deep_pow_bits=0, commit_pow_bits=0)
    rep = proof_security(weak, airs, [(f.bit_length() - 1) if f else 24 for f in fixed])
    assert rep.bits < 100 and rep.limiting in ("logup", "deep")


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


def test_altered_trace_proof_is_rejected(prover, tmp_path):
    """prove_tables with the check off: a hand-altered CPU trace yields a proof the
    verifier rejects (and the check, when on, names the constraint); the prover's
    self-check (on by default) refuses to return that proof."""
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
    guarded = Prover(ProverConfig(backend="host", num_queries=8, pow_bits=2, check=False,
                                  postmortem_dir=str(tmp_path)))
    with pytest.raises(ProofSelfCheckFailure, match="does not verify") as ei:
        guarded.prove_tables(tables, bt.public_values, rec.rom.rows)
    assert guarded.self_check_failures == 1
    rep = json.loads(open(ei.value.postmortem).read())
    assert rep["check"] == "self_check" and rep["error"] == "CompositionError"
    assert rep["table"] == "cpu" and rep["backend"] == "host"
    # the documented opt-out lets the wrong proof out (for soundness tests only)
    unchecked = Prover(ProverConfig(backend="host", num_queries=8, pow_bits=2, check=False,
                                    self_check=False))
    bad = unchecked.prove_tables(tables, bt.public_values, rec.rom.rows)
    assert bad.stats.counters["self_check"] == {"enabled": False, "checked": 0, "failed": 0,
                                                "seconds": 0.0}
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
        prover.prove_tables([], [0] * NUM_PUBLIC_VALUES, np.zeros((2, 4)))
    with pytest.raises(ValueError, match=f"{NUM_PUBLIC_VALUES} public values"):
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


# --------------------------------------------------------------------------- issue #14

def test_one_base_exception_and_typed_config():
    """Every error class the API raises sits under steadfast.SteadfastError (and keeps its
    builtin base); ProverConfig refuses wrongly typed fields naming the field and type."""
    import steadfast
    from steadfast.air import ConstraintViolation, LookupImbalance
    from steadfast.kernels.backend import BackendError
    from steadfast.prover.api import DevProofRefused
    from steadfast.prover.xcheck import XcheckFailure
    from steadfast.verifier.errors import ParameterError
    from steadfast.vm.interpreter import ExecutionError
    for cls in (ConfigError, UnprovableBlock, ProofSelfCheckFailure, DevProofRefused,
                VerificationError, ShapeError, PublicValuesError, ParameterError, BlockError,
                XcheckFailure, BackendError, ExecutionError, ConstraintViolation, LookupImbalance):
        assert issubclass(cls, steadfast.SteadfastError), cls
    assert issubclass(ConfigError, ValueError) and issubclass(BlockError, ValueError)
    for kw, frag in (({"num_queries": "100"}, "num_queries must be int, got str '100'"),
                     ({"pow_bits": 2.0}, "pow_bits must be int, got float"),
                     ({"check": 1}, "check must be bool, got int"),
                     ({"log_blowup": True}, "log_blowup must be int, got bool"),
                     ({"threads": "4"}, "threads must be int or None"),
                     ({"backend": None}, "backend must be str")):
        with pytest.raises(ConfigError) as ei:
            ProverConfig(**kw)
        assert frag in str(ei.value) and ei.value.field == next(iter(kw)), str(ei.value)
    with pytest.raises(steadfast.SteadfastError):
        verify(b"nonsense")


def test_config_type_errors_are_type_errors_and_numpy_integers_are_ints():
    """A field of the wrong type is a ConfigTypeError: a ConfigError (a SteadfastError,
    naming the field) and a TypeError; numpy integers are integers and are stored as
    Python ints (the parameters stay plain, JSON-ready); bools and floats are not."""
    import steadfast
    from steadfast.prover.api import ConfigTypeError
    with pytest.raises(TypeError, match=r"num_queries must be int, got str '100'") as ei:
        ProverConfig(num_queries="100")
    assert isinstance(ei.value, (ConfigError, steadfast.SteadfastError, ConfigTypeError))
    assert isinstance(ei.value, ConfigError) and ei.value.field == "num_queries"
    cfg = ProverConfig(num_queries=np.int64(8), pow_bits=np.uint8(2), threads=np.int32(1),
                       vram_budget=np.int64(1 << 20), backend="host")
    for name, want in (("num_queries", 8), ("pow_bits", 2), ("threads", 1),
                       ("vram_budget", 1 << 20)):
        v = getattr(cfg, name)
        assert type(v) is int and v == want, (name, type(v))
    assert json.loads(json.dumps(vars(cfg.params())))["num_queries"] == 8
    assert cfg == ProverConfig(num_queries=8, pow_bits=2, threads=1, vram_budget=1 << 20,
                               backend="host")
    for kw in ({"num_queries": np.float64(8.0)}, {"log_blowup": np.bool_(True)},
               {"check": np.int64(1)}, {"pow_bits": 8.0}):
        with pytest.raises(ConfigTypeError):
            ProverConfig(**kw)


def test_public_api_is_annotated():
    """Type hints on the public API: every parameter and return of the entry points, every
    field of the public records, resolvable at run time (typing.get_type_hints), and no
    bare container where the element type is known."""
    import importlib
    import inspect
    import typing
    from steadfast.prover import api
    core_verify = importlib.import_module("steadfast.verifier.verify").verify
    funcs = [api.Prover.__init__, api.Prover.prove_block, api.Prover.prove_tables,
             api.Prover.execute, api.Prover.precompile, api.verify, core_verify,
             api.ProverConfig.params, api.ProverConfig.resolve, api.ProverConfig.dev,
             api.BlockProof.to_bytes, api.BlockProof.from_bytes, api.BlockProof.save,
             api.BlockProof.load, api.ProofStats.to_json, api.ProofStats.summary,
             api.ProofStats.rounds, api.ExecutionReport.to_json, api.digest_hex]
    for f in funcs:
        hints = typing.get_type_hints(f)
        params = [p for p in inspect.signature(f).parameters if p not in ("self", "cls")]
        missing = [p for p in params + ["return"] if p not in hints]
        assert not missing, (f.__qualname__, missing)
    assert typing.get_type_hints(api.Prover.prove_block)["block"] == api.BlockLike
    for cls in (api.ProverConfig, api.ProofStats, api.TableStats, api.BlockProof,
                api.ExecutionReport, api.TableEstimate, api.VerifiedBlock):
        hints = typing.get_type_hints(cls)
        bare = [k for k in cls.__annotations__ if hints[k] in (list, dict, tuple)]
        assert not bare, (cls.__name__, bare)


def test_py_typed_and_version():
    import os
    import steadfast
    assert os.path.isfile(os.path.join(os.path.dirname(steadfast.__file__), "py.typed"))
    assert steadfast.__version__ == "0.1.0"


def test_lock_wait_is_separate_from_proving(prover):
    """A proof that queues behind another records the wait apart from its proving time
    (the lock is held for at least 0.3 s: a lower bound, never an upper one)."""
    from steadfast.prover.control import PROVE_LOCK
    blk = empty_block()
    PROVE_LOCK.acquire()
    try:
        t = threading.Timer(0.3, PROVE_LOCK.release)
        t.start()
        proof = prover.prove_block(blk)
    finally:
        t.join()
    st = proof.stats
    assert st.lock_wait_s >= 0.25 and st.to_json()["lock_wait_s"] == st.lock_wait_s
    assert st.phases["total"] >= st.lock_wait_s + st.phases["prove"]


def test_every_proof_is_logged(prover, caplog):
    """The host path logs each proof through logging (steadfast.prover), like the device path."""
    import logging
    with caplog.at_level(logging.INFO, logger="steadfast.prover"):
        proof = prover.prove_block(empty_block())
    msgs = [r.getMessage() for r in caplog.records if r.name == "steadfast.prover"]
    assert any(m.startswith("proof: backend host") and f"{len(proof.proof)} bytes" in m
               for m in msgs), msgs


def test_cancel_and_timeout_stop_a_proof(prover):
    """prove_block(timeout=, cancel=): ProofAborted (a SteadfastError) with the reason, at
    a stage boundary or while queued on the process lock; no proof; the prover stays
    usable.  Bad values are ConfigErrors."""
    import steadfast
    from steadfast.prover.api import ProofAborted
    from steadfast.prover.control import PROVE_LOCK
    blk = empty_block()
    ev = threading.Event()
    ev.set()
    with pytest.raises(ProofAborted) as ei:
        prover.prove_block(blk, cancel=ev)
    assert ei.value.reason == "cancelled" and isinstance(ei.value, steadfast.SteadfastError)
    # cancelled from another thread mid-proof: the first stage start sets it
    ev2 = threading.Event()
    seen = []

    def progress(table, stage, event, seconds):
        if table is not None and not seen:
            seen.append(stage)
            ev2.set()
    p2 = Prover(FAST, progress=progress)
    with pytest.raises(ProofAborted) as ei:
        p2.prove_block(blk, cancel=ev2)
    assert ei.value.reason == "cancelled" and seen
    # a timeout while another proof holds the lock
    PROVE_LOCK.acquire()
    try:
        with pytest.raises(ProofAborted) as ei:
            prover.prove_block(blk, timeout=0.2)
    finally:
        PROVE_LOCK.release()
    assert ei.value.reason == "timeout"
    for bad in (0, -1, "5", True):
        with pytest.raises(ConfigError):
            prover.prove_block(blk, timeout=bad)
    proof = prover.prove_block(blk, timeout=3600)      # still usable, same bytes
    assert proof == prover.prove_block(blk)


def test_precompile_without_a_block_is_a_default_blocks_kernels(monkeypatch):
    """Prover.precompile() with no block asks for the kernels of a block of the default
    shapes -- the five AIRs of vm.airs.block_airs with its default slots (k = 1) -- not
    every k of the slotted tables' menus; with a block, that block's own shapes.  (The
    kernel layer is replaced by a recorder: no compilation here.)"""
    import sys
    import types
    from steadfast.vm.airs import SLOTTED, TABLES, table_air
    asked = []
    fake = types.ModuleType("steadfast.kernels.constraint_device")
    fake.precompile = lambda airs, compile, progress: asked.append(list(airs)) or []
    monkeypatch.setitem(sys.modules, "steadfast.kernels.constraint_device", fake)
    p = Prover(FAST)
    p.backend = "sim"                               # the precompiling backends: sim, cuda
    assert p.precompile() == []
    (airs,) = asked
    assert [a.name for a in airs] == list(TABLES)
    for name in SLOTTED:
        assert airs[TABLES.index(name)] is table_air(name, 1, FAST.log_blowup)
    p.precompile(memory_heavy_block())
    rec = execute(memory_heavy_block())
    bt = build_traces(rec, log_blowup=FAST.log_blowup)
    assert [a.main_width for a in asked[1]] == [a.main_width for a in bt.airs]
    assert bt.slots["memory"] != 1                  # (a block of other shapes than k = 1)
