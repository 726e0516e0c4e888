"""steadfast/_vector_width.py sets numba's CPU features for the whole process when
``steadfast`` is imported (issue #27, item 8): visible (logged once, ``applied()``) and
avoidable (``STEADFAST_VECTOR_WIDTH=numba`` keeps numba's default).

``python tests/test_vector_width.py --measure`` measures what the default costs a host
application's own ``@njit`` kernels (figures in docs/diagnostics.md): each kernel
compiled and run in a fresh process with numba's default features and with steadfast's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import json, logging, os
logging.basicConfig(level=logging.INFO, format="LOG %(name)s %(message)s")
import steadfast
from steadfast import _vector_width as vw
import numba
print("RESULT " + json.dumps({"applied": vw.applied(),
                              "env": os.environ.get("NUMBA_CPU_FEATURES"),
                              "numba": numba.config.CPU_FEATURES,
                              "again": vw.configure()}))
"""


def _probe(**env):
    e = {k: v for k, v in os.environ.items()
         if k not in ("NUMBA_CPU_FEATURES", "STEADFAST_VECTOR_WIDTH")}
    e.update(env)
    p = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, env=e, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
    logs = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.startswith("LOG steadfast")]
    return res, logs


def _host_has_avx512() -> bool:
    from steadfast import _vector_width as vw
    import llvmlite.binding as ll
    return vw.features_for("auto", dict(ll.get_host_cpu_features())) is not None


def test_default_is_logged_once_and_readable():
    res, logs = _probe()
    assert res["applied"] == res["env"] == res["again"]
    if _host_has_avx512():
        assert res["applied"] and res["applied"].endswith("-prefer-256-bit")
        assert res["numba"] == res["applied"]
        assert len(logs) == 1 and "STEADFAST_VECTOR_WIDTH=numba" in logs[0], logs
        assert "whole process" in logs[0]
    else:
        assert res["applied"] is None and logs == []


@pytest.mark.parametrize("width", ["numba", "256"])
def test_opt_out_keeps_numbas_default(width):
    res, logs = _probe(STEADFAST_VECTOR_WIDTH=width)
    assert res["applied"] is None and res["env"] is None and res["again"] is None
    assert res["numba"] in ("", None), res                 # numba's own default
    assert logs == []


def test_an_explicit_numba_setting_wins():
    res, logs = _probe(NUMBA_CPU_FEATURES="+avx2")
    assert res["applied"] is None and res["env"] == "+avx2" and logs == []


_LANES_CHILD = r"""
import os, sys, hashlib
import numpy as np
if sys.argv[1] == "numba-first":      # numba's code generator made before steadfast's choice
    from numba import njit
    njit(lambda x: x + 1)(1)
from steadfast.kernels import poseidon2_lanes, ntt_host
from steadfast.kernels.poseidon2 import poseidon2_permute
from steadfast.verifier.poseidon2 import permute
st = np.random.default_rng(3).integers(0, 2013265921, size=(64, 16), dtype=np.uint32)
got = np.asarray(poseidon2_permute(st))
want = np.array([permute([int(v) for v in row]) for row in st], np.uint32)
a = np.random.default_rng(4).integers(0, 2013265921, size=(2, 1 << 12), dtype=np.uint32)
print("RESULT", poseidon2_lanes.W, bool(np.array_equal(got, want)),
      hashlib.sha256(ntt_host.lde_from_coeffs(a, 2).tobytes()).hexdigest()[:16])
"""


