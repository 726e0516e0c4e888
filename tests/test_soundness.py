"""Soundness: every kind of wrong proof is rejected with the right error type, a flipped
byte never verifies, truncations are rejected cleanly."""
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steadfast.air import AirBuilder, ConstraintViolation, LookupImbalance
from steadfast.air import examples as ex
from steadfast.prover import HostStages, Params, prove
from steadfast.verifier import (CompositionError, FriError, LogUpError, MerkleError, PowError,
                      PublicValuesError, ShapeError, VerificationError, decode, encode, verify)
from steadfast.verifier.transcript import Transcript

# These tests prove with weak parameters on purpose (few queries, little grinding):
# their verifications say so explicitly by requiring no security minimum.
verify = functools.partial(verify, min_security_bits=0)
FAST = Params(num_queries=6, pow_bits=3, logup_pow_bits=0, deep_pow_bits=0,
              commit_pow_bits=0)     # the grinding steps: test_wrong_pow_nonce


def _small_lookup_block():
    """src (8 rows, sends its values) + range4 (16 rows, receives with multiplicity)."""
    b = AirBuilder("src")
    v = b.main("v")
    b.send("byte", [v])
    vals = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.uint32)
    rng = np.zeros((16, 2), np.uint32)
    rng[:, 0] = np.arange(16)
    np.add.at(rng[:, 1], vals, 1)
    return [b.build(), ex.range_air(4)], [vals.reshape(8, 1), rng], [[], []]


@pytest.fixture(scope="module")
def fib():
    t, pv = ex.fibonacci_trace(4)
    air = ex.fibonacci_air()
    return air, t, pv, prove([t], [air], [pv], FAST)


@pytest.fixture(scope="module")
def block():
    airs, traces, pvs = _small_lookup_block()
    return airs, traces, pvs, prove(traces, airs, pvs, FAST)


def _tamper(proof: bytes, fn) -> bytes:
    p = decode(proof)
    fn(p)
    return encode(p)


def _bump(a: np.ndarray, idx) -> np.ndarray:
    a = a.copy()
    a[idx] = (int(a[idx]) + 1) % 2013265921
    return a


def test_honest_proofs_verify(fib, block):
    air, _, pv, proof = fib
    verify(proof, [air], [pv])
    airs, _, pvs, proof = block
    verify(proof, airs, pvs)


def test_wrong_trace_cell(fib):
    air, t, pv, _ = fib
    bad = t.copy()
    bad[6, 1] += 1
    with pytest.raises(ConstraintViolation):
        prove([bad], [air], [pv], FAST)
    forced = prove([bad], [air], [pv], FAST, check=False)
    with pytest.raises(CompositionError):
        verify(forced, [air], [pv])


def test_wrong_ood_value(fib):
    air, _, pv, proof = fib
    for field in ("ood_main", "ood_main_next", "ood_parts"):
        def f(p, field=field):
            setattr(p.tables[0], field, _bump(getattr(p.tables[0], field), (0, 1)))
        with pytest.raises(CompositionError):
            verify(_tamper(proof, f), [air], [pv])


def test_wrong_aux_ood_value(block):
    airs, _, pvs, proof = block

    def f(p):
        p.tables[1].ood_aux_next = _bump(p.tables[1].ood_aux_next, (2, 0))
    with pytest.raises(CompositionError, match="range4"):
        verify(_tamper(proof, f), airs, pvs)


def test_wrong_merkle_sibling(fib, block):
    air, _, pv, proof = fib
    for field in ("main_paths", "parts_paths"):
        def f(p, field=field):
            setattr(p.tables[0], field, _bump(getattr(p.tables[0], field), (2, 1, 5)))
        with pytest.raises(MerkleError):
            verify(_tamper(proof, f), [air], [pv])

    def g(p):
        p.tables[0].fri_paths[0] = _bump(p.tables[0].fri_paths[0], (0, 0, 0))
    with pytest.raises(MerkleError, match="FRI layer 0"):
        verify(_tamper(proof, g), [air], [pv])
    airs, _, pvs, proof = block

    def h(p):
        p.tables[0].aux_paths = _bump(p.tables[0].aux_paths, (1, 0, 0))
    with pytest.raises(MerkleError, match="aux"):
        verify(_tamper(proof, h), airs, pvs)


