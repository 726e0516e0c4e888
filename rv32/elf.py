"""Programs: static RV32 ELF executables, loaded into a :class:`Program`, and its digest.

The machine runs static little-endian ELF32 RISC-V executables (ELFCLASS32, ELFDATA2LSB,
ET_EXEC, EM_RISCV), parsed here with ``struct`` (the 52-byte ELF32 header and the
32-byte program headers; sections are never read).  Every PT_LOAD segment of non-zero memory size
is loaded at its virtual address: its file bytes, then zeros up to its memory size; the
entry point comes from the header.  :func:`parse_elf` refuses, with an :class:`ElfError`
naming what is wrong:

* a file that is not an ELF, or is over :data:`MAX_FILE_BYTES`, or is cut short (header,
  program headers or a segment's bytes past its end);
* ELFCLASS64, big-endian, an unknown EI_VERSION, a type other than ET_EXEC (relocatable,
  shared/PIE, core), a machine other than EM_RISCV;
* a program built for the C extension (e_flags RVC) or a hard-float ABI (e_flags float
  ABI bits): their instructions are not RV32IM;
* a dynamic program (PT_INTERP or PT_DYNAMIC);
* a segment whose file size exceeds its memory size, that runs past 2^32, that overlaps
  another segment or the stack region (:mod:`rv32.abi`), more than :data:`MAX_SEGMENTS`
  segments, or images of more than :data:`MAX_IMAGE_BYTES` in all (memory sizes summed);
* no loadable segment, an entry point that is not 4-byte aligned or not inside an
  executable (PF_X) segment.

Every size is checked before a field is read, so no parsing error escapes as anything
but an :class:`ElfError`.  Sections, symbols and non-load segments (notes, RISC-V
attributes, GNU_STACK) are ignored.  (The parser was pyelftools until issue #38: its
import was ~19 ms of every ``verify`` process; tests/test_rv32_elf.py compares the two on
every bundled ELF.)

Instruction fetch reads the image of the executable segments only (docs/rv32.md "Memory"),
so the program's code is :meth:`Program.code_ranges`; data reads and writes see the whole
image.

**Digest** (:meth:`Program.digest`): SHA-256 over ``DIGEST_DOMAIN || u32(entry) ||
u32(n) || for each of the n segments in address order: u32(address) || u32(size) ||
u32(flags & 7) || the size loaded bytes`` (u32 = 4 bytes little-endian, size = the memory
size, flags PF_X = 1, PF_W = 2, PF_R = 4).  As field elements for the public values
(:meth:`Program.digest_elements`): 16 limbs of 16 bits, limb i = bytes 2i, 2i+1 of the
digest read little-endian (each < 2^16 < p).
"""
from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import numpy as np

from . import abi
from .errors import ElfError

MAX_FILE_BYTES = 256 << 20
MAX_IMAGE_BYTES = 64 << 20        # total memory size of the loaded segments
MAX_SEGMENTS = 256
PF_X, PF_W, PF_R = 1, 2, 4
EF_RISCV_RVC = 0x1
EF_RISCV_FLOAT_ABI = 0x6
DIGEST_DOMAIN = b"steadfast/rv32/program/v1\x00"
DEFAULT_BASE = 0x0001_0000        # Program.from_words' default load address (GNU ld's)

_TYPE_NAMES = {0: "no file type (ET_NONE)",
               1: "a relocatable object file (ET_REL); link it into an executable",
               3: "a shared object or position-independent executable (ET_DYN); "
                  "link with -static -no-pie",
               4: "a core dump (ET_CORE)"}
ET_EXEC, EM_RISCV = 2, 243
PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
_MACHINES = {3: "EM_386", 8: "EM_MIPS", 20: "EM_PPC", 21: "EM_PPC64", 40: "EM_ARM",
             62: "EM_X86_64", 183: "EM_AARCH64", 243: "EM_RISCV"}
_HEADER = struct.Struct("<HHIIIIIHHHHHH")       # e_type .. e_shstrndx, after e_ident
_PHDR = struct.Struct("<IIIIIIII")              # p_type, p_offset, p_vaddr, p_paddr,
                                                # p_filesz, p_memsz, p_flags, p_align


