"""What ``prove`` writes and prints: plain progress and the summary, --execute-only's
report (and the library's frozen one), the weak-parameter warning and what verify --json
reports of that proof, outputs checked before proving and written all or nothing,
post-mortems with the run's identity, the cold-start notice and --json.  WEAK PARAMETERS
(FAST): one proof of tests/txblocks.one_tx_block for the module.  (Split out of
tests/test_cli.py.)"""
from __future__ import annotations

import json
import os
import sys

import pytest

from steadfast.prover.cli import main_prove, main_verify
from steadfast.rv32 import block as rblock

from tests.cli_helpers import FAST, ANY, EMPTY_ROUNDS, write, run, copy_example, _false_claims
from tests.test_txblock import expected_state_out
from tests.txblocks import empty_block, one_tx_block


@pytest.fixture(scope="module")
def one_proof(tmp_path_factory):
    """``prove`` of tests/txblocks.one_tx_block with FAST, once: (block, proof, stats,
    stdout, stderr, the post-mortem written after it with the run's identity)."""
    import io
    from steadfast.prover.device import xcheck
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
    """A host kernel missing from numba's cache: prove says it is compiling, once per
    machine (the cache check itself, on real processes: tests/test_cli_warm.py)."""
    from steadfast.prover import cli
    from steadfast.prover.cli import compile_ahead as ca
    monkeypatch.setattr(ca, "missing_kernels", lambda entries=None: [{"name": "_run"}])
    assert cli._host_kernels_cached() is False
    monkeypatch.setattr(ca, "missing_kernels", lambda entries=None: [])
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
