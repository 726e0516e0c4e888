"""The on-disk kernel cache (kernels/kernel_cache.py): its key follows the AIR fingerprint
and the toolchain, a second process loads the generated kernels without generating them,
a corrupted or foreign entry is rebuilt (never trusted), ``0`` disables it, and numba's
compiled-kernel layer drops unreadable entries instead of crashing."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from steadfast.air import examples as ex
from steadfast.kernels import kernel_cache as kc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = textwrap.dedent("""
    import json
    from steadfast.kernels import constraint_device as cd, kernel_cache as kc
    from steadfast.air import examples as ex
    airs = [ex.fibonacci_air(), ex.adder_air()]
    gks = [cd.generated(a) for a in airs]
    print(json.dumps(dict(stats=kc.STATS, files=[g.filename for g in gks],
                          logup=[g.logup is not None for g in gks])))
""")


def _child(cache, sim=True):
    env = dict(os.environ, PYTHONPATH=ROOT, PROVER_KERNEL_CACHE=str(cache))
    if sim:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    proc = subprocess.run([sys.executable, "-c", _CHILD], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_root_switch(monkeypatch, tmp_path):
    monkeypatch.setenv(kc.ENV, "0")
    assert kc.cache_root() is None and kc.cache_dir() is None
    monkeypatch.setenv(kc.ENV, "off")
    assert kc.cache_root() is None
    monkeypatch.setenv(kc.ENV, str(tmp_path / "kc"))
    assert kc.cache_root() == tmp_path / "kc"
    d = kc.cache_dir()
    assert d.parent == tmp_path / "kc" and d.is_dir() and kc.toolchain_key() in d.name
    monkeypatch.delenv(kc.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kc.cache_root() == tmp_path / "xdg" / "steadfast" / "kernels"


def test_key_follows_toolchain_and_fingerprint():
    base = kc.toolchain()
    assert set(base) >= {"python", "numba", "numba-cuda", "generator", "sources"}
    k0 = kc.toolchain_key(base)
    assert kc.toolchain_key(dict(base)) == k0 == kc.toolchain_key()
    for field, value in (("numba-cuda", "0.0.1"), ("numba", "0.1"), ("generator", -1),
                         ("sources", "0" * 64), ("python", "2.7")):
        assert kc.toolchain_key(dict(base, **{field: value})) != k0, field
    fib, cub = ex.fibonacci_air(), ex.cubic_air()
    assert kc.fingerprint_name(fib.fingerprint()) == kc.fingerprint_name(ex.fibonacci_air().fingerprint())
    assert kc.fingerprint_name(fib.fingerprint()) != kc.fingerprint_name(cub.fingerprint())
    # two programs' images (the RV32 program table's preprocessed columns), two inputs and
    # outputs (the io table's): two fingerprints (two index entries) but one kernel (one
    # module file) each
    from steadfast.kernels import constraint_device as cd
    from steadfast.rv32.chips.io import build_io
    from steadfast.rv32.chips.program import build_program, image_of
    from tests.txblocks import program
    p1 = build_program(image_of(program("hello")), 2)
    p2 = build_program(image_of(program("merkle")), 2)
    i1, i2 = build_io(b"abc", b"x", 2), build_io(b"abcd", b"yz", 2)
    for a, b in ((p1, p2), (i1, i2)):
        assert kc.fingerprint_name(a.fingerprint()) != kc.fingerprint_name(b.fingerprint())
        assert cd._module_source(a) == cd._module_source(b)


@pytest.mark.timeout(600)
def test_second_process_loads_and_corrupt_entries_are_rebuilt(tmp_path):
    cache = tmp_path / "kc"
    first = _child(cache)
    assert first["stats"]["codegen"] == 2 and first["stats"]["gen_hit"] == 0
    files = first["files"]
    assert all(os.path.isfile(f) and f.startswith(str(cache)) for f in files)
    assert first["logup"] == [False, True]

    second = _child(cache)                          # warm: no code generation at all
    assert second["stats"]["gen_hit"] == 2 and second["stats"]["codegen"] == 0
    assert second["files"] == files

    # a flipped byte in a module body: the hash fails, the entry is generated again
    text = open(files[1]).read()
    i = text.index("def quotient_")
    with open(files[1], "w") as fh:
        fh.write(text[:i] + "#" + text[i + 1:])
    # a foreign index entry: the fibonacci fingerprint names a file that is not there
    idx = [p for p in (cache.glob("*/gen/fp-*.txt"))]
    assert len(idx) == 2
    fib_idx = [p for p in idx if open(p).read().startswith("fibonacci")][0]
    fib_idx.write_text("../../../etc/passwd.py\n")
    third = _child(cache)
    assert third["stats"]["gen_rebuilt"] == 2 and third["stats"]["codegen"] == 2
    assert third["stats"]["gen_hit"] == 0
    assert open(files[1]).read() == text            # repaired, byte for byte
    fourth = _child(cache)
    assert fourth["stats"]["gen_hit"] == 2 and fourth["stats"]["codegen"] == 0


def test_disabled_cache_writes_nothing(tmp_path):
    got = _child("0")
    assert got["stats"]["codegen"] == 2 and got["stats"]["gen_hit"] == 0
    assert all(f.startswith("<steadfast-air:") for f in got["files"])


_NUMBA_CHILD = textwrap.dedent("""
    import json, os, sys, types
    from steadfast.kernels import kernel_cache as kc
    sys.path.insert(0, sys.argv[1])
    import victim                                   # a kernel function in a real file
    cache = kc.numba_cache(victim.k)
    assert type(cache).__name__ == "KernelCache", cache
    ctx = types.SimpleNamespace(refresh=lambda: None, codegen=lambda: types.SimpleNamespace(
        magic_tuple=lambda: (13, (9, 0))))
    sig = "void(int64)"
    assert cache.load_overload(sig, ctx) is None       # empty
    key = cache._index_key(sig, ctx.codegen())
    cache._cache_file.save(key, {"not": "a kernel"})   # a foreign entry: rebuild fails
    r1 = cache.load_overload(sig, ctx)
    idx = cache._cache_file._index_path
    open(idx, "wb").write(b"garbage")                  # a torn index: unpickling fails
    r2 = cache.load_overload(sig, ctx)
    cache._cache_file.save(key, {"x": 1})              # the index works again
    print(json.dumps(dict(r1=r1, r2=r2, dropped=kc.STATS["numba_dropped"],
                          path=cache.cache_path)))
