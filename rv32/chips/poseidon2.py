"""The POSEIDON2 table: the Poseidon2 permutation (width 16, BabyBear; docs/protocol.md)
in columns, one permutation per slot, each received on the ``poseidon2`` bus as (input,
output) with its multiplicity.  Statement-independent and stateless: every table that
needs a permutation (rv32's P2CALL) sends its (input, output) pair, so one POSEIDON2
table serves every execution of a proof (a block's transactions share it).

Round structure:  s = M_E(in);  4 x full;  13 x partial;  4 x full, where a full round is
x_i = s_i + rc_i,  y_i = x_i^7,  s = M_E(y)  and a partial round is  x_0 = s_0 + rc,
y_0 = x_0^7,  s = M_I(y_0, s_1..s_15).  The S-box x^7 is split as t = x^3, y = t^2 * x so
that each step is a degree-3 polynomial in stored values.  The linear layers are written
over any values supporting ``+`` and ``*`` by an int (AIR expressions here), so the AIR
states exactly the rounds the trace kernel (chips/poseidon2_trace.py) computes.
"""
from __future__ import annotations

import functools
from typing import Sequence

from ...air import Air, AirBuilder
from ...air.builder import InNamespace, current_bus_namespace, outside_bus_namespace
from ...kernels.poseidon2_constants import RC_FULL, RC_PARTIAL, V16

WIDTH = 16
N_FULL_HALF = 4
N_PARTIAL = 13
_V16 = [int(x) for x in V16]


class Layout:
    """Ordered main columns of one table: ``idx[name]`` is the first column of a group."""

    def __init__(self, groups):
        self.groups = list(groups)
        self.idx = {}
        pos = 0
        for name, count in self.groups:
            self.idx[name] = pos
            pos += count
        self.width = pos

    def declare(self, b: AirBuilder) -> dict:
        cols = {}
        for name, count in self.groups:
            cols[name] = b.main(name) if count == 1 else b.main_cols(name, count)
        return cols


P2_LAYOUT = Layout([("in", 16)]
                   + [(f"cube{r}", 16) for r in range(N_FULL_HALF)]
                   + [(f"sbox{r}", 16) for r in range(N_FULL_HALF)]
                   + [("pcube", N_PARTIAL), ("psbox", N_PARTIAL)]
                   + [(f"cube{r}", 16) for r in range(N_FULL_HALF, 2 * N_FULL_HALF)]
                   + [(f"sbox{r}", 16) for r in range(N_FULL_HALF, 2 * N_FULL_HALF)]
                   + [("mult", 1)])

# Slots: rows carry no transition constraint, so a row may hold k independent
# permutations side by side; slot j's column groups are the k = 1 groups named
# ``group@j``.  The menu:
P2_SLOTS = (1, 2, 3)


def slot_group(name: str, j: int, k: int) -> str:
    """Slot j's name for column group ``name`` of a k-slot table (k = 1: ``name``)."""
    return name if k == 1 else f"{name}@{j}"


def p2_layout(k: int = 1) -> Layout:
    """POSEIDON2 with k permutations per row: slot j holds P2_LAYOUT's groups (named
    ``group@j``) in columns [j * P2_LAYOUT.width, (j + 1) * P2_LAYOUT.width), so a k = 1
    trace of n * k rows reshaped to n rows is the k-slot trace.  k = 1 is P2_LAYOUT."""
    if k not in P2_SLOTS:
        raise ValueError(f"POSEIDON2 takes k in {P2_SLOTS} permutations per row, not {k!r}")
    if k == 1:
        return P2_LAYOUT
    return Layout([(slot_group(g, j, k), c) for j in range(k) for g, c in P2_LAYOUT.groups])


def _m4(x0, x1, x2, x3):
    # circ(2,3,1,1): rows [2,3,1,1], [1,2,3,1], [1,1,2,3], [3,1,1,2]
    return (2 * x0 + 3 * x1 + x2 + x3,
            x0 + 2 * x1 + 3 * x2 + x3,
            x0 + x1 + 2 * x2 + 3 * x3,
            3 * x0 + x1 + x2 + 2 * x3)


def external_linear(s: Sequence, reduce=lambda v: v) -> list:
    """M_E: M4 on each block of 4 lanes, then add to lane i the sum over blocks of lane
    (i mod 4).  ``reduce`` is applied to each output (``% P`` for integer data)."""
    blocks = [_m4(*(reduce(x) for x in s[4 * k:4 * k + 4])) for k in range(4)]
    blocks = [[reduce(x) for x in b] for b in blocks]
    sums = [reduce(blocks[0][i] + blocks[1][i] + blocks[2][i] + blocks[3][i]) for i in range(4)]
    return [reduce(blocks[k][i] + sums[i]) for k in range(4) for i in range(4)]


