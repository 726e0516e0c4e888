"""BYTES' multiplicities (rv32/traces.py ``_lookup_counts``): every send of every table,
accumulated once per bus at the end, against a reference that evaluates each
interaction through the check mode and bincounts its sends on its own -- and the counts balance every bus
(air.check_traces), while one count off is a LookupImbalance."""
import numpy as np
import pytest

from steadfast.air import LookupImbalance, check_traces
from steadfast.air.check import interaction_rows
from steadfast.rv32.chips import bytes as bytes_chip
from steadfast.rv32.tables import INDEX
from steadfast.rv32.traces import _lookup_counts, build_traces

import rv32_samples as S


def _reference(airs, traces, pvs) -> dict:
    """Each interaction's sends on its own, through the check mode's evaluation
    (air.check.interaction_rows, the AIR's whole interaction program), one bincount each."""
    counts = {bus: np.zeros(bytes_chip.SIZE, np.int64) for bus in bytes_chip.BUSES}
    for air, trace, pv in zip(airs, traces, pvs):
        for it, (vals, mult) in zip(air.interactions, interaction_rows(air, trace, pv)):
            if it.bus not in counts or it.sign <= 0:
                continue
            m = mult.astype(np.int64)
            sent = m != 0
            if sent.any():
                rows = bytes_chip.row_of(it.bus, [v[sent].astype(np.int64) for v in vals])
                counts[it.bus] += np.bincount(rows, weights=m[sent],
                                              minlength=bytes_chip.SIZE).astype(np.int64)
    return counts


@pytest.mark.parametrize("objective", ["size", "cells"])
def test_counts_match_the_per_interaction_reference_and_balance(objective):
    prog, ex, tr = S.all_classes()
    tr = build_traces(prog, ex, max_cycles=1000, slot_objective=objective)
    airs, traces, pvs = list(tr.airs), list(tr.traces), [list(p) for p in tr.table_public_values]
    got = _lookup_counts(airs, traces, pvs)
    ref = _reference(airs, traces, pvs)
    assert set(got) == set(ref)
    for bus in ref:
        np.testing.assert_array_equal(got[bus], ref[bus])
    assert sum(int(c.sum()) for c in got.values()) > 0
    np.testing.assert_array_equal(traces[INDEX["bytes"]], bytes_chip.bytes_trace(got))
    check_traces(airs, traces, pvs)
    bad = [t.copy() for t in traces]
    row = int(np.flatnonzero(bad[INDEX["bytes"]][:, 0])[0])
    bad[INDEX["bytes"]][row, 0] += 1
    with pytest.raises(LookupImbalance):
        check_traces(airs, bad, pvs)
