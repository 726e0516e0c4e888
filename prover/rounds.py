"""The prover's rounds (SPEC §5), each returning a small frozen record.

The driver is backend-agnostic: all heavy work goes through ``stages`` (a
:class:`prover.stages.HostStages` or a device replacement), one table at a time, and the
transcript order is fixed by table order -- never by completion order.  After
``r1_challenges`` every table works on its own transcript fork and touches nothing of
the other tables, so the per-table chains r1_aux -> r4_open may later run concurrently.

Transcript (exact order in docs/protocol.md):
  main:  params, num_tables, per table (shape + AIR fingerprint, public values),
         per table main_root, then logup_pow, logup_beta, logup_gamma, then fork(i)
         per table;
  fork:  [aux_root, logup_terminal], alpha, parts_root, zeta_pow, zeta, ood_* values,
         deep_pow, deep_lambda, per FRI layer (fri_root, fold_pow, fri_beta), fri_final,
         pow, queries.
"""
from __future__ import annotations

from contextlib import nullcontext as _nullcontext
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from steadfast.air import field as F
from steadfast.verifier.proof_format import Params, TableProof
from steadfast.verifier.protocol import absorb_statement, deep_groups
from steadfast.verifier.transcript import Transcript

from .spans import Spans
from .stages import Committed


@dataclass(frozen=True)
class Statement:
    """What is being proven: AIRs, traces, public values, parameters, shapes."""
    airs: tuple
    traces: tuple
    public_values: tuple
    params: Params
    shapes: tuple


@dataclass(frozen=True)
class R1Main:
    transcript: Transcript       # the main transcript, after the main roots
    main: tuple                  # Committed per table
    prep: tuple                  # preprocessed LDE (c, N) or None per table


@dataclass(frozen=True)
class R1Challenges:
    challenges: dict             # logup_beta, logup_gamma: uint32[4]
    forks: tuple                 # one Transcript per table
    logup_nonce: int = 0         # the proof of work before beta, gamma


@dataclass(frozen=True)
class R1Aux:
    aux: Committed | None
    terminal: np.ndarray | None  # uint32[4]


@dataclass(frozen=True)
class R2Quotient:
    alpha: np.ndarray
    parts: Committed


@dataclass(frozen=True)
class R3Ood:
    z: np.ndarray
    values: dict                 # (matrix, at_next) -> uint32[c, 4]
    zeta_nonce: int = 0          # the proof of work before z


@dataclass(frozen=True)
class R4Open:
    table: TableProof


# ---------------------------------------------------------------------------- R1

def r1_main(st: Statement, stages, spans: Spans) -> R1Main:
    """Commit every table's main trace (and LDE its preprocessed columns); absorb the
    statement, then the main roots in table order."""
    tr = Transcript()
    absorb_statement(tr, st.params, st.airs, st.shapes, st.public_values)
    mains, preps = [], []
    for air, trace, shape in zip(st.airs, st.traces, st.shapes):
        with spans.span("r1_main", air.name):
            mains.append(stages.main_commit(trace, shape))
            preps.append(stages.prep_lde(air, shape))
    for com in mains:                     # table order, whatever the completion order
        tr.absorb("main_root", com.root)
    return R1Main(tr, tuple(mains), tuple(preps))


def r1_challenges(st: Statement, r1: R1Main, spans: Spans | None = None,
                  permute=None) -> R1Challenges:
    """Shared LogUp challenges (after every main root and a proof of work: a prover
    that retries main commitments to steer beta, gamma pays 2^logup_pow_bits hashes per
    try), then one fork per table."""
    tr = r1.transcript
    with (spans.span("r1_pow") if spans is not None else _nullcontext()):
        nonce = tr.prove_work("logup_pow", st.params.logup_pow_bits, permute)
    chal = {"logup_beta": tr.sample_ef("logup_beta"),
            "logup_gamma": tr.sample_ef("logup_gamma")}
    forks = tuple(tr.fork(i) for i in range(len(st.airs)))
    return R1Challenges(chal, forks, nonce)


