"""Poseidon2-16 (SPEC §2) and the Merkle leaf sponge (SPEC §3), host and device.

References here are independent of kernels/: the Grain LFSR written the way the reference
parameter script does it (a bit list, pop/append), and the permutation and sponge over
Python ints straight from the SPEC text.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from steadfast.kernels import poseidon2 as p2
from steadfast.kernels import poseidon2_constants as pc
from steadfast.kernels.field import P
from tests.kat import KAT_IN, KAT_OUT


# ---------------------------------------------------------------- independent references
def grain_constants_reference(count, p=P, n=31, t=16, r_f=8, r_p=13):
    bits = []
    for value, width in ((1, 2), (0, 4), (n, 12), (t, 12), (r_f, 10), (r_p, 10)):
        bits += [int(b) for b in bin(value)[2:].zfill(width)]
    bits += [1] * 30

    def clock():
        new = bits[62] ^ bits[51] ^ bits[38] ^ bits[23] ^ bits[13] ^ bits[0]
        bits.pop(0)
        bits.append(new)
        return new

    for _ in range(160):
        clock()

    def emit():
        while True:
            a, b = clock(), clock()
            if a == 1:
                return b

    out = []
    while len(out) < count:
        v = int("".join(str(emit()) for _ in range(n)), 2)
        if v < p:
            out.append(v)
    return out


RC = grain_constants_reference(8 * 16 + 13)
RC_INIT = [RC[16 * r:16 * r + 16] for r in range(4)]
RC_PART = RC[64:77]
RC_FINAL = [RC[77 + 16 * r:77 + 16 * r + 16] for r in range(4)]
V16_REF = [(-2) % P, 1, 2, pow(2, -1, P), 3, 4, (-pow(2, -1, P)) % P, (-3) % P, (-4) % P,
           pow(2, -8, P), pow(4, -1, P), pow(8, -1, P), pow(2, -27, P), (-pow(2, -8, P)) % P,
           (-pow(16, -1, P)) % P, (-pow(2, -27, P)) % P]
M4 = [[2, 3, 1, 1], [1, 2, 3, 1], [1, 1, 2, 3], [3, 1, 1, 2]]


def ext_ref(s):
    y = [sum(M4[i][j] * s[4 * b + j] for j in range(4)) for b in range(4) for i in range(4)]
    col = [sum(y[4 * b + k] for b in range(4)) for k in range(4)]
    return [(y[i] + col[i % 4]) % P for i in range(16)]


def full_ref(s, rc):
    return ext_ref([pow((x + c) % P, 7, P) for x, c in zip(s, rc)])


def permute_ref(state):
    s = ext_ref([int(x) for x in state])
    for rc in RC_INIT:
        s = full_ref(s, rc)
    for c in RC_PART:
        s[0] = pow((s[0] + c) % P, 7, P)
        total = sum(s)
        s = [(total + V16_REF[i] * s[i]) % P for i in range(16)]
    for rc in RC_FINAL:
        s = full_ref(s, rc)
    return s


def sponge_ref(row):
    s = [0] * 16
    row = [int(x) for x in row]
    for b0 in range(0, len(row), 8):
        block = row[b0:b0 + 8]
        s[:len(block)] = block
        s = permute_ref(s)
    return s[:8]


def rand_field(rng, shape):
    return rng.integers(0, P, shape, dtype=np.uint32)


field_elem = st.integers(min_value=0, max_value=P - 1)
state_strategy = st.lists(field_elem, min_size=16, max_size=16)


# ---------------------------------------------------------------- constants
def test_grain_round_constants_match_independent_lfsr():
    assert pc.grain_round_constants() == RC
    assert pc.RC_FULL.tolist() == RC_INIT + RC_FINAL
    assert pc.RC_PARTIAL.tolist() == RC_PART
    # the verifier's own Grain (eighteen clocks at a time, like the kernels' -- both
    # against this file's bit-at-a-time reference)
    from steadfast.verifier.poseidon2 import grain_constants
    init, part, final = grain_constants()
    assert init.tolist() == [RC_INIT[i] for i in range(4)] and part.tolist() == RC_PART
    assert final.tolist() == [RC_FINAL[i] for i in range(4)]


def test_grain_with_other_parameters_matches_the_reference():
    """Other (t, R_F, R_P, n): the block LFSR is the reference's bit stream, not a table."""
    from steadfast.verifier.poseidon2 import grain_constants
    for t, r_f, r_p in ((16, 8, 13), (24, 8, 21), (8, 8, 12), (16, 6, 5)):
        want = grain_constants_reference(r_f * t + r_p, t=t, r_f=r_f, r_p=r_p)
        assert pc.grain_round_constants(width=t, rounds_f=r_f, rounds_p=r_p) == want
        init, part, final = grain_constants(t=t, rf=r_f, rp=r_p)
        assert init.ravel().tolist() + part.tolist() + final.ravel().tolist() == want