_BLOCK = 1 << 16


def nonzero_len(data) -> int:
    """``len(bytes(data).rstrip(b"\\0"))``, scanning back a 64 KiB block at a time."""
    a = np.frombuffer(data, np.uint8)
    n = a.size
    while n:
        lo = max(0, n - _BLOCK)
        nz = np.flatnonzero(a[lo:n])
        if nz.size:
            return lo + int(nz[-1]) + 1
        n = lo
    return 0


@dataclass(frozen=True)
class Segment:
    """One loaded segment: ``data`` is its whole memory image (file bytes + zero fill)."""
    address: int
    data: bytes
    flags: int

    @property
    def end(self) -> int:
        return self.address + len(self.data)

    @property
    def executable(self) -> bool:
        return bool(self.flags & PF_X)

    @cached_property
    def initialised(self) -> bytes:
        """``data`` without its zero tail -- ``data.rstrip(b"\\0")``, the bytes a memory
        image needs -- found 64 KiB at a time: a bss or stack segment is megabytes of
        zeros, and ``rstrip`` walked them a byte at a time (~14 ms for 4 MiB, several
        times a verify)."""
        return self.data[:nonzero_len(self.data)]


@dataclass(frozen=True)
class Program:
    """A loaded program: entry point and segments (address order, non-overlapping)."""
    entry: int
    segments: tuple

    def __post_init__(self):
        _validate(self.entry, self.segments)

    @classmethod
    def from_words(cls, words: Sequence[int], base: int = DEFAULT_BASE,
                   entry: int | None = None, data: Sequence = ()) -> "Program":
        """A program of instruction ``words`` at ``base`` (one R+W+X segment; entry =
        base unless given) plus ``data``: ``(address, bytes)`` pairs, each an R+W
        segment."""
        code = b"".join(struct.pack("<I", int(w) & abi.MASK) for w in words)
        segs = [Segment(int(base), code, PF_R | PF_W | PF_X)]
        segs += [Segment(int(a), bytes(b), PF_R | PF_W) for a, b in data if len(b)]
        return cls(int(base) if entry is None else int(entry),
                   tuple(sorted(segs, key=lambda s: s.address)))

    @property
    def image_size(self) -> int:
        return sum(len(s.data) for s in self.segments)

    def code_ranges(self) -> list[tuple[int, bytes]]:
        """``(start, bytes)`` of every executable segment, trimmed to whole aligned words:
        the instruction words the machine can fetch."""
        out = []
        for s in self.segments:
            if not s.executable:
                continue
            start = (s.address + 3) & ~3
            end = s.end & ~3
            if end > start:
                out.append((start, s.data[start - s.address:end - s.address]))
        return out

    def digest(self) -> bytes:
        """SHA-256 of the loaded image and entry point (module docstring); computed once
        per Program (it is frozen: a block's verify asked for it six times a program)."""
        got = self.__dict__.get("_digest")
        if got is None:
            got = self._compute_digest()
            object.__setattr__(self, "_digest", got)
        return got

    def _compute_digest(self) -> bytes:
        h = hashlib.sha256(DIGEST_DOMAIN)
        h.update(struct.pack("<II", self.entry, len(self.segments)))
        for s in self.segments:
            h.update(struct.pack("<III", s.address, len(s.data), s.flags & 7))
            h.update(s.data)
        return h.digest()

    def digest_elements(self) -> tuple:
        """The digest as 16 field elements of 16 bits (little-endian limbs)."""
        d = self.digest()
        return tuple(int.from_bytes(d[2 * i:2 * i + 2], "little") for i in range(16))


