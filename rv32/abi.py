"""The machine's fixed numbers: state at entry, memory map, system calls, limits.

State at entry: pc = the program's entry point, x2 (sp) = :data:`STACK_TOP`, every other
register 0, memory = the program's image over a zero 32-bit address space.

Memory map: the whole space [0, 2^32) is readable and writable, byte-addressed, little-
endian, zero where the image says nothing.  Programs may not load into the stack region
[:data:`STACK_REGION_START`, :data:`STACK_REGION_END`) -- the 8 MiB below STACK_TOP and the
16 bytes above it -- so that a program's own stack does not run into its image; stack use
beyond 8 MiB is not prevented (memory is everywhere).

System calls (ECALL; number in a7, arguments a0..a2, result in a0), Linux's RISC-V numbers
so that the same ELF runs under qemu-riscv32 -- docs/rv32.md "System calls" has the table.
"""
from __future__ import annotations

import numbers

P = 2013265921                   # BabyBear, 2^31 - 2^27 + 1 (POSEIDON2's words are < P)
MASK = 0xFFFF_FFFF

STACK_TOP = 0x7FFF_FFF0          # sp at entry: 16-byte aligned (the RISC-V psABI's rule)
STACK_SIZE = 8 << 20             # the region below it that no segment may occupy
STACK_REGION_START = STACK_TOP - STACK_SIZE
STACK_REGION_END = 0x8000_0000   # exclusive
SP = 2                           # x2

# Linux RISC-V (asm-generic) numbers
SYS_READ = 63
SYS_WRITE = 64
SYS_EXIT = 93
SYS_EXIT_GROUP = 94
# Poseidon2 compression precompile: above every Linux number ("SF" 0x5346, call 1)
SYS_POSEIDON2 = 0x5346_0001
EBADF = 9
NEG_EBADF = (-EBADF) & MASK      # 0xFFFF_FFF7 = 2^32 - 9, what read/write return for a bad fd

FD_STDIN, FD_STDOUT, FD_STDERR = 0, 1, 2

# Cycle limits: one cycle per instruction, ECALL included.
DEFAULT_MAX_CYCLES = 1 << 22
MAX_CYCLES_CEILING = 1 << 24
#: the largest max_cycles a segmented run (or a block in epochs) accepts: a u32 cycle count
MAX_SEGMENTED_CYCLES = (1 << 32) - 1
# The input is at most this long, and each of fd 1 and fd 2 receives at most this many
# bytes in a run (a write that would pass it is an execution error).
MAX_INPUT_BYTES = 1 << 26
MAX_OUTPUT_BYTES = 1 << 26

POSEIDON2_IN_WORDS = 16
POSEIDON2_OUT_WORDS = 8

_NAMES = {SYS_READ: "read", SYS_WRITE: "write", SYS_EXIT: "exit", SYS_EXIT_GROUP: "exit_group",
          SYS_POSEIDON2: "poseidon2"}


def syscall_name(number: int) -> str:
    return _NAMES.get(int(number), f"syscall {int(number)}")


def check_run_limits(input: bytes, max_cycles) -> int:
    """``max_cycles`` as an int, or ValueError for an input or cycle limit the machine does
    not accept."""
    if isinstance(max_cycles, bool) or not isinstance(max_cycles, numbers.Integral):
        raise ValueError(f"max_cycles must be an int, got {type(max_cycles).__name__}")
    if not 1 <= max_cycles <= MAX_CYCLES_CEILING:
        raise ValueError(f"max_cycles = {max_cycles} is outside [1, {MAX_CYCLES_CEILING}]")
    if not isinstance(input, (bytes, bytearray, memoryview)):
        raise ValueError(f"input must be bytes, got {type(input).__name__}")
    if len(input) > MAX_INPUT_BYTES:
        raise ValueError(f"input of {len(input)} bytes is over MAX_INPUT_BYTES = "
                         f"{MAX_INPUT_BYTES}")
    return int(max_cycles)
