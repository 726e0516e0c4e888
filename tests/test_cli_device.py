"""The command line's environment switches: a device corruption's stop (exit 4, a
post-mortem, no proof) with PROVER_GPU_XCHECK off, device diagnostics on the host backend
(refused when malformed, warned about otherwise), and development mode (PROVER_DEV_MODE:
a marked fake that verify refuses unless --accept-dev).  (Split out of tests/test_cli.py.)"""
from __future__ import annotations

import json

import pytest

from steadfast.prover.cli import main_prove, main_verify

from tests.cli_helpers import write, run, _false_claims
from tests.txblocks import empty_block, one_tx_block


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
    from steadfast.prover.engine import config
    blk = write(tmp_path, "b.json", empty_block().to_json())
    monkeypatch.setenv("PROVER_GPU_XCHECK", "maybe")
    for backend in ("host", "emu"):
        code, _, err = run(main_prove, [blk, "--backend", backend, "--execute-only"], capsys)
        assert code == 2 and "PROVER_GPU_XCHECK must be 0 or 1" in err, (backend, err)
    monkeypatch.setenv("PROVER_GPU_XCHECK", "1")
    monkeypatch.setattr(config, "_WARNED", set())
    code, _, err = run(main_prove, [blk, "--backend", "host", "--execute-only"], capsys)
    assert code == 0 and "PROVER_GPU_XCHECK" in err and "host backend ignores" in err


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