def _validate(entry: int, segments: Sequence[Segment]) -> None:
    if not segments:
        raise ElfError("segments", "no loadable segment")
    if len(segments) > MAX_SEGMENTS:
        raise ElfError("segments", f"{len(segments)} loadable segments (at most "
                                   f"{MAX_SEGMENTS})")
    total = 0
    prev = None
    for i, s in enumerate(segments):
        where = f"segment {i}"
        if not isinstance(s, Segment) or not isinstance(s.data, bytes) or not s.data:
            raise ElfError(where, "expected a Segment with non-empty bytes")
        if not 0 <= s.address <= abi.MASK:
            raise ElfError(where, f"address {s.address} is not a 32-bit address")
        if s.end > 1 << 32:
            raise ElfError(where, f"[0x{s.address:08x}, +{len(s.data)}) runs past the end of "
                                  f"the 32-bit address space")
        if s.address < abi.STACK_REGION_END and s.end > abi.STACK_REGION_START:
            raise ElfError(where, f"[0x{s.address:08x}, 0x{s.end:08x}) overlaps the stack "
                                  f"region [0x{abi.STACK_REGION_START:08x}, "
                                  f"0x{abi.STACK_REGION_END:08x})")
        if prev is not None and s.address < prev.end:
            if s.address < prev.address:
                raise ElfError("segments", "segments are not in address order")
            raise ElfError(where, f"[0x{s.address:08x}, 0x{s.end:08x}) overlaps the segment "
                                  f"[0x{prev.address:08x}, 0x{prev.end:08x})")
        total += len(s.data)
        prev = s
    if total > MAX_IMAGE_BYTES:
        raise ElfError("segments", f"the image is {total} bytes (at most {MAX_IMAGE_BYTES})")
    if isinstance(entry, bool) or not isinstance(entry, int) or not 0 <= entry <= abi.MASK:
        raise ElfError("e_entry", f"entry point {entry!r} is not a 32-bit address")
    if entry % 4:
        raise ElfError("e_entry", f"entry point 0x{entry:08x} is not 4-byte aligned")
    if not any(s.executable and s.address <= entry and entry + 4 <= s.end for s in segments):
        raise ElfError("e_entry", f"entry point 0x{entry:08x} is not inside an executable "
                                  f"segment")


def _header(data: bytes) -> None:
    """e_ident and the file's size: what must hold before a header field is read."""
    if len(data) > MAX_FILE_BYTES:
        raise ElfError("file", f"{len(data)} bytes (at most {MAX_FILE_BYTES})")
    if data[:4] != b"\x7fELF":
        raise ElfError("file", "not an ELF file (no \\x7fELF magic)")
    if len(data) < 16:
        raise ElfError("file", f"truncated: {len(data)} bytes, shorter than e_ident")
    cls, order, version = data[4], data[5], data[6]
    if cls == 2:
        raise ElfError("EI_CLASS", "a 64-bit ELF (ELFCLASS64); the machine runs RV32 "
                                   "(ELFCLASS32) programs")
    if cls != 1:
        raise ElfError("EI_CLASS", f"invalid ELF class {cls}")
    if order == 2:
        raise ElfError("EI_DATA", "a big-endian ELF (ELFDATA2MSB); RISC-V is little-endian")
    if order != 1:
        raise ElfError("EI_DATA", f"invalid ELF data encoding {order}")
    if version != 1:
        raise ElfError("EI_VERSION", f"unknown ELF version {version}")
    if len(data) < 52:
        raise ElfError("file", f"truncated: {len(data)} bytes, shorter than the 52-byte ELF32 "
                               f"header")


