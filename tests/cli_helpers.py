"""Shared by the command-line tests (tests/test_cli_*.py, split out of tests/test_cli.py):
the paths, the weak parameters (FAST: 8 queries; ANY: verify with --min-security-bits 0
where the point is not the default's refusal), writing a block, running ``prove`` /
``verify`` in-process (never a traceback), the example block copied with its files, a
block with a false claim."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from steadfast.prover.cli.display import ROUNDS
from steadfast.rv32 import block as rblock

from tests.txblocks import one_tx_block

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "block.json")   # examples/block.json after #24's rename
FAST = ["--queries", "8", "--pow-bits", "2", "--backend", "host"]
ANY = ["--min-security-bits", "0"]
EMPTY_ROUNDS = rblock.num_tables(0) * len(ROUNDS)          # 2 shared tables x 8 rounds


def write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(p)


def run(main, argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def copy_example(dest: Path) -> str:
    """EXAMPLE and every ELF / input file it names, copied into ``dest``."""
    obj = json.loads(Path(EXAMPLE).read_text())
    for e in obj.get("programs", []) + obj["transactions"]:
        for field in ("elf", "input_file"):
            if field in e:
                shutil.copy(Path(EXAMPLE).parent / e[field], dest / e[field])
    shutil.copy(EXAMPLE, dest / "block.json")
    return str(dest / "block.json")


def _false_claims(tmp_path):
    obj = one_tx_block().to_json()
    obj["transactions"][0]["exit_code"] = 6
    return write(tmp_path, "false.json", obj)
