"""kernels/selectors_host.py: the compiled selectors equal the numpy reference
(constraint_host._selectors, air.eval.selectors_on_coset's definition) on every shape
and shift tried, chunk boundaries included; a coset that meets H is refused (None) and
host_selectors then behaves as the reference does."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.kernels import constraint_host as CH
from steadfast.kernels import field
from steadfast.kernels.field import P
from steadfast.kernels.selectors_host import selectors_mont
from steadfast.verifier.protocol import SHIFT


def _reference(log_n, log_m, shift):
    return np.stack([field.to_mont_host(v) for v in CH._selectors(log_n, log_m, shift)])


@pytest.mark.parametrize("log_n,log_m", [(0, 0), (0, 3), (2, 2), (5, 8), (11, 13), (12, 14),
                                         (13, 13), (14, 15)])
def test_equals_the_reference_at_the_protocol_shift(log_n, log_m):
    got = selectors_mont(log_n, log_m, SHIFT)
    assert got.dtype == np.uint32 and got.shape == (4, 1 << log_m)
    assert np.array_equal(got, _reference(log_n, log_m, SHIFT))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10), st.integers(0, 3), st.integers(2, P - 1))
def test_equals_the_reference_at_any_shift(log_n, extra, shift):
    log_m = log_n + extra
    got = selectors_mont(log_n, log_m, shift)
    if got is None:                       # the coset meets H or its shift: rare, checked below
        return
    assert np.array_equal(got, _reference(log_n, log_m, shift))


def test_a_coset_meeting_h_is_refused_and_the_reference_decides():
    assert selectors_mont(3, 5, 1) is None             # shift 1: the coset is H's superset
    with CH._LOCK:
        CH._SEL.pop((3, 5, 1), None)
    try:
        want = _reference(3, 5, 1)
    except Exception as exc:                            # the reference's own error
        with pytest.raises(type(exc)):
            CH.host_selectors(3, 5, 1)
    else:
        assert np.array_equal(CH.host_selectors(3, 5, 1), want)
