"""The prover's rounds (SPEC §5), each returning a small frozen record.

The driver is backend-agnostic: all heavy work goes through ``stages`` (a
:class:`prover.core.stages.HostStages` or a device replacement), and the transcript order is
fixed by table order -- never by completion order.  After ``r1_challenges`` every table
works on its own transcript fork and touches nothing of the other tables, so the
per-table chains r1_aux -> r4_deep (:func:`prove_tables`, three passes) may run concurrently; the join
runs once, on the main transcript, after all of them, in two halves: :func:`r4_fri` (one
FRI for all tables, up to the queries; the DQs handed over by :func:`take_quotients`) and
:func:`r4_open` (every opening at the query positions, :meth:`R4Fri.positions`).

Commitments (proof format 6): every table's main matrices in ONE mixed-height tree
(kernels/mmcs.py), likewise the aux matrices and the quotient parts -- so the chains meet
twice after the fork: every table's aux commit before any fork absorbs the aux cap
(:func:`mixed_commit`, then :func:`r2_quotient`), every table's parts commit before any
fork absorbs the parts cap (then :func:`r3_ood`).

Transcript (proof format 6; exact order in docs/protocol.md §4):
  main:  params, num_tables, per table (shape + AIR fingerprint, public values),
         main_cap (the mixed main tree's), then logup_pow, logup_beta, logup_gamma, then
         fork(i) per table;
  fork:  [aux_cap (the mixed aux tree's), logup_terminal], alpha, parts_cap (the mixed
         parts tree's), zeta_pow, zeta, ood_* values, deep_pow, deep_lambda,
         table_digest (8 base elements, sampled);
  main (the join, after every fork):  table_digest per table (absorbed, table order),
         mu_pow, fri_mu, per FRI layer (fri_cap, fold_pow, fri_beta), fri_final, pow, queries.
"""
from __future__ import annotations

import dataclasses

from contextlib import nullcontext as _nullcontext
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...air import field as F
from ...kernels.mmcs import MixedTree
from ...verifier.proof_format import Commitments, FriProof, Params, Proof, TableProof
from ...verifier.protocol import absorb_statement, deep_groups
from ...verifier.transcript import Transcript

from ..common.spans import Spans
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
    transcript: Transcript       # the main transcript, after the main cap
    main: tuple                  # Committed per table
    prep: tuple                  # preprocessed LDE (c, N) or None per table
    tree: MixedTree | None = None    # the mixed-height tree of every main matrix


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
class R4Deep:
    """Table i's chain up to its DEEP quotient (everything of its section but the
    openings, which the join adds once the queries are known)."""
    index: int
    dq: np.ndarray               # uint32[N_t, 4]: DQ_t on g<w_N_t>, bit-reversed
    digest: tuple                # table_digest: 8 base elements sampled on the fork
    deep_nonce: int
    z: np.ndarray
    ood: dict                    # (matrix, at_next) -> uint32[c, 4]
    zeta_nonce: int
    terminal: np.ndarray | None
    trees: dict                  # "main" / "aux" (or None) / "parts" -> committed tree


# ---------------------------------------------------------------------------- R1

def mixed_tree(st: Statement, leaves: Sequence, spans: Spans | None = None, kind: str = "",
               rows_of=None) -> MixedTree | None:
    """A round's mixed-height tree (kernels/mmcs.py) over per-table leaf digests ``leaves``
    (uint32[N_t, 8], or None for a table without that matrix -- aux), in table order, each
    at its table's LDE height; None when no table has one.  With ``rows_of`` (a
    :class:`_RowSource`) the tree keeps its levels >= PRUNE_LEVELS and rehashes the row
    groups below at an opening; without (a sharded proof's coordinator holds digests, not
    rows) every level is kept -- the same cap and multiproofs either way.  ``leaves`` may
    be an iterable computed lazily inside the ``commit_<kind>`` span."""
    with (spans.span(f"commit_{kind}") if spans is not None and kind else _nullcontext()):
        got = [(sh.log_lde, lv) for sh, lv in zip(st.shapes, leaves) if lv is not None]
        if not got:
            return None
        return MixedTree.build([h for h, _ in got], [lv for _, lv in got],
                               prune=None if rows_of is not None else 0, rows_of=rows_of)


