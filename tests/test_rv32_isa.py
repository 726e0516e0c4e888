"""RV32IM instructions, one by one: the decoder against the assembler and GNU as, and each
instruction's result -- computed here from the specification with Python ints -- against
both of our interpreters and unicorn (tests/rv32_ref.py), edge cases and errors included."""
import random
import shutil
import struct
import subprocess

import pytest
from hypothesis import given, settings, strategies as st

from steadfast.rv32 import ExecutionError, Program, asm, execute, isa
from tests.rv32_ref import agree

MASK = 0xFFFF_FFFF
BASE = 0x10000
DATA = 0x20000


def s32(v):
    v &= MASK
    return v - (1 << 32) if v >> 31 else v


def tdiv(a, b):
    """Signed division truncating toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


# Each R-type instruction from the spec (RISC-V unprivileged ISA, ch. 2 and 7).
SPEC_R = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "sll": lambda a, b: a << (b & 31),
    "slt": lambda a, b: int(s32(a) < s32(b)),
    "sltu": lambda a, b: int(a < b),
    "xor": lambda a, b: a ^ b,
    "srl": lambda a, b: a >> (b & 31),
    "sra": lambda a, b: s32(a) >> (b & 31),
    "or": lambda a, b: a | b,
    "and": lambda a, b: a & b,
    "mul": lambda a, b: a * b,
    "mulh": lambda a, b: (s32(a) * s32(b)) >> 32,
    "mulhsu": lambda a, b: (s32(a) * b) >> 32,
    "mulhu": lambda a, b: (a * b) >> 32,
    "div": lambda a, b: -1 if b == 0 else (s32(a) if (s32(a), s32(b)) == (-2**31, -1)
                                           else tdiv(s32(a), s32(b))),
    "divu": lambda a, b: MASK if b == 0 else a // b,
    "rem": lambda a, b: a if b == 0 else (0 if (s32(a), s32(b)) == (-2**31, -1)
                                          else s32(a) - tdiv(s32(a), s32(b)) * s32(b)),
    "remu": lambda a, b: a if b == 0 else a % b,
}
SPEC_I = {"addi": "add", "slti": "slt", "sltiu": "sltu", "xori": "xor", "ori": "or",
          "andi": "and", "slli": "sll", "srli": "srl", "srai": "sra"}
EDGE = [0, 1, 2, 3, 5, 7, 31, 32, 33, 63, 0x7FFF_FFFF, 0x8000_0000, 0x8000_0001, MASK,
        MASK - 1, 0xFFFF_FFE0, 0x1234_5678, 0xDEAD_BEEF, 0x0000_FFFF, 0xFFFF_0000]


def _li(reg, v):
    return asm.li(reg, v)


def _exit_words():
    return asm.assemble("li a0, 0\nli a7, 93\necall")


def run_cases(cases, body_fn):
    """One program: for each case, set x5/x6, run ``body_fn(case)`` (writing x7), store
    x7 at DATA + 4i; returns the stored words (after checking all engines agree)."""
    words = [*_li("s0", DATA)]
    for i, case in enumerate(cases):
        words += _li("t0", case[0]) + _li("t1", case[1]) + body_fn(case)
        words.append(asm.encode("sw", ("t2", "s0", 0)))
        words.append(asm.encode("addi", ("s0", "s0", 4)))
    words += _exit_words()
    ex = agree(Program.from_words(words, base=BASE))
    assert not isinstance(ex, ExecutionError), ex
    raw = ex.memory.read(DATA, 4 * len(cases))
    return list(struct.unpack(f"<{len(cases)}I", raw))


# ------------------------------------------------------------------ decoder / encoder

def _random_operands(m, rng):
    r = lambda: rng.randrange(32)                                   # noqa: E731
    if m in asm._R:
        return (r(), r(), r())
    if m in asm._I_ALU or m in asm._LOAD or m == "jalr" or m in asm._STORE:
        return (r(), r(), rng.randrange(-2048, 2048))
    if m in asm._SHIFT:
        return (r(), r(), rng.randrange(32))
    if m in asm._BRANCH:
        return (r(), r(), 2 * rng.randrange(-2048, 2048))
    if m in ("lui", "auipc"):
        return (r(), rng.randrange(1 << 20))
    if m == "jal":
        return (r(), 2 * rng.randrange(-(1 << 19), 1 << 19))
    return ()


def _expected_fields(m, ops):
    """(rd, rs1, rs2, imm) the decoder must give for encode(m, ops)."""
    if m in asm._R:
        return ops[0], ops[1], ops[2], 0
    if m in asm._I_ALU or m in asm._SHIFT or m in asm._LOAD or m == "jalr":
        return ops[0], ops[1], 0, ops[2]
    if m in asm._STORE or m in asm._BRANCH:
        return 0, ops[1] if m in asm._STORE else ops[0], \
            ops[0] if m in asm._STORE else ops[1], ops[2]
    if m in ("lui", "auipc"):
        return ops[0], 0, 0, s32(ops[1] << 12)
    if m == "jal":
        return ops[0], 0, 0, ops[1]
    return 0, 0, 0, 0


EXECUTED = sorted(asm.MNEMONICS - {"ebreak", "fence.i"})


@pytest.mark.parametrize("m", EXECUTED)
def test_encode_decode_round_trip(m):
    rng = random.Random(m)
    for _ in range(300):
        ops = _random_operands(m, rng)
        ins = isa.decode(asm.encode(m, ops))
        assert ins.name == m
        assert (ins.rd, ins.rs1, ins.rs2, ins.imm) == _expected_fields(m, ops), (m, ops)


@given(st.integers(0, MASK))
@settings(max_examples=300, deadline=None)
def test_every_decoded_word_re_encodes(word):
    ins = isa.decode(word)
    if ins.op == isa.INVALID:
        assert (ins.rd, ins.rs1, ins.rs2, ins.imm) == (0, 0, 0, 0)
        return
    m = ins.name
    if m == "fence":
        assert word & 0x707F == 0x000F
        return
    if m == "ecall":
        assert word == 0x73
        return
    if m in asm._R:
        ops = (ins.rd, ins.rs1, ins.rs2)
    elif m in asm._STORE:
        ops = (ins.rs2, ins.rs1, ins.imm)
    elif m in asm._BRANCH:
        ops = (ins.rs1, ins.rs2, ins.imm)
    elif m in ("lui", "auipc"):
        ops = (ins.rd, (ins.imm >> 12) & 0xFFFFF)
    elif m == "jal":
        ops = (ins.rd, ins.imm)
    else:
        ops = (ins.rd, ins.rs1, ins.imm)
    assert asm.encode(m, ops) == word


@given(st.lists(st.integers(0, MASK), min_size=200, max_size=200))
@settings(max_examples=20, deadline=None)
def test_compiled_decoder_is_the_decoder(words):
    from steadfast.rv32 import fastexec
    for w in words + [0x73, 0x0010_0073, 0xFFFF_FFFF, 0x8000_0063, 0x8000_006F, 0xFFFF_F037]:
        assert tuple(fastexec._decode(w)) == isa.decode_fields(w), hex(w)


@pytest.mark.parametrize("word,why", [
    (0x0010_0073, "EBREAK"), (0x3002_9073, "CSR"), (0x0000_2573, "CSR"),
    (0x3020_0073, "SYSTEM"), (0x0000_100F, "FENCE.I"), (0x0000_0000, "compressed"),
    (0xFFFF_FFFF, "not an RV32IM"), (0x0000_4501, "compressed"),
    (0x0200_1013, "not an RV32IM"),      # slli with shamt[5] = 1
    (0x4000_1013, "not an RV32IM"),      # slli with funct7 0x20
    (0x4000_0033 | (1 << 12), "not an RV32IM"),   # "sub" funct3 1
    (0x0000_3003, "not an RV32IM"),      # load funct3 3 (LD)
    (0x0000_3023, "not an RV32IM"),      # store funct3 3 (SD)
    (0x0000_2063, "not an RV32IM"),      # branch funct3 2
    (0x0000_1067, "not an RV32IM"),      # jalr funct3 1
    (0x0000_001B, "not an RV32IM"),      # OP-IMM-32 (RV64)
    (0x0000_2007, "not an RV32IM"),      # FLW
])
def test_words_that_do_not_decode(word, why):
    assert isa.decode(word).op == isa.INVALID
    assert why in isa.describe_illegal(word)


def test_fence_variants_are_no_ops():
    for word in (0x0FF0_000F, 0x8330_000F, 0x0100_000F, 0x0000_000F, 0xFFFF_8F8F):
        assert isa.decode(word).op == isa.FENCE


GNU_AS = shutil.which("riscv64-unknown-elf-as")
GNU_LD = shutil.which("riscv64-unknown-elf-ld")
GNU_OBJCOPY = shutil.which("riscv64-unknown-elf-objcopy")


@pytest.mark.skipif(not (GNU_AS and GNU_LD and GNU_OBJCOPY),
                    reason="riscv64-unknown-elf-as/ld/objcopy not installed (Debian: "
                           "binutils-riscv64-unknown-elf)")
def test_assembler_matches_gnu_as(tmp_path):
    rng = random.Random(7)
    lines = []
    for m in sorted(asm.MNEMONICS - {"fence.i"}):        # (as -march=rv32im refuses it)
        for _ in range(12):
            ops = _random_operands(m, rng)
            regs = lambda *rs: [asm.ABI_NAMES[x] for x in rs]       # noqa: E731
            if m in asm._R:
                text = ", ".join(regs(*ops))
            elif m in asm._I_ALU or m in asm._SHIFT:
                text = ", ".join(regs(ops[0], ops[1]) + [str(ops[2])])
            elif m in asm._LOAD or m == "jalr":
                text = f"{asm.ABI_NAMES[ops[0]]}, {ops[2]}({asm.ABI_NAMES[ops[1]]})"
            elif m in asm._STORE:
                text = f"{asm.ABI_NAMES[ops[0]]}, {ops[2]}({asm.ABI_NAMES[ops[1]]})"
            elif m in asm._BRANCH:
                text = ", ".join(regs(ops[0], ops[1])) + f", .{ops[2]:+d}"
            elif m in ("lui", "auipc"):
                text = f"{asm.ABI_NAMES[ops[0]]}, {ops[1]:#x}"
            elif m == "jal":
                text = f"{asm.ABI_NAMES[ops[0]]}, .{ops[1]:+d}"
            else:
                text = ""
            lines.append((m, ops, f"{m} {text}".strip()))
    src = ".option norelax\n.text\n.globl _start\n_start:\n" + \
        "\n".join(t for _, _, t in lines) + "\n"
    (tmp_path / "a.s").write_text(src)
    subprocess.run([GNU_AS, "-march=rv32im", "-mabi=ilp32", "-o", tmp_path / "a.o",
                    tmp_path / "a.s"], check=True)
    subprocess.run([GNU_LD, "-m", "elf32lriscv", "-Ttext=0x100000", "-e", "_start", "-o",
                    tmp_path / "a.elf", tmp_path / "a.o"], check=True)
    subprocess.run([GNU_OBJCOPY, "-O", "binary", "-j", ".text", tmp_path / "a.elf",
                    tmp_path / "a.bin"], check=True)
    raw = (tmp_path / "a.bin").read_bytes()
    theirs = struct.unpack(f"<{len(raw) // 4}I", raw)
    assert len(theirs) == len(lines)
    for (m, ops, text), word in zip(lines, theirs):
        assert asm.encode(m, ops) == word, f"{text}: ours {asm.encode(m, ops):#010x}, " \
                                           f"GNU as {word:#010x}"
    # and the text assembler reads what GNU as read
    ours = asm.assemble("\n".join(t.replace(".+", "").replace(".-", "-") for _, _, t in lines))
    assert ours == list(theirs)


# ------------------------------------------------------------------ ALU and M

@pytest.mark.parametrize("m", sorted(SPEC_R))
def test_register_register(m):
    rng = random.Random(m)
    cases = [(a, b) for a in EDGE[::2] for b in EDGE[1::2]] + \
        [(rng.randrange(1 << 32), rng.randrange(1 << 32)) for _ in range(20)]
    if m.startswith(("div", "rem")):
        cases += [(a, 0) for a in EDGE[:6]] + [(0x8000_0000, MASK), (0x8000_0000, 1),
                                               (MASK, MASK), (7, MASK), (0x8000_0001, MASK)]
    if m in ("sll", "srl", "sra"):          # shift amounts >= 32 use their low 5 bits
        cases += [(0x8000_00F1, s) for s in (31, 32, 33, 63, 64, 0xFFFF_FFFF, 0x1F, 0x20)]
    got = run_cases(cases, lambda c: [asm.encode(m, ("t2", "t0", "t1"))])
    assert got == [SPEC_R[m](a, b) & MASK for a, b in cases]


@pytest.mark.parametrize("m", sorted(SPEC_I))
def test_register_immediate(m):
    rng = random.Random(m)
    shift = m in ("slli", "srli", "srai")
    imms = list(range(32)) if shift else [0, 1, -1, 2047, -2048, 5, -7, 0x7FF, -0x800, 100]
    if not shift:
        imms += [rng.randrange(-2048, 2048) for _ in range(6)]
    cases = [(a, imm) for a in EDGE[::3] for imm in imms]
    got = run_cases(cases, lambda c: [asm.encode(m, ("t2", "t0", c[1]))])
    assert got == [SPEC_R[SPEC_I[m]](a, imm & MASK) & MASK for a, imm in cases]


def test_lui_auipc():
    imms = [0, 1, 0x80000, 0xFFFFF, 0x12345, 0x7FFFF]
    words = [*_li("s0", DATA)]
    for k, imm in enumerate(imms):
        words += [asm.encode("lui", ("t2", imm)), asm.encode("sw", ("t2", "s0", 8 * k)),
                  asm.encode("auipc", ("t3", imm)), asm.encode("sw", ("t3", "s0", 8 * k + 4))]
    words += _exit_words()
    ex = agree(Program.from_words(words, base=BASE))
    got = struct.unpack(f"<{2 * len(imms)}I", ex.memory.read(DATA, 8 * len(imms)))
    for k, imm in enumerate(imms):
        pc_auipc = BASE + 4 * (len(_li("s0", DATA)) + 4 * k + 2)
        assert got[2 * k] == imm << 12
        assert got[2 * k + 1] == (pc_auipc + (imm << 12)) & MASK


def test_x0_reads_zero_and_ignores_writes():
    src = """
        li t0, 77
        addi x0, t0, 5
        lui x0, 0x12345
        add x0, t0, t0
        jal x0, next
    next:
        lw x0, 0(sp)
        add a0, x0, x0
        addi a1, x0, 3
        li a7, 93
        ecall
    """
    ex = agree(Program.from_words(asm.assemble(src, BASE), base=BASE))
    assert ex.regs[0] == 0 and ex.regs[10] == 0 and ex.regs[11] == 3
    assert ex.record.rd_val[1:4].tolist() == [0, 0, 0]        # writes to x0 record 0


# ------------------------------------------------------------------ loads and stores

def _data_program(body: str, data: bytes):
    src = f"li s0, {DATA}\n" + body + "\nli a7, 93\necall"
    return Program.from_words(asm.assemble(src, BASE), base=BASE, data=[(DATA, data)])


def test_loads_sign_and_zero_extend():
    data = bytes([0x80, 0x7F, 0xFF, 0x01, 0x00, 0x80, 0xFF, 0x7F, 0xEF, 0xBE, 0xAD, 0xDE])
    loads = [("lb", 0), ("lb", 1), ("lb", 2), ("lbu", 0), ("lbu", 2), ("lh", 0), ("lh", 2),
             ("lh", 4), ("lh", 6), ("lhu", 4), ("lhu", 6), ("lhu", 2), ("lw", 0), ("lw", 4),
             ("lw", 8), ("lb", 11), ("lbu", 11), ("lh", 10), ("lhu", 10)]
    body = "li s1, 0x30000\n" + "\n".join(
        f"{m} t0, {off}(s0)\nsw t0, {4 * k}(s1)" for k, (m, off) in enumerate(loads))
    ex = agree(_data_program(body + "\nli a0, 0", data))
    got = struct.unpack(f"<{len(loads)}I", ex.memory.read(0x30000, 4 * len(loads)))
    for (m, off), v in zip(loads, got):
        size = {"b": 1, "h": 2, "w": 4}[m[1]]
        raw = int.from_bytes(data[off:off + size], "little")
        if not m.endswith("u") and m != "lw" and raw >> (8 * size - 1):
            raw -= 1 << (8 * size)
        assert v == raw & MASK, (m, off)


def test_negative_offsets_and_stores_merge():
    body = """
        addi s1, s0, 64
        li t0, 0x11223344
        sw t0, -64(s1)
        li t1, 0xAB
        sb t1, -63(s1)
        li t1, 0xCDEF
        sh t1, -62(s1)
        li t2, -1
        sb t2, -60(s1)
        sh t2, -58(s1)
        lw a0, -64(s1)
        lw a1, -60(s1)
        lb a2, -60(s1)
        li a0, 0
    """
    ex = agree(_data_program(body, bytes(16)))
    assert ex.memory.read(DATA, 8) == bytes([0x44, 0xAB, 0xEF, 0xCD, 0xFF, 0, 0xFF, 0xFF])
    assert ex.regs[11] == 0xFFFF_00FF and ex.regs[12] == MASK


def test_addresses_wrap_and_reach_the_top_of_memory():
    body = """
        li t0, -1
        li t1, 0x5A5A5A5A
        sw t1, -3(t0)            # 0xFFFFFFFC
        lw a1, -3(t0)
        sb t1, 1(t0)             # (2^32 - 1) + 1 wraps to address 0
        lbu a2, 0(zero)
        li t2, 0x7FFFFFF0
        sw t1, 0(t2)             # the stack top itself
        lw a3, 0(sp)
        lw a4, 0x100(zero)       # never written: reads zero
        li a0, 0
    """
    ex = agree(_data_program(body, b"\x01"))
    assert ex.regs[11] == 0x5A5A5A5A and ex.regs[12] == 0x5A and ex.regs[13] == 0x5A5A5A5A
    assert ex.regs[14] == 0
    assert ex.memory.read(0xFFFF_FFFC, 4) == b"\x5a" * 4


@pytest.mark.parametrize("insn,addr", [("lh", 1), ("lhu", 3), ("lw", 2), ("lw", 1),
                                       ("lw", 3), ("sh", 1), ("sw", 2), ("sw", 3),
                                       ("lhu", -1), ("sw", -2)])
def test_misaligned_access_is_an_error(insn, addr):
    body = f"li t0, 0x1234\n{insn} t0, {addr}(s0)\nli a0, 0"
    err = agree(_data_program(body, bytes(8)))
    assert isinstance(err, ExecutionError) and err.kind == "misaligned"
    a = (DATA + addr) & MASK
    assert err.pc == BASE + 4 * (len(asm.li("s0", DATA)) + 2) and err.cycle == 4
    assert f"at address 0x{a:08x}" in str(err) and f"pc 0x{err.pc:08x}" in str(err)
    assert ("store" if insn.startswith("s") else "load") in str(err)


def test_byte_accesses_are_never_misaligned():
    body = "li t0, 0x99\n" + "\n".join(f"sb t0, {k}(s0)\nlb t1, {k}(s0)" for k in range(5)) \
        + "\nli a0, 0"
    agree(_data_program(body, bytes(8)))


# ------------------------------------------------------------------ control flow

def test_branches_forward_and_backward_signed_and_unsigned():
    pairs = [(1, 2), (2, 1), (5, 5), (MASK, 1), (1, MASK), (0x8000_0000, 0x7FFF_FFFF),
             (0, 0x8000_0000)]
    spec = {"beq": lambda a, b: a == b, "bne": lambda a, b: a != b,
            "blt": lambda a, b: s32(a) < s32(b), "bge": lambda a, b: s32(a) >= s32(b),
            "bltu": lambda a, b: a < b, "bgeu": lambda a, b: a >= b}
    lines = ["li s0, 0x20000", "li s2, 0"]
    expected = []
    for m in spec:
        for k, (a, b) in enumerate(pairs):
            f, bk, done = f"f_{m}_{k}", f"b_{m}_{k}", f"d_{m}_{k}"
            # taken: forward to f (t2 = 1), then backward to bk (t2 = 2); else t2 = 0
            lines += [f"li t0, {a}", f"li t1, {b}", f"{m} t0, t1, {f}", "li t2, 0", f"j {done}",
                      f"{bk}: li t2, 2", f"j {done}", f"{f}: li t2, 1", f"{m} t0, t1, {bk}",
                      "li t2, 3", f"{done}: sw t2, 0(s0)", "addi s0, s0, 4"]
            expected.append(2 if spec[m](a, b) else 0)
    lines += ["li a0, 0", "li a7, 93", "ecall"]
    ex = agree(Program.from_words(asm.assemble("\n".join(lines), BASE), base=BASE))
    got = struct.unpack(f"<{len(expected)}I", ex.memory.read(DATA, 4 * len(expected)))
    assert list(got) == expected


def test_jal_and_jalr_link_and_clear_bit_0():
    src = """
        jal ra, fwd               # forward: ra = pc + 4
    back:
        la t0, target
        addi t0, t0, 1            # bit 0 set: JALR clears it
        jalr s1, 0(t0)
        li a0, 99                 # skipped
    target:
        la t1, done
        jalr zero, 1(t1)          # imm supplies bit 0
        li a0, 98
    fwd:
        mv s2, ra
        j back                    # backward
    done:
        li a0, 5
        li a7, 93
        ecall
    """
    words = asm.assemble(src, BASE)
    ex = agree(Program.from_words(words, base=BASE))
    assert ex.exit_code == 5
    assert ex.regs[18] == BASE + 4                             # s2 = link of the first jal
    assert ex.regs[9] == BASE + 4 * 5                          # s1 = link of jalr s1


@pytest.mark.parametrize("src", ["jal zero, 6", "li t0, 0x10012\njalr zero, 0(t0)",
                                 "li t0, 0x10000\njalr zero, 2(t0)", "beq zero, zero, 10",
                                 "li t0, 1\nbnez t0, -2"])
def test_jump_to_unaligned_target_is_an_error(src):
    words = asm.assemble(src + "\nli a7, 93\necall", BASE)
    err = agree(Program.from_words(words, base=BASE))
    assert isinstance(err, ExecutionError) and err.kind == "jump"
    assert err.pc == BASE + 4 * (len(words) - 3)
    assert "not 4-byte aligned" in str(err)


def test_untaken_branch_to_unaligned_target_is_fine():
    words = asm.assemble("li t0, 1\nbeqz t0, 6\nli a0, 4\nli a7, 93\necall", BASE)
    assert agree(Program.from_words(words, base=BASE)).exit_code == 4


# ------------------------------------------------------------------ illegal instructions

@pytest.mark.parametrize("word,what", [(0x0010_0073, "EBREAK"), (0x3400_2573, "CSR"),
                                       (0xC000_2573, "CSR"), (0x0000_100F, "FENCE.I"),
                                       (0x0000_0000, "compressed"),
                                       (0xFFFF_FFFF, "not an RV32IM"),
                                       (0x0000_3003, "not an RV32IM")])
def test_illegal_instruction_names_pc_and_word(word, what):
    words = asm.assemble("li a0, 1\nnop", BASE) + [word] + asm.assemble("li a7, 93\necall")
    err = agree(Program.from_words(words, base=BASE))
    assert isinstance(err, ExecutionError) and err.kind == "illegal"
    assert (err.pc, err.cycle) == (BASE + 8, 2)
    assert f"0x{word:08x}" in str(err) and what in str(err)


def test_fence_executes_as_a_no_op():
    words = asm.assemble("li a0, 3", BASE) + [0x0FF0_000F, 0x8330_000F] + \
        asm.assemble("li a7, 93\necall")
    ex = agree(Program.from_words(words, base=BASE))
    assert ex.exit_code == 3 and ex.cycles == 5


def test_fetch_outside_executable_segments():
    # a jump into a data segment, and running off the end of the code
    jump = asm.assemble(f"li t0, {DATA}\njr t0", BASE)
    err = agree(Program.from_words(jump, base=BASE, data=[(DATA, struct.pack("<I", 0x13))]))
    assert err.kind == "fetch" and err.pc == DATA
    assert "not inside an executable segment" in str(err)
    off_end = asm.assemble("nop\nnop", BASE)
    for engine in ("python", "compiled"):
        with pytest.raises(ExecutionError) as ei:
            execute(Program.from_words(off_end, base=BASE), engine=engine)
        assert (ei.value.kind, ei.value.pc, ei.value.cycle) == ("fetch", BASE + 8, 2)
