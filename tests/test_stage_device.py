"""Device stage kernels (kernels/stage_device.py, kernels/constraint_device.py) against
HostStages, bit for bit, under the CUDA simulator (tests/conftest.py switches it on).

Sizes are small (the simulator runs every thread as Python) and block sizes are small
too, so that every launch straddles block edges (and the scan recurses)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from numba import cuda

import steadfast.air as airlib
from steadfast.air import AirBuilder
from steadfast.air import examples as ex
from steadfast.air import field as AF
from steadfast.kernels import constraint_device as CD
from steadfast.kernels import devicelib
from steadfast.kernels import stage_device as SD
from steadfast.kernels.hostlib import ef_inverse
from steadfast.kernels.ntt_host import bit_reverse_permutation as brp
from steadfast.prover.core.stages import Committed, HostStages
from steadfast.verifier.proof_format import Params
from steadfast.verifier.protocol import SHIFT, deep_groups, table_shape

P = AF.P
HOST = HostStages()
#: HostStages keeps committed matrices either as natural columns ``lde`` (c, N) or as
#: bit-reversed rows ``rows`` (N, c); the tests follow whichever it uses
HOST_ROWS = "rows" in getattr(Committed, "__dataclass_fields__", vars(Committed))


def rnd(rng, *shape):
    return rng.integers(0, P, shape, dtype=np.uint64).astype(np.uint32)


def to_rows(cols):
    """natural (c, N) -> committed layout (N, c), rows bit-reversed"""
    return np.ascontiguousarray(brp(np.ascontiguousarray(cols.T), axis=0))


def host_com(cols, coeffs=None):
    return Committed(to_rows(cols) if HOST_ROWS else cols, coeffs, None, None)


def host_prep(cols):
    return None if cols is None else (to_rows(cols) if HOST_ROWS else cols)


def dev(a, layout="cols"):
    if a is None:
        return None
    return cuda.to_device(to_rows(a) if layout == "rows" else np.ascontiguousarray(a))


def shape_of(air, log_n, log_blowup=None):
    """The table shape at ``log_blowup`` (default: the least that holds the AIR's parts,
    1 for up to 2 parts; CPU and slotted MEMORY at log_blowup 2 have 3 or 4)."""
    if log_blowup is None:
        log_blowup = max(1, (air.num_parts - 1).bit_length())
    return table_shape(air, log_n, Params(log_blowup=log_blowup, num_queries=2, pow_bits=0))


def challenges(rng):
    return {"logup_beta": rnd(rng, 4), "logup_gamma": rnd(rng, 4)}


#: the RV32IM tables (rv32/tables.py) evaluated here and their heights (log2): the simulator
#: runs every thread as Python, so the chips and POSEIDON2 (299 columns, a ~4400-line
#: generated kernel: 16 quotient points, ~0.7 s) stay tiny; PROGRAM, REGISTERS and IO have
#: their fixed heights (a 3-instruction program's image: 4 rows; 64 register rows; 4 io
#: bytes).  BYTES (a fixed 2^16 rows) is left out: far too many rows for the simulator.
RV32_LOG_N = {"alu": 3, "ecall": 3, "program": 2, "memory": 4, "registers": 6, "io": 2,
              "poseidon2": 3}


def _rv32_image():
    """The image of a 3-instruction RISC-V program (li a0, 0; li a7, 93; ecall)."""
    from rv32_samples import program
    from steadfast.rv32.chips.program import image_of
    return image_of(program("li a0, 0\nli a7, 93\necall"))


def rv32_air(name):
    """One of the RV32 tables at a height RV32_LOG_N allows, for the default log_blowup 2
    (the chips' LogUp batched to degree 5: 4 parts); ``alu@1``: ALU for log_blowup 1
    (degree 3, 2 parts)."""
    from steadfast.rv32.chips.io import build_io
    from steadfast.rv32.chips.program import build_program
    from steadfast.rv32.chips.registers import build_registers
    from steadfast.rv32.tables import static_air
    if name == "alu@1":
        return static_air("alu", 1)
    if name == "program":
        air = build_program(_rv32_image(), 2)
    elif name == "registers":
        air = build_registers(_rv32_image().entry_w, 2)
    elif name == "io":
        air = build_io(b"ab", b"c", 2)
    else:
        air = static_air(name, 2)
    assert air.fixed_height in (None, 1 << RV32_LOG_N[name])
    return air


# ----------------------------------------------------------------------------- generic kernels

def test_ef_batch_inverse_and_zero_detection():
    rng = np.random.default_rng(1)
    a = rnd(rng, 70, 4)
    got = SD.ef_batch_inverse_device(cuda.to_device(a), chunk=4, block=8).copy_to_host()
    assert np.array_equal(got, ef_inverse(a))
    a[33] = 0
    with pytest.raises(ZeroDivisionError):
        SD.ef_batch_inverse_device(cuda.to_device(a), chunk=4, block=8)
    flag = cuda.to_device(np.zeros(1, np.uint32))
    SD.ef_batch_inverse_device(cuda.to_device(a), zero_flag=flag, chunk=4, block=8)
    assert flag.copy_to_host()[0] == 1


@pytest.mark.parametrize("n,block", [(1, 4), (7, 4), (8, 4), (9, 4), (100, 8), (33, 2)])
def test_ef_prefix_sum_recursive_scan(n, block):
    rng = np.random.default_rng(n)
    a = rnd(rng, n, 4)
    want = (np.cumsum(a.astype(np.uint64), axis=0) % np.uint64(P)).astype(np.uint32)
    d = cuda.to_device(a)
    assert np.array_equal(SD.ef_prefix_sum_device(d, block=block).copy_to_host(), want)
    SD.ef_prefix_sum_device(d, out=d, block=block)                 # in place
    assert np.array_equal(d.copy_to_host(), want)


@pytest.mark.parametrize("axis", [0, 1])
def test_bit_reverse(axis):
    rng = np.random.default_rng(axis)
    a = rnd(rng, 16, 3) if axis == 0 else rnd(rng, 3, 32)
    got = SD.bit_reverse_device(cuda.to_device(a), axis=axis, block=16).copy_to_host()
    assert np.array_equal(got, brp(a, axis=axis))


def test_quotient_selectors_match_air_eval():
    log_n, log_m = 3, 5
    sel, zh = CD.quotient_selectors_device(log_n, log_m, block=8)
    sel, zh = sel.copy_to_host().astype(np.uint64), zh.copy_to_host().astype(np.uint64)
    assert SD.SHIFT == SHIFT
    want, inv_zh = airlib.selectors_on_coset(log_n, SHIFT, log_m)
    r = np.arange(1 << log_m) % zh.shape[1]
    assert np.array_equal(AF.mul(zh[0, r], sel[0]), want["first"])
    assert np.array_equal(AF.mul(zh[0, r], sel[1]), want["last"])
    assert np.array_equal(sel[2], want["transition"])
    assert np.array_equal(zh[1, r], inv_zh)


# ----------------------------------------------------------------------------- R1: LogUp

def _aux_case(air, log_n, rng, pv=()):
    shape = shape_of(air, log_n)
    main = rnd(rng, 1 << log_n, air.main_width)
    chal = challenges(rng)
    want_aux, want_term = HOST.aux_build(air, shape, main, pv, chal)
    return shape, main, chal, want_aux, want_term


@pytest.mark.parametrize("name,log_n", [("adder", 5), ("pairs", 4)] +
                         [(name, RV32_LOG_N[name]) for name in RV32_LOG_N])
def test_aux_build_matches_host(name, log_n):
    rng = np.random.default_rng(log_n)
    air = {"adder": ex.adder_air, "pairs": lambda: ex.pairs_air(log_n)}.get(name, lambda: rv32_air(name))()
    pv = list(rnd(rng, air.num_public))
    shape, main, chal, want_aux, want_term = _aux_case(air, log_n, rng, pv=pv)
    got, term = CD.aux_build_device(air, shape, dev(main.T), pv, chal, block=8, scan_block=4)
    assert np.array_equal(got.copy_to_host(), want_aux)
    assert np.array_equal(term, want_term) and term.dtype == np.uint32
    # the trace as rows, the aux trace as columns (the LDE's layout)
    # (and in row chunks of 12: the temporaries cover 12 rows, the last chunk is short)
    got_c, term_c = CD.aux_build_device(air, shape, cuda.to_device(main), pv, chal, layout="rows",
                                        columns=True, block=32, row_chunk=12)
    assert np.array_equal(got_c.copy_to_host(), want_aux.T) and np.array_equal(term_c, want_term)


def test_aux_build_real_block_terminals_cancel():
    airs, traces, pvs = ex.lookup_block(4, 4)
    rng = np.random.default_rng(7)
    chal = challenges(rng)
    total = np.zeros((4, 1), np.uint64)
    for air, t, pv in zip(airs, traces, pvs):
        shape = shape_of(air, t.shape[0].bit_length() - 1)
        want_aux, want_term = HOST.aux_build(air, shape, t, pv, chal)
        got, term = CD.aux_build_device(air, shape, dev(t.T), pv, chal, block=64)
        assert np.array_equal(got.copy_to_host(), want_aux) and np.array_equal(term, want_term)
        # the terminal is U = (table's LogUp sum) / n: the sums n * U cancel
        total = AF.ef_add(total, AF.ef_mul_base(term.astype(np.uint64).reshape(4, 1),
                                                np.uint64(shape.n)))
    assert not total.any()                                   # the buses balance


def test_aux_build_vanishing_denominator_raises_like_host():
    air = ex.adder_air()
    shape = shape_of(air, 3)
    main = np.zeros((8, 4), np.uint32)
    # beta = 0: d = gamma - bus_id for every row; gamma = the first bus id -> d = 0
    chal = {"logup_beta": np.zeros(4, np.uint32),
            "logup_gamma": np.array([air.interactions[0].bus_id, 0, 0, 0], np.uint32)}
    with pytest.raises(ValueError, match="vanished"):
        HOST.aux_build(air, shape, main, [], chal)
    with pytest.raises(ValueError, match="vanished"):
        CD.aux_build_device(air, shape, dev(main.T), [], chal, block=8)


# ----------------------------------------------------------------------------- R2: quotient

def _quotient_airs():
    quartic = AirBuilder("quartic")
    x, y = quartic.main("x"), quartic.main("y")
    quartic.when_transition(y.next - x * x * x * y)            # D = 4: 3 parts, M = 4n
    quartic.when_transition(x.next - x - 1)
    quartic.when_first_row(x - quartic.pv("x0"))
    empty = AirBuilder("unconstrained")
    empty.main("x")
    return {"empty": (empty.build(), 1), "fibonacci": (ex.fibonacci_air(), 1),
            "cubic": (ex.cubic_air(), 2),
            "quartic": (quartic.build(), 2), "adder": (ex.adder_air(), 1),
            "pairs": (ex.pairs_air(4), 1), **{name: (None, 1) for name in RV32_LOG_N},
            "alu@1": (None, 1)}


@pytest.mark.parametrize("name", ["empty", "fibonacci", "cubic", "quartic", "adder", "pairs",
                                  *RV32_LOG_N, "alu@1"])
def test_quotient_matches_host(name):
    air, log_blowup = _quotient_airs()[name]
    if air is None:
        air = rv32_air(name)
        # the least blowup that holds the parts (ALU at log_blowup 2: 4 parts, M = 4n = N)
        log_blowup = max(log_blowup, (air.num_parts - 1).bit_length())
    assert (name, air.num_parts) != ("alu", 2) and (name, air.num_parts) != ("alu@1", 4)
    log_n = RV32_LOG_N.get(name.split("@")[0],
                         4 if air.fixed_height is None else air.fixed_height.bit_length() - 1)
    rng = np.random.default_rng(len(name))
    shape = shape_of(air, log_n, log_blowup)
    N = 1 << shape.log_lde
    main = rnd(rng, air.main_width, N)
    prep = rnd(rng, air.prep_width, N) if air.prep_width else None
    aux = rnd(rng, 4 * air.aux_width, N) if air.aux_width else None
    term = rnd(rng, 4) if air.aux_width else None
    pv, chal, alpha = list(rnd(rng, air.num_public)), challenges(rng), rnd(rng, 4)
    want = HOST.quotient(air, shape, host_com(main), host_prep(prep),
                         None if aux is None else host_com(aux), pv, chal, alpha, term)
    assert want.shape == (4, 1 << shape.log_quotient)
    sels = CD.quotient_selectors_device(shape.log_n, shape.log_quotient)
    for layout in ("cols", "rows"):
        got = CD.quotient_device(air, shape, dev(main, layout), dev(prep, layout), dev(aux, layout),
                                 pv, chal, alpha, term, layout=layout, selectors=sels, block=32)
        assert np.array_equal(got.copy_to_host(), want), layout


@pytest.mark.parametrize("table,k", [("poseidon2", 2), ("poseidon2", 3), ("alu", 3),
                                     ("alu", 4)])
def test_slotted_quotient_matches_host(table, k):
    """Slotted RV32 tables: POSEIDON2's device quotient is split (one slot kernel launched
    per slot on that slot's columns, plus the LogUp constraints' own kernel, weighted by
    alpha powers: rv32/chips/poseidon2.py build_poseidon2, constraint_device._quotient_split);
    ALU's k slots (rv32/chips/slots.py) are one kernel.  Both layouts, bit-identical to the
    host."""
    from steadfast.rv32.tables import static_air
    air = static_air(table, 2, k)
    assert (getattr(air, "device_split", None) is not None) == (table == "poseidon2")
    if table == "poseidon2":
        assert air.device_split() is air.device_split()         # built once, on demand
    rng = np.random.default_rng(k)
    # ALU k = 3 / 4: LogUp degree 5 (4 parts) at the default log_blowup 2
    shape = shape_of(air, 2, max(1, (air.num_parts - 1).bit_length()))
    N = 1 << shape.log_lde
    main = rnd(rng, air.main_width, N)
    aux = rnd(rng, 4 * air.aux_width, N)
    term = rnd(rng, 4)
    pv, chal, alpha = list(rnd(rng, air.num_public)), challenges(rng), rnd(rng, 4)
    want = HOST.quotient(air, shape, host_com(main), None, host_com(aux), pv, chal, alpha, term)
    sels = CD.quotient_selectors_device(shape.log_n, shape.log_quotient)
    for layout in ("cols", "rows"):
        got = CD.quotient_device(air, shape, dev(main, layout), None, dev(aux, layout),
                                 pv, chal, alpha, term, layout=layout, selectors=sels, block=32)
        assert np.array_equal(got.copy_to_host(), want), layout
    if table == "poseidon2":
        # the split's parts are the AIR's own constraints: slot j's are slot 0's on
        # shifted columns, then the LogUp constraints
        slot, kk, W, logup = air.device_split()
        U = len(slot.constraints)
        full = [str(c.expr) for c in air.constraints]
        assert [c.name.replace("@0", "") for c in air.constraints[:U]] == \
            [c.name for c in slot.constraints]
        assert full[k * U:] == [str(c.expr) for c in logup.constraints]
        assert kk == k and W * k == air.main_width


def _rom_air(values):
    b = AirBuilder("rom")
    pc, op = b.prep("pc"), b.prep("op")
    x = b.main("x")
    b.assert_zero(op * (x - pc), name="x_is_pc_when_op")
    b.receive("rom", [pc, op], multiplicity=x)
    return b.build(preprocessed=np.asarray(values, np.uint32))


def test_generated_kernels_cached_and_registered():
    air = ex.fibonacci_air()
    gk = CD.generated(air)
    assert CD.generated(ex.fibonacci_air()) is gk               # same fingerprint, same kernels
    # a module file in the kernel cache (kernels/kernel_cache.py), or a pseudo file name
    # when the cache is off
    assert (gk.filename.startswith("<steadfast-air:fibonacci:") or
            os.path.basename(gk.filename).startswith("fibonacci_")) and \
        CD.SOURCES[gk.filename] == gk.source
    assert gk.logup is None and CD.generated(ex.adder_air()).logup is not None
    qual = "steadfast.kernels.constraint_device.generated." + gk.quotient.py_func.__name__
    assert qual in {q for q, _, _ in devicelib.KERNELS}
    # one statement per instruction: every main leaf is read once
    assert gk.source.count("main[") == len(air.constraint_program.leaves("main"))
    # AIRs differing only in preprocessed values (a ROM per block) share the kernels
    rom1 = _rom_air([[i, i % 2] for i in range(8)])
    rom2 = _rom_air([[i, 1] for i in range(8)])
    assert rom1.fingerprint() != rom2.fingerprint()
    assert CD.generated(rom1) is CD.generated(rom2)
    n_before = len(CD.SOURCES)
    rng = np.random.default_rng(3)
    shape = shape_of(air, 2)
    m = dev(rnd(rng, 2, 8))
    for _ in range(2):
        CD.quotient_device(air, shape, m, None, None, [1, 2, 3], {}, rnd(rng, 4), None, block=8)
    assert len(CD.SOURCES) == n_before


# ----------------------------------------------------------------------------- R3, R4

@pytest.mark.parametrize("c,n,block", [(5, 64, 8), (3, 1, 4), (2, 200, 16)])
def test_ood_matches_host(c, n, block):
    rng = np.random.default_rng(n)
    coeffs = rnd(rng, c, n)
    z = rnd(rng, 4)
    want = HOST.ood(Committed(None, coeffs, None, None), z)
    got = SD.ood_device(cuda.to_device(coeffs), z, block=block).copy_to_host()
    assert np.array_equal(got, want)


@pytest.mark.parametrize("uses_next", [True, False])
def test_deep_quotient_matches_host(uses_next):
    # groups main, [main at z w], aux, aux at z w, parts: fused pairs and a lone group
    rng = np.random.default_rng(11)
    shape = shape_of(ex.adder_air(), 4)
    shape = type(shape)(**{**shape.__dict__, "uses_next_main": uses_next})
    N = 1 << shape.log_lde
    mats = {"main": rnd(rng, 3, N), "aux": rnd(rng, 8, N), "parts": rnd(rng, 4, N)}
    groups = [(m, rnd(rng, mats[m].shape[0], 4), nx) for m, nx in deep_groups(shape)]
    z, lam = rnd(rng, 4), rnd(rng, 4)
    want = HOST.deep_quotient(shape, [(host_com(mats[m]), v, nx) for m, v, nx in groups], z, lam)
    for layout in ("cols", "rows"):
        d = {k: dev(v, layout) for k, v in mats.items()}
        got = SD.deep_quotient_device(shape, [(d[m], v, nx) for m, v, nx in groups], z, lam,
                                      layout=layout, block=16)
        assert np.array_equal(got.copy_to_host(), want), layout


def test_fri_fold_arity_matches_host():
    # the v3 fold (kernels/fri_device.py) against HostStages.fri_fold, every arity, with
    # and without roll-in, outputs from a caller's allocator (naive references from the
    # spec: tests/test_fri_device.py)
    from steadfast.kernels import fri_device as FD
    rng = np.random.default_rng(5)
    made = []

    def alloc(shape):                   # e.g. a budgeted pool: the outputs come from here
        made.append(cuda.device_array(shape, np.uint32))
        return made[-1]
    h = 5
    values = rnd(rng, 1 << h, 4)
    for k in (1, 2, 3, 4):
        beta = rnd(rng, 4)
        roll = rnd(rng, 1 << (h - k), 4) if k % 2 else None
        want = HOST.fri_fold(values, beta, k, h, roll)
        got = FD.fri_fold_arity_device(cuda.to_device(values), beta, k,
                                       roll=None if roll is None else cuda.to_device(roll),
                                       block=4, alloc=alloc)
        assert got is made[-1] and np.array_equal(got.copy_to_host(), want)


# ----------------------------------------------------------------------------- validation

def test_wrappers_validate_inputs():
    rng = np.random.default_rng(0)
    a = rnd(rng, 8, 4)
    with pytest.raises(TypeError, match="host numpy"):
        SD.ef_prefix_sum_device(a)
    with pytest.raises(TypeError, match="uint32"):
        SD.ef_prefix_sum_device(cuda.to_device(a.astype(np.float32)))
    with pytest.raises(ValueError, match="last axis"):
        SD.ef_batch_inverse_device(cuda.to_device(rnd(rng, 8, 3)))
    with pytest.raises(ValueError, match="power of two"):
        SD.ef_prefix_sum_device(cuda.to_device(a), block=3)
    with pytest.raises(ValueError, match="power of two"):
        SD.bit_reverse_device(cuda.to_device(rnd(rng, 6, 2)))
    with pytest.raises(ValueError, match="canonical"):
        SD.ood_device(cuda.to_device(a), [P, 0, 0, 0])
    air = ex.fibonacci_air()
    shape = shape_of(air, 2)
    with pytest.raises(ValueError, match="expected"):
        CD.quotient_device(air, shape, dev(rnd(rng, 3, 8)), None, None, [1, 2, 3], {}, a[0], None)
    with pytest.raises(ValueError, match="layout"):
        CD.quotient_device(air, shape, dev(rnd(rng, 2, 8)), None, None, [1, 2, 3], {}, a[0], None,
                           layout="diag")
    with pytest.raises(ValueError, match="public values"):
        CD.quotient_device(air, shape, dev(rnd(rng, 2, 8)), None, None, [1, 2], {}, a[0], None)
    with pytest.raises(ValueError, match="no interactions"):
        CD.aux_build_device(air, shape, dev(rnd(rng, 2, 4)), [1, 2, 3], {})
    from steadfast.kernels.fri_device import fri_fold_arity_device
    with pytest.raises(ValueError, match="cannot fold"):
        fri_fold_arity_device(cuda.to_device(a), a[0], 4)        # 8 points, arity 16
    empty = SD.ef_prefix_sum_device(cuda.to_device(np.zeros((0, 4), np.uint32)))
    assert empty.shape == (0, 4)


# ----------------------------------------------------------------- integrity tags

def _ref_checksum(a):
    flat = np.asarray(a, np.uint32).reshape(-1)
    return (int(sum(int(v) for v in flat) % (1 << 64)),
            int(np.bitwise_xor.reduce(flat.astype(np.uint64))) if flat.size else 0)


@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (3, 5), (4, 300)])
def test_checksum_host_and_device_agree_with_reference(shape):
    from steadfast.kernels.hostlib import checksum_words
    from steadfast.kernels.layout_device import checksum_device
    r = np.random.default_rng(sum(shape) + len(shape))
    a = r.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
    if a.size:
        a.reshape(-1)[0] = 0xFFFFFFFF
    want = _ref_checksum(a)
    assert checksum_words(a) == want
    assert checksum_device(cuda.to_device(a), max_blocks=2, block=8) == want


def test_checksum_chunks_agree_and_one_changed_word_shows():
    from steadfast.kernels.hostlib import _sum_xor_chunks, checksum_words
    a = np.full(1 << 12, 0xFFFFFFFF, np.uint32)
    s, x = _sum_xor_chunks(a, 100)                  # several chunks, uneven last one
    assert (int(s), int(x)) == _ref_checksum(a)
    b = a.copy()
    b[1234] ^= 1
    assert checksum_words(b) != checksum_words(a)
    with pytest.raises(TypeError):
        from steadfast.kernels.layout_device import checksum_device
        checksum_device(cuda.to_device(np.zeros(4, np.uint64)))


@pytest.mark.parametrize("shape", [(0,), (1,), (3, 5), (4, 300)])
def test_copy_checksum_copies_and_tags_in_one_pass(shape):
    from steadfast.kernels.hostlib import _copy_sum_xor_chunks, copy_checksum
    r = np.random.default_rng(len(shape) + sum(shape))
    src = r.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
    dst = np.zeros(shape, np.uint32)
    assert copy_checksum(dst, src) == _ref_checksum(src)
    assert np.array_equal(dst, src)
    if src.size > 3:                                # several chunks, uneven last one
        d2 = np.zeros(src.size, np.uint32)
        s, x = _copy_sum_xor_chunks(d2, src.reshape(-1), 7)
        assert (int(s), int(x)) == _ref_checksum(src) and np.array_equal(d2, src.reshape(-1))
    with pytest.raises(ValueError, match="copy_checksum"):
        copy_checksum(np.zeros(shape + (2,), np.uint32), src)
    with pytest.raises(ValueError, match="copy_checksum"):
        copy_checksum(dst.astype(np.uint64), src)
