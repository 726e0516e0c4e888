"""The library's program side (docs/api.md "Proving programs"): Prover.prove_program /
execute_program, ProgramProof and its file, verify(proof, elf=, input=) ->
VerifiedProgram, the typed errors; the same bytes on host and emu (with an injected OOM
recovered, XCHECK on, a timeline), one small sim proof, development mode.

WEAK PARAMETERS: 6 queries (CFG) -- verified with min_security_bits=0 except where the
default minimum's refusal is the point."""
import dataclasses
import hashlib
import os
from pathlib import Path

import pytest

from steadfast import SteadfastError, rv32
from steadfast.prover.api import (DevProofRefused, ElfError, ProgramProof, Prover,
                                  ProverConfig, UnprovableBlock, UnprovableProgram,
                                  VerifiedProgram, verify)
from steadfast.verifier.errors import (ParameterError, PublicValuesError, ShapeError,
                                       VerificationError)

ROOT = Path(__file__).resolve().parents[1]
HELLO = ROOT / "guests" / "bin" / "hello.elf"
HELLO_IN = b"rv32 proofs"
MERKLE = ROOT / "guests" / "bin" / "merkle.elf"
MERKLE_IN = (ROOT / "guests" / "inputs" / "merkle" / "n5.in").read_bytes()
CFG = ProverConfig(backend="host", num_queries=6, pow_bits=1)
EMU = dataclasses.replace(CFG, backend="emu")
ANY = dict(min_security_bits=0)


@pytest.fixture(scope="module")
def prover():
    return Prover(CFG)


@pytest.fixture(scope="module")
def hello(prover):
    return prover.prove_program(HELLO, HELLO_IN)


def test_hello_round_trip(hello, tmp_path):
    """The proven exit code and output; the file round trip (bytes, save/load); verify
    with the ELF as a path, bytes or Program -> VerifiedProgram."""
    out = b"hello from rv32im\n" + HELLO_IN[::-1]
    assert (hello.exit_code, hello.output, hello.dev) == (0, out, False)
    prog = rv32.load_elf(HELLO)
    assert hello.program_digest == prog.digest()
    assert hello.input_sha256 == hashlib.sha256(HELLO_IN).digest()
    # the default limit is 2^30 (segments); a one-proof carries min(max_cycles, 2^24)
    assert hello.max_cycles == rv32.MAX_CYCLES_CEILING
    ex = rv32.execute(prog, HELLO_IN)
    st = hello.stats
    assert st.cycles == ex.cycles and len(st.tables) == 18 and st.proof_bytes == len(hello.proof)
    assert st.counters["self_check"]["checked"] == 1
    data = hello.to_bytes()
    assert data[:4] == b"STRV" and len(data) == 12 + len(hello.proof)
    assert ProgramProof.from_bytes(data) == hello
    hello.save(tmp_path / "h.proof")
    assert ProgramProof.load(tmp_path / "h.proof") == hello
    for elf in (HELLO, str(HELLO), HELLO.read_bytes(), prog):
        res = verify(data, elf=elf, input=HELLO_IN, **ANY)
        assert isinstance(res, VerifiedProgram)
        assert (res.exit_code, res.output, res.max_cycles) == (0, out, rv32.MAX_CYCLES_CEILING)
        assert res.cycles is None and 0 < res.security_bits < 100 and not res.dev
        assert res.program_digest == prog.digest() and res.params.num_queries == 6
    # proved within 2^24 cycles, the run is within any larger limit asked; not a smaller
    for asked in (1 << 24, 1 << 30, (1 << 32) - 1):
        res = verify(tmp_path / "h.proof", elf=HELLO, input=HELLO_IN, max_cycles=asked, **ANY)
        assert res.output == out and res.max_cycles == 1 << 24
    with pytest.raises(PublicValuesError, match="max_cycles"):
        verify(tmp_path / "h.proof", elf=HELLO, input=HELLO_IN, max_cycles=1 << 23, **ANY)


def test_another_guest_with_poseidon2_and_a_limit(prover):
    """merkle (SYS_POSEIDON2 calls) with its own max_cycles: the proven output is the
    model's; the limit is bound (verify names another)."""
    expected = (ROOT / "guests" / "inputs" / "merkle" / "n5.out").read_bytes()
    proof = prover.prove_program(MERKLE, MERKLE_IN, max_cycles=5000)
    assert (proof.exit_code, proof.output, proof.max_cycles) == (0, expected, 5000)
    res = verify(proof, elf=MERKLE, input=MERKLE_IN, **ANY)
    assert res.max_cycles == 5000 and res.output == expected
    with pytest.raises(PublicValuesError, match="max_cycles 5,000, not 6,000"):
        verify(proof, elf=MERKLE, input=MERKLE_IN, max_cycles=6000, **ANY)


