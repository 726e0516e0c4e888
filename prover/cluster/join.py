"""The coordinator's side of a sharded proof (proof format 6, :mod:`prover.cluster`): the
tables' committed matrices stay on the workers; the coordinator builds the three
mixed-height trees (main, aux, parts) over the leaf digests the workers send, folds one
FRI over their DQs and asks the workers for their rows at the query positions.

* :class:`_TreeRef` -- a table tree held by a worker, as the coordinator sees it: which
  table and tree, and its own cap.
* :func:`mixed_tree` -- a round's mixed-height tree over the leaf digests the workers
  sent (the same cap and multiproofs as one machine's :func:`prover.core.rounds.mixed_commit`).
* :class:`_JoinStages` -- the coordinator's stages for the join: host stages for the FRI,
  while a :class:`_TreeRef`'s rows come from the worker holding the tree.
* :func:`_join` -- the join itself: :func:`prover.core.rounds.r4_fri` (the one FRI, up to the
  queries), then every table's openings launched on the workers at once
  (:meth:`_JoinStages.prefetch`, at :meth:`prover.core.rounds.R4Fri.positions`), then
  :func:`prover.core.rounds.r4_open` with the mixed trees' multiproofs.  The same functions as
  one machine: the same bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class _TreeRef:
    """A table tree held by a worker, as the coordinator's join sees it: which table and
    tree, and its own cap (computed in the worker when it committed the matrix)."""
    table: int
    name: str
    log_cap: int
    cap: np.ndarray


def mixed_tree(st, leaves, spans=None, kind: str = ""):
    """One round's mixed-height tree on the coordinator (:func:`prover.core.rounds.mixed_tree`,
    as one machine's :func:`prover.core.rounds.mixed_commit`): over the leaf digests the
    workers sent (through the object store: made contiguous uint32 here), unpruned -- the
    coordinator holds digests, not rows."""
    from ..core.rounds import mixed_tree as _mixed_tree
    return _mixed_tree(st, [None if lv is None else np.ascontiguousarray(lv, np.uint32)
                            for lv in leaves], spans, kind)


_NO_NODES = np.zeros((0, 8), np.uint32)


class _JoinStages:
    """The coordinator's stages for the join (:func:`prover.core.rounds.r4_fri`,
    :func:`prover.core.rounds.r4_open`): host stages for the FRI over the tables' DQs, except
    that ``open_batch`` on a :class:`_TreeRef` answers from the worker that holds the
    tree: the rows of ``opener({table: indices})`` (one piece per table opening all its
    trees' rows; :meth:`prefetch` launches every table's at once) and no nodes (format 6:
    the nodes are the mixed trees', built here); ``cap`` on one is the cap it carries."""

    def __init__(self, opener):
        from ..core.stages import HostStages
        self._host = HostStages()
        self._opener = opener              # {table: indices} -> {table: (indices, {tree: rows})}
        self._opened: dict = {}            # table -> (indices, {tree: rows or None})

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

    def open_rows(self, tree, indices, log_cap: int, cached=None):
        """A table's opened rows (:meth:`prover.core.stages.HostStages.open_rows`): from the
        worker holding the tree for a :class:`_TreeRef`."""
        if cached is not None:
            return cached
        return self.open_batch(tree, indices, log_cap)[0]

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
        return held[1][tree.name], _NO_NODES


def _join(st, ch, tr, deeps, dqs, stages: _JoinStages, spans, mixed) -> bytes:
    """The coordinator's join of a sharded proof: the main transcript ``tr`` (after the
    LogUp challenges), the tables' records and their DQs (:func:`prover.core.rounds.
    take_quotients` of the R4Deeps the workers sent: DQs from the object store, trees as
    :class:`_TreeRef`), the three mixed trees (:class:`prover.core.rounds.Mixed`, built here)
    -> the encoded proof: one FRI over all tables up to the queries, then every table's
    row openings launched at once on the workers, then the proof's openings (through
    ``stages``, a :class:`_JoinStages`; the mixed multiproofs from ``mixed``)."""
    from ...verifier.proof_format import encode
    from ..core.rounds import r4_fri, r4_open
    fri = r4_fri(st, tr, deeps, dqs, stages, spans)
    stages.prefetch({d.index: fri.positions(s.log_lde) for d, s in zip(deeps, st.shapes)})
    return encode(r4_open(st, ch, deeps, fri, stages, spans, mixed))
