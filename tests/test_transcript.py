"""The one transcript: sponge semantics against a hand-written reference, framing,
forks, proof of work, and equal prover / verifier label logs."""
import numpy as np
import pytest

from steadfast.air import examples as ex
from steadfast.prover import Params, prove
import functools

from steadfast.verifier import decode, verify as _verify

# These tests prove with weak parameters on purpose (few queries, little grinding):
# their verifications say so explicitly by requiring no security minimum.
verify = functools.partial(_verify, min_security_bits=0)
from steadfast.verifier.poseidon2 import P, permute
from steadfast.verifier.transcript import Transcript, label_elems


def test_duplex_matches_reference():
    t = Transcript(_empty=True)
    t.absorb("ab", [5])
    got = t.sample_base("c")[0]
    # absorb frame: tag, label, len, values; sample frame: tag, label, len 1, count 1
    elems = [1] + label_elems("ab") + [1, 5] + [2] + label_elems("c") + [1, 1]
    assert elems == [1, 2, int.from_bytes(b"ab", "little"), 1, 5, 2, 1, ord("c"), 1, 1]
    state = np.zeros(16, np.uint32)
    state[:8] = elems[:8]
    state = permute(state)
    state[:2] = elems[8:]                 # the two pending elements, overwrite mode
    state = permute(state)
    assert got == int(state[0])
    # further samples take lanes 1, 2, ... of the same output, then permute again
    rest = [t._sample() for _ in range(7)]
    assert rest == [int(v) for v in state[1:8]]
    assert t._sample() == int(permute(state)[0])


def test_framing_and_labels_separate_transcripts():
    def run(ops):
        t = Transcript()
        for label, vals in ops:
            t.absorb(label, vals)
        return t.sample_ef("x").tolist()

    base = run([("a", [1, 2]), ("b", [3])])
    assert base == run([("a", [1, 2]), ("b", [3])])
    assert base != run([("a", [1]), ("b", [2, 3])])
    assert base != run([("a", [1, 2, 3]), ("b", [])])
    assert base != run([("A", [1, 2]), ("b", [3])])
    with pytest.raises(ValueError):
        Transcript().absorb("bad", [P])


def test_forks_are_independent_and_leave_parent_untouched():
    t = Transcript()
    t.absorb("root", [7] * 8)
    f0, f1 = t.fork(0), t.fork(1)
    c0, c1 = f0.sample_ef("alpha"), f1.sample_ef("alpha")
    assert c0.tolist() != c1.tolist()
    again = Transcript()
    again.absorb("root", [7] * 8)
    again.fork(0)
    again.fork(1)
    assert again.sample_ef("z").tolist() == t.sample_ef("z").tolist()
    assert Transcript().fork(0).sample_ef("alpha").tolist() != c0.tolist()


def test_sample_bits_range():
    t = Transcript()
    q = t.sample_bits("queries", 5, 200)
    assert q.min() >= 0 and q.max() < 32 and len(set(q.tolist())) > 16


@pytest.mark.parametrize("bits", [0, 1, 7])
def test_grind_finds_the_smallest_valid_nonce(bits):
    t = Transcript()
    t.absorb("final", list(range(13)))       # leaves a partly filled input buffer
    nonce = t.grind("pow", bits, batch=64)
    for smaller in range(nonce):
        assert not t.copy().check_pow("pow", smaller, bits)
    probe = t.copy()
    assert probe.check_pow("pow", nonce, bits)
    assert t.check_pow("pow", nonce, bits)
    assert t.state.tolist() == probe.state.tolist()
    assert not Transcript().check_pow("pow", P, 0)  # non-canonical nonce


