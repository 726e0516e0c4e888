"""The command line's usage: bad flags (exit 2), --version / --help and every flag's
documented default and name, the module entry point and the installed console scripts
(the ``sim`` backend chosen from the environment), never a traceback.  (Split out of
tests/test_cli.py.)"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from steadfast.prover.cli import main_prove, main_verify

from tests.cli_helpers import ROOT, write, run
from tests.txblocks import empty_block


def test_bad_usage_exit_2(tmp_path, capsys):
    blk = write(tmp_path, "b.json", empty_block().to_json())
    for argv, frag in (([blk, "--backend", "quantum"], "unknown backend"),
                       ([blk, "--vram-budget", "12 potatoes"], "--vram-budget"),
                       ([blk, "--host-hold", "12 potatoes"], "--host-hold: not a byte size"),
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


def test_module_entry_point_no_traceback(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "steadfast.prover", "prove", write(tmp_path, "x.json", "{")],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "not valid JSON" in r.stderr
    r = subprocess.run([sys.executable, "-m", "steadfast.prover", "frobnicate"], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "usage" in r.stderr


def test_module_entry_point_ends_like_the_console_scripts(monkeypatch, capsys):
    """``python -m steadfast.prover`` skips the interpreter's final collection as the
    ``prove``/``verify`` scripts do (it cost a warm ``-m verify`` ~0.3 s more than
    ``verify``); ``main(argv)`` called from a library does not."""
    import runpy
    from steadfast.prover import __main__ as entry
    from steadfast.prover.cli import common
    calls = []
    monkeypatch.setattr(common, "skip_final_gc", lambda: calls.append(1))
    assert entry.main(["verify", "--version"]) == 0 and calls == []
    monkeypatch.setattr(sys, "argv", ["steadfast.prover", "verify", "--version"])
    monkeypatch.delitem(sys.modules, "steadfast.prover.__main__")     # run afresh, as -m does
    with pytest.raises(SystemExit) as e:
        runpy.run_module("steadfast.prover", run_name="__main__", alter_sys=False)
    assert e.value.code == 0 and calls == [1]
    assert capsys.readouterr().out.strip().startswith("verify ")


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
