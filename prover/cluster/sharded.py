"""Cluster mode, one block with its tables sharded (:meth:`prover.cluster.ClusterProver.
prove_sharded`), proof format 6: the coordinator executes the block and puts each
table's trace in Ray's object store; each table then goes through five pieces on the
worker holding its state (:mod:`prover.cluster.worker`), with the coordinator's barriers
between them:

  main_commit  R1: the table's main commit -> its main leaf digests (and own cap);
               the coordinator builds the mixed main tree (table order), absorbs its
               cap, draws the LogUp challenges, forks
  aux          the LogUp running sums committed -> the aux leaf digests (or None);
               the coordinator builds the mixed aux tree, its cap
  quotient     R2 on the table's fork (the mixed aux cap, the terminal, alpha) -> the
               parts' leaf digests; the coordinator builds the mixed parts tree, its cap
  prove_table  R3 (the fork absorbs the mixed parts cap) and the DEEP quotient -> the
               table's R4Deep, its DQ through the object store, its trees kept
  open_table   (inside the join, after the coordinator's one FRI) the table's rows at
               the query positions

and the coordinator encodes the proof (the mixed trees' multiproofs its own) and
self-checks it.  The same bytes as one machine.  A worker that lost a table's state
recomputes it from the trace, replaying its fork with the mixed caps every later piece
is sent, and checks each recomputed matrix's own cap against the one the coordinator
kept.  A program run (:func:`prove_program_sharded`) goes the same way: the coordinator
runs it and builds its tables, the workers rebuild its AIRs from a
:class:`prover.programs.prover.ProgramAirs` (the program, the input, the claimed output,
the slots) instead of a ROM.
"""
from __future__ import annotations

import pickle
import time
import uuid

import numpy as np

from .join import _join, _JoinStages, mixed_tree
from ..programs.segment_prover import recovery_downgrades
from .pool import WorkerPool, _Piece, _sum_recovery
from ..common.stats import ProofStats, peak_rss_bytes, table_stats


def prove_program_sharded(pool: WorkerPool, elf, input: bytes = b"",
                          max_cycles: int | None = None, timeout: float | None = None):
    """Prove one program run (as ``Prover.prove_program``) with its tables spread over
    ``pool``'s workers -> a :class:`prover.programs.proof.ProgramProof`, the same bytes as
    one machine; self-checked here.  Development mode is refused (``ConfigError``: a fake
    has no tables to shard)."""
    from ..common.errors import ConfigError
    from ..programs.proof import ProgramProof, as_input, as_program, check_max_cycles
    from ..programs.prover import program_airs_spec
    t0 = time.perf_counter()
    local = pool.local
    if local.dev_mode:
        raise ConfigError("development mode does not apply to sharded proofs")
    program, data = as_program(elf), as_input(input)
    # one proof: it carries min(max_cycles, 2^24), as Prover.prove_program's does
    from ...rv32.abi import MAX_CYCLES_CEILING
    limit = check_max_cycles(MAX_CYCLES_CEILING if max_cycles is None
                             else min(max_cycles, MAX_CYCLES_CEILING))
    phases: dict = {}
    ex, tr = local._build_program(program, data, limit, phases)
    airs, traces, pvs = list(tr.airs), list(tr.traces), tr.table_public_values
    if pool.config.check:
        local._check_program_tables(airs, traces, pvs, phases)
    spec = program_airs_spec(program, data, bytes(ex.output), tr.slots,
                             pool.config.params().log_blowup, tr.split)
    proof, stats = _sharded(pool, airs, traces, pvs, spec, ex.cycles, phases, t0, timeout)
    return ProgramProof(proof, stats)


