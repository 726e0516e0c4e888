"""Long runs as linked segments (docs/rv32.md "Long programs: segments").

:func:`run_segments` executes a program once, cut into segments of ``segment_cycles``
cycles (the last one exits), yielding each :class:`Segment` -- its boundary (pc,
registers and the page lists: the words it touches with their values at its start and
end) and, when asked, its local execution record (clk 0 at the segment's start), from
which :func:`rv32.traces.build_traces` builds the segment's tables.  :func:`segment_airs`
and :func:`segment_public_values` are what a verifier builds from a segment's boundary;
:class:`Chain` is the verifier's running state (:meth:`Chain.check` the links).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..verifier.errors import PublicValuesError, ShapeError

from . import abi, fastexec as fx
from .chips.common import CUR_ERR, CUR_IN, CUR_OUT, NUM_REGS
from .chips.io import build_io, pack_output
from .chips.program import build_program, image_of
from .chips.registers import register_init
from .chips.segment import SINK_ROW, build_pagemem, build_segregs
from .errors import ERR_CYCLES, OK, execution_error
from .execution import Execution
from .memory import Memory
from .record import CYCLE_FIELDS, Record
from .tables import INDEX, TABLES, static_air, table_names

MIN_LOG_SEGMENT, MAX_LOG_SEGMENT = 10, 22
DEFAULT_SEGMENT_CYCLES = 1 << 20
#: the largest max_cycles a segmented run accepts (a u32 cycle count)
MAX_SEGMENTED_CYCLES = abi.MAX_SEGMENTED_CYCLES


def check_segment_cycles(n) -> int:
    """A power of two in [2^10, 2^22], else ValueError naming the range."""
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0 or n & (n - 1) \
            or not (1 << MIN_LOG_SEGMENT) <= n <= (1 << MAX_LOG_SEGMENT):
        raise ValueError(f"segment_cycles must be a power of two in [2^{MIN_LOG_SEGMENT}, "
                         f"2^{MAX_LOG_SEGMENT}] (1,024 .. 4,194,304), got {n!r}")
    return n


@dataclass
class Segment:
    """One segment of a run.  ``regs_in`` / ``regs_out``: int64[36] (x0..x31, the sink --
    always 0 here: nothing reads it --, fd 0's position, fd 1's and fd 2's counts);
    ``wa`` the touched word addresses ascending, ``v_in`` / ``v_out`` their words at the
    start and the end; ``output`` the fd 1 bytes it wrote; ``execution`` (with the local
    record) when run with ``record``."""
    index: int
    start_cycle: int
    cycles: int
    pc_in: int
    regs_in: np.ndarray
    pc_out: int | None              # None: the final segment (it exits)
    regs_out: np.ndarray
    wa: np.ndarray
    v_in: np.ndarray
    v_out: np.ndarray
    output: bytes
    exit_code: int | None
    execution: Execution | None = field(default=None, repr=False)

    @property
    def final(self) -> bool:
        return self.pc_out is None

    def budget(self, max_cycles: int) -> int:
        """ECALL's public max_cycles: the cycles left, at most 2^24."""
        return min(max_cycles - self.start_cycle, abi.MAX_CYCLES_CEILING)


def _touched(rec: Record):
    """(word addresses ascending, value before the first access, after the last)."""
    op = rec.insn & 0x7F
    ls = np.flatnonzero((op == 0x03) | (op == 0x23))
    ev = rec.ecall_mem_event.astype(np.int64)
    cyc = np.concatenate([ls, rec.ecall_cycle.astype(np.int64)[ev]])
    seq = np.concatenate([np.full(ls.size, -1, np.int64), np.arange(ev.size)])
    wa = np.concatenate([rec.mem_addr[ls].astype(np.int64) >> 2,
                         rec.ecall_mem_word_addr.astype(np.int64) >> 2])
    before = np.concatenate([rec.mem_before[ls], rec.ecall_mem_before]).astype(np.int64)
    after = np.concatenate([rec.mem_after[ls], rec.ecall_mem_after]).astype(np.int64)
    order = np.lexsort((seq, cyc, wa))
    wa, before, after = wa[order], before[order], after[order]
    first = np.ones(wa.size, bool)
    first[1:] = wa[1:] != wa[:-1]
    last = np.ones(wa.size, bool)
    last[:-1] = wa[1:] != wa[:-1]
    return wa[first], before[first], after[last]


class _Machine:
    """The compiled loop's state between segments: code, decode cache, registers, the
    memory's page table and pool, the cursors, the output buffers."""

    def __init__(self, program, input: bytes, pc: int, regs36, ptab, pool, used: int):
        self.cwords, self.segs = fx._code(program)
        self.dec = np.zeros(self.cwords.shape[0], np.int64)
        self.ptab, self.pool = ptab, pool
        self.regs = np.zeros(32, np.int64)
        self.regs[1:32] = np.asarray(regs36[1:32], np.int64)
        st = self.state = np.zeros(fx.STATE_LEN, np.int64)
        st[fx.S_PC] = pc
        st[fx.S_PAGES] = used
        st[fx.S_EXIT] = -1
        st[fx.S_IN_POS], st[fx.S_OUT], st[fx.S_ERR] = (int(regs36[CUR_IN]),
                                                        int(regs36[CUR_OUT]),
                                                        int(regs36[CUR_ERR]))
        self.inp = np.frombuffer(bytes(input), np.uint8).copy()
        self.out = np.zeros(int(st[fx.S_OUT]) + 256, np.uint8)
        self.err = np.zeros(int(st[fx.S_ERR]) + 256, np.uint8)
        self.detail = np.zeros(4, np.int64)

    @classmethod
    def at_entry(cls, program, input: bytes) -> "_Machine":
        ptab, pool, used = fx._image(program, 64)
        return cls(program, input, program.entry, entry_registers(), ptab, pool, used)

    @classmethod
    def at(cls, program, input: bytes, seg: "Segment") -> "_Machine":
        """At ``seg``'s start from its checkpoint: pc, registers, cursors and the words it
        touches at their in-values (the only memory it reads)."""
        from .memory import NUM_PAGES, PAGE_SIZE
        wa = np.asarray(seg.wa, np.int64)
        per_page = PAGE_SIZE // 4
        pages = np.unique(wa // per_page)
        ptab = np.zeros(NUM_PAGES, np.int32)
        pool = np.zeros((1 + pages.size + 64, per_page), np.uint32)
        ptab[pages] = np.arange(1, pages.size + 1, dtype=np.int32)
        pool[ptab[wa // per_page], wa % per_page] = np.asarray(seg.v_in, np.int64) \
            .astype(np.uint32)
        return cls(program, input, seg.pc_in, seg.regs_in, ptab, pool, 1 + pages.size)

    def run(self, limit: int, record: bool):
        """Run up to ``limit`` cycles (local clk from 0) -> (status, cycles, buffers)."""
        st = self.state
        st[fx.S_CYCLE] = 0
        st[fx.S_ECALLS] = 0
        st[fx.S_EMEM] = 0
        if record:
            b = {"rec": np.empty((len(CYCLE_FIELDS), limit), np.uint32),
                 "e_cycle": np.zeros(64, np.uint32), "e_args": np.zeros((64, 5), np.uint32),
                 "emem": np.zeros((5, 1024), np.uint32)}
        else:
            b = {"rec": np.zeros((len(CYCLE_FIELDS), 1), np.uint32),
                 "e_cycle": np.zeros(1, np.uint32), "e_args": np.zeros((1, 5), np.uint32),
                 "emem": np.zeros((5, 1), np.uint32)}
        b.update(pool=self.pool, out=self.out, err=self.err)
        status = fx.drive(record, limit, self.cwords, self.dec, self.segs, self.regs, st,
                          self.ptab, b, self.inp, self.detail)
        self.pool, self.out, self.err = b["pool"], b["out"], b["err"]
        return status, int(st[fx.S_CYCLE]), b


def _segment_of(m: _Machine, program, input: bytes, index: int, start: int, limit: int,
                max_cycles: int, record: bool) -> Segment:
    """Run machine ``m`` one segment (at most ``limit`` cycles) -> its Segment; an
    execution failure raises :class:`rv32.ExecutionError` with the global cycle."""
    st = m.state
    pc_in, regs_in, o0 = int(st[fx.S_PC]), _regs36(m.regs, st), int(st[fx.S_OUT])
    status, cycles, b = m.run(limit, record)
    final = status == OK
    if status == ERR_CYCLES and start + cycles >= max_cycles:
        m.detail[0] = max_cycles
        raise execution_error(status, int(st[fx.S_PC]), max_cycles, m.detail)
    if status not in (OK, ERR_CYCLES):
        raise execution_error(status, int(st[fx.S_PC]), start + cycles, m.detail)
    output = m.out[o0:int(st[fx.S_OUT])].tobytes()
    ex = None
    wa = v_in = v_out = np.zeros(0, np.int64)
    if record:
        r = fx.record_of(b, st, cycles, input, output)
        wa, v_in, v_out = _touched(r)
        ex = Execution(cycles=cycles, exit_code=int(st[fx.S_EXIT]) if final else 0,
                       output=output, stderr=b"", regs=m.regs.copy(), pc=int(st[fx.S_PC]),
                       memory=Memory({}), record=r)
    return Segment(index, start, cycles, pc_in, regs_in,
                   None if final else int(st[fx.S_PC]), _regs36(m.regs, st), wa, v_in,
                   v_out, output, int(st[fx.S_EXIT]) if final else None, ex)


def _check_limits(input: bytes, max_cycles: int, segment_cycles: int) -> int:
    S = check_segment_cycles(segment_cycles)
    if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) \
            or not 1 <= max_cycles <= MAX_SEGMENTED_CYCLES:
        raise ValueError(f"max_cycles must be an int in [1, 2^32 - 1], got {max_cycles!r}")
    abi.check_run_limits(input, 1)
    return S


def run_segments(program, input: bytes, max_cycles: int, segment_cycles: int,
                 record: bool = True):
    """Execute ``program`` on ``input`` once, yielding its segments in order (module
    docstring); an execution failure raises :class:`rv32.ExecutionError` with the global
    cycle (the cycle limit: max_cycles).  Without ``record`` the segments carry their
    registers, pc and cycles but no touched words."""
    S = _check_limits(input, max_cycles, segment_cycles)
    m = _Machine.at_entry(program, input)
    start, j = 0, 0
    while True:
        seg = _segment_of(m, program, input, j, start, min(S, max_cycles - start), max_cycles,
                          record)
        yield seg
        if seg.final:
            return
        start += seg.cycles
        j += 1


def checkpoint(seg: Segment) -> Segment:
    """``seg`` without its execution record: what re-runs it (:func:`replay`) -- its
    in-boundary and the words it touches with their in-values -- and what checks the
    re-run (its out-boundary).  Small: a few words per touched word, never a trace."""
    return Segment(seg.index, seg.start_cycle, seg.cycles, seg.pc_in, seg.regs_in, seg.pc_out,
                   seg.regs_out, seg.wa, seg.v_in, seg.v_out, seg.output, seg.exit_code)


class ReplayMismatch(RuntimeError):
    """A segment re-run from its checkpoint did not end where the first run did (a
    corrupted checkpoint, or a machine that is not deterministic): never proved."""


def replay(program, input: bytes, max_cycles: int, segment_cycles: int,
           ck: Segment) -> Segment:
    """Re-run segment ``ck`` from its checkpoint (:func:`checkpoint`) with its record ->
    the Segment with its execution, for its tables; :class:`ReplayMismatch` when its end
    differs from the checkpoint's."""
    S = _check_limits(input, max_cycles, segment_cycles)
    m = _Machine.at(program, input, ck)
    seg = _segment_of(m, program, input, ck.index, ck.start_cycle,
                      min(S, max_cycles - ck.start_cycle), max_cycles, True)
    same = (seg.cycles == ck.cycles and seg.pc_out == ck.pc_out
            and seg.exit_code == ck.exit_code and seg.output == ck.output
            and np.array_equal(seg.regs_out, ck.regs_out) and np.array_equal(seg.wa, ck.wa)
            and np.array_equal(seg.v_in, ck.v_in) and np.array_equal(seg.v_out, ck.v_out))
    if not same:
        raise ReplayMismatch(f"segment {ck.index}: the re-run from its checkpoint ends "
                             "elsewhere than the first run")
    return seg


def _regs36(regs, state) -> np.ndarray:
    r = np.zeros(NUM_REGS, np.int64)
    r[:32] = regs & 0xFFFF_FFFF
    r[0] = 0
    r[CUR_IN], r[CUR_OUT], r[CUR_ERR] = state[fx.S_IN_POS], state[fx.S_OUT], state[fx.S_ERR]
    return r


def entry_registers() -> np.ndarray:
    """int64[36]: the registers at entry (sp = STACK_TOP, cursors 0)."""
    return register_init().astype(np.int64)


# ----------------------------------------------------------------------- the statement

def segment_airs(image, input: bytes, seg: Segment, log_blowup: int, slots=None,
                 split=()) -> list:
    """The 18 AIRs of segment ``seg``'s proof: the chips as in one proof, PROGRAM without
    its image sends, PAGEMEM for MEMORY, SEGREGS for REGISTERS, IO over the segment's
    slices of the input and output; then the pieces of the chips ``split``
    (docs/rv32.md "Split chips")."""
    slots = dict(slots or {})
    c0, c1 = int(seg.regs_in[CUR_IN]), int(seg.regs_out[CUR_IN])
    o0 = int(seg.regs_in[CUR_OUT])
    out = []
    for name in TABLES:
        if name == "program":
            out.append(build_program(image, log_blowup, paged=True))
        elif name == "memory":
            out.append(build_pagemem(seg.wa, seg.v_in, seg.v_out, log_blowup))
        elif name == "registers":
            out.append(build_segregs(seg.regs_in, seg.regs_out, seg.pc_in, seg.pc_out,
                                     seg.cycles, log_blowup))
        elif name == "io":
            out.append(build_io(bytes(input[c0:c1]), seg.output, log_blowup, c0, o0))
        else:
            out.append(static_air(name, log_blowup, int(slots.get(name, 1))))
    for name in table_names(split)[len(TABLES):]:
        out.append(static_air(name, log_blowup, int(slots.get(name, 1))))
    return out


def segment_public_values(input: bytes, seg: Segment, max_cycles: int) -> list:
    pv = [[] for _ in TABLES]
    pv[INDEX["registers"]] = [int(seg.exit_code)] if seg.final else []
    pv[INDEX["io"]] = pack_output(seg.output)
    pv[INDEX["ecall"]] = [seg.budget(max_cycles), len(input)]
    return pv


class Chain:
    """The verifier's running state over a segmented run (docs/rv32.md): the memory (the
    image over zeros, then every segment's out-values), the registers, pc and the cycle
    count.  :meth:`link` checks a segment's carried boundary against it and fills in its
    in-values; :meth:`advance` moves past it."""

    def __init__(self, program, input: bytes, max_cycles: int, segment_cycles: int):
        self.image = image_of(program)
        self.input = bytes(input)
        self.max_cycles = max_cycles
        self.S = segment_cycles
        self.mem_wa = np.zeros(0, np.int64)      # words written by earlier segments,
        self.mem_v = np.zeros(0, np.int64)       # ascending, with their last values
        self.regs = entry_registers()
        self.pc = int(program.entry)
        self.cycles = 0
        self.output = bytearray()
        self.done = False

    def _words(self, wa: np.ndarray) -> np.ndarray:
        """The chain's memory at word addresses ``wa`` (ascending): the last segment's
        out-value that wrote each, else the image's word, else 0."""
        vals = np.zeros(wa.size, np.int64)
        for keys, words in ((self.image.wa, self.image.word), (self.mem_wa, self.mem_v)):
            if keys.size and wa.size:
                j = np.minimum(np.searchsorted(keys, wa), keys.size - 1)
                hit = keys[j] == wa
                vals[hit] = np.asarray(words, np.int64)[j[hit]]
        return vals

    def link(self, seg: Segment, last: bool) -> Segment:
        """``seg`` as carried (index, cycles, pc_out, regs_out, wa, v_out, output, final)
        completed with the chain's pc_in, regs_in, start and v_in; PublicValuesError
        naming the segment when its boundary cannot follow the chain."""
        j = seg.index
        where = f"segment {j}"
        if self.done:
            raise ShapeError(f"{where}: a segment after the final one")
        if seg.final != last:
            raise PublicValuesError(
                f"{where}: " + ("the last segment does not exit (the run is truncated)"
                                if last else "an exiting segment before the last one"),
                "rv32_segregs")
        if not seg.final and seg.cycles != self.S:
            raise PublicValuesError(f"{where}: {seg.cycles:,} cycles, a non-final segment "
                                    f"runs exactly {self.S:,}", "rv32_segregs")
        if not 1 <= seg.cycles <= self.S:
            raise PublicValuesError(f"{where}: {seg.cycles:,} cycles outside [1, {self.S:,}]",
                                    "rv32_segregs")
        if self.cycles + seg.cycles > self.max_cycles:
            raise PublicValuesError(f"{where}: the run passes max_cycles {self.max_cycles:,}",
                                    "rv32_segregs")
        wa = np.asarray(seg.wa, dtype=np.int64)
        if wa.size and (wa.min() < 0 or wa.max() >= 1 << 30 or np.any(np.diff(wa) <= 0)):
            raise PublicValuesError(f"{where}: the touched words are not distinct ascending "
                                    "word addresses below 2^30", "rv32_pagemem")
        r = np.asarray(seg.regs_out, dtype=np.int64)
        if r.shape != (NUM_REGS,) or r.min() < 0 or r[:32].max() >= 1 << 32 \
                or r[SINK_ROW] != 0 or r[0] != 0:
            raise PublicValuesError(f"{where}: malformed end registers", "rv32_segregs")
        if not (self.regs[CUR_IN] <= r[CUR_IN] <= len(self.input)) \
                or r[CUR_OUT] - self.regs[CUR_OUT] != len(seg.output) \
                or r[CUR_ERR] < self.regs[CUR_ERR] or max(r[CUR_OUT], r[CUR_ERR]) > \
                abi.MAX_OUTPUT_BYTES:
            raise PublicValuesError(f"{where}: the cursors do not follow the previous "
                                    "segment's", "rv32_segregs")
        return Segment(j, self.cycles, seg.cycles, self.pc, self.regs.copy(), seg.pc_out, r, wa,
                       self._words(wa), np.asarray(seg.v_out, dtype=np.int64), seg.output,
                       seg.exit_code)

    def advance(self, seg: Segment) -> None:
        wa = np.asarray(seg.wa, np.int64)
        if wa.size:                      # the segment's out-values replace the older ones
            keep = ~np.isin(self.mem_wa, wa, assume_unique=True)
            keys = np.concatenate([self.mem_wa[keep], wa])
            vals = np.concatenate([self.mem_v[keep], np.asarray(seg.v_out, np.int64)])
            order = np.argsort(keys, kind="stable")
            self.mem_wa, self.mem_v = keys[order], vals[order]
        self.regs = np.asarray(seg.regs_out, dtype=np.int64).copy()
        self.pc = seg.pc_out if not seg.final else self.pc
        self.cycles += seg.cycles
        self.output += seg.output
        self.done = seg.final


__all__ = ["run_segments", "checkpoint", "replay", "ReplayMismatch", "Segment", "segment_airs", "segment_public_values", "Chain",
           "check_segment_cycles", "DEFAULT_SEGMENT_CYCLES", "entry_registers",
           "MIN_LOG_SEGMENT", "MAX_LOG_SEGMENT"]