def mixed_commit(st: Statement, coms: list, stages, spans: Spans | None = None,
                 kind: str = "") -> MixedTree | None:
    """One round's commitment: :func:`mixed_tree` over the leaf digests of the committed
    matrices ``coms`` (one per table, None for a table without one).  Its openings
    rehash row groups from ``coms[j]`` as it is then (stages.group_rows) -- a caller that
    replaces a table's matrix by an equal recomputed one (XCHECK's recovery) updates the
    list."""
    return mixed_tree(st, (None if c is None else stages.leaf_digests(c) for c in coms),
                      spans, kind, _RowSource(coms, stages))


class _RowSource:
    """The rows a pruned mixed tree rehashes at its opening (``stages.group_rows`` of each
    participant's committed matrix, read from the caller's list ``coms`` at call time),
    remembered per table: a table's opened rows lie in those groups, so :func:`r4_open`
    takes them from here instead of evaluating them a second time (:meth:`take`)."""

    def __init__(self, coms: list, stages):
        # participant t of the tree is table idx[t] (the tables with a matrix, in order)
        self.coms, self.stages = coms, stages
        self.idx = [j for j, com in enumerate(coms) if com is not None]
        self.fetched: dict = {}            # table index -> (groups, b, uint32[G, 2^b, w])

    def __call__(self, t: int, groups, b: int) -> np.ndarray:
        j = self.idx[t]
        rows = self.stages.group_rows(self.coms[j], groups, b)
        self.fetched[j] = (np.asarray(groups, np.int64), int(b), rows)
        return rows

    def take(self, j: int, positions: np.ndarray) -> np.ndarray | None:
        """Table j's rows at tree positions ``positions`` if every one lies in a fetched
        group (handed over once), else None."""
        got = self.fetched.pop(j, None)
        if got is None or not positions.size:
            return None
        groups, b, rows = got
        g = positions >> b
        k = np.searchsorted(groups, g)
        if (k >= groups.size).any() or (groups[np.minimum(k, groups.size - 1)] != g).any():
            return None
        return np.ascontiguousarray(rows[k, positions & ((1 << b) - 1)], np.uint32)


def _cap(tree: MixedTree | None, params: Params) -> np.ndarray:
    return np.zeros((0, 8), np.uint32) if tree is None else tree.cap(params.log_cap)


def r1_main(st: Statement, stages, spans: Spans) -> R1Main:
    """Commit every table's main trace (and LDE its preprocessed columns) and the mixed
    main tree over them; absorb the statement, then the main cap."""
    tr = Transcript()
    absorb_statement(tr, st.params, st.airs, st.shapes, st.public_values)
    mains, preps = [], []
    for air, trace, shape in zip(st.airs, st.traces, st.shapes):
        with spans.span("r1_main", air.name):
            mains.append(stages.main_commit(trace, shape))
            preps.append(stages.prep_lde(air, shape))
    return r1_main_commit(st, tr, mains, preps, stages, spans)


def r1_main_commit(st: Statement, tr: Transcript, mains, preps, stages,
                   spans: Spans | None = None) -> R1Main:
    """After every table's main commit: the mixed main tree, its cap absorbed."""
    tree = mixed_commit(st, mains, stages, spans, "main")     # (mains: the caller's list)
    tr.absorb("main_cap", _cap(tree, st.params))
    return R1Main(tr, tuple(mains), tuple(preps), tree)


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
    """Table i: build, LDE and commit the LogUp running sums (the fork absorbs the mixed
    aux tree's cap and the terminal in :func:`r2_quotient`, once every table has
    committed)."""
    air, shape = st.airs[i], st.shapes[i]
    if not shape.aux_cols:
        return R1Aux(None, None)
    with spans.span("r1_aux", air.name):
        aux, terminal = stages.aux_build(air, shape, st.traces[i], st.public_values[i],
                                         ch.challenges)
        com = stages.aux_commit(aux, shape)
    return R1Aux(com, terminal)


# ---------------------------------------------------------------------------- R2

