"""The command line for blocks of RISC-V transactions (block format version 2,
docs/api.md "Command line"): ``prove BLOCK.json`` (per-transaction exit codes and outputs,
the proof file, ``--stats-json``), ``--execute-only [--json]`` (``transactions`` with
``exit_code`` and ``output``, ``cycles``; a false claim exit 1), ``verify PROOF --block
BLOCK.json [--json]`` (exit codes and state_out; every rejection a one-line reason and
exit 1), a malformed block ``error: FILE: $.path: ...`` exit 2, never a traceback; a
version-1 block refused by name (exit 2).

WEAK PARAMETERS: 6 queries; verify is told --min-security-bits 0 except where the
default's refusal is the point.  One CLI proof of examples/block.json for the module."""
import json
import shutil
from pathlib import Path

import pytest

from steadfast.prover.cli import main_prove, main_verify
from steadfast.rv32.blockfile import load_block

from tests.test_txblock import CODES, expected_state_out

ROOT = Path(__file__).resolve().parents[1]
WEAK = ["--queries", "6", "--pow-bits", "1", "--backend", "host"]
ANY = ["--min-security-bits", "0"]
FILES = ("block.json", "hello.elf", "transfer.elf", "merkle.elf", "transfer.in")


def run(main, argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("block2")
    for name in FILES:
        shutil.copy(ROOT / "examples" / name, d / name)
    return d


def variant(folder: Path, name: str, change) -> Path:
    """A copy of block.json beside it with ``change(obj)`` applied."""
    obj = json.loads((folder / "block.json").read_text())
    change(obj)
    p = folder / name
    p.write_text(json.dumps(obj, indent=1))
    return p


@pytest.fixture(scope="module")
def proved(folder):
    """``prove block.json --stats-json s.json`` once: (exit status, stdout, stderr)."""
    cap = pytest.MonkeyPatch()
    import io
    import sys
    out, err = io.StringIO(), io.StringIO()
    cap.setattr(sys, "stdout", out)
    cap.setattr(sys, "stderr", err)
    try:
        code = main_prove([str(folder / "block.json"), "--stats-json",
                           str(folder / "s.json"), *WEAK])
    finally:
        cap.undo()
    assert "Traceback" not in out.getvalue() + err.getvalue()
    return code, out.getvalue(), err.getvalue()


def state_of(folder: Path, codes, outputs, state_in=bytes(32)) -> str:
    blk = load_block(folder / "block.json")
    return expected_state_out(state_in, [(t.program.digest(), t.input, c, o) for t, c, o in
                                         zip(blk.transactions, codes, outputs)]).hex()


def test_prove(folder, proved):
    """The proof file (STB2) beside the block, every transaction's exit code and output
    on stdout, the statistics with transactions and state_out."""
    code, out, err = proved
    assert code == 0, err
    proof = folder / "block.proof"
    assert proof.read_bytes()[:4] == b"STB2"
    assert "wrote" in out and "3 transactions:" in out
    assert "tx 0 (hello): exit code 0, output (24 bytes): b'hello from rv32im\\n!dlrow'" in out
    assert "tx 1 (transfer): exit code 7, output (79 bytes): 040000000a" in out
    assert "tx 2 (merkle.elf): exit code 0, output (32 bytes): eb9ec819" in out
    assert "proving" in err and "3 transactions" in err and "warning:" in err
    st = json.loads((folder / "s.json").read_text())
    assert st["ok"] and st["status"] == 0 and st["exit_code"] == 0
    assert st["block_version"] == 2 and st["max_cycles"] == 65536
    assert [t["exit_code"] for t in st["transactions"]] == CODES
    outs = [bytes.fromhex(t["output"]) for t in st["transactions"]]
    blk = load_block(folder / "block.json")
    assert outs == [t.output for t in blk.transactions]
    assert st["state_out"] == state_of(folder, CODES, outs)
    assert f"state out {st['state_out']}" in out
    assert st["proof_file_bytes"] == proof.stat().st_size and len(st["tables"]) == 50
    assert st["cycles"] == 190 + 976 + 226 and 0 < st["security_bits"] < 100


def test_verify(folder, proved, capsys):
    """verify --block: OK with exit codes and state_out (text and JSON); refused under
    the default minimum; without --block a usage error."""
    proof, blk = folder / "block.proof", folder / "block.json"
    st = json.loads((folder / "s.json").read_text())
    code, out, err = run(main_verify, [proof, "--block", blk, *ANY], capsys)
    assert code == 0, err
    assert "proof OK for block" in out and "3 transactions within max_cycles 65,536" in out
    assert "tx 1 (transfer): exit code 7" in out and f"state out {st['state_out']}" in out
    assert f"state in  {'0' * 64}" in out and "conjectured security bits" in out
    code, out, _ = run(main_verify, [proof, "--block", blk, *ANY, "--json"], capsys)
    rep = json.loads(out)
    assert code == 0 and rep["ok"] and rep["error"] is None and rep["exit_code"] == 0
    assert [t["exit_code"] for t in rep["transactions"]] == CODES
    assert [t["output"] for t in rep["transactions"]] == [t["output"]
                                                          for t in st["transactions"]]
    assert rep["state_out"] == st["state_out"] and rep["max_cycles"] == 65536
    assert rep["params"]["num_queries"] == 6 and 0 < rep["security_bits"] < 100
    code, _, err = run(main_verify, [proof, "--block", blk], capsys)
    assert code == 1 and "proof refused" in err and "--min-security-bits" in err
    code, _, err = run(main_verify, [proof, *ANY], capsys)
    assert code == 2 and "give its block with --block BLOCK.json" in err
    # another state_in: the same proof, the state_out of that state_in
    s = bytes(range(32))
    other = variant(folder, "chained.json", lambda o: o.update(state_in=s.hex()))
    code, out, _ = run(main_verify, [proof, "--block", other, *ANY, "--json"], capsys)
    outs = [bytes.fromhex(t["output"]) for t in st["transactions"]]
    assert code == 0 and json.loads(out)["state_out"] == state_of(folder, CODES, outs, s)


def test_execute_only_shows_outputs_as_prove_does(folder, proved, capsys):
    """``--execute-only`` shows each transaction's exit code and output in prove's and
    verify's words (issue #38 item 4: it printed "exit 7 ... output 79 bytes" in hex,
    text included), with its cycles beside them."""
    import re
    _, proved_out, _ = proved
    shown = re.findall(r"^  tx (\d+) \((.+?)\): exit code (\d+), output (.*)$", proved_out, re.M)
    assert len(shown) == 3, proved_out
    code, out, _ = run(main_prove, [folder / "block.json", "--execute-only", *WEAK], capsys)
    assert code == 0
    ran = re.findall(r"^  tx (\d+) \((.+?)\): exit code (\d+), ([\d,]+) cycles, output (.*)$",
                     out, re.M)
    assert [(i, n, c, o) for i, n, c, _, o in ran] == shown, out
    assert "output (24 bytes): b'hello from rv32im\\n!dlrow'" in out


def _claim(i, **kw):
    """Transaction i's fields set (None: removed)."""
    def change(o):
        for k, v in kw.items():
            if v is None:
                o["transactions"][i].pop(k, None)
            else:
                o["transactions"][i][k] = v
    return change


def test_verify_rejections(folder, proved, capsys):
    """Every rejection: exit 1 with the reason naming the transaction (JSON: ok false and
    the error's class); a malformed or missing block exit 2."""
    proof, blk = folder / "block.proof", folder / "block.json"
    data = proof.read_bytes()
    cases = [
        (_claim(1, exit_code=3), "transaction 1: the block claims exit code 3, the proof 7"),
        (_claim(0, output="00"), "transaction 0: the block's claimed output"),
        (_claim(0, input="00"), "transaction 0: the proof is not for this input"),
        (_claim(2, elf="hello.elf", output=None), "transaction 2: the proof is not for this "
                                                  "program"),
        (lambda o: o.update(max_cycles=1 << 20), "transaction 0: the proof is for max_cycles"),
        (lambda o: o["transactions"].reverse(), "transaction 0"),
        (lambda o: o["transactions"].pop(), "the proof is for a block of 3 transactions, "
                                            "this block has 2"),
    ]
    for k, (change, fragment) in enumerate(cases):
        p = variant(folder, f"bad{k}.json", change)
        code, _, err = run(main_verify, [proof, "--block", p, *ANY], capsys)
        assert code == 1 and fragment in err and err.startswith("error: invalid proof:"), err
    code, out, err = run(main_verify, [proof, "--block", folder / "bad0.json", *ANY,
                                       "--json"], capsys)
    rep = json.loads(out)
    assert code == 1 and rep["ok"] is False and rep["exit_code"] == 1
    assert rep["error"]["class"] == "PublicValuesError" and "transaction 1" in err
    for k, bad in enumerate((data[:len(data) // 2], data[:10], data[:-1] + bytes([data[-1] ^ 1]),
                             data[:5000] + bytes([data[5000] ^ 4]) + data[5001:])):
        (folder / f"t{k}.proof").write_bytes(bad)
        code, _, err = run(main_verify, [folder / f"t{k}.proof", "--block", blk, *ANY], capsys)
        assert code == 1 and "invalid proof" in err, err
    v1 = folder / "v1.json"
    v1.write_text(json.dumps({"format": "steadfast-block", "version": 1, "memory_size": 64,
                              "initial_memory": [], "programs": [], "transactions": []}))
    code, _, err = run(main_verify, [proof, "--block", v1, *ANY], capsys)
    assert code == 2 and "$.version: unsupported version 1" in err
    code, _, err = run(main_verify, [proof, "--block", folder / "none.json", *ANY], capsys)
    assert code == 2 and "cannot read" in err
    p = variant(folder, "malformed.json", _claim(1, exit_code="7"))
    code, _, err = run(main_verify, [proof, "--block", p, *ANY], capsys)
    assert code == 2 and f"error: {p}: $.transactions[1].exit_code: expected an integer" in err


def test_execute_only(folder, capsys):
    """--execute-only --json: transactions (exit_code, output hex), cycles, claims_ok;
    the text summary; a false claim reported (claims_ok false, exit 1, the transaction
    named); an execution failure exit 1."""
    blk = folder / "block.json"
    code, out, err = run(main_prove, [blk, "--execute-only", "--json", *WEAK], capsys)
    assert code == 0, err
    rep = json.loads(out)
    assert rep["claims_ok"] is True and rep["ok"] is True and rep["status"] == 0
    assert rep["cycles"] == 190 + 976 + 226 and rep["block_version"] == 2
    assert [t["exit_code"] for t in rep["transactions"]] == CODES
    assert [t["cycles"] for t in rep["transactions"]] == [190, 976, 226]
    assert rep["transactions"][0]["output"] == "68656c6c6f2066726f6d2072763332696d0a21646c726f77"
    assert rep["state_out"] == state_of(folder, CODES, [bytes.fromhex(t["output"]) for t in
                                                        rep["transactions"]])
    assert len(rep["tables"]) == 50 and rep["backend"] == "host"
    code, out, _ = run(main_prove, [blk, "--execute-only", *WEAK], capsys)
    assert code == 0 and "3 transactions, 1,392 cycles" in out and "tx 1 (transfer): exit code 7, 976 cycles" in out
    bad = variant(folder, "false.json", _claim(1, exit_code=8))
    code, out, err = run(main_prove, [bad, "--execute-only", "--json", *WEAK], capsys)
    rep = json.loads(out)
    assert code == 1 and rep["claims_ok"] is False and rep["status"] == 1
    assert rep["transactions"][1]["claims_ok"] is False
    assert "transaction 1 (transfer)" in rep["transactions"][1]["claim_error"]
    assert "claims are not what execution does" in err and "exit code 8" in err
    code, out, err = run(main_prove, [bad, "--execute-only", *WEAK], capsys)
    assert code == 1 and "FALSE CLAIM" in out
    code, _, err = run(main_prove, [bad, *WEAK], capsys)
    assert code == 1 and "block cannot be proven: transaction 1 (transfer)" in err
    assert not (folder / "false.proof").exists()
    tiny = variant(folder, "tiny.json", lambda o: o.update(max_cycles=200))
    code, out, err = run(main_prove, [tiny, "--execute-only", "--json", *WEAK], capsys)
    assert code == 1 and json.loads(out)["failure"]["error"] == "UnprovableBlock"
    assert "transaction 1 (transfer): execution failed" in err


BAD_BLOCKS = [
    (_claim(1, input_file=None, input="abc"), "$.transactions[1].input: not an even-length hex"),
    (_claim(2, elf="missing.elf"), "$.transactions[2].elf: cannot read 'missing.elf'"),
    (lambda o: o["programs"][0].update(elf="transfer.in"), "$.programs[0].elf: not an RV32IM"),
    (lambda o: o.update(max_cycles=0), "$.max_cycles: 0 is out of range"),
    (lambda o: o.update(state_in="00"), "$.state_in: expected 32 bytes"),
    (_claim(0, program="nobody"), "$.transactions[0].program: no program named 'nobody'"),
]


@pytest.mark.parametrize("change,fragment", BAD_BLOCKS)
def test_malformed_block(folder, change, fragment, capsys):
    p = variant(folder, "malformed.json", change)
    code, out, err = run(main_prove, [p, *WEAK], capsys)
    assert code == 2 and f"error: {p}: {fragment}" in err, err
    assert not (folder / "malformed.proof").exists()
    code, _, err = run(main_prove, [p, "--execute-only", *WEAK], capsys)
    assert code == 2 and f"error: {p}: {fragment}" in err


def test_usage(folder, capsys):
    """--input / --max-cycles are a program's; -o may not overwrite a file the block
    names; --precompile on the host compiles nothing; a version-1 block is refused by
    name (exit 2)."""
    blk = folder / "block.json"
    code, _, err = run(main_prove, [blk, "--max-cycles", "10", *WEAK], capsys)
    assert code == 2 and "apply to programs" in err
    code, _, err = run(main_prove, [blk, "-o", folder / "transfer.elf", *WEAK], capsys)
    assert code == 2 and "is the input $.programs[1].elf" in err
    code, _, err = run(main_prove, [blk, "-o", folder / "transfer.in", *WEAK], capsys)
    assert code == 2 and "is the input $.transactions[1].input_file" in err
    assert (folder / "transfer.in").read_bytes() == (ROOT / "examples" / "transfer.in").read_bytes()
    code, out, _ = run(main_prove, [blk, "--precompile", *WEAK], capsys)
    assert code == 0 and "precompiled 0 steps" in out
    v1 = folder / "v1.json"
    v1.write_text(json.dumps({"format": "steadfast-block", "version": 1, "memory_size": 64,
                              "initial_memory": [], "programs": [], "transactions": []}))
    code, out, err = run(main_prove, [v1, "--execute-only", "--json", *WEAK], capsys)
    assert code == 2 and "$.version: unsupported version 1" in err, err
