"""Long runs as linked segments (docs/rv32.md "Long programs: segments"): the cut, the
segment tables, the file, and the verifier's refusals -- every one a typed
VerificationError naming the segment -- at segments of 2^10 cycles."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from steadfast import rv32
from steadfast.air import check_traces
from steadfast.prover.api import Prover, ProverConfig
from steadfast.prover.programs.verify import verify_program
from steadfast.prover.programs.segment_proof import SegmentedProof
from steadfast.rv32.segments import Chain, check_segment_cycles, run_segments
from steadfast.rv32.traces import build_traces
from steadfast.verifier.errors import PublicValuesError, ShapeError, VerificationError

import rv32_samples as S

# a loop over memory, MUL, byte stores, a read of the input, writes to fd 1 and
# Poseidon2 calls every 64 iterations: every boundary kind crosses segments
SRC = """
    li s0, 0
    mv s1, a5
    li sp, 0x20000
    li a7, 63
    li a0, 0
    li a1, 0x20100
    li a2, 4
    ecall
loop:
    lw t0, 0(sp)
    addi t0, t0, 3
    sw t0, 0(sp)
    mul t1, t0, t0
    sb t1, 5(sp)
    andi t2, s0, 63
    bnez t2, skip
    li a7, 64
    li a0, 1
    li a1, 0x20100
    li a2, 2
    ecall
    li a7, 0x53460001
    li a0, 0x30000
    li a1, 0x30040
    ecall
skip:
    addi x0, t0, 1
    addi s0, s0, 1
    blt s0, s1, loop
    lw a0, 0(sp)
    li a7, 93
    ecall
"""
SEG = 1024
FAST = ProverConfig(num_queries=6, pow_bits=1, logup_pow_bits=1, deep_pow_bits=1,
                    commit_pow_bits=1)


def program(iterations: int):
    return S.program(SRC.replace("mv s1, a5", f"li s1, {iterations}"),
                     data=[(0x30000, bytes(range(64)))])


INPUT = b"abcdefgh"


@pytest.fixture(scope="module")
def proved():
    prog = program(900)
    p = Prover(FAST).prove_program(prog, INPUT, max_cycles=1 << 20, segment_cycles=SEG)
    return prog, p


def _verify(prog, proof, input=INPUT, **kw):
    data = proof.to_bytes() if isinstance(proof, SegmentedProof) else proof
    return verify_program(data, prog, input, min_security_bits=0, **kw)


def test_segments_agree_with_one_run():
    """The cut: every segment but the last runs exactly S cycles, the last exits; cycles,
    output and exit code are the one run's; each segment's tables hold (check mode) and
    the chain computes every segment's in-values from the previous ones."""
    prog = program(900)
    ex = rv32.execute(prog, INPUT)
    segs = list(run_segments(prog, INPUT, 1 << 20, SEG))
    assert len(segs) > 3 and all(s.cycles == SEG for s in segs[:-1]) and segs[-1].final
    assert sum(s.cycles for s in segs) == ex.cycles
    assert b"".join(s.output for s in segs) == ex.output and segs[-1].exit_code == ex.exit_code
    chain = Chain(prog, INPUT, 1 << 20, SEG)
    for s in segs:
        tr = build_traces(prog, None, 1 << 20, segment=s)
        check_traces(tr.airs, tr.traces, tr.table_public_values)
        linked = chain.link(s, s.final)
        assert np.array_equal(linked.v_in, s.v_in) and np.array_equal(linked.regs_in, s.regs_in)
        chain.advance(linked)


def test_segmented_proof_verifies(proved):
    prog, p = proved
    ex = rv32.execute(prog, INPUT)
    r = _verify(prog, p)
    assert (r.exit_code, r.output, r.claimed_cycles, r.segments) == (
        ex.exit_code, ex.output, ex.cycles, len(p.segments))
    assert r.cycles is None                 # not bound (as a one-proof program's)
    assert len(r.segment_seconds) == r.segments
    again = SegmentedProof.from_bytes(p.to_bytes())
    assert again.to_bytes() == p.to_bytes() and again.exit_code == ex.exit_code


