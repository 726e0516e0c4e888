"""Cluster mode (prover/cluster/__init__.py) for blocks of RISC-V transactions (block format 2), on
a local Ray instance: two blocks across two workers (whole-block mode) and one block's
tables sharded over them, each byte-identical to Prover.prove_block on one machine, with
the same state_out; ``prove --cluster BLOCK.json`` from the command line.

WEAK PARAMETERS: 6 queries (CFG), verified with min_security_bits=0 -- these tests check
byte identity and plumbing, not security."""
import json
import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from steadfast.prover.api import Prover, ProverConfig, verify  # noqa: E402
from steadfast.prover.cluster import ClusterProver  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HELLO = ROOT / "examples" / "hello.elf"
SORT = ROOT / "guests" / "bin" / "sort.elf"
SORT_IN = ROOT / "guests" / "inputs" / "sort" / "reversed.in"
CFG = ProverConfig(backend="host", num_queries=6, pow_bits=1)


def _blocks(tmp: Path) -> list:
    a = {"format": "steadfast-block", "version": 2, "max_cycles": 1 << 16,
         "programs": [{"name": "hello", "elf": str(HELLO)}],
         "transactions": [{"program": "hello", "input": b"cluster".hex()},
                          {"elf": str(SORT), "input_file": str(SORT_IN), "exit_code": 0}]}
    b = {"format": "steadfast-block", "version": 2, "max_cycles": 1 << 16,
         "state_in": "11" * 32,
         "transactions": [{"elf": str(HELLO), "input_base64": "YQ=="}]}
    paths = []
    for name, obj in (("a.json", a), ("b.json", b)):
        (tmp / name).write_text(json.dumps(obj))
        paths.append(tmp / name)
    return paths


@pytest.fixture(scope="module")
def ray_cpus():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False,
             object_store_memory=256 << 20)
    yield
    ray.shutdown()


@pytest.mark.timeout(900)
def test_txblocks_whole_and_sharded(ray_cpus, tmp_path):
    paths = _blocks(tmp_path)
    p = Prover(CFG)
    ref = [p.prove_block(path) for path in paths]
    with ClusterProver(config=CFG, workers=2) as cp:
        got = dict(cp.prove_many(paths))
        for i, r in enumerate(ref):
            assert got[i].to_bytes() == r.to_bytes()
            assert got[i].state_out == r.state_out and got[i].state_out is not None
            assert got[i].stats.counters["cluster"]["mode"] == "blocks"
        sharded = cp.prove_sharded(paths[0])
        assert sharded.to_bytes() == ref[0].to_bytes()
        assert sharded.state_out == ref[0].state_out
        assert sharded.stats.counters["cluster"]["mode"] == "sharded"
    res = verify(sharded.to_bytes(), block=paths[0], min_security_bits=0)
    assert res.state_out == ref[0].state_out and res.exit_codes == [0, 0]


@pytest.mark.timeout(600)
def test_cli_cluster_txblock(ray_cpus, tmp_path, capsys):
    """``prove --cluster BLOCK.json`` (whole) and ``--shard-tables`` write the one-machine
    bytes of a version-2 block (its relative paths taken from its folder); a malformed one
    is exit 2 with its JSON path."""
    from steadfast.prover.cli import main_prove
    (tmp_path / "hello.elf").write_bytes(HELLO.read_bytes())
    blk = {"format": "steadfast-block", "version": 2, "max_cycles": 1 << 16,
           "transactions": [{"elf": "hello.elf", "input": "6869"}]}
    path = tmp_path / "blk.json"
    path.write_text(json.dumps(blk))
    ref = Prover(CFG).prove_block(path).to_bytes()
    weak = ["--queries", "6", "--pow-bits", "1", "--backend", "host", "--workers", "2"]
    assert main_prove(["--cluster", str(path), *weak]) == 0
    assert (tmp_path / "blk.proof").read_bytes() == ref
    out = tmp_path / "s.proof"
    assert main_prove(["--cluster", str(path), "--shard-tables", "-o", str(out), *weak]) == 0
    assert out.read_bytes() == ref
    blk["transactions"][0]["input"] = "zz"
    path.write_text(json.dumps(blk))
    capsys.readouterr()
    assert main_prove(["--cluster", str(path), *weak]) == 2
    assert "$.transactions[0].input" in capsys.readouterr().err


