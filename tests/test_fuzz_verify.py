"""The verifier fuzzer (bench/fuzz_verify.py): a short run through the library's verify
accepts nothing and raises nothing untyped; the fuzzer itself classifies accepted and
untyped outcomes (checked with a broken verify), draws only mutations that change the
bytes, deterministically, and prints its result line in the exact format."""
from __future__ import annotations

import io
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import fuzz_verify as fv  # noqa: E402

LINE = re.compile(r"^fuzz: (\d+) mutated, (\d+) accepted, (\d+) untyped errors$")


@pytest.fixture(scope="module")
def honest():
    """The honest proof (proved once in a subprocess, then cached) and its layouts."""
    from steadfast.prover.api import BlockProof
    raw, _, _ = fv.honest_proof(fv.DEFAULT_BLOCK, {}, log=lambda *a: None, in_process=True)
    bp = BlockProof.from_bytes(raw)
    bp_layout, off = fv.block_proof_layout(raw)
    return {"bytes": raw, "proof": bp.proof, "bp_layout": bp_layout,
            "proof_layout": fv.proof_layout(bp.proof), "inner_off": off}


def _run(argv):
    buf = io.StringIO()
    rc = fv.main(argv + ["--prove-in-process"], out=buf)
    lines = buf.getvalue().rstrip("\n").split("\n")
    return rc, lines


def test_short_fuzz_accepts_nothing_and_raises_nothing_untyped(tmp_path):
    n = 200
    rc, lines = _run([str(n), "--seed", "11", "--save-dir", str(tmp_path)])
    m = LINE.match(lines[-1])
    assert m, lines[-1]
    assert (int(m[1]), int(m[2]), int(m[3])) == (n, 0, 0), "\n".join(lines)
    assert rc == 0
    assert not os.listdir(tmp_path)


def test_layout_tiles_the_proof_and_follows_the_decoder(honest):
    from steadfast.verifier.proof_format import decode
    lay = honest["proof_layout"]
    proof = decode(honest["proof"])
    assert len(lay.sections) == len(proof.tables)
    pos = 0
    for f in sorted(lay.fields, key=lambda f: f.start):
        assert f.start == pos
        pos = f.end
    assert pos == len(honest["proof"])
    # the recorded field holds the decoded values: the CPU table's public values
    pv = next(f for f in lay.fields if f.name == "t0.public_values")
    got = [int.from_bytes(honest["proof"][i:i + 4], "little") for i in range(pv.start, pv.end, 4)]
    assert got == [int(v) for v in proof.tables[0].public_values]
    # every table's section starts with its length
    for a, e in lay.sections:
        assert int.from_bytes(honest["proof"][a:a + 4], "little") == e - a - 4
    cats = lay.by_cat()
    assert set(cats) == {"header", "table_header", "small", "rows", "paths"}


def test_cases_change_the_bytes_and_are_deterministic(honest):
    seen_kinds = set()
    for i in range(150):
        target, kind, desc, data = fv.draw_case(5, i, honest)
        seen_kinds.add(kind)
        base = honest["proof"] if target == "proof" else honest["bytes"]
        assert data != base, desc
        assert fv.draw_case(5, i, honest) == (target, kind, desc, data)
    assert seen_kinds == set(fv._KIND_WEIGHTS)
    assert fv.draw_case(5, 0, honest) != fv.draw_case(6, 0, honest)


def test_u32_overwrites_use_the_listed_values(honest):
    vals = set()
    for i in range(400):
        _, kind, desc, _ = fv.draw_case(1, i, honest)
        if kind == "u32":
            vals.add(int(desc.split()[1]))
    assert vals == set(fv.U32_VALUES)


def test_a_verify_that_accepts_is_reported_and_saved(monkeypatch, tmp_path):
    import steadfast.prover.api as api
    monkeypatch.setattr(api, "verify", lambda proof, block=None, **kw: None)
    rc, lines = _run(["4", "--seed", "3", "--save-dir", str(tmp_path)])
    assert lines[-1] == "fuzz: 4 mutated, 4 accepted, 0 untyped errors"
    assert rc == 1
    assert len(os.listdir(tmp_path)) == 4
    assert sum(line.startswith("ACCEPTED case") for line in lines) == 4


