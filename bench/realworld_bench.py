"""Real-world guests proved end to end (issue #37 item 4; docs/benchmarks.md "Real-world
guests"): pycryptodome's Keccak-256, libsecp256k1's ECDSA verification and public-key
recovery and the Lua 5.4 interpreter (guests/realworld/, built from their sdists by
scripts/build_realworld.sh), beside the project's own guests/bin/sha256.elf.

    .venv/bin/python bench/realworld_bench.py                      # every case (~10 min here)
    .venv/bin/python bench/realworld_bench.py --quick              # the smallest of each
    .venv/bin/python bench/realworld_bench.py keccak lua-strings   # a subset (see --list)
    .venv/bin/python bench/realworld_bench.py --elf-dir DIR        # prebuilt ELFs, no build

Each case is proven with the library API (``Prover(ProverConfig()).prove_program(elf,
input, max_cycles=2^24, segment_cycles=2^20)``: default parameters, 110 bits; a run
longer than 2^20 cycles becomes a SegmentedProof of 2^20-cycle segments) in its own
process, which first proves a small program untimed (numba's kernels loaded outside the
figures; ``--no-warmup`` skips it), then verifies the proof's bytes with
``verify_program`` (min_security_bits 100).  Per case: cycles, segments, prove seconds
(the whole prove_program call: execution, traces, proof, self-check), cycles/s, the
process's peak RSS, proof bytes, verify seconds; the proven exit code and output are
checked (against execute(), hashlib, the recorded Lua outputs, the ECDSA status bytes).

Derived figures, from execution alone (cheap; always printed for the ELFs at hand): cycles
per Keccak-f[1600] block (136-byte rate: the difference of two input lengths), per ECDSA
verification (one record minus the empty input) and per public-key recovery (the record
with and without recovery), and sha256.elf's cycles per 64-byte block.

Without the RISC-V compiler and picolibc, or offline (no sdists), the real-world cases are
skipped with the reason (the build script's exit status 2 / 3); sha256.elf still runs.
The load average is printed before and after (and recorded per case).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "scripts" / "build_realworld.sh"
LUA_DIR = ROOT / "guests" / "realworld" / "lua"
SHA256_ELF = ROOT / "guests" / "bin" / "sha256.elf"
MAX_CYCLES = 1 << 24
RATE = 136                                  # Keccak-256's rate in bytes

# One ECDSA record (guests/realworld/secp256k1_verify.c): msg32 || sig64 || recid ||
# pubkey33 -- tests/test_guests_realworld.py's first record (a lower-S signature of
# sha256(b"pay 10 to bob") by the key sha256(b"steadfast key")).  A recid of 4 makes the
# driver skip the recovery (verification only).
ECDSA_RECORD = bytes.fromhex(
    "ba0f0e7d12ea2024701f9dfbceb6b3e617c8c67fdcf80b8021fa345fc344d0eb"
    "98fb19018e48edf9ffe69129cfedeabd0d331967070a70778afa8870a4e3aa0a"
    "254b91a3b8ad7dab2c4d226c7a05e79c18a53c803a676f0c247d5012f5d963c6"
    "01" "02ff89109120b0e926c112f4d87660533309bea94295dde1dde6d1f9c243b86a42")
ECDSA_VERIFY_ONLY = ECDSA_RECORD[:96] + b"\x04" + ECDSA_RECORD[97:]


def pattern(n: int) -> bytes:
    return (bytes(range(256)) * (n // 256 + 1))[:n]


def keccak_input(blocks: int) -> bytes:
    """136 * blocks - 1 bytes: exactly ``blocks`` Keccak-f calls (the padding fits in the
    last block)."""
    return pattern(RATE * blocks - 1)


# name -> (ELF file name, input, what, quick); the ELF "sha256.elf" is guests/bin's
CASES = {
    "keccak-2^18": ("keccak256.elf", lambda: keccak_input(7), "7 blocks (951 B)", True),
    "keccak-2^20": ("keccak256.elf", lambda: keccak_input(32), "32 blocks (4,351 B)", False),
    "ecdsa-verify": ("secp256k1_verify.elf", lambda: ECDSA_VERIFY_ONLY,
                     "1 verification", False),
    "ecdsa-recover": ("secp256k1_verify.elf", lambda: ECDSA_RECORD,
                      "1 verification + recovery", False),
    "lua-error": ("lua_run.elf", lambda: (LUA_DIR / "error.lua").read_bytes(), "error.lua",
                  True),
    "lua-strings": ("lua_run.elf", lambda: (LUA_DIR / "strings.lua").read_bytes(),
                    "strings.lua", False),
    "lua-tables": ("lua_run.elf", lambda: (LUA_DIR / "tables.lua").read_bytes(),
                   "tables.lua", False),
    "sha256-2^18": ("sha256.elf", lambda: pattern(3072), "3,072 B", True),
    "sha256-2^20": ("sha256.elf", lambda: pattern(12288), "12,288 B", False),
}
PROGRAM = {"keccak256.elf": "Keccak-256 (pycryptodome)",
           "secp256k1_verify.elf": "ECDSA secp256k1 (libsecp256k1)",
           "lua_run.elf": "Lua 5.4 (lupa's copy)",
           "sha256.elf": "SHA-256 (guests/bin, ours)"}
BUILD_NAME = {"keccak256.elf": "keccak", "secp256k1_verify.elf": "secp256k1",
              "lua_run.elf": "lua"}


def select(names: list[str], quick: bool) -> list[str]:
    if not names:
        return [c for c, v in CASES.items() if v[3] or not quick]
    out = []
    for n in names:
        hit = [c for c in CASES if c == n or c.startswith(n + "-")]
        if not hit:
            raise SystemExit(f"no case {n!r}: one of {', '.join(CASES)} or a prefix "
                             f"(keccak, ecdsa, lua, sha256)")
        out += [c for c in hit if c not in out and (c == n or not quick or CASES[c][3])]
    return out


def elf_path(elf_dir: Path | None, elf: str) -> Path:
    return SHA256_ELF if elf == "sha256.elf" else Path(elf_dir) / elf


def check(case: str, data: bytes, exit_code: int, output: bytes, want) -> None:
    """The proven exit code and output against the case's reference."""
    elf = CASES[case][0]
    if elf == "sha256.elf":
        ok = (exit_code, output) == (0, hashlib.sha256(data).digest())
    elif elf == "secp256k1_verify.elf":
        rec = ECDSA_RECORD[97:]
        ok = (exit_code, output) == ((1, b"\x01" + bytes(33)) if data[96] == 4 else
                                     (0, b"\x03" + rec))
    elif elf == "lua_run.elf":
        name = CASES[case][2].removesuffix(".lua")
        ok = output == (LUA_DIR / f"{name}.out").read_bytes()
    else:
        ok = True
    ok = ok and (exit_code, output) == want            # and the plain execution's
    if not ok:
        raise SystemExit(f"{case}: proven exit code {exit_code} / output {output[:40]!r} "
                         f"is not the expected one")


