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
FAST = Params(log_blowup=1, num_queries=6, pow_bits=3, logup_pow_bits=0, deep_pow_bits=0,
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


def test_wrong_multiproof_node(fib, block):
    air, _, pv, proof = fib
    for field in ("main_nodes", "parts_nodes"):          # the mixed trees' (format 6)
        def f(p, field=field):
            setattr(p.commits, field, _bump(getattr(p.commits, field), (1, 5)))
        with pytest.raises(MerkleError, match=field.split("_")[0]):
            verify(_tamper(proof, f), [air], [pv])

    def g(p):
        p.fri.nodes[0] = _bump(p.fri.nodes[0], (0, 0))
    with pytest.raises(MerkleError, match="FRI layer 0"):
        verify(_tamper(proof, g), [air], [pv])

    def v(p):                     # a value of a FRI leaf the queries did not reach
        p.fri.values[0] = _bump(p.fri.values[0], (0, 3))
    with pytest.raises(MerkleError, match="FRI layer 0"):
        verify(_tamper(proof, v), [air], [pv])
    airs, _, pvs, proof = block

    def h(p):
        p.commits.aux_nodes = _bump(p.commits.aux_nodes, (1, 0))
    with pytest.raises(MerkleError, match="aux"):
        verify(_tamper(proof, h), airs, pvs)


def test_wrong_opened_row(fib, block):
    air, _, pv, proof = fib
    for field in ("main_rows", "parts_rows"):
        def f(p, field=field):
            setattr(p.tables[0], field, _bump(getattr(p.tables[0], field), (0, 0)))
        with pytest.raises(MerkleError):
            verify(_tamper(proof, f), [air], [pv])
    airs, _, pvs, proof = block

    def g(p):                     # one table's row: the mixed aux tree no longer hashes
        p.tables[1].aux_rows = _bump(p.tables[1].aux_rows, (-1, 2))
    with pytest.raises(MerkleError, match="aux"):
        verify(_tamper(proof, g), airs, pvs)


def test_count_and_cap_shapes_are_shape_errors(fib, block):
    """Counts that follow from the queries (opened rows, nodes, FRI values) and shapes that
    follow from the parameters (caps, layer count, final length) are ShapeErrors: one more
    or one fewer of anything."""
    airs, _, pvs, proof = block
    one = decode(proof)
    grow = lambda a: np.concatenate([a, a[-1:]])     # noqa: E731
    cuts = []
    for t in range(2):
        for name in ("main_rows", "aux_rows", "parts_rows"):
            if getattr(one.tables[t], name).shape[0]:
                cuts.append(("t", t, name))
    for name in ("main_nodes", "aux_nodes", "parts_nodes", "main_cap", "aux_cap", "parts_cap"):
        if getattr(one.commits, name).shape[0]:
            cuts.append(("c", name))
    for i in range(one.fri.num_layers):
        cuts += [("values", i), ("nodes", i), ("caps", i)]
    cuts.append(("final_poly",))
    assert len(cuts) > 15
    for cut in cuts:
        for op in (grow, lambda a: a[:-1]):
            def f(p, cut=cut, op=op):
                if cut[0] == "t":
                    setattr(p.tables[cut[1]], cut[2], op(getattr(p.tables[cut[1]], cut[2])))
                elif cut[0] == "c":
                    setattr(p.commits, cut[1], op(getattr(p.commits, cut[1])))
                elif cut[0] == "final_poly":
                    p.fri.final_poly = op(p.fri.final_poly)
                else:
                    getattr(p.fri, cut[0])[cut[1]] = op(getattr(p.fri, cut[0])[cut[1]])
            try:
                bad = _tamper(proof, f)
            except ValueError:                 # the encoder itself refuses it
                continue
            with pytest.raises(ShapeError):
                verify(bad, airs, pvs)

    def drop_layer(p):
        p.fri.caps, p.fri.values, p.fri.nodes = p.fri.caps[:-1], p.fri.values[:-1], p.fri.nodes[:-1]
        p.fri.fold_nonces = p.fri.fold_nonces[:-1]
    with pytest.raises(ShapeError, match="layer count"):
        verify(_tamper(proof, drop_layer), airs, pvs)
    # the parameters fix the caps, the layer count and L: the same proof read with another
    # log_cap, arity or final length (fib: log_n 4, FRI heights 5, 3 at arity 4)
    import dataclasses
    air, _, pv, proof = fib
    for change in ({"log_cap": one.params.log_cap + 1}, {"log_fri_arity": 1},
                   {"log_final_poly_len": 0}, {"log_final_poly_len": 3}):
        def f(p, change=change):
            p.params = dataclasses.replace(p.params, **change)
        with pytest.raises(ShapeError):
            verify(_tamper(proof, f), [air], [pv])


def _every_field(p):
    """(description, getter, setter) for every array element group and scalar of a v3
    proof: each table's arrays and nonces, the FRI section's arrays (per layer) and
    nonces, the LogUp nonce."""
    import dataclasses
    out = []
    for t, tp in enumerate(p.tables):
        for f in dataclasses.fields(tp):
            if f.name == "raw":
                continue
            out.append((f"table {t} {f.name}", t, f.name, None))
    for f in dataclasses.fields(p.fri):
        v = getattr(p.fri, f.name)
        if isinstance(v, list):
            out += [(f"fri {f.name}[{i}]", "fri", f.name, i) for i in range(len(v))]
        else:
            out.append((f"fri {f.name}", "fri", f.name, None))
    out.append(("logup_nonce", "proof", "logup_nonce", None))
    return out


def test_every_field_altered_is_rejected(block):
    """Every field of a v3 proof (each table's caps, OOD values, nonces, rows, nodes; every
    FRI cap, value and node array; the fold nonces, final polynomial, query nonce; the
    LogUp nonce; log_n) changed by one is rejected with a VerificationError subclass."""
    airs, _, pvs, proof = block
    fields = _every_field(decode(proof))
    assert len(fields) > 30
    tried = 0
    for desc, owner, name, idx in fields:
        def f(p, owner=owner, name=name, idx=idx):
            obj = p if owner == "proof" else p.fri if owner == "fri" else p.tables[owner]
            v = getattr(obj, name)
            if idx is not None:
                v = v[idx]
            if isinstance(v, np.ndarray):
                if not v.size:
                    raise LookupError
                v = v.copy()
                v.reshape(-1)[v.size // 2] = (int(v.reshape(-1)[v.size // 2]) + 1) % 2013265921
            else:
                v = (int(v) + 1) % 2013265921
            if idx is not None:
                getattr(obj, name)[idx] = v
            else:
                setattr(obj, name, v)
        try:
            bad = _tamper(proof, f)
        except LookupError:
            continue
        tried += 1
        with pytest.raises(VerificationError):
            verify(bad, airs, pvs)
    assert tried > 30


def test_version_2_proof_is_refused(fib):
    air, _, pv, proof = fib
    old = proof[:4] + (2).to_bytes(2, "little") + proof[6:]
    with pytest.raises(ShapeError, match="unsupported proof version 2"):
        verify(old, [air], [pv])


class _BadFinal(HostStages):
    """A cheating prover: a wrong final polynomial, everything else consistent."""

    def fri_final(self, values, log_height, length):
        c = super().fri_final(values, log_height, length).copy()
        c[0, 2] = (int(c[0, 2]) + 1) % 2013265921
        return c


class _BadFold(HostStages):
    """A cheating prover: every fold's output is off by one everywhere (still of low
    degree: a constant added), committed consistently."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer
        self.calls = 0

    def fri_fold(self, values, beta, log_arity, log_height, rollin=None):
        out = super().fri_fold(values, beta, log_arity, log_height, rollin)
        if self.calls == self.layer:
            out = out.copy()
            out[:, 0] = ((out[:, 0].astype(np.int64) + 1) % 2013265921).astype(np.uint32)
        self.calls += 1
        return out


class _BadDeep(HostStages):
    """A cheating prover: a table's DEEP quotient shifted by a constant (low degree, so
    FRI itself is happy) -- only the link to the opened rows can catch it."""

    def deep_quotient(self, *a, **k):
        out = np.array(super().deep_quotient(*a, **k), copy=True)
        out[..., 0] = ((out[..., 0].astype(np.int64) + 1) % 2013265921).astype(np.uint32)
        return out


def test_cheating_fri_provers():
    from steadfast.verifier.protocol import fri_layer_heights
    t, pv = ex.fibonacci_trace(7)
    air = ex.fibonacci_air()
    params = Params(log_blowup=1, num_queries=6, pow_bits=3, logup_pow_bits=0, deep_pow_bits=0,
                    commit_pow_bits=0, log_fri_arity=1)
    r = len(fri_layer_heights(params, [7])) - 1
    assert r >= 3
    proof = prove([t], [air], [pv], params, stages=_BadFinal())
    with pytest.raises(FriError, match="final polynomial"):
        verify(proof, [air], [pv])
    # a bad fold before the last: the next layer's committed leaves disagree with the
    # verifier's own fold of the opened leaf
    proof = prove([t], [air], [pv], params, stages=_BadFold(0))
    with pytest.raises(MerkleError, match="FRI layer 1"):
        verify(proof, [air], [pv])
    # the last fold: the final polynomial disagrees with the verifier's fold
    proof = prove([t], [air], [pv], params, stages=_BadFold(r - 1))
    with pytest.raises(FriError, match="final polynomial"):
        verify(proof, [air], [pv])
    proof = prove([t], [air], [pv], params, stages=_BadDeep())
    with pytest.raises(MerkleError, match="FRI layer 0"):
        verify(proof, [air], [pv])
    # a final polynomial changed after the fact changes the transcript: rejected too
    honest = prove([t], [air], [pv], params)

    def f(p):
        p.fri.final_poly = _bump(p.fri.final_poly, (0, 2))
    with pytest.raises(VerificationError):
        verify(_tamper(honest, f), [air], [pv])


def test_mixed_heights_roll_in():
    """Tables of three heights (a roll-in at two layers, two tables sharing a height,
    mu-combined): honest proofs verify at every arity; a DEEP quotient of the smallest
    table off by a constant is caught where it is rolled in."""
    from steadfast.verifier.protocol import fri_layer_heights
    airs, traces, pvs = [], [], []
    for log_n in (7, 5, 5, 3):
        t, pv = ex.fibonacci_trace(log_n)
        airs.append(ex.fibonacci_air())
        traces.append(t)
        pvs.append(pv)
    for arity in (1, 2, 3):
        params = Params(log_blowup=1, num_queries=6, pow_bits=3, logup_pow_bits=0, deep_pow_bits=0,
                        commit_pow_bits=0, log_fri_arity=arity, log_final_poly_len=1)
        proof = prove(traces, airs, pvs, params)
        verify(proof, airs, pvs)
    hs = fri_layer_heights(params, [7, 5, 5, 3])
    assert {8, 6, 4} <= set(hs)

    class _BadSmall(HostStages):
        def deep_quotient(self, shape, *a, **k):
            out = np.array(super().deep_quotient(shape, *a, **k), copy=True)
            if shape.log_n == 3:
                out[..., 0] = ((out[..., 0].astype(np.int64) + 1) % 2013265921).astype(np.uint32)
            return out
    proof = prove(traces, airs, pvs, params, stages=_BadSmall())
    layer = hs.index(4)              # rolled in after layer (index - 1): caught at `layer`
    with pytest.raises((MerkleError, FriError)) as e:
        verify(proof, airs, pvs)
    assert (f"FRI layer {layer}" in str(e.value) if layer < len(hs) - 1
            else "final polynomial" in str(e.value))


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
    "mu_pow": (lambda p: p.fri.mu_nonce,
               lambda p, v: setattr(p.fri, "mu_nonce", v)),
    "fold_pow": (lambda p: int(p.fri.fold_nonces[0]),
                 lambda p, v: p.fri.fold_nonces.__setitem__(0, v)),
    "pow": (lambda p: p.fri.pow_nonce,
            lambda p, v: setattr(p.fri, "pow_nonce", v)),
}


@pytest.mark.parametrize("label", list(_NONCES))
def test_wrong_pow_nonce(monkeypatch, label):
    """At every grinding point (before the LogUp challenges, z, lambda, mu, each FRI fold and
    the queries) a nonce known to fail the difficulty at that transcript state is rejected
    with exactly PowError.  The verifier checks each proof of work right before the
    challenge it guards, and nothing before it depends on the nonce, so no other error
    can come first."""
    t, pv = ex.fibonacci_trace(4)
    air = ex.fibonacci_air()
    bits = 8
    proof = prove([t], [air], [pv], Params(num_queries=4, pow_bits=bits, logup_pow_bits=bits,
                                           deep_pow_bits=bits, commit_pow_bits=bits,
                                           log_fri_arity=1))
    get, put = _NONCES[label]
    honest = get(decode(proof))
    assert encode(decode(proof)) == proof            # re-encoding alone changes nothing
    points = [(f, lb, b) for f, lb, b in _pow_point(monkeypatch, proof, [air], [pv]) if lb == label]
    # log_n 4, blowup 2, final length 4, arity 2: FRI heights 5, 4, 3 -> 2 fold steps
    assert len(points) == (2 if label == "fold_pow" else 1)
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