def r2_quotient(i: int, st: Statement, r1: R1Main, ch: R1Challenges, aux: R1Aux,
                aux_cap: np.ndarray, stages, spans: Spans) -> R2Quotient:
    """On table i's fork: the mixed aux tree's cap ``aux_cap`` and the table's terminal
    (if it has aux), alpha; constraints on the quotient domain folded with alpha, divided
    by Z_H, decomposed into num_parts parts; commit the parts (the fork absorbs the mixed
    parts tree's cap in :func:`r3_ood`)."""
    air, shape, tr = st.airs[i], st.shapes[i], ch.forks[i]
    if aux.aux is not None:
        tr.absorb("aux_cap", aux_cap)
        tr.absorb("logup_terminal", aux.terminal)
    alpha = tr.sample_ef("alpha")
    with spans.span("r2_quotient", air.name):
        q = stages.quotient(air, shape, r1.main[i], r1.prep[i], aux.aux, st.public_values[i],
                            ch.challenges, alpha, aux.terminal)
        # the host LDEs of main and aux are not read again before DEEP: drop them while
        # the parts are committed (DEEP reads the coefficients); a pinned one (the host
        # stages' hold budget) stays for the openings
        for com in (r1.main[i], aux.aux):
            if isinstance(com, Committed):
                com.release()
        parts = stages.parts_commit(q, shape)
    return R2Quotient(alpha, parts)


# ---------------------------------------------------------------------------- R3

def _committed(r1: R1Main, i: int, aux: R1Aux, r2: R2Quotient) -> dict:
    """Table i's committed matrices by name (the DEEP / opening order refers to them)."""
    return {"main": r1.main[i], "aux": aux.aux, "parts": r2.parts}


def r3_ood(i: int, st: Statement, r1: R1Main, ch: R1Challenges, aux: R1Aux, r2: R2Quotient,
           parts_cap: np.ndarray, stages, spans: Spans) -> R3Ood:
    """On table i's fork: the mixed parts tree's cap ``parts_cap``; draw z; open every
    committed column at z (and z*w where the AIR reads the next row; aux always); absorb
    all opened values."""
    air, shape, tr = st.airs[i], st.shapes[i], ch.forks[i]
    tr.absorb("parts_cap", parts_cap)
    with spans.span("grind", air.name):
        zeta_nonce = tr.prove_work("zeta_pow", st.params.commit_pow_bits, stages.permute,
                                   _search(stages))
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

def r4_deep(i: int, st: Statement, r1: R1Main, ch: R1Challenges, aux: R1Aux, r2: R2Quotient,
            r3: R3Ood, stages, spans: Spans) -> R4Deep:
    """Table i, on its fork: deep_pow, lambda, the DEEP quotient DQ_t, then sample the
    table's digest (binds the whole fork into the main transcript at the join)."""
    air, shape, tr, params = st.airs[i], st.shapes[i], ch.forks[i], st.params
    with spans.span("grind", air.name):
        deep_nonce = tr.prove_work("deep_pow", params.deep_pow_bits, stages.permute,
                                   _search(stages))
    lam = tr.sample_ef("deep_lambda")
    mats = _committed(r1, i, aux, r2)
    groups = [(mats[m], r3.values[(m, nx)], nx) for m, nx in deep_groups(shape)]
    with spans.span("r4_deep", air.name):
        dq = stages.deep_quotient(shape, groups, r3.z, lam)
    digest = tuple(int(v) for v in tr.sample_base("table_digest", 8))
    trees = {"main": r1.main[i].tree, "aux": None if aux.aux is None else aux.aux.tree,
             "parts": r2.parts.tree}
    return R4Deep(i, dq, digest, deep_nonce, r3.z, r3.values, r3.zeta_nonce, aux.terminal, trees)


@dataclass(frozen=True)
class Mixed:
    """The three mixed-height trees of a proof (aux None when no table has interactions)."""
    main: MixedTree | None
    aux: MixedTree | None
    parts: MixedTree | None


def _search(stages):
    """The stages' compiled proof-of-work search (HostStages.grind_search), if any: the
    same nonce as the transcript's batch search (verifier.transcript.Transcript.grind)."""
    return getattr(stages, "grind_search", None)


def _clear_scratch(stages) -> None:
    """Drop the free buffers of the host stages' short-lived LDEs (prover/core/scratch.py)
    once no more are coming: R3 and R4 compute none of their size."""
    clear = getattr(stages, "clear_scratch", None)
    if clear is not None:
        clear()


