"""Run an rv32im guest ELF under unicorn with the Steadfast machine's ECALL ABI.

A reference harness for the guests (tests/test_guests.py) and a cycle counter for sizing
them; it is not the project's machine (rv32/), only an independent second opinion:

* every PT_LOAD of a static ELF32 EM_RISCV ET_EXEC is mapped (zero-filled beyond filesz),
  pc = e_entry, sp = STACK_TOP (16-byte aligned; nothing is pushed: no argc/argv);
* ECALL a7 = 63 read(0, buf, n), 64 write(1|2, buf, n), 93/94 exit(a0 mod 256),
  0x53460001 SYS_POSEIDON2 (compress the 16 words at a0 into 8 at a1, each input word
  < p, with the ``poseidon2`` function given; a0 = 0 after it); anything else stops the
  run with an error;
* ``cycles`` counts retired instructions, the final exit ECALL included (basic-block
  sizes from unicorn's block hook; rv32im has no compressed instructions);
* with ``check_alignment`` every load/store is checked to be naturally aligned (the
  machine rejects misaligned accesses; unicorn would perform them).

Command line:  python guests/emu.py GUEST.elf [INPUT_FILE]   (stdout: the guest's output,
stderr: cycles and exit code; merkle/bench-with-Poseidon2 use the project's Poseidon2).
"""
from __future__ import annotations

import dataclasses
import struct
import sys
from typing import Callable, Optional, Sequence

P = 2013265921
SYS_READ, SYS_WRITE, SYS_EXIT, SYS_EXIT_GROUP = 63, 64, 93, 94
SYS_POSEIDON2 = 0x53460001
STACK_TOP = 0x7FFF_FFF0          # as rv32/abi.py: 16-byte aligned
STACK_SIZE = 1 << 20             # mapped below STACK_TOP
PAGE = 0x1000


class EmuError(Exception):
    """The guest did something the machine's ABI does not allow (or ran too long)."""


@dataclasses.dataclass
class Result:
    stdout: bytes
    stderr: bytes
    exit_code: int
    cycles: int
    poseidon2_calls: int


def load_segments(elf: bytes) -> tuple[int, list[tuple[int, bytes, int]]]:
    """(entry, [(vaddr, file bytes, memsz)]) of a static little-endian ELF32 RISC-V exec."""
    if elf[:4] != b"\x7fELF" or elf[4] != 1 or elf[5] != 1:
        raise EmuError("not a little-endian ELF32 file")
    (e_type, e_machine, _ver, entry, phoff, _shoff, _flags, _ehsize, phentsize,
     phnum) = struct.unpack_from("<HHIIIIIHHH", elf, 16)
    if e_type != 2 or e_machine != 243:
        raise EmuError(f"not an EM_RISCV ET_EXEC (type {e_type}, machine {e_machine})")
    segs = []
    for i in range(phnum):
        p_type, off, vaddr, _paddr, filesz, memsz, _flags, _align = struct.unpack_from(
            "<8I", elf, phoff + i * phentsize)
        if p_type == 1 and memsz:
            segs.append((vaddr, elf[off:off + filesz], memsz))
    return entry, segs


