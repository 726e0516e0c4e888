"""Cluster mode (prover/cluster/__init__.py) on a local two-node Ray cluster: a head and a second
node, each a separate raylet with one CPU (ray.cluster_utils.Cluster), so the two workers
run in different processes on different Ray nodes.  Faults: a worker process killed
mid-proof (blocks and sharded), an injected OOM that downgrades inside device (emu)
workers, the second node removed mid-proof, a worker that cannot produce a valid proof,
a block that cannot be proven; every test carries a timeout.

The blocks are blocks of RISC-V transactions (block format 2, tests/txblocks.py): the one
claimed hello transaction (18 tables: its 16 under tx0/, the shared rv32_bytes and
poseidon2) and the empty block (the 2 shared tables).

WEAK PARAMETERS: every proof here uses 8 queries and almost no grinding (CFG), so it is
verified with min_security_bits=0 -- these tests check byte identity, faults and errors,
not security.  Each proof is also compared byte for byte with Prover.prove_block on one
machine (the independent reference)."""
import dataclasses
import os
import threading
import time

import pytest

ray = pytest.importorskip("ray")

from steadfast.prover.api import (Prover, ProofSelfCheckFailure, ProverConfig,  # noqa: E402
                                  UnprovableBlock, verify)
from steadfast.prover.cluster import ClusterProver  # noqa: E402
from steadfast.prover.common.timeline import Timeline  # noqa: E402

import txblocks  # noqa: E402
from steadfast.prover.blocks.proof import as_txblock  # noqa: E402

CFG = ProverConfig(backend="host", num_queries=8, pow_bits=2, logup_pow_bits=0,
                   deep_pow_bits=0, commit_pow_bits=0)
EMU = dataclasses.replace(CFG, backend="emu")
# txblocks.one_tx_block()'s tables, in proof order (tx0/'s 16, then the shared two)
NAMES = [f"tx0/rv32_{n}" for n in ("program", "memory", "registers", "io", "alu", "bitwise",
                                   "shift", "branch", "load", "store", "jump", "mul", "div",
                                   "ecall", "ioword", "p2call")] + ["rv32_bytes", "poseidon2"]
N = len(NAMES)
TABLES = set(NAMES)
# the workers kill their own process (SIGKILL) once at each of these pieces (sharded:
# R1 of table 3, the R3/DEEP piece of table 1 (after both mixed-tree barriers), the
# openings of table 2 -- its worker holds the trees of table 2 and of its other tables
# when it dies, after the join's FRI)
FAULTS = "kill@block:0,kill@main_commit:3,kill@prove_table:1,kill@open_table:2"


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
    """The one-machine proof of txblocks.one_tx_block (the bytes every cluster proof must
    match)."""
    proof = Prover(CFG).prove_block(txblocks.one_tx_block())
    assert [t.name for t in proof.stats.tables] == NAMES
    return proof.to_bytes()


@pytest.fixture(scope="module")
def cp(cluster):
    with ClusterProver(config=CFG, workers=2, fault=FAULTS) as p:
        yield p


def test_join_over_tree_refs_is_the_one_machine_proof():
    """The coordinator's join without Ray: every table's chain on host stages
    (rounds.prove_tables: the three passes and the mixed trees), its trees replaced by
    _TreeRef proxies (caps only), the rows from an opener standing in for the workers ->
    the bytes of prove() on one machine; every table's rows asked for once, all together,
    once the FRI has drawn the queries (no transcript tap: the join calls the FRI and the
    openings halves itself); a request the prefetch did not cover asks for that table
    alone (rows, no nodes: format 6's nodes are the mixed trees'); a cap of another
    height is refused; the chains' records are not changed by the join.  The mixed main
    tree built from leaf digests as the coordinator does (cluster_join.mixed_tree) is the
    one machine's."""
    import numpy as np
    from steadfast.prover.cluster.join import _join, _JoinStages, _TreeRef, mixed_tree
    from steadfast.prover.core.prove import prepare, prove
    from steadfast.prover.core.rounds import prove_tables, r1_challenges, r1_main, take_quotients
    from steadfast.prover.common.spans import Spans
    from steadfast.prover.core.stages import HostStages
    _, bt = Prover(CFG)._build_txblock(as_txblock(txblocks.one_tx_block()), {})
    params = CFG.params()
    args = (list(bt.traces), list(bt.airs), bt.table_public_values, params)
    ref = prove(*args, check=False)
    st = prepare(*args, check=False)
    hs, sp = HostStages(), Spans()
    r1 = r1_main(st, hs, sp)
    lc = params.log_cap
    leaves = [hs.leaf_digests(com) for com in r1.main]     # rehashed: the tree took them
    assert np.array_equal(mixed_tree(st, leaves).cap(lc), r1.tree.cap(lc))
    ch = r1_challenges(st, r1, sp, hs.permute)
    deeps, mixed = prove_tables(st, r1, ch, hs, sp)
    trees = [d.trees for d in deeps]
    proxied = [dataclasses.replace(d, trees={m: None if t is None else _TreeRef(d.index, m, lc,
                                                                                hs.cap(t, lc))
                                             for m, t in d.trees.items()}) for d in deeps]
    calls = []

    def opener(wanted):
        calls.append(sorted(wanted))
        return {i: (idx, {m: None if t is None else hs.open_batch(t, idx, lc)[0]
                          for m, t in trees[i].items()}) for i, idx in wanted.items()}

    js = _JoinStages(opener)
    given = list(proxied)
    records, dqs = take_quotients(given)
    assert all(a is b and a.dq is not None for a, b in zip(given, proxied))   # untouched
    data = _join(st, ch, r1.transcript, records, dqs, js, sp, mixed)
    assert data == ref
    assert calls == [list(range(len(st.airs)))]
    assert "sample_bits" not in vars(r1.transcript)        # nothing tapped
    other = np.array([0, 1], np.int64)
    rows, nodes = js.open_batch(proxied[1].trees["main"], other, lc)
    assert calls[-1] == [1]
    want_rows, _ = hs.open_batch(trees[1]["main"], other, lc)
    assert np.array_equal(rows, want_rows) and nodes.shape == (0, 8)
    with pytest.raises(ValueError):
        js.cap(proxied[0].trees["main"], lc + 1)


