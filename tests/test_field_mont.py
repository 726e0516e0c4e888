"""The Montgomery-form field functions the generated constraint kernels use
(kernels/field.py: to_mont, from_mont, mont_ef_mul, mont_ef_mul_base) agree with the
canonical ones and with Python integers, in the plain-Python build (what the CUDA
simulator runs) and the njit build (the same source compiled)."""
import numpy as np
from hypothesis import given, settings, strategies as st

from steadfast.kernels import field as F
from steadfast.kernels.hostlib import HF

P, W = F.P, F.EXT_W
PY = F.build(lambda f: f)
elem = st.one_of(st.sampled_from([0, 1, 2, P - 1, P - 2, (P - 1) // 2]), st.integers(0, P - 1))
ef = st.tuples(elem, elem, elem, elem)


def ef_mul_ref(a, b):
    """Schoolbook in F_p[X]/(X^4 - W) with Python integers."""
    c = [0] * 7
    for i in range(4):
        for j in range(4):
            c[i + j] += a[i] * b[j]
    return [(c[k] + (W * c[k + 4] if k < 3 else 0)) % P for k in range(4)]


@settings(max_examples=300, deadline=None)
@given(ef, ef)
def test_mont_ef_mul_matches_reference(a, b):
    want = ef_mul_ref(a, b)
    for B in (PY, HF):
        am = [B.to_mont(np.uint32(x)) for x in a]
        bm = [B.to_mont(np.uint32(x)) for x in b]
        assert [int(x) for x in am] == [x * (1 << 32) % P for x in a]
        got = [int(B.from_mont(x)) for x in B.mont_ef_mul(*am, *bm)]
        assert got == want
        assert [int(x) for x in B.ef_mul(*[np.uint32(x) for x in a],
                                         *[np.uint32(x) for x in b])] == want
        got = [int(B.from_mont(x)) for x in B.mont_ef_mul_base(*am, bm[0])]
        assert got == [x * b[0] % P for x in a]
        assert all(0 <= int(x) < P for x in am)