def run(elf: bytes, stdin: bytes = b"", *,
        poseidon2: Optional[Callable[[Sequence[int]], Sequence[int]]] = None,
        check_alignment: bool = True, max_cycles: int = 1 << 26) -> Result:
    """Runs the guest to its exit; raises EmuError on an ABI violation."""
    from unicorn import (UC_ARCH_RISCV, UC_HOOK_BLOCK, UC_HOOK_INTR, UC_HOOK_MEM_READ,
                         UC_HOOK_MEM_WRITE, UC_MODE_RISCV32, Uc, UcError)
    from unicorn.riscv_const import (UC_RISCV_REG_A0, UC_RISCV_REG_A1, UC_RISCV_REG_A2,
                                     UC_RISCV_REG_A7, UC_RISCV_REG_PC, UC_RISCV_REG_SP)

    entry, segs = load_segments(elf)
    uc = Uc(UC_ARCH_RISCV, UC_MODE_RISCV32)
    pages: set[int] = set()
    for vaddr, _data, memsz in segs:
        pages.update(range(vaddr // PAGE, (vaddr + memsz + PAGE - 1) // PAGE))
    for page in sorted(pages):
        uc.mem_map(page * PAGE, PAGE)
    for vaddr, data, _memsz in segs:
        uc.mem_write(vaddr, data)
    stack_end = (STACK_TOP + PAGE) // PAGE * PAGE
    uc.mem_map(stack_end - STACK_SIZE, STACK_SIZE)
    uc.reg_write(UC_RISCV_REG_SP, STACK_TOP)

    state = {"pos": 0, "exit": None, "cycles": 0, "err": None, "p2": 0}
    out, err = bytearray(), bytearray()

    def fail(msg: str) -> None:
        if state["err"] is None:
            state["err"] = msg
        uc.emu_stop()

    def on_block(uc, address, size, _ud):
        state["cycles"] += size // 4

    def on_mem(uc, _access, address, size, _value, _ud):
        if address % size:
            fail(f"misaligned {size}-byte access at {address:#x} "
                 f"(pc {uc.reg_read(UC_RISCV_REG_PC):#x})")

    def on_intr(uc, intno, _ud):
        if intno not in (8, 11):                    # ECALL from U or M mode
            return fail(f"exception {intno} at pc {uc.reg_read(UC_RISCV_REG_PC):#x}")
        n = uc.reg_read(UC_RISCV_REG_A7)
        a0, a1, a2 = (uc.reg_read(r) for r in (UC_RISCV_REG_A0, UC_RISCV_REG_A1,
                                                UC_RISCV_REG_A2))
        ret = 0
        if n == SYS_READ:
            if a0 != 0:
                return fail(f"read from fd {a0}")
            chunk = stdin[state["pos"]:state["pos"] + a2]
            uc.mem_write(a1, chunk)
            state["pos"] += len(chunk)
            ret = len(chunk)
        elif n == SYS_WRITE:
            if a0 not in (1, 2):
                return fail(f"write to fd {a0}")
            (out if a0 == 1 else err).extend(uc.mem_read(a1, a2))
            ret = a2
        elif n in (SYS_EXIT, SYS_EXIT_GROUP):
            state["exit"] = a0 & 0xFF
            return uc.emu_stop()
        elif n == SYS_POSEIDON2:
            if poseidon2 is None:
                return fail("SYS_POSEIDON2 without a poseidon2 function")
            if a0 % 4 or a1 % 4:
                return fail("SYS_POSEIDON2 with misaligned pointers")
            words = struct.unpack("<16I", uc.mem_read(a0, 64))
            if any(w >= P for w in words):
                return fail("SYS_POSEIDON2 input word >= p")
            uc.mem_write(a1, struct.pack("<8I", *poseidon2(words)[:8]))
            state["p2"] += 1
            ret = 0
        else:
            return fail(f"unknown ECALL a7={n:#x}")
        uc.reg_write(UC_RISCV_REG_A0, ret & 0xFFFFFFFF)   # pc is already past the ECALL

    uc.hook_add(UC_HOOK_BLOCK, on_block)
    uc.hook_add(UC_HOOK_INTR, on_intr)
    if check_alignment:
        uc.hook_add(UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE, on_mem)
    try:
        uc.emu_start(entry, 0xFFFF_FFFF, count=max_cycles)
    except UcError as e:
        raise EmuError(f"{e} at pc {uc.reg_read(UC_RISCV_REG_PC):#x}") from None
    if state["err"] is not None:
        raise EmuError(state["err"])
    if state["exit"] is None:
        raise EmuError(f"no exit within {max_cycles} instructions")
    return Result(bytes(out), bytes(err), state["exit"], state["cycles"], state["p2"])


def project_poseidon2(words: Sequence[int]) -> list[int]:
    """Lanes 0..7 of the project's Poseidon2 permutation (guests/models.py's Python rounds
    over the project's constants: nothing to compile)."""
    import importlib.util
    import os
    mod = sys.modules.get("guests_models")
    if mod is None:
        spec = importlib.util.spec_from_file_location(
            "guests_models", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          "models.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules["guests_models"] = mod
        spec.loader.exec_module(mod)
    return mod.poseidon2_compress(words)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    elf = open(argv[1], "rb").read()
    data = open(argv[2], "rb").read() if len(argv) == 3 else sys.stdin.buffer.read()
    res = run(elf, data, poseidon2=project_poseidon2)
    sys.stdout.buffer.write(res.stdout)
    sys.stderr.buffer.write(res.stderr)
    print(f"exit {res.exit_code}, {res.cycles} cycles, {res.poseidon2_calls} Poseidon2 calls",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
