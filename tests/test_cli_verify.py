"""The command line's verify of block proofs: the default-parameter proof of the example
block verified against it (the parameters and conjectured security shown, the minimum
raised and lowered), a wrong block and bad proofs, and the default minimum's refusal of a
weak proof before it is examined.  (Split out of tests/test_cli.py; the module's
default-parameter proof is made once.)"""
from __future__ import annotations

import json
import os
import re

import pytest

from steadfast.prover.cli import main_prove, main_verify
from steadfast.rv32 import block as rblock

from tests.cli_helpers import ANY, write, run, copy_example
from tests.txblocks import empty_block, one_tx_block


@pytest.fixture(scope="module")
def example_proof(tmp_path_factory):
    """The example block proved once with the default parameters (Params' defaults) through
    the CLI, the default output path and --stats-json."""
    d = tmp_path_factory.mktemp("ex")
    blk = copy_example(d)
    stats = d / "stats.json"
    code = main_prove([blk, "--backend", "host", "--stats-json", str(stats), "-q"])
    assert code == 0
    return blk, str(d / "block.proof"), json.loads(stats.read_text())


def test_prove_defaults_and_verify(example_proof, capsys):
    blk, proof, stats = example_proof
    assert os.path.getsize(proof) == stats["proof_file_bytes"] > stats["proof_bytes"]
    assert len(stats["tables"]) == rblock.num_tables(3) == 50
    assert [t["name"].split("/")[0] for t in stats["tables"][:48:16]] == ["tx0", "tx1", "tx2"]
    assert [t["name"] for t in stats["tables"][48:]] == ["rv32_bytes", "poseidon2"]
    assert stats["block"] == blk and stats["cycles"] > 0 and len(stats["transactions"]) == 3
    code, out, err = run(main_verify, [proof], capsys)          # a block proof needs its block
    assert code == 2 and "--block" in err and out == ""
    code, out, _ = run(main_verify, [proof, "--block", blk], capsys)
    assert code == 0 and out.startswith(f"proof OK for block {blk}")
    # the parameters and the conjectured security are shown: the honest figure of the
    # example's shapes (docs/protocol.md section 7), above the default minimum
    from steadfast.verifier.proof_format import Params
    p = Params()
    assert (f"parameters: log_blowup {p.log_blowup}, {p.num_queries} queries, "
            f"{p.pow_bits} proof-of-work bits, log_final_poly_len {p.log_final_poly_len}, "
            f"grinding LogUp/DEEP/commit {p.logup_pow_bits}/{p.deep_pow_bits}/"
            f"{p.commit_pow_bits} bits: ") in out
    bits = int(re.search(r"(\d+) conjectured security bits \(minimum 100;", out).group(1))
    assert 100 <= bits < 116 and bits == stats["security_bits"]
    code, out, _ = run(main_verify, [proof, "--block", blk, "--min-security-bits", bits],
                       capsys)
    assert code == 0 and f"(minimum {bits};" in out
    code, out, err = run(main_verify, [proof, "--block", blk, "--min-security-bits", bits + 1],
                         capsys)
    assert code == 1 and out == "" and f"give {bits} conjectured security bits" in err
    code, out, _ = run(main_verify, [proof, "--block", blk, "-v"], capsys)
    assert code == 0 and f"  security: {bits} bits over 50 tables" in out


def test_verify_wrong_block_and_bad_proofs(example_proof, tmp_path, capsys):
    blk, proof, _ = example_proof
    other = write(tmp_path, "other.json", one_tx_block().to_json())
    code, _, err = run(main_verify, [proof, "--block", other], capsys)
    assert code == 1 and "the proof is for a block of 3 transactions, this block has 1" in err
    data = bytearray(open(proof, "rb").read())
    data[len(data) // 2] ^= 0x10
    bad = tmp_path / "bad.proof"
    bad.write_bytes(bytes(data))
    code, _, err = run(main_verify, [bad, "--block", blk], capsys)
    assert code == 1 and err.startswith("error: invalid proof:")
    garbage = tmp_path / "garbage.proof"
    garbage.write_bytes(b"hello")
    code, _, err = run(main_verify, [garbage], capsys)
    assert code == 1 and "bad magic" in err
    code, _, err = run(main_verify, [garbage, "--block", blk], capsys)
    assert code == 1 and "is not a proof of a block of RISC-V transactions (STB2, STBE)" in err
    code, _, err = run(main_verify, [tmp_path / "missing.proof", "--block", blk], capsys)
    assert code == 2 and "cannot read" in err
    empty = write(tmp_path, "e.json", "")
    code, _, err = run(main_verify, [proof, "--block", empty], capsys)
    assert code == 2 and f"error: {empty}: $: empty document" in err


def test_verify_refuses_weak_parameters_by_default(tmp_path, capsys):
    """A cheap proof (2 queries, no query proof of work: 2·log_blowup bits for the one
    FRI, a little less with the other terms) is refused unless the minimum is lowered; the
    parameters are checked before the proof is examined."""
    blk = write(tmp_path, "empty.json", empty_block().to_json())
    weak = str(tmp_path / "weak.proof")
    code, _, _ = run(main_prove, [blk, "-o", weak, "--queries", "2", "--pow-bits", "0",
                                  "--backend", "host", "-q"], capsys)
    assert code == 0
    code, out, err = run(main_verify, [weak, "--block", blk], capsys)
    assert code == 1 and out == ""
    assert err.startswith("error: proof refused:") and err.count("\n") == 1
    from steadfast.verifier.proof_format import Params
    m = re.search(r"give (\d+) conjectured security bits for these tables, below the "
                  r"required 100", err)
    assert m and int(m.group(1)) == 2 * Params.log_blowup - 1
    assert "2 queries, 0 query proof-of-work bits" in err and "--min-security-bits" in err
    code, out, _ = run(main_verify, [weak, "--block", blk, *ANY], capsys)
    assert code == 0 and out.startswith("proof OK for block")
    assert ("2 queries, 0 proof-of-work bits" in out
            and f" {2 * Params.log_blowup - 1} conjectured security bits" in out)
    above = 2 * Params.log_blowup                    # one more than the proof gives
    code, _, err = run(main_verify, [weak, "--block", blk, "--min-security-bits", above],
                       capsys)
    assert code == 1 and f"below the required {above}" in err
    # a weak proof that is also corrupt: refused for its parameters, before any hashing;
    # with no minimum the corruption itself is found
    from steadfast.prover.blocks.proof import TxBlockProof
    from steadfast.verifier.proof_format import decode
    honest = open(weak, "rb").read()
    for off in range(8, 4000, 4):       # one element of an array near the end: still parses
        data = bytearray(honest)
        data[-off] ^= 0x01
        try:
            decode(TxBlockProof.from_bytes(bytes(data)).proof)
            break
        except Exception:               # noqa: BLE001 -- a length or a rank: try the next
            continue
    bad = tmp_path / "bad.proof"
    bad.write_bytes(bytes(data))
    code, _, err = run(main_verify, [bad, "--block", blk], capsys)
    assert code == 1 and "proof refused" in err
    code, _, err = run(main_verify, [bad, "--block", blk, *ANY], capsys)
    assert code == 1 and err.startswith("error: invalid proof:")
    for value, frag in (("-1", "must be >= 0"), ("many", "invalid int value")):
        code, _, err = run(main_verify, [weak, "--block", blk, "--min-security-bits", value],
                           capsys)
        assert code == 2 and frag in err
