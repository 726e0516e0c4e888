"""The rv32im guest programs (guests/): reproducible builds, sample inputs against Python
models, runs under qemu-riscv32 and under unicorn (guests/emu.py) with the machine's ECALL
ABI, and the bench guest's cycle formula.

Needs nothing beyond the venv for the unicorn and model tests; the build check needs
riscv64-unknown-elf-gcc and the qemu runs qemu-riscv32 (skipped with a reason when absent;
.ci/run installs both as root).  About 10-15 s in all on the 2-core development machine.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUESTS = os.path.join(ROOT, "guests")
INPUTS = os.path.join(GUESTS, "inputs")
NAMES = sorted(f[:-2] for f in os.listdir(GUESTS) if f.endswith(".c"))


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"guests_{name}",
                                                  os.path.join(GUESTS, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


emu = _load("emu")
models = _load("models")
MANIFEST = json.load(open(os.path.join(INPUTS, "cases.json")))
CASES = [(g, c) for g in sorted(MANIFEST) for c in sorted(MANIFEST[g])]


def _elf(guest: str) -> bytes:
    return open(os.path.join(GUESTS, "bin", guest + ".elf"), "rb").read()


def _case(guest: str, case: str) -> tuple[bytes, bytes]:
    base = os.path.join(INPUTS, guest, case)
    return open(base + ".in", "rb").read(), open(base + ".out", "rb").read()


def test_every_guest_has_elf_and_cases():
    assert NAMES == sorted(MANIFEST), "each guests/*.c needs sample inputs (make_inputs.py)"
    for g in NAMES:
        assert os.path.exists(os.path.join(GUESTS, "bin", g + ".elf")), g
    assert open(os.path.join(ROOT, "examples", "hello.elf"), "rb").read() == _elf("hello")
    data = open(os.path.join(ROOT, "examples", "hello.in"), "rb").read()
    res = emu.run(_elf("hello"), data)
    assert (res.stdout, res.exit_code) == models.hello_model(data) == \
        (b"hello from rv32im\nIt works!\n", 0)


@pytest.mark.parametrize("guest", NAMES)
def test_elf_shape(guest):
    """Static ELF32 EM_RISCV ET_EXEC, soft-float ABI, no compressed code, arch rv32im,
    entry inside a loaded executable segment, a few KB."""
    elf = _elf(guest)
    assert len(elf) < 16384
    assert elf[:6] == b"\x7fELF\x01\x01"
    e_type, e_machine, _v, entry, phoff, _sh, flags, _eh, phentsize, phnum = \
        struct.unpack_from("<HHIIIIIHHH", elf, 16)
    assert (e_type, e_machine) == (2, 243)
    assert flags & 0x1 == 0, "RVC code"            # EF_RISCV_RVC
    assert flags & 0x6 == 0, "hard-float ABI"      # EF_RISCV_FLOAT_ABI
    loads = [struct.unpack_from("<8I", elf, phoff + i * phentsize) for i in range(phnum)]
    loads = [p for p in loads if p[0] == 1]
    assert any(p[2] <= entry < p[2] + p[4] and p[6] & 1 for p in loads)
    assert all(p[2] % 4096 == 0 and p[4] <= p[5] for p in loads)
    # .riscv.attributes' Tag_RISCV_arch: the base ISA and M only (zmmul is M's multiply half)
    at = elf.index(b"rv32i2p")
    arch = elf[at:elf.index(b"\0", at)].decode()
    base, *exts = arch.split("_")
    assert base.startswith("rv32i2p") and {e[:e.index("p") - 1] for e in exts} <= {"m", "zmmul"}, arch


def test_poseidon2_model():
    """The models' Poseidon2 (written from the SPEC) is the project's: its known answer."""
    from tests.kat import KAT_IN, KAT_OUT
    assert models.poseidon2_permute(KAT_IN) == KAT_OUT
    assert emu.project_poseidon2(KAT_IN) == KAT_OUT[:8]


def test_inputs_match_models():
    """The committed .out files are what the Python models give (hashlib, sorted(), the
    transfer model, the project's Poseidon2), and the exit codes in cases.json too."""
    for guest, case in CASES:
        data, out = _case(guest, case)
        if guest in ("merkle", "bench"):
            want = getattr(models, guest + "_model")(data, emu.project_poseidon2)
        else:
            want = getattr(models, guest + "_model")(data)
        assert want == (out, MANIFEST[guest][case]["exit"]), (guest, case)


def test_bench_cycle_formula():
    """cases.json's measured bench cycles follow models.bench_cycles exactly, and
    bench_input hits its target from below with less than one iteration to spare."""
    for case, info in MANIFEST["bench"].items():
        data, _ = _case("bench", case)
        if info["exit"] == 0:
            hdr = struct.unpack("<7I", data)
            assert info["cycles"] == models.bench_cycles(*hdr[:5]), case
            assert info["poseidon2_calls"] == hdr[0] * hdr[4]
    for k in (12, 16, 20, 24):
        data, cycles = models.bench_input(1 << k)
        per = models.bench_cycles(1, 8, 4, 2, 1) - models.BENCH_BASE
        assert (1 << k) - per < cycles <= 1 << k


@pytest.mark.parametrize("guest", NAMES)
def test_unicorn(guest):
    """Every case (merkle and Poseidon2 bench cases included: SYS_POSEIDON2 emulated with
    the project's Poseidon2) gives the expected output, exit code and cycle count, with
    every load/store naturally aligned."""
    elf = _elf(guest)
    for case in sorted(MANIFEST[guest]):
        data, out = _case(guest, case)
        info = MANIFEST[guest][case]
        res = emu.run(elf, data, poseidon2=emu.project_poseidon2, check_alignment=True)
        assert (res.stdout, res.exit_code) == (out, info["exit"]), case
        assert (res.cycles, res.poseidon2_calls) == (info["cycles"], info["poseidon2_calls"]), case


def test_unicorn_rejects_abi_violations():
    """The harness itself catches what the machine rejects (so test_unicorn means something):
    a misaligned word load and an unknown ECALL."""
    # lui a0,0x10 ; lw a1,1(a0) ; ... as a raw ELF would be long: patch hello's entry instead
    elf = bytearray(_elf("hello"))
    entry = struct.unpack_from("<I", elf, 24)[0]
    off = entry - 0x10000                         # text segment maps file offset 0 at 0x10000
    struct.pack_into("<2I", elf, off, 0x00010537, 0x00152583)   # lui a0,0x10; lw a1,1(a0)
    with pytest.raises(emu.EmuError, match="misaligned"):
        emu.run(bytes(elf))
    struct.pack_into("<2I", elf, off, 0x07b00893, 0x00000073)   # li a7,123; ecall
    with pytest.raises(emu.EmuError, match="unknown ECALL"):
        emu.run(bytes(elf))


QEMU = shutil.which("qemu-riscv32")


@pytest.mark.skipif(QEMU is None, reason="qemu-riscv32 not installed (apt-get install qemu-user)")
@pytest.mark.parametrize("guest", NAMES)
def test_qemu(guest):
    """Under qemu-user (its own loader and stack; no SYS_POSEIDON2, so only the cases that
    make no Poseidon2 call): the expected output and exit code."""
    ran = 0
    for case in sorted(MANIFEST[guest]):
        info = MANIFEST[guest][case]
        if info["poseidon2_calls"]:
            continue
        data, out = _case(guest, case)
        p = subprocess.run([QEMU, os.path.join(GUESTS, "bin", guest + ".elf")], input=data,
                           capture_output=True, timeout=60)
        assert (p.stdout, p.returncode) == (out, info["exit"]), (case, p.stderr)
        ran += 1
    assert ran > 0


@pytest.mark.skipif(QEMU is None, reason="qemu-riscv32 not installed (apt-get install qemu-user)")
def test_qemu_precompile_is_enosys():
    """Under qemu SYS_POSEIDON2 is -ENOSYS, and the guests say so (exit 3), not a wrong root."""
    data, _ = _case("merkle", "n2")
    p = subprocess.run([QEMU, os.path.join(GUESTS, "bin", "merkle.elf")], input=data,
                       capture_output=True, timeout=60)
    assert (p.stdout, p.returncode) == (b"", 3)


@pytest.mark.skipif(shutil.which("riscv64-unknown-elf-gcc") is None,
                    reason="riscv64-unknown-elf-gcc not installed "
                           "(apt-get install gcc-riscv64-unknown-elf)")
def test_build_reproducible():
    """scripts/build_guests.sh --check: a fresh build is byte-identical to the committed ELFs."""
    p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "build_guests.sh"), "--check"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def _rv32_engines() -> list[str]:
    """The project machine's engines that can be imported here (rv32/ is being written
    alongside the guests: none yet means skip)."""
    try:
        from steadfast.rv32 import run as execution
    except Exception:
        return []
    engines = []
    for e in execution.ENGINES:
        mod = {"compiled": "fastexec", "python": "interp"}.get(e, e)
        try:
            if hasattr(importlib.import_module(f"steadfast.rv32.{mod}"), "run"):
                engines.append(e)
        except ImportError:
            pass
    return engines


@pytest.mark.parametrize("guest", NAMES)
def test_rv32_machine(guest):
    """The project's own machine (steadfast.rv32) agrees with the harness: same output,
    exit code and cycle count on every case, merkle's Poseidon2 included."""
    engines = _rv32_engines()
    if not engines:
        pytest.skip("steadfast.rv32 (the machine) is not importable here")
    from steadfast.rv32 import elf, run as execution
    prog = elf.parse_elf(_elf(guest))
    for engine in engines:
        for case in sorted(MANIFEST[guest]):
            data, out = _case(guest, case)
            info = MANIFEST[guest][case]
            res = execution.execute(prog, data, engine=engine)
            assert (res.output, res.exit_code, res.cycles) == \
                (out, info["exit"], info["cycles"]), (engine, case)
