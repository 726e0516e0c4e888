"""Cluster mode (prover/cluster.py) on a local two-node Ray cluster: a head and a second
node, each a separate raylet with one CPU (ray.cluster_utils.Cluster), so the two workers
run in different processes on different Ray nodes.

WEAK PARAMETERS: every proof here uses 8 queries and almost no grinding (CFG), so it is
verified with min_security_bits=0 -- these tests check byte identity, faults and errors,
not security.  Each proof is also compared byte for byte with Prover.prove_block on one
machine (the independent reference)."""
import os
import sys

import pytest

ray = pytest.importorskip("ray")

from steadfast.prover.api import Prover, ProverConfig, UnprovableBlock, verify  # noqa: E402
from steadfast.prover.cluster import ClusterProver  # noqa: E402

from vm_blocks import empty_block, one_tx_block  # noqa: E402

CFG = ProverConfig(backend="host", num_queries=8, pow_bits=2, logup_pow_bits=0,
                   deep_pow_bits=0, commit_pow_bits=0)
# the workers kill their own process (SIGKILL) once at each of these pieces
FAULTS = "kill@block:0,kill@main_commit:3,kill@prove_table:1"


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1,
                                                      "object_store_memory": 128 << 20})
    c.add_node(num_cpus=1, object_store_memory=128 << 20)
    ray.init(address=c.address, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def reference():
    """The one-machine proof of one_tx_block (the bytes every cluster proof must match)."""
    return Prover(CFG).prove_block(one_tx_block()).to_bytes()


@pytest.fixture(scope="module")
def cp(cluster):
    with ClusterProver(config=CFG, workers=2, fault=FAULTS) as p:
        yield p


@pytest.mark.timeout(300)
def test_cli_cluster(cluster, tmp_path, capsys):
    """(First: it needs the cluster's two CPUs, which the ``cp`` fixture's workers hold.)
    ``prove --cluster BLOCK BLOCK`` (joins this process's Ray: ADDRESS omitted, the
    first block is not taken for one), progress per block, and exit 1 naming an
    unprovable block.  (The CLI has no switch for the grinding parameters: its proofs
    grind at the defaults, so they are verified rather than compared with CFG's bytes.)"""
    import json
    from steadfast.prover.cli import main_prove
    bad = one_tx_block().to_json()
    bad["transactions"][0]["outputs"] = [6]
    paths = []
    for name, obj in (("a", one_tx_block().to_json()), ("b", empty_block().to_json()),
                      ("bad", bad)):
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(obj))
        paths.append(str(p))
    weak = ["--queries", "8", "--pow-bits", "2", "--backend", "host", "--workers", "2"]
    assert main_prove(["--cluster", paths[0], paths[1], *weak]) == 0
    verify(str(tmp_path / "a.proof"), block=one_tx_block(), min_security_bits=0)  # weak
    verify(str(tmp_path / "b.proof"), block=empty_block(), min_security_bits=0)   # weak
    err = capsys.readouterr().err
    assert "a.json: wrote" in err and "b.json: wrote" in err
    assert main_prove(["--cluster", paths[2], *weak]) == 1
    assert "bad.json: block cannot be proven" in capsys.readouterr().err
    assert main_prove(paths[:2]) == 2           # several blocks without --cluster


@pytest.mark.timeout(120)
def test_worker_out_of_restarts_is_an_error_not_a_hang(cluster):
    """max_restarts=0: the killed worker stays dead, the piece fails with ClusterError
    at once (before the cp fixture takes the cluster's CPUs)."""
    from steadfast.prover.cluster import ClusterError
    with ClusterProver(config=CFG, workers=1, max_restarts=0, fault="kill@block:0") as p:
        with pytest.raises(ClusterError, match="cannot be restarted"):
            list(p.prove_many([one_tx_block()], timeout=90))
        assert p.worker_deaths == 1


@pytest.mark.timeout(300)
def test_many_blocks_worker_killed(cp, reference):
    """Two blocks on two workers; the worker proving block 0 is killed mid-proof: the
    block is re-run on the restarted worker, same bytes, the re-run counted."""
    assert len(set(cp.pids)) == 2
    assert len(ray.nodes()) == 2
    blocks = [one_tx_block(), empty_block()]
    got = dict(cp.prove_many(blocks, timeout=240))
    assert sorted(got) == [0, 1]
    assert got[0].to_bytes() == reference
    for i, blk in enumerate(blocks):
        verify(got[i], block=blk, min_security_bits=0)       # weak parameters (CFG)
    c0, c1 = (got[i].stats.counters["cluster"] for i in (0, 1))
    assert (c0["retries"], c1["retries"]) == (1, 0)
    assert c0["workers"] == 2 and c0["bytes_through_object_store"] > len(reference)
    assert got[0].stats.phases["prove"] > 0


@pytest.mark.timeout(300)
def test_sharded_tables_same_bytes_despite_kills(cp, reference):
    """One block, its five tables over two workers; a worker dies in a main commit (R1)
    and another in a table's chain (after the fork, losing its committed state): the
    pieces are re-run, the lost state recomputed, and the bytes equal one machine's."""
    from steadfast.prover.timeline import Timeline
    cp.timeline = Timeline()
    bp = cp.prove_sharded(one_tx_block(), timeout=240)
    assert bp.to_bytes() == reference
    verify(bp, block=one_tx_block(), min_security_bits=0)    # weak parameters (CFG)
    c = bp.stats.counters["cluster"]
    # two deaths; every piece queued on a dying worker is re-run (>= 2), and the worker
    # that died after R1 recomputes the main commit of table 1 (its state was lost)
    assert c["mode"] == "sharded" and c["worker_deaths"] == 2
    assert c["retries"] >= 2 and c["recomputed"] >= 1
    ev = cp.timeline.to_json()["traceEvents"]
    reruns = [e for e in ev if e["name"] == "cluster:rerun"]
    assert len(reruns) == c["retries"]
    done = [e["args"]["piece"] for e in ev if e["ph"] == "X"]
    assert sorted(done) == sorted([str(i) for i in range(5)] * 2)   # each piece once
    cp.timeline = None
    assert c["bytes_through_object_store"] > sum(t.rows * t.main_width * 4
                                                for t in bp.stats.tables)
    assert bp.stats.counters["self_check"]["checked"] == 1
    assert [t.name for t in bp.stats.tables] == ["cpu", "program", "memory", "range", "poseidon2"]


@pytest.mark.timeout(120)
def test_unprovable_block_fails_cleanly(cp):
    """False claims: the worker's UnprovableBlock comes back as itself (blocks mode) and
    the sharded mode refuses before any table is sent."""
    obj = one_tx_block().to_json()
    obj["transactions"][0]["outputs"] = [6]
    with pytest.raises(UnprovableBlock) as ei:
        list(cp.prove_many([obj], timeout=60))
    assert (ei.value.table, ei.value.constraint) == ("cpu", "output_digest[0]")
    assert ei.value.details == ["$.transactions[0].outputs[0]: claims 6, execution wrote 5"]
    with pytest.raises(UnprovableBlock):
        cp.submit(obj).result(timeout=60)
    with pytest.raises(UnprovableBlock):
        cp.prove_sharded(obj, timeout=60)


