"""The machine's memory: 2^32 bytes, sparse, zero where nothing was written.

:class:`Memory` keeps a dict of 4 KiB pages (page number -> bytearray); a page exists only
once something non-zero may be in it (an image's file bytes, a store).  It is the Python
interpreter's memory and the form in which both interpreters return the final memory
(the compiled loop's page pool is copied into one).  Words are little-endian.
"""
from __future__ import annotations

from . import abi

PAGE_BITS = 12
PAGE_SIZE = 1 << PAGE_BITS
PAGE_MASK = PAGE_SIZE - 1
NUM_PAGES = 1 << (32 - PAGE_BITS)


class Memory:
    """Sparse byte-addressed memory over [0, 2^32)."""

    def __init__(self, pages: dict | None = None):
        self.pages: dict[int, bytearray] = pages if pages is not None else {}

    @classmethod
    def from_program(cls, program) -> "Memory":
        """The initial memory: the program's segments over zeros (zero pages stay absent)."""
        mem = cls()
        for s in program.segments:
            data = s.initialised            # the zero fill needs no page
            if data:
                mem.write(s.address, data)
        return mem

    def _check(self, addr: int, n: int) -> None:
        if n < 0 or addr < 0 or addr + n > 1 << 32:
            raise ValueError(f"[0x{addr:x}, +{n}) is not inside the 32-bit address space")

    def read(self, addr: int, n: int) -> bytes:
        """``n`` bytes from ``addr`` (the range must not pass 2^32)."""
        self._check(addr, n)
        out = bytearray(n)
        done = 0
        while done < n:
            a = addr + done
            pn, off = a >> PAGE_BITS, a & PAGE_MASK
            k = min(PAGE_SIZE - off, n - done)
            page = self.pages.get(pn)
            if page is not None:
                out[done:done + k] = page[off:off + k]
            done += k
        return bytes(out)

    def write(self, addr: int, data: bytes) -> None:
        """Write ``data`` at ``addr`` (the range must not pass 2^32)."""
        n = len(data)
        self._check(addr, n)
        done = 0
        while done < n:
            a = addr + done
            pn, off = a >> PAGE_BITS, a & PAGE_MASK
            k = min(PAGE_SIZE - off, n - done)
            page = self.pages.get(pn)
            if page is None:
                page = self.pages[pn] = bytearray(PAGE_SIZE)
            page[off:off + k] = data[done:done + k]
            done += k

    def load_word(self, addr: int) -> int:
        """The little-endian word at the 4-aligned ``addr``."""
        page = self.pages.get(addr >> PAGE_BITS)
        if page is None:
            return 0
        off = addr & PAGE_MASK
        return int.from_bytes(page[off:off + 4], "little")

    def store_word(self, addr: int, value: int) -> None:
        """Store ``value`` (taken mod 2^32) at the 4-aligned ``addr``."""
        pn = addr >> PAGE_BITS
        page = self.pages.get(pn)
        if page is None:
            page = self.pages[pn] = bytearray(PAGE_SIZE)
        off = addr & PAGE_MASK
        page[off:off + 4] = (value & abi.MASK).to_bytes(4, "little")

    def nonzero_pages(self) -> list[int]:
        """Page numbers whose bytes are not all zero, ascending."""
        return sorted(pn for pn, page in self.pages.items() if any(page))

    def __eq__(self, other) -> bool:
        if not isinstance(other, Memory):
            return NotImplemented
        mine, theirs = self.nonzero_pages(), other.nonzero_pages()
        return mine == theirs and all(self.pages[p] == other.pages[p] for p in mine)

    __hash__ = None


__all__ = ["Memory", "PAGE_BITS", "PAGE_SIZE", "NUM_PAGES"]
