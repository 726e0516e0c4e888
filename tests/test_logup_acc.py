"""kernels/logup_acc.py ``aux_rows``: the LogUp aux rows and terminal from the batches' h
columns, compiled -- checked against Python integers (the accumulator's definition) and
against the numpy path it replaced (``logup_accumulator`` and the assembly of
``HostStages.aux_build``), with the field's edge values."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.air.field import P
from steadfast.air import field as F
from steadfast.kernels.logup_acc import aux_rows
from steadfast.prover.core.stages import logup_accumulator


def _h(seed: int, B: int, n: int) -> np.ndarray:
    r = np.random.default_rng(seed)
    H = r.integers(0, P, (B, 4, n), dtype=np.uint32)
    edge = r.random((B, 4, n)) < 0.2
    H[edge] = r.choice(np.array([0, 1, P - 1], np.uint32), int(edge.sum()))
    return H


def _numpy_path(H):
    hs = [H[b].astype(np.uint64) for b in range(H.shape[0])]
    total = hs[0]
    for h in hs[1:]:
        total = F.ef_add(total, h)
    acc, u = logup_accumulator(total)
    cols = hs[:-1] + [acc]
    aux = np.empty((H.shape[2], 4 * len(cols)), np.uint32)
    for k, c in enumerate(cols):
        aux[:, 4 * k:4 * k + 4] = c.T
    return aux, u


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.integers(0, 9), st.integers(0, 2**32 - 1))
def test_equals_the_numpy_path(B, log_n, seed):
    H = _h(seed, B, 1 << log_n)
    aux, u = aux_rows(H)
    want_aux, want_u = _numpy_path(H)
    assert aux.dtype == np.uint32 and u.dtype == np.uint32
    assert np.array_equal(aux, want_aux) and np.array_equal(u, want_u)


@pytest.mark.parametrize("B,log_n", [(1, 0), (1, 3), (3, 4), (6, 5)])
def test_the_definition_in_python_integers(B, log_n):
    """aux keeps h_0 .. h_(B-2) as given; acc[0] = 0; acc[i+1] - acc[i] = r_i - U
    cyclically with r_i the sum of every batch's h on row i; n U = sum_i r_i."""
    n = 1 << log_n
    H = _h(B * 100 + log_n, B, n)
    aux, u = aux_rows(H)
    assert aux.shape == (n, 4 * B)
    for b in range(B - 1):
        assert np.array_equal(aux[:, 4 * b:4 * b + 4], H[b].T)
    for c in range(4):
        r = [sum(int(H[b, c, i]) for b in range(B)) for i in range(n)]
        acc = [int(v) for v in aux[:, 4 * (B - 1) + c]]
        assert acc[0] == 0 and all(0 <= v < P for v in acc)
        for i in range(n):
            assert (acc[(i + 1) % n] - acc[i] - r[i] + int(u[c])) % P == 0
        assert (n * int(u[c]) - sum(r)) % P == 0 and 0 <= int(u[c]) < P


def test_bad_shapes_are_refused():
    for bad in (np.zeros((0, 4, 4), np.uint32), np.zeros((2, 3, 4), np.uint32),
                np.zeros((4, 4), np.uint32), np.zeros((2, 4, 0), np.uint32)):
        with pytest.raises(ValueError, match="aux_rows"):
            aux_rows(bad)


@pytest.mark.parametrize("B,n", [(2, 4 * 4096), (3, 3 * 4096 + 5), (1, 4096 + 1)])
def test_several_blocks_equal_one_pass(B, n):
    """Rows beyond one block (kernels/logup_acc.BLOCK): each block starts from the prefix of
    the blocks before it and from (k BLOCK) U -- the same rows as the numpy path."""
    from steadfast.kernels import logup_acc
    assert n > logup_acc.BLOCK
    H = _h(n + B, B, n)
    aux, u = aux_rows(H)
    want_aux, want_u = _numpy_path(H)
    assert np.array_equal(aux, want_aux) and np.array_equal(u, want_u)
