"""The command line for programs (docs/api.md "Proving programs"): ``prove PROGRAM.elf
[--input FILE] [-o PROOF] [--max-cycles N]`` (told from a block by the ELF magic),
``--execute-only --json``, ``verify PROOF --elf PROGRAM.elf [--input FILE] [--json]``,
development mode, the self-check's refusal, and every bad input as a one-line error with
its exit status (never a traceback).

WEAK PARAMETERS: 6 queries; verify is told --min-security-bits 0 except where the
default's refusal is the point."""
import json
import shutil
from pathlib import Path

import pytest

from steadfast.prover.api import Prover, ProverConfig
from steadfast.prover.cli import main_prove, main_verify

ROOT = Path(__file__).resolve().parents[1]
WEAK = ["--queries", "6", "--pow-bits", "1", "--backend", "host"]
ANY = ["--min-security-bits", "0"]
HELLO_OUT = b"hello from rv32im\nIt works!\n"


def run(main, argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture()
def files(tmp_path):
    """examples/hello.elf and hello.in, and a transfer guest with its input, in tmp."""
    for src in ("examples/hello.elf", "examples/hello.in", "guests/bin/transfer.elf",
                "guests/inputs/transfer/statuses.in"):
        shutil.copy(ROOT / src, tmp_path / Path(src).name)
    return tmp_path


@pytest.fixture(scope="module")
def reference():
    """The library's proof of hello with the CLI's parameters (default grinding)."""
    cfg = ProverConfig(backend="host", num_queries=6, pow_bits=1)
    return Prover(cfg).prove_program(ROOT / "examples" / "hello.elf",
                                     (ROOT / "examples" / "hello.in").read_bytes()).to_bytes()


def test_prove_and_verify(files, reference, capsys):
    """prove writes hello.proof (the library's bytes) and its statistics; verify accepts it
    for the program and input (JSON: exit_code and output as proven) and refuses it for
    others, tampered or truncated, weak under the default minimum, as a block proof."""
    elf, inp, stats = files / "hello.elf", files / "hello.in", files / "s.json"
    code, out, err = run(main_prove, [elf, "--input", inp, "--stats-json", stats, *WEAK], capsys)
    assert code == 0, err
    proof = files / "hello.proof"
    assert proof.read_bytes() == reference
    assert "exits with code 0" in out and "wrote" in out and "warning:" in err
    st = json.loads(stats.read_text())
    assert st["ok"] and st["status"] == 0 and st["exit_code"] == 0
    assert bytes.fromhex(st["output"]) == HELLO_OUT and st["max_cycles"] == 1 << 24
    assert st["cycles"] > 0 and st["program"] == str(elf) and st["input_len"] == 10
    assert st["proof_file_bytes"] == len(reference) and len(st["tables"]) == 18
    code, out, _ = run(main_verify, [proof, "--elf", elf, "--input", inp, "--json", *ANY], capsys)
    rep = json.loads(out)
    assert code == 0 and rep["ok"] and rep["status"] == 0 and rep["error"] is None
    assert rep["exit_code"] == 0 and bytes.fromhex(rep["output"]) == HELLO_OUT
    assert rep["max_cycles"] == 1 << 24 and rep["cycles"] is None
    assert 0 < rep["security_bits"] < 100 and rep["params"]["num_queries"] == 6
    code, out, _ = run(main_verify, [proof, "--elf", elf, "--input", inp, *ANY], capsys)
    assert code == 0 and "proof OK for program" in out and "exit code 0" in out
    code, _, err = run(main_verify, [proof, "--elf", elf, "--input", inp], capsys)
    assert code == 1 and "proof refused" in err and "--min-security-bits" in err
    code, out, err = run(main_verify, [proof, "--elf", elf, *ANY, "--json"], capsys)
    rep = json.loads(out)
    assert code == 1 and "not for this input" in err and rep["ok"] is False
    assert rep["status"] == 1 and rep["exit_code"] is None
    assert rep["error"]["class"] == "PublicValuesError"
    code, _, err = run(main_verify, [proof, "--elf", files / "transfer.elf", "--input", inp,
                                     *ANY], capsys)
    assert code == 1 and "not for this program" in err
    code, _, err = run(main_verify, [proof, "--elf", elf, "--input", inp, "--max-cycles",
                                     "1000", *ANY], capsys)
    assert code == 1 and "max_cycles 16,777,216, not 1,000" in err
    data = proof.read_bytes()
    for name, bad in (("t.proof", data[:len(data) // 2]),
                      ("x.proof", data[:5000] + bytes([data[5000] ^ 4]) + data[5001:])):
        (files / name).write_bytes(bad)
        code, _, err = run(main_verify, [files / name, "--elf", elf, "--input", inp, *ANY],
                           capsys)
        assert code == 1 and "invalid proof" in err
    code, _, err = run(main_verify, [proof, *ANY], capsys)
    assert code == 2 and "is a program proof" in err and "--elf" in err
    code, _, err = run(main_verify, [proof, "--block", ROOT / "examples" / "block.json"], capsys)
    assert code == 1 and "program proof, not a block proof" in err
    code, _, err = run(main_verify, [proof, "--input", inp], capsys)
    assert code == 2 and "--elf" in err


def test_execute_only_json(files, capsys):
    """--execute-only --json: cycles, the program's exit code and output (hex), every
    table's rows, padded height, committed cells and cells per cycle, the memory
    estimates; nothing written.  A program that exits non-zero is still provable (exit
    0: the exit code is what the proof states)."""
    code, out, err = run(main_prove, [files / "hello.elf", "--input", files / "hello.in",
                                      "--execute-only", "--json", "--backend", "host"], capsys)
    assert code == 0, err
    rep = json.loads(out)
    assert rep["cycles"] > 100 and rep["exit_code"] == 0 and rep["status"] == 0
    assert bytes.fromhex(rep["output"]) == HELLO_OUT and rep["max_cycles"] == 1 << 24
    assert len(rep["tables"]) == 18 and rep["security_bits"] >= 100
    for t in rep["tables"]:
        assert {"name", "rows", "padded_rows", "committed_cells", "cells_per_cycle", "slots",
                "device_bytes"} <= set(t)
        assert t["rows"] <= t["padded_rows"]
    assert rep["committed_cells"] == sum(t["committed_cells"] for t in rep["tables"])
    assert rep["cells_per_cycle"] > 0 and rep["host_bytes"] >= rep["device_bytes"] > 0
    assert not (files / "hello.proof").exists()
    code, out, _ = run(main_prove, [files / "transfer.elf", "--input", files / "statuses.in",
                                    "--execute-only", "--json", "--backend", "host"], capsys)
    assert code == 0 and json.loads(out)["exit_code"] == 7
    code, out, _ = run(main_prove, [files / "hello.elf", "--execute-only", "--backend", "host"],
                       capsys)
    assert code == 0 and "exit code 0" in out and "rv32_bytes" in out


def test_bad_inputs_are_one_line_errors(files, capsys):
    """A malformed ELF, a missing program or input, an absurd --max-cycles, --input with
    a block, an output over an input: exit 2; an execution failure: exit 1 naming pc and
    cycle (the statistics record them); never a traceback."""
    elf, inp = files / "hello.elf", files / "hello.in"
    (files / "trunc.elf").write_bytes(elf.read_bytes()[:80])
    cases = [([files / "trunc.elf"], "not a program the RV32IM machine runs"),
             ([files / "none.elf"], "cannot read"),
             ([elf, "--input", files / "none.in"], "cannot read"),
             ([elf, "--max-cycles", "0"], "--max-cycles must be in [1, 2^32 - 1]"),
             ([elf, "--max-cycles", str(1 << 40)], "--max-cycles must be in"),
             ([elf, "--max-cycles", "many"], "--max-cycles"),
             ([ROOT / "examples" / "block.json", "--input", inp], "apply to programs"),
             ([elf, "-o", elf], "is the input program"),
             ([elf, "--input", inp, "-o", inp], "is the input input file")]
    for argv, msg in cases:
        code, _, err = run(main_prove, [*argv, *WEAK], capsys)
        assert code == 2 and msg in err and err.startswith("error:"), (argv, err)
    stats = files / "s.json"
    code, _, err = run(main_prove, [elf, "--max-cycles", "40", "--stats-json", stats, *WEAK],
                       capsys)
    assert code == 1 and "program cannot be proven" in err and "cycle 40" in err
    rec = json.loads(stats.read_text())
    assert rec["ok"] is False and rec["status"] == 1 and rec["exit_code"] is None
    f = rec["failure"]
    assert f["error"] == "UnprovableProgram" and f["kind"] == "cycles" and f["cycle"] == 40
    assert f"pc 0x{f['pc']:08x}" in err and not (files / "hello.proof").exists()
    code, out, err = run(main_prove, [elf, "--max-cycles", "40", "--execute-only", "--json",
                                      "--backend", "host"], capsys)
    assert code == 1 and json.loads(out)["failure"]["kind"] == "cycles"


def test_dev_mode_and_self_check(files, capsys, monkeypatch, tmp_path):
    """PROVER_DEV_MODE=1: a marked fake that verify refuses unless --accept-dev; a
    device corruption on emu without XCHECK: the self-check refuses the proof (exit 4,
    a post-mortem, no proof file)."""
    elf, inp = files / "hello.elf", files / "hello.in"
    monkeypatch.setenv("PROVER_DEV_MODE", "1")
    code, out, err = run(main_prove, [elf, "--input", inp, *WEAK], capsys)
    assert code == 0 and "DEVELOPMENT-MODE" in out, err
    proof = files / "hello.proof"
    assert proof.read_bytes()[:4] == b"STRD"
    monkeypatch.delenv("PROVER_DEV_MODE")
    code, _, err = run(main_verify, [proof, "--elf", elf, "--input", inp], capsys)
    assert code == 1 and "development-mode proof" in err
    code, out, _ = run(main_verify, [proof, "--elf", elf, "--input", inp, "--accept-dev"],
                       capsys)
    assert code == 0 and "development-mode proof accepted" in out
    monkeypatch.setenv("PROVER_FAULTS", "corrupt@r4.fri:1,seed=3")
    monkeypatch.delenv("PROVER_GPU_XCHECK", raising=False)
    monkeypatch.setenv("PROVER_ABORT_ON_CORRUPTION", "1")    # the stop, not #26's host retry
    pm, out_proof = tmp_path / "pm", tmp_path / "c.proof"
    code, _, err = run(main_prove, [elf, "--input", inp, "-o", out_proof, "--queries", "6",
                                    "--pow-bits", "1", "--backend", "emu", "--postmortem-dir",
                                    pm, "-q"], capsys)
    assert code == 4 and "self-check" in err and "no proof written" in err
    assert not out_proof.exists() and len(list(pm.iterdir())) == 1
