"""The join of a sharded proof on the coordinator (proof format 3, :mod:`prover.cluster`):
the tables' trees stay on the workers, the coordinator folds one FRI over the DQs they
sent and asks the workers for the openings.

* :class:`_TreeRef` -- a table tree held by a worker, as the coordinator sees it: which
  table and tree, and its cap.
* :func:`_table_step` -- the per-table work on a worker after the fork: the chain up to
  the DEEP quotient (:func:`prover.rounds.prove_table`).
* :class:`_JoinStages` -- the coordinator's stages for the join: host stages for the FRI,
  while a :class:`_TreeRef`'s cap and openings come from the worker holding the tree.
* :func:`_join` -- the join itself: :func:`prover.rounds.r4_fri` (the one FRI, up to the
  queries), then every table's openings launched on the workers at once
  (:meth:`_JoinStages.prefetch`, at :meth:`prover.rounds.R4Fri.positions`), then
  :func:`prover.rounds.r4_open`.  The same functions as one machine: the same bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class _TreeRef:
    """A table tree held by a worker, as the coordinator's join sees it: which table and
    tree, and its cap (computed in the worker when its chain ended)."""
    table: int
    name: str
    log_cap: int
    cap: np.ndarray


def _table_step(i: int, st, r1, ch, stages, spans):
    """The per-table work of a sharded proof, on a worker, after the fork (proof format
    v3): the table's chain R1 aux .. its DEEP quotient -> its :class:`prover.rounds.R4Deep`
    (the trees stay on the worker; the FRI and the queries are the join's)."""
    from .rounds import prove_table
    return prove_table(i, st, r1, ch, stages, spans)


class _JoinStages:
    """The coordinator's stages for the join (:func:`prover.rounds.r4_fri`,
    :func:`prover.rounds.r4_open`): host stages for the FRI over the tables' DQs, except
    that ``cap`` / ``open_batch`` on a :class:`_TreeRef` answer from the worker that holds
    the tree: the cap it sent, and the openings of ``opener({table: indices})`` (one piece
    per table opening all its trees; :meth:`prefetch` launches every table's at once)."""

    def __init__(self, opener):
        from .stages import HostStages
        self._host = HostStages()
        self._opener = opener              # {table: indices} -> {table: {tree: (rows, nodes)}}
        self._opened: dict = {}            # table -> (indices, {tree: (rows, nodes)})

    def __getattr__(self, name):           # fri_input, fri_commit_layer, fri_fold, permute ...
        return getattr(self._host, name)

    def prefetch(self, wanted: dict) -> None:
        for t, (idx, opened) in self._opener(wanted).items():
            self._opened[t] = (idx, opened)

    def cap(self, tree, log_cap: int) -> np.ndarray:
        if isinstance(tree, _TreeRef):
            if log_cap != tree.log_cap:
                raise ValueError(f"table {tree.table} {tree.name}: cap of log {tree.log_cap}, "
                                 f"asked for {log_cap}")
            return tree.cap
        return self._host.cap(tree, log_cap)

    def open_batch(self, tree, indices, log_cap: int):
        if not isinstance(tree, _TreeRef):
            return self._host.open_batch(tree, indices, log_cap)
        if log_cap != tree.log_cap:
            raise ValueError(f"table {tree.table}: opened with log_cap {log_cap}, "
                             f"its caps have {tree.log_cap}")
        idx = np.asarray(indices, dtype=np.int64)
        held = self._opened.get(tree.table)
        if held is None or not np.array_equal(held[0], idx):    # not prefetched: this table now
            self.prefetch({tree.table: idx})
            held = self._opened[tree.table]
        return held[1][tree.name]


def _join(st, ch, tr, deeps, dqs, stages: _JoinStages, spans) -> bytes:
    """The coordinator's join of a sharded proof: the main transcript ``tr`` (after the
    LogUp challenges), the tables' records and their DQs (:func:`prover.rounds.
    take_quotients` of the R4Deeps the workers sent: DQs from the object store, trees as
    :class:`_TreeRef`) -> the encoded proof: one FRI over all tables up to the queries,
    then every table's openings launched at once on the workers, then the proof's
    openings (through ``stages``, a :class:`_JoinStages`)."""
    from ..verifier.proof_format import encode
    from .rounds import r4_fri, r4_open
    fri = r4_fri(st, tr, deeps, dqs, stages, spans)
    stages.prefetch({d.index: fri.positions(s.log_lde) for d, s in zip(deeps, st.shapes)})
    return encode(r4_open(st, ch, deeps, fri, stages, spans))
