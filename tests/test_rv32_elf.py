"""RV32 programs: ELF loading (every refusal names what is wrong, no parsing error escapes
as anything else; the struct parser against pyelftools as the reference), the Program digest, and real ELFs built by riscv64-unknown-elf-gcc run by
our interpreters, unicorn and qemu-riscv32 (skipped with a reason when not installed)."""
import shutil
import struct
import subprocess

import pytest
from hypothesis import given, settings, strategies as st

from steadfast.errors import SteadfastError
from steadfast.rv32 import ElfError, Program, Segment, abi, asm, elf, execute, load_elf, \
    parse_elf
from tests.rv32_ref import agree

PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE = 1, 2, 3, 4
PF_X, PF_W, PF_R = 1, 2, 4
CODE = asm.assemble("li a0, 42\nli a7, 93\necall")


def make_elf(segments, entry=0x10000, *, ei_class=1, ei_data=1, ei_version=1, e_type=2,
             e_machine=243, e_flags=0, phentsize=32, phnum=None):
    """A minimal ELF32 executable: header, program headers, then each segment's file
    bytes.  ``segments``: (p_type, vaddr, file bytes, memsz, flags) tuples."""
    phoff = 52
    n = len(segments)
    off = phoff + 32 * n
    phdrs = b""
    body = b""
    for p_type, vaddr, data, memsz, flags in segments:
        phdrs += struct.pack("<8I", p_type, off + len(body), vaddr, vaddr, len(data), memsz,
                             flags, 0x1000)
        body += data
        body += bytes(-len(body) % 4)
    ident = b"\x7fELF" + bytes([ei_class, ei_data, ei_version]) + bytes(9)
    header = ident + struct.pack("<HHIIIIIHHHHHH", e_type, e_machine, 1, entry, phoff, 0,
                                 e_flags, 52, phentsize, n if phnum is None else phnum, 40,
                                 0, 0)
    return header + phdrs + body


def code_seg(vaddr=0x10000, data=None, memsz=None, flags=PF_R | PF_X):
    data = struct.pack(f"<{len(CODE)}I", *CODE) if data is None else data
    return (PT_LOAD, vaddr, data, len(data) if memsz is None else memsz, flags)


GOOD = make_elf([code_seg(), (PT_LOAD, 0x11000, b"\x01\x02\x03", 0x20, PF_R | PF_W),
                 (PT_NOTE, 0, b"note", 4, PF_R)])


def test_load_a_good_elf(tmp_path):
    p = parse_elf(GOOD)
    assert p.entry == 0x10000 and len(p.segments) == 2
    code, data = p.segments
    assert (code.address, code.flags, code.data) == (0x10000, PF_R | PF_X,
                                                      struct.pack("<3I", *CODE))
    assert (data.address, data.flags, data.data) == (0x11000, PF_R | PF_W,
                                                      b"\x01\x02\x03" + bytes(29))
    assert p.code_ranges() == [(0x10000, code.data)]
    path = tmp_path / "good.elf"
    path.write_bytes(GOOD)
    q = load_elf(path)
    assert q == p and q.digest() == p.digest()
    for engine in ("python", "compiled"):
        assert execute(p, engine=engine).exit_code == 42


def test_digest_is_defined_and_binds_everything():
    p = parse_elf(GOOD)
    import hashlib
    h = hashlib.sha256(elf.DIGEST_DOMAIN + struct.pack("<II", 0x10000, 2))
    for s in p.segments:
        h.update(struct.pack("<III", s.address, len(s.data), s.flags) + s.data)
    assert p.digest() == h.digest()
    limbs = p.digest_elements()
    assert len(limbs) == 16 and all(0 <= x < 1 << 16 for x in limbs)
    assert b"".join(x.to_bytes(2, "little") for x in limbs) == p.digest()
    variants = [make_elf([code_seg(), (PT_LOAD, 0x11000, b"\x01\x02\x04", 0x20, PF_R | PF_W)]),
                make_elf([code_seg(), (PT_LOAD, 0x11000, b"\x01\x02\x03", 0x24, PF_R | PF_W)]),
                make_elf([code_seg(), (PT_LOAD, 0x11000, b"\x01\x02\x03", 0x20, PF_R)]),
                make_elf([code_seg(), (PT_LOAD, 0x11004, b"\x01\x02\x03", 0x20, PF_R | PF_W)]),
                make_elf([code_seg(), (PT_LOAD, 0x11000, b"\x01\x02\x03", 0x20, PF_R | PF_W)],
                         entry=0x10004)]
    digests = {parse_elf(v).digest() for v in variants} | {p.digest()}
    assert len(digests) == len(variants) + 1
    # the file's own layout does not matter: only the loaded image and entry
    same = make_elf([(PT_NOTE, 0, b"xyz", 3, 0),
                     (PT_LOAD, 0x11000, b"\x01\x02\x03" + bytes(5), 0x20, PF_R | PF_W),
                     code_seg()])
    assert parse_elf(same).digest() == p.digest()