def r1_aux(i: int, st: Statement, ch: R1Challenges, stages, spans: Spans) -> R1Aux:
    """Table i, on its fork: build, LDE and commit the LogUp running sums; absorb the
    root and the claimed terminal."""
    air, shape, tr = st.airs[i], st.shapes[i], ch.forks[i]
    if not shape.aux_cols:
        return R1Aux(None, None)
    with spans.span("r1_aux", air.name):
        aux, terminal = stages.aux_build(air, shape, st.traces[i], st.public_values[i],
                                         ch.challenges)
        com = stages.aux_commit(aux, shape)
    tr.absorb("aux_root", com.root)
    tr.absorb("logup_terminal", terminal)
    return R1Aux(com, terminal)


# ---------------------------------------------------------------------------- R2

def r2_quotient(i: int, st: Statement, r1: R1Main, ch: R1Challenges, aux: R1Aux,
                stages, spans: Spans) -> R2Quotient:
    """alpha; constraints on the quotient domain folded with alpha, divided by Z_H,
    decomposed into num_parts parts; commit the parts."""
    air, shape, tr = st.airs[i], st.shapes[i], ch.forks[i]
    alpha = tr.sample_ef("alpha")
    with spans.span("r2_quotient", air.name):
        q = stages.quotient(air, shape, r1.main[i], r1.prep[i], aux.aux, st.public_values[i],
                            ch.challenges, alpha, aux.terminal)
        parts = stages.parts_commit(q, shape)
    tr.absorb("parts_root", parts.root)
    return R2Quotient(alpha, parts)


# ---------------------------------------------------------------------------- R3

def _committed(r1: R1Main, i: int, aux: R1Aux, r2: R2Quotient) -> dict:
    """Table i's committed matrices by name (the DEEP / opening order refers to them)."""
    return {"main": r1.main[i], "aux": aux.aux, "parts": r2.parts}


def r3_ood(i: int, st: Statement, r1: R1Main, ch: R1Challenges, aux: R1Aux, r2: R2Quotient,
           stages, spans: Spans) -> R3Ood:
    """Draw z; open every committed column at z (and z*w where the AIR reads the next
    row; aux always); absorb all opened values."""
    air, shape, tr = st.airs[i], st.shapes[i], ch.forks[i]
    with spans.span("grind", air.name):
        zeta_nonce = tr.prove_work("zeta_pow", st.params.commit_pow_bits, stages.permute)
    z = tr.sample_ef("zeta")
    zn = np.asarray(z, np.uint64)
    zh = F.ef_pow(zn.reshape(4, 1), shape.n).reshape(4)
    if zh[0] == 1 and not zh[1:].any():       # z^n = 1: z in H (probability ~ n / p^4)
        raise RuntimeError("out-of-domain point fell in the trace domain")
    z_next = F.ef_mul_base(zn.reshape(4, 1), F.root_of_unity(shape.log_n)).reshape(4)
    mats = _committed(r1, i, aux, r2)
    vals = {}
    with spans.span("r3_ood", air.name):
        for mat, at_next in deep_groups(shape):
            vals[(mat, at_next)] = stages.ood(mats[mat], z_next if at_next else zn)
    for mat, at_next in deep_groups(shape):
        tr.absorb(f"ood_{mat}" + ("_next" if at_next else ""), vals[(mat, at_next)])
    return R3Ood(np.asarray(z, np.uint32), vals, zeta_nonce)


# ---------------------------------------------------------------------------- R4