@pytest.mark.timeout(600)
def test_cli_cluster_takes_prove_s_proof_options(ray_cpus, tmp_path, capsys):
    """The proof options reach the workers: ``prove --cluster`` with --fri-arity,
    --cap-height and --log-blowup writes the bytes ``prove`` writes on one machine with the
    same options -- a block whole and with its tables sharded, a program; what cluster
    mode does not take is exit 2, naming the option."""
    from steadfast.prover.cli import main_prove
    (tmp_path / "hello.elf").write_bytes(HELLO.read_bytes())
    blk = {"format": "steadfast-block", "version": 2, "max_cycles": 1 << 16,
           "transactions": [{"elf": "hello.elf", "input": "6869"}]}
    path = tmp_path / "blk.json"
    path.write_text(json.dumps(blk))
    opts = ["--queries", "6", "--pow-bits", "1", "--backend", "host", "--fri-arity", "4",
            "--cap-height", "2", "--log-blowup", "3", "-q"]
    for src in (path, tmp_path / "hello.elf"):
        one = tmp_path / f"{src.stem}.one"
        assert main_prove([str(src), "-o", str(one), *opts]) == 0
        ref = one.read_bytes()
        default = tmp_path / f"{src.stem}.default"
        assert main_prove([str(src), "-o", str(default), *opts[:6], "-q"]) == 0
        assert default.read_bytes() != ref            # the options change the bytes
        for mode in ([], ["--shard-tables"]):
            out = tmp_path / f"{src.stem}{len(mode)}.proof"
            assert main_prove(["--cluster", str(src), "-o", str(out), "--workers", "2",
                               *mode, *opts]) == 0
            assert out.read_bytes() == ref, (src.name, mode)
    capsys.readouterr()
    for extra, named in ((["--json"], "--json"), (["--stats-json", str(tmp_path / "s")],
                                                  "--stats-json"),
                         (["--shard-tables", "--segment-cycles", "1024"], "--segment-cycles"),
                         (["--execute-only"], "--execute-only")):
        assert main_prove(["--cluster", str(path), *extra, *opts]) == 2
        assert named in capsys.readouterr().err
    assert main_prove(["--cluster", str(path), "--cap-height", "9", "-q"]) == 2
    assert "--cap-height must be in [0, 8], got 9" in capsys.readouterr().err


@pytest.mark.timeout(600)
def test_split_txblock_sharded(ray_cpus, monkeypatch):
    """A block whose transactions split their chips (docs/rv32.md "Split chips"; the
    thresholds lowered in this process, where the sharded proof builds the tables) proves
    sharded over the workers -- the pieces' AIRs rebuilt there from the spec, each in its
    transaction's bus namespace -- in the one-machine bytes, and verifies."""
    from steadfast.rv32 import block as rblock
    from steadfast.rv32 import tables as T
    from steadfast.rv32.blockfile import parse_block
    monkeypatch.setattr(T, "SPLIT_MIN_ROWS", 16)
    monkeypatch.setattr(T, "SPLIT_MIN_SAVING", 0)
    data = bytes(range(256)) * 2
    blk = parse_block({"format": "steadfast-block", "version": 2, "max_cycles": 1 << 20,
                       "transactions": [{"elf": "examples/hello.elf", "input": "6869"},
                                        {"elf": "guests/bin/sha256.elf",
                                         "input": data.hex()}]}, ROOT)
    ref = Prover(CFG).prove_block(blk)
    from steadfast.prover.engine.air_proof import decode_proof
    assert rblock.pieces_of(decode_proof(ref.proof), 2)
    with ClusterProver(config=CFG, workers=2) as cp:
        sharded = cp.prove_sharded(blk)
    assert sharded.to_bytes() == ref.to_bytes()
    res = verify(sharded.to_bytes(), block=blk, min_security_bits=0)
    assert res.exit_codes == [0, 0]
