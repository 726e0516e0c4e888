"""Fault injection behind the stages' steps: the stages a fault plan gets (``PROVER_FAULTS``).

:func:`prover.device.pipeline.make_stages` makes a :class:`FaultingStages` -- once, when
the configuration's plan (:mod:`prover.device.faults`) has a rule -- and a plain
:class:`prover.device.stages.DeviceStages` otherwise, so that the happy path never
passes a fault hook.  A :class:`FaultingStages` *is* the real stages: it wraps the steps
each stage is written as (the engine's work of one site, see the stages' module
docstrings) and injects the planned faults at their edges, with the same draws
(:meth:`prover.device.faults.FaultPlan.fires`: seed, proof, kind, site, table, attempt):

==============  =====================================  ====================================
site            ``corrupt-input`` (before the step)    ``corrupt`` (after the step)
==============  =====================================  ====================================
r1.main         the uploaded trace (``_upload_trace``)  the main LDE, committed as produced
r1.aux          the trace, before ``_build_aux``        the aux LDE, committed as produced
r2              the main LDE, else the aux LDE          the parts' coefficients and Q
r2.tree         the parts' coefficients                 the parts' LDE, committed as produced
r3              the opened coefficients                 one OOD value
r4.deep         the parts' LDE                          the DQ
r4.fri          the first layer committed               every combined input and fold
r4.open         the opened matrix (else the tree)       one opened row
==============  =====================================  ====================================

``race`` (r2 only) corrupts Q and the parts when this table's R2 window overlapped
another's; ``oom`` and ``lost`` are drawn per attempt by :class:`FaultingRecovery` at the
start of every device attempt of every site.  A ``corrupt-input`` fires at most once per
(table, site); ``corrupt`` and ``race`` draw attempt 0; nothing fires on a thread inside
:meth:`prover.device.stages.DeviceStages.no_injection` (an XCHECK post-mortem's rerun).
"""
from __future__ import annotations

import itertools

import numpy as np

from ...kernels.backend import DeviceLost
from ...kernels.field import P

from .faults import FaultPlan
from .join import DevTree, Layer
from .recovery import ForcedDecline, Recovery
from .residency import ResidentHandle
from .stages import DeviceStages

#: the site of each column matrix :meth:`DeviceStages._dev_commit_columns` commits
_COMMIT_SITE = {"main": "r1.main", "aux": "r1.aux"}


class FaultingRecovery(Recovery):
    """:class:`prover.device.recovery.Recovery` whose every device attempt first draws
    ``lost`` (-> :class:`~kernels.backend.DeviceLost`) and ``oom`` (-> a declined
    attempt) for its site, table and attempt number."""

    def run(self, site: str, table: str, device_fn, host_fn, inputs=()):
        attempts = itertools.count()

        def drawn():
            attempt = next(attempts)
            if self.faults.fires("lost", site, table, attempt, self.proof):
                raise DeviceLost(f"injected lost@{site}", injected=True)
            if self.faults.fires("oom", site, table, attempt, self.proof):
                raise ForcedDecline(f"injected oom@{site}")
            return device_fn()
        return super().run(site, table, drawn, host_fn, inputs)


