"""RV32IM execution: state at entry, every system call and error, the cycle limit, the
record, the compiled loop's buffer growth, random programs (hypothesis) and the guest
programs -- each run by both of our interpreters and by unicorn (tests/rv32_ref.py),
which must agree exactly."""
import json
import os
import shutil
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.rv32 import (DEFAULT_MAX_CYCLES, MAX_CYCLES_CEILING, STACK_TOP, SYS_POSEIDON2,
                            ExecutionError, Program, abi, asm, execute, isa, load_elf)
from tests.rv32_ref import agree, poseidon2, run_qemu

MASK = 0xFFFF_FFFF
BASE = 0x10000
DATA = 0x20000
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def prog(src: str, data=()) -> Program:
    return Program.from_words(asm.assemble(src, BASE), base=BASE, data=data)


def both(program, input=b"", max_cycles=DEFAULT_MAX_CYCLES):
    """Both engines with the record; asserts they agree and returns the compiled one."""
    return agree(program, input, max_cycles)


def words_at(ex, addr, n):
    return list(struct.unpack(f"<{n}I", ex.memory.read(addr, 4 * n)))


EXIT = "li a7, 93\necall"


# ------------------------------------------------------------------ entry state, API

def test_state_at_entry():
    ex = both(prog("li a7, 93\necall"))
    expect = [0] * 32
    expect[2] = STACK_TOP
    expect[17] = 93
    assert ex.regs.tolist() == expect
    assert STACK_TOP % 16 == 0 and STACK_TOP == 0x7FFF_FFF0
    assert ex.cycles == 2 and ex.exit_code == 0 and ex.pc == BASE + 4
    assert ex.output == b"" and ex.stderr == b"" and ex.record.cycles == 2
    assert ex.regs.dtype == np.uint32 and not ex.regs.flags.writeable


def test_execute_without_record_and_bad_arguments():
    p = prog("li a0, 9\n" + EXIT)
    for engine in ("python", "compiled"):
        ex = execute(p, engine=engine)
        assert ex.record is None and ex.exit_code == 9
    with pytest.raises(ValueError, match="engine"):
        execute(p, engine="qemu")
    with pytest.raises(TypeError, match="expected a Program"):
        execute(b"\x7fELF...")
    for bad in (0, -1, MAX_CYCLES_CEILING + 1, True, 2.0):
        with pytest.raises(ValueError, match="max_cycles"):
            execute(p, max_cycles=bad)
    with pytest.raises(ValueError, match="input"):
        execute(p, input="text")
    execute(p, max_cycles=MAX_CYCLES_CEILING)
    assert execute(p, max_cycles=np.int32(5)).exit_code == 9         # numpy ints are ints


def test_input_limit(monkeypatch):
    monkeypatch.setattr(abi, "MAX_INPUT_BYTES", 8)
    p = prog("li a0, 0\n" + EXIT)
    execute(p, input=b"12345678")
    with pytest.raises(ValueError, match="MAX_INPUT_BYTES"):
        execute(p, input=b"123456789")


# ------------------------------------------------------------------ system calls

def test_write_fd1_fd2_bad_fd_and_zero_length():
    src = f"""
        li s0, {DATA}
        li s1, {DATA + 0x100}
        li a0, 1
        addi a1, s0, 1          # unaligned buffer
        li a2, 5
        li a7, 64
        ecall
        sw a0, 0(s1)
        li a0, 2
        mv a1, s0
        li a2, 3
        li a7, 64
        ecall
        sw a0, 4(s1)
        li a0, 3                # bad fd
        li a7, 64
        ecall
        sw a0, 8(s1)
        li a0, 0                # fd 0 is not writable here
        li a7, 64
        ecall
        sw a0, 12(s1)
        li a0, 1                # zero length
        li a2, 0
        li a7, 64
        ecall
        sw a0, 16(s1)
        li a0, 0
        {EXIT}
    """
    ex = both(prog(src, [(DATA, b"Hhello, world")]))
    assert ex.output == b"hello" and ex.stderr == b"Hhe"
    assert words_at(ex, DATA + 0x100, 5) == [5, 3, abi.NEG_EBADF, abi.NEG_EBADF, 0]
    assert abi.NEG_EBADF == 2**32 - 9
    r = ex.record
    assert r.ecall_args[:, 0].tolist() == [64] * 5 + [93]
    assert r.ecall_args[:5, 4].tolist() == [5, 3, abi.NEG_EBADF, abi.NEG_EBADF, 0]
    # fd 1 read [DATA+1, DATA+6): words DATA, DATA+4; fd 2 read [DATA, DATA+3): DATA
    assert r.ecall_mem_event.tolist() == [0, 0, 1]
    assert r.ecall_mem_word_addr.tolist() == [DATA, DATA + 4, DATA]
    assert r.ecall_mem_is_write.tolist() == [0, 0, 0]
    assert (r.ecall_mem_before == r.ecall_mem_after).all()
    assert r.ecall_mem_before[0] == int.from_bytes(b"Hhel", "little")
    assert r.output == b"hello"


