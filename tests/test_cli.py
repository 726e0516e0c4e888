"""The command line on blocks of RISC-V transactions (block format 2): exit codes (0 / 1 /
2), malformed blocks named by file and JSON path, where an execution fails, the
default-parameter proof of the example block verified against it, verify's minimum
security (weak proofs refused by default), the flags, plain progress, the installed
scripts, --json / --stats-json, development mode, a device corruption's stop (exit 4),
post-mortems, and never a traceback.  The live and plain displays, prove on a terminal and
a pty: tests/test_cli_display.py; what tests/test_txblock_cli.py checks (per-transaction
outputs, verify's rejections, --execute-only's transactions) is not repeated here.

WEAK PARAMETERS (FAST): 8 queries, verified with --min-security-bits 0 where the point is
not the default's refusal; the example's default-parameter proof once for the module."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from steadfast.prover.cli import main_prove, main_verify
from steadfast.prover.display import ROUNDS
from steadfast.rv32 import block as rblock
from steadfast.rv32.blockfile import Transaction
from steadfast.rv32.elf import Program

from tests.test_txblock import expected_state_out
from tests.txblocks import block, empty_block, one_tx_block

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "block.json")   # examples/block.json after #24's rename
FAST = ["--queries", "8", "--pow-bits", "2", "--backend", "host"]
ANY = ["--min-security-bits", "0"]
EMPTY_ROUNDS = rblock.num_tables(0) * len(ROUNDS)          # 2 shared tables x 8 rounds


def write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(p)


def run(main, argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def copy_example(dest: Path) -> str:
    """EXAMPLE and every ELF / input file it names, copied into ``dest``."""
    obj = json.loads(Path(EXAMPLE).read_text())
    for e in obj.get("programs", []) + obj["transactions"]:
        for field in ("elf", "input_file"):
            if field in e:
                shutil.copy(Path(EXAMPLE).parent / e[field], dest / e[field])
    shutil.copy(EXAMPLE, dest / "block.json")
    return str(dest / "block.json")


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


@pytest.fixture(scope="module")
def one_proof(tmp_path_factory):
    """``prove`` of tests/txblocks.one_tx_block with FAST, once: (block, proof, stats,
    stdout, stderr, the post-mortem written after it with the run's identity)."""
    import io
    from steadfast.prover import xcheck
    d = tmp_path_factory.mktemp("one")
    blk = write(d, "b.json", one_tx_block().to_json())
    mp = pytest.MonkeyPatch()
    out, err = io.StringIO(), io.StringIO()
    mp.setattr(sys, "stdout", out)
    mp.setattr(sys, "stderr", err)
    mp.setattr(xcheck, "POSTMORTEM_CONTEXT", {})
    try:
        code = main_prove([blk, "--stats-json", str(d / "s.json")] + FAST)
        pm = xcheck.write_postmortem({"table": "rv32_bytes", "check": "test"},
                                     str(d / "pm"))
    finally:
        mp.undo()
    assert code == 0 and "Traceback" not in out.getvalue() + err.getvalue(), err.getvalue()
    return (blk, str(d / "b.proof"), json.loads((d / "s.json").read_text()), out.getvalue(),
            err.getvalue(), pm)


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
    assert code == 1 and "is not a proof of a block of RISC-V transactions (STB2)" in err
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
    from steadfast.prover.txblock_proof import TxBlockProof
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


MALFORMED = [
    ("", "$: empty document"),
    ("not json at all", "$: not valid JSON"),
    ("{}", "$: missing required field 'format'"),
    ('{"format": "steadfast-block", "version": 2}', "$: missing required field 'transactions'"),
    ('{"format": "steadfast-block", "version": 2, "transactions": [], "a": 1, "a": 2}',
     "$: not valid JSON: duplicate key 'a'"),
    ("[1, 2]", "$: expected an object"),
]


@pytest.mark.parametrize("text,fragment", MALFORMED)
def test_malformed_block_exit_2_with_path(tmp_path, capsys, text, fragment):
    p = write(tmp_path, "b.json", text)
    code, out, err = run(main_prove, [p] + FAST, capsys)
    assert code == 2 and f"error: {p}: {fragment}" in err and out == ""
    assert not (tmp_path / "b.proof").exists()


@pytest.mark.parametrize("edit,path", [
    (lambda o: o.update(max_cycles="64"), "$.max_cycles"),
    (lambda o: o["transactions"][0].update(input=12), "$.transactions[0].input"),
    (lambda o: o["transactions"][0].pop("program"), "$.transactions[0]"),
    (lambda o: o.update(max_cycles=1 << 40), "$.max_cycles"),
    (lambda o: o["programs"][0].update(elf_base64="!!"), "$.programs[0].elf_base64"),
    (lambda o: o["transactions"][0].update(exit_code=1 << 40), "$.transactions[0].exit_code"),
    (lambda o: o.update(transactions=[{"program": "p0"}] * 4096), "$.transactions"),
])
def test_wrong_types_missing_fields_huge_sizes(tmp_path, capsys, edit, path):
    obj = one_tx_block().to_json()
    edit(obj)
    p = write(tmp_path, "b.json", obj)
    code, _, err = run(main_prove, [p] + FAST, capsys)
    assert code == 2 and f"error: {p}: {path}: " in err


def test_execution_failure_exit_1_says_where(tmp_path, capsys):
    """A transaction that runs out of cycles, or reaches an illegal instruction: exit 1,
    the transaction, its pc and cycle; no proof."""
    obj = one_tx_block().to_json()
    obj["max_cycles"] = 50
    code, _, err = run(main_prove, [write(tmp_path, "b.json", obj)] + FAST, capsys)
    assert code == 1
    assert "block cannot be proven: transaction 0 (p0): execution failed: pc 0x" in err
    assert "cycle 50: the program did not exit within max_cycles = 50" in err
    illegal = Transaction(Program.from_words([0x13, 0xFFFFFFFF]), b"", None, None, "bad")
    p = write(tmp_path, "c.json", block(one_tx_block().transactions[0], illegal).to_json())
    code, _, err = run(main_prove, [p] + FAST, capsys)
    assert code == 1 and "transaction 1 (p1): execution failed: pc 0x00010004, cycle 1: illegal " \
                         "instruction 0xffffffff" in err
    assert not (tmp_path / "b.proof").exists() and not (tmp_path / "c.proof").exists()


def test_false_claims_exit_1_names_the_output(tmp_path, capsys):
    obj = one_tx_block().to_json()
    obj["transactions"][0]["output"] = "6869"                  # "hi"
    code, _, err = run(main_prove, [write(tmp_path, "b.json", obj)] + FAST, capsys)
    assert code == 1 and "block cannot be proven: transaction 0 (p0): the block's claimed " \
                         "output differs from what execution writes" in err
    assert "first difference at byte 1: 2 bytes claimed, 21 written" in err
    assert "  claimed 69" in err and "  written 656c6c6f" in err


def test_bad_usage_exit_2(tmp_path, capsys):
    blk = write(tmp_path, "b.json", empty_block().to_json())
    for argv, frag in (([blk, "--backend", "quantum"], "unknown backend"),
                       ([blk, "--vram-budget", "12 potatoes"], "--vram-budget"),
                       ([blk, "--queries", "0"], "--queries must be"),
                       ([blk, "--log-blowup", "x"], "invalid int value"),
                       ([blk, "-q", "-v"], "not allowed with"),
                       ([blk, "-o", str(tmp_path / "no" / "such" / "dir.proof")], "--output"),
                       ([], "block"),
                       ([str(tmp_path / "missing.json")], "cannot read")):
        code, _, err = run(main_prove, argv, capsys)
        assert code == 2 and frag in err, (argv, err)
    code, out, _ = run(main_prove, ["--help"], capsys)
    assert code == 0 and "exit status" in out


def test_plain_progress_and_summary(tmp_path, capsys):
    blk = write(tmp_path, "empty.json", empty_block().to_json())
    out_path = tmp_path / "e.proof"
    code, out, err = run(main_prove, [blk, "-o", out_path] + FAST, capsys)
    assert code == 0 and out_path.exists()
    assert "poseidon2  r2_quotient" in err            # one log line per table and stage
    done = [int(l.rsplit(" ", 1)[1].split("/")[0]) for l in err.splitlines()
            if l.startswith("[") and l.endswith(f"/{EMPTY_ROUNDS}")]    # overall table-rounds
    assert done == sorted(done) and done[-1] == EMPTY_ROUNDS
    assert "wrote" in out and "rounds:" in out and "rv32_bytes" in out
    assert "0 transactions\nstate out " in out
    code, out, err = run(main_prove, [blk, "-o", out_path, "-q"] + FAST, capsys)
    assert code == 0 and out == "" and err == ""


def test_module_entry_point_no_traceback(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "steadfast.prover", "prove", write(tmp_path, "x.json", "{")],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "not valid JSON" in r.stderr
    r = subprocess.run([sys.executable, "-m", "steadfast.prover", "frobnicate"], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "usage" in r.stderr


def _false_claims(tmp_path):
    obj = one_tx_block().to_json()
    obj["transactions"][0]["exit_code"] = 6
    return write(tmp_path, "false.json", obj)


def test_execute_only_reports_without_proving(tmp_path, capsys):
    """--execute-only on the example: the figures against independent references (the
    AIRs' widths, the committed-cell formula, power-of-two heights), the default
    parameters' security, no proof file; the text summary; exit 1 for a false claim."""
    from steadfast.rv32.blockfile import load_block
    blk = copy_example(tmp_path)
    code, out, err = run(main_prove, [blk, "--execute-only", "--json", "--backend", "host"], capsys)
    assert code == 0, err
    rep = json.loads(out)
    from steadfast.rv32.tables import slot_menu, static_air
    b = load_block(blk)
    airs = rblock.block_airs([t.program for t in b.transactions],
                             [t.input for t in b.transactions],
                             [t.output for t in b.transactions], 2, [{}] * 3, 1)   # k = 1
    assert [t["table"] for t in rep["tables"]] == rblock.table_names(3)
    cells = 0
    for t, a in zip(rep["tables"], airs):
        n, name = t["rows"], t["table"].split("/")[-1]
        if len(slot_menu(name)) > 1:            # a slotted table: the AIR of its chosen k
            a = next(m for m in (static_air(name, 2, k) for k in slot_menu(name))
                     if m.main_width == t["main"])
        assert n & (n - 1) == 0
        assert (t["main"], t["aux"], t["parts"]) == (a.main_width, a.aux_width, a.num_parts)
        assert t["committed_cells"] == n * (a.main_width + 4 * a.aux_width + 4 * a.num_parts)
        cells += t["committed_cells"]
    assert rep["committed_cells"] == cells and rep["log_blowup"] == 2
    assert rep["cycles"] == sum(t["cycles"] for t in rep["transactions"])
    assert rep["security_bits"] >= 100 and rep["min_security_bits_default"] == 100
    assert not os.path.exists(os.path.join(tmp_path, "block.proof"))
    code, out, _ = run(main_prove, [blk, "--execute-only", "--backend", "host"], capsys)
    assert code == 0 and f"3 transactions, {rep['cycles']:,} cycles" in out
    assert f"50 tables, {cells:,} committed cells" in out
    code, out, err = run(main_prove, [_false_claims(tmp_path), "--execute-only", "--json"], capsys)
    assert code == 1 and json.loads(out)["claims_ok"] is False
    assert "claims are not what execution does" in err and "exit code 6" in err


def test_execute_report_is_frozen_and_matches_a_proof(one_proof):
    """Prover.execute_txblock: a frozen dataclass whose heights are the proof's heights."""
    import dataclasses
    from steadfast.prover.api import Prover, ProverConfig
    _, _, stats, _, _, _ = one_proof
    p = Prover(ProverConfig(backend="host", num_queries=8, pow_bits=2))
    rep = p.execute_txblock(one_tx_block())
    with pytest.raises(dataclasses.FrozenInstanceError):
        rep.cycles = 0
    assert [t[1] for t in rep.tables] == [t["rows"] for t in stats["tables"]]
    assert rep.cycles == stats["cycles"] and rep.security_bits < 100


def test_dev_mode_fake_is_marked_and_refused(tmp_path, capsys, monkeypatch):
    """PROVER_DEV_MODE=1: a b"STD2" file, a loud warning; verify refuses it and says why
    unless --accept-dev; a false claim is still refused; never the default."""
    from steadfast.prover.api import DevProofRefused, ProverConfig, TxBlockProof, verify
    blk = write(tmp_path, "b.json", one_tx_block().to_json())
    monkeypatch.delenv("PROVER_DEV_MODE", raising=False)
    assert ProverConfig().dev() is False
    monkeypatch.setenv("PROVER_DEV_MODE", "1")
    code, out, err = run(main_prove, [blk, "--backend", "host"], capsys)
    assert code == 0 and "DEVELOPMENT MODE" in err and "NOT a STARK" in out
    proof = str(tmp_path / "b.proof")
    data = open(proof, "rb").read()
    assert data[:4] == b"STD2"
    code, _, err = run(main_verify, [proof, "--block", blk], capsys)
    assert code == 1 and "development-mode proof" in err and "--accept-dev" in err
    code, out, _ = run(main_verify, [proof, "--accept-dev", "--block", blk], capsys)
    assert code == 0 and out.startswith("development-mode proof accepted")
    with pytest.raises(DevProofRefused):
        verify(data, block=one_tx_block(), min_security_bits=0)
    res = verify(data, block=one_tx_block(), accept_dev=True)
    assert res.dev and res.security is None
    assert TxBlockProof.from_bytes(data).exit_codes == res.exit_codes == [0]
    other = write(tmp_path, "o.json", empty_block().to_json())
    code, _, err = run(main_verify, [proof, "--accept-dev", "--block", other], capsys)
    assert code == 1 and "this block has 0" in err
    code, _, err = run(main_prove, [_false_claims(tmp_path), "--backend", "host"], capsys)
    assert code == 1 and "block cannot be proven: transaction 0" in err
    monkeypatch.setenv("PROVER_DEV_MODE", "yes")
    code, _, err = run(main_prove, [blk, "--backend", "host"], capsys)
    assert code == 2 and "PROVER_DEV_MODE must be 0 or 1" in err


def test_version_help_defaults_and_flag_names(tmp_path, capsys):
    import steadfast
    from steadfast.prover.cli import _prove_parser, _verify_parser
    for main, name in ((main_prove, "prove"), (main_verify, "verify")):
        code, out, _ = run(main, ["--version"], capsys)
        assert code == 0 and out.strip() == f"{name} {steadfast.__version__}"
    for parser in (_prove_parser(), _verify_parser()):
        fmt = parser._get_formatter()
        for a in parser._actions:
            if not a.option_strings or a.dest in ("help", "version"):
                continue
            text = fmt._get_help_string(a) or ""
            assert "default" in text or a.default is False, (parser.prog, a.dest, text)
    blk = write(tmp_path, "b.json", empty_block().to_json())
    for argv, flag in ((["--queries", "0"], "--queries"), (["--pow-bits", "31"], "--pow-bits"),
                       (["--log-blowup", "9"], "--log-blowup"), (["--threads", "0"], "--threads")):
        code, _, err = run(main_prove, [blk, "--backend", "host"] + argv, capsys)
        assert code == 2 and flag in err and "_" not in err.split(":")[1].split()[0], err
        assert "num_queries" not in err and "pow_bits" not in err


def test_weak_parameters_warn_and_verify_json(one_proof, capsys):
    """prove warns that a default verify refuses its weak proof; verify --json reports
    ok/error with the error class, state_out, the parameters and the security figure."""
    blk, proof, stats, _, err, _ = one_proof
    assert "warning:" in err and "a default verify requires 100" in err
    code, out, _ = run(main_verify, [proof, "--block", blk, "--json"], capsys)
    rep = json.loads(out)
    assert code == 1 and rep["ok"] is False and rep["error"]["class"] == "ParameterError"
    assert rep["exit_code"] == 1
    code, out, _ = run(main_verify, [proof, "--block", blk, "--json", *ANY], capsys)
    rep = json.loads(out)
    assert code == 0 and rep["ok"] and rep["error"] is None
    assert rep["state_out"] == stats["state_out"] and len(rep["state_out"]) == 64
    assert rep["params"]["num_queries"] == 8 and rep["params"]["pow_bits"] == 2
    assert 0 < rep["security_bits"] < 100 and rep["limiting_term"] == "fri_queries"
    assert rep["security_terms"]["fri_queries"] == 8 * rep["params"]["log_blowup"] + 2
    assert rep["seconds"] > 0
    code, out, _ = run(main_verify, [proof, "--block", blk, *ANY], capsys)
    assert f"state out {stats['state_out']}" in out


def test_outputs_checked_before_proving(tmp_path, capsys):
    """-o equal to the block is refused and the block survives; an unwritable side output
    stops the run before proving (no proof written); stats are written for failed proofs
    with the failure and the run's identity."""
    import hashlib
    from steadfast import __version__
    blk = write(tmp_path, "b.json", one_tx_block().to_json())
    before = open(blk, "rb").read()
    code, _, err = run(main_prove, [blk, "-o", blk] + FAST, capsys)
    assert code == 2 and "input block" in err and open(blk, "rb").read() == before
    for flag in ("--stats-json", "--timeline"):
        code, _, err = run(main_prove, [blk, flag, tmp_path / "nodir" / "x.json"] + FAST, capsys)
        assert code == 2 and flag in err and not os.path.exists(tmp_path / "b.proof")
    code, _, err = run(main_prove, [blk, "--postmortem-dir", tmp_path / "no" / "dir"] + FAST,
                       capsys)
    assert code == 2 and "--postmortem-dir" in err
    bad = _false_claims(tmp_path)
    stats = tmp_path / "s.json"
    code, _, _ = run(main_prove, [bad, "--stats-json", stats] + FAST, capsys)
    rec = json.loads(stats.read_text())
    assert code == 1 and rec["ok"] is False and rec["exit_code"] == 1 and rec["status"] == 1
    assert rec["failure"]["error"] == "UnprovableBlock" and rec["proof"] is None
    assert "transaction 0" in rec["failure"]["message"] and rec["block_version"] == 2
    assert rec["block_sha256"] == hashlib.sha256(open(bad, "rb").read()).hexdigest()
    assert rec["steadfast_version"] == __version__ and rec["backend"] == "host"
    assert rec["params"]["num_queries"] == 8 and rec["device"] and rec["time"]
    assert not os.path.exists(tmp_path / "false.proof")


def test_outputs_are_all_or_nothing(tmp_path):
    """_write_all: a failing second file leaves neither file nor a temporary behind."""
    from steadfast.prover.cli import _Fail, _write_all
    good, bad = tmp_path / "a.proof", tmp_path / "missing" / "s.json"
    with pytest.raises(_Fail) as ei:
        _write_all([(str(good), b"x"), (str(bad), b"y")])
    assert ei.value.code == 2 and "nothing was written" in str(ei.value)
    assert os.listdir(tmp_path) == []
    _write_all([(str(good), b"x"), (str(tmp_path / "s.json"), b"y")])
    assert sorted(os.listdir(tmp_path)) == ["a.proof", "s.json"] and good.read_bytes() == b"x"


def test_installed_scripts_version_and_sim_backend(tmp_path):
    """The installed console scripts; PROVER_BACKEND=sim from the command line (numba is
    imported before the backend is chosen: the simulator switch must still take)."""
    bindir = os.path.dirname(sys.executable)
    prove, verify = os.path.join(bindir, "prove"), os.path.join(bindir, "verify")
    if not os.path.exists(prove):
        pytest.skip("console scripts not installed beside this interpreter")
    import steadfast
    r = subprocess.run([verify, "--version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == f"verify {steadfast.__version__}"
    blk = write(tmp_path, "b.json", empty_block().to_json())
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PROVER_BACKEND"] = "sim"
    r = subprocess.run([prove, blk, "--precompile"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "backend sim" in r.stdout and "CudaSupportError" not in r.stderr
    # the library: numba (imported with steadfast) has read its config without the
    # simulator; numba.cuda imported after Prover(backend="sim") must be the simulator
    code = ("import sys; from steadfast.prover.api import Prover, ProverConfig; "
            "Prover(ProverConfig(backend='sim')); from numba import cuda; "
            "print(type(cuda.get_current_device()).__name__)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "FakeCUDADevice", r.stderr

# --------------------------------------------------------------------------- device faults

@pytest.mark.parametrize("fault", ["corrupt@r2:1", "corrupt@r4.fri:1"])
def test_device_corruption_never_writes_a_proof_without_xcheck(fault, tmp_path, monkeypatch,
                                                               capsys):
    """Issue #11, finding 5: on the emulated device with a corruption injected and
    PROVER_GPU_XCHECK off, ``prove`` used to exit 0 and write a proof that ``verify``
    rejects.  The self-check (the verifier's own code, on by default) refuses it: exit 4,
    a post-mortem, no proof file (the stop, PROVER_ABORT_ON_CORRUPTION=1; by default
    issue #26 retries the device proof on the host, tests/test_self_check_retry.py)."""
    monkeypatch.setenv("PROVER_FAULTS", f"{fault},seed=3")
    monkeypatch.delenv("PROVER_GPU_XCHECK", raising=False)
    monkeypatch.setenv("PROVER_ABORT_ON_CORRUPTION", "1")
    out = tmp_path / "x.proof"
    pm = tmp_path / "pm"
    code, _, err = run(main_prove, [write(tmp_path, "b.json", one_tx_block().to_json()), "-o",
                                    out, "--queries", "8", "--pow-bits", "2", "--backend",
                                    "emu", "--postmortem-dir", pm, "-q"], capsys)
    assert code == 4, err
    assert "self-check" in err and "no proof written" in err
    assert not out.exists()
    # (a post-mortem of table tx0/rv32_program lands in a subfolder: the slash of a block's
    # table names, tests/test_postmortem_dir.py test_block_table_names_stay_in_the_folder)
    reports = [json.loads(p.read_text()) for p in pm.rglob("*.json")]
    assert len(reports) == 1 and reports[0]["check"] == "self_check"
    assert reports[0]["backend"] == "emu" and reports[0]["faults"].startswith(fault)


def test_host_backend_warns_about_device_diagnostics(tmp_path, capsys, monkeypatch):
    """PROVER_GPU_* / PROVER_FAULTS on the host backend: malformed values refused as on a
    device backend (exit 2), well-formed ones warned about (they do nothing there)."""
    from steadfast.prover import config
    blk = write(tmp_path, "b.json", empty_block().to_json())
    monkeypatch.setenv("PROVER_GPU_XCHECK", "maybe")
    for backend in ("host", "emu"):
        code, _, err = run(main_prove, [blk, "--backend", backend, "--execute-only"], capsys)
        assert code == 2 and "PROVER_GPU_XCHECK must be 0 or 1" in err, (backend, err)
    monkeypatch.setenv("PROVER_GPU_XCHECK", "1")
    monkeypatch.setattr(config, "_WARNED", set())
    code, _, err = run(main_prove, [blk, "--backend", "host", "--execute-only"], capsys)
    assert code == 0 and "PROVER_GPU_XCHECK" in err and "host backend ignores" in err


def test_postmortems_carry_the_run_identity(one_proof):
    """Post-mortems carry the version, a timestamp, the parameters (set by the prover) and
    the block file, its sha256 and the device (set by the CLI); written atomically."""
    import hashlib
    from steadfast import __version__
    blk, _, _, _, _, path = one_proof
    rep = json.loads(open(path).read())
    assert rep["steadfast_version"] == __version__ and rep["time"] and rep["check"] == "test"
    assert rep["block_sha256"] == hashlib.sha256(open(blk, "rb").read()).hexdigest()
    assert rep["params"]["num_queries"] == 8 and rep["device"] and rep["block"] == blk
    assert os.listdir(os.path.dirname(path)) == [os.path.basename(path)]


def test_cold_start_is_announced(tmp_path, capsys, monkeypatch):
    """No host-kernel index in numba's cache: prove says it is compiling, once per machine."""
    import numba
    from steadfast.prover import cli
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "cache"))
    assert cli._host_kernels_cached() is False
    (tmp_path / "cache" / "x").mkdir(parents=True)
    (tmp_path / "cache" / "x" / "hostlib.f-1.py311.nbi").write_bytes(b"")
    assert cli._host_kernels_cached() is True
    monkeypatch.setattr(cli, "_host_kernels_cached", lambda: False)
    monkeypatch.setenv("PROVER_DEV_MODE", "1")
    blk = write(tmp_path, "b.json", empty_block().to_json())
    code, _, err = run(main_prove, [blk, "--backend", "host"], capsys)
    assert code == 0 and "compiling the host kernels" in err
    monkeypatch.delenv("PROVER_DEV_MODE")
    code, out, _ = run(main_prove, [blk, "-o", str(tmp_path / "b.proof")] + FAST, capsys)
    assert code == 0 and "the proof" in out and "with the first compilation" in out
    monkeypatch.setattr(cli, "_host_kernels_cached", lambda: True)
    code, out, err = run(main_prove, [blk, "-o", str(tmp_path / "b.proof")] + FAST, capsys)
    assert code == 0 and "compiling" not in err and "first compilation" not in out
    assert "start-up (imports, reading the block)" in out
    monkeypatch.setattr(cli, "_host_kernels_cached", lambda: False)
    monkeypatch.setenv("PROVER_DEV_MODE", "1")
    code, _, err = run(main_prove, [blk, "--backend", "host", "-q"], capsys)
    assert code == 0 and "compiling" not in err
    assert "DEVELOPMENT MODE" in err                   # -q never silences that one


def test_prove_json_prints_the_stats(tmp_path, capsys, monkeypatch):
    """prove --json: one JSON object on stdout (the --stats-json content), nothing else."""
    import hashlib
    monkeypatch.setenv("PROVER_DEV_MODE", "1")
    blk = write(tmp_path, "b.json", one_tx_block().to_json())
    code, out, _ = run(main_prove, [blk, "--backend", "host", "--json"], capsys)
    rec = json.loads(out)
    assert code == 0 and rec["ok"] and rec["dev_mode"] and rec["proof"].endswith("b.proof")
    assert rec["block_sha256"] == hashlib.sha256(open(blk, "rb").read()).hexdigest()
    assert rec["proof_file_bytes"] == os.path.getsize(tmp_path / "b.proof")
    assert rec["block_version"] == 2 and [t["exit_code"] for t in rec["transactions"]] == [0]
    assert rec["state_out"] == expected_state_out(bytes(32), [
        (one_tx_block().transactions[0].program.digest(), b"abc", 0,
         b"hello from rv32im\ncba")]).hex()