def test_one_segment_run_is_the_one_proof_bytes():
    """A run within one segment proves exactly as without segments."""
    prog = program(20)
    a = Prover(FAST).prove_program(prog, INPUT, max_cycles=4096)
    b = Prover(FAST).prove_program(prog, INPUT, max_cycles=4096, segment_cycles=SEG)
    assert type(a) is type(b) and a.to_bytes() == b.to_bytes()


def _tampered(p, segments):
    return dataclasses.replace(p, segments=tuple(segments))


@pytest.mark.parametrize("how", ["drop", "duplicate", "reorder", "truncate"])
def test_segments_dropped_duplicated_reordered_truncated(proved, how):
    prog, p = proved
    s = list(p.segments)
    segs = {"drop": s[:2] + s[3:], "duplicate": s[:2] + [s[1]] + s[2:],
            "reorder": [s[0], s[2], s[1]] + s[3:], "truncate": s[:-1]}[how]
    with pytest.raises(VerificationError, match="segment"):
        _verify(prog, _tampered(p, segs))


def test_segment_of_another_input(proved):
    """A segment of a run on another input (same program, same cut) does not verify in
    this run's chain; the whole proof does not verify for another input.  (A segment is
    bound to the input bytes it reads -- its IO rows -- and to the input's length: a run
    on an input that differs only in bytes no segment reads is the same run.)"""
    prog, p = proved
    other = Prover(FAST).prove_program(prog, b"XYcdefgh", max_cycles=1 << 20,
                                       segment_cycles=SEG)
    assert len(other.segments) == len(p.segments)
    mixed = list(p.segments)
    mixed[0] = other.segments[0]
    with pytest.raises(VerificationError, match="segment 0"):
        _verify(prog, _tampered(p, mixed))
    with pytest.raises(VerificationError):
        _verify(prog, p, input=b"XYcdefgh")


@pytest.mark.parametrize("field", ["regs_out", "v_out", "pc_out", "wa"])
def test_boundary_that_does_not_match(proved, field):
    """A carried end state other than the one the segment proved: its own proof (whose
    boundary tables are built from it) refuses."""
    prog, p = proved
    s = list(p.segments)
    r = s[1]
    if field == "regs_out":
        regs = list(r.regs_out)
        regs[8] ^= 1                    # s0, the loop counter
        s[1] = dataclasses.replace(r, regs_out=tuple(regs))
    elif field == "v_out":
        v = r.v_out.copy()
        v[0] ^= 1
        s[1] = dataclasses.replace(r, v_out=v)
    elif field == "pc_out":
        s[1] = dataclasses.replace(r, pc_out=r.pc_out + 4)
    else:
        s[1] = dataclasses.replace(r, wa=r.wa[1:], v_out=r.v_out[1:])
    with pytest.raises(VerificationError, match="segment 1"):
        _verify(prog, _tampered(p, s))


def test_final_segment_claims(proved):
    """The last segment must exit; a claimed exit code or output it did not produce, and a
    non-final segment marked final, are refused."""
    prog, p = proved
    s = list(p.segments)
    last = s[-1]
    for bad in (dataclasses.replace(last, exit_code=(last.exit_code + 1) % 256),
                dataclasses.replace(last, final=False, pc_out=4)):
        with pytest.raises(VerificationError):
            _verify(prog, _tampered(p, s[:-1] + [bad]))
    k = next(i for i, x in enumerate(s) if x.output)
    out = bytearray(s[k].output)
    out[0] ^= 1
    forged = dataclasses.replace(s[k], output=bytes(out))
    with pytest.raises(VerificationError, match=f"segment {k}"):
        _verify(prog, _tampered(p, s[:k] + [forged] + s[k + 1:]))
    early = dataclasses.replace(s[1], final=True, exit_code=0, pc_out=0)
    with pytest.raises(PublicValuesError, match="segment 1"):
        _verify(prog, _tampered(p, s[:1] + [early] + s[2:]))


def test_max_cycles(proved):
    prog, p = proved
    with pytest.raises(PublicValuesError, match="max_cycles"):
        _verify(prog, p, max_cycles=1 << 21)
    short = dataclasses.replace(p, max_cycles=3 * SEG)
    with pytest.raises(PublicValuesError, match="passes max_cycles"):
        _verify(prog, short)
    with pytest.raises(Exception) as e:
        Prover(FAST).prove_program(prog, INPUT, max_cycles=3 * SEG, segment_cycles=SEG)
    assert "cycle" in str(e.value) and f"{3 * SEG}" in str(e.value).replace(",", "")


