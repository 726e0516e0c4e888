"""The verifier fuzzer (bench/fuzz_verify.py, mutations in bench/fuzz_mutations.py) on a
block of RISC-V transactions (examples/block.json, block format 2): a short run through
the library's verify accepts nothing and raises nothing untyped; the fuzzer itself
classifies accepted and untyped outcomes (checked with a broken verify), draws only
mutations that change the proof or the statement, deterministically, and prints its result
line in the exact format; every kind of statement mutation is refused naming what
differs."""
from __future__ import annotations

import io
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import fuzz_mutations as fm  # noqa: E402
import fuzz_verify as fv  # noqa: E402
from steadfast.verifier.errors import VerificationError  # noqa: E402

LINE = re.compile(r"^fuzz: (\d+) mutated, (\d+) accepted, (\d+) untyped errors$")


@pytest.fixture(scope="module")
def honest():
    """The honest proof (proved once, then cached), its layouts, the block and its claims."""
    from steadfast.rv32.blockfile import load_block
    raw, _, _ = fv.honest_proof(fv.DEFAULT_BLOCK, {}, log=lambda *a: None, in_process=True)
    return fv.honest_cases(raw, load_block(fv.DEFAULT_BLOCK))


def _run(argv):
    buf = io.StringIO()
    rc = fv.main(argv + ["--prove-in-process"], out=buf)
    lines = buf.getvalue().rstrip("\n").split("\n")
    return rc, lines


def test_short_fuzz_accepts_nothing_and_raises_nothing_untyped(tmp_path):
    n = 100
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
    assert len(lay.sections) == len(proof.tables) == 16 * 3 + 2
    pos = 0
    for f in sorted(lay.fields, key=lambda f: f.start):
        assert f.start == pos
        pos = f.end
    assert pos == len(honest["proof"])
    # the recorded fields hold the decoded values: every table's public values (each
    # transaction's REGISTERS, IO and ECALL tables have some)
    pvs = {f.name: f for f in lay.fields if f.name.endswith(".public_values")}
    with_pvs = [t for t, tab in enumerate(proof.tables) if len(tab.public_values)]
    assert len(with_pvs) >= 3 * 2 and sorted(pvs) == sorted(f"t{t}.public_values" for t in with_pvs)
    for t in with_pvs:
        f = pvs[f"t{t}.public_values"]
        got = [int.from_bytes(honest["proof"][i:i + 4], "little") for i in range(f.start, f.end, 4)]
        assert got == [int(v) for v in proof.tables[t].public_values]
    # the block proof's header, then the STARK proof at offset 16
    names = [f.name for f in honest["bp_layout"].fields[:5]]
    assert names == ["bp.magic", "bp.version", "bp.reserved", "bp.n_tx", "bp.proof_len"]
    assert honest["inner_off"] == 16 and honest["bytes"][16:] == honest["proof"]
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
        base = {"proof": honest["proof"], "blockproof": honest["bytes"],
                "statement": honest["block"]}[target]
        assert (target == "statement") == (kind == "statement")
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


# --------------------------------------------------------------------------- statements

def test_every_statement_mutation_is_refused_naming_what_differs(honest):
    """Each statement operation on examples/block.json (three transactions), checked
    against the honest proof: a typed rejection -- PublicValuesError naming the
    transaction for a changed input, program, output, exit code or order, ShapeError for
    another transaction count."""
    from steadfast.prover.api import verify
    from steadfast.prover.blocks.proof import TxBlockProof
    proof = TxBlockProof.from_bytes(honest["bytes"])
    seen = {}
    for i in range(4000):
        rng = fm.random.Random(f"statement:{i}")
        blk, desc = fm._mutate_statement(rng, honest["block"], honest["claims"])
        head = desc.split(":")[0].strip()
        op = head.split(" ", 2)[2] if head.startswith("transaction ") else head
        if op in seen:
            continue
        assert blk != honest["block"], desc
        with pytest.raises(VerificationError) as ei:
            verify(proof, block=blk)
        seen[op] = (type(ei.value).__name__, str(ei.value))
        if len(seen) == len(fm._STATEMENT_OPS):
            break
    assert set(seen) == set(fm._STATEMENT_OPS), seen
    for op in ("input", "output", "exit_code", "program"):
        err, msg = seen[op]
        assert err == "PublicValuesError" and "transaction" in msg, (op, msg)


def test_state_in_is_not_bound_by_the_proof(honest):
    """Why the fuzzer leaves state_in alone: another state_in is a true statement -- the
    proof verifies, with the state_out derived from it."""
    import dataclasses

    from steadfast.prover.api import verify
    a = verify(honest["bytes"], block=honest["block"])
    b = verify(honest["bytes"], block=dataclasses.replace(honest["block"],
                                                          state_in=b"\x01" * 32))
    assert a.exit_codes == b.exit_codes and a.state_out != b.state_out


def test_profile_option_names_a_profile():
    """--profile takes the prover's profiles (their parameters and layout for the honest
    proof); another name is a usage error before anything is proved."""
    with pytest.raises(SystemExit) as e:
        fv.main(["1", "--profile", "nope"], out=io.StringIO())
    assert e.value.code == 2
