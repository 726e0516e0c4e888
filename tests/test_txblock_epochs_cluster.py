"""A long block's parts on Ray workers (prover/cluster/epochs.py), on a local Ray
instance: group parts as sub-blocks and a long transaction's segments spread over the
workers, the file byte-identical to one machine's and verified whole; a block within one
epoch is one piece as before; a false claim is refused before any proving.

WEAK PARAMETERS (6 queries, 1 bit of grinding), verified with min_security_bits=0: these
tests check byte identity and plumbing, not security."""
from __future__ import annotations

import os

import pytest

ray = pytest.importorskip("ray")

from steadfast.prover.api import Prover, verify  # noqa: E402
from steadfast.prover.blocks.epochs import BlockEpochsProof  # noqa: E402
from steadfast.prover.blocks.proof import TxBlockProof  # noqa: E402
from steadfast.prover.cluster import ClusterProver  # noqa: E402
from steadfast.prover.common.errors import UnprovableBlock  # noqa: E402

import txblocks  # noqa: E402
from test_txblock_epochs import CFG, _block  # noqa: E402


@pytest.fixture(scope="module")
def ray_cpus():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False,
             object_store_memory=256 << 20)
    yield
    ray.shutdown()


@pytest.mark.timeout(900)
def test_a_long_block_across_workers_is_one_machines_bytes(ray_cpus):
    blk = _block()
    reference = Prover(CFG).prove_block(blk)
    seen = []
    with ClusterProver(config=CFG, workers=2) as cp:
        got = cp.prove_block(blk, progress=lambda *a: seen.append(a[:2]))
        assert isinstance(got, BlockEpochsProof)
        assert got.to_bytes() == reference.to_bytes()
        assert got.state_out == reference.state_out
        c = got.stats.counters["cluster"]
        assert c["mode"] == "block-epochs" and c["parts"] == 4 and c["retries"] == 0
        assert c["segments"] == got.stats.counters["parts"]["segments"] == 9
        assert sorted(d for d, _ in seen) == [1, 2, 3, 4] and {t for _, t in seen} == {4}
        short = txblocks.block(txblocks.tx("hello"))
        one = cp.prove_block(short)
        assert isinstance(one, TxBlockProof)
        assert one.to_bytes() == Prover(CFG).prove_block(short).to_bytes()
        with pytest.raises(UnprovableBlock, match="transaction 1 .*claims exit code 7"):
            cp.prove_block(_block(t1=(7, None)))
        # many programs, one of them long: its segments proved whole on one worker
        from test_rv32_segments import INPUT, program
        from steadfast.prover.programs.segment_proof import SegmentedProof
        many = dict(cp.prove_programs([(program(250), INPUT, 1 << 20)]))
        assert isinstance(many[0], SegmentedProof)
        assert many[0].to_bytes() == Prover(CFG).prove_program(
            program(250), INPUT, max_cycles=1 << 20).to_bytes()
    assert verify(got.to_bytes(), blk, min_security_bits=0).exit_codes == got.exit_codes


@pytest.mark.timeout(900)
def test_cli_cluster_block_in_epochs(ray_cpus, tmp_path, capsys):
    """``prove --cluster BLOCK.json --segment-cycles 1024`` writes the one machine's STBE
    file with a line per part; ``verify`` accepts it."""
    from steadfast.prover.cli import main_prove, main_verify
    from tests.cli_helpers import run, write
    blk = _block()
    path = write(tmp_path, "blk.json", blk.to_json())
    out = tmp_path / "blk.proof"
    fast = ["--queries", "6", "--pow-bits", "1", "--backend", "host"]
    code, _, se = run(main_prove, ["--cluster", path, "--segment-cycles", 1024, "--workers",
                                   2, "-o", out] + fast, capsys)
    assert code == 0, se
    assert "part 4/4 proved" in se and "4 parts, 9 segments" in se
    local = tmp_path / "local.proof"
    code, _, _ = run(main_prove, [path, "--segment-cycles", 1024, "-o", local, "-q"] + fast,
                     capsys)
    assert code == 0 and out.read_bytes() == local.read_bytes()
    code, so, _ = run(main_verify, [out, "--block", path, "--min-security-bits", 0], capsys)
    assert code == 0 and "verified in 4 parts" in so
