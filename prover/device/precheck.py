"""The self-check's per-table part on the device pipeline, overlapped with device work
(:class:`Prechecker`; moved here from :mod:`prover.device.pipeline`)."""
from __future__ import annotations

import copy
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np


class Prechecker:
    """The self-check's per-table part, overlapped with device work (proof format 3).

    The verifier's per-table check (``verify_table``: the fork replayed to the table's
    digest, its proofs of work and the composition at z) reads only what a table's chain
    produces -- caps, terminal, opened values at z, nonces -- not its openings, which the
    join adds.  So each table is checked on a CPU thread as soon as its chain ends
    (:meth:`submit`), on a pristine copy of its fork, while the other tables still run on
    the device.  After the join (:meth:`finish`) a table whose early check passed and
    whose finished section carries exactly the checked values gets its
    ``table_check_key`` (over the section's final bytes) recorded; the prover's final
    check (``verify`` of the proof bytes) then skips exactly those tables' composition
    check.  A failure records nothing here: the final check re-runs that table."""

    FIELDS = ("public_values", "terminal", "ood_main", "ood_main_next",
              "ood_aux", "ood_aux_next", "ood_parts", "zeta_nonce", "deep_nonce")

    def __init__(self, st, ch, forks, stats):
        self.st, self.ch, self.forks, self.stats = st, ch, forks, stats
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="steadfast-precheck")
        self.futures = {}
        self.checked: dict = {}            # table index -> the TableProof fields checked
        self.lock = threading.Lock()

    def _chal(self) -> dict:
        return {k: np.asarray(v, np.uint64) for k, v in self.ch.challenges.items()}

    def _check(self, i: int, tp, commits) -> None:
        from ...verifier.verify import verify_table
        t0 = time.perf_counter()
        air, shape, params = self.st.airs[i], self.st.shapes[i], self.st.params
        try:
            verify_table(copy.deepcopy(self.forks[i]), air, shape, tp, params, self._chal(),
                         commits)
            ok = True
        except Exception:             # noqa: BLE001 -- any failure: the final check redoes it
            ok = False
        with self.lock:
            if ok:
                self.checked[i] = tp
            else:
                self.stats.precheck_failed.append(shape.name)
            self.stats.precheck_s += time.perf_counter() - t0

    def submit(self, i: int, deep, aux_cap, parts_cap) -> None:
        """Table i's chain ended (``deep``: its R4Deep; the mixed aux and parts caps its
        fork absorbed)."""
        from ...verifier.proof_format import Commitments, TableProof
        empty4 = np.zeros((0, 4), np.uint32)
        none = np.zeros((0, 0), np.uint32)
        nodes = np.zeros((0, 8), np.uint32)
        commits = Commitments(main_cap=nodes, aux_cap=np.asarray(aux_cap, np.uint32),
                              parts_cap=np.asarray(parts_cap, np.uint32), main_nodes=nodes,
                              aux_nodes=nodes, parts_nodes=nodes)
        ood = deep.ood
        tp = TableProof(
            log_n=self.st.shapes[i].log_n,
            public_values=np.asarray([int(v) for v in self.st.public_values[i]], np.uint32),
            terminal=(np.asarray(deep.terminal, np.uint32) if deep.terminal is not None
                      else np.zeros(0, np.uint32)),
            ood_main=ood[("main", False)],
            ood_main_next=ood.get(("main", True), empty4), ood_aux=ood.get(("aux", False), empty4),
            ood_aux_next=ood.get(("aux", True), empty4), ood_parts=ood[("parts", False)],
            zeta_nonce=int(deep.zeta_nonce), deep_nonce=int(deep.deep_nonce),
            main_rows=none, aux_rows=none, parts_rows=none)
        self.futures[i] = self.pool.submit(self._check, i, tp, commits)

    def finish(self, proof=None) -> None:
        """Wait for the checks; with the finished ``proof``, record the keys of the tables
        whose checked values are exactly those of their final section."""
        for f in self.futures.values():
            f.exception()                 # wait; _check records, never raises
        self.pool.shutdown(wait=True)
        if proof is None:
            return
        from ...verifier.proof_format import encode_section
        from ...verifier.verify import table_check_key
        t0 = time.perf_counter()
        for i, tp in sorted(self.checked.items()):
            section = proof.tables[i]
            if not all(np.array_equal(np.asarray(getattr(tp, f)), np.asarray(getattr(section, f)))
                       for f in self.FIELDS):
                self.stats.precheck_failed.append(self.st.shapes[i].name)
                continue
            key = table_check_key(copy.deepcopy(self.forks[i]), self.st.airs[i],
                                  encode_section(section), self.st.params, self._chal(),
                                  proof.commits)
            self.stats.precheck_keys.add(key)
        self.stats.precheck_s += time.perf_counter() - t0


__all__ = ["Prechecker"]