@pytest.mark.parametrize("bad", [1000, 512, 1 << 23, 0, -4, True, 2.0])
def test_segment_size_validated(bad):
    with pytest.raises(ValueError, match="power of two"):
        check_segment_cycles(bad)
    with pytest.raises(ValueError, match="power of two"):
        Prover(FAST).prove_program(program(2), INPUT, segment_cycles=bad)


def test_truncated_or_foreign_file(proved):
    prog, p = proved
    data = p.to_bytes()
    for cut in (3, 20, 40, len(data) // 2, len(data) - 1):
        with pytest.raises(ShapeError):
            SegmentedProof.from_bytes(data[:cut])
    with pytest.raises(ShapeError):
        _verify(prog, data[:len(data) // 2])
    with pytest.raises(ShapeError):
        SegmentedProof.from_bytes(data + b"\0")


def test_the_library_verify_takes_a_segmented_proof_every_way(proved, tmp_path):
    """``api.verify(proof, elf=..., input=...)`` (docs/api.md) takes the SegmentedProof
    ``prove_program`` returns, its bytes and its file, as ``verify_program`` does; given a
    block, or no program, it says what the proof is."""
    from steadfast.prover.api import verify
    prog, p = proved
    path = tmp_path / "seg.proof"
    p.save(str(path))
    want = rv32.execute(prog, INPUT)
    for obj in (p, p.to_bytes(), str(path)):
        r = verify(obj, elf=prog, input=INPUT, min_security_bits=0)
        assert (r.exit_code, r.output, r.segments) == (want.exit_code, want.output,
                                                       len(p.segments))
    with pytest.raises(ShapeError, match="a program proof, not a block proof"):
        verify(p.to_bytes(), {"transactions": []}, min_security_bits=0)
    with pytest.raises(ValueError, match="its program is needed"):
        verify(p, min_security_bits=0)
    with pytest.raises(ShapeError, match="bad magic.*STRS"):
        verify(b"STRX" + p.to_bytes()[4:], elf=prog, input=INPUT, min_security_bits=0)


def test_the_fields_the_verifier_does_not_read_must_be_zero(proved):
    """One encoding per proof: a non-final segment's exit code and the final segment's
    pc_out (docs/api.md's layout: "0 unless final", "0 if final") are refused unless zero
    -- the verifier reads neither, so another value would verify as the same proof."""
    prog, p = proved
    s = list(p.segments)
    odd = [(0, dataclasses.replace(s[0], exit_code=7), "a non-final segment's exit code"),
           (len(s) - 1, dataclasses.replace(s[-1], pc_out=4), "the final segment's pc_out")]
    for j, rec, what in odd:
        segs = s[:j] + [rec] + s[j + 1:]
        data = _tampered(p, segs).to_bytes()
        with pytest.raises(ShapeError, match=f"segment {j}: {what}"):
            SegmentedProof.from_bytes(data)
        with pytest.raises(ShapeError, match=what):
            _verify(prog, data)


def test_an_unaligned_pc_out_is_refused(proved):
    """The proofs bind pc_out / 4 (the execution bus): a pc_out with low bits set would
    verify as the same proof, so the file refuses it."""
    prog, p = proved
    s = list(p.segments)
    segs = [dataclasses.replace(s[0], pc_out=s[0].pc_out + 1)] + s[1:]
    with pytest.raises(ShapeError, match="segment 0: pc_out .* not a multiple of 4"):
        _verify(prog, _tampered(p, segs).to_bytes())


def test_the_final_segment_count_is_not_reported_as_proven(proved):
    """The final segment's count is the prover's word: another count in the file verifies
    (the proofs bind the exit within max_cycles, not the count), so the result's cycles is
    None and the file's count is claimed_cycles, as carried."""
    prog, p = proved
    s = list(p.segments)
    other = dataclasses.replace(s[-1], cycles=s[-1].cycles - 1)
    r = _verify(prog, _tampered(p, s[:-1] + [other]).to_bytes())
    assert r.cycles is None and r.claimed_cycles == sum(x.cycles for x in s) - 1
