"""The LogUp h columns (kernels/constraint_host.py ``logup_h_host``: batch inversion,
Montgomery products, row blocks) against independent references, bit for bit:

* ``logup_h_reference``: the previous compiled path (one extension-field inversion per
  fraction, canonical arithmetic), kept verbatim below (commit e99b0f8);
* a naive Python-int evaluation of h_b[i] = sum_(t in b) sign_t m_t[i] / d_t[i] with
  d_t = gamma - (bus_t + sum_j beta^(j+1) v_tj) (pow(., p-2) inversions in the quartic
  extension), from ``air.interaction_rows``;
* ``HostStages.aux_build`` with ``PROVER_HOST_QUOTIENT=numpy`` (the numpy loop).

AIRs: the air/examples LogUp AIRs, randomly generated AIRs (random interaction counts,
arities, signs, buses, lookup batches), the RV32IM tables of a real
program; block sizes that
straddle the trace height; a vanishing denominator anywhere in a batch raises."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numba import njit, prange

from steadfast.air import AirBuilder
from steadfast.air import examples as ex
from steadfast.air import field as AF
from steadfast.kernels import constraint_host as CH
from steadfast.kernels import field

P = AF.P

# ----------------------------------------------------------------------------- reference
# verbatim copy of the e99b0f8 kernel (one _cef_inv per fraction, canonical arithmetic)

_HF = field.build(njit(inline="always"))
_cadd, _csub, _cmul, _cneg = _HF.add, _HF.sub, _HF.mul, _HF.neg
_cef_inv, _cef_mul_base = _HF.ef_inv, _HF.ef_mul_base


@njit(cache=True, parallel=True)
def _logup_h_kernel_ref(O, it_pos, it_len, it_bus, it_sign, it_batch, bpow, nbatch, ntasks, H,
                        flag):
    n = O.shape[1]
    T = it_pos.shape[0]
    per = (n + ntasks - 1) // ntasks
    for task in prange(ntasks):
        for i in range(task * per, min(n, (task + 1) * per)):
            for t in range(T):
                f0 = it_bus[t]
                f1 = np.uint32(0)
                f2 = np.uint32(0)
                f3 = np.uint32(0)
                p0 = it_pos[t]
                for j in range(it_len[t]):
                    v = O[p0 + j, i]
                    f0 = _cadd(f0, _cmul(bpow[j + 1, 0], v))
                    f1 = _cadd(f1, _cmul(bpow[j + 1, 1], v))
                    f2 = _cadd(f2, _cmul(bpow[j + 1, 2], v))
                    f3 = _cadd(f3, _cmul(bpow[j + 1, 3], v))
                d0 = _csub(bpow[0, 0], f0)
                d1 = _csub(bpow[0, 1], f1)
                d2 = _csub(bpow[0, 2], f2)
                d3 = _csub(bpow[0, 3], f3)
                if d0 == 0 and d1 == 0 and d2 == 0 and d3 == 0:
                    flag[0] = 1
                m = O[p0 + it_len[t], i]
                if it_sign[t] < 0:
                    m = _cneg(m)
                i0, i1, i2, i3 = _cef_inv(d0, d1, d2, d3)
                e0, e1, e2, e3 = _cef_mul_base(i0, i1, i2, i3, m)
                b = it_batch[t]
                H[b, 0, i] = _cadd(H[b, 0, i], e0)
                H[b, 1, i] = _cadd(H[b, 1, i], e1)
                H[b, 2, i] = _cadd(H[b, 2, i], e2)
                H[b, 3, i] = _cadd(H[b, 3, i], e3)


def logup_h_reference(air, main, public_values, challenges: dict) -> list:
    """The e99b0f8 ``logup_h_host``: its per-fraction kernel on the interaction values and
    multiplicities, here from the numpy evaluator (``air.interaction_rows``)."""
    import numba
    from steadfast.air import interaction_rows
    main = np.asarray(main)
    n = main.shape[0]
    its = air.interactions
    rows = interaction_rows(air, main.astype(np.uint64), public_values)
    O = np.concatenate([np.concatenate([vals, mult[None]]) for vals, mult in rows]).astype(np.uint32)
    threads = numba.get_num_threads()
    batch_of = {id(it): b for b, batch in enumerate(air.lookup_batches) for it in batch}
    pos, p = [], 0
    for it in its:
        pos.append(p)
        p += len(it.values) + 1
    arity = max(len(it.values) for it in its)
    beta = CH._ef4(challenges["logup_beta"], "logup_beta").reshape(4, 1)
    bpow = np.empty((arity + 1, 4), np.uint32)
    bpow[0] = CH._ef4(challenges["logup_gamma"], "logup_gamma")
    bpow[1:] = AF.ef_mul(AF.ef_powers(beta, arity), beta).T
    B = len(air.lookup_batches)
    H = np.zeros((B, 4, n), dtype=np.uint32)
    flag = np.zeros(1, np.uint32)
    _logup_h_kernel_ref(O, np.asarray(pos, np.int64),
                        np.asarray([len(it.values) for it in its], np.int64),
                        np.asarray([it.bus_id % P for it in its], np.uint32),
                        np.asarray([it.sign for it in its], np.int64),
                        np.asarray([batch_of[id(it)] for it in its], np.int64), bpow,
                        np.int64(B), np.int64(max(1, min(n, 4 * threads))), H, flag)
    if flag[0]:
        raise ValueError(f"{air.name}: a LogUp denominator vanished")
    return [H[b].astype(np.uint64) for b in range(B)]


# ----------------------------------------------------------------------------- naive

def _ef_mul(a, b):
    c = [0] * 7
    for i in range(4):
        for j in range(4):
            c[i + j] += a[i] * b[j]
    return [(c[k] + 11 * (c[k + 4] if k < 3 else 0)) % P for k in range(4)]


def _ef_pow(a, e):
    r = [1, 0, 0, 0]
    while e:
        if e & 1:
            r = _ef_mul(r, a)
        a = _ef_mul(a, a)
        e >>= 1
    return r


def naive_h(air, main, public_values, challenges) -> list:
    """h_b[i] = sum_(t in b) sign_t m_t[i] / d_t[i] in Python integers (EF inverse by
    Fermat: a^(p^4 - 2)); None when a denominator vanishes."""
    from steadfast.air import interaction_rows
    rows = interaction_rows(air, np.asarray(main, np.uint64), public_values)
    beta = [int(x) for x in challenges["logup_beta"]]
    gamma = [int(x) for x in challenges["logup_gamma"]]
    n = main.shape[0]
    index = {id(it): k for k, it in enumerate(air.interactions)}
    out = []
    for batch in air.lookup_batches:
        h = np.zeros((4, n), np.uint64)
        for it in batch:
            vals, mult = rows[index[id(it)]]
            for i in range(n):
                fp, bp = [it.bus_id % P, 0, 0, 0], beta
                for v in vals[:, i]:
                    fp = [(x + y * int(v)) % P for x, y in zip(fp, bp)]
                    bp = _ef_mul(bp, beta)
                d = [(g - f) % P for g, f in zip(gamma, fp)]
                if not any(d):
                    return None
                m = int(mult[i]) * it.sign % P
                e = [x * m % P for x in _ef_pow(d, P ** 4 - 2)]
                h[:, i] = [(int(x) + y) % P for x, y in zip(h[:, i], e)]
        out.append(h)
    return out


def rnd(rng, *shape):
    return rng.integers(0, P, shape, dtype=np.uint64).astype(np.uint32)


def chal_of(rng):
    return {"logup_beta": rnd(rng, 4), "logup_gamma": rnd(rng, 4)}


def same(a, b):
    return len(a) == len(b) and all(x.dtype == y.dtype == np.uint64 and np.array_equal(x, y)
                                    for x, y in zip(a, b))


# ----------------------------------------------------------------------------- AIRs

def random_air(seed: int, log_blowup: int):
    """An AIR with 1..7 interactions: random buses, signs, arities 1..5, values that are
    columns, constants, public values, sums and products; multiplicities 1, a column or
    a product (batching depends on the degrees and on log_blowup)."""
    rng = np.random.default_rng(seed)
    b = AirBuilder(f"rand{seed}", public=("p0", "p1"))
    width = int(rng.integers(1, 6))
    cols = b.main_cols("c", width)
    pvs = [b.pv("p0"), b.pv("p1")]

    def term():
        k = int(rng.integers(0, 5))
        x = cols[int(rng.integers(width))]
        if k == 0:
            return x
        if k == 1:
            return x + int(rng.integers(0, P))
        if k == 2:
            return x * cols[int(rng.integers(width))]
        if k == 3:
            return pvs[int(rng.integers(2))] - x
        return int(rng.integers(0, P)) + 0 * x

    for _ in range(int(rng.integers(1, 8))):
        vals = [term() for _ in range(int(rng.integers(1, 6)))]
        mk = int(rng.integers(0, 3))
        mult = 1 if mk == 0 else (cols[int(rng.integers(width))] if mk == 1 else
                                  cols[0] * cols[-1] + 3)
        bus = ["a", "b", "c"][int(rng.integers(3))]
        (b.send if rng.random() < 0.5 else b.receive)(bus, vals, multiplicity=mult)
    b.assert_zero(cols[0] - cols[0])
    return b.build(log_blowup=log_blowup)


EXAMPLES = {"adder": ex.adder_air, "range": lambda: ex.range_air(4), "pairs": lambda: ex.pairs_air(4)}


def example_inputs(name, log_n, rng):
    air = EXAMPLES[name]()
    if air.fixed_height is not None:
        log_n = air.fixed_height.bit_length() - 1
    n = 1 << log_n
    return air, rnd(rng, n, air.main_width), [int(x) for x in rnd(rng, air.num_public)]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("block", [None, 1, 3, 7, 16])
def test_examples_match_reference_and_naive(name, block):
    rng = np.random.default_rng(len(name) * 7 + (block or 0))
    air, main, pv = example_inputs(name, 4, rng)
    chal = chal_of(rng)
    got = CH.logup_h_host(air, main, pv, chal, block=block)
    assert len(got) == len(air.lookup_batches) and got[0].shape == (4, main.shape[0])
    assert same(got, logup_h_reference(air, main, pv, chal))
    assert same(got, naive_h(air, main, pv, chal))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), log_n=st.integers(0, 5), log_blowup=st.integers(1, 2),
       block=st.sampled_from([None, 1, 2, 3, 5, 8, 64]))
def test_property_random_airs(seed, log_n, log_blowup, block):
    air = random_air(seed, log_blowup)
    rng = np.random.default_rng(seed ^ 0x5EED)
    main = rnd(rng, 1 << log_n, air.main_width)
    pv = [int(x) for x in rnd(rng, 2)]
    chal = chal_of(rng)
    got = CH.logup_h_host(air, main, pv, chal, block=block)
    assert same(got, logup_h_reference(air, main, pv, chal))
    if log_n <= 3:
        assert same(got, naive_h(air, main, pv, chal))


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), block=st.sampled_from([None, 1, 3, 32, 100]))
def test_property_large_heights(seed, block):
    """Several row blocks per task and a partial last block (heights 2^9 .. 2^11)."""
    air = random_air(seed, 1 + seed % 2)
    rng = np.random.default_rng(seed)
    main = rnd(rng, 1 << int(9 + seed % 3), air.main_width)
    pv = [int(x) for x in rnd(rng, 2)]
    chal = chal_of(rng)
    assert same(CH.logup_h_host(air, main, pv, chal, block=block),
                logup_h_reference(air, main, pv, chal))


def test_numpy_path_agrees():
    """HostStages.aux_build's numpy loop (PROVER_HOST_QUOTIENT=numpy) and the compiled h
    columns give the same aux trace and terminal on random AIRs."""
    from steadfast.prover.core.stages import HostStages
    from steadfast.verifier.proof_format import Params
    from steadfast.verifier.protocol import table_shape
    host = HostStages()
    for seed in range(6):
        air = random_air(seed, 1)
        rng = np.random.default_rng(seed)
        shape = table_shape(air, 4, Params(log_blowup=1, num_queries=2, pow_bits=0))
        main = rnd(rng, shape.n, air.main_width)
        pv = [int(x) for x in rnd(rng, 2)]
        chal = chal_of(rng)
        out = []
        for mode in ("compiled", "numpy"):
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv(CH.ENV, mode)
                out.append(host.aux_build(air, shape, main, pv, chal))
        assert np.array_equal(out[0][0], out[1][0]) and np.array_equal(out[0][1], out[1][1])


def test_mutations_are_seen():
    """The comparison can fail: one trace cell, one challenge coefficient, one sign."""
    rng = np.random.default_rng(3)
    air, main, pv = example_inputs("adder", 5, rng)
    chal = chal_of(rng)
    base = CH.logup_h_host(air, main, pv, chal)
    main2 = main.copy()
    main2[17, 1] = (int(main2[17, 1]) + 1) % P
    chal2 = {k: v.copy() for k, v in chal.items()}
    chal2["logup_beta"][3] = (int(chal2["logup_beta"][3]) + 1) % P
    for m, c in ((main2, chal), (main, chal2)):
        assert not same(CH.logup_h_host(air, m, pv, c), base)
    h = CH.logup_h_host(air, main2, pv, chal)
    changed = sorted({int(i) for x, y in zip(h, base) for i in np.nonzero(np.any(x != y, axis=0))[0]})
    assert changed == [17]                                              # that row only


def _vanishing_air():
    b = AirBuilder("vanish")
    x, y, z, m = b.main("x"), b.main("y"), b.main("z"), b.main("m")
    b.send("u", [x], multiplicity=m)
    b.send("v", [x, y], multiplicity=m)
    b.receive("w", [y, z, x], multiplicity=m)
    b.send("v", [z + 1, y], multiplicity=1)
    return b.build(log_blowup=2)


@pytest.mark.parametrize("block", [None, 1, 4, 5, 64])
@pytest.mark.parametrize("row", [0, 13, 31, 37, 63])
@pytest.mark.parametrize("which", [1, 2, 3])
def test_vanishing_denominator_inside_a_batch(block, row, which):
    """gamma = the fingerprint of one tuple on one row (interaction ``which``, in the
    middle of a batch and of a row block): ValueError, as the reference."""
    air = _vanishing_air()
    assert any(len(bt) > 1 for bt in air.lookup_batches)
    rng = np.random.default_rng(row * 10 + which)
    n = 64
    main = rnd(rng, n, 4)
    beta = rnd(rng, 4)
    it = air.interactions[which]
    from steadfast.air import interaction_rows
    vals, _ = interaction_rows(air, main.astype(np.uint64), [])[which]
    fp, bp = [it.bus_id % P, 0, 0, 0], [int(x) for x in beta]
    for v in vals[:, row]:
        fp = [(a + c * int(v)) % P for a, c in zip(fp, bp)]
        bp = _ef_mul(bp, [int(x) for x in beta])
    chal = {"logup_beta": beta, "logup_gamma": np.array(fp, np.uint32)}
    with pytest.raises(ValueError, match="vanished"):
        CH.logup_h_host(air, main, [], chal, block=block)
    with pytest.raises(ValueError, match="vanished"):
        logup_h_reference(air, main, [], chal)
    assert naive_h(air, main, [], chal) is None
    # the same inputs with another gamma: no error, equal to the reference
    chal["logup_gamma"] = rnd(rng, 4)
    assert same(CH.logup_h_host(air, main, [], chal, block=block),
                logup_h_reference(air, main, [], chal))


def test_rv32_tables_on_a_small_program():
    """Every RV32IM table with interactions (17 of 18) on the traces of tests/
    rv32_samples.py's all-classes program (every chip, memory, io, a Poseidon2 call), at
    the slots the chooser picks."""
    from rv32_samples import all_classes
    _, _, tr = all_classes()
    rng = np.random.default_rng(9)
    seen = 0
    for air, trace, pv in zip(tr.airs, tr.traces, tr.table_public_values):
        if not air.interactions:
            continue
        chal = chal_of(rng)
        trace = np.asarray(trace, dtype=np.uint32)
        for block in (None, 48):
            assert same(CH.logup_h_host(air, trace, list(pv), chal, block=block),
                        logup_h_reference(air, trace, list(pv), chal)), air.name
        seen += 1
    assert seen >= 17


def test_block_argument_checked():
    rng = np.random.default_rng(0)
    air, main, pv = example_inputs("adder", 3, rng)
    for bad in (0, -1, 1 << 17):
        with pytest.raises(ValueError, match="block"):
            CH.logup_h_host(air, main, pv, chal_of(rng), block=bad)


def test_trace_layouts_and_dtypes():
    """A column-major trace (the kernel reads a column view of it), a C-ordered one and an
    int64 one give the same columns."""
    rng = np.random.default_rng(4)
    air = random_air(11, 1)
    main = rnd(rng, 64, air.main_width)
    pv = [int(x) for x in rnd(rng, 2)]
    chal = chal_of(rng)
    want = logup_h_reference(air, main, pv, chal)
    for m in (main, np.asfortranarray(main), main.astype(np.int64),
              np.ascontiguousarray(main.T).T):
        assert same(CH.logup_h_host(air, m, pv, chal, block=24), want)