@pytest.mark.timeout(300)
def test_cli_cluster(cluster, tmp_path, capsys):
    """(First: it needs the cluster's two CPUs, which the ``cp`` fixture's workers hold.)
    ``prove --cluster BLOCK BLOCK`` (joins this process's Ray: ADDRESS omitted, the
    first block is not taken for one), progress per block, and exit 1 naming an
    unprovable block.  (The CLI has no switch for the grinding parameters: its proofs
    grind at the defaults, so they are verified rather than compared with CFG's bytes.)"""
    import json
    from steadfast.prover.cli import main_prove
    bad = txblocks.one_tx_block().to_json()
    bad["transactions"][0]["output"] = "06"
    paths = []
    for name, obj in (("a", txblocks.one_tx_block().to_json()),
                      ("b", txblocks.empty_block().to_json()), ("bad", bad)):
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(obj))
        paths.append(str(p))
    weak = ["--queries", "8", "--pow-bits", "2", "--backend", "host", "--workers", "2"]
    assert main_prove(["--cluster", paths[0], paths[1], *weak]) == 0
    verify(str(tmp_path / "a.proof"), block=paths[0], min_security_bits=0)   # weak
    verify(str(tmp_path / "b.proof"), block=paths[1], min_security_bits=0)   # weak
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
            list(p.prove_many([txblocks.one_tx_block()], timeout=90))
        assert p.worker_deaths == 1


@pytest.mark.timeout(360)
def test_device_workers_downgrade_same_bytes(cluster, reference):
    """Device stages in the workers (emu) and an injected OOM inside them: PROVER_FAULTS
    =oom@r2:1 in the workers' environment only, so every table's R2 declines, retries
    once and downgrades to the host (then oom@r4.open:1: the workers' openings), all N
    of them.  Many-blocks mode (the workers' device pipeline) and sharded mode (per-table
    device stages) both give the bytes of a host proof on one machine; the downgrades
    come back in the stats and on the coordinator's timeline."""
    tl = Timeline()
    with ClusterProver(config=EMU, workers=2, timeline=tl,
                       worker_env={"PROVER_FAULTS": "oom@r2:1"}) as p:
        assert "PROVER_FAULTS" not in os.environ          # the coordinator is untouched
        ((_, bp),) = list(p.prove_many([txblocks.one_tx_block()], timeout=240))
        assert bp.to_bytes() == reference
        c = bp.stats.counters
        assert c["cluster"]["backend"] == "emu" and c["cluster"]["device_downgrades"] == N
        assert c["device"]["recovery"]["r2"]["retries"] == N
        assert c["device"]["recovery"]["r1.main"]["downgrades"] == 0
        sh = p.prove_sharded(txblocks.one_tx_block(), timeout=240)
        assert sh.to_bytes() == reference
        cs = sh.stats.counters["cluster"]
        assert (cs["mode"], cs["backend"], cs["device_downgrades"]) == ("sharded", "emu", N)
        assert cs["device"]["downgraded_tables"] == N and cs["device"]["h2d_bytes"] > 0
        assert cs["device"]["recovery"]["r2"]["retries"] == N
        assert cs["device"]["recovery"]["r1.main"] == {"retries": 0, "downgrades": 0,
                                                       "host_materialisations": 0}
        assert cs["retries"] == 0 and cs["recomputed"] == 0
    ev = tl.to_json()["traceEvents"]
    # each table's trees were opened by the worker whose chain made them
    ran = {(e["name"], e["args"]["piece"]): e["args"]["worker"] for e in ev
           if e.get("cat") == "cluster" and e["ph"] == "X"}
    for i in range(N):
        assert ran[("cluster:open_table", str(i))] == ran[("cluster:prove_table", str(i))]
    down = [e for e in ev if e["name"] == "downgrade"]
    assert len(down) == 2 * N and all(e["pid"] >= 2 for e in down)   # workers' events
    assert {e["args"]["table"] for e in down} == TABLES
    assert {e["args"]["piece"] for e in down} >= {"prove:0", "quotient:0"}   # R2's piece
    names = [e["args"]["name"] for e in ev if e["name"] == "process_name"]
    assert sorted(names) == ["worker 0", "worker 1"]
    # an OOM in the openings, the piece the workers run for the join after its FRI
    # (v3): every table's trees are opened from their host copies, same bytes
    with ClusterProver(config=EMU, workers=2,
                       worker_env={"PROVER_FAULTS": "oom@r4.open:1"}) as p:
        sh = p.prove_sharded(txblocks.one_tx_block(), timeout=240)
    assert sh.to_bytes() == reference
    rec = sh.stats.counters["cluster"]["device"]["recovery"]
    assert rec["r4.open"]["retries"] == N and rec["r4.open"]["downgrades"] == N
    assert rec["r2"] == {"retries": 0, "downgrades": 0, "host_materialisations": 0}