def test_internal_diagonal_and_montgomery_tables():
    assert pc.V16.tolist() == V16_REF
    for v, (num, den) in zip(pc.V16.tolist(), pc.V16_RATIONAL):   # V16_i * den == num
        assert v * den % P == num % P
    r = (1 << 32) % P
    assert pc.V16_M.tolist() == [v * r % P for v in V16_REF]
    assert pc.RC_FULL_M.tolist() == [[c * r % P for c in row] for row in RC_INIT + RC_FINAL]
    with pytest.raises(ValueError):
        pc.RC_FULL[0, 0] = 1                             # tables are read-only
    # the batched host path's per-round scaled constants are the same constants
    assert p2._RCF_S.shape == (8, 16) and np.all(np.abs(p2._RCF_S) <= P // 2)


# ---------------------------------------------------------------- permutation
def test_known_answer():
    x = np.array(KAT_IN, np.uint32)
    assert permute_ref(KAT_IN) == KAT_OUT
    assert p2.poseidon2_permute(x).tolist() == KAT_OUT
    batch = rand_field(np.random.default_rng(0), (100, 16))
    batch[37] = x                                        # known answer inside a batch
    assert p2.poseidon2_permute(batch)[37].tolist() == KAT_OUT


def shared_permute_python(state):
    """build_permutation (the source the device kernels compile) run as plain Python."""
    from steadfast.kernels.field import build
    ident = lambda f: f                                  # noqa: E731
    perm = p2.build_permutation(ident, build(ident)).permute
    s = np.array(state, np.uint32)
    perm(s, pc.RC_FULL_M, pc.RC_PARTIAL_M, pc.V16_M)
    return s.tolist()


def test_shared_permutation_source_known_answer():
    assert shared_permute_python(KAT_IN) == KAT_OUT
    assert shared_permute_python([P - 1] * 16) == permute_ref([P - 1] * 16)


@given(st.lists(state_strategy, min_size=1, max_size=6))
def test_permutation_matches_reference(states):
    x = np.array(states, np.uint32)
    assert p2.poseidon2_permute(x).tolist() == [permute_ref(s) for s in states]


@pytest.mark.parametrize("n", [p2.BLOCK - 1, p2.BLOCK, p2.BLOCK + 1, 8 * p2.BLOCK + 3])
def test_batches_across_chunk_edges(n):
    rng = np.random.default_rng(n)
    x = rand_field(rng, (n, 16))
    x[0] = 0
    x[-1] = P - 1
    got = p2.poseidon2_permute(x)
    for i in sorted({0, 1, n // 2, n - 2, n - 1}):
        assert got[i].tolist() == permute_ref(x[i])
    # each state is permuted on its own: any chunking gives the same answer
    assert np.array_equal(got[: n // 2], p2.poseidon2_permute(x[: n // 2]))
    assert np.array_equal(got[n // 2:], p2.poseidon2_permute(x[n // 2:]))


def test_permute_shapes_and_empty():
    x = rand_field(np.random.default_rng(1), (2, 3, 16))
    out = p2.poseidon2_permute(x)
    assert out.shape == (2, 3, 16) and out.dtype == np.uint32
    assert np.array_equal(out.reshape(-1, 16), p2.poseidon2_permute(x.reshape(-1, 16)))
    assert p2.poseidon2_permute(np.zeros((0, 16), np.uint32)).shape == (0, 16)
    ro = x.copy()
    ro.setflags(write=False)                             # read-only input is fine
    assert np.array_equal(p2.poseidon2_permute(ro), out)


@pytest.mark.parametrize("bad, exc", [
    (np.zeros((2, 16), np.uint64), TypeError),
    (np.zeros((2, 16), np.float64), TypeError),
    ([[0] * 16], TypeError),
    (np.zeros((2, 15), np.uint32), ValueError),
    (np.array(3, np.uint32), ValueError),
    (np.full((1, 16), P, np.uint32), ValueError),        # not canonical
])
def test_permute_rejects_bad_input(bad, exc):
    with pytest.raises(exc) as info:
        p2.poseidon2_permute(bad)
    if isinstance(bad, np.ndarray) and exc is TypeError:
        assert str(bad.dtype) in str(info.value)


# ---------------------------------------------------------------- sponge and compression
@pytest.mark.parametrize("w", [1, 7, 8, 9, 16, 17])
def test_hash_rows_matches_reference_sponge(w):
    rng = np.random.default_rng(w)
    for n in (1, 5, p2.BLOCK + 1):
        m = rand_field(rng, (n, w))
        got = p2.hash_rows(m)
        assert got.shape == (n, 8)
        for i in sorted({0, n // 2, n - 1}):
            assert got[i].tolist() == sponge_ref(m[i])


def test_hash_rows_large_batch_uses_threads_consistently():
    m = rand_field(np.random.default_rng(7), (9 * p2.BLOCK + 5, 11))
    got = p2.hash_rows(m)
    assert np.array_equal(got[: p2.BLOCK], p2.hash_rows(m[: p2.BLOCK]))
    for i in (0, 4 * p2.BLOCK + 7, m.shape[0] - 1):
        assert got[i].tolist() == sponge_ref(m[i])


def test_short_last_block_overwrites_only_its_lanes():
    # w = 9: the second absorb writes lane 0 only; lanes 1..7 keep the first permutation's output
    row = np.arange(1, 10, dtype=np.uint32)
    first = permute_ref(list(range(1, 9)) + [0] * 8)
    second = permute_ref([9] + first[1:])
    assert p2.hash_rows(row[None])[0].tolist() == second[:8]


def test_sponge_hash_batched_and_single():
    rng = np.random.default_rng(3)
    v = rand_field(rng, (10,))
    assert p2.sponge_hash(v).tolist() == sponge_ref(v)
    b = rand_field(rng, (2, 3, 10))
    got = p2.sponge_hash(b)
    assert got.shape == (2, 3, 8)
    assert got[1, 2].tolist() == sponge_ref(b[1, 2])


def test_compress_matches_reference():
    rng = np.random.default_rng(4)
    left, right = rand_field(rng, (70, 8)), rand_field(rng, (70, 8))
    got = p2.compress(left, right)
    for i in (0, 33, 69):
        assert got[i].tolist() == permute_ref(list(left[i]) + list(right[i]))[:8]
    assert np.array_equal(got, p2.compress_pairs(np.concatenate([left, right], axis=1)))
    assert p2.compress(left[:0], right[:0]).shape == (0, 8)


def test_sponge_and_compress_errors():
    with pytest.raises(ValueError):
        p2.hash_rows(np.zeros((3, 0), np.uint32))
    with pytest.raises(ValueError):
        p2.hash_rows(np.zeros(8, np.uint32))
    with pytest.raises(TypeError, match="int64"):
        p2.hash_rows(np.zeros((2, 8), np.int64))
    with pytest.raises(ValueError):
        p2.compress(np.zeros((2, 8), np.uint32), np.zeros((3, 8), np.uint32))
    with pytest.raises(ValueError):
        p2.compress_pairs(np.zeros((2, 8), np.uint32))
    assert p2.hash_rows(np.zeros((0, 5), np.uint32)).shape == (0, 8)


# ---------------------------------------------------------------- device (simulator)
BLK = 16


@pytest.fixture(scope="module")
def dev():
    from numba import cuda
    from steadfast.kernels import poseidon2_device
    return cuda, poseidon2_device


@pytest.mark.parametrize("n", [BLK - 1, BLK, BLK + 1])
def test_device_permutation_matches_host(dev, n):
    cuda, pd = dev
    x = rand_field(np.random.default_rng(100 + n), (n, 16))
    x[0] = np.array(KAT_IN, np.uint32)
    got = pd.permute_device(cuda.to_device(x), block=BLK).copy_to_host()
    assert np.array_equal(got, p2.poseidon2_permute(x))
    assert got[0].tolist() == KAT_OUT


@pytest.mark.parametrize("w", [1, 8, 9, 17])
def test_device_hash_rows_matches_host(dev, w):
    cuda, pd = dev
    m = rand_field(np.random.default_rng(200 + w), (BLK + 1, w))
    out = cuda.device_array((BLK + 1, 8), np.uint32)
    got = pd.hash_rows_device(cuda.to_device(m), out=out, block=BLK)
    assert got is out
    assert np.array_equal(got.copy_to_host(), p2.hash_rows(m))


def test_device_compress_and_edge_cases(dev):
    cuda, pd = dev
    pairs = rand_field(np.random.default_rng(5), (BLK - 1, 16))
    got = pd.compress_pairs_device(cuda.to_device(pairs), block=BLK).copy_to_host()
    assert np.array_equal(got, p2.compress_pairs(pairs))
    empty = pd.permute_device(cuda.to_device(np.zeros((0, 16), np.uint32)))
    assert tuple(empty.shape) == (0, 16)
    with pytest.raises(TypeError, match="device array"):
        pd.permute_device(pairs)
    with pytest.raises(TypeError, match="uint64"):
        pd.permute_device(cuda.to_device(np.zeros((2, 16), np.uint64)))
    with pytest.raises(ValueError):
        pd.permute_device(cuda.to_device(np.zeros((2, 8), np.uint32)))
    with pytest.raises(ValueError):
        pd.hash_rows_device(cuda.to_device(np.zeros((2, 16), np.uint32)),
                            out=cuda.device_array((3, 8), np.uint32))
