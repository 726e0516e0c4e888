"""Small blocks shared by the VM, CLI and API tests (kept tiny: memory_size 64)."""
from __future__ import annotations

from steadfast.vm.programs import TABLE_BASE, copy_program, make_block, mix_program, transfer_program

SUM = [["READ", 0], ["READ", 1], ["ADD", 2, 0, 1], ["WRITE", 2], ["HALT"]]


def empty_block(memory_size: int = 64):
    return make_block([("sum", SUM)], [], memory_size, [(2, [7, 8, 9])])


def one_tx_block():
    return make_block([("sum", SUM)], [(0, [2, 3])], 64, [(10, [7, 8, 9])])


def hash_heavy_block():
    return make_block([("mix", mix_program(6, 16, base=40))], [(0, [3, 11]), (0, [2, 5])], 64,
                      [(4, [40]), (8, list(range(16)))])


def memory_heavy_block():
    return make_block([("copy", copy_program()), ("transfer", transfer_program())],
                      [(0, [TABLE_BASE, 48, 12]), (1, [0, 1, 5]), (0, [48, TABLE_BASE + 1, 10])],
                      64, [(TABLE_BASE, list(range(100, 116)))])


def block_json(block) -> dict:
    return block.to_json()