@pytest.mark.timeout(240)
def test_worker_that_cannot_prove_fails_cleanly(cluster, reference, tmp_path):
    """A worker whose device corrupts every FRI layer and every opening
    (PROVER_FAULTS=corrupt@r4.fri:1,corrupt@r4.open:1): by default (issue #26) the
    worker's prover catches it and re-proves on the host, so the coordinator gets the
    one-machine bytes with the recovery counted; with PROVER_ABORT_ON_CORRUPTION=1 (the
    stop kept for bisecting) it never returns a proof: in many-blocks mode its own check
    of the join's final polynomial fails and the coordinator re-raises the worker's
    ProofSelfCheckFailure (with its post-mortem) at once -- not retried, no hang; in
    sharded mode (the FRI runs on the coordinator, the openings on the workers) the
    coordinator's self-check refuses the joined proof."""
    cfg = dataclasses.replace(EMU, postmortem_dir=str(tmp_path))
    faults = "corrupt@r4.fri:1,corrupt@r4.open:1"
    with ClusterProver(config=cfg, workers=2, worker_env={"PROVER_FAULTS": faults}) as p:
        (_, got), = list(p.prove_many([txblocks.one_tx_block()], timeout=180))
        assert got.to_bytes() == reference
        dev = got.stats.counters["device"]
        assert dev["corruptions_recovered"] + got.stats.counters["self_check"]["retried"] >= 1
    with ClusterProver(config=cfg, workers=2,
                       worker_env={"PROVER_FAULTS": faults,
                                   "PROVER_ABORT_ON_CORRUPTION": "1"}) as p:
        t0 = time.monotonic()
        with pytest.raises(ProofSelfCheckFailure) as ei:
            list(p.prove_many([txblocks.one_tx_block()], timeout=180))
        assert ei.value.cluster_piece == 0 and "final polynomial" in str(ei.value)
        assert os.path.exists(ei.value.postmortem)
        with pytest.raises(ProofSelfCheckFailure) as es:
            p.prove_sharded(txblocks.one_tx_block(), timeout=180)
        assert "MerkleError" in str(es.value)
        assert p.retries == 0 and p.worker_deaths == 0
        assert time.monotonic() - t0 < 200