def test_read_partial_eof_bad_fd():
    src = f"""
        li s0, {DATA}
        li s1, {DATA + 0x100}
        li a0, 0
        addi a1, s0, 3          # unaligned: merges into the old words
        li a2, 4
        li a7, 63
        ecall
        sw a0, 0(s1)
        li a0, 0
        addi a1, s0, 16
        li a2, 100              # more than is left
        li a7, 63
        ecall
        sw a0, 4(s1)
        li a0, 0
        li a7, 63
        ecall                   # at the end: 0
        sw a0, 8(s1)
        li a0, 1                # bad fd
        li a7, 63
        ecall
        sw a0, 12(s1)
        li a0, 0
        li a2, 0
        li a7, 63
        ecall
        sw a0, 16(s1)
        li a0, 0
        {EXIT}
    """
    ex = both(prog(src, [(DATA, bytes([0xEE] * 32))]), input=b"abcdefghij")
    assert words_at(ex, DATA + 0x100, 5) == [4, 6, 0, abi.NEG_EBADF, 0]
    assert ex.memory.read(DATA, 8) == b"\xee\xee\xeeabcd\xee"
    assert ex.memory.read(DATA + 16, 8) == b"efghij\xee\xee"
    r = ex.record
    assert r.ecall_mem_word_addr.tolist() == [DATA, DATA + 4, DATA + 16, DATA + 20]
    assert r.ecall_mem_event.tolist() == [0, 0, 1, 1]
    assert r.ecall_mem_is_write.tolist() == [1, 1, 1, 1]
    assert r.ecall_mem_before[0] == 0xEEEEEEEE
    assert r.ecall_mem_after[0] == int.from_bytes(b"\xee\xee\xeea", "little")
    assert r.input == b"abcdefghij"


@pytest.mark.parametrize("code,number", [(0, 93), (7, 93), (255, 94), (256, 93), (300, 94),
                                         (-1, 93)])
def test_exit_code_is_a0_mod_256(code, number):
    ex = both(prog(f"li a0, {code}\nli a7, {number}\necall\nli a0, 1\n{EXIT}"))
    assert ex.exit_code == code % 256 and ex.cycles == len(asm.li("a0", code)) + 2
    assert ex.pc == BASE + 4 * (ex.cycles - 1)
    assert ex.record.next_pc[-1] == ex.record.pc[-1]                  # halts at the ECALL
    assert ex.record.ecall_args[-1].tolist() == [number, code & MASK, 0, 0, code & MASK]


def _p2_program(src_words, dst, extra=""):
    return f"""
        li a0, {DATA}
        li a1, {dst}
        li a7, {SYS_POSEIDON2}
        ecall
        sw a0, 0x200(zero)
        {extra}
        li a0, 0
        {EXIT}
    """


def test_poseidon2_precompile():
    ins = [(i * 0x9E3779B1) % abi.P for i in range(16)]
    ins[3] = abi.P - 1
    want = poseidon2(ins)[:8]
    data = [(DATA, struct.pack("<16I", *ins))]
    ex = both(prog(_p2_program(ins, DATA + 0x1000), data))
    assert words_at(ex, DATA + 0x1000, 8) == want
    assert words_at(ex, 0x200, 1) == [0]
    r = ex.record
    assert r.ecall_args[0].tolist() == [SYS_POSEIDON2, DATA, DATA + 0x1000, 0, 0]
    assert r.ecall_mem_is_write.tolist() == [0] * 16 + [1] * 8
    assert r.ecall_mem_word_addr.tolist() == [DATA + 4 * i for i in range(16)] + \
        [DATA + 0x1000 + 4 * i for i in range(8)]
    assert r.ecall_mem_before[:16].tolist() == ins
    assert r.ecall_mem_after[16:].tolist() == want
    assert r.ecall_mem_before[16:].tolist() == [0] * 8
    # output over its own input: reads come first
    ex = both(prog(_p2_program(ins, DATA + 8), data))
    assert words_at(ex, DATA + 8, 8) == want and words_at(ex, DATA, 2) == ins[:2]
    # the same compression as the field-element VM's HASH
    from steadfast.verifier.poseidon2 import compress
    assert compress(np.array(ins[:8]), np.array(ins[8:]))[0].tolist() == want


