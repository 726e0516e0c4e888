"""An independent RV32IM reference: unicorn (QEMU's RISC-V core) with the machine's system
calls as hooks -- what the tests check both of our interpreters against.

    from tests.rv32_ref import run, RefError
    r = run(program, input=b"", max_cycles=2**22)
    r.regs, r.pc, r.memory.read(addr, n), r.output, r.exit_code, r.stderr, r.cycles

``program`` is an :class:`steadfast.rv32.Program` (only its segments, flags and entry are
used).  The run's semantics are the machine's (docs/rv32.md), computed by unicorn and by
this file's own code, never by ours:

* state at entry: pc = entry, sp = 0x7FFF_FFF0, other registers 0; the image mapped page
  by page (pages of executable segments executable), every other page mapped zero on first
  access (a read or write of any address works);
* ECALL (unicorn's interrupt 8) runs read/write/exit/exit_group/POSEIDON2 here, with the
  Poseidon2 permutation written out below from the SPEC constants (checked against the
  known answer of tests/kat.py);
* what unicorn would execute but the machine refuses is caught by hooks: misaligned loads
  and stores (a memory hook), CSR, FENCE.I and compressed words (a scan of each new
  translation block), jumps to addresses that are not 4-byte aligned (a block starting
  there).  Fetch outside the executable pages is unicorn's own fetch fault (page-granular:
  a page shared by code and data counts as code);
* cycles are counted per translation block (its size / 4), so they are exact for runs that
  exit; unicorn's instruction count bounds the run at max_cycles.

A run that does not exit raises :class:`RefError` with ``kind`` one of the machine's error
kinds (rv32/errors.py KINDS: "cycles", "fetch", "illegal", "misaligned", "jump", "syscall",
"buffer", "pointer", "canonical", "output") and, where unicorn knows it, ``pc``.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np
from unicorn import (UC_ARCH_RISCV, UC_HOOK_BLOCK, UC_HOOK_INTR, UC_HOOK_MEM_READ,
                     UC_HOOK_MEM_UNMAPPED, UC_HOOK_MEM_WRITE, UC_MEM_FETCH_UNMAPPED,
                     UC_MODE_RISCV32, UC_PROT_EXEC, UC_PROT_READ, UC_PROT_WRITE, Uc, UcError)
from unicorn import riscv_const as R

P = 2013265921
MASK = 0xFFFF_FFFF
STACK_TOP = 0x7FFF_FFF0
PAGE = 0x1000
SYS_READ, SYS_WRITE, SYS_EXIT, SYS_EXIT_GROUP = 63, 64, 93, 94
SYS_POSEIDON2 = 0x5346_0001
NEG_EBADF = (-9) & MASK
MAX_OUTPUT = 1 << 26
_REGS = [getattr(R, f"UC_RISCV_REG_X{i}") for i in range(32)]
_PC = R.UC_RISCV_REG_PC


# ------------------------------------------------------------------ Poseidon2 (SPEC §2)

def _poseidon2_constants():
    from steadfast.kernels.poseidon2_constants import RC_FULL, RC_PARTIAL, V16
    return ([[int(x) for x in r] for r in RC_FULL], [int(x) for x in RC_PARTIAL],
            [int(x) for x in V16])


_RCF, _RCP, _V16 = _poseidon2_constants()
_M4 = ((2, 3, 1, 1), (1, 2, 3, 1), (1, 1, 2, 3), (3, 1, 1, 2))


def _external(s):
    y = [sum(_M4[i][j] * s[4 * b + j] for j in range(4)) for b in range(4) for i in range(4)]
    col = [sum(y[4 * b + k] for b in range(4)) for k in range(4)]
    return [(y[i] + col[i % 4]) % P for i in range(16)]


def poseidon2(state):
    """The width-16 BabyBear Poseidon2 permutation, in plain Python ints."""
    s = _external([int(x) % P for x in state])
    for r in range(8):
        if r == 4:
            for c in _RCP:
                s[0] = pow((s[0] + c) % P, 7, P)
                total = sum(s)
                s = [(total + _V16[i] * s[i]) % P for i in range(16)]
        s = _external([pow((x + c) % P, 7, P) for x, c in zip(s, _RCF[r])])
    return s


# ------------------------------------------------------------------ the runner

class RefError(Exception):
    """The reference run did not exit: ``kind`` (module docstring), ``pc`` or None."""

    def __init__(self, kind: str, pc: int | None = None, detail: str = ""):
        self.kind = kind
        self.pc = pc
        self.detail = detail
        super().__init__(f"{kind} at pc {pc if pc is None else hex(pc)}: {detail}")


class RefMemory:
    """The final memory: ``read(addr, n)``; ``pages`` = the page numbers unicorn mapped."""

    def __init__(self, uc: Uc, pages: set):
        self._uc = uc
        self.pages = pages

    def read(self, addr: int, n: int) -> bytes:
        out = bytearray()
        while n > 0:
            k = min(n, PAGE - (addr & (PAGE - 1)))
            if addr >> 12 in self.pages:
                out += self._uc.mem_read(addr, k)
            else:
                out += bytes(k)
            addr, n = addr + k, n - k
        return bytes(out)

    def page(self, pn: int) -> bytes:
        return self.read(pn << 12, PAGE)


class RefRun(NamedTuple):
    regs: np.ndarray          # uint32[32] at exit
    pc: int                   # the exit ECALL's address
    memory: RefMemory
    output: bytes             # fd 1
    exit_code: int
    stderr: bytes             # fd 2
    cycles: int


class _Ref:
    def __init__(self, program, input: bytes, check_alignment: bool):
        self.uc = uc = Uc(UC_ARCH_RISCV, UC_MODE_RISCV32)
        self.pages: set = set()
        self.input = bytes(input)
        self.in_pos = 0
        self.out = bytearray()
        self.err = bytearray()
        self.exit_code = None
        self.exit_pc = None
        self.error: RefError | None = None
        self.cycles = 0
        self.scanned: dict = {}
        exec_pages = set()
        for s in program.segments:
            if s.flags & 1:
                exec_pages.update(range(s.address >> 12, (s.address + len(s.data) - 1 >> 12) + 1))
        for s in program.segments:
            for pn in range(s.address >> 12, (s.address + len(s.data) - 1 >> 12) + 1):
                self._map(pn, pn in exec_pages)
            uc.mem_write(s.address, s.data)
        if 0xFFFFF not in self.pages:    # unicorn cannot map the top page from its
            self._map(0xFFFFF)           # unmapped-access hook (UC_ERR_MAP): map it now
        uc.reg_write(_REGS[2], STACK_TOP)
        uc.hook_add(UC_HOOK_INTR, self._intr)
        uc.hook_add(UC_HOOK_MEM_UNMAPPED, self._unmapped)
        uc.hook_add(UC_HOOK_BLOCK, self._block)
        if check_alignment:
            uc.hook_add(UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE, self._access)

    def _map(self, pn: int, executable: bool = False) -> None:
        if pn not in self.pages:
            prot = UC_PROT_READ | UC_PROT_WRITE | (UC_PROT_EXEC if executable else 0)
            self.uc.mem_map(pn << 12, PAGE, prot)
            self.pages.add(pn)

    def _fail(self, kind: str, pc=None, detail: str = "") -> None:
        if self.error is None:
            self.error = RefError(kind, pc, detail)
        self.uc.emu_stop()

    # hooks
    def _unmapped(self, uc, access, addr, size, value, _):
        if access == UC_MEM_FETCH_UNMAPPED:
            return False
        addr &= MASK                     # (unicorn may pass it sign-extended to 64 bits)
        for pn in range(addr >> 12, (min(addr + size - 1, MASK) >> 12) + 1):
            self._map(pn)
        return True

    def _access(self, uc, access, addr, size, value, _):
        addr &= MASK
        if addr % size:
            kind = "store" if access == 17 else "load"      # UC_MEM_WRITE = 17
            self._fail("misaligned", uc.reg_read(_PC), f"{size}-byte {kind} at {addr:#x}")

    def _block(self, uc, addr, size, _):
        if addr % 4:
            self._fail("jump", None, f"block at {addr:#x}")
            return
        verdict = self.scanned.get((addr, size))
        if verdict is None:
            verdict = ""
            code = uc.mem_read(addr, size)
            for k in range(0, size - size % 4, 4):
                w = struct.unpack_from("<I", code, k)[0]
                opc, f3 = w & 0x7F, (w >> 12) & 7
                if w & 3 != 3 or (opc == 0x73 and f3 != 0) or (opc == 0x0F and f3 == 1):
                    verdict = f"word {w:#010x} at {addr + k:#x}"
                    break
            if size % 4:
                verdict = verdict or f"compressed instruction in block {addr:#x}"
            self.scanned[(addr, size)] = verdict
        if verdict:
            self._fail("illegal", None, verdict)
            return
        self.cycles += size // 4

    def _intr(self, uc, intno, _):
        pc = uc.reg_read(_PC)
        if intno in (8, 9, 11):
            self._ecall(pc)
        elif intno in (2, 3):                # (unicorn's pc is past the instruction here)
            self._fail("illegal", None, f"interrupt {intno} before pc {pc:#x}")
        elif intno in (4, 6):
            self._fail("misaligned", pc, f"interrupt {intno}")
        elif intno == 0:
            self._fail("jump", pc, "instruction address misaligned")
        else:
            self._fail("fetch", pc, f"interrupt {intno}")

    # system calls
    def _reg(self, i: int) -> int:
        return self.uc.reg_read(_REGS[i]) & MASK

    def _write_mem(self, addr: int, data: bytes) -> None:
        if data:
            for pn in range(addr >> 12, ((addr + len(data) - 1) >> 12) + 1):
                self._map(pn)
            self.uc.mem_write(addr, bytes(data))

    def _read_mem(self, addr: int, n: int) -> bytes:
        return RefMemory(self.uc, self.pages).read(addr, n)

    def _ecall(self, next_pc: int) -> None:
        pc = (next_pc - 4) & MASK
        n, a0, a1, a2 = self._reg(17), self._reg(10), self._reg(11), self._reg(12)
        if n == SYS_READ:
            if a0 != 0:
                res = NEG_EBADF
            elif a1 + a2 > 1 << 32:
                return self._fail("buffer", pc)
            else:
                data = self.input[self.in_pos:self.in_pos + a2]
                self.in_pos += len(data)
                self._write_mem(a1, data)
                res = len(data)
        elif n == SYS_WRITE:
            if a0 not in (1, 2):
                res = NEG_EBADF
            elif a1 + a2 > 1 << 32:
                return self._fail("buffer", pc)
            else:
                sink = self.out if a0 == 1 else self.err
                if len(sink) + a2 > MAX_OUTPUT:
                    return self._fail("output", pc)
                sink += self._read_mem(a1, a2)
                res = a2
        elif n in (SYS_EXIT, SYS_EXIT_GROUP):
            self.exit_code = a0 & 0xFF
            self.exit_pc = pc
            self.uc.emu_stop()
            return
        elif n == SYS_POSEIDON2:
            if a0 % 4 or a1 % 4:
                return self._fail("pointer", pc)
            if a0 + 64 > 1 << 32 or a1 + 32 > 1 << 32:
                return self._fail("buffer", pc)
            words = struct.unpack("<16I", self._read_mem(a0, 64))
            if any(w >= P for w in words):
                return self._fail("canonical", pc)
            self._write_mem(a1, struct.pack("<8I", *poseidon2(words)[:8]))
            res = 0
        else:
            return self._fail("syscall", pc, f"number {n}")
        self.uc.reg_write(_REGS[10], res)

    def run(self, entry: int, max_cycles: int) -> RefRun:
        try:
            self.uc.emu_start(entry, 0xFFFF_FFFF, count=max_cycles)
        except UcError as exc:
            if self.error is None:
                pc = self.uc.reg_read(_PC)
                kind = "illegal" if "INSN_INVALID" in str(exc) else "fetch"
                self.error = RefError(kind, pc, str(exc))
        if self.error is not None:
            raise self.error
        if self.exit_code is None:
            raise RefError("cycles", self.uc.reg_read(_PC), f"no exit within {max_cycles}")
        regs = np.array([self._reg(i) for i in range(32)], dtype=np.uint32)
        return RefRun(regs, self.exit_pc, RefMemory(self.uc, self.pages), bytes(self.out),
                      self.exit_code, bytes(self.err), self.cycles)


def run(program, input: bytes = b"", max_cycles: int = 1 << 22,
        check_alignment: bool = True) -> RefRun:
    """Run ``program`` on unicorn (module docstring); ``check_alignment=False`` drops the
    per-access hook (faster for long runs known to be aligned)."""
    return _Ref(program, input, check_alignment).run(program.entry, max_cycles)


# ------------------------------------------------------------------ ELF files, qemu-user

def elf_bytes(program) -> bytes:
    """``program`` written as a static ELF32 RISC-V executable (one PT_LOAD a segment), for
    running it elsewhere (qemu-riscv32)."""
    n = len(program.segments)
    off = 52 + 32 * n
    phdrs, body = b"", b""
    for seg in program.segments:
        pad = (seg.address - (off + len(body))) % PAGE     # p_offset = p_vaddr mod page
        body += bytes(pad)
        phdrs += struct.pack("<8I", 1, off + len(body), seg.address, seg.address,
                             len(seg.data), len(seg.data), seg.flags, PAGE)
        body += seg.data
    ident = b"\x7fELF\x01\x01\x01" + bytes(9)
    header = ident + struct.pack("<HHIIIIIHHHHHH", 2, 243, 1, program.entry, 52, 0, 0, 52,
                                 32, n, 40, 0, 0)
    return header + phdrs + body


def run_qemu(qemu: str, program, input: bytes = b"", timeout: float = 60):
    """(stdout, stderr, exit code) of ``program`` under qemu-user (``qemu`` = the path of
    qemu-riscv32); a negative exit code is the signal that ended it."""
    import os
    import subprocess
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".elf", delete=False) as f:
        f.write(elf_bytes(program))
    try:
        os.chmod(f.name, 0o755)
        r = subprocess.run([qemu, f.name], input=input, capture_output=True, timeout=timeout)
        return r.stdout, r.stderr, r.returncode
    finally:
        os.unlink(f.name)


# ------------------------------------------------------------------ the tests' comparison

def agree(program, input: bytes = b"", max_cycles: int = 1 << 22, check_alignment=True):
    """Run ``program`` on both of our engines (with the record) and on this reference, and
    assert they agree: on success the output, stderr, exit code, registers, pc, cycles and
    every memory page (and the two records are identical); on failure the same error
    (kind, pc, cycle and text) from both engines and the same kind from the reference (a
    fetch just past a code segment may read as "illegal" here: unicorn's pages are 4 KiB).
    Returns the compiled engine's Execution, or its ExecutionError."""
    from steadfast.rv32 import ExecutionError, execute
    outcomes = []
    for engine in ("python", "compiled"):
        try:
            outcomes.append(execute(program, input, max_cycles, record=True, engine=engine))
        except ExecutionError as exc:
            outcomes.append(exc)
    py, fast = outcomes
    try:
        ref = run(program, input, max_cycles, check_alignment)
    except RefError as exc:
        ref = exc
    if isinstance(py, ExecutionError) or isinstance(fast, ExecutionError):
        assert isinstance(py, ExecutionError) and isinstance(fast, ExecutionError), (py, fast)
        assert (py.kind, py.pc, py.cycle, str(py)) == (fast.kind, fast.pc, fast.cycle,
                                                       str(fast))
        assert isinstance(ref, RefError), f"reference exited but ours failed: {fast}"
        ok = {fast.kind} | ({"illegal"} if fast.kind == "fetch" else set())
        assert ref.kind in ok, f"ours: {fast}; reference: {ref}"
        if ref.pc is not None and fast.kind not in ("cycles", "jump"):
            assert ref.pc == fast.pc, f"ours: {fast}; reference: {ref}"
        return fast
    assert not isinstance(ref, RefError), f"reference failed ({ref}) but ours exited"
    for e in (py, fast):
        assert e.output == ref.output
        assert e.stderr == ref.stderr
        assert e.exit_code == ref.exit_code
        assert e.regs.tolist() == ref.regs.tolist()
        assert e.pc == ref.pc
        assert e.cycles == ref.cycles
    mismatch = py.record.mismatch(fast.record)
    assert mismatch is None, mismatch
    assert py.memory == fast.memory
    for pn in set(fast.memory.nonzero_pages()) | ref.memory.pages:
        mine = bytes(fast.memory.pages.get(pn, bytes(PAGE)))
        assert mine == ref.memory.page(pn), f"memory page 0x{pn:05x} differs"
    return fast


__all__ = ["run", "agree", "elf_bytes", "run_qemu", "RefRun", "RefError", "RefMemory",
           "poseidon2"]
