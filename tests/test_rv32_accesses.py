"""rv32/chips/rows.py Accesses.resolve (one sort, numpy) against a plain-Python reference
written here: every access's predecessor value and timestamp (or its address's initial
value at ts 0), every address's final value, and the builder's-bug errors, on random
executions' accesses split into parts at random."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.rv32.chips.common import MEMORY, REG
from steadfast.rv32.chips.rows import Accesses

OTHER = 7                                   # a space with neither registers nor an image


def _initial(space: int, addr: int, reg_init, image_wa, image_word) -> tuple:
    """An address's (lo, hi) before its first access: a register's from the register file
    (a cursor, 33 and up, whole in lo), a memory word's from the image, else zero."""
    if space == REG:
        v = int(reg_init[addr])
        return (v, 0) if addr >= 33 else (v & 0xFFFF, v >> 16)
    hit = np.flatnonzero(image_wa == addr) if space == MEMORY else ()
    if len(hit):
        w = int(image_word[hit[0]])
        return w & 0xFFFF, w >> 16
    return 0, 0


def _reference(space, addr, ts, lo, hi, olo, ohi, checked, *image):
    """(per access: pts, plo, phi; finals sorted by (space, addr)), or ("bad", None) when
    a checked access finds another value than it expects."""
    n = len(ts)
    pts, plo, phi = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    state: dict = {}
    for i in sorted(range(n), key=lambda i: (space[i], addr[i], ts[i])):
        a = (space[i], addr[i])
        pl, ph, pt = state[a] if a in state else _initial(*a, *image) + (0,)
        if checked[i] and (pl, ph) != (olo[i], ohi[i]):
            return "bad", None
        pts[i], plo[i], phi[i] = pt, pl, ph
        state[a] = (lo[i], hi[i], ts[i])
    finals = sorted((s, a, v[0], v[1], v[2]) for (s, a), v in state.items())
    return (pts, plo, phi), finals


@st.composite
def executions(draw):
    reg_init = np.array(draw(st.lists(st.integers(0, 2**32 - 1), min_size=36, max_size=36)),
                        np.int64)
    image_wa = np.array(sorted(draw(st.sets(st.integers(0, 40), max_size=12))), np.int64)
    image_word = np.array(draw(st.lists(st.integers(0, 2**32 - 1), min_size=image_wa.size,
                                        max_size=image_wa.size)), np.int64)
    n = draw(st.integers(0, 60))
    space = draw(st.lists(st.sampled_from([REG, MEMORY, OTHER]), min_size=n, max_size=n))
    addr = [draw(st.integers(0, 35 if s == REG else 45)) for s in space]
    ts = draw(st.lists(st.integers(1, 2**26 - 1), min_size=n, max_size=n, unique=True))
    lo = draw(st.lists(st.integers(0, 0xFFFF), min_size=n, max_size=n))
    hi = draw(st.lists(st.integers(0, 0xFFFF), min_size=n, max_size=n))
    checked = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=4)))
    return reg_init, image_wa, image_word, space, addr, ts, lo, hi, checked, cuts


def _honest_olds(space, addr, ts, lo, hi, *image):
    """What each access finds when the execution is consistent (its checked reads agree)."""
    n = len(ts)
    olo, ohi, state = [0] * n, [0] * n, {}
    for i in sorted(range(n), key=lambda i: ts[i]):
        a = (space[i], addr[i])
        olo[i], ohi[i] = state[a] if a in state else _initial(*a, *image)
        state[a] = (lo[i], hi[i])
    return olo, ohi


@settings(max_examples=150, deadline=None)
@given(executions(), st.booleans())
def test_resolve_matches_the_reference(ex, tamper):
    reg_init, image_wa, image_word, space, addr, ts, lo, hi, checked, cuts = ex
    olo, ohi = _honest_olds(space, addr, ts, lo, hi, reg_init, image_wa, image_word)
    if tamper and any(checked):
        i = checked.index(True)
        olo[i] ^= 1                         # one checked read expects another value
    acc = Accesses(reg_init, image_wa, image_word)
    handles = []
    for a, b in zip([0] + cuts, cuts + [len(ts)]):
        # each part's checked accesses under one handle, its unchecked ones under another
        for chk in (True, False):
            idx = np.array([i for i in range(a, b) if checked[i] == chk], np.int64)
            col = lambda v: np.asarray(v, np.int64)[idx]  # noqa: E731
            old = (col(olo), col(ohi)) if chk else None
            handles.append((acc.add(col(space), col(addr), col(ts), col(lo), col(hi), old),
                            idx))
    got, finals = _reference(space, addr, ts, lo, hi, olo, ohi, checked, reg_init,
                             image_wa, image_word)
    if got == "bad":
        with pytest.raises(ValueError, match="expects .* the memory holds"):
            acc.resolve()
        return
    acc.resolve()
    pts, plo, phi = got
    for h, idx in handles:
        p_ts, p_lo, p_hi, t = acc.previous(h)
        assert np.array_equal(p_ts, pts[idx]) and np.array_equal(p_lo, plo[idx])
        assert np.array_equal(p_hi, phi[idx]) and np.array_equal(t, np.asarray(ts)[idx])
    for s in (REG, MEMORY, OTHER):
        a, flo, fhi, ft = acc.finals(s)
        want = [f for f in finals if f[0] == s]
        assert [(s, int(x), int(y), int(z), int(w)) for x, y, z, w in zip(a, flo, fhi, ft)] \
            == want


def test_resolve_refuses_what_a_builder_gets_wrong():
    reg = np.arange(36, dtype=np.int64)
    acc = Accesses(reg, np.zeros(0, np.int64), np.zeros(0, np.int64))
    acc.add(REG, np.array([3, 3]), np.array([5, 5]), 0, 0, None)
    with pytest.raises(ValueError, match="two accesses to one address at one timestamp"):
        acc.resolve()
    acc = Accesses(reg, np.zeros(0, np.int64), np.zeros(0, np.int64))
    acc.add(REG, 2, 0, 0, 0, None)
    with pytest.raises(ValueError, match=r"a timestamp outside \[1, 2\^26\)"):
        acc.resolve()
    empty = Accesses(reg, np.zeros(0, np.int64), np.zeros(0, np.int64))
    empty.resolve()
    assert all(x.size == 0 for x in empty.finals(REG))