def prove_sharded(pool: WorkerPool, block, timeout: float | None = None):
    """Prove one block of RISC-V transactions with its tables spread over ``pool``'s
    workers -> a :class:`prover.blocks.proof.TxBlockProof`, the same bytes as one
    machine; self-checked here.  Development mode is refused (``ConfigError``)."""
    from ..common.errors import ConfigError
    from ..blocks.proof import TxBlockProof, as_txblock
    from ..blocks.proof import state_out_of
    from ..blocks.prover import txblock_airs_spec
    t0 = time.perf_counter()
    local = pool.local
    if local.dev_mode:
        raise ConfigError("development mode does not apply to sharded proofs")
    blk = as_txblock(block)
    phases: dict = {}
    exs, bt = local._build_txblock(blk, phases)
    airs, traces, pvs = list(bt.airs), list(bt.traces), bt.table_public_values
    if pool.config.check:
        local._check_txblock(airs, traces, pvs, phases)
    spec = txblock_airs_spec(blk, exs, bt, pool.config.params().log_blowup)
    proof, stats = _sharded(pool, airs, traces, pvs, spec, bt.cycles, phases, t0, timeout)
    return TxBlockProof(len(blk.transactions), proof, stats, False, state_out_of(blk, exs))


def _sharded(pool: WorkerPool, airs, traces, pvs, source, cycles: int, phases: dict,
             t0: float, timeout: float | None):
    """The sharded proof of built tables -> (proof bytes, ProofStats).  ``source``: what
    the workers rebuild the AIRs from (a block's ROM, a program's ProgramAirs)."""
    from ...verifier.protocol import absorb_statement
    from ...verifier.transcript import Transcript
    from ..core.prove import prepare
    from ..core.rounds import Mixed, R1Challenges, R1Main, _cap, r1_challenges, take_quotients
    from ..common.spans import Spans
    from ..core.stages import HostStages
    ray = pool._ray
    cfg = pool.config
    t1 = time.perf_counter()
    params = cfg.params()
    st = prepare(traces, airs, pvs, params, check=False)
    shapes, pv = list(st.shapes), [list(p) for p in st.public_values]
    n = len(airs)
    job = uuid.uuid4().hex
    refs = [ray.put(np.ascontiguousarray(t)) for t in traces]     # the object store
    rom_ref = ray.put(source)
    size = int(source.nbytes) if isinstance(source, np.ndarray) else len(pickle.dumps(source))
    moved = sum(int(t.nbytes) for t in traces) + size * pool.workers
    records: list = []
    retries0, deaths0 = pool.retries, pool.worker_deaths
    recomputed = 0
    devs: list = []
    live = pool._live() or [pool._least_busy()]
    try:
        # R1 on the workers: main commits (their leaf digests back), state kept per table
        pieces = [_Piece(live[i % len(live)], "main_commit",
                         (job, i, rom_ref, refs[i], params, shapes), i) for i in range(n)]
        leaves = [None] * n
        known = [{} for _ in range(n)]     # per table: its own caps, the mixed aux/parts caps
        where = [None] * n
        for p, (lv, cap, rec_, _) in pool._gather(pieces, timeout):
            leaves[p.tag], known[p.tag]["main"], where[p.tag] = lv, cap, p.worker
            records.extend(rec_)
            moved += int(lv.nbytes)
        # the coordinator: statement, the mixed main tree (table order), its cap, the
        # LogUp challenges, the forks
        spans = Spans()
        tr = Transcript()
        absorb_statement(tr, st.params, st.airs, st.shapes, st.public_values)
        main_tree = mixed_tree(st, leaves, spans, "main")
        del leaves
        tr.absorb("main_cap", _cap(main_tree, params))       # as rounds.r1_main_commit
        ch = r1_challenges(st, R1Main(tr, (), ()), spans, HostStages().permute)
        chis = [R1Challenges(ch.challenges,
                             tuple(f if j == i else None for j, f in enumerate(ch.forks)),
                             ch.logup_nonce) for i in range(n)]

        def run(method: str):
            """Every table's piece ``method`` on the worker holding its state (else the
            least busy one) -> (table, the piece's value) as they finish."""
            nonlocal recomputed
            live = set(pool._live())
            ps = [_Piece(where[i] if where[i] in live else pool._least_busy(), method,
                         (job, i, rom_ref, refs[i], pv, params, shapes, chis[i],
                          dict(known[i])), i) for i in range(n)]
            for p, value in pool._gather(ps, timeout):
                where[p.tag] = p.worker
                records.extend(value[-3])
                recomputed += int(value[-2])
                yield p.tag, value

        def mixed(method: str, kind: str):
            """Every table's piece ``method`` committing its ``kind`` matrix -> the mixed
            tree over their leaf digests (table order; None when no table has one)."""
            nonlocal moved
            got = [None] * n
            for i, (lv, cap, *_) in run(method):
                got[i], known[i][kind] = lv, cap
                moved += 0 if lv is None else int(lv.nbytes)
            return mixed_tree(st, got, spans, kind)

        # the two barriers after the fork: every aux commit before any fork absorbs the
        # mixed aux cap, every parts commit before any fork absorbs the mixed parts cap
        aux_tree = mixed("aux", "aux")
        aux_cap = _cap(aux_tree, params)
        for k in known:
            k["aux_cap"] = aux_cap
        parts_tree = mixed("quotient", "parts")
        parts_cap = _cap(parts_tree, params)
        for k in known:
            k["parts_cap"] = parts_cap
        # every table's R3 and DEEP quotient; the DQs come back through the object store
        deeps = [None] * n
        for i, (deep, *_) in run("prove_table"):
            deeps[i] = deep
            moved += int(deep.dq.nbytes)
        deeps, dqs = take_quotients(deeps)     # the FRI takes the DQs, the openings the rest

        def opener(wanted: dict) -> dict:
            """Open the tables of ``wanted`` ({table: indices}) on the workers that
            hold their trees (a dead one's tables recomputed elsewhere): rows only."""
            nonlocal recomputed, moved
            live = set(pool._live())
            ps = [_Piece(where[i] if where[i] in live else pool._least_busy(), "open_table",
                         (job, i, idx, rom_ref, refs[i], pv, params, shapes, chis[i],
                          dict(known[i])), i) for i, idx in wanted.items()]
            out = {}
            for p, (opened, rec_, redo, dev, _) in pool._gather(ps, timeout):
                out[p.tag] = (wanted[p.tag], opened)
                where[p.tag] = p.worker
                records.extend(rec_)
                recomputed += int(redo)
                moved += sum(int(o.nbytes) for o in opened.values() if o is not None)
                if dev is not None:
                    devs.append(dev)
            return out

        # the join on the coordinator: one FRI over every table's DQ, the queries, the
        # rows (from the workers holding the trees), the mixed trees' multiproofs
        with pool.local._phase("join", phases):
            proof = _join(st, ch, tr, deeps, dqs, _JoinStages(opener), spans,
                          Mixed(main_tree, aux_tree, parts_tree))
        records.extend(spans.stats.records)
        del deeps, dqs
    finally:
        for a in pool._actors:
            a.drop.remote(job)
        del refs
    phases["prove"] = time.perf_counter() - t1
    self_check = {"enabled": bool(cfg.self_check), "checked": 0, "failed": 0, "seconds": 0.0}
    if cfg.self_check:
        with pool.local._phase("self_check", phases):
            pool.local._self_check(proof, airs, pvs, [])
        self_check.update(checked=1, seconds=round(phases["self_check"], 4))
    phases["total"] = time.perf_counter() - t0
    work = sum(s for name, t, s in records if name in ("r1_main", "table", "table_open"))
    cluster = {"mode": "sharded", "workers": pool.workers, "gpus": pool.gpus,
               "backend": pool.local.backend,
               "retries": pool.retries - retries0, "recomputed": recomputed,
               "worker_deaths": pool.worker_deaths - deaths0,
               "device_downgrades": sum(recovery_downgrades(d["recovery"]) for d in devs),
               "bytes_through_object_store": moved,
               "worker_seconds": round(work, 4),
               "seconds": round(phases["prove"], 4)}
    if devs:
        cluster["device"] = {
            "downgraded_tables": sum(int(d["downgraded"]) for d in devs),
            "h2d_bytes": sum(d["h2d_bytes"] for d in devs),
            "d2h_bytes": sum(d["d2h_bytes"] for d in devs),
            "recovery": _sum_recovery([d["recovery"] for d in devs])}
    counters = {"proof_bytes": len(proof), "self_check": self_check, "cluster": cluster}
    stats = ProofStats(records=records, counters=counters, backend=pool.local.backend,
                       cycles=cycles, phases=phases, proof_bytes=len(proof),
                       peak_rss_bytes=peak_rss_bytes())
    stats.tables.extend(table_stats(airs, traces, records))
    return proof, stats


__all__ = ["prove_sharded", "prove_program_sharded"]
