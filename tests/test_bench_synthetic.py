"""bench/block_bench.py --synthetic and bench/zorch_compare.py --synthetic (issue #25 item 5):
the synthetic AIR's proof verifies, the cell accounting matches the shapes, the report has
its fields, and zorch_compare reports our side without zorch.  Small sizes; no timing
assertions (the figures are measurements, not properties)."""
from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.block_bench import parse_synthetic, synthetic_statement  # noqa: E402
from bench.prove_bench import synthetic_air, synthetic_trace  # noqa: E402

P = 2013265921
FIELDS = ("synthetic", "label", "log_blowup", "queries", "pow_bits", "verified",
          "verify_seconds", "prove_wall_s", "proof_file_bytes", "proof_sha256",
          "peak_rss_bytes", "phases", "rounds", "tables", "cells")
CELL_FIELDS = ("tables", "cells", "lde_cells", "padding_share", "cores", "prove_s",
               "prove_wall_s", "prove_cpu_s", "cells_per_cpu_s", "cells_per_s_per_core",
               "rss_bytes_per_cell", "roofline", "roofline_ratio")


def _default_log_blowup() -> int:
    from steadfast.prover.api import ProverConfig
    return ProverConfig().log_blowup


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, os.path.join(ROOT, "bench", script), *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)


def _block_bench(tmp_path, spec: str, *extra: str) -> tuple[list, str]:
    out = tmp_path / "out.json"
    r = _run("block_bench.py", "--synthetic", spec, "--json", str(out), *extra)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(out.read_text()), r.stdout


def _expected_cells(width: int, log_rows: int, degree: int, tables: int) -> dict:
    """Committed cells computed from the AIR objects and the shapes alone."""
    n = 1 << log_rows
    per = {}
    for i in range(tables):
        air = synthetic_air(i, width, degree)
        per[air.name] = {"rows": n, "main": width * n, "aux": 4 * air.aux_width * n,
                         "parts": 4 * air.num_parts * n}
    return per


def _check_result(res: dict, width: int, log_rows: int, degree: int, tables: int) -> None:
    for f in FIELDS:
        assert f in res, f
    for f in CELL_FIELDS:
        assert f in res["cells"], f
    assert res["synthetic"] == {"width": width, "log_rows": log_rows, "degree": degree,
                                "tables": tables}
    assert res["verified"] is True
    log_b = res["log_blowup"]
    assert log_b == _default_log_blowup()
    expected = _expected_cells(width, log_rows, degree, tables)
    got = res["cells"]["tables"]
    assert set(got) == set(expected)
    for name, e in expected.items():
        for f in ("rows", "main", "aux", "parts"):
            assert got[name][f] == e[f], (name, f)
        assert got[name]["real_rows"] == e["rows"]            # no padding rows
    total = sum(e["main"] + e["aux"] + e["parts"] for e in expected.values())
    assert res["cells"]["cells"] == total
    assert res["cells"]["lde_cells"] == total * (1 << log_b)
    assert res["cells"]["padding_share"] == 0.0
    assert res["cells"]["cores"] == len(os.sched_getaffinity(0))
    ratio = res["cells"]["roofline_ratio"]
    assert isinstance(ratio, float) and math.isfinite(ratio) and ratio > 0
    assert res["cells"]["roofline"]["seconds"] > 0
    for f in ("cells_per_s_per_core", "cells_per_cpu_s", "rss_bytes_per_cell"):
        assert math.isfinite(res["cells"][f]) and res["cells"][f] > 0, f
    assert res["proof_file_bytes"] > 0 and res["peak_rss_bytes"] > 0
    assert len(res["proof_sha256"]) == 64
    int(res["proof_sha256"], 16)


