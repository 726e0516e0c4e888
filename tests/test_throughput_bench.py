"""bench/throughput_bench.py's own logic (issue #38's one bench command): the report's
medians, ratios and hashes from given samples, the base tree from ``git archive`` and the
argument checks.  The proofs it times are far too big for CI; their code paths are the
library's, tested elsewhere."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from bench import throughput_bench as tb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _sample(prove_s: float, cpu_s: float, sha: str = "ab" * 32) -> dict:
    return {"case": "prog", "cycles": 1000, "prove_s": prove_s, "call_s": prove_s + 1,
            "cpu_s": cpu_s, "rounds": {"r1_main": prove_s / 2, "r2_quotient": prove_s / 2},
            "tables": {"rv32_alu": prove_s * 0.6, "rv32_shift": prove_s * 0.4},
            "cells_per_cycle": 129.1, "proof_bytes": 4321, "sha256": sha,
            "peak_rss_mib": 100.0, "load": [0.5, 0.7]}


def test_report_gives_medians_and_the_ratio_of_new_to_base():
    samples = {"prog": {"base": [_sample(4.0, 8.0), _sample(2.0, 4.0), _sample(3.0, 6.0)],
                        "new": [_sample(1.0, 2.0), _sample(1.5, 3.0), _sample(2.5, 5.0)]}}
    out = tb.report(samples)
    assert "1,000 cycles, 129.1 committed cells/cycle" in out
    prove = next(line for line in out.splitlines() if line.startswith("prove phase s"))
    assert "3.00 (4.00/2.00/3.00)" in prove and "1.50 (1.00/1.50/2.50)" in prove
    rate = next(line for line in out.splitlines() if line.startswith("cycles/s"))
    assert "333" in rate and "667" in rate                 # 1000 / 3.0 and 1000 / 1.5
    assert "new/base prove phase 0.500, CPU 0.500" in out
    assert "base: proof 4,321 bytes, sha256 abababababababab" in out


def test_report_of_one_tree_has_no_ratio_and_lists_every_distinct_hash():
    samples = {"prog": {"base": [], "new": [_sample(2.0, 4.0, "11" * 32),
                                            _sample(2.0, 4.0, "22" * 32)]}}
    out = tb.report(samples)
    assert "new/base" not in out
    assert "sha256 1111111111111111, 2222222222222222" in out


def test_report_has_a_ratio_per_profile_column():
    samples = {"prog": {"base": [_sample(4.0, 8.0)], "new": [_sample(4.0, 8.0)],
                        "new:fastest": [_sample(2.0, 2.0, "33" * 32)]}}
    out = tb.report(samples)
    assert "new/base prove phase 1.000, CPU 1.000" in out
    assert "new:fastest/base prove phase 0.500, CPU 0.250" in out
    assert "new:fastest: proof 4,321 bytes, sha256 3333333333333333" in out
    assert next(line for line in out.splitlines() if line.startswith("cells/cycle"))


def test_the_child_takes_the_profile(monkeypatch):
    """run_child passes the case and the profile; the child builds its prover from it."""
    seen = {}

    def fake_run(cmd, **kw):
        seen["cmd"] = cmd
        return subprocess.CompletedProcess(cmd, 0, stdout='{"ok": 1}\n', stderr="")
    monkeypatch.setattr(tb.subprocess, "run", fake_run)
    assert tb.run_child("/tree", "prog", "fastest") == {"ok": 1}
    assert seen["cmd"][-2:] == ["prog", "fastest"]
    assert "ProverConfig.for_profile(profile)" in tb.CHILD


@pytest.mark.skipif(shutil.which("git") is None or not os.path.isdir(os.path.join(ROOT, ".git")),
                    reason="needs the git checkout")
def test_base_tree_is_the_commit_unpacked(tmp_path):
    tree = tb.base_tree("HEAD", str(tmp_path))
    head = subprocess.run(["git", "show", "HEAD:steadfast/__init__.py"], cwd=ROOT,
                          check=True, capture_output=True).stdout
    with open(os.path.join(tree, "steadfast", "__init__.py"), "rb") as fh:
        assert fh.read() == head
    assert os.path.isfile(os.path.join(tree, "guests", "bin", "sha256.elf"))


def test_rounds_below_one_are_refused(capsys):
    with pytest.raises(SystemExit) as e:
        tb.main(["--rounds", "0"])
    assert e.value.code == 2
    assert "--rounds must be at least 1" in capsys.readouterr().err
