"""Where post-mortems go (issue #26 item 6): ``ProverConfig.postmortem_dir`` >
``PROVER_POSTMORTEM_DIR`` > ``$XDG_STATE_HOME/steadfast/postmortems``; created on first
write; an unusable directory falls back to the temporary directory with a warning; every
write logged once at WARNING with its path; never the working directory by default."""
import json
import logging
import os
import stat
import tempfile

import pytest

from steadfast.air import examples as ex
from steadfast.prover import Params
from steadfast.prover.device import xcheck
from steadfast.prover.engine.config import ProverConfig
from steadfast.prover.device.faults import parse_faults
from steadfast.prover.device.pipeline import PipelineConfig, run_pipeline
from steadfast.prover.core.rounds import statement
from steadfast.prover.device.xcheck import XcheckFailure, postmortem_dir, write_postmortem
from steadfast.verifier.protocol import table_shape

FAST = Params(num_queries=8, pow_bits=2)


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No env switch, XDG_STATE_HOME in tmp_path, the working directory elsewhere."""
    monkeypatch.delenv("PROVER_POSTMORTEM_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(xcheck, "POSTMORTEM_CONTEXT", {})
    return tmp_path


def _written(caplog):
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and r.getMessage().startswith("post-mortem written: ")]


def test_default_is_the_xdg_state_dir_created_on_first_write(clean_env, caplog):
    want = clean_env / "state" / "steadfast" / "postmortems"
    assert postmortem_dir() == str(want) and postmortem_dir("") == str(want)
    assert not want.exists()                     # nothing created until a write
    with caplog.at_level(logging.WARNING, logger="steadfast.prover"):
        path = write_postmortem({"table": "cpu", "check": "test"})
    assert os.path.dirname(path) == str(want)
    assert stat.S_IMODE(os.stat(want).st_mode) == 0o700
    assert json.loads(open(path).read())["check"] == "test"
    assert _written(caplog) == [f"post-mortem written: {path}"]    # once, with its path
    assert os.listdir(clean_env / "cwd") == []   # nothing in the working directory
    assert os.listdir(want) == [os.path.basename(path)]            # no .tmp left


def test_xdg_unset_means_local_state(clean_env, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", "")
    monkeypatch.setenv("HOME", str(clean_env / "home"))
    assert postmortem_dir() == str(clean_env / "home" / ".local" / "state" / "steadfast"
                                   / "postmortems")


def test_env_overrides_default_and_config_overrides_env(clean_env, monkeypatch):
    monkeypatch.setenv("PROVER_POSTMORTEM_DIR", str(clean_env / "env"))
    assert postmortem_dir() == postmortem_dir(None) == str(clean_env / "env")
    path = write_postmortem({"table": "t", "check": "x"}, None)
    assert os.path.dirname(path) == str(clean_env / "env")
    cfg_dir = clean_env / "cfg"
    assert postmortem_dir(cfg_dir) == str(cfg_dir)          # PathLike too
    path = write_postmortem({"table": "t", "check": "x"}, cfg_dir)
    assert os.path.dirname(path) == str(cfg_dir)
    # the config field is carried to the device pipeline as given; None means "resolve"
    from steadfast.prover.api import Prover
    assert ProverConfig().postmortem_dir is None and PipelineConfig().postmortem_dir is None
    p = Prover(ProverConfig(backend="emu", postmortem_dir=str(cfg_dir)))
    assert p._device_config().postmortem_dir == str(cfg_dir)


def test_unusable_dir_falls_back_to_tempdir_with_a_warning(clean_env, caplog):
    blocker = clean_env / "a-file"
    blocker.write_text("not a directory")
    bad = blocker / "pm"                          # cannot be created: its parent is a file
    with caplog.at_level(logging.WARNING, logger="steadfast.prover"):
        path = write_postmortem({"table": "fb", "check": "x"}, str(bad))
    try:
        assert os.path.dirname(path) == tempfile.gettempdir()
        assert json.loads(open(path).read())["table"] == "fb"
        warn = [r.getMessage() for r in caplog.records if "is not usable" in r.getMessage()]
        assert len(warn) == 1 and str(bad) in warn[0] and tempfile.gettempdir() in warn[0]
        assert _written(caplog) == [f"post-mortem written: {path}"]
    finally:
        os.unlink(path)


def test_lost_only_when_the_fallback_fails_too_and_never_raises(clean_env, caplog, monkeypatch):
    blocker = clean_env / "a-file"
    blocker.write_text("x")
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(blocker / "tmp"))
    with caplog.at_level(logging.WARNING, logger="steadfast.prover"):
        assert write_postmortem({"table": "z", "check": "x"}, str(blocker / "pm")) is None
    assert any(r.levelno == logging.ERROR and "post-mortem lost" in r.getMessage()
               for r in caplog.records)


def test_failing_proof_writes_its_postmortem_there_and_names_it(clean_env, caplog, monkeypatch):
    """XCHECK on emu with an injected R2 corruption: the post-mortem lands in the
    env-chosen directory (no postmortem_dir given), the error names it, one WARNING."""
    monkeypatch.setenv("PROVER_POSTMORTEM_DIR", str(clean_env / "pm"))
    airs, traces, pvs = ex.lookup_block(5, 6)
    shapes = [table_shape(a, t.shape[0].bit_length() - 1, FAST) for a, t in zip(airs, traces)]
    st = statement(airs, traces, pvs, FAST, shapes)
    cfg = PipelineConfig(backend="emu", xcheck=True, workers=1,
                         faults=parse_faults("corrupt@r2:1,seed=1"))
    with caplog.at_level(logging.WARNING, logger="steadfast.prover"):
        with pytest.raises(XcheckFailure) as err:
            run_pipeline(st, cfg)
    path = err.value.postmortem
    assert os.path.dirname(path) == str(clean_env / "pm") and path in str(err.value)
    assert json.loads(open(path).read())["verdict"]
    assert _written(caplog) == [f"post-mortem written: {path}"]
    assert os.listdir(clean_env / "cwd") == []


def test_cli_without_postmortem_dir_uses_the_default_and_prints_the_path(clean_env, monkeypatch,
                                                                        capsys):
    """``prove`` of a block of RISC-V transactions with no --postmortem-dir (and no env
    switch): the self-check's post-mortem goes to the XDG state directory, not the working
    directory; its path is on stderr."""
    from steadfast.prover.cli import main_prove
    from tests.txblocks import one_tx_block
    monkeypatch.setenv("PROVER_FAULTS", "corrupt@r2:1,seed=3")
    monkeypatch.delenv("PROVER_GPU_XCHECK", raising=False)
    monkeypatch.setenv("PROVER_ABORT_ON_CORRUPTION", "1")    # the stop (no host retry)
    blk = clean_env / "cwd" / "b.json"
    blk.write_text(json.dumps(one_tx_block().to_json()))
    code = main_prove([str(blk), "--queries", "8", "--pow-bits", "2", "--backend", "emu"])
    err = capsys.readouterr().err
    assert code == 4, err
    want = clean_env / "state" / "steadfast" / "postmortems"
    (path,) = want.rglob("*.json")          # (in a subfolder for tx0/...: see below)
    assert f"post-mortem written: {path}" in err             # the WARNING, on stderr
    assert str(path) in err.replace("post-mortem written: ", "", 1)   # and the error
    assert sorted(os.listdir(clean_env / "cwd")) == ["b.json"]


def test_block_table_names_stay_in_the_folder(clean_env):
    """A block of RISC-V transactions names its tables tx{i}/...: the post-mortem of such a
    table is still one file directly in the post-mortem directory."""
    d = clean_env / "pm"
    path = write_postmortem({"table": "tx0/rv32_program", "check": "test"}, str(d))
    assert os.path.dirname(path) == str(d) and os.listdir(d) == [os.path.basename(path)]
