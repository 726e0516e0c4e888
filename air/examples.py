"""Example AIRs with trace generators (tests, benchmarks, documentation).

Each ``*_air()`` returns a frozen :class:`air.Air`; each ``*_trace()`` returns
``(trace uint32[n, w], public_values)``.
"""
from __future__ import annotations

import numpy as np

from .builder import Air, AirBuilder
from .field import P


# ------------------------------------------------------------------ Fibonacci

def fibonacci_air() -> Air:
    """a' = b, b' = a + b; public a0, b0 and the last b."""
    b = AirBuilder("fibonacci", public=["a0", "b0", "out"])
    x, y = b.main("a"), b.main("b")
    b.when_first_row(x - b.pv("a0"), name="start_a")
    b.when_first_row(y - b.pv("b0"), name="start_b")
    b.when_transition(x.next - y, name="shift")
    b.when_transition(y.next - (x + y), name="add")
    b.when_last_row(y - b.pv("out"), name="result")
    return b.build()


def fibonacci_trace(log_n: int, a0: int = 0, b0: int = 1):
    n = 1 << log_n
    t = np.empty((n, 2), dtype=np.uint64)
    t[0] = (a0, b0)
    for i in range(1, n):
        t[i, 0] = t[i - 1, 1]
        t[i, 1] = (t[i - 1, 0] + t[i - 1, 1]) % P
    return t.astype(np.uint32), [a0, b0, int(t[-1, 1])]


# ------------------------------------------------------------------ degree 3

def cubic_air(width: int = 3) -> Air:
    """x_j' = x_j * x_(j+1) * x_(j+2) + j + 1 (indices mod width): degree 3, two
    parts; plus one degree-2 every-row constraint on a helper column s = x_0 * x_1."""
    b = AirBuilder(f"cubic{width}")
    xs = b.main_cols("x", width)
    s = b.main("s")
    for j in range(width):
        b.when_transition(xs[j].next - (xs[j] * xs[(j + 1) % width] * xs[(j + 2) % width] + j + 1),
                          name=f"step{j}")
    b.assert_zero(s - xs[0] * xs[1], name="square")
    return b.build()


def cubic_trace(log_n: int, width: int = 3, seed: int = 1):
    n = 1 << log_n
    rng = np.random.default_rng(seed)
    x = np.empty((n, width), dtype=np.uint64)
    x[0] = rng.integers(1, P, width, dtype=np.uint64)
    for i in range(1, n):
        prev = x[i - 1]
        for j in range(width):
            x[i, j] = (prev[j] * prev[(j + 1) % width] % P * prev[(j + 2) % width] + j + 1) % P
    s = x[:, 0] * x[:, 1] % P
    return np.concatenate([x, s[:, None]], axis=1).astype(np.uint32), []


# ------------------------------------------------------------------ LogUp: CPU-ish + range

def adder_air() -> Air:
    """Rows (a, b, c = a + b, on): sends (a), (b), (c) to the byte bus with multiplicity
    ``on``; a, b, c are bytes once the RANGE table receives them."""
    bld = AirBuilder("adder")
    a, b, c, on = bld.main("a"), bld.main("b"), bld.main("c"), bld.main("on")
    bld.assert_bool(on, name="on_bool")
    bld.assert_zero(on * (c - a - b), name="sum")
    bld.send("byte", [a], multiplicity=on)
    bld.send("byte", [b], multiplicity=on)
    bld.send("byte", [c], multiplicity=on)
    bld.send("pair", [a, b], multiplicity=on)
    return bld.build()


def adder_trace(log_n: int, seed: int = 2):
    n = 1 << log_n
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 128, n)
    b = rng.integers(0, 128, n)
    on = (rng.random(n) < 0.8).astype(np.int64)
    c = np.where(on == 1, a + b, rng.integers(0, 1000, n))
    return np.stack([a, b, c, on], axis=1).astype(np.uint32), []


def range_air(log_n: int = 8) -> Air:
    """The byte table: value runs 0..n-1 (fixed by constraints), receives (value) with
    multiplicity ``mult``."""
    bld = AirBuilder(f"range{log_n}")
    v, m = bld.main("value"), bld.main("mult")
    bld.when_first_row(v, name="start")
    bld.when_transition(v.next - v - 1, name="inc")
    bld.receive("byte", [v], multiplicity=m)
    return bld.build()


def pairs_air(log_n: int) -> Air:
    """A table receiving the (a, b) pairs: preprocessed (a, b) columns hold every pair
    of a small grid (a ROM), ``mult`` counts how often each is used."""
    n = 1 << log_n
    side = 1 << (log_n // 2)
    grid = np.array([[i % side, i // side] for i in range(n)], dtype=np.uint32)
    bld = AirBuilder(f"pairs{log_n}")
    pa, pb = bld.prep("a"), bld.prep("b")
    m = bld.main("mult")
    bld.receive("pair", [pa, pb], multiplicity=m)
    return bld.build(preprocessed=grid)


def lookup_block(log_adder: int = 5, log_pairs: int = 6, seed: int = 2):
    """(airs, traces, public values) for adder + range8 + pairs: three heights, one bus
    with multiplicities and one bus against a preprocessed table.  Pairs (a, b) are drawn
    below 2^(log_pairs/2) so the grid holds them."""
    n = 1 << log_adder
    side = 1 << (log_pairs // 2)
    rng = np.random.default_rng(seed)
    a = rng.integers(0, min(side, 128), n)
    b = rng.integers(0, min(side, 128), n)
    on = (rng.random(n) < 0.8).astype(np.int64)
    c = np.where(on == 1, a + b, rng.integers(0, 1000, n))
    adder = np.stack([a, b, c, on], axis=1).astype(np.uint32)
    rng_t = np.zeros((256, 2), dtype=np.uint32)
    rng_t[:, 0] = np.arange(256)
    for col in (a, b, c):
        np.add.at(rng_t[:, 1], col[on == 1], 1)
    pairs = np.zeros((1 << log_pairs, 1), dtype=np.uint32)
    np.add.at(pairs[:, 0], (a + side * b)[on == 1], 1)
    airs = [adder_air(), range_air(8), pairs_air(log_pairs)]
    return airs, [adder, rng_t, pairs], [[], [], []]


# ------------------------------------------------------------------ public values

def counter_air() -> Air:
    """A counter with a public start, step and final value: x0 = start, x' = x + step,
    x_last = end."""
    b = AirBuilder("counter", public=["start", "step", "end"])
    x = b.main("x")
    b.when_first_row(x - b.pv("start"), name="start")
    b.when_transition(x.next - x - b.pv("step"), name="step")
    b.when_last_row(x - b.pv("end"), name="end")
    return b.build()


def counter_trace(log_n: int, start: int = 5, step: int = 3):
    n = 1 << log_n
    x = (start + step * np.arange(n, dtype=np.uint64)) % P
    return x.reshape(n, 1).astype(np.uint32), [start, step, int(x[-1])]