def _refused(data, field, text):
    with pytest.raises(ElfError) as ei:
        parse_elf(data)
    assert ei.value.field == field, str(ei.value)
    assert text in str(ei.value), str(ei.value)
    assert isinstance(ei.value, SteadfastError) and isinstance(ei.value, ValueError)
    return ei.value


@pytest.mark.parametrize("data,field,text", [
    (b"", "file", "not an ELF"),
    (b"hello world, this is not an ELF", "file", "not an ELF"),
    (b"\x7fEL", "file", "not an ELF"),
    (GOOD[:10], "file", "truncated"),
    (GOOD[:40], "file", "truncated"),
    (GOOD[:60], "file", "program headers"),
    (GOOD[:52 + 3 * 32 + 4], "program header 0", "truncated"),
    (make_elf([code_seg()], ei_class=2), "EI_CLASS", "64-bit"),
    (make_elf([code_seg()], ei_class=0), "EI_CLASS", "invalid"),
    (make_elf([code_seg()], ei_data=2), "EI_DATA", "big-endian"),
    (make_elf([code_seg()], ei_data=3), "EI_DATA", "invalid"),
    (make_elf([code_seg()], ei_version=0), "EI_VERSION", "version"),
    (make_elf([code_seg()], e_type=1), "e_type", "relocatable"),
    (make_elf([code_seg()], e_type=3), "e_type", "shared object"),
    (make_elf([code_seg()], e_type=4), "e_type", "core"),
    (make_elf([code_seg()], e_type=0), "e_type", "ET_NONE"),
    (make_elf([code_seg()], e_machine=62), "e_machine", "not RISC-V"),
    (make_elf([code_seg()], e_machine=3), "e_machine", "not RISC-V"),
    (make_elf([code_seg()], e_flags=1), "e_flags", "C extension"),
    (make_elf([code_seg()], e_flags=4), "e_flags", "hard-float"),
    (make_elf([code_seg()], phentsize=56), "e_phentsize", "56"),
    (make_elf([code_seg(), (PT_INTERP, 0, b"/lib/ld.so\0", 11, PF_R)]), "program header 1",
     "dynamic"),
    (make_elf([(PT_DYNAMIC, 0, bytes(8), 8, PF_R), code_seg()]), "program header 0",
     "dynamic"),
    (make_elf([code_seg(memsz=8)]), "program header 0", "exceeds memory size"),
    (make_elf([code_seg(), (PT_LOAD, 0xFFFF_F000, b"", 0x1001, PF_R)]), "program header 1",
     "past the end of the 32-bit"),
    (make_elf([code_seg(), (PT_LOAD, 0x10008, b"ab", 8, PF_R)]), "program header 1",
     "overlaps program header 0"),
    (make_elf([(PT_LOAD, 0x10008, b"ab", 8, PF_R), code_seg()]), "program header 0",
     "overlaps program header 1"),
    (make_elf([code_seg(), (PT_LOAD, abi.STACK_TOP - 64, b"", 16, PF_R | PF_W)]), "segment 1",
     "stack region"),
    (make_elf([code_seg(), (PT_LOAD, abi.STACK_TOP + 8, b"", 4, PF_R | PF_W)]), "segment 1",
     "stack region"),
    (make_elf([code_seg(), (PT_LOAD, 0x100000, b"", elf.MAX_IMAGE_BYTES, PF_R | PF_W)]),
     "program header 1", "at most"),
    (make_elf([(PT_NOTE, 0, b"x", 1, PF_R)]), "segments", "no loadable segment"),
    (make_elf([code_seg()], entry=0x10002), "e_entry", "not 4-byte aligned"),
    (make_elf([code_seg(), (PT_LOAD, 0x11000, bytes(8), 8, PF_R | PF_W)], entry=0x11000),
     "e_entry", "not inside an executable segment"),
    (make_elf([code_seg()], entry=0x10000 + 4 * len(CODE)), "e_entry", "executable"),
])
def test_malformed_elf_is_refused(data, field, text):
    _refused(data, field, text)


