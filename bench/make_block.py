"""Write a valid block of about 2^k RISC-V cycles with a chosen share of Poseidon2 work.

    .venv/bin/python bench/make_block.py -k 18 --seed 1 --hash-share 0.25 -o /tmp/b18.json

The block (rv32/blockfile.py, docs/block-format.md): one large
transaction of the ``bench`` guest (guests/bench.c, guests/bin/bench.elf; its input from
``guests.models.bench_input``'s formula) and 2-3 small ones: 1-2 guests drawn by the seed
from ``sha256``, ``sort``, ``transfer`` and ``merkle`` (``merkle`` only when the hash share
is above 0; a guest whose smallest run does not fit its budget of 2^k / 16 cycles is not
drawn: at k = 10 none fits), each sized to about its budget with seeded random input, and a
``hello`` whose input length fills the block up to 2^k cycles (hello costs ~4.5 cycles a
byte, so the total lands within a few cycles of 2^k, never above). The transactions' order
is drawn by the seed too. The ELFs are inline (``programs[].elf_base64``: the committed
guests/bin files), inputs in hex, and every transaction's ``output`` and ``exit_code``
claims are filled in by running it once; ``max_cycles`` is 2^k.

Hash share.  A Poseidon2 precompile call costs 7 cycles in bench.c's Poseidon2 unit (the
``SYS_POSEIDON2`` ECALL, the 4 instructions that address its buffers and flip the phase,
the loop's 2); the block's hash share is 7 x (SYS_POSEIDON2 calls) / cycles, every
transaction's calls counted from its execution record.  The bench transaction's
per-iteration mix is (8 s ALU, 4 s memory, 2 s mul/div, p Poseidon2) units (``models``'
default mix scaled by s), s and p picked to bring the block's share closest to
``--hash-share``.  The summary on stderr gives the measured cycles and both shares (7 a
call, and the ECALL cycles alone).

``--seed`` defaults to 1.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
GUESTS = os.path.join(ROOT, "guests")
BIN = os.path.join(GUESTS, "bin")

SYS_POSEIDON2 = 0x53460001
P2_UNIT = 7                         # cycles of bench.c's Poseidon2 unit (one call)
SMALL = ("sha256", "sort", "transfer", "merkle")
K_RANGE = (10, 23)
MAX_HASH_SHARE = 0.85


def _models():
    if GUESTS not in sys.path:
        sys.path.insert(0, GUESTS)
    import models
    return models


def _program(name: str):
    from steadfast import rv32
    return rv32.load_elf(os.path.join(BIN, f"{name}.elf"))


def run(name: str, data: bytes, max_cycles: int = 1 << 24) -> dict:
    """Run guest ``name`` on ``data`` -> cycles, exit code, output, SYS_POSEIDON2 calls."""
    from steadfast.rv32.run import execute
    ex = execute(_program(name), data, max_cycles, record=True)
    calls = int((ex.record.ecall_args[:, 0] == SYS_POSEIDON2).sum())
    return {"cycles": int(ex.cycles), "exit_code": int(ex.exit_code),
            "output": bytes(ex.output), "p2_calls": calls}


# --------------------------------------------------------------------------- small guests

def small_input(name: str, n: int, rng: random.Random) -> bytes:
    """Guest ``name``'s input of size ``n`` (bytes, values, transfers or leaves)."""
    m = _models()
    if name in ("hello", "sha256"):
        return bytes(rng.randrange(256) for _ in range(n))
    if name == "sort":
        return m.sort_input([rng.randrange(1 << 32) for _ in range(n)])
    if name == "merkle":
        return m.merkle_input([[rng.randrange(m.P) for _ in range(8)] for _ in range(n + 1)])
    if name == "transfer":
        ids = sorted(rng.sample(range(1, 1 << 16), 16))
        accounts = [[i, rng.randrange(4), rng.randrange(1, 1 << 40)] for i in ids]
        nonce = {a[0]: a[1] for a in accounts}
        txs = []
        for _ in range(n):
            frm, to = rng.sample(ids, 2)
            if rng.random() < 0.1:
                to = rng.randrange(1 << 16)                    # mostly unknown: rejected
            good = rng.random() < 0.9
            txs.append((frm, to, nonce[frm] if good else nonce[frm] + 1,
                        rng.randrange(1 << 20)))
            if good and to in nonce:
                nonce[frm] += 1
        return m.transfer_input([tuple(a) for a in accounts], txs)
    raise ValueError(f"no small input for {name!r}")


def fit(name: str, budget: int, seed: int, lo: int = 0) -> tuple | None:
    """The largest size whose run of ``name`` takes at most ``budget`` cycles (sizes are
    searched by doubling then bisection; the input for a size is fixed by ``seed``) ->
    (input, run) or None when even size ``lo`` does not fit."""
    def attempt(n: int):
        data = small_input(name, n, random.Random(f"{seed}/{name}/{n}"))
        return data, run(name, data)

    best = attempt(lo)
    if best[1]["cycles"] > budget:
        return None
    good, bad = lo, None
    n = max(1, 2 * lo)
    while bad is None:
        a = attempt(n)
        if a[1]["cycles"] <= budget:
            good, best = n, a
            n *= 2
        else:
            bad = n
    while bad - good > 1:
        mid = (good + bad) // 2
        a = attempt(mid)
        if a[1]["cycles"] <= budget:
            good, best = mid, a
        else:
            bad = mid
    return best


# --------------------------------------------------------------------------- bench