def prove_tables(st: Statement, r1: R1Main, ch: R1Challenges, stages,
                 spans: Spans) -> tuple[list, Mixed]:
    """Every table's chain after the fork, up to its DEEP quotient, in three passes with
    the two mixed commitments between them (one thread; the device pipeline runs each
    pass's tables concurrently): -> (R4Deep per table, the trees)."""
    k = len(st.airs)
    auxes = []
    for i in range(k):
        with spans.span("table", st.airs[i].name):
            auxes.append(r1_aux(i, st, ch, stages, spans))
    aux_tree = mixed_commit(st, [a.aux for a in auxes], stages, spans, "aux")
    aux_cap = _cap(aux_tree, st.params)
    r2s = []
    for i in range(k):
        with spans.span("table", st.airs[i].name):
            r2s.append(r2_quotient(i, st, r1, ch, auxes[i], aux_cap, stages, spans))
    _clear_scratch(stages)              # no LDE of R1/R2 size is computed after R2
    parts_tree = mixed_commit(st, [r.parts for r in r2s], stages, spans, "parts")
    parts_cap = _cap(parts_tree, st.params)
    deeps = []
    for i in range(k):
        with spans.span("table", st.airs[i].name):
            r3 = r3_ood(i, st, r1, ch, auxes[i], r2s[i], parts_cap, stages, spans)
            deeps.append(r4_deep(i, st, r1, ch, auxes[i], r2s[i], r3, stages, spans))
    return deeps, Mixed(r1.tree, aux_tree, parts_tree)


def fri_layer_heights(log_ldes: Sequence[int], log_blowup: int, log_final_poly_len: int,
                      log_fri_arity: int) -> list[int]:
    """The FRI layer heights h_0 > h_1 > ... > h_r (docs/protocol.md §5): h_0 = the
    largest table LDE height, h_r = h_final = min(log_final_poly_len, min log_n) +
    log_blowup, and h_{i+1} = max(h_i - log_fri_arity, the largest table height below
    h_i (if any), h_final), so every table height is a layer height (its roll-in point).
    Layer i (i < r) folds by a_i = 2^(h_i - h_{i+1})."""
    heights = sorted({int(h) for h in log_ldes})
    h_final = min(log_final_poly_len, heights[0] - log_blowup) + log_blowup
    out = [heights[-1]]
    while out[-1] > h_final:
        h = out[-1]
        below = [t for t in heights if t < h]
        out.append(max(h - log_fri_arity, below[-1] if below else h_final, h_final))
    return out


def _fri_openings(tree, positions: np.ndarray, log_arity: int, stages, log_cap: int):
    """A FRI layer's opening: for each distinct leaf of ``positions`` (ascending) the
    values of the leaf's positions not in ``positions`` (position order), uint32[v, 4],
    and the multiproof nodes."""
    a = 1 << log_arity
    pos = np.unique(positions)
    leaves = np.unique(pos >> log_arity)
    rows, nodes = stages.open_batch(tree, leaves, log_cap)            # (nl, 4a)
    all_pos = (leaves[:, None] * a + np.arange(a)[None, :]).reshape(-1)
    keep = ~np.isin(all_pos, pos)
    values = np.ascontiguousarray(rows.reshape(-1, 4)[keep], np.uint32)
    return values, nodes


def _in_table_order(deeps: Sequence[R4Deep], n: int) -> list:
    """The chains' records sorted by table; exactly one per table (ValueError otherwise)."""
    out = sorted(deeps, key=lambda d: d.index)
    if [d.index for d in out] != list(range(n)):
        raise ValueError("the join needs exactly one R4Deep per table")
    return out


class DeepQuotients:
    """The tables' DEEP quotients on their way from the chains to the FRI.  :func:`r4_fri`
    takes each height's quotients out as it combines them (:meth:`take`) and keeps no
    reference after, so a host DQ -- the join's largest input -- is freed there rather
    than at the end of the proof.  Made by :func:`take_quotients`."""

    def __init__(self, dqs: dict):
        self._dqs = dict(dqs)            # table index -> DQ_t

    def take(self, indices: Sequence[int]) -> list:
        """The DQs of tables ``indices`` (in that order), handed over: asked once each."""
        return [self._dqs.pop(j) for j in indices]


def take_quotients(deeps: Sequence[R4Deep]) -> tuple[list, DeepQuotients]:
    """Split the chains' records (one :class:`R4Deep` per table, any order) into the
    records in table order without their DQs -- what the join's digests and openings read
    -- and the DQs for the FRI.  Nothing of ``deeps`` is modified: a caller that wants the
    DQs freed as the FRI combines them keeps only the returned records."""
    deeps = _in_table_order(deeps, len(deeps))
    return ([dataclasses.replace(d, dq=None) for d in deeps],
            DeepQuotients({d.index: d.dq for d in deeps}))