def test_wrong_opened_row(fib):
    air, _, pv, proof = fib

    def f(p):
        p.tables[0].main_rows = _bump(p.tables[0].main_rows, (0, 0))
    with pytest.raises(MerkleError):
        verify(_tamper(proof, f), [air], [pv])


class _BadFinal(HostStages):
    """A cheating prover: a wrong final polynomial, everything else consistent."""

    def fri_final(self, values, shape):
        c = super().fri_final(values, shape).copy()
        c[0, 2] = (int(c[0, 2]) + 1) % 2013265921
        return c


class _BadFold(HostStages):
    """A cheating prover: the layer after the first fold is off by one everywhere."""

    def fri_fold(self, values, beta, layer, shape):
        out = super().fri_fold(values, beta, layer, shape)
        if layer == 0:
            out = ((out.astype(np.int64) + 1) % 2013265921).astype(np.uint32)
        return out


def test_wrong_fri_final_polynomial():
    t, pv = ex.fibonacci_trace(5)
    air = ex.fibonacci_air()
    proof = prove([t], [air], [pv], FAST, stages=_BadFinal())
    with pytest.raises(FriError, match="final polynomial"):
        verify(proof, [air], [pv])
    proof = prove([t], [air], [pv], FAST, stages=_BadFold())
    with pytest.raises(FriError, match="layer 1"):
        verify(proof, [air], [pv])
    # a final polynomial changed after the fact changes the transcript: rejected too
    honest = prove([t], [air], [pv], FAST)

    def f(p):
        p.tables[0].final_poly = _bump(p.tables[0].final_poly, (1, 2))
    with pytest.raises(VerificationError):
        verify(_tamper(honest, f), [air], [pv])


def _pow_point(monkeypatch, proof, airs, pvs):
    """The verifier's own transcript forks at the grinding point: run an honest
    verification with a spy on ``Transcript.check_pow`` that snapshots the fork (state and
    buffers, before the PoW frame) each time it is called.  Returns [(fork, label, bits)],
    one per table, in table order."""
    seen = []
    real = Transcript.check_pow

    def spy(self, label, nonce, bits):
        seen.append((self.copy(), label, bits))
        return real(self, label, nonce, bits)
    with monkeypatch.context() as m:
        m.setattr(Transcript, "check_pow", spy)
        verify(proof, airs, pvs)
    return seen


_NONCES = {
    "logup_pow": (lambda p: p.logup_nonce, lambda p, v: setattr(p, "logup_nonce", v)),
    "zeta_pow": (lambda p: p.tables[0].zeta_nonce,
                 lambda p, v: setattr(p.tables[0], "zeta_nonce", v)),
    "deep_pow": (lambda p: p.tables[0].deep_nonce,
                 lambda p, v: setattr(p.tables[0], "deep_nonce", v)),
    "fold_pow": (lambda p: int(p.tables[0].fold_nonces[0]),
                 lambda p, v: p.tables[0].fold_nonces.__setitem__(0, v)),
    "pow": (lambda p: p.tables[0].pow_nonce,
            lambda p, v: setattr(p.tables[0], "pow_nonce", v)),
}