def test_parse_synthetic():
    assert parse_synthetic("64,18,2") == (64, 18, 2, 1)
    assert parse_synthetic("64,16,3,4") == (64, 16, 3, 4)
    import argparse
    for bad in ("64,18", "64,18,2,1,5", "a,b,c", "64,0,2", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_synthetic(bad)


@pytest.mark.parametrize("degree", [1, 2, 3, 4])
def test_synthetic_trace_satisfies_its_air(degree):
    from steadfast.air import check_traces
    airs, traces, pvs = synthetic_statement(5, 5, degree, 2)
    check_traces(airs, traces, pvs)
    assert all(a.num_parts == max(1, degree - 1) for a in airs)
    t = synthetic_trace(0, 4, 5, degree).astype(np.uint64)   # the recurrence, by hand
    for i in range(1, 16):
        for j in range(5):
            v = 1
            for d in range(degree):
                v = v * int(t[i - 1, (j + d) % 5]) % P
            assert int(t[i, j]) == (v + j + 1) % P


def test_block_bench_synthetic_8_10_2(tmp_path):
    results, stdout = _block_bench(tmp_path, "8,10,2")
    assert len(results) == 1
    res = results[0]
    _check_result(res, 8, 10, 2, 1)
    assert res["emu"]["peak_device_bytes"] > 0
    assert res["emu"]["same_bytes_as_host"] is True
    assert any(line.startswith("| 8 x 2^10, d2, x1 | ") for line in stdout.splitlines())
    # the same statement proven here, independently, gives the same bytes, which verify
    from steadfast.prover.api import Prover, ProverConfig, verify_airs
    airs, traces, pvs = synthetic_statement(8, 10, 2, 1)
    proof = Prover(ProverConfig(backend="host", num_queries=res["queries"],
                                pow_bits=res["pow_bits"])).prove_airs(airs, traces, pvs)
    assert hashlib.sha256(proof.to_bytes()).hexdigest() == res["proof_sha256"]
    assert len(proof.to_bytes()) == res["proof_file_bytes"]
    assert verify_airs(proof, airs, pvs, min_security_bits=0).public_values == pvs


def test_block_bench_synthetic_16_9_3_2(tmp_path):
    results, stdout = _block_bench(tmp_path, "16,9,3,2", "--no-emu", "--repeat", "2")
    assert len(results) == 2
    for res in results:
        _check_result(res, 16, 9, 3, 2)
        assert "emu" not in res
        assert [t["parts"] for t in res["tables"]] == [2, 2]
    assert results[0]["proof_sha256"] == results[1]["proof_sha256"]
    rows = [ln for ln in stdout.splitlines() if ln.startswith("| 16 x 2^9, d3, x2 | ")]
    assert len(rows) == 2


def _zorch_compare(tmp_path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "zc.json"
    r = _run("zorch_compare.py", "--synthetic", "8,9", "--repeats", "1", "--json", str(out),
             *extra)
    return r, json.loads(out.read_text())


def _check_our_side(r: subprocess.CompletedProcess, report: dict) -> None:
    assert "whole proof (ours)" in r.stdout and "LDE + commit (sum)" in r.stdout
    syn = report["synthetic"]
    assert (syn["width"], syn["log_rows"], syn["degree"]) == (8, 9, 2)
    log_b = syn["log_blowup"]
    assert log_b == _default_log_blowup()
    rnd = report["rounds"][0]
    names = [c[0] for c in syn["cases"]]
    air = synthetic_air(0, 8, 2)
    assert names == [f"lde 8x2^9->2^{9 + log_b} main", f"merkle 2^{9 + log_b}x8 main",
                     f"lde {4 * air.num_parts}x2^9->2^{9 + log_b} parts",
                     f"merkle 2^{9 + log_b}x{4 * air.num_parts} parts"]
    assert set(rnd["steadfast"]) >= set(names)
    proof = rnd["proof"]
    assert proof["verified"] is True
    assert proof["cells"]["cells"] == (8 + 4 * air.num_parts) << 9
    s = rnd["summary"]
    assert s["ours_lde_commit_s"] > 0 and math.isfinite(s["proof_over_ours"])
    assert s["roofline_ratio"] > 0 and math.isfinite(s["roofline_ratio"])
    assert "zorch" not in rnd and s["zorch_lde_commit_s"] is None
    assert s["proof_over_zorch"] is None


def test_zorch_compare_synthetic_no_zorch(tmp_path):
    r, report = _zorch_compare(tmp_path, "--no-zorch")
    assert r.returncode == 0, r.stderr[-3000:]
    _check_our_side(r, report)
    assert report["zorch_error"] is None


def test_zorch_compare_synthetic_zorch_unavailable(tmp_path):
    r, report = _zorch_compare(tmp_path, "--zorch-python", "/nonexistent/python")
    assert r.returncode == 1, r.stderr[-3000:]        # asked for zorch and did not get it
    _check_our_side(r, report)
    assert report["zorch_error"] and "zorch: unavailable" in r.stderr