@pytest.mark.parametrize("src_off,dst,kind,text", [
    (2, DATA + 0x100, "pointer", "not 4-byte aligned"),
    (0, DATA + 0x102, "pointer", "0x00020102"),
    (0, 0xFFFF_FFF0, "buffer", "runs past the end"),
])
def test_poseidon2_errors(src_off, dst, kind, text):
    src = f"li a0, {DATA + src_off}\nli a1, {dst}\nli a7, {SYS_POSEIDON2}\necall\n{EXIT}"
    err = both(prog(src, [(DATA, bytes(64))]))
    assert isinstance(err, ExecutionError) and err.kind == kind and text in str(err)
    assert "poseidon2" in str(err)


def test_poseidon2_input_wraps_past_the_top():
    src = f"li a0, 0xFFFFFFE0\nli a1, {DATA}\nli a7, {SYS_POSEIDON2}\necall\n{EXIT}"
    err = both(prog(src))
    assert err.kind == "buffer" and "64 bytes at 0xffffffe0" in str(err)


def test_poseidon2_rejects_non_canonical_words():
    ins = [1] * 16
    ins[5] = abi.P
    err = both(prog(_p2_program(ins, DATA + 0x100), [(DATA, struct.pack("<16I", *ins))]))
    assert err.kind == "canonical"
    assert f"0x{abi.P:08x} at 0x{DATA + 20:08x}" in str(err)
    assert err.pc == BASE + 4 * 6 and err.cycle == 6


@pytest.mark.parametrize("number", [0, 57, 62, 65, 92, 95, 214, 0x53460000, 0x53460002, MASK])
def test_unknown_system_call(number):
    err = both(prog(f"li a7, {number}\necall\n{EXIT}"))
    assert err.kind == "syscall" and f"number {number} " in str(err)
    assert err.cycle == len(asm.li("a7", number))


@pytest.mark.parametrize("number,addr,length", [(63, 0xFFFF_FFF0, 17), (64, 0xFFFF_FFFF, 2),
                                                (64, 2, MASK), (63, 0x8000_0000, 0x8000_0001)])
def test_buffers_may_not_wrap(number, addr, length):
    fd = 0 if number == 63 else 1
    src = f"li a0, {fd}\nli a1, {addr}\nli a2, {length}\nli a7, {number}\necall\n{EXIT}"
    err = both(prog(src), input=b"x" * 32)
    assert err.kind == "buffer" and f"{length} bytes at 0x{addr:08x}" in str(err)


def test_buffers_reaching_the_top_exactly_are_fine():
    src = f"""
        li a0, 0
        li a1, 0xFFFFFFFC
        li a2, 4
        li a7, 63
        ecall
        li a0, 1
        li a1, 0xFFFFFFFE
        li a2, 2
        li a7, 64
        ecall
        li a0, 0
        {EXIT}
    """
    ex = both(prog(src), input=b"WXYZ")
    assert ex.output == b"YZ" and ex.memory.read(0xFFFF_FFFC, 4) == b"WXYZ"


def test_write_past_the_output_limit():
    src = f"li a0, 1\nli a1, {DATA}\nli a2, {abi.MAX_OUTPUT_BYTES + 1}\nli a7, 64\necall\n" \
          + EXIT
    err = both(prog(src))
    assert err.kind == "output" and "MAX_OUTPUT_BYTES" in str(err)


# ------------------------------------------------------------------ the cycle limit

def test_cycle_limit():
    p = prog("li a0, 3\nli a7, 93\necall")
    assert both(p, max_cycles=3).cycles == 3          # exits on its max_cycles-th
    err = both(p, max_cycles=2)
    assert err.kind == "cycles" and (err.pc, err.cycle) == (BASE + 8, 2)
    assert "max_cycles = 2" in str(err)
    err = both(prog("loop: j loop"), max_cycles=1000)
    assert (err.kind, err.pc, err.cycle) == ("cycles", BASE, 1000)
    assert DEFAULT_MAX_CYCLES == 1 << 22 and MAX_CYCLES_CEILING == 1 << 24


