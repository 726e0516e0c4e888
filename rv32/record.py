"""The execution record: what the AIR traces are built from (a contract; docs/rv32.md).

``rv32.execute(program, input, record=True).record`` is a :class:`Record`.  Together with
the :class:`~rv32.elf.Program` (the initial image and entry point) it determines the whole
execution; every array is a numpy ``uint32`` array.

Per cycle (length ``cycles``; cycle c is the c-th instruction executed, ECALL included):

============  =========================================================================
pc            address of the instruction
insn          the instruction word (fetched from the program image)
rs1_val       x[rs1] before the instruction; 0 when rs1 is 0 or the format has no rs1
              (LUI, AUIPC, JAL; FENCE and ECALL read no register)
rs2_val       x[rs2] before the instruction; 0 when rs2 is 0 or the format has no rs2
              (only R-type, stores and branches have one)
rd_val        the value written to rd; 0 when rd is 0 or the instruction writes no
              register (stores, branches, FENCE, ECALL -- an ECALL's a0 is its result
              in the ECALL arrays below)
mem_addr      byte address of a load or store (rs1 + imm mod 2^32); else 0
mem_before    the aligned word at mem_addr & ~3 before the access; 0 when no access
mem_after     that word after the access (== mem_before for a load); 0 when no access
next_pc       the pc of the next cycle; for exit/exit_group the ECALL's own pc (the
              machine halts there)
============  =========================================================================

Per ECALL (length ``n``, in execution order; every executed ECALL is listed, a bad-fd or
zero-length read/write and the final exit included):

============  =========================================================================
ecall_cycle   its cycle
ecall_args    uint32[n, 5]: a7, a0, a1, a2 before the call, and the result = a0 after it
              (read/write: the count or 2^32 - 9 for -EBADF; poseidon2: 0; exit: a0)
============  =========================================================================

The memory words the ECALLs touched (length ``m``, in access order, grouped by ECALL):

===================  ==================================================================
ecall_mem_event      index into the ECALL arrays
ecall_mem_word_addr  the word's byte address (4-aligned)
ecall_mem_before     the word before the access
ecall_mem_after      the word after it (== before for a read)
ecall_mem_is_write   1 for a write, 0 for a read
===================  ==================================================================

Which words, per call: poseidon2 -- the 16 words at a0 read in order, then the 8 words at
a1 written in order (reads first: the buffers may overlap); read from fd 0 -- every word
overlapping the ``result`` bytes written at a1, ascending (a partial word merges the new
bytes into its old value); write to fd 1 or fd 2 -- every word overlapping the ``a2``
bytes at a1, ascending, read.  Other calls touch no memory.

Plus ``input`` (the bytes fd 0 offers) and ``output`` (the bytes written to fd 1); fd 2's
bytes are the execution's ``stderr``, not part of the statement.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

CYCLE_FIELDS = ("pc", "insn", "rs1_val", "rs2_val", "rd_val", "mem_addr", "mem_before",
                "mem_after", "next_pc")
ECALL_MEM_FIELDS = ("ecall_mem_event", "ecall_mem_word_addr", "ecall_mem_before",
                    "ecall_mem_after", "ecall_mem_is_write")


@dataclass(frozen=True, eq=False)
class Record:
    """The record of one execution (module docstring)."""
    pc: np.ndarray
    insn: np.ndarray
    rs1_val: np.ndarray
    rs2_val: np.ndarray
    rd_val: np.ndarray
    mem_addr: np.ndarray
    mem_before: np.ndarray
    mem_after: np.ndarray
    next_pc: np.ndarray
    ecall_cycle: np.ndarray
    ecall_args: np.ndarray
    ecall_mem_event: np.ndarray
    ecall_mem_word_addr: np.ndarray
    ecall_mem_before: np.ndarray
    ecall_mem_after: np.ndarray
    ecall_mem_is_write: np.ndarray
    input: bytes
    output: bytes

    @property
    def cycles(self) -> int:
        return int(self.pc.shape[0])

    @classmethod
    def from_lists(cls, rows, ecalls, ecall_mem, input: bytes, output: bytes) -> "Record":
        """From Python lists: ``rows`` of 9 ints (the per-cycle fields in order),
        ``ecalls`` of (cycle, a7, a0, a1, a2, result), ``ecall_mem`` of the 5 ECALL-memory
        fields."""
        cyc = np.array(rows, dtype=np.uint32).reshape(-1, len(CYCLE_FIELDS))
        ec = np.array(ecalls, dtype=np.uint32).reshape(-1, 6)
        em = np.array(ecall_mem, dtype=np.uint32).reshape(-1, len(ECALL_MEM_FIELDS))
        cols = {name: np.ascontiguousarray(cyc[:, k]) for k, name in enumerate(CYCLE_FIELDS)}
        cols.update({name: np.ascontiguousarray(em[:, k])
                     for k, name in enumerate(ECALL_MEM_FIELDS)})
        return cls(ecall_cycle=np.ascontiguousarray(ec[:, 0]),
                   ecall_args=np.ascontiguousarray(ec[:, 1:]), input=bytes(input),
                   output=bytes(output), **cols)

    def equals(self, other: "Record") -> bool:
        """Every array (shape, dtype and values) and both byte strings are equal."""
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray):
                if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a, b):
                    return False
            elif a != b:
                return False
        return True

    def mismatch(self, other: "Record") -> str | None:
        """The first field that differs (for test messages), else None."""
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray):
                if a.dtype != b.dtype or a.shape != b.shape:
                    return f"{f.name}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
                bad = np.flatnonzero((a != b).reshape(a.shape[0], -1).any(axis=1)) \
                    if a.size else []
                if len(bad):
                    i = int(bad[0])
                    return f"{f.name}[{i}]: {a[i]} vs {b[i]}"
            elif a != b:
                return f"{f.name} differs"
        return None


__all__ = ["Record", "CYCLE_FIELDS", "ECALL_MEM_FIELDS"]
