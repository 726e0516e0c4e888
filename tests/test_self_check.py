"""The prover's self-check (issue #11, item 5): every proof is verified with the verifier's
own code before it leaves the prover; on device backends the per-table part runs as each
table finishes, overlapped with the other tables' device work, and the final check skips
a table only when everything that check reads is byte-identical."""
import copy

import numpy as np
import pytest

from steadfast.air import examples as ex
from steadfast.prover import Params, prove
from steadfast.prover.api import Prover, ProverConfig, verify
from steadfast.prover.device.pipeline import PipelineConfig
from steadfast.verifier import MerkleError, VerificationError, decode, encode
from steadfast.verifier import verify as verify_protocol
from steadfast.verifier.proof_format import decode_section, encode_section
from steadfast.verifier.protocol import absorb_statement
from steadfast.verifier.transcript import Transcript
from steadfast.verifier.verify import table_check_key, verify_table

from tests.txblocks import one_tx_block

WEAK = dict(num_queries=8, pow_bits=2, logup_pow_bits=2, deep_pow_bits=2, commit_pow_bits=2)


@pytest.fixture(scope="module")
def lookup():
    airs, traces, pvs = ex.lookup_block()
    proof = prove(traces, airs, pvs, Params(**WEAK))
    return airs, pvs, proof


def _keys(airs, pvs, proof_bytes):
    """Table check keys recomputed the way the prover's precheck does (independently of
    verify()): replay the main transcript, fork, key each decoded section's bytes."""
    p = decode(proof_bytes)
    from steadfast.verifier.protocol import table_shape
    shapes = [table_shape(a, t.log_n, p.params) for a, t in zip(airs, p.tables)]
    tr = Transcript()
    absorb_statement(tr, p.params, airs, shapes, pvs)
    tr.absorb("main_cap", p.commits.main_cap)          # the mixed main tree's (format 6)
    assert tr.check_pow("logup_pow", p.logup_nonce, p.params.logup_pow_bits)
    chal = {"logup_beta": np.asarray(tr.sample_ef("logup_beta"), np.uint64),
            "logup_gamma": np.asarray(tr.sample_ef("logup_gamma"), np.uint64)}
    keys = []
    for i, (air, sh, t) in enumerate(zip(airs, shapes, p.tables)):
        fork = tr.fork(i)
        raw = encode_section(t)
        keys.append(table_check_key(copy.deepcopy(fork), air, raw, p.params, chal, p.commits))
        verify_table(fork, air, sh, decode_section(raw, i, p.params), p.params, chal,
                     p.commits)                                                    # passes
    return keys


def test_section_round_trip(lookup):
    _, _, proof = lookup
    p = decode(proof)
    for i, t in enumerate(p.tables):
        assert t.raw == encode_section(t)
        assert decode_section(t.raw, i, p.params).raw == t.raw
    assert encode(p) == proof


def test_prechecked_tables_are_skipped_only_on_identical_inputs(lookup):
    airs, pvs, proof = lookup
    keys = _keys(airs, pvs, proof)
    assert verify_protocol(proof, airs, pvs, min_security_bits=0).tables_prechecked == 0
    res = verify_protocol(proof, airs, pvs, min_security_bits=0, verified_tables=set(keys))
    assert res.tables_prechecked == len(airs)
    res = verify_protocol(proof, airs, pvs, min_security_bits=0, verified_tables={keys[1]})
    assert res.tables_prechecked == 1
    assert verify_protocol(proof, airs, pvs, min_security_bits=0,
                           verified_tables={b"\0" * 32}).tables_prechecked == 0
    # a tampered section never matches an honest key: the verifier checks it and rejects
    p = decode(proof)
    rows = p.tables[0].main_rows.copy()
    rows[0, 0] = (int(rows[0, 0]) + 1) % 2013265921
    p.tables[0].main_rows = rows
    with pytest.raises(MerkleError):
        verify_protocol(encode(p), airs, pvs, min_security_bits=0, verified_tables=set(keys))
    # nor does an honest section under another statement (its public values differ)
    t, pv = ex.fibonacci_trace(4)
    fib = [ex.fibonacci_air()]
    fproof = prove([t], fib, [pv], Params(**WEAK))
    fkeys = set(_keys(fib, [pv], fproof))
    assert verify_protocol(fproof, fib, [pv], min_security_bits=0,
                           verified_tables=fkeys).tables_prechecked == 1
    other = [pv[0], pv[1], (pv[2] + 1) % 2013265921]
    p = decode(fproof)
    p.tables[0].public_values = np.asarray(other, np.uint32)
    with pytest.raises(VerificationError):
        verify_protocol(encode(p), fib, [other], min_security_bits=0, verified_tables=fkeys)


def test_emu_precheck_overlaps_and_final_check_skips(tmp_path):
    """On the emulated device every table of a block of RISC-V transactions is checked as
    it finishes; the final check of the bytes then skips all 18, and the happy path counts
    no failure; the host proof is the same bytes."""
    from steadfast.rv32 import block as rblock
    n = rblock.num_tables(1)
    cfg = ProverConfig(backend="emu", vram_budget="1GiB", postmortem_dir=str(tmp_path), **WEAK)
    proof = Prover(cfg).prove_block(one_tx_block())
    sc = proof.stats.counters["self_check"]
    assert sc["enabled"] and sc["checked"] == 1 and sc["failed"] == 0
    assert sc["tables_prechecked"] == n == 18 and sc["precheck_s"] > 0
    dev = proof.stats.counters["device"]
    assert dev["precheck_tables"] == n and dev["precheck_failed"] == []
    res = verify(proof.to_bytes(), block=one_tx_block(), min_security_bits=0)
    assert res.state_out == proof.state_out and res.exit_codes == [0]
    host = Prover(ProverConfig(backend="host", **WEAK)).prove_block(one_tx_block())
    assert host.to_bytes() == proof.to_bytes()
    assert host.stats.counters["self_check"]["tables_prechecked"] == 0


def test_precheck_off_without_self_check():
    cfg = ProverConfig(backend="emu", vram_budget="1GiB", self_check=False, **WEAK)
    prover = Prover(cfg)
    assert prover._device_config().precheck is False
    assert Prover(ProverConfig(backend="emu", **WEAK))._device_config().precheck is True
    assert PipelineConfig().precheck is False