def test_default_cycle_limit_on_the_compiled_loop():
    with pytest.raises(ExecutionError) as ei:
        execute(prog("loop: j loop"))
    assert (ei.value.kind, ei.value.cycle) == ("cycles", DEFAULT_MAX_CYCLES)


# ------------------------------------------------------------------ the record

def test_record_fields_by_hand():
    src = f"""
        li s0, {DATA}           # lui + addi
        lw t0, 4(s0)
        addi t1, t0, -1
        sh t1, 2(s0)
        add t2, t1, t0
        beq t2, t2, next
        nop
    next:
        jal ra, fin
    fin:
        fence
        li a0, 0
        {EXIT}
    """
    ex = both(prog(src, [(DATA, struct.pack("<II", 0xAABBCCDD, 0x100))]))
    r = ex.record
    assert r.pc.tolist() == [BASE + 4 * i for i in (0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12)]
    assert r.next_pc.tolist() == r.pc[1:].tolist() + [r.pc[-1]]
    assert r.insn.tolist() == [ex.memory.load_word(p) for p in r.pc.tolist()]
    i_lw, i_addi, i_sh, i_add, i_beq, i_jal, i_fence = 2, 3, 4, 5, 6, 7, 8
    assert (r.rs1_val[i_lw], r.rs2_val[i_lw], r.rd_val[i_lw]) == (DATA, 0, 0x100)
    assert (r.mem_addr[i_lw], r.mem_before[i_lw], r.mem_after[i_lw]) == (DATA + 4, 0x100,
                                                                          0x100)
    assert (r.rs1_val[i_addi], r.rd_val[i_addi]) == (0x100, 0xFF)
    assert (r.rs1_val[i_sh], r.rs2_val[i_sh], r.rd_val[i_sh]) == (DATA, 0xFF, 0)
    assert (r.mem_addr[i_sh], r.mem_before[i_sh], r.mem_after[i_sh]) == (DATA + 2, 0xAABBCCDD,
                                                                          0x00FFCCDD)
    assert (r.rs1_val[i_add], r.rs2_val[i_add], r.rd_val[i_add]) == (0xFF, 0x100, 0x1FF)
    assert (r.rs1_val[i_beq], r.rs2_val[i_beq], r.rd_val[i_beq]) == (0x1FF, 0x1FF, 0)
    assert r.next_pc[i_beq] == BASE + 32                              # the nop skipped
    assert (r.rd_val[i_jal], r.rs1_val[i_jal], r.next_pc[i_jal]) == (BASE + 36, 0, BASE + 36)
    assert (r.rs1_val[i_fence], r.rd_val[i_fence], r.mem_addr[i_fence]) == (0, 0, 0)
    ecall = r.cycles - 1
    assert (r.rs1_val[ecall], r.rs2_val[ecall], r.rd_val[ecall]) == (0, 0, 0)
    assert r.ecall_cycle.tolist() == [ecall]
    for name in ("pc", "insn", "rs1_val", "rs2_val", "rd_val", "mem_addr", "mem_before",
                 "mem_after", "next_pc", "ecall_cycle", "ecall_args", "ecall_mem_event",
                 "ecall_mem_word_addr", "ecall_mem_before", "ecall_mem_after",
                 "ecall_mem_is_write"):
        assert getattr(r, name).dtype == np.uint32, name
    assert r.ecall_args.shape == (1, 5) and r.ecall_mem_event.shape == (0,)


def test_stores_into_code_do_not_change_the_instructions_fetched():
    src = f"""
        la t0, patch
        li t1, 0x00500513       # addi a0, zero, 5
        sw t1, 0(t0)
        lw s1, 0(t0)
    patch:
        li a0, 7
        {EXIT}
    """
    p = prog(src)
    for engine in ("python", "compiled"):
        ex = execute(p, engine=engine, record=True)
        assert ex.exit_code == 7 and ex.regs[9] == 0x00500513
        assert ex.record.insn[6] == asm.encode("addi", ("a0", 0, 7))
        assert ex.memory.load_word(BASE + 24) == 0x00500513


