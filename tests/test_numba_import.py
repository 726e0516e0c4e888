"""steadfast/_numba_import.py: the command line imports numba without PyYAML where numba
would read nothing with it, and numba's configuration is the same either way; ``verify``
pauses the cyclic collector for its call only."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_BODY = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from steadfast._numba_import import import_numba
    hidden = import_numba()
    from numba.core import config
    print("HIDDEN", hidden, "YAML_LOADED", "yaml" in sys.modules, "HAVE", config._HAVE_YAML,
          "BOUNDSCHECK", config.BOUNDSCHECK, "DEBUG", config.DEBUG)
    import yaml                                     # works as usual afterwards
    print("YAML_OK", yaml.safe_load("a: 1") == {{"a": 1}})
""")


def _run(cwd, env=None) -> str:
    out = subprocess.run([sys.executable, "-c", _BODY.format(root=ROOT)], cwd=cwd,
                         capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in {**os.environ, **(env or {})}.items()
                              if k != "NUMBA_BOUNDSCHECK"})
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_without_a_config_file_numba_imports_without_yaml(tmp_path):
    pytest.importorskip("yaml")
    out = _run(tmp_path)
    assert "HIDDEN True YAML_LOADED False HAVE False" in out
    assert "YAML_OK True" in out


def test_a_config_file_is_read_as_numba_reads_it(tmp_path):
    pytest.importorskip("yaml")
    (tmp_path / ".numba_config.yaml").write_text("boundscheck: 1\n")
    out = _run(tmp_path)
    assert "HIDDEN False" in out and "HAVE True" in out
    assert "BOUNDSCHECK 1 " in out                  # the file's value, as numba's own path
    plain = subprocess.run([sys.executable, "-c", "import numba.core.config as c; "
                            "print('BOUNDSCHECK', c.BOUNDSCHECK)"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert "BOUNDSCHECK 1" in plain.stdout


def test_environment_variables_still_apply(tmp_path):
    out = _run(tmp_path, {"NUMBA_DEBUG": "0"})
    assert "DEBUG 0" in out


def test_a_no_op_once_numba_is_imported():
    import numba  # noqa: F401
    from steadfast._numba_import import import_numba
    assert import_numba() is False


def test_verify_pauses_the_collector_for_its_call_only(tmp_path):
    """main_verify in process: the collector is off during the call (an AIR build inside
    sees it off) and on again after it, also when the call fails."""
    from steadfast.prover import cli
    seen = []

    def spy(argv):
        seen.append(gc.isenabled())
        raise cli._Fail(2, "stop here")

    assert gc.isenabled()
    orig = cli._run_verify
    cli._run_verify = spy
    try:
        assert cli.main_verify(["whatever.proof"]) == 2
    finally:
        cli._run_verify = orig
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        cli.main_verify([str(tmp_path / "missing.proof")])
        assert not gc.isenabled()                   # a caller's choice is kept
    finally:
        gc.enable()