@dataclass(frozen=True)
class R4Fri:
    """The join's FRI over every table's DEEP quotient, up to the queries: what the
    openings (:func:`r4_open`) and the proof's FRI section need."""
    heights: tuple               # the layer heights h_0 > ... > h_r (fri_layer_heights)
    trees: tuple                 # the committed layers 0 .. r-1
    caps: tuple                  # uint32[., 8] per committed layer
    fold_nonces: tuple           # the proof of work before each fold's beta
    final: np.ndarray            # the final polynomial's coefficients, uint32[L, 4]
    pow_nonce: int               # the proof of work before the queries
    mu_nonce: int                # the proof of work before mu
    queries: np.ndarray          # int64[num_queries]: the query positions at height h_0

    def positions(self, log_lde: int) -> np.ndarray:
        """Where a table of LDE height 2^log_lde is opened: the distinct query positions
        at its height, ascending."""
        return np.unique(self.queries >> (self.heights[0] - log_lde))


def r4_fri(st: Statement, tr: Transcript, deeps: Sequence[R4Deep], dqs: DeepQuotients,
           stages, spans: Spans) -> R4Fri:
    """The join's first half, on the main transcript ``tr`` after every table's chain:
    absorb the table digests (table order), mu, one FRI over the tables' DEEP quotients
    ``dqs`` (combined per height with powers of mu, rolled in at their height), the final
    polynomial, the proof of work and the queries."""
    params = st.params
    deeps = _in_table_order(deeps, len(st.airs))
    for d in deeps:
        tr.absorb("table_digest", list(d.digest))
    with spans.span("grind"):
        mu_nonce = tr.prove_work("mu_pow", params.commit_pow_bits, stages.permute,
                                 _search(stages))
    mu = tr.sample_ef("fri_mu")
    log_ldes = [s.log_lde for s in st.shapes]
    heights = fri_layer_heights(log_ldes, params.log_blowup, params.log_final_poly_len,
                                params.log_fri_arity)
    h_max, h_final = heights[0], heights[-1]
    L = 1 << (h_final - params.log_blowup)

    def combined(h: int):
        tables = [j for j, lh in enumerate(log_ldes) if lh == h]
        if not tables:
            return None
        return stages.fri_input(dqs.take(tables), mu)     # no DQ is read again

    trees, caps, fold_nonces = [], [], []
    with spans.span("r4_fri"):
        f = combined(h_max)
        for h, h_next in zip(heights, heights[1:]):
            k = h - h_next
            tree = stages.fri_commit_layer(f, k)
            cap = stages.cap(tree, params.log_cap)
            tr.absorb("fri_cap", cap)
            with spans.span("grind"):                    # (also counted in r4_fri)
                fold_nonces.append(tr.prove_work("fold_pow", params.commit_pow_bits,
                                                 stages.permute, _search(stages)))
            beta = tr.sample_ef("fri_beta")
            f = stages.fri_fold(f, beta, k, h, combined(h_next))
            trees.append(tree)
            caps.append(np.asarray(cap, np.uint32))
        final = stages.fri_final(f, h_final, L)
    tr.absorb("fri_final", final)
    with spans.span("r4_pow"):
        nonce = tr.grind("pow", params.pow_bits, batch=1 << 13, permute_batch=stages.permute,
                         search=_search(stages))
    if not tr.check_pow("pow", nonce, params.pow_bits):      # advances the transcript
        raise RuntimeError("proof-of-work grinding returned a bad nonce")  # pragma: no cover
    queries = tr.sample_bits("queries", h_max, params.num_queries).astype(np.int64)
    return R4Fri(tuple(heights), tuple(trees), tuple(caps), tuple(fold_nonces), final,
                 int(nonce), int(mu_nonce), queries)


