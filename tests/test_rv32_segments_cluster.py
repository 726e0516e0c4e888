"""A long program's segments on Ray workers (prover/cluster/segments.py), on a local Ray
instance: byte-identical to one machine; a worker killed mid-segment costs that segment a
re-run and nothing else; a segment failing its self-check is re-run alone; the counters
say how many and why; ``prove --cluster PROGRAM.elf --segment-cycles N`` from the command
line.

WEAK PARAMETERS (6 queries, 1 bit of grinding), verified with min_security_bits=0: these
tests check byte identity and plumbing, not security."""
from __future__ import annotations

import os

import pytest

ray = pytest.importorskip("ray")

from steadfast.prover.api import Prover  # noqa: E402
from steadfast.prover.cluster import ClusterProver  # noqa: E402
from steadfast.prover.programs.verify import verify_program  # noqa: E402
from steadfast.prover.programs.segment_proof import SegmentedProof  # noqa: E402

from test_rv32_segments import FAST, INPUT, SEG, program  # noqa: E402

PROG = program(250)


@pytest.fixture(scope="module")
def ray_cpus():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False,
             object_store_memory=256 << 20)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def reference():
    return Prover(FAST).prove_program(PROG, INPUT, max_cycles=1 << 20, segment_cycles=SEG)


@pytest.mark.timeout(900)
def test_segments_across_workers_same_bytes_despite_a_kill_and_a_self_check(ray_cpus,
                                                                            reference):
    """Two workers prove the segments (both take some); the bytes are one machine's.
    With worker 0 killed the first time it reaches segment 1 and segment 2 failing its
    self-check once, each of those two segments is re-run once, no other segment is, and
    the bytes do not change."""
    n = len(reference.segments)
    assert n >= 3
    seen = []
    with ClusterProver(config=FAST, workers=2) as cp:
        got = cp.prove_program_segmented(PROG, INPUT, 1 << 20, SEG,
                                         progress=lambda *a: seen.append(a[:2]))
        assert isinstance(got, SegmentedProof) and got.to_bytes() == reference.to_bytes()
        c = got.stats.counters["cluster"]
        assert c["mode"] == "segments" and c["segments"] == n and c["retries"] == 0
        assert c["segment_retries"] == {"worker_died": 0, "self_check": 0}
        assert sum(c["segments_per_worker"]) == n and min(c["segments_per_worker"]) > 0
        assert c["device_downgrades"] == 0 and c["worker_deaths"] == 0
        assert [d for d, _ in seen] == list(range(1, n + 1)) and seen[-1][1] == n
        short = cp.prove_program_segmented(program(20), INPUT, 1 << 20, SEG)
        assert short.to_bytes() == Prover(FAST).prove_program(
            program(20), INPUT, max_cycles=1 << 20, segment_cycles=SEG).to_bytes()
    # the fault terms survive a worker's restart (they are its constructor's)
    with ClusterProver(config=FAST, workers=2,
                       fault="kill@segment:1,selfcheck@segment:2") as cp:
        again = cp.prove_program_segmented(PROG, INPUT, 1 << 20, SEG)
        assert again.to_bytes() == reference.to_bytes()
        c = again.stats.counters["cluster"]
        assert c["segment_retries"] == {"worker_died": 1, "self_check": 1}, c
        assert c["retries"] == 2 and c["worker_deaths"] == 1
        assert again.stats.counters["segments"]["retried"] == 2
        r = verify_program(again.to_bytes(), PROG, INPUT, min_security_bits=0)
        assert r.segments == n


@pytest.mark.timeout(900)
def test_cli_cluster_segments(ray_cpus, tmp_path, capsys):
    """``prove --cluster PROGRAM.elf --input F --segment-cycles 1024`` writes the one
    machine's file and a line per segment; ``verify`` accepts it and names the
    segments."""
    from steadfast.prover.api import ProverConfig
    from steadfast.prover.cli import main_prove, main_verify
    from rv32_ref import elf_bytes
    elf, inp = tmp_path / "p.elf", tmp_path / "p.in"
    elf.write_bytes(elf_bytes(PROG))
    inp.write_bytes(INPUT)
    ref = Prover(ProverConfig(backend="host", num_queries=6, pow_bits=1)).prove_program(
        elf, INPUT, max_cycles=1 << 20, segment_cycles=SEG)
    n = len(ref.segments)
    out = tmp_path / "p.proof"
    code = main_prove(["--cluster", str(elf), "--input", str(inp), "--segment-cycles", "1024",
                       "--max-cycles", str(1 << 20), "--queries", "6", "--pow-bits", "1",
                       "--backend", "host", "-o", str(out), "--workers", "2"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"segment {n}/{n} proved" in err, err
    assert f"{n} segments, re-run worker_died 0, self_check 0" in err, err
    assert out.read_bytes() == ref.to_bytes()
    code = main_verify([str(out), "--elf", str(elf), "--input", str(inp),
                        "--min-security-bits", "0"])
    cap = capsys.readouterr()
    assert code == 0 and "segments" in cap.out, cap