def test_limits_on_segments_and_file_size(tmp_path, monkeypatch):
    many = [code_seg()] + [(PT_LOAD, 0x20000 + 16 * k, b"", 4, PF_R) for k in range(256)]
    _refused(make_elf(many), "segments", "257 loadable segments")
    _refused(make_elf([code_seg()], phnum=2000), "e_phnum", "2000")
    monkeypatch.setattr(elf, "MAX_FILE_BYTES", 100)
    _refused(GOOD + bytes(100), "file", "at most 100")
    path = tmp_path / "big.elf"
    path.write_bytes(GOOD + bytes(100))
    with pytest.raises(ElfError, match="at most 100"):
        load_elf(path)


def test_ignored_parts():
    zero = make_elf([code_seg(), (PT_LOAD, 0x50000, b"", 0, PF_R),
                     (0x6474E551, 0, b"", 0, PF_R | PF_W), (0x70000003, 0, b"A", 1, PF_R)],
                    e_flags=0x8)          # RVE programs run on the 32 registers
    p = parse_elf(zero)
    assert [s.address for s in p.segments] == [0x10000]


@given(st.lists(st.tuples(st.integers(0, 52 + 3 * 32 - 1), st.integers(0, 255)),
                min_size=1, max_size=6), st.integers(0, len(GOOD)))
@settings(max_examples=300, deadline=None)
def test_mutated_elf_loads_or_is_refused_cleanly(edits, cut):
    data = bytearray(GOOD)
    for at, value in edits:
        data[at] = value
    try:
        p = parse_elf(bytes(data[:max(cut, 52 + 3 * 32)]) if cut % 2 else bytes(data))
    except ElfError:
        return
    assert isinstance(p, Program)


def test_program_from_words_checks_too():
    with pytest.raises(ElfError, match="non-empty"):
        Program.from_words([])
    with pytest.raises(ElfError, match="overlaps"):
        Program.from_words([0x13] * 8, base=0x1000, data=[(0x1010, b"x")])
    with pytest.raises(ElfError, match="not inside an executable"):
        Program.from_words([0x13], base=0x1000, entry=0x2000)
    with pytest.raises(ElfError, match="stack"):
        Program.from_words([0x13], base=abi.STACK_TOP - 4)
    with pytest.raises(ElfError, match="address order"):
        Program(0x1000, (Segment(0x1000, b"\x13\0\0\0", 5), Segment(0x100, b"x", 4)))


# ------------------------------------------------------------------ real toolchain ELFs

GCC = shutil.which("riscv64-unknown-elf-gcc")
QEMU = shutil.which("qemu-riscv32")

C_PROGRAM = r"""
typedef unsigned int u32;
static long sys3(long n, long a, long b, long c) {
    register long a0 asm("a0") = a; register long a1 asm("a1") = b;
    register long a2 asm("a2") = c; register long a7 asm("a7") = n;
    asm volatile("ecall" : "+r"(a0) : "r"(a1), "r"(a2), "r"(a7) : "memory");
    return a0;
}
static unsigned char buf[256];
static const char hex[] = "0123456789abcdef";
static u32 table[64] = {3, 1, 4, 1, 5, 9, 2, 6};
static char line[64];
void _start(void) {
    u32 sum = 0, prod = 1, n = 0;
    long k;
    while ((k = sys3(63, 0, (long)buf, sizeof buf)) > 0) {
        for (long i = 0; i < k; i++) {
            sum += buf[i];
            prod = prod * (buf[i] | 1) + (u32)((int)sum / 3) - sum % 7;
            table[(n++) & 63] ^= prod;
        }
    }
    u32 words[3] = {sum, prod, n};
    int at = 0;
    for (int w = 0; w < 3; w++) {
        for (int s = 28; s >= 0; s -= 4) line[at++] = hex[(words[w] >> s) & 15];
        line[at++] = w == 2 ? '\n' : ' ';
    }
    sys3(64, 1, (long)line, at);
    sys3(64, 2, (long)"done\n", 5);
    sys3(93, (long)(sum ^ table[5]), 0, 0);
    for (;;) {}
}
"""


@pytest.fixture(scope="module")
def gcc_elf(tmp_path_factory):
    if not GCC:
        pytest.skip("riscv64-unknown-elf-gcc not installed (Debian: gcc-riscv64-unknown-elf)")
    d = tmp_path_factory.mktemp("gcc")
    (d / "p.c").write_text(C_PROGRAM)
    # no linker relaxation: without a crt0 nothing sets gp, and gp-relative data would
    # sit at 0xFFFFF800.. (which our machine allows and qemu-user does not map)
    subprocess.run([GCC, "-march=rv32im", "-mabi=ilp32", "-O2", "-nostdlib", "-static",
                    "-ffreestanding", "-mno-relax", "-Wl,--no-relax", "-o", d / "p.elf",
                    d / "p.c"], check=True)
    return d / "p.elf"


