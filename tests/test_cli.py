"""The command line: exit codes (0 / 1 / 2), JSON paths for malformed blocks, locations
for execution failures, the default-parameter proof of examples/block.json, verify with
and without --block, verify's minimum security (weak proofs refused by default), and
never a traceback."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from steadfast.prover.cli import main_prove, main_verify

from tests.vm_blocks import empty_block, one_tx_block

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "block.json")
FAST = ["--queries", "8", "--pow-bits", "2", "--backend", "host"]


def write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(p)


def run(main, argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture(scope="module")
def example_proof(tmp_path_factory):
    """examples/block.json proved once with the default parameters (100 queries, 16 bits
    of proof of work) through the CLI, the default output path and --stats-json."""
    d = tmp_path_factory.mktemp("ex")
    block = d / "block.json"
    block.write_bytes(open(EXAMPLE, "rb").read())
    stats = d / "stats.json"
    code = main_prove([str(block), "--backend", "host", "--stats-json", str(stats), "-q"])
    assert code == 0
    return str(block), str(d / "block.proof"), json.loads(stats.read_text())


def test_prove_defaults_and_verify(example_proof, capsys):
    block, proof, stats = example_proof
    assert os.path.getsize(proof) == stats["proof_file_bytes"] > stats["proof_bytes"]
    assert [t["name"] for t in stats["tables"]] == ["cpu", "program", "memory", "range", "poseidon2"]
    assert stats["block"] == block and stats["cycles"] > 0
    code, out, _ = run(main_verify, [proof], capsys)
    assert code == 0 and out.startswith("proof OK")
    # the parameters and the conjectured security are shown: the honest figure of the
    # example's shapes (docs/protocol.md section 7), above the default minimum
    import re
    assert ("parameters: log_blowup 1, 100 queries, 16 proof-of-work bits, "
            "log_final_poly_len 2, grinding LogUp/DEEP/commit 16/12/8 bits: ") in out
    bits = int(re.search(r"(\d+) conjectured security bits \(minimum 100;", out).group(1))
    assert 100 <= bits < 116
    code, out, _ = run(main_verify, [proof, "--min-security-bits", str(bits)], capsys)
    assert code == 0 and f"(minimum {bits};" in out
    code, out, err = run(main_verify, [proof, "--min-security-bits", str(bits + 1)], capsys)
    assert code == 1 and out == "" and f"give {bits} conjectured security bits" in err
    code, out, _ = run(main_verify, [proof, "--block", block, "-v"], capsys)
    assert code == 0 and "for block" in out and "input_digest" in out


def test_verify_wrong_block_and_bad_proofs(example_proof, tmp_path, capsys):
    block, proof, _ = example_proof
    other = write(tmp_path, "other.json", one_tx_block().to_json())
    code, _, err = run(main_verify, [proof, "--block", other], capsys)
    assert code == 1 and "not for this block" in err
    data = bytearray(open(proof, "rb").read())
    data[len(data) // 2] ^= 0x10
    bad = tmp_path / "bad.proof"
    bad.write_bytes(bytes(data))
    code, _, err = run(main_verify, [str(bad)], capsys)
    assert code == 1 and err.startswith("error: invalid proof:")
    garbage = tmp_path / "garbage.proof"
    garbage.write_bytes(b"hello")
    code, _, err = run(main_verify, [str(garbage)], capsys)
    assert code == 1 and "bad magic" in err
    code, _, err = run(main_verify, [str(tmp_path / "missing.proof")], capsys)
    assert code == 2 and "cannot read" in err
    code, _, err = run(main_verify, [proof, "--block", write(tmp_path, "e.json", "")], capsys)
    assert code == 2 and "$: empty document" in err


def test_verify_refuses_weak_parameters_by_default(tmp_path, capsys):
    """A cheap proof (2 queries, no query proof of work: 2 bits per table, 0 for the five
    tables together) is refused unless the minimum is lowered; the parameters are checked
    before the proof is examined."""
    blk = write(tmp_path, "empty.json", empty_block().to_json())
    weak = str(tmp_path / "weak.proof")
    code, _, _ = run(main_prove, [blk, "-o", weak, "--queries", "2", "--pow-bits", "0",
                                  "--backend", "host", "-q"], capsys)
    assert code == 0
    code, out, err = run(main_verify, [weak], capsys)
    assert code == 1 and out == ""
    assert err.startswith("error: proof refused:") and err.count("\n") == 1
    assert "give 0 conjectured security bits for these tables, below the required 100" in err
    assert "2 queries, 0 query proof-of-work bits" in err and "--min-security-bits" in err
    code, out, _ = run(main_verify, [weak, "--min-security-bits", "0"], capsys)
    assert code == 0 and out.startswith("proof OK")
    assert "2 queries, 0 proof-of-work bits" in out and " 0 conjectured security bits" in out
    code, out, _ = run(main_verify, [weak, "--min-security-bits", "0", "--block", blk], capsys)
    assert code == 0 and out.startswith("proof OK for block")
    code, _, err = run(main_verify, [weak, "--min-security-bits", "1"], capsys)
    assert code == 1 and "below the required 1" in err
    # a weak proof that is also corrupt: refused for its parameters, before any hashing;
    # with no minimum the corruption itself is found
    data = bytearray(open(weak, "rb").read())
    data[-100] ^= 0x10
    bad = tmp_path / "bad.proof"
    bad.write_bytes(bytes(data))
    code, _, err = run(main_verify, [str(bad)], capsys)
    assert code == 1 and "proof refused" in err
    code, _, err = run(main_verify, [str(bad), "--min-security-bits", "0"], capsys)
    assert code == 1 and err.startswith("error: invalid proof:")
    for value, frag in (("-1", "must be >= 0"), ("many", "invalid int value")):
        code, _, err = run(main_verify, [weak, "--min-security-bits", value], capsys)
        assert code == 2 and frag in err


MALFORMED = [
    ("", "$: empty document"),
    ("not json at all", "$: not valid JSON"),
    ("{}", "$: missing required field 'format'"),
    ('{"format": "steadfast-block", "version": 1}', "$: missing required field 'memory_size'"),
    ("[1, 2]", "$: expected an object"),
]


@pytest.mark.parametrize("text,fragment", MALFORMED)
def test_malformed_block_exit_2_with_path(tmp_path, capsys, text, fragment):
    code, out, err = run(main_prove, [write(tmp_path, "b.json", text)] + FAST, capsys)
    assert code == 2 and fragment in err and out == ""
    assert not (tmp_path / "b.proof").exists()


@pytest.mark.parametrize("edit,path", [
    (lambda o: o.update(memory_size="64"), "$.memory_size"),
    (lambda o: o["transactions"][0].update(inputs=[1, "x"]), "$.transactions[0].inputs[1]"),
    (lambda o: o["transactions"][0].pop("outputs"), "$.transactions[0]"),
    (lambda o: o.update(memory_size=1 << 40), "$.memory_size"),
    (lambda o: o["programs"][0]["code"].__setitem__(0, ["READ"]), "$.programs[0].code[0]"),
    (lambda o: o.update(transactions=[{"program": 0, "inputs": [0] * 70000, "outputs": []}]),
     "$.transactions[0].inputs"),
])
def test_wrong_types_missing_fields_huge_sizes(tmp_path, capsys, edit, path):
    obj = one_tx_block().to_json()
    edit(obj)
    code, _, err = run(main_prove, [write(tmp_path, "b.json", obj)] + FAST, capsys)
    assert code == 2 and f": {path}: " in err


def test_execution_failure_exit_1_says_where(tmp_path, capsys):
    obj = one_tx_block().to_json()
    obj["max_cycles"] = 50
    obj["programs"][0]["code"] = [["JMP", 0]]
    obj["transactions"][0]["inputs"] = []
    code, _, err = run(main_prove, [write(tmp_path, "b.json", obj)] + FAST, capsys)
    assert code == 1
    assert "cycle limit 50 reached" in err and "$.programs[0].code[0]" in err
    assert "transaction 0 (program 'sum')" in err
    obj["programs"][0]["code"] = [["FOO"], ["HALT"]]
    code, _, err = run(main_prove, [write(tmp_path, "b.json", obj)] + FAST, capsys)
    assert code == 1 and "bad opcode 'FOO'" in err


def test_false_claims_exit_1_names_constraint(tmp_path, capsys):
    obj = one_tx_block().to_json()
    obj["transactions"][0]["outputs"] = [4]
    code, _, err = run(main_prove, [write(tmp_path, "b.json", obj)] + FAST, capsys)
    assert code == 1 and "constraint 'output_digest[0]'" in err
    assert "$.transactions[0].outputs[0]: claims 4, execution wrote 5" in err


def test_bad_usage_exit_2(tmp_path, capsys):
    blk = write(tmp_path, "b.json", empty_block().to_json())
    for argv, frag in (([blk, "--backend", "quantum"], "unknown backend"),
                       ([blk, "--vram-budget", "12 potatoes"], "vram budget"),
                       ([blk, "--queries", "0"], "num_queries"),
                       ([blk, "--log-blowup", "x"], "invalid int value"),
                       ([blk, "-q", "-v"], "not allowed with"),
                       ([blk, "-o", str(tmp_path / "no" / "such" / "dir.proof")], "cannot write"),
                       ([], "required"),
                       ([str(tmp_path / "missing.json")], "cannot read")):
        code, _, err = run(main_prove, argv, capsys)
        assert code == 2 and frag in err, (argv, err)
    code, out, _ = run(main_prove, ["--help"], capsys)
    assert code == 0 and "exit status" in out


def test_plain_progress_and_summary(tmp_path, capsys):
    blk = write(tmp_path, "empty.json", empty_block().to_json())
    out_path = tmp_path / "e.proof"
    code, out, err = run(main_prove, [blk, "-o", str(out_path)] + FAST, capsys)
    assert code == 0 and out_path.exists()
    assert "poseidon2  r2_quotient" in err            # one log line per table and stage
    assert "wrote" in out and "rounds:" in out and "range" in out
    code, out, err = run(main_prove, [blk, "-o", str(out_path), "-q"] + FAST, capsys)
    assert code == 0 and out == "" and err == ""


def test_module_entry_point_no_traceback(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "steadfast.prover", "prove", write(tmp_path, "x.json", "{")],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "not valid JSON" in r.stderr
    r = subprocess.run([sys.executable, "-m", "steadfast.prover", "frobnicate"], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "usage" in r.stderr


def test_live_progress_display_redraws_per_table():
    import io
    from steadfast.prover.cli import _Progress
    buf = io.StringIO()
    p = _Progress(live=True, stream=buf)
    p(None, "execute", "start", 0.0)
    p(None, "execute", "end", 0.5)
    p("cpu", "r1_main", "start", 0.0)
    p("range", "r1_main", "start", 0.0)
    p("cpu", "r1_main", "end", 1.25)
    p.close()
    text = buf.getvalue()
    assert "\x1b[" in text                              # redrawn in place
    last = text.split("\x1b[4F")[-1]                    # the final frame: block, cpu, range + elapsed
    assert "cpu        r1_main      done      1.25s" in last
    assert "range      r1_main      running" in last
    assert "block      execute      done      0.50s" in last


@pytest.mark.parametrize("fault", ["corrupt@r2:1", "corrupt@r4.fri:1"])
def test_device_corruption_never_writes_a_proof_without_xcheck(fault, tmp_path, monkeypatch,
                                                               capsys):
    """Issue #11, finding 5: on the emulated device with a corruption injected and
    PROVER_GPU_XCHECK off, ``prove`` used to exit 0 and write a proof that ``verify``
    rejects.  The self-check (the verifier's own code, on by default) now refuses it:
    exit 4, a post-mortem, no proof file."""
    monkeypatch.setenv("PROVER_FAULTS", f"{fault},seed=3")
    monkeypatch.delenv("PROVER_GPU_XCHECK", raising=False)
    out = tmp_path / "x.proof"
    pm = tmp_path / "pm"
    code, _, err = run(main_prove, [write(tmp_path, "b.json", one_tx_block().to_json()), "-o",
                                    str(out), "--queries", "8", "--pow-bits", "2", "--backend",
                                    "emu", "--postmortem-dir", str(pm), "-q"], capsys)
    assert code == 4, err
    assert "self-check" in err and "no proof written" in err
    assert not out.exists()
    reports = [json.loads(p.read_text()) for p in pm.iterdir()]
    assert len(reports) == 1 and reports[0]["check"] == "self_check"
    assert reports[0]["backend"] == "emu" and reports[0]["faults"].startswith(fault)