def r4_open(st: Statement, ch: R1Challenges, deeps: Sequence[R4Deep], fri: R4Fri, stages,
            spans: Spans, mixed: Mixed) -> Proof:
    """The join's second half: every table's committed rows at its query positions
    (:meth:`R4Fri.positions`), the three mixed trees' multiproofs, every FRI layer at the
    queries' leaves; returns the whole :class:`Proof` (the tables' sections, the
    commitments, the FRI section)."""
    params = st.params
    deeps = _in_table_order(deeps, len(st.airs))
    h_max = fri.heights[0]
    empty4 = np.zeros((0, 4), np.uint32)
    sections = []
    with spans.span("r4_open"):
        commits = open_mixed(mixed, fri, params)     # (first: the rows it fetches are reused)
        for d, shape in zip(deeps, st.shapes):
            idx = fri.positions(shape.log_lde)
            opened = {}
            for name in ("main", "aux", "parts"):
                tree = d.trees[name]
                if tree is None:
                    opened[name] = np.zeros((0, 0), np.uint32)
                    continue
                src = getattr(getattr(mixed, name), "rows_of", None)
                cached = src.take(d.index, idx) if isinstance(src, _RowSource) else None
                opened[name] = stages.open_rows(tree, idx, params.log_cap, cached)
            ood = d.ood
            sections.append(TableProof(
                log_n=shape.log_n,
                public_values=np.asarray([int(v) for v in st.public_values[d.index]],
                                         dtype=np.uint32),
                terminal=(np.asarray(d.terminal, np.uint32) if d.terminal is not None
                          else np.zeros(0, np.uint32)),
                ood_main=ood[("main", False)],
                ood_main_next=ood.get(("main", True), empty4),
                ood_aux=ood.get(("aux", False), empty4),
                ood_aux_next=ood.get(("aux", True), empty4),
                ood_parts=ood[("parts", False)],
                zeta_nonce=d.zeta_nonce, deep_nonce=d.deep_nonce,
                main_rows=opened["main"], aux_rows=opened["aux"], parts_rows=opened["parts"]))
        values, nodes = [], []
        for tree, h, h_next in zip(fri.trees, fri.heights, fri.heights[1:]):
            v, n = _fri_openings(tree, fri.queries >> (h_max - h), h - h_next, stages,
                                 params.log_cap)
            values.append(v)
            nodes.append(n)
    proof = FriProof(caps=list(fri.caps), fold_nonces=np.asarray(fri.fold_nonces, np.uint32),
                     final_poly=np.ascontiguousarray(fri.final, np.uint32),
                     pow_nonce=fri.pow_nonce, values=values, nodes=nodes,
                     mu_nonce=fri.mu_nonce)
    return Proof(params=params, tables=sections, fri=proof, logup_nonce=ch.logup_nonce,
                 commits=commits)


def open_mixed(mixed: Mixed, fri: R4Fri, params: Params) -> Commitments:
    """The commitments section: the three mixed trees' caps and their multiproofs at the
    queries (each tree of top height H opens the distinct queries >> (h_max - H))."""
    h_max = fri.heights[0]
    out = {}
    for name in ("main", "aux", "parts"):
        tree = getattr(mixed, name)
        if tree is None:
            out[f"{name}_cap"] = np.zeros((0, 8), np.uint32)
            out[f"{name}_nodes"] = np.zeros((0, 8), np.uint32)
            continue
        top = np.unique(fri.queries >> (h_max - tree.height))
        out[f"{name}_cap"] = np.asarray(tree.cap(params.log_cap), np.uint32)
        out[f"{name}_nodes"] = np.ascontiguousarray(tree.nodes(top, params.log_cap), np.uint32)
    return Commitments(**out)


def prove_statement(st: Statement, stages, spans: Spans, logs: list | None = None) -> Proof:
    """The whole proof of ``st`` on one thread (the host path, and the host completion
    of a device proof): R1 .. R4, the join; ``logs`` gets the transcript label logs
    (main, then one per table)."""
    plan = getattr(stages, "plan_buffers", None)       # the host stages' LDE pools
    if plan is not None:
        plan(st.shapes)
    r1 = r1_main(st, stages, spans)
    ch = r1_challenges(st, r1, spans, stages.permute)
    deeps, mixed = prove_tables(st, r1, ch, stages, spans)
    deeps, dqs = take_quotients(deeps)     # the FRI consumes the DQs; the openings read the rest
    fri = r4_fri(st, r1.transcript, deeps, dqs, stages, spans)     # one FRI for all tables
    proof = r4_open(st, ch, deeps, fri, stages, spans, mixed)      # every opening
    if logs is not None:
        logs.append(r1.transcript.log)
        logs.extend(f.log for f in ch.forks)
    return proof


def statement(airs: Sequence, traces: Sequence, public_values, params: Params, shapes) -> Statement:
    return Statement(tuple(airs), tuple(traces), tuple(tuple(int(v) for v in pv) for pv in public_values),
                     params, tuple(shapes))