INPUTS = [b"", b"a", bytes(range(256)) * 3 + b"tail", b"hello, world\n" * 40]


def test_gcc_elf_runs(gcc_elf):
    program = load_elf(gcc_elf)
    assert any(s.executable for s in program.segments)
    for data in INPUTS:
        ex = agree(program, data)
        assert ex.stderr == b"done\n" and ex.output.endswith(b"\n")
        sum_, prod, n = (int(x, 16) for x in ex.output.split())
        assert (sum_, n) == (sum(data), len(data))


@pytest.mark.skipif(not QEMU, reason="qemu-riscv32 not installed (Debian: qemu-user)")
def test_gcc_elf_matches_qemu(gcc_elf):
    program = load_elf(gcc_elf)
    for data in INPUTS:
        ex = execute(program, data)
        q = subprocess.run([QEMU, str(gcc_elf)], input=data, capture_output=True, timeout=60)
        assert (q.stdout, q.stderr, q.returncode) == (ex.output, ex.stderr, ex.exit_code)


@pytest.mark.skipif(not GCC, reason="riscv64-unknown-elf-gcc not installed")
def test_compressed_and_pie_builds_are_refused(tmp_path):
    (tmp_path / "p.c").write_text(C_PROGRAM)
    cases = [(["-march=rv32imc"], "e_flags", "C extension"),
             (["-march=rv32im", "-c"], "e_type", "relocatable")]
    for flags, field, text in cases:
        out = tmp_path / "p.out"
        subprocess.run([GCC, *flags, "-mabi=ilp32", "-O2", "-nostdlib", "-static",
                        "-ffreestanding", "-o", out, tmp_path / "p.c"], check=True)
        _refused(out.read_bytes(), field, text)


def test_the_parser_agrees_with_pyelftools_on_every_bundled_elf():
    """rv32/elf.py reads the header and program headers with struct; pyelftools (a test
    dependency, the parser before issue #38) is the independent reference: the same
    entry, type, machine and flags, and every PT_LOAD's address, flags and loaded bytes."""
    import glob
    import io
    import os
    elffile = pytest.importorskip("elftools.elf.elffile")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = sorted(glob.glob(os.path.join(root, "guests", "bin", "*.elf"))
                   + glob.glob(os.path.join(root, "examples", "*.elf")))
    assert len(paths) >= 6, paths
    for path in paths + [None]:
        data = GOOD if path is None else open(path, "rb").read()
        ours = parse_elf(data)
        ref = elffile.ELFFile(io.BytesIO(data))
        assert (ref.header["e_type"], ref.header["e_machine"]) == ("ET_EXEC", "EM_RISCV")
        assert ours.entry == ref.header["e_entry"], path
        loads = sorted((seg.header for seg in ref.iter_segments()
                        if seg.header["p_type"] == "PT_LOAD" and seg.header["p_memsz"]),
                       key=lambda h: h["p_vaddr"])
        assert [(s.address, s.flags) for s in ours.segments] == \
            [(h["p_vaddr"], h["p_flags"] & 7) for h in loads], path
        for s, h in zip(ours.segments, loads):
            body = data[h["p_offset"]:h["p_offset"] + h["p_filesz"]]
            assert s.data == body + bytes(h["p_memsz"] - h["p_filesz"]), path


@given(st.lists(st.tuples(st.integers(0, 52 + 3 * 32 - 1), st.integers(0, 255)),
                min_size=1, max_size=6))
@settings(max_examples=200, deadline=None)
def test_a_mutated_elf_we_accept_reads_as_pyelftools_reads_it(edits):
    import io
    elffile = pytest.importorskip("elftools.elf.elffile")
    data = bytearray(GOOD)
    for at, value in edits:
        data[at] = value
    data = bytes(data)
    try:
        ours = parse_elf(data)
    except ElfError:
        return
    ref = elffile.ELFFile(io.BytesIO(data))
    loads = sorted((seg.header for seg in ref.iter_segments()
                    if seg.header["p_type"] == "PT_LOAD" and seg.header["p_memsz"]),
                   key=lambda h: h["p_vaddr"])
    assert ours.entry == ref.header["e_entry"]
    assert [(s.address, s.flags, len(s.data)) for s in ours.segments] == \
        [(h["p_vaddr"], h["p_flags"] & 7, h["p_memsz"]) for h in loads]