def test_buffers_grow():
    # > 64 fresh pages (the spare pool), > 256 output bytes, > 64 ECALLs, > 1024 ECALL words
    src = f"""
        li s0, 0x40000000
        li s1, 100
    pages:
        sw s1, 0(s0)
        li t0, 4096
        add s0, s0, t0
        addi s1, s1, -1
        bnez s1, pages
        li s1, 80
    writes:
        li a0, 1
        li a1, {DATA}
        li a2, 7
        li a7, 64
        ecall
        li a0, 2
        li a7, 64
        ecall
        addi s1, s1, -1
        bnez s1, writes
        li a0, 0
        li a1, 0x50000000
        li a2, 9000
        li a7, 63
        ecall
        li a0, 0
        {EXIT}
    """
    inp = bytes(range(256)) * 36
    ex = both(prog(src, [(DATA, b"0123456")]), input=inp)
    assert ex.output == b"0123456" * 80 and ex.stderr == ex.output
    assert ex.memory.read(0x5000_0000, 9000) == inp[:9000]
    assert len(ex.record.ecall_cycle) == 162
    assert len(ex.record.ecall_mem_event) == 160 * 2 + 2250
    assert len(ex.memory.nonzero_pages()) >= 100


# ------------------------------------------------------------------ random programs

REGS = [r for r in range(1, 32) if r not in (2, 8, 9, 18)]     # s0 = data, s1/s2 = counters
R_OPS = sorted(asm._R)
I_OPS = sorted(asm._I_ALU)
SHIFTS = sorted(asm._SHIFT)
LOADS = {"lb": 1, "lbu": 1, "lh": 2, "lhu": 2, "lw": 4}
STORES = {"sb": 1, "sh": 2, "sw": 4}
values = st.one_of(st.sampled_from([0, 1, 2, 31, 32, 0x7FFF_FFFF, 0x8000_0000, MASK,
                                    MASK - 1]), st.integers(0, MASK))
reg = st.sampled_from(REGS)
reg0 = st.sampled_from(REGS + [0])


