"""prover/common/stats.table_stats: the seconds each round spent on each table, summed from
the span records -- against the direct reading (every record scanned for every table),
which it replaced by one grouped pass (quadratic in a block's table count before)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings, strategies as st

from steadfast.prover.common.stats import table_stats

ROUNDS = ["r1_main", "r1_aux", "r2_quotient", "grind", "r3_ood", "r4_deep", "table"]


def _direct(airs, records):
    out = []
    for air in airs:
        per: dict = {}
        for name, tab, s in records:
            if tab == air.name and name != "table":
                per[name] = per.get(name, 0.0) + s
        out.append(per)
    return out


@settings(max_examples=100, deadline=None)
@given(n=st.integers(0, 12),
       recs=st.lists(st.tuples(st.sampled_from(ROUNDS), st.integers(0, 14),
                               st.floats(0, 10, allow_nan=False)), max_size=80))
def test_grouped_sums_equal_the_direct_reading(n, recs):
    airs = [SimpleNamespace(name=f"t{i}", main_width=i + 1, aux_width=i % 3, num_parts=2)
            for i in range(n)]
    traces = [np.zeros((1 << (i % 5), 1), np.uint32) for i in range(n)]
    records = [(name, f"t{tab}", s) for name, tab, s in recs]     # t12..t14: no such table
    got = table_stats(airs, traces, records)
    assert [t.name for t in got] == [a.name for a in airs]
    assert [t.rows for t in got] == [tr.shape[0] for tr in traces]
    want = _direct(airs, records)
    for t, w in zip(got, want):
        assert list(t.seconds.items()) == list(w.items())          # same sums, same order