def bench_mix(budget: int, p2_target: int) -> tuple:
    """The bench mix (alu, mem, mul, p2 units per iteration) and iterations whose run fits
    ``budget`` cycles with Poseidon2-unit cycles closest to ``p2_target``."""
    m = _models()
    best = None
    for s in (1, 2, 3, 4):
        for p in range(0, 401):
            mix = (8 * s, 4 * s, 2 * s, p)
            per = m.bench_cycles(1, *mix) - m.BENCH_BASE
            iters = (budget - m.BENCH_BASE) // per
            if iters < 1:
                continue
            err = abs(P2_UNIT * p * iters - p2_target)
            key = (err, per)
            if best is None or key < best[0]:
                best = (key, mix, iters)
            if p2_target == 0:
                break
    if best is None:
        raise ValueError(f"the bench guest needs more than {budget} cycles")
    return best[1], best[2]


def v2_block(k: int, hash_share: float, seed: int = 1, mem_log2: int = 10) -> tuple:
    """A version-2 block of about 2^k cycles (module docstring) -> (its JSON object, a
    summary dict: cycles, p2_calls, hash_share, ecall_share, transactions)."""
    if not K_RANGE[0] <= k <= K_RANGE[1]:
        raise ValueError(f"k must be in [{K_RANGE[0]}, {K_RANGE[1]}]")
    if not 0 <= hash_share <= MAX_HASH_SHARE:
        raise ValueError(f"the hash share must be in [0, {MAX_HASH_SHARE}]")
    m = _models()
    target = 1 << k
    rng = random.Random(seed)
    pool = [g for g in SMALL if g != "merkle" or hash_share > 0]
    want = rng.randint(1, 2)
    rng.shuffle(pool)
    txs = []                                     # (guest, input, run)
    for g in pool:
        if len(txs) == want:
            break
        got = fit(g, target // 16, seed, lo=1 if g == "merkle" else 0)
        if got is not None:
            txs.append((g, *got))
    used = sum(r["cycles"] for _, _, r in txs)
    p2_small = P2_UNIT * sum(r["p2_calls"] for _, _, r in txs)
    filler_min = max(200, target >> 6)
    budget = target - used - filler_min
    p2_target = max(0, round(hash_share * target) - p2_small)
    mix, iters = bench_mix(budget, p2_target)
    data = m.bench_header(iters, *mix, mem_log2=mem_log2, seed=rng.randrange(1, 1 << 32))
    bench = run("bench", data)
    assert bench["cycles"] == m.bench_cycles(iters, *mix), "bench.elf's cycles != the model's"
    txs.append(("bench", data, bench))
    filler = fit("hello", target - used - bench["cycles"], seed)
    if filler is None:
        raise ValueError(f"2^{k} cycles leave no room for the hello transaction")
    txs.append(("hello", *filler))
    rng.shuffle(txs)
    names = []
    for g, _, _ in txs:
        if g not in names:
            names.append(g)
    programs = []
    for g in names:
        with open(os.path.join(BIN, f"{g}.elf"), "rb") as fh:
            programs.append({"name": g, "elf_base64": base64.b64encode(fh.read()).decode()})
    obj = {"format": "steadfast-block", "version": 2, "max_cycles": target,
           "programs": programs,
           "transactions": [{"program": g, "input": d.hex(), "output": r["output"].hex(),
                             "exit_code": r["exit_code"]} for g, d, r in txs]}
    cycles = sum(r["cycles"] for _, _, r in txs)
    calls = sum(r["p2_calls"] for _, _, r in txs)
    info = {"cycles": cycles, "target": target, "p2_calls": calls,
            "hash_share": P2_UNIT * calls / cycles, "ecall_share": calls / cycles,
            "bench_mix": dict(zip(("alu", "mem", "mul", "p2"), mix)), "bench_iters": iters,
            "transactions": [{"program": g, "input_bytes": len(d), "cycles": r["cycles"],
                              "p2_calls": r["p2_calls"], "exit_code": r["exit_code"]}
                             for g, d, r in txs]}
    return obj, info


def dump_v2(obj: dict) -> str:
    return json.dumps(obj, indent=1) + "\n"


def _write(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
    else:
        with open(path, "w") as fh:
            fh.write(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log-cycles", "-k", type=int, required=True, help="k: about 2^k cycles")
    ap.add_argument("--hash-share", type=float, default=0.25,
                    help="share of cycles in Poseidon2 precompile calls; default 0.25")
    ap.add_argument("--seed", type=int, default=1, help="default 1")
    ap.add_argument("--mem-log2", type=int, default=10,
                    help="the bench guest's memory working set: 2^N words (0..16)")
    ap.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    args = ap.parse_args(argv)
    if not 0 <= args.mem_log2 <= 16:
        ap.error("--mem-log2 must be in [0, 16]")
    try:
        obj, info = v2_block(args.log_cycles, args.hash_share, args.seed, args.mem_log2)
    except ValueError as exc:
        ap.error(str(exc))
    _write(args.output, dump_v2(obj))
    txs = ", ".join(f"{t['program']} {t['cycles']:,}" for t in info["transactions"])
    print(f"block: {info['cycles']:,} cycles (2^{args.log_cycles} = {info['target']:,}), "
          f"{len(info['transactions'])} transactions ({txs}), Poseidon2 share "
          f"{info['hash_share']:.3f} ({info['p2_calls']:,} calls x {P2_UNIT} cycles; the "
          f"ECALLs alone {info['ecall_share']:.4f})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