def test_a_public_value_that_is_no_16_bit_limb_is_named_not_a_crash(hello):
    """A tampered proof whose input digest holds a field element >= 2^16 (no 16-bit limb)
    is refused with a PublicValuesError naming the input -- the message used to format
    the limbs as bytes and raise OverflowError (bench/fuzz_verify.py, seed 6, case 2622)."""
    from steadfast.rv32.statement import PV_INPUT_SHA
    from steadfast.rv32.tables import INDEX
    from steadfast.verifier.proof_format import decode, encode
    p = decode(hello.proof)
    pv = p.tables[INDEX["registers"]].public_values.copy()
    pv[PV_INPUT_SHA.start] = 1 << 16
    p.tables[INDEX["registers"]].public_values = pv
    bad = dataclasses.replace(hello, proof=encode(p))
    with pytest.raises(PublicValuesError, match=r"not for this input .*not 16-bit limbs"):
        verify(bad, elf=HELLO, input=HELLO_IN, **ANY)


def test_refused_for_another_program_input_or_tampered(hello):
    """A proof is refused for another program, another input, another limit, tampered or
    truncated bytes, offered as a block proof, or with the default minimum security; a
    block proof is refused as a program proof."""
    data = hello.to_bytes()
    with pytest.raises(PublicValuesError, match="not for this input"):
        verify(data, elf=HELLO, input=HELLO_IN + b"!", **ANY)
    with pytest.raises(PublicValuesError, match="not for this input"):
        verify(data, elf=HELLO, **ANY)                  # the empty input
    with pytest.raises(PublicValuesError, match="not for this program"):
        verify(data, elf=MERKLE, input=HELLO_IN, **ANY)
    with pytest.raises(ParameterError):                 # 6 queries: far below 100 bits
        verify(data, elf=HELLO, input=HELLO_IN)
    for pos in (len(data) // 3, len(data) // 2, len(data) - 9):
        bad = bytearray(data)
        bad[pos] ^= 0x10
        with pytest.raises(VerificationError):
            verify(bytes(bad), elf=HELLO, input=HELLO_IN, **ANY)
    for cut in (11, 12, len(data) - 1):
        with pytest.raises(ShapeError):
            verify(data[:cut], elf=HELLO, input=HELLO_IN, **ANY)
    with pytest.raises(ShapeError, match="program proof, not a block proof"):
        verify(data, block=ROOT / "examples" / "block.json", **ANY)   # (a block of RISC-V transactions)
    with pytest.raises(ValueError, match="elf="):
        verify(data, **ANY)
    block_proof = b"STB2" + data[4:]
    with pytest.raises(ShapeError, match="block proof, not a program proof"):
        verify(block_proof, elf=HELLO, input=HELLO_IN, **ANY)


def test_typed_errors_before_any_work(prover):
    """A malformed ELF is rv32.ElfError (a ValueError, as a malformed block is), an
    unreadable one OSError; bad inputs and limits TypeError / ValueError; an execution
    failure UnprovableProgram (an UnprovableBlock) with its kind, pc and cycle."""
    with pytest.raises(ElfError) as ei:
        prover.prove_program(HELLO.read_bytes()[:60], b"")
    assert isinstance(ei.value, (ValueError, SteadfastError)) and ei.value.field == "file"
    with pytest.raises(ElfError):
        prover.execute_program(b"not an elf")
    with pytest.raises(OSError):
        prover.prove_program(ROOT / "no-such.elf")
    with pytest.raises(TypeError, match="read it"):
        prover.prove_program(HELLO, "examples/hello.in")
    with pytest.raises(TypeError):
        prover.prove_program(HELLO, max_cycles=True)
    for bad in (0, -1, 1 << 32):
        with pytest.raises(ValueError, match="max_cycles"):
            prover.prove_program(HELLO, max_cycles=bad)
    with pytest.raises(ValueError, match="max_cycles"):      # one proof only: up to 2^24
        prover.prove_program(HELLO, max_cycles=(1 << 24) + 1, segment_cycles=None)
    for bad in (1000, 1 << 9, 1 << 23, True):
        with pytest.raises(ValueError, match="segment_cycles"):
            prover.prove_program(HELLO, segment_cycles=bad)
    with pytest.raises(UnprovableProgram) as ei:
        prover.prove_program(HELLO, HELLO_IN, max_cycles=50)
    e = ei.value
    assert isinstance(e, UnprovableBlock) and (e.kind, e.cycle) == ("cycles", 50)
    assert f"pc 0x{e.pc:08x}, cycle 50" in str(e)
    illegal = rv32.Program.from_words([0x00000013, 0xFFFFFFFF])     # nop; an illegal word
    with pytest.raises(UnprovableProgram) as ei:
        prover.execute_program(illegal)
    assert (ei.value.kind, ei.value.pc, ei.value.cycle) == ("illegal", illegal.entry + 4, 1)


def test_execute_only_report(prover, hello):
    """execute_program: the run (cycles, exit code, output) and every table's size, the
    same heights the proof committed; cells per cycle; JSON with the output in hex."""
    rep = prover.execute_program(HELLO, HELLO_IN)
    assert (rep.cycles, rep.exit_code, rep.output) == (hello.stats.cycles, 0, hello.output)
    assert [t.padded_rows for t in rep.tables] == [t.rows for t in hello.stats.tables]
    assert [t.name for t in rep.tables] == [t.name for t in hello.stats.tables]
    for t in rep.tables:
        assert t.rows <= t.padded_rows and t.committed_cells == 4 * t.trace_cells
        assert t.trace_cells == t.padded_rows * (t.main_width + 4 * t.aux_width + 4 * t.parts)
        assert t.device_bytes > 0
    assert rep.committed_cells == sum(t.committed_cells for t in rep.tables)
    assert rep.cells_per_cycle == rep.trace_cells / rep.cycles
    j = rep.to_json()
    assert bytes.fromhex(j["output"]) == hello.output and j["exit_code"] == 0
    assert j["cycles"] == rep.cycles and len(j["tables"]) == 18
    assert j["tables"][0]["cells_per_cycle"] > 0 and j["security_bits"] == rep.security_bits
    assert j["program_digest"] == rv32.load_elf(HELLO).digest().hex()
    assert j["host_bytes"] >= j["device_bytes"] >= j["device_bytes_min"] > 0


def test_emu_same_bytes_with_recovery_xcheck_and_timeline(hello, monkeypatch):
    """emu (the device pipeline on host kernels): the host bytes; with every R2 site out
    of memory and XCHECK on, the tables recover (counted) and the bytes do not change;
    the timeline has every table's stages."""
    from steadfast.prover.common.timeline import Timeline
    tl = Timeline()
    proof = Prover(EMU, timeline=tl).prove_program(HELLO, HELLO_IN)
    assert proof.to_bytes() == hello.to_bytes()
    names = {e.get("args", {}).get("table") for e in tl.to_json()["traceEvents"]}
    assert {"rv32_bytes", "rv32_alu", "poseidon2"} <= names, names
    monkeypatch.setenv("PROVER_FAULTS", "oom@r2:1")
    monkeypatch.setenv("PROVER_GPU_XCHECK", "1")
    proof = Prover(EMU).prove_program(HELLO, HELLO_IN)
    assert proof.to_bytes() == hello.to_bytes()
    rec = proof.stats.counters["device"]["recovery"]
    assert sum(c.get("downgrades", 0) for c in rec.values()) >= 1, rec


def test_sim_pipeline(hello):
    """sim (the device pipeline over numba's CUDA simulator) with a budget no table fits:
    every table is declined at its first allocation and recovers on the host (counted);
    the host bytes.  (The simulated kernels themselves: test_sim_kernels, opt-in.)"""
    proof = Prover(dataclasses.replace(CFG, backend="sim", vram_budget=4096)
                   ).prove_program(HELLO, HELLO_IN)
    assert proof.to_bytes() == hello.to_bytes()
    dev = proof.stats.counters["device"]
    assert dev["backend"] == "sim" and all(t["downgraded"] for t in dev["tables"].values())


@pytest.mark.skipif(not os.environ.get("STEADFAST_SLOW_SIM"),
                    reason="about 4 min on a loaded 2-core machine; STEADFAST_SLOW_SIM=1")
@pytest.mark.timeout(1200)
def test_sim_kernels(hello):
    """sim with a budget that admits the smallest tables (BITWISE, 2 rows, ~19 KB, and
    whichever others fit): their stages run as simulated kernels (a few seconds to a
    minute each: the OOD kernel is per column), the others recover on the host -- and
    the bytes are the host's."""
    proof = Prover(dataclasses.replace(CFG, backend="sim", vram_budget=20000)
                   ).prove_program(HELLO, HELLO_IN)
    assert proof.to_bytes() == hello.to_bytes()
    tables = proof.stats.counters["device"]["tables"]
    assert not tables["rv32_bitwise"]["downgraded"], tables["rv32_bitwise"]
    assert tables["rv32_bitwise"]["peak_device_bytes"] > 0
    assert tables["rv32_bytes"]["downgraded"] and tables["rv32_alu"]["downgraded"]


def test_dev_mode(hello):
    """Development mode: the run and every constraint checked, a marked fake (b"STRD")
    that verify refuses unless accept_dev; accepted, its statement is still checked."""
    fake = Prover(dataclasses.replace(CFG, dev_mode=True)).prove_program(HELLO, HELLO_IN)
    assert fake.dev and fake.to_bytes()[:4] == b"STRD"
    assert (fake.exit_code, fake.output) == (hello.exit_code, hello.output)
    assert ProgramProof.from_bytes(fake.to_bytes()) == fake
    with pytest.raises(DevProofRefused):
        verify(fake.to_bytes(), elf=HELLO, input=HELLO_IN)
    res = verify(fake, elf=HELLO, input=HELLO_IN, accept_dev=True)
    assert res.dev and res.output == hello.output and res.security_bits == 0
    with pytest.raises(PublicValuesError):
        verify(fake, elf=HELLO, input=b"other", accept_dev=True)
    with pytest.raises(ShapeError):
        ProgramProof.from_bytes(fake.to_bytes()[:-1])