def test_lanes_follow_the_cache_key(tmp_path):
    """The lane count W of the 32-bit-lane kernels (Poseidon2, the NTT's butterflies) is
    a function of numba's code-generation features, which its cache keys hold: a process
    whose generator was made before steadfast set the features shares a cache key with a
    ``STEADFAST_VECTOR_WIDTH=256`` one, so both must use W = 8.  It used 16 and loaded the
    256 process's kernels (compiled for 8): wrong Poseidon2 outputs, a failed grind."""
    e = {k: v for k, v in os.environ.items()
         if k not in ("NUMBA_CPU_FEATURES", "STEADFAST_VECTOR_WIDTH")}
    e["NUMBA_CACHE_DIR"] = str(tmp_path / "cache")

    def run(mode, **env):
        p = subprocess.run([sys.executable, "-c", _LANES_CHILD, mode], cwd=ROOT,
                           env=dict(e, **env), capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        return [ln.split()[1:] for ln in p.stdout.splitlines() if ln.startswith("RESULT")][-1]

    w256 = run("steadfast-first", STEADFAST_VECTOR_WIDTH="256")   # fills the shared cache
    first = run("numba-first")
    assert w256[:2] == ["8", "True"] and first[:2] == ["8", "True"], (w256, first)
    assert first[2] == w256[2]                                     # the same LDE words
    if _host_has_avx512():
        default = run("steadfast-first")
        assert default[:2] == ["16", "True"] and default[2] == w256[2], default


# ------------------------------------------------------------------ the measurement
_APP = r"""
import json, sys, time
import numpy as np
if sys.argv[1] == "steadfast":
    import steadfast                      # what a host application importing us gets
from numba import njit

@njit(cache=False)
def saxpy(a, x, y):
    for i in range(x.shape[0]):
        y[i] = a * x[i] + y[i]

@njit(cache=False)
def dot(x, y):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * y[i]
    return s

@njit(cache=False)
def stencil(x, out):
    for i in range(1, x.shape[0] - 1):
        out[i] = 0.25 * x[i - 1] + 0.5 * x[i] + 0.25 * x[i + 1]

@njit(cache=False)
def mix(a):
    h = np.uint64(1469598103934665603)
    for i in range(a.shape[0]):
        v = np.uint64(a[i])
        v ^= v >> np.uint64(33)
        v *= np.uint64(0xff51afd7ed558ccd)
        h = (h ^ v) * np.uint64(1099511628211)
    return h

@njit(cache=False)
def matmul(a, b, c):
    n = a.shape[0]
    for i in range(n):
        for k in range(n):
            aik = a[i, k]
            for j in range(n):
                c[i, j] += aik * b[k, j]

rng = np.random.default_rng(0)
x, y = rng.random(1 << 22), rng.random(1 << 22)
xf = rng.random(1 << 22).astype(np.float32); of = np.empty_like(xf)
ai = rng.integers(0, 1 << 62, 1 << 22)
A, B, C = rng.random((192, 192)), rng.random((192, 192)), np.zeros((192, 192))
cases = {"saxpy f64 4M": lambda: saxpy(2.0, x, y), "dot f64 4M": lambda: dot(x, y),
         "stencil f32 4M": lambda: stencil(xf, of), "mix u64 4M": lambda: mix(ai),
         "matmul f64 192": lambda: matmul(A, B, C)}
out = {}
for name, fn in cases.items():
    t0 = time.perf_counter(); fn(); first = time.perf_counter() - t0
    ts = []
    for _ in range(7):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    out[name] = {"first_s": first, "best_s": min(ts)}
print("RESULT " + json.dumps(out))
"""


def measure(rounds: int = 3) -> dict:
    """{kernel: {numba: best s, steadfast: best s, ratio, compile numba/steadfast}}."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CPU_FEATURES", "STEADFAST_VECTOR_WIDTH")}
    env["PYTHONPATH"] = str(ROOT)
    runs: dict = {"numba": [], "steadfast": []}
    for _ in range(rounds):                       # interleaved: the machine's load drifts
        for mode in runs:
            p = subprocess.run([sys.executable, "-c", _APP, mode], env=env, cwd="/tmp",
                               capture_output=True, text=True, timeout=600)
            runs[mode].append(json.loads(p.stdout.split("RESULT ", 1)[1]))
    out = {}
    for k in runs["numba"][0]:
        best = {m: min(r[k]["best_s"] for r in runs[m]) for m in runs}
        comp = {m: min(r[k]["first_s"] - r[k]["best_s"] for r in runs[m]) for m in runs}
        out[k] = {"numba_s": best["numba"], "steadfast_s": best["steadfast"],
                  "time_ratio": best["steadfast"] / best["numba"],
                  "compile_numba_s": comp["numba"], "compile_steadfast_s": comp["steadfast"]}
    return out


if __name__ == "__main__" and "--measure" in sys.argv:
    for k, v in measure().items():
        print(f"{k:16s} numba {v['numba_s'] * 1e3:8.2f} ms  steadfast {v['steadfast_s'] * 1e3:8.2f} ms"
              f"  x{v['time_ratio']:.2f}  compile {v['compile_numba_s']:.2f} / "
              f"{v['compile_steadfast_s']:.2f} s")