class FaultingStages(DeviceStages):
    """:class:`DeviceStages` that inject the faults of ``faults`` (module docstring)."""

    def __init__(self, mem, engine, *, faults: FaultPlan, **kw):
        super().__init__(mem, engine, **kw)
        self.faults = faults
        self.recovery = FaultingRecovery(mem, faults, self.counters, self.timeline,
                                         force_downgrade=self.force_downgrade,
                                         proof=self.proof_id)
        self._injected: set = set()          # (table, site) whose corrupt-input fired

    # ------------------------------------------------------------------ the faults
    def _fires(self, kind: str, site: str, table: str) -> bool:
        return self.inject and self.faults.fires(kind, site, table, 0, self.proof_id)

    def _corrupt(self, h: ResidentHandle, site: str, table: str, axis: int) -> None:
        """Wrong values (+1) in the rows :meth:`FaultPlan.corruption_rows` picks, in place."""
        data = self.engine.download_view(h.device())
        moved = np.moveaxis(data, axis, 0).copy()
        rows = self.faults.corruption_rows(moved.shape[0], table, site)
        moved[rows] = ((moved[rows].astype(np.uint64) + 1) % P).astype(np.uint32)
        self.engine.upload_into(h.device(), np.ascontiguousarray(np.moveaxis(moved, 0, axis)))

    def _corrupt_input(self, site: str, table: str, h: ResidentHandle | None,
                       axis: int) -> None:
        """``corrupt-input@site``: a resident input corrupted in place (persistent)."""
        if h is None or not h.on_device or (table, site) in self._injected or not self.inject:
            return
        if self.faults.fires("corrupt-input", site, table, 0, self.proof_id):
            self._injected.add((table, site))
            self._corrupt(h, site, table, axis)
            self.timeline.instant("inject:corrupt-input", table, site=site, buffer=h.stage)

    def _corrupt_output(self, site: str, table: str, h: ResidentHandle, axis: int) -> None:
        """``corrupt@site``: wrong values in the step's device output (first run only)."""
        if self._fires("corrupt", site, table):
            self._corrupt(h, site, table, axis)
            self.timeline.instant("inject:corrupt", table, site=site, buffer=h.stage)

    def _corrupt_commit(self, site: str, table: str, lde_h: ResidentHandle,
                        nodes_h: ResidentHandle, root: np.ndarray) -> np.ndarray:
        """``corrupt@site`` at a commit: wrong values in the LDE the step produced,
        committed consistently (what a faulty LDE kernel gives: the Merkle kernel hashes
        what it wrote), so the tree still matches its LDE -> the (new) root."""
        if self._fires("corrupt", site, table):
            self._corrupt(lde_h, site, table, axis=1)
            root = self.engine.recommit(lde_h.device(), nodes_h.device())
            self.timeline.instant("inject:corrupt", table, site=site, buffer=lde_h.stage)
        return root

    # ------------------------------------------------------------------ the steps
    def _upload_trace(self, table, main):
        trace_h = super()._upload_trace(table, main)
        self._corrupt_input("r1.main", table, trace_h, axis=1)
        return trace_h

    def _dev_commit_columns(self, table, stage, evals_T_h, shape):
        lde_h, coeffs_h, nodes_h, root = super()._dev_commit_columns(table, stage, evals_T_h, shape)
        root = self._corrupt_commit(_COMMIT_SITE[stage], table, lde_h, nodes_h, root)
        return lde_h, coeffs_h, nodes_h, root

    def _build_aux(self, table, air, shape, main, public_values, challenges, trace_h):
        self._corrupt_input("r1.aux", table, trace_h, axis=1)
        return super()._build_aux(table, air, shape, main, public_values, challenges, trace_h)

    def _quotient_window(self, table, air, shape, main, prep_lde, aux, *rest):
        for c in (main, aux):
            if c is not None:
                self._corrupt_input("r2", table, c.lde_h, axis=1)
        q_h, blocks_h, win = super()._quotient_window(table, air, shape, main, prep_lde, aux,
                                                      *rest)
        if self._fires("race", "r2", table) and self.r2_windows.overlapped(win):
            self._corrupt(q_h, "r2", table, axis=1)
            self._corrupt(blocks_h, "r2", table, axis=1)
            self.timeline.instant("inject:race", table, site="r2")
        if self._fires("corrupt", "r2", table):
            self._corrupt(blocks_h, "r2", table, axis=1)
        self._corrupt_output("r2", table, q_h, axis=1)
        return q_h, blocks_h, win

    def _commit_parts(self, table, blocks_h, shape):
        self._corrupt_input("r2.tree", table, blocks_h, axis=1)
        lde_h, nodes_h, root = super()._commit_parts(table, blocks_h, shape)
        return lde_h, nodes_h, self._corrupt_commit("r2.tree", table, lde_h, nodes_h, root)

    def _ood_values(self, table, coeffs_h, point):
        self._corrupt_input("r3", table, coeffs_h, axis=1)
        vals = super()._ood_values(table, coeffs_h, point)
        if self._fires("corrupt", "r3", table):
            vals = vals.copy()
            vals[0, 0] = (int(vals[0, 0]) + 1) % P
            self.timeline.instant("inject:corrupt", table, site="r3", buffer="ood")
        return vals

    def _deep_values(self, table, shape, groups, z, lam):
        self._corrupt_input("r4.deep", table, groups[-1][0].lde_h, axis=1)   # the parts LDE
        h = super()._deep_values(table, shape, groups, z, lam)
        self._corrupt_output("r4.deep", table, h, axis=0)
        return h

    def _combine(self, table, devs, mu, log_h):
        h = super()._combine(table, devs, mu, log_h)
        self._corrupt_output("r4.fri", table, h, axis=0)
        return h

    def _commit_layer(self, table, values: Layer, width):
        self._corrupt_input("r4.fri", table, values.h, axis=0)
        return super()._commit_layer(table, values, width)

    def _fold(self, table, values, beta, log_arity, log_height, roll_d):
        h = super()._fold(table, values, beta, log_arity, log_height, roll_d)
        self._corrupt_output("r4.fri", table, h, axis=0)
        return h

    def _gather_opening(self, tree: DevTree, idx, node_rows):
        # the opened matrix is what the proof reads here (format 6: the table tree's own
        # nodes are not sent -- the round's mixed tree's are)
        t = tree.table
        if tree.rows_h is not None:
            self._corrupt_input("r4.open", t, tree.rows_h, axis=1)
        else:
            self._corrupt_input("r4.open", t, tree.nodes, axis=0)
        rows, nodes = super()._gather_opening(tree, idx, node_rows)
        if self._fires("corrupt", "r4.open", t) and rows.size:
            rows = np.array(rows)
            rows[0, 0] = (int(rows[0, 0]) + 1) % P
            self.timeline.instant("inject:corrupt", t, site="r4.open", buffer="openings")
        return rows, nodes


__all__ = ["FaultingRecovery", "FaultingStages"]
