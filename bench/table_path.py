"""The path of one table through the prover's modules (issue #39.3): how often it changes
module, and how often it goes back to a module it had already left.

    PYTHONPATH=. python bench/table_path.py [--table adder] [--faults SPEC] [--show]

Proves ``air.examples.lookup_block()`` (adder, range8, pairs6: three tables, one LogUp
bus) with :func:`prover.core.prove.prove` on backend ``emu`` (the device pipeline over
the host kernels), one worker, and follows ``--table`` from its first
``DeviceStages.bind`` to the end of its last pass (the join, on the calling thread, is
the pseudo-table ``<join>`` and is not this table's).  Every Python call and return of a
function in ``prover/`` is profiled (``sys.setprofile``); the module of the innermost
``prover/`` frame is where the table *is*.  Two counts:

* ``path``: the table's path as read through the code -- every function it reaches,
  once, at its first call, in that order; its module sequence with repeats in a row
  collapsed.  A *stop* is one entry of that sequence, a *return* an entry whose module
  the path had already left (``stages -> residency -> stages`` is 3 stops, 1 return).
* ``dynamic``: every call and return that changes the current module, however often
  the function runs (the same stop/return counting over the whole run).

``--show`` prints the path's module sequence (with the function that entered each stop)
and the modules the returns went back to most.  ``--faults`` proves under a fault plan
(the ``PROVER_FAULTS`` syntax) instead of the happy path.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

PROVER = os.path.join(ROOT, "prover") + os.sep


def _module(code, cache={}) -> str | None:
    """``device.stages`` for prover/device/stages.py; None outside prover/."""
    m = cache.get(code.co_filename, 0)
    if m == 0:
        f = code.co_filename
        m = f[len(PROVER):-3].replace(os.sep, ".") if f.startswith(PROVER) and \
            f.endswith(".py") else None
        cache[code.co_filename] = m
    return m


class Follow:
    """The profiler: per thread, the stack of prover modules and the table it is bound
    to; records the followed table's module changes (dynamic) and first calls (path)."""

    def __init__(self, table: str):
        self.table = table
        self.local = threading.local()
        self.lock = threading.Lock()
        self.dynamic: list = []            # (module, function) at each change of module
        self.first: list = []              # (module, function) at each first call
        self.seen: set = set()

    def __call__(self, frame, event, arg):
        if event not in ("call", "return"):
            return
        code = frame.f_code
        mod = _module(code)
        if mod is None:
            return
        loc = self.local
        stack = getattr(loc, "stack", None)
        if stack is None:
            stack = loc.stack = []
            loc.bound = None
        if event == "call":
            if code.co_name == "bind" and mod == "device.stages":
                loc.bound = frame.f_locals.get("table")
            prev = stack[-1][0] if stack else None
            stack.append((mod, code.co_name))
            if loc.bound == self.table:
                with self.lock:
                    if mod != prev:
                        self.dynamic.append((mod, code.co_name))
                    key = (code.co_filename, code.co_firstlineno, code.co_name)
                    if key not in self.seen:
                        self.seen.add(key)
                        self.first.append((mod, code.co_name))
        else:
            if not stack:
                return
            left = stack.pop()[0]
            if stack and loc.bound == self.table and stack[-1][0] != left:
                with self.lock:
                    self.dynamic.append(stack[-1])


def collapse(seq) -> list:
    out = []
    for mod, fn in seq:
        if not out or out[-1][0] != mod:
            out.append((mod, fn))
    return out


def count(seq) -> tuple[int, int, collections.Counter]:
    """(stops, returns to an already-left module, returns by (from, to) pair)."""
    stops = collapse(seq)
    visited, returns, pairs = set(), 0, collections.Counter()
    for k, (mod, _) in enumerate(stops):
        if mod in visited:
            returns += 1
            pairs[(stops[k - 1][0], mod)] += 1
        visited.add(mod)
    return len(stops), returns, pairs


def follow(table: str = "adder", faults: str | None = None) -> Follow:
    from steadfast.air import examples as ex
    from steadfast.prover.core.prove import prove
    from steadfast.prover.device.faults import parse_faults
    from steadfast.prover.device.pipeline import PipelineConfig
    from steadfast.verifier.proof_format import Params
    airs, traces, pvs = ex.lookup_block(5, 6)
    params = Params(num_queries=8, pow_bits=2)
    cfg = dict(backend="emu", workers=1, faults=parse_faults(faults))
    prove(traces, airs, pvs, params, device=PipelineConfig(**cfg))      # warm (compiles)
    f = Follow(table)
    threading.setprofile(f)
    sys.setprofile(f)
    try:
        prove(traces, airs, pvs, params, device=PipelineConfig(**cfg))
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return f


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", default="adder")
    ap.add_argument("--faults", default=None, help="a PROVER_FAULTS plan (default: none)")
    ap.add_argument("--show", action="store_true", help="print the path's module sequence")
    args = ap.parse_args(argv)
    f = follow(args.table, args.faults)
    if not f.first:
        print(f"table {args.table!r} was never bound (tables: adder, range8, pairs6)")
        return 1
    p_stops, p_returns, p_pairs = count(f.first)
    d_stops, d_returns, d_pairs = count(f.dynamic)
    plan = f" under {args.faults}" if args.faults else ""
    print(f"table {args.table} on emu{plan}: path {p_stops} stops, {p_returns} returns to a "
          f"module already left ({len(f.first)} functions); dynamic {d_stops} module changes, "
          f"{d_returns} returns")
    hooks = [fn for mod, fn in f.first if mod == "device.faults" or mod == "device.faulting"]
    print(f"fault hooks reached: {len(hooks)}{' (' + ', '.join(hooks) + ')' if hooks else ''}")
    print("returns by (from -> to), path:",
          ", ".join(f"{a} -> {b} {n}" for (a, b), n in p_pairs.most_common(8)))
    print("returns by (from -> to), dynamic:",
          ", ".join(f"{a} -> {b} {n}" for (a, b), n in d_pairs.most_common(8)))
    if args.show:
        for mod, fn in collapse(f.first):
            print(f"  {mod:24s} {fn}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
