"""Proving segments from checkpoints (prover/programs/segment_prover.py): the re-run from a
checkpoint is the cut's own run, record for record; the defaults (segments of 2^20,
max_cycles 2^30) keep a short program's one proof; the config's segment size; execute-only
reports segments; the progress display counts segments; on the device pipeline (emu, sim)
a fault in one segment recovers there without touching the others, same bytes.

WEAK PARAMETERS (6 queries, 1 bit of grinding): these tests check the cut, the bytes and
the plumbing, not security; they verify with min_security_bits=0."""
from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest

from steadfast import rv32
from steadfast.prover.api import Prover, ProverConfig
from steadfast.prover.cli.display import Board, LineProgress
from steadfast.prover.common.errors import ConfigError
from steadfast.prover.programs.proof import ProgramProof
from steadfast.prover.programs.verify import verify_program
from steadfast.prover.programs.segment_proof import SegmentedProof
from steadfast.prover.programs.segment_prover import SegmentFeed
from steadfast.rv32.record import CYCLE_FIELDS
from steadfast.rv32.segments import ReplayMismatch, checkpoint, replay, run_segments
from steadfast.verifier.errors import PublicValuesError

from test_rv32_segments import FAST, INPUT, SEG, program


def test_replay_is_the_cut_record_for_record():
    """Every segment re-run from its checkpoint has the cut's record (every per-cycle
    column, every ECALL and its memory events), boundary and touched words."""
    prog = program(600)
    n = 0
    for seg in run_segments(prog, INPUT, 1 << 20, SEG):
        ck = checkpoint(seg)
        assert ck.execution is None
        again = replay(prog, INPUT, 1 << 20, SEG, ck)
        a, b = seg.execution.record, again.execution.record
        for name in CYCLE_FIELDS + ("ecall_cycle", "ecall_args", "ecall_mem_event",
                                    "ecall_mem_word_addr", "ecall_mem_before",
                                    "ecall_mem_after", "ecall_mem_is_write"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), (seg.index, name)
        assert again.output == seg.output and np.array_equal(again.v_in, seg.v_in)
        n += 1
    assert n > 3


def test_replay_refuses_a_checkpoint_that_does_not_end_where_the_cut_did():
    prog = program(600)
    segs = [checkpoint(s) for s in run_segments(prog, INPUT, 1 << 20, SEG)]
    ck = segs[1]
    regs = ck.regs_in.copy()
    regs[9] += 1                                   # s1: the loop bound
    with pytest.raises(ReplayMismatch, match="segment 1"):
        replay(prog, INPUT, 1 << 20, SEG, dataclasses.replace(ck, regs_in=regs))
    with pytest.raises(ReplayMismatch):
        replay(prog, INPUT, 1 << 20, SEG, dataclasses.replace(ck, pc_in=ck.pc_in + 4))


def test_feed_knows_the_total_early_and_holds_checkpoints_not_traces():
    prog = program(900)
    feed = SegmentFeed(prog, INPUT, 1 << 20, SEG)
    feed.fill()
    assert feed.total == feed.cut > 3 and feed.cycles == rv32.execute(prog, INPUT).cycles
    got = list(feed)
    assert [c.index for c in got] == list(range(feed.total))
    assert all(c.execution is None for c in got)
    small = SegmentFeed(prog, INPUT, 1 << 20, SEG, ahead_bytes=1)
    small.fill()
    assert small.total is None and small.cut == 1          # one at a time when bounded
    assert len(list(small)) == feed.total and small.total == feed.total


def test_defaults_keep_a_short_program_one_proof():
    """Default segments (2^20) and max_cycles (2^30): a short run is the one proof made
    without segments at max_cycles 2^24, byte for byte; it verifies under any limit of at
    least 2^24 and not under a smaller one."""
    prog = program(20)
    p = Prover(FAST)
    a = p.prove_program(prog, INPUT)
    b = p.prove_program(prog, INPUT, max_cycles=1 << 24, segment_cycles=None)
    c = p.prove_program(prog, INPUT, max_cycles=(1 << 32) - 1, segment_cycles=1 << 22)
    assert isinstance(a, ProgramProof) and a.to_bytes() == b.to_bytes() == c.to_bytes()
    assert a.max_cycles == 1 << 24
    for limit in (None, 1 << 24, 1 << 30):
        assert verify_program(a.to_bytes(), prog, INPUT, max_cycles=limit,
                              min_security_bits=0).max_cycles == 1 << 24
    with pytest.raises(PublicValuesError, match="max_cycles"):
        verify_program(a.to_bytes(), prog, INPUT, max_cycles=1 << 22, min_security_bits=0)