@pytest.mark.timeout(300)
def test_node_leaves_mid_proof(cluster, reference):
    """The second node leaves while its worker holds its tables' trees, after the
    coordinator has their DQs and is inside the join (its worker stalls in the first
    opening): the openings re-run on the head's worker, which recomputes those tables'
    whole chains from the traces in the object store (caps checked); same bytes, each
    piece in the output once, the death, re-runs and recomputations counted.  The node
    is added back for the tests after."""
    second = next(iter(cluster.worker_nodes))
    tl = Timeline()
    try:
        with ClusterProver(config=CFG, workers=2, timeline=tl) as p:
            w = p.nodes.index(second.node_id)
            mine = list(range(w, N, 2))          # table i starts on worker i mod 2
            marker = os.path.join(p.arm(w, f"stall@open_table:{w}"), f"stall_open_table_{w}")
            removed = []

            def remove_when_stalled():
                deadline = time.monotonic() + 200
                while not os.path.exists(marker) and time.monotonic() < deadline:
                    time.sleep(0.1)
                cluster.remove_node(second, allow_graceful=False)
                removed.append(time.monotonic())

            th = threading.Thread(target=remove_when_stalled, daemon=True)
            th.start()
            bp = p.prove_sharded(txblocks.one_tx_block(), timeout=240)
            th.join(10)
            assert removed and os.path.exists(marker)
            assert bp.to_bytes() == reference
            c = bp.stats.counters["cluster"]
            assert c["worker_deaths"] == 1
            assert c["retries"] == len(mine) and c["recomputed"] == len(mine)
            ev = tl.to_json()["traceEvents"]
            done = [(e["name"], e["args"]["piece"]) for e in ev if e.get("cat") == "cluster"]
            assert sorted(done) == sorted([(f"cluster:{m}", str(i)) for i in range(N)
                                           for m in ("main_commit", "aux", "quotient",
                                                     "prove_table", "open_table")])
            reruns = [e for e in ev if e["name"] == "cluster:rerun"]
            assert (sorted(e["args"]["piece"] for e in reruns)
                    == sorted(f"open_table:{i}" for i in mine))
            assert bp.stats.phases["join"] > 0
    finally:
        if second in cluster.worker_nodes:   # pragma: no cover - the removal did not run
            cluster.remove_node(second)
        cluster.add_node(num_cpus=1, object_store_memory=128 << 20)
        cluster.wait_for_nodes()


@pytest.mark.timeout(300)
def test_many_blocks_worker_killed(cp, reference):
    """Two blocks on two workers; the worker proving block 0 is killed mid-proof: the
    block is re-run on the restarted worker, same bytes, the re-run counted."""
    assert len(set(cp.pids)) == 2 and len(set(cp.nodes)) == 2
    assert sum(n["Alive"] for n in ray.nodes()) == 2
    blocks = [txblocks.one_tx_block(), txblocks.empty_block()]
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
    """One block, its 18 tables over two workers; a worker dies in a main commit (R1),
    one in a table's chain (after the fork, losing its committed state) and one in the
    openings after the join's FRI (losing the trees it holds): the pieces are re-run, the
    lost chains recomputed elsewhere, and the bytes equal one machine's."""
    cp.timeline = Timeline()
    bp = cp.prove_sharded(txblocks.one_tx_block(), timeout=240)
    assert bp.to_bytes() == reference
    res = verify(bp, block=txblocks.one_tx_block(), min_security_bits=0)   # weak (CFG)
    assert res.exit_codes == [0] and bp.state_out == res.state_out
    c = bp.stats.counters["cluster"]
    # three deaths; every piece queued on a dying worker is re-run (>= 3); table 1's
    # chain (its R1 state lost) and table 2's openings (its trees lost) are recomputed
    assert c["mode"] == "sharded" and c["worker_deaths"] == 3
    assert c["retries"] >= 3 and c["recomputed"] >= 2
    ev = cp.timeline.to_json()["traceEvents"]
    reruns = [e for e in ev if e["name"] == "cluster:rerun"]
    assert len(reruns) == c["retries"]
    assert {"main_commit:3", "prove_table:1", "open_table:2"} <= {e["args"]["piece"] for e in reruns}
    done = [e["args"]["piece"] for e in ev if e["ph"] == "X"]
    assert sorted(done) == sorted([str(i) for i in range(N)] * 5)   # each piece once
    cp.timeline = None
    assert c["bytes_through_object_store"] > sum(t.rows * t.main_width * 4
                                                for t in bp.stats.tables)
    assert bp.stats.counters["self_check"]["checked"] == 1
    assert [t.name for t in bp.stats.tables] == NAMES


@pytest.mark.timeout(120)
def test_unprovable_block_fails_cleanly(cp):
    """False claims: the worker's UnprovableBlock comes back as itself, naming the
    transaction and the first differing byte (blocks mode), and the sharded mode refuses
    before any table is sent; a false exit code likewise."""
    obj = txblocks.one_tx_block().to_json()
    obj["transactions"][0]["output"] = "06"
    with pytest.raises(UnprovableBlock) as ei:
        list(cp.prove_many([obj], timeout=60))
    assert "transaction 0" in str(ei.value) and "first difference at byte 0" in str(ei.value)
    assert ei.value.details == ["claimed 06", "written " + b"hello from rv32i".hex()]
    with pytest.raises(UnprovableBlock):
        cp.submit(obj).result(timeout=60)
    with pytest.raises(UnprovableBlock) as es:
        cp.prove_sharded(obj, timeout=60)
    assert es.value.details == ei.value.details
    obj = txblocks.one_tx_block().to_json()
    obj["transactions"][0]["exit_code"] = 3
    with pytest.raises(UnprovableBlock, match="claims exit code 3, execution exits with 0"):
        list(cp.prove_many([obj], timeout=60))


