"""Writes the guests' sample inputs and expected outputs (guests/inputs/).

    .venv/bin/python guests/make_inputs.py           # (re)write guests/inputs/
    .venv/bin/python guests/make_inputs.py --check   # compare with the committed files

For every case NAME of guest G: ``inputs/G/NAME.in`` (the program input) and
``inputs/G/NAME.out`` (the expected output on fd 1), both computed here in Python from
the documented formats (guests/models.py: hashlib, sorted(), a transfer model, the
project's Poseidon2); ``inputs/cases.json`` lists each case's expected exit code, its
Poseidon2 call count and its cycle count (retired instructions, final exit ECALL
included) as measured by guests/emu.py (unicorn) on the committed ELF -- the cycle
counts are a measurement, the outputs are not.  Deterministic (fixed seeds).
"""
from __future__ import annotations

import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import models  # noqa: E402

P = models.P


def cases() -> dict[str, dict[str, bytes]]:
    rng = random.Random(20240523)
    out: dict[str, dict[str, bytes]] = {}

    out["hello"] = {"empty": b"", "world": b"world!", "bytes": bytes(range(256))}

    out["sha256"] = {
        "empty": b"",
        "abc": b"abc",
        "len55": b"a" * 55,          # padding fits in the block
        "len56": b"b" * 56,          # padding needs a second block
        "len64": bytes(range(64)),
        "len1000": rng.randbytes(1000),
        "len4096": rng.randbytes(4096),   # exactly one read chunk
        "len4161": rng.randbytes(4161),   # crosses the chunk boundary
    }

    vals = [rng.getrandbits(32) for _ in range(300)]
    out["sort"] = {
        "empty": models.sort_input([]),
        "one": models.sort_input([7]),
        "dups": models.sort_input([rng.randrange(10) for _ in range(100)]),
        "random300": models.sort_input(vals),
        "reversed": models.sort_input(list(range(200, 0, -1))),
        "extremes": models.sort_input([0xFFFFFFFF, 0, 0x80000000, 0x7FFFFFFF, 1, 0]),
        "bad_count": models.sort_input([1, 2, 3])[:-4],     # count 3, two values: exit 1
    }

    # transfer: one transfer per status, then a random workload, then > 255 rejections
    accs = [(10, 0, 1000), (20, 5, 0), (30, 0, (1 << 64) - 10), (40, 0xFFFFFFFF, 50)]
    txs = [
        (10, 20, 0, 300),     # ok
        (99, 20, 0, 1),       # unknown sender
        (10, 98, 1, 1),       # unknown recipient
        (10, 10, 1, 1),       # self transfer
        (10, 20, 0, 1),       # bad nonce (now 1)
        (40, 10, 0xFFFFFFFF, 1),   # nonce exhausted
        (20, 10, 5, 301),     # insufficient balance (20 has 300)
        (10, 30, 1, 10),      # recipient overflow (2^64 - 10 + 10)
        (20, 10, 5, 300),     # ok: 20 back to 0
        (10, 30, 1, 9),       # ok: 30 reaches 2^64 - 1
        (30, 10, 0, 0),       # ok: zero amount, only the nonce moves
    ]
    ids = sorted(rng.sample(range(1, 1 << 32), 40))
    raccs = [(i, rng.randrange(3), rng.randrange(10 ** 6)) for i in ids]
    rtxs = [(rng.choice(ids + [0]), rng.choice(ids + [0]), rng.randrange(4),
             rng.randrange(3 * 10 ** 5)) for _ in range(150)]
    out["transfer"] = {
        "statuses": models.transfer_input(accs, txs),
        "random": models.transfer_input(raccs, rtxs),
        "many_rejects": models.transfer_input([(1, 0, 5), (2, 0, 5)],
                                              [(1, 2, 7, 1)] * 300),   # exit 300 % 256
        "empty": models.transfer_input([], []),
        "unsorted_ids": models.transfer_input([(2, 0, 1), (1, 0, 1)], []),   # exit 255
        "trailing": models.transfer_input([(1, 0, 1)], []) + b"\0",        # exit 255
    }

    def leaves(n: int) -> list[list[int]]:
        return [[rng.randrange(P) for _ in range(8)] for _ in range(n)]

    bad = leaves(2)
    bad[1][3] = P                                     # not canonical: exit 2
    out["merkle"] = {f"n{n}": models.merkle_input(leaves(n)) for n in (1, 2, 3, 5, 8, 13)}
    out["merkle"]["extremes"] = models.merkle_input([[0] * 8, [P - 1] * 8, [1] * 8])
    out["merkle"]["noncanonical"] = models.merkle_input(bad)
    out["merkle"]["zero_leaves"] = models.merkle_input([])                 # exit 1

    out["bench"] = {
        "zero": models.bench_header(0, 0, 0, 0, 0),
        "no_p2": models.bench_header(20, 8, 4, 2, 0, 10, 7),
        "mix": models.bench_header(20, 8, 4, 2, 1, 10, 7),
        "memory": models.bench_header(30, 0, 16, 0, 0, 16, 3),
        "p2_only": models.bench_header(3, 0, 0, 0, 4, 0, 11),
        "k14": models.bench_input(1 << 14, mem_log2=8)[0],
        "bad_log2": models.bench_header(1, 1, 1, 1, 1, 17, 1),             # exit 1
    }
    return out


def expected(guest: str, data: bytes, compress) -> tuple[bytes, int]:
    if guest in ("merkle", "bench"):
        return getattr(models, guest + "_model")(data, compress)
    return getattr(models, guest + "_model")(data)


def main(argv: list[str]) -> int:
    check = argv[1:] == ["--check"]
    import emu
    root = os.path.join(HERE, "inputs")
    manifest: dict = {}
    files: dict[str, bytes] = {}
    for guest, cs in cases().items():
        elf = open(os.path.join(HERE, "bin", guest + ".elf"), "rb").read()
        manifest[guest] = {}
        for name, data in cs.items():
            out, code = expected(guest, data, emu.project_poseidon2)
            res = emu.run(elf, data, poseidon2=emu.project_poseidon2)
            if (res.stdout, res.exit_code) != (out, code):
                print(f"{guest}/{name}: the ELF disagrees with the model", file=sys.stderr)
                return 1
            files[f"{guest}/{name}.in"] = data
            files[f"{guest}/{name}.out"] = out
            manifest[guest][name] = {"exit": code, "cycles": res.cycles,
                                     "poseidon2_calls": res.poseidon2_calls}
    files["cases.json"] = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
    bad = []
    for rel, data in sorted(files.items()):
        path = os.path.join(root, rel)
        if check:
            if not os.path.exists(path) or open(path, "rb").read() != data:
                bad.append(rel)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    if bad:
        print("differs from the committed inputs: " + " ".join(bad), file=sys.stderr)
        return 1
    print(("checked " if check else "wrote ") + f"{len(files)} files under {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