""")


@pytest.mark.timeout(300)
def test_numba_layer_drops_unreadable_entries(tmp_path):
    mod = tmp_path / "m"
    mod.mkdir()
    (mod / "victim.py").write_text("def k(x):\n    pass\n")
    env = dict(os.environ, PYTHONPATH=ROOT, PROVER_KERNEL_CACHE=str(tmp_path / "kc"))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, "-c", _NUMBA_CHILD, str(mod)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["r1"] is None and got["r2"] is None and got["dropped"] == 2
    assert got["path"].startswith(str(tmp_path / "kc")) and got["path"].endswith("numba")


@pytest.mark.timeout(600)
def test_prove_precompile_cli_and_api(tmp_path, monkeypatch, capsys):
    """prove BLOCK.json --backend sim --precompile on a block of one RISC-V transaction
    generates every table's source through the cache (the transaction's 16 tables in its
    bus namespace, BYTES, POSEIDON2 and its device-quotient parts); the library's
    precompile_txblock then finds them all in memory; host and emu have nothing to do."""
    from steadfast.prover.api import Prover, ProverConfig
    from steadfast.prover.cli import main_prove
    from steadfast.rv32.block import TX_TABLES
    from steadfast.kernels import constraint_codegen
    from tests.txblocks import block_json, one_tx_block
    monkeypatch.setenv(kc.ENV, str(tmp_path / "kc"))
    # as in a fresh process: this process's own layer of generated kernels starts empty
    # (an earlier test -- test_stage_device.py's POSEIDON2 -- would otherwise have left
    # its sources there, found as "cache" instead of generated)
    monkeypatch.setattr(constraint_codegen, "_BY_FP", {})
    monkeypatch.setattr(constraint_codegen, "_BY_SRC", {})
    block = tmp_path / "block.json"
    block.write_text(json.dumps(block_json(one_tx_block())))
    code = main_prove([str(block), "--backend", "sim", "--precompile"])
    out = capsys.readouterr().out
    assert code == 0, out
    # 16 + 2 tables' sources, plus POSEIDON2's device-quotient parts (one slot's kernel
    # and the LogUp constraints' own: rv32/chips/poseidon2.py, device_split)
    n = len(TX_TABLES) + 4
    assert "precompiling for backend sim" in out and f"precompiled {n} steps ({n} generated)" in out
    for table in [f"tx0/rv32_{t}" for t in TX_TABLES] + ["rv32_bytes", "poseidon2",
                                                         "poseidon2_slot", "poseidon2_logup"]:
        assert f"source {table} " in out, table
    assert f"kernel cache {tmp_path / 'kc'}" in out
    rows = Prover(ProverConfig(backend="sim")).precompile_txblock(one_tx_block())
    assert len(rows) == n and all(r["how"] != "generated" for r in rows), rows
    assert Prover(ProverConfig(backend="host")).precompile_txblock(one_tx_block()) == []
    assert Prover(ProverConfig(backend="emu")).precompile_txblock(one_tx_block()) == []