def r4_open(i: int, st: Statement, r1: R1Main, ch: R1Challenges, aux: R1Aux, r2: R2Quotient,
            r3: R3Ood, stages, spans: Spans) -> R4Open:
    """DEEP quotient, FRI commit phase (arity 2), final polynomial, proof of work,
    query openings; returns the table's proof section."""
    air, shape, tr, params = st.airs[i], st.shapes[i], ch.forks[i], st.params
    with spans.span("grind", air.name):
        deep_nonce = tr.prove_work("deep_pow", params.deep_pow_bits, stages.permute)
    lam = tr.sample_ef("deep_lambda")
    mats = _committed(r1, i, aux, r2)
    groups = [(mats[m], r3.values[(m, nx)], nx) for m, nx in deep_groups(shape)]
    with spans.span("r4_deep", air.name):
        values = stages.deep_quotient(shape, groups, r3.z, lam)
    trees, roots, fold_nonces = [], [], []
    with spans.span("r4_fri", air.name):
        for layer in range(shape.num_fri_layers):
            tree = stages.fri_commit_layer(values)
            tr.absorb("fri_root", tree.root)
            with spans.span("grind", air.name):          # (also counted in r4_fri)
                fold_nonces.append(tr.prove_work("fold_pow", params.commit_pow_bits,
                                                 stages.permute))
            beta = tr.sample_ef("fri_beta")
            values = stages.fri_fold(values, beta, layer, shape)
            trees.append(tree)
            roots.append(np.asarray(tree.root, np.uint32))
        final = stages.fri_final(values, shape)
    tr.absorb("fri_final", final)
    with spans.span("r4_pow", air.name):
        nonce = tr.grind("pow", params.pow_bits, batch=1 << 13, permute_batch=stages.permute)
    if not tr.check_pow("pow", nonce, params.pow_bits):      # advances the transcript
        raise RuntimeError("proof-of-work grinding returned a bad nonce")  # pragma: no cover
    queries = tr.sample_bits("queries", shape.log_lde, params.num_queries)
    with spans.span("r4_open", air.name):
        main_rows, main_paths = stages.open(r1.main[i].tree, queries)
        if aux.aux is not None:
            aux_rows, aux_paths = stages.open(aux.aux.tree, queries)
        else:
            aux_rows = np.zeros((0, 0), np.uint32)
            aux_paths = np.zeros((0, 0, 8), np.uint32)
        parts_rows, parts_paths = stages.open(r2.parts.tree, queries)
        fri_leaves, fri_paths = [], []
        for layer, tree in enumerate(trees):
            lv, pth = stages.open(tree, queries >> (layer + 1))
            fri_leaves.append(lv)
            fri_paths.append(pth)
    empty4 = np.zeros((0, 4), np.uint32)
    ood = r3.values
    table = TableProof(
        log_n=shape.log_n,
        public_values=np.asarray([int(v) for v in st.public_values[i]], dtype=np.uint32),
        main_root=r1.main[i].root,
        aux_root=aux.aux.root if aux.aux is not None else np.zeros(0, np.uint32),
        terminal=aux.terminal if aux.terminal is not None else np.zeros(0, np.uint32),
        parts_root=r2.parts.root,
        ood_main=ood[("main", False)],
        ood_main_next=ood.get(("main", True), empty4),
        ood_aux=ood.get(("aux", False), empty4),
        ood_aux_next=ood.get(("aux", True), empty4),
        ood_parts=ood[("parts", False)],
        fri_roots=np.asarray(roots, np.uint32).reshape(-1, 8),
        final_poly=final,
        pow_nonce=nonce,
        zeta_nonce=r3.zeta_nonce, deep_nonce=deep_nonce,
        fold_nonces=np.asarray(fold_nonces, np.uint32),
        main_rows=main_rows, main_paths=main_paths,
        aux_rows=aux_rows, aux_paths=aux_paths,
        parts_rows=parts_rows, parts_paths=parts_paths,
        fri_leaves=fri_leaves, fri_paths=fri_paths,
    )
    return R4Open(table)


def prove_table(i: int, st: Statement, r1: R1Main, ch: R1Challenges, stages,
                spans: Spans) -> TableProof:
    """Table i's whole chain after the fork (independent of every other table)."""
    aux = r1_aux(i, st, ch, stages, spans)
    r2 = r2_quotient(i, st, r1, ch, aux, stages, spans)
    r3 = r3_ood(i, st, r1, ch, aux, r2, stages, spans)
    return r4_open(i, st, r1, ch, aux, r2, r3, stages, spans).table


def statement(airs: Sequence, traces: Sequence, public_values, params: Params, shapes) -> Statement:
    return Statement(tuple(airs), tuple(traces), tuple(tuple(int(v) for v in pv) for pv in public_values),
                     params, tuple(shapes))