@st.composite
def instruction(draw, aligned=0.97):
    """One word over registers REGS (x0 read/written too) and the data region at s0."""
    kind = draw(st.sampled_from(["r", "r", "i", "shift", "load", "store", "lui", "auipc"]))
    rd, rs1, rs2 = draw(reg0), draw(reg0), draw(reg0)
    if kind == "r":
        return asm.encode(draw(st.sampled_from(R_OPS)), (rd, rs1, rs2))
    if kind == "i":
        return asm.encode(draw(st.sampled_from(I_OPS)), (rd, rs1, draw(st.integers(-2048, 2047))))
    if kind == "shift":
        return asm.encode(draw(st.sampled_from(SHIFTS)), (rd, rs1, draw(st.integers(0, 31))))
    if kind in ("lui", "auipc"):
        return asm.encode(kind, (rd, draw(st.integers(0, 0xFFFFF))))
    m = draw(st.sampled_from(sorted(LOADS if kind == "load" else STORES)))
    size = (LOADS if kind == "load" else STORES)[m]
    off = draw(st.integers(0, 255 // size)) * size
    if draw(st.floats(0, 1)) > aligned:
        off += draw(st.integers(1, 3))                 # now and then misaligned
    return asm.encode(m, (rd if kind == "load" else rs2, 8, off))


def _prologue(draw):
    words = asm.li("s0", DATA)
    for r in draw(st.lists(reg, max_size=12)):
        words += asm.li(r, draw(values))
    return words


def _epilogue(draw):
    a0 = draw(reg0)
    return asm.assemble(f"""
        li a0, 1
        mv a1, s0
        li a2, 16
        li a7, 64
        ecall
        mv a0, {asm.ABI_NAMES[a0]}
        li a7, 93
        ecall""")


@st.composite
def straight_line(draw):
    words = _prologue(draw) + draw(st.lists(instruction(), min_size=1, max_size=60))
    return words + _epilogue(draw)


@st.composite
def looping(draw):
    """Bounded loops: an outer loop (counter s1) whose body has forward branches and may
    hold an inner loop (counter s2)."""
    def body(n_max):
        items = draw(st.lists(st.one_of(instruction(aligned=1.0), st.tuples(
            st.sampled_from(sorted(asm._BRANCH)), reg0, reg0, st.integers(0, 4))),
            min_size=1, max_size=n_max))
        out = []
        for k, it in enumerate(items):
            if isinstance(it, tuple):
                m, a, b, skip = it
                skip = min(skip, len(items) - k - 1)          # stay inside the body
                out.append(asm.encode(m, (a, b, 4 * (skip + 1))))
            else:
                out.append(it)
        return out

    words = _prologue(draw) + asm.li("s1", draw(st.integers(1, 6)))
    outer = body(20)
    if draw(st.booleans()):
        inner = body(10)
        n = len(inner)
        inner = asm.li("s2", draw(st.integers(1, 4))) + inner + [
            asm.encode("addi", ("s2", "s2", -1)), asm.encode("bne", ("s2", 0, -4 * (n + 1)))]
        outer = outer[:len(outer) // 2] + inner + outer[len(outer) // 2:]
    n = len(outer)
    words += outer + [asm.encode("addi", ("s1", "s1", -1)),
                      asm.encode("bne", ("s1", 0, -4 * (n + 1)))]
    return words + _epilogue(draw)


data_bytes = st.binary(min_size=256, max_size=256)


@given(straight_line(), data_bytes)
@settings(max_examples=50, deadline=None)
def test_random_straight_line_programs(words, data):
    agree(Program.from_words(words, base=BASE, data=[(DATA, data)]))


@given(looping(), data_bytes)
@settings(max_examples=40, deadline=None)
def test_random_looping_programs(words, data):
    ex = agree(Program.from_words(words, base=BASE, data=[(DATA, data)]), max_cycles=20000)
    if not isinstance(ex, ExecutionError):
        r = ex.record
        assert (r.next_pc[:-1] == r.pc[1:]).all()
        ops = [isa.decode(int(w)).op for w in r.insn]
        mem = np.array([isa.LOAD_FIRST <= o <= isa.STORE_LAST for o in ops])
        assert (r.mem_before[~mem] == 0).all() and (r.mem_addr[~mem] == 0).all()


QEMU = shutil.which("qemu-riscv32")
DUMP = 0x400                     # registers dumped at s0 + DUMP by the qemu epilogue


@pytest.mark.skipif(not QEMU, reason="qemu-riscv32 not installed (Debian: qemu-user)")
@given(st.lists(instruction(aligned=1.0), min_size=1, max_size=40), data_bytes, st.data())
@settings(max_examples=25, deadline=None)
def test_random_programs_match_qemu(body, data, draw):
    """qemu-user shows only output and exit code, so the program writes its registers and
    data region to fd 1 (sp excluded: qemu sets its own; aligned accesses only: qemu-user
    allows misaligned ones)."""
    words = _prologue(draw.draw) + body
    words += [asm.encode("sw", (r, 8, DUMP + 4 * r)) for r in range(1, 32) if r != 2]
    words += asm.assemble(f"""
        li a0, 1
        mv a1, s0
        li a2, {DUMP + 128}
        li a7, 64
        ecall
        mv a0, t3
        li a7, 93
        ecall""")
    program = Program.from_words(words, base=BASE,
                                 data=[(DATA, data + bytes(DUMP + 128 - len(data)))])
    ex = agree(program)
    assert (run_qemu(QEMU, program)) == (ex.output, ex.stderr, ex.exit_code)


# ------------------------------------------------------------------ the guest programs

GUESTS = os.path.join(ROOT, "guests")
_CASES_FILE = os.path.join(GUESTS, "inputs", "cases.json")
GUEST_CASES = []
if os.path.exists(_CASES_FILE):
    _manifest = json.load(open(_CASES_FILE))
    GUEST_CASES = [(g, c, _manifest[g][c]) for g in sorted(_manifest) for c in sorted(_manifest[g])]


@pytest.mark.skipif(not GUEST_CASES, reason="no guests/inputs/cases.json in this checkout")
@pytest.mark.parametrize("guest,case,info", GUEST_CASES,
                         ids=[f"{g}-{c}" for g, c, _ in GUEST_CASES])
def test_guest_programs(guest, case, info):
    program = load_elf(os.path.join(GUESTS, "bin", guest + ".elf"))
    base = os.path.join(GUESTS, "inputs", guest, case)
    data = open(base + ".in", "rb").read()
    ex = agree(program, data)
    assert not isinstance(ex, ExecutionError), ex
    assert (ex.exit_code, ex.cycles) == (info["exit"], info["cycles"])
    if os.path.exists(base + ".out"):
        assert ex.output == open(base + ".out", "rb").read()
    calls = (ex.record.ecall_args[:, 0] == SYS_POSEIDON2).sum()
    assert calls == info["poseidon2_calls"]


def test_one_compiled_signature():
    """Every run -- with or without input, record or buffer growth -- uses one compiled
    specialisation of the loop (a second one would cost another cold compile)."""
    from steadfast.rv32 import fastexec
    p = prog("li a0, 0\nli a1, 0x30000\nli a2, 4\nli a7, 63\necall\n" + EXIT)
    for data in (b"", b"abcd"):
        for record in (False, True):
            execute(p, data, record=record)
    assert len(fastexec._run.signatures) == 1