def test_untyped_errors_are_reported(monkeypatch, tmp_path):
    import steadfast.prover.api as api
    real = api.verify
    calls = []

    def flaky(proof, block=None, **kw):
        calls.append(1)
        if len(calls) <= 2:             # the two checks of the honest proof
            return real(proof, block=block, **kw)
        raise IndexError("index 7 is out of bounds")
    monkeypatch.setattr(api, "verify", flaky)
    rc, lines = _run(["3", "--seed", "3", "--save-dir", str(tmp_path), "--json"])
    assert lines[-1] == "fuzz: 3 mutated, 0 accepted, 3 untyped errors"
    assert rc == 1
    assert sum(line.startswith("UNTYPED case") and line.endswith("IndexError: index 7 is out "
               "of bounds") for line in lines) == 3
    assert '"untyped": 3' in "\n".join(lines)


def test_a_hanging_verify_is_cut_off_and_reported(monkeypatch, tmp_path):
    import time as _time

    import steadfast.prover.api as api
    real = api.verify
    calls = []

    def slow(proof, block=None, **kw):
        calls.append(1)
        if len(calls) <= 2:
            return real(proof, block=block, **kw)
        _time.sleep(30)
    monkeypatch.setattr(api, "verify", slow)
    rc, lines = _run(["1", "--seed", "3", "--save-dir", str(tmp_path), "--hard-timeout", "0.3",
                      "--slow", "0.1"])
    assert lines[-1] == "fuzz: 1 mutated, 0 accepted, 1 untyped errors"
    assert rc == 1
    assert any(line.startswith("UNTYPED case 0") and "_Hang" in line for line in lines)
    assert any(line.startswith("SLOW case 0") for line in lines)


# --------------------------------------------------------------------------- regressions
# Root cause found by the fuzzer (ROM re-wrap up to the format's 2^20 rows): verify spent
# 30 s and 176 MiB in the program digest of a 16 MB block proof before rejecting it -- one
# Python-level Poseidon2 call per 8 ROM elements over a list of Python ints.  The digest now
# runs as one compiled sponge call.

def _digest_reference(values):
    """statement_digest written out with the pure-Python permutation."""
    from steadfast.vm.poseidon2 import RATE, WIDTH, P, _permute_py
    state = [0] * WIDTH
    state[RATE] = len(values) % P
    for k in range(0, len(values), RATE):
        block = values[k:k + RATE]
        state[:len(block)] = [int(v) % P for v in block]
        state = _permute_py(state)
    return state[:RATE]


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 31, 32, 33, 40, 64, 65, 1001])
def test_statement_digest_matches_the_reference_at_every_length(n):
    import random
    from steadfast.vm.poseidon2 import statement_digest
    rng = random.Random(n)
    vals = [rng.randrange(fv.P) for _ in range(n)]
    if n > 3:
        vals[1], vals[2], vals[3] = fv.P, fv.P - 1, 2**32 - 1      # reduced mod p
    assert statement_digest(vals) == _digest_reference(vals)


def test_long_rom_digest_needs_no_python_permutation(monkeypatch, honest):
    import numpy as np

    import steadfast.vm.poseidon2 as vp
    from steadfast.prover.api import BlockProof, verify
    from steadfast.verifier.errors import PublicValuesError
    from steadfast.vm.statement import program_digest
    rom = BlockProof.from_bytes(honest["bytes"]).rom
    big = np.tile(rom, ((1 << 11) // rom.shape[0] + 1, 1))[:1 << 11]
    expected = _digest_reference([int(x) for x in big.reshape(-1)])

    def no_python_rounds(state):
        raise AssertionError("a per-block Python permutation on a long input")
    monkeypatch.setattr(vp, "permute_one", no_python_rounds)
    assert program_digest(big) == expected
    forged = BlockProof(big, BlockProof.from_bytes(honest["bytes"]).proof)
    with pytest.raises(PublicValuesError, match="program digest"):
        verify(forged.to_bytes(), block=fv.DEFAULT_BLOCK)
