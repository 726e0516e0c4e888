"""End to end: RV32IM executions proved with steadfast.prover.core.prove.prove and verified with
rv32.statement.verify_execution (the verifier holds the program, the input and max_cycles;
it reads the exit code and the output off the proof).  Small programs and few queries
(FAST) except one guest at the default parameters."""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

from steadfast import rv32
from steadfast.prover.core.prove import prove
from steadfast.rv32.chips.io import pack_output
from steadfast.rv32.statement import Claim, program_airs, verify_execution
from steadfast.rv32.tables import INDEX
from steadfast.rv32.traces import build_traces
from steadfast.verifier.errors import (LogUpError, PublicValuesError, VerificationError)
from steadfast.verifier.proof_format import Params

import rv32_samples as S

ROOT = Path(__file__).resolve().parents[1]
FAST = Params(log_blowup=2, num_queries=6, pow_bits=1, logup_pow_bits=1, deep_pow_bits=1,
              commit_pow_bits=1)
LIMIT = 1000


@functools.lru_cache(maxsize=None)
def _honest():
    prog, ex, tr = S.all_classes()
    return prove(tr.traces, tr.airs, tr.table_public_values, FAST, check=False)


def test_all_classes_prove_and_verify():
    prog, ex, _ = S.all_classes()
    claim, result = verify_execution(_honest(), prog, S.ALL_INPUT, LIMIT, min_security_bits=0)
    assert claim == Claim(ex.exit_code, ex.output) == Claim(7, b"ell")
    assert result.public_values[INDEX["registers"]][:5] == [7, 3, len(S.ALL_INPUT), LIMIT,
                                                            prog.entry]


def test_wrong_input_program_or_limit_refused():
    prog, ex, _ = S.all_classes()
    proof = _honest()
    with pytest.raises(VerificationError):
        verify_execution(proof, prog, b"jello world", LIMIT, min_security_bits=0)
    with pytest.raises(PublicValuesError):
        verify_execution(proof, prog, S.ALL_INPUT, LIMIT + 1, min_security_bits=0)
    other = S.program(S.ALL_CLASSES.replace("li a0, 5", "li a0, 6"),
                      data=[(0x30000, b"\x01\x02\x03\x04\x05\x06\x07\x08")])
    with pytest.raises(VerificationError):
        verify_execution(proof, other, S.ALL_INPUT, LIMIT, min_security_bits=0)


def test_default_parameters_refuse_weak_proofs():
    prog, _, _ = S.all_classes()
    with pytest.raises(VerificationError):          # FAST is far below 100 bits
        verify_execution(_honest(), prog, S.ALL_INPUT, LIMIT)


@pytest.mark.parametrize("what", ["output", "exit"])
def test_forged_claim_proof_refused(what):
    """A prover claiming another output (its IO table built for it) or exit code: the
    proof is made (check=False) but the verifier's LogUp sum does not vanish."""
    prog, ex, tr = S.all_classes()
    pvs = [list(p) for p in tr.table_public_values]
    airs = tr.airs
    if what == "output":
        out = b"elm"
        airs = program_airs(prog, S.ALL_INPUT, out, FAST.log_blowup, tr.slots)
        pvs[INDEX["io"]] = pack_output(out)
    else:
        pvs[INDEX["registers"]][0] = 8
    proof = prove(tr.traces, airs, pvs, FAST, check=False)
    with pytest.raises(LogUpError):
        verify_execution(proof, prog, S.ALL_INPUT, LIMIT, min_security_bits=0)


def test_log_blowup_1():
    prog, ex, tr = S.traced("""
        li a0, 3
        li a1, 4
        mul a2, a0, a1
        li a7, 93
        mv a0, a2
        ecall
    """)
    params = Params(log_blowup=1, num_queries=8, pow_bits=1, logup_pow_bits=1,
                    deep_pow_bits=1, commit_pow_bits=1)
    tr1 = build_traces(prog, ex, max_cycles=10_000, log_blowup=1)
    airs = program_airs(prog, b"", b"", 1, tr1.slots)
    assert [a.fingerprint() for a in tr1.airs] == [a.fingerprint() for a in airs]
    proof = prove(tr1.traces, tr1.airs, tr1.table_public_values, params, check=False)
    claim, _ = verify_execution(proof, prog, b"", 10_000, min_security_bits=0)
    assert claim == Claim(12, b"")


def test_guest_at_default_parameters():
    """guests/hello.elf with the default parameters (log_blowup 2, 50 queries, grinding):
    >= 100 bits, verified at the default minimum."""
    prog = rv32.load_elf(ROOT / "guests" / "bin" / "hello.elf")
    data = (ROOT / "guests" / "inputs" / "hello" / "world.in").read_bytes()
    ex = rv32.execute(prog, data, record=True)
    tr = build_traces(prog, ex)
    proof = prove(tr.traces, tr.airs, tr.table_public_values, Params(), check=True)
    claim, result = verify_execution(proof, prog, data)
    assert claim == Claim(ex.exit_code, ex.output)
    assert result.security.bits >= 100


def test_statement_decoding():
    """claimed_output reads the claim off a decoded proof or off the verified public
    values; build_traces unpacks as (airs, traces, public values)."""
    from steadfast.rv32.chips.io import unpack_output
    from steadfast.rv32.statement import claimed_output
    from steadfast.verifier.proof_format import decode
    prog, ex, tr = S.all_classes()
    airs, traces, pvs = tr
    assert claimed_output(decode(_honest())) == claimed_output(pvs) == Claim(7, b"ell")
    for out in (b"", b"a", b"ab", b"abc", bytes(range(256)) * 3):
        assert unpack_output(pack_output(out), len(out)) == out
    with pytest.raises(ValueError):
        unpack_output(pack_output(b"abcd"), 3)
    with pytest.raises(ValueError):
        unpack_output([1 << 24], 3)