def internal_linear(s: Sequence, reduce=lambda v: v) -> list:
    """M_I: y_i = sum_j s_j + V16_i * s_i."""
    total = s[0]
    for x in s[1:]:
        total = total + x
    total = reduce(total)
    return [reduce(total + _V16[i] * s[i]) for i in range(WIDTH)]


def build_poseidon2(k: int = 1, log_blowup: int = 2) -> Air:
    """POSEIDON2 with k permutations per row (k in P2_SLOTS): each slot is the whole
    permutation in columns, with its own ``mult`` and its own receive on ``poseidon2``.
    Rows carry no transition constraint, so the slots are independent; k = 1 is the
    one-permutation-per-row AIR, names and layout unchanged."""
    air = _poseidon2_air("poseidon2", k, constraints=True, receive=True, log_blowup=log_blowup)
    # The device computes this AIR's quotient from two smaller generated kernels (kernels/
    # constraint_device.py quotient_device): one slot's permutation constraints, launched
    # once per slot on that slot's columns (the same kernel for every k), and the LogUp
    # constraints alone; the alpha powers line up because the slots' constraints come in
    # slot order, each slot's in the one slot's order, then LogUp's.
    # Only the device needs the parts: ``air.device_split()`` builds them on first call
    # (the verifier and the host prover never do), in the bus namespace this AIR was built
    # in, wherever the call comes from.
    air.device_split = functools.cache(InNamespace(
        current_bus_namespace(), functools.partial(_poseidon2_split, k, air.logup_target)))
    return air


def _poseidon2_split(k: int, logup_target: int) -> tuple:
    """(slot AIR, k, slot width, LogUp-only AIR) of POSEIDON2 with k slots."""
    logup = _poseidon2_air("poseidon2_logup", k, constraints=False, receive=True,
                           logup_degree=logup_target)
    return _poseidon2_slot_air(), k, P2_LAYOUT.width, logup


@functools.cache
def _poseidon2_slot_air() -> Air:
    """One permutation's constraints, no receive: the slot kernel every k and every bus
    namespace shares (it has no interactions), so built outside any namespace -- else its
    name would be the first caller's namespace's."""
    with outside_bus_namespace():
        return _poseidon2_air("poseidon2_slot", 1, constraints=True, receive=False)


def _poseidon2_air(name: str, k: int, constraints: bool, receive: bool,
                   logup_degree: int | None = None, log_blowup: int | None = None) -> Air:
    b = AirBuilder(name)
    cols = p2_layout(k).declare(b)
    for j in range(k):
        col = {g: cols[slot_group(g, j, k)] for g, _ in P2_LAYOUT.groups}
        _poseidon2_slot(b, col, "" if k == 1 else f"@{j}", constraints, receive)
    return b.build(logup_degree=logup_degree, log_blowup=log_blowup)


def _poseidon2_slot(b: AirBuilder, col: dict, sfx: str, constraints: bool = True,
                    receive: bool = True) -> None:
    """One permutation's constraints and receive on the columns ``col`` (P2_LAYOUT's
    group names); ``sfx`` tags the constraint names of a slot."""
    state = external_linear(col["in"])

    def sbox(x, cube, out, name):
        if constraints:
            b.assert_zero(cube - x * x * x, name=f"{name}_cube{sfx}")
            b.assert_zero(out - cube * cube * x, name=f"{name}_sbox{sfx}")

    for r in range(2 * N_FULL_HALF):
        if r == N_FULL_HALF:
            for k in range(N_PARTIAL):
                x0 = state[0] + int(RC_PARTIAL[k])
                sbox(x0, col["pcube"][k], col["psbox"][k], f"partial{k}")
                state = internal_linear([col["psbox"][k]] + state[1:])
        for i in range(WIDTH):
            sbox(state[i] + int(RC_FULL[r][i]), col[f"cube{r}"][i], col[f"sbox{r}"][i],
                 f"full{r}[{i}]")
        state = external_linear(col[f"sbox{r}"])
    if receive:
        b.receive("poseidon2", list(col["in"]) + state, multiplicity=col["mult"])


__all__ = ["build_poseidon2", "p2_layout", "P2_LAYOUT", "P2_SLOTS", "Layout", "slot_group",
           "external_linear", "internal_linear", "WIDTH", "N_FULL_HALF", "N_PARTIAL"]
