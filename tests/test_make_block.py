"""bench/make_block.py: version-2 blocks of about 2^k RISC-V cycles with a chosen share of
Poseidon2 precompile work.

The cycles are measured by ``Prover().execute(path)`` (TxBlockReport.cycles), the hash
share from every transaction's execution record (7 cycles per SYS_POSEIDON2 call: bench.c's
Poseidon2 unit, bench/make_block.py's definition).  Small k only (execute, no proof)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from steadfast.prover.api import Prover
from steadfast.rv32.blockfile import load_block
from steadfast.rv32.run import execute

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "make_block.py"
SYS_POSEIDON2 = 0x53460001


def _make(tmp_path, *args) -> tuple[Path, str]:
    out = tmp_path / ("b" + "_".join(a.strip("-") for a in args) + ".json")
    proc = subprocess.run([sys.executable, str(SCRIPT), *args, "-o", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stderr


def _share(path: Path) -> float:
    blk = load_block(path)
    cycles = calls = 0
    for tx in blk.transactions:
        ex = execute(tx.program, tx.input, blk.max_cycles, record=True)
        cycles += ex.cycles
        calls += int((ex.record.ecall_args[:, 0] == SYS_POSEIDON2).sum())
    return 7 * calls / cycles


@pytest.mark.parametrize("k,share,seed", [(12, 0.25, 1), (13, 0.25, 4), (14, 0.5, 3),
                                          (13, 0.0, 2)])
def test_v2_block_hits_its_cycles_and_hash_share(tmp_path, k, share, seed):
    path, log = _make(tmp_path, "-k", str(k), "--hash-share", str(share), "--seed", str(seed))
    obj = json.loads(path.read_text())
    assert obj["version"] == 2 and obj["max_cycles"] == 1 << k
    assert all("elf_base64" in p for p in obj["programs"])          # self-contained
    names = [t["program"] for t in obj["transactions"]]
    assert names.count("bench") == 1 and "hello" in names and 3 <= len(names) <= 4
    assert len(set(names)) == len(names)                              # several programs
    rep = Prover().execute(path)
    assert rep.claims_ok                                              # claims filled in
    assert 0.97 * (1 << k) <= rep.cycles <= 1 << k, rep.cycles
    assert f"{rep.cycles:,} cycles" in log
    measured = _share(path)
    assert abs(measured - share) <= 0.03, measured
    if share == 0:
        assert measured == 0 and "merkle" not in names


def test_v2_block_is_a_function_of_its_seed(tmp_path):
    sys.path.insert(0, str(ROOT))
    from bench.make_block import v2_block
    a, info = v2_block(12, 0.25, seed=7)
    assert v2_block(12, 0.25, seed=7)[0] == a
    assert v2_block(12, 0.25, seed=8)[0] != a
    assert info["cycles"] == sum(t["cycles"] for t in info["transactions"])
    with pytest.raises(ValueError, match="hash share"):
        v2_block(12, 0.95)
    with pytest.raises(ValueError, match="k must be"):
        v2_block(30, 0.25)
