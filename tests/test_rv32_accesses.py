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


def _reference(parts, reg_init, image_wa, image_word):
    """(per access in insertion order: pts, plo, phi; finals sorted by (space, addr))."""
    cols = [np.concatenate([p[k] for p in parts]) for k in range(8)]
    space, addr, ts, lo, hi, olo, ohi, chk = cols
    n = ts.size
    pts, plo, phi = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    state: dict = {}
    for i in sorted(range(n), key=lambda i: (int(space[i]), int(addr[i]), int(ts[i]))):
        a = (int(space[i]), int(addr[i]))
        if a in state:
            pl, ph, pt = state[a]
        else:
            pt, pl, ph = 0, 0, 0
            if a[0] == REG:
                v = int(reg_init[a[1]])
                pl, ph = (v, 0) if a[1] >= 33 else (v & 0xFFFF, v >> 16)
            elif a[0] == MEMORY:
                hit = np.flatnonzero(image_wa == a[1])
                if hit.size:
                    w = int(image_word[hit[0]])
                    pl, ph = w & 0xFFFF, w >> 16
        if chk[i] and (pl, ph) != (int(olo[i]), int(ohi[i])):
            return "bad", None
        pts[i], plo[i], phi[i] = pt, pl, ph
        state[a] = (int(lo[i]), int(hi[i]), int(ts[i]))
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


def _honest_olds(space, addr, ts, lo, hi, reg_init, image_wa, image_word):
    """What each access finds when the execution is consistent (its checked reads agree)."""
    n = len(ts)
    olo, ohi, state = [0] * n, [0] * n, {}
    for i in sorted(range(n), key=lambda i: ts[i]):
        a = (space[i], addr[i])
        if a not in state:
            if a[0] == REG:
                v = int(reg_init[a[1]])
                state[a] = (v, 0) if a[1] >= 33 else (v & 0xFFFF, v >> 16)
            elif a[0] == MEMORY and a[1] in set(image_wa.tolist()):
                w = int(image_word[list(image_wa).index(a[1])])
                state[a] = (w & 0xFFFF, w >> 16)
            else:
                state[a] = (0, 0)
        olo[i], ohi[i] = state[a]
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
    parts, handles = [], []
    for a, b in zip([0] + cuts, cuts + [len(ts)]):
        sl = slice(a, b)
        old = (np.array(olo[sl]), np.array(ohi[sl]))
        ck = np.array(checked[sl], bool)
        handles.append((acc.add(np.array(space[sl]), np.array(addr[sl]), np.array(ts[sl]),
                                np.array(lo[sl]), np.array(hi[sl]), old), sl))
        # the same part as the reference sees it: unchecked accesses as "old unknown"
        parts.append([np.asarray(x, np.int64) for x in (space[sl], addr[sl], ts[sl], lo[sl],
                                                        hi[sl], olo[sl], ohi[sl])] + [ck])
        acc._parts[-1][7] = ck              # per-access checks (add() checks all or none)
    got, finals = _reference(parts, reg_init, image_wa, image_word)
    if got == "bad":
        with pytest.raises(ValueError, match="expects .* the memory holds"):
            acc.resolve()
        return
    acc.resolve()
    pts, plo, phi = got
    for h, sl in handles:
        p_ts, p_lo, p_hi, t = acc.previous(h)
        assert np.array_equal(p_ts, pts[sl]) and np.array_equal(p_lo, plo[sl])
        assert np.array_equal(p_hi, phi[sl]) and np.array_equal(t, np.asarray(ts[sl]))
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