def one(case: str, elf_dir: Path | None, log_segment: int, warmup: bool) -> dict:
    """Prove and verify one case in this process -> its figures."""
    from steadfast import rv32
    from steadfast.prover.api import Prover, ProverConfig
    from steadfast.prover.programs.verify import verify_program
    elf, make, what, _ = CASES[case]
    program = rv32.load_elf(elf_path(elf_dir, elf))
    data = make()
    ex = rv32.execute(program, data, max_cycles=MAX_CYCLES)
    prover = Prover(ProverConfig())
    seg = 1 << log_segment
    if warmup:              # load the compiled kernels (numba's cache) outside the figures
        small = rv32.load_elf(SHA256_ELF)
        prover.prove_program(small, b"", max_cycles=1 << 16)
        if ex.cycles > seg:                  # and the segment tables' (two 2^12 segments)
            prover.prove_program(small, bytes(64), max_cycles=1 << 16, segment_cycles=1 << 12)
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    proof = prover.prove_program(program, data, max_cycles=MAX_CYCLES, segment_cycles=seg)
    prove_s = time.perf_counter() - t
    blob = proof.to_bytes()
    t = time.perf_counter()
    res = verify_program(blob, program, data)
    verify_s = time.perf_counter() - t
    check(case, data, res.exit_code, res.output, (ex.exit_code, ex.output))
    segments = len(proof.segments) if hasattr(proof, "segments") else 1
    return {"case": case, "program": PROGRAM[elf], "elf": elf, "input": what,
            "input_bytes": len(data), "cycles": ex.cycles, "segments": segments,
            "segment_cycles": seg if segments > 1 else None, "exit_code": res.exit_code,
            "output_bytes": len(res.output), "prove_s": round(prove_s, 2),
            "cycles_per_s": round(ex.cycles / prove_s),
            "phases": {k: round(v, 2) for k, v in (proof.stats.phases or {}).items()}
            if proof.stats else {},
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "proof_bytes": len(blob), "verify_s": round(verify_s, 3),
            "security_bits": res.security_bits,
            "load_avg": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def derived(elf_dir: Path | None) -> dict:
    """Cycle figures from execution alone (seconds for all of them)."""
    from steadfast import rv32

    def cycles(elf, data):
        return rv32.execute(rv32.load_elf(elf_path(elf_dir, elf)), data,
                            max_cycles=MAX_CYCLES).cycles
    d = {}
    if elf_dir is not None and (Path(elf_dir) / "keccak256.elf").exists():
        c7, c32 = cycles("keccak256.elf", keccak_input(7)), cycles("keccak256.elf",
                                                                    keccak_input(32))
        d["keccak_cycles_per_block"] = round((c32 - c7) / 25, 1)
        d["keccak_cycles_empty_input"] = cycles("keccak256.elf", b"")
    if elf_dir is not None and (Path(elf_dir) / "secp256k1_verify.elf").exists():
        c0 = cycles("secp256k1_verify.elf", b"")
        cv = cycles("secp256k1_verify.elf", ECDSA_VERIFY_ONLY)
        cr = cycles("secp256k1_verify.elf", ECDSA_RECORD)
        d["ecdsa_cycles_per_verification"] = cv - c0
        d["ecdsa_cycles_per_recovery"] = cr - cv
        d["ecdsa_cycles_startup"] = c0
    if elf_dir is not None and (Path(elf_dir) / "lua_run.elf").exists():
        d["lua_cycles_empty_script"] = cycles("lua_run.elf", b"")
    s1, s2 = cycles("sha256.elf", pattern(3072)), cycles("sha256.elf", pattern(12288))
    d["sha256_cycles_per_block"] = round((s2 - s1) / ((12288 - 3072) // 64), 1)
    return d


def build(elfs: set[str], elf_dir: str | None) -> tuple[Path | None, str | None]:
    """(the ELF directory, None) or (None, why the real-world cases are skipped)."""
    if elf_dir is not None:
        missing = [e for e in sorted(elfs) if not (Path(elf_dir) / e).is_file()]
        if missing:
            return None, f"--elf-dir {elf_dir}: no {', '.join(missing)}"
        return Path(elf_dir), None
    names = sorted(BUILD_NAME[e] for e in elfs)
    env = {**os.environ, "PYTHON": sys.executable}
    p = subprocess.run(["bash", str(BUILD), *names], capture_output=True, text=True, env=env)
    lines = p.stderr.strip().splitlines()
    own = [ln for ln in lines if ln.startswith(("build_realworld.sh:", "rv32-cc:"))]
    tail = (own or lines or [""])[-1][-400:]
    if p.returncode == 2:
        return None, ("the RISC-V compiler or picolibc is missing (apt-get install "
                      "gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf; or --elf-dir "
                      "with prebuilt ELFs): " + tail)
    if p.returncode == 3:
        return None, "the sdists could not be fetched (offline?): " + tail
    if p.returncode:
        return None, f"scripts/build_realworld.sh failed ({p.returncode}): {tail}"
    cache = subprocess.run(["bash", str(BUILD), "--print-cache"], capture_output=True,
                           text=True, env=env, check=True).stdout.strip()
    return Path(cache) / "elf", None


def mib(r: dict) -> str:
    return f"{r['peak_rss_mib']:,} MiB"


def table(rows: list[dict]) -> str:
    out = ["| program | input | cycles | segments | prove | cycles/s | peak RSS | proof | verify |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        seg = f"{r['segments']} × 2^{r['segment_cycles'].bit_length() - 1}" \
            if r["segments"] > 1 else "1"
        out.append(f"| {r['program']} | {r['input']} | {r['cycles']:,} | {seg} | "
                   f"{r['prove_s']:.2f} s | {r['cycles_per_s']:,} | {mib(r)} | "
                   f"{r['proof_bytes']:,} B | {r['verify_s']:.3f} s |")
    return "\n".join(out)


def show_derived(d: dict) -> str:
    names = {"keccak_cycles_per_block": "cycles per Keccak-f block (136-byte rate)",
             "keccak_cycles_empty_input": "Keccak-256 of the empty input (1 block + start)",
             "ecdsa_cycles_per_verification": "cycles per ECDSA verification (secp256k1)",
             "ecdsa_cycles_per_recovery": "cycles per ECDSA public-key recovery",
             "ecdsa_cycles_startup": "secp256k1 start-up (context creation)",
             "lua_cycles_empty_script": "Lua 5.4 empty script (state, standard libraries)",
             "sha256_cycles_per_block": "sha256.elf cycles per 64-byte block"}
    return "\n".join(f"* {names[k]}: {v:,}" for k, v in d.items())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="*", help="cases or prefixes (keccak, ecdsa, lua, sha256; "
                                             "default: all, see --list)")
    ap.add_argument("--quick", action="store_true",
                    help="only the smallest case of each program (~2^18 cycles)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--elf-dir", help="take keccak256.elf, secp256k1_verify.elf, lua_run.elf "
                                      "from DIR instead of building them")
    ap.add_argument("--segment", type=int, default=20,
                    help="log2 segment cycles for runs longer than one (default 20)")
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--json", action="store_true", help="one JSON object per case")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.list:
        for c, (elf, _, what, quick) in CASES.items():
            print(f"{c:<14} {PROGRAM[elf]:<32} {what}{'  (--quick)' if quick else ''}")
        return 0
    if a.one:
        print(json.dumps(one(a.one, a.elf_dir, a.segment, not a.no_warmup)))
        return 0
    cases = select(a.cases, a.quick)
    load_start = os.getloadavg()
    print(f"load average {' '.join(f'{x:.2f}' for x in load_start)} (1/5/15 min) at the "
          f"start; {os.cpu_count()} CPUs", flush=True)
    third = {CASES[c][0] for c in cases} - {"sha256.elf"}
    elf_dir, why = (None, None)
    if third or a.elf_dir:
        elf_dir, why = build(third or set(BUILD_NAME), a.elf_dir)
    if why:
        print(f"SKIPPED the real-world cases: {why}", flush=True)
        cases = [c for c in cases if CASES[c][0] == "sha256.elf"]
    rows = []
    for c in cases:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--one", c, "--segment",
               str(a.segment)] + (["--elf-dir", str(elf_dir)] if elf_dir else []) + \
              (["--no-warmup"] if a.no_warmup else [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            sys.stderr.write(p.stderr)
            print(f"{c}: FAILED (exit {p.returncode})", flush=True)
            return p.returncode
        r = json.loads(p.stdout.strip().splitlines()[-1])
        rows.append(r)
        print(json.dumps(r) if a.json else
              f"{c}: {r['cycles']:,} cycles, {r['segments']} segment(s), prove "
              f"{r['prove_s']:.2f} s = {r['cycles_per_s']:,} cycles/s, peak RSS {mib(r)}, "
              f"proof {r['proof_bytes']:,} B, verify {r['verify_s']:.3f} s "
              f"({r['security_bits']} bits; load {r['load_avg'][0]:.2f} -> "
              f"{r['load_avg'][1]:.2f})", flush=True)
    d = derived(elf_dir)
    if a.json:
        print(json.dumps({"derived": d}))
    load_end = os.getloadavg()
    print()
    if rows:
        print(table(rows))
        print()
    print(show_derived(d))
    if why:
        print(f"\nSKIPPED the real-world cases: {why}")
    print(f"\nload average {' '.join(f'{x:.2f}' for x in load_start)} at the start, "
          f"{' '.join(f'{x:.2f}' for x in load_end)} at the end (1/5/15 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
