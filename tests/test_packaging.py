"""The packages import under one name (steadfast.*): nothing in the project may import a
top-level ``prover``, ``kernels``, ``verifier``, ``air`` or ``rv32`` (a node embedding the
library may have its own modules of those names, and a module imported under two names is
two modules: two locks, two exception classes)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = """
import importlib, pkgutil, sys
import steadfast
for pkg in ("air", "kernels", "prover", "verifier", "rv32"):
    mod = importlib.import_module("steadfast." + pkg)
    for info in pkgutil.iter_modules(mod.__path__):
        if info.name in ("ptx_check", "__main__"):
            continue
        importlib.import_module(f"steadfast.{pkg}.{info.name}")
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("air", "kernels", "prover", "verifier", "rv32"))
print("BAD", bad)
print("VERSION", steadfast.__version__)
"""


def test_no_top_level_package_names(tmp_path):
    # run from an unrelated directory: only the installed/mapped names are importable
    env = {"NUMBA_ENABLE_CUDASIM": "1", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-c", CODE], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "BAD []" in r.stdout, r.stdout
    assert "VERSION " in r.stdout


def test_source_checkout_without_install(tmp_path):
    # PYTHONPATH=<checkout> (the device machine runs bench/device_check.py this way)
    env = {"NUMBA_ENABLE_CUDASIM": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c",
                        "import steadfast.prover.api as a, steadfast.verifier as v; "
                        "print(a.__file__)"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert str(ROOT / "prover" / "api.py") in r.stdout