@pytest.mark.parametrize("bits", [0, 1, 5, 9, 12, 14])
def test_compiled_grind_search_finds_the_batch_search_nonce(bits):
    """kernels/poseidon2.grind_search (the prover's compiled proof-of-work search:
    interleaved chunks over the threads, a chunk above a found one skipped) returns the
    nonce of the transcript's batch search, for inputs that leave the nonce at different
    lanes; the smallest one (checked below it for small searches); serial and threaded
    (bits above GRIND_SERIAL_BITS) alike."""
    from steadfast.kernels import poseidon2 as p2
    for i in range(12 if bits < 14 else 4):
        t = Transcript()
        t.absorb("x", list(range(i % 9)) + [bits])
        want = t.copy().grind("deep_pow", bits, batch=1 << max(6, min(13, bits)))
        got = t.copy().grind("deep_pow", bits, search=p2.grind_search)
        assert got == want, (bits, i)
        if bits <= 9:
            assert not any(t.copy().check_pow("deep_pow", n, bits) for n in range(got))
        assert t.copy().prove_work("deep_pow", bits, search=p2.grind_search) == want
    base = np.zeros(16, np.uint32)
    with pytest.raises(ValueError, match="grind_search"):
        p2.grind_search(base, 16, 4)
    with pytest.raises(ValueError, match="canonical"):
        p2.grind_search(np.full(16, P, np.uint32), 0, 4)


def test_grind_search_declines_without_the_lanes_kernel(monkeypatch):
    """With the int64 kernel (STEADFAST_POSEIDON2_KERNEL=int64) the search says None and
    the transcript falls back to its batches: the same nonce."""
    from steadfast.kernels import poseidon2 as p2
    monkeypatch.setattr(p2, "_LANES", False)
    t = Transcript()
    t.absorb("x", [3])
    assert p2.grind_search(t.state, 0, 8) is None
    assert t.copy().grind("pow", 8, search=p2.grind_search) == t.copy().grind("pow", 8)


def test_prover_and_verifier_label_logs_are_equal():
    airs, traces, pvs = ex.lookup_block(4, 8)
    logs = []
    proof = prove(traces, airs, pvs, Params(num_queries=6, pow_bits=2), logs=logs)
    res = verify(proof, airs, pvs)
    assert res.logs == logs
    main = [entry[:2] for entry in logs[0]]
    assert main[:2] == [("absorb", "domain:steadfast/stark/v1"), ("absorb", "params")]
    labels = [m[1] for m in main]
    k = labels.index("logup_beta")
    assert main[k - 1:k + 5] == [("pow", "logup_pow"), ("sample_ef", "logup_beta"),
                                 ("sample_ef", "logup_gamma"), ("fork", "table"),
                                 ("fork", "table"), ("fork", "table")]
    assert labels[2:k - 1].count("main_cap") == 1          # the mixed main tree's (format 6)
    # the join (format 3): after every fork, on the main transcript
    join = main[k + 5:]
    assert join[:5] == [("absorb", "table_digest")] * 3 + [("pow", "mu_pow"),
                                                           ("sample_ef", "fri_mu")]
    layers = join[5:-3]
    assert layers and len(layers) % 3 == 0
    assert layers == [("absorb", "fri_cap"), ("pow", "fold_pow"),
                      ("sample_ef", "fri_beta")] * (len(layers) // 3)
    assert join[-3:] == [("absorb", "fri_final"), ("pow", "pow"), ("sample_bits", "queries")]
    assert len(layers) // 3 == decode(proof).fri.num_layers
    for fork in logs[1:]:
        fl = [entry[1] for entry in fork]
        assert fl[0] == "table"
        assert ("aux_cap" in fl) == ("logup_terminal" in fl)
        assert fl[-3:] == ["deep_pow", "deep_lambda", "table_digest"]
        assert "parts_cap" in fl and "fri_cap" not in fl and "queries" not in fl
    fork0 = [entry[1] for entry in logs[1]]
    assert fork0[:5] == ["table", "aux_cap", "logup_terminal", "alpha", "parts_cap"]
    assert logs[1][-1] == ("sample", "table_digest", 8)           # sample_base x 8