@pytest.mark.parametrize("label", list(_NONCES))
def test_wrong_pow_nonce(monkeypatch, label):
    """At every grinding point (before the LogUp challenges, z, lambda, each FRI fold and
    the queries) a nonce known to fail the difficulty at that transcript state is rejected
    with exactly PowError.  The verifier checks each proof of work right before the
    challenge it guards, and nothing before it depends on the nonce, so no other error
    can come first."""
    t, pv = ex.fibonacci_trace(4)
    air = ex.fibonacci_air()
    bits = 8
    proof = prove([t], [air], [pv], Params(num_queries=4, pow_bits=bits, logup_pow_bits=bits,
                                           deep_pow_bits=bits, commit_pow_bits=bits))
    get, put = _NONCES[label]
    honest = get(decode(proof))
    assert encode(decode(proof)) == proof            # re-encoding alone changes nothing
    points = [(f, lb, b) for f, lb, b in _pow_point(monkeypatch, proof, [air], [pv]) if lb == label]
    assert len(points) == (2 if label == "fold_pow" else 1)     # log_n 4 - 2 = 2 FRI layers
    fork, _, got_bits = points[0]
    assert got_bits == bits
    assert fork.copy().check_pow(label, honest, bits)          # the snapshot is the real state
    # grind returns the smallest passing nonce, so every smaller one must fail here;
    # search upwards from the honest nonce with the verifier's own check
    assert not any(fork.copy().check_pow(label, c, bits) for c in range(honest))
    wrong = next(c for c in range(honest + 1, honest + (1 << 12))
                 if not fork.copy().check_pow(label, c, bits))
    for cand in (wrong, 2013265921 + wrong):        # a failing nonce; a non-canonical one
        def f(p, cand=cand):
            put(p, cand)
        if cand >= 2013265921 and label == "fold_pow":
            with pytest.raises(ShapeError):          # an array element: the reader refuses it
                verify(_tamper(proof, f), [air], [pv])
            continue
        with pytest.raises(PowError, match=f"nonce {cand} ") as e:
            verify(_tamper(proof, f), [air], [pv])
        assert type(e.value) is PowError
    # and on the honest nonce the same re-encoded proof still verifies
    verify(_tamper(proof, lambda p: None), [air], [pv])


def test_changed_public_value(fib):
    air, _, pv, proof = fib
    wrong = [pv[0], pv[1], (pv[2] + 1) % 2013265921]
    with pytest.raises(PublicValuesError):
        verify(proof, [air], [wrong])

    def f(p):       # the proof itself claims other public values
        p.tables[0].public_values = np.array(wrong, np.uint32)
    with pytest.raises(PublicValuesError):
        verify(_tamper(proof, f), [air], [pv])
    with pytest.raises(CompositionError):
        verify(_tamper(proof, f), [air], None)


def test_unbalanced_lookup(block):
    airs, traces, pvs, _ = block
    bad = [t.copy() for t in traces]
    bad[1][9, 1] += 1                            # RANGE receives a 9 nobody sent
    with pytest.raises(LookupImbalance):
        prove(bad, airs, pvs, FAST)
    forced = prove(bad, airs, pvs, FAST, check=False)
    with pytest.raises(LogUpError):
        verify(forced, airs, pvs)


def test_wrong_statement_shapes(fib, block):
    air, _, pv, proof = fib
    with pytest.raises(ShapeError):
        verify(proof, [ex.counter_air()], [[5, 3, 50]])
    with pytest.raises(ShapeError):
        verify(proof, [air, air], [pv, pv])
    with pytest.raises(ShapeError, match="num_parts"):
        verify(proof, [_quartic()], [[]])


def _quartic():
    b = AirBuilder("fibonacci")
    x = b.main("a")
    b.main("b")
    b.when_first_row(x * x * x)
    return b.build()


# ------------------------------------------------------------------ byte flips, truncation

@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_flipping_any_byte_never_verifies(block, data):
    airs, _, pvs, proof = block
    pos = data.draw(st.integers(0, len(proof) - 1))
    mask = data.draw(st.integers(1, 255))
    bad = bytearray(proof)
    bad[pos] ^= mask
    with pytest.raises(VerificationError):
        verify(bytes(bad), airs, pvs)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_truncations_are_rejected_cleanly(fib, data):
    air, _, pv, proof = fib
    cut = data.draw(st.integers(0, len(proof) - 1))
    with pytest.raises(ShapeError):
        verify(proof[:cut], [air], [pv])