def parse_elf(data: bytes) -> Program:
    """The :class:`Program` of an ELF file's bytes (or :class:`ElfError`)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected the ELF file's bytes, got {type(data).__name__}")
    data = bytes(data)
    _header(data)
    (e_type, e_machine, _version, e_entry, phoff, _shoff, e_flags, _ehsize, phentsize, phnum,
     _shentsize, _shnum, _shstrndx) = _HEADER.unpack_from(data, 16)
    if e_type != ET_EXEC:
        raise ElfError("e_type", _TYPE_NAMES.get(e_type, f"unknown file type {e_type}")
                       + "; the machine runs static executables (ET_EXEC)")
    if e_machine != EM_RISCV:
        raise ElfError("e_machine", f"machine {_MACHINES.get(e_machine, e_machine)}, not "
                                    f"RISC-V (EM_RISCV)")
    if e_flags & EF_RISCV_RVC:
        raise ElfError("e_flags", "built for the C extension (EF_RISCV_RVC); the machine "
                                  "runs RV32IM: build with -march=rv32im")
    if e_flags & EF_RISCV_FLOAT_ABI:
        raise ElfError("e_flags", "built for a hard-float ABI; the machine runs RV32IM: "
                                  "build with -mabi=ilp32")
    if phnum > MAX_SEGMENTS * 4:
        raise ElfError("e_phnum", f"{phnum} program headers (at most {MAX_SEGMENTS * 4})")
    if phnum and phentsize != 32:
        raise ElfError("e_phentsize", f"program header size {phentsize}, expected 32")
    if phoff + phnum * phentsize > len(data):
        raise ElfError("file", "truncated: the program headers run past the end of the file")
    segments = []
    total = 0
    for i in range(phnum):
        kind, off, vaddr, _paddr, filesz, memsz, flags, _align = _PHDR.unpack_from(
            data, phoff + i * phentsize)
        where = f"program header {i}"
        if kind in (PT_INTERP, PT_DYNAMIC):
            name = "PT_INTERP" if kind == PT_INTERP else "PT_DYNAMIC"
            raise ElfError(where, f"a dynamic program ({name}); link with -static")
        if kind != PT_LOAD:
            continue
        if filesz > memsz:
            raise ElfError(where, f"file size {filesz} exceeds memory size {memsz}")
        if off + filesz > len(data):
            raise ElfError(where, f"truncated: bytes [{off}, {off + filesz}) run past the end "
                                  f"of the {len(data)}-byte file")
        if vaddr + memsz > 1 << 32:
            raise ElfError(where, f"[0x{vaddr:08x}, +{memsz}) runs past the end of the 32-bit "
                                  f"address space")
        if memsz == 0:
            continue
        total += memsz
        if total > MAX_IMAGE_BYTES:              # before the zero fill is allocated
            raise ElfError(where, f"the image reaches {total} bytes here (at most "
                                  f"{MAX_IMAGE_BYTES})")
        body = data[off:off + filesz] + bytes(memsz - filesz)
        segments.append((i, Segment(vaddr, body, flags & 7)))
    segments.sort(key=lambda t: t[1].address)
    for k in range(1, len(segments)):            # name the headers, not the sorted indices
        (i, a), (j, b) = segments[k - 1], segments[k]
        if b.address < a.end:
            raise ElfError(f"program header {j}",
                           f"segment [0x{b.address:08x}, 0x{b.end:08x}) overlaps program "
                           f"header {i}'s [0x{a.address:08x}, 0x{a.end:08x})")
    return Program(e_entry, tuple(s for _, s in segments))


def write_elf(program: Program) -> bytes:
    """A minimal static RV32 ELF (ET_EXEC, EM_RISCV, one PT_LOAD per segment, no sections)
    whose :func:`parse_elf` is ``program`` (same entry, segments and digest)."""
    segs = list(program.segments)
    phoff, n = 52, len(segs)
    off = phoff + 32 * n
    hdr = b"\x7fELF" + bytes([1, 1, 1, 0]) + bytes(8)
    hdr += _HEADER.pack(ET_EXEC, EM_RISCV, 1, program.entry, phoff, 0, 0, 52, 32, n, 40, 0, 0)
    phdrs, body = [], []
    for s in segs:
        data = s.initialised                  # the zero fill is memory size, not file
        phdrs.append(_PHDR.pack(PT_LOAD, off, s.address, s.address, len(data), len(s.data),
                                s.flags & 7, 4))
        body.append(data)
        off += len(data)
    return hdr + b"".join(phdrs) + b"".join(body)


def load_elf(path: str | os.PathLike) -> Program:
    """:func:`parse_elf` of a file (an unreadable file raises OSError as usual)."""
    size = os.path.getsize(path)
    if size > MAX_FILE_BYTES:
        raise ElfError("file", f"{size} bytes (at most {MAX_FILE_BYTES})")
    with open(path, "rb") as f:
        return parse_elf(f.read())


__all__ = ["Program", "Segment", "parse_elf", "load_elf", "write_elf", "ElfError", "MAX_FILE_BYTES",
           "MAX_IMAGE_BYTES", "MAX_SEGMENTS", "DIGEST_DOMAIN", "DEFAULT_BASE", "PF_X", "PF_W",
           "PF_R"]