def test_config_segment_size():
    """ProverConfig.segment_cycles: validated; a long run under it is segmented with the
    defaults (max_cycles 2^30), the same bytes as asked for explicitly; the progress
    display is told of every segment (done / total)."""
    for bad in (1000, 1 << 9, 1 << 23):
        with pytest.raises(ConfigError, match="segment_cycles"):
            ProverConfig(segment_cycles=bad)
    prog = program(900)
    cfg = dataclasses.replace(FAST, segment_cycles=SEG)
    seen = []

    class Progress:
        def __call__(self, *a):
            pass

        def segments(self, done, total, cut, seconds):
            seen.append((done, total))

    a = Prover(cfg, progress=Progress()).prove_program(prog, INPUT)
    b = Prover(FAST).prove_program(prog, INPUT, max_cycles=1 << 30, segment_cycles=SEG)
    assert isinstance(a, SegmentedProof) and a.to_bytes() == b.to_bytes()
    n = len(a.segments)
    assert a.max_cycles == 1 << 30 and n > 3 and len(a.segment_seconds) == n
    assert seen == [(k, n) for k in range(n + 1)]
    assert a.stats.counters["segments"] == {"proved": n, "retried": 0, "downgrades": [0] * n}
    r = verify_program(a.to_bytes(), prog, INPUT, min_security_bits=0)
    assert r.segments == n and r.max_cycles == 1 << 30


def test_execute_only_reports_segments():
    prog = program(900)
    ex = rv32.execute(prog, INPUT)
    rep = Prover(FAST).execute_program(prog, INPUT, segment_cycles=SEG)
    assert rep.cycles == ex.cycles and rep.output == ex.output
    assert rep.exit_code == ex.exit_code and sum(rep.segments) == ex.cycles
    assert all(c == SEG for c in rep.segments[:-1]) and rep.segment_cycles == SEG
    j = rep.to_json()
    assert j["segments"] == len(rep.segments) and j["segment_cycle_counts"] == list(rep.segments)
    assert j["tables_of"] == "segment 0" and "segments of 1,024 cycles" in rep.summary()
    short = Prover(FAST).execute_program(program(20), INPUT).to_json()
    assert short["segments"] == 1 and short["segment_cycle_counts"] == [short["cycles"]]


def test_display_counts_segments():
    """The plain display writes one line per proved segment with done / total and the
    time left; the board's estimate charges the segments left at the pace so far."""
    t = [0.0]
    out = io.StringIO()
    lp = LineProgress(out, tables=2, clock=lambda: t[0])
    lp.segments(0, None, 3, 0.0)
    t[0] = 10.0
    lp.segments(1, 4, 4, 10.0)
    t[0] = 20.0
    lp.segments(2, 4, 4, 10.0)
    lines = out.getvalue().splitlines()
    assert "segment 1/4 proved" in lines[0] and "~30s left" in lines[0]
    assert "segment 2/4 proved" in lines[1] and "~20s left" in lines[1]
    b = Board(2, clock=lambda: t[0])
    b.segment(0, None, 5)
    assert b.time_left(0.0) is None and "segment 1/>=5" in b.overall(0.0)


@pytest.mark.parametrize("backend", ["emu", "sim"])
def test_device_fault_in_one_segment_recovers_alone(backend, monkeypatch):
    """On the device pipeline each segment draws its own faults (its index is the proof
    id of PROVER_FAULTS): with out-of-memory at R2 for some tables of some segments, the
    segments that drew one downgrade those tables (counted), the others run clean, and
    the bytes are the host's."""
    prog = program(300)
    host = Prover(FAST).prove_program(prog, INPUT, max_cycles=1 << 20, segment_cycles=SEG)
    monkeypatch.setenv("PROVER_FAULTS", "oom@r2:0.15,seed=5")
    cfg = dataclasses.replace(FAST, backend=backend)
    if backend == "sim":
        cfg = dataclasses.replace(cfg, vram_budget=4096)    # every table recovers on the host
    dev = Prover(cfg).prove_program(prog, INPUT, max_cycles=1 << 20, segment_cycles=SEG)
    assert dev.to_bytes() == host.to_bytes()
    per = dev.stats.counters["segments"]["downgrades"]
    assert len(per) == len(dev.segments)
    if backend == "emu":
        assert any(per) and not all(per), per
    else:
        assert all(per), per
