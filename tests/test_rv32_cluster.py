"""Cluster mode (prover/cluster/__init__.py) for RV32IM program proofs, on a local Ray instance with
four CPUs: many programs across two workers and one program's tables sharded over them,
byte-identical to Prover.prove_program on one machine; ``prove --cluster PROGRAM.elf``
and ``--shard-tables`` from the command line.

WEAK PARAMETERS: 6 queries (CFG), verified with min_security_bits=0 -- these tests check
byte identity and plumbing, not security."""
import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from steadfast.prover.api import (Prover, ProverConfig, UnprovableProgram,  # noqa: E402
                                  verify)
from steadfast.prover.cluster import ClusterProver  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HELLO = ROOT / "examples" / "hello.elf"
HELLO_IN = (ROOT / "examples" / "hello.in").read_bytes()
SORT = ROOT / "guests" / "bin" / "sort.elf"
SORT_IN = (ROOT / "guests" / "inputs" / "sort" / "reversed.in").read_bytes()
# the CLI's grinding (it has no switch for it) so that its bytes are these too
CFG = ProverConfig(backend="host", num_queries=6, pow_bits=1)


@pytest.fixture(scope="module")
def ray_cpus():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # address="local": a new instance, never a stale /tmp/ray/ray_current_cluster left by
    # an earlier cluster (tests/test_cluster.py's, or one killed mid-run)
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False,
             object_store_memory=256 << 20)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def reference():
    """The one-machine proofs every cluster proof must equal."""
    p = Prover(CFG)
    return {"hello": p.prove_program(HELLO, HELLO_IN).to_bytes(),
            "sort": p.prove_program(SORT, SORT_IN).to_bytes()}


@pytest.mark.timeout(600)
def test_programs_across_workers_and_sharded(ray_cpus, reference):
    """prove_programs spreads two programs over the workers; prove_program_sharded proves
    one program's 18 tables on them; submit_program is a future; every proof is the
    one-machine bytes; an execution failure comes back as UnprovableProgram with its pc
    and cycle."""
    with ClusterProver(config=CFG, workers=2) as cp:
        got = dict(cp.prove_programs([(HELLO, HELLO_IN), (SORT, SORT_IN)]))
        assert got[0].to_bytes() == reference["hello"]
        assert got[1].to_bytes() == reference["sort"]
        c = got[1].stats.counters["cluster"]
        assert c["mode"] == "programs" and c["workers"] == 2 and c["retries"] == 0
        assert {got[0].stats.counters["cluster"]["worker"], c["worker"]} <= {0, 1}
        sharded = cp.prove_program_sharded(HELLO, HELLO_IN)
        assert sharded.to_bytes() == reference["hello"]
        s = sharded.stats.counters["cluster"]
        assert s["mode"] == "sharded" and s["recomputed"] == 0 and s["retries"] == 0
        assert s["bytes_through_object_store"] > 0 and len(sharded.stats.tables) == 18
        res = verify(sharded, elf=HELLO, input=HELLO_IN, min_security_bits=0)
        assert res.exit_code == 0 and res.output.startswith(b"hello from rv32im\n")
        fut = cp.submit_program(HELLO, HELLO_IN, max_cycles=100)
        with pytest.raises(UnprovableProgram) as ei:
            fut.result(timeout=300)
        assert ei.value.kind == "cycles" and ei.value.cycle == 100 and ei.value.pc > 0


@pytest.mark.timeout(600)
def test_cli_cluster_programs(ray_cpus, reference, tmp_path, capsys):
    """``prove --cluster PROGRAM.elf --input FILE`` (joins this process's Ray) and
    ``--shard-tables`` write the one-machine bytes; a malformed ELF and a mix of blocks
    and programs are exit 2."""
    from steadfast.prover.cli import main_prove
    elf = tmp_path / "hello.elf"
    elf.write_bytes(HELLO.read_bytes())
    inp = tmp_path / "hello.in"
    inp.write_bytes(HELLO_IN)
    weak = ["--queries", "6", "--pow-bits", "1", "--backend", "host", "--workers", "2",
            "--input", str(inp)]
    assert main_prove(["--cluster", str(elf), *weak]) == 0
    assert (tmp_path / "hello.proof").read_bytes() == reference["hello"]
    assert "hello.elf: wrote" in capsys.readouterr().err
    out = tmp_path / "s.proof"
    assert main_prove(["--cluster", str(elf), "--shard-tables", "-o", str(out), *weak]) == 0
    assert out.read_bytes() == reference["hello"]
    bad = tmp_path / "bad.elf"
    bad.write_bytes(b"\x7fELF" + b"\x00" * 8)
    assert main_prove(["--cluster", str(bad), *weak]) == 2
    assert "not a program the RV32IM machine runs" in capsys.readouterr().err
    assert main_prove(["--cluster", str(elf), str(ROOT / "examples" / "block.json"),
                       *weak]) == 2
    assert "not both" in capsys.readouterr().err


@pytest.mark.timeout(600)
def test_split_program_sharded(ray_cpus, monkeypatch):
    """A program whose chips split (docs/rv32.md "Split chips"; the thresholds lowered in
    this process, where the sharded proof builds its tables) proves sharded over the
    workers -- the pieces' AIRs rebuilt there from the spec -- in the one-machine bytes."""
    from steadfast.rv32 import tables as T
    monkeypatch.setattr(T, "SPLIT_MIN_ROWS", 16)
    monkeypatch.setattr(T, "SPLIT_MIN_SAVING", 0)
    elf = ROOT / "guests" / "bin" / "sha256.elf"
    data = bytes(range(256)) * 2
    ref = Prover(CFG).prove_program(elf, data)
    assert len(ref.stats.tables) > 18
    with ClusterProver(config=CFG, workers=2) as cp:
        sharded = cp.prove_program_sharded(elf, data)
    assert sharded.to_bytes() == ref.to_bytes()
    res = verify(sharded, elf=elf, input=data, min_security_bits=0)
    assert res.exit_code == 0
