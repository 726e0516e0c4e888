"""steadfast/_jit_cache.py: our ``cache=True`` kernels load from numba's cache without the
compiler's start-up (the target "refresh"), compile as before on a miss, and compute the
same either way -- a parallel kernel included (its threads come from the cached entry)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
from hypothesis import given, settings, strategies as st

from steadfast import _jit_cache
from steadfast.rv32.elf import Segment, nonzero_len

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A fresh interpreter that counts numba's target refreshes around a body of code.
_COUNTING = textwrap.dedent("""
    import sys
    sys.path[:0] = {paths!r}
    from numba.core import base
    calls = []
    _orig = base.BaseContext.refresh
    def _counted(self):
        calls.append(1)
        return _orig(self)
    base.BaseContext.refresh = _counted
    {body}
    print("REFRESHES", len(calls))
""")


def _run(body: str, paths=(), env=None) -> tuple[int, str]:
    code = _COUNTING.format(paths=list(paths), body=textwrap.indent(textwrap.dedent(body),
                                                                      "").strip())
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr[-3000:]
    line = [s for s in out.stdout.splitlines() if s.startswith("REFRESHES")][-1]
    return int(line.split()[1]), out.stdout


def test_adopt_swaps_only_cached_cpu_dispatchers():
    from numba import njit

    @njit(cache=False)
    def plain(x):
        return x + 1

    ns = {"plain": plain, "n": 3, "f": len}
    assert _jit_cache.adopt(ns) == 0            # no cache: nothing to change
    from steadfast.verifier import poseidon2
    # the verifier's kernels use no runtime: their lookup starts nothing
    assert type(poseidon2._permute_rows._cache) is _jit_cache.NoRuntimeHitCache
    assert _jit_cache.adopt(vars(poseidon2)) == 0   # already adopted
    from steadfast.kernels import ntt_host
    runtime = [v for v in vars(ntt_host).values() if type(getattr(v, "_cache", None))
               is _jit_cache.HitCache]
    assert runtime                                  # the prover's kernels keep the runtime's


def test_the_verifiers_kernels_are_compiled_without_the_runtime():
    """Every compiled kernel a verification loads (the verifier's and the VM's decode) is
    ``_nrt=False`` and so looked up by NoRuntimeHitCache: a warm verify never compiles
    numba's runtime module (~15 ms of a process)."""
    from steadfast.verifier import composition, join, merkle, poseidon2
    from steadfast.rv32.chips import program
    from numba.core.caching import FunctionCache
    seen = 0
    for mod in (composition, join, merkle, poseidon2, program):
        for value in vars(mod).values():
            cache = getattr(value, "_cache", None)
            if not isinstance(cache, FunctionCache):
                continue                            # not cached: inlined helpers
            if value.py_func.__module__ != mod.__name__:
                continue                            # imported from elsewhere
            if mod is program and value.py_func.__name__ != "_decode_rows":
                continue
            assert value.targetoptions.get("_nrt") is False, value.py_func.__qualname__
            assert type(cache) is _jit_cache.NoRuntimeHitCache, value.py_func.__qualname__
            seen += 1
    assert seen >= 13


def test_a_miss_compiles_and_a_hit_skips_the_refresh(tmp_path):
    """A module of our own kind in a fresh cache: the first process misses (numba's
    compiler refreshes and saves), the second loads it without any refresh; both
    compute the same."""
    mod = tmp_path / "hitmod.py"
    mod.write_text(textwrap.dedent("""
        import numpy as np
        from numba import njit, prange
        from steadfast._jit_cache import adopt

        @njit(cache=True)
        def total(a):
            s = np.uint64(0)
            out = np.empty(a.size, np.uint64)
            for i in range(a.size):
                s += np.uint64(a[i])
                out[i] = s
            return out

        @njit(cache=True, parallel=True)
        def squares(a):
            out = np.empty(a.size, np.uint64)
            for i in prange(a.size):
                out[i] = np.uint64(a[i]) * np.uint64(a[i])
            return out

        adopt(globals())
    """))
    body = """
        import numpy as np, hitmod
        a = np.arange(1, 200001, dtype=np.uint32)
        got = hitmod.total(a)
        sq = hitmod.squares(a)
        assert (got == np.cumsum(a.astype(np.uint64))).all()
        assert (sq == a.astype(np.uint64) ** 2).all()
        print("HITS", sum(hitmod.total.stats.cache_hits.values()),
              sum(hitmod.squares.stats.cache_hits.values()))
    """
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    cold, out1 = _run(body, [str(tmp_path), ROOT], env)
    assert cold > 0 and "HITS 0 0" in out1          # compiled: numba refreshed itself
    warm, out2 = _run(body, [str(tmp_path), ROOT], env)
    assert warm == 0 and "HITS 1 1" in out2         # loaded, no refresh, same answers


def test_a_warm_verify_starts_no_compiler():
    """The verifier's kernels and the VM's decode, loaded in a fresh process after a warm
    one: the proof verifies, numba's target is never refreshed and its runtime (NRT)
    never compiled."""
    body = """
        import steadfast.verifier as V
        V.warm_kernels()
        from steadfast.rv32 import Program, asm
        from steadfast.rv32.chips.program import image_of
        img = image_of(Program.from_words(asm.assemble("addi a0, zero, 7\\necall")))
        assert img.dec.shape[1] == 7
        from numba.core.runtime import rtsys
        print("RUNTIME", rtsys._init)
    """
    _run(body, [ROOT])                              # warm (or compile) the cache
    warm, out = _run(body, [ROOT])
    assert warm == 0
    assert "RUNTIME False" in out


def test_a_kernel_without_the_runtime_misses_then_hits(tmp_path):
    """An ``_nrt=False`` kernel of our kind in a fresh cache: compiled by numba's own path
    the first time, loaded without refresh or runtime the second; the same answers, and
    a runtime kernel loaded after it still starts the runtime."""
    mod = tmp_path / "nrtmod.py"
    mod.write_text(textwrap.dedent("""
        import numpy as np
        from numba import njit
        from steadfast._jit_cache import adopt

        @njit(cache=True, _nrt=False)
        def prefix(a, out):
            s = np.uint64(0)
            for i in range(a.size):
                s += np.uint64(a[i])
                out[i] = s

        @njit(cache=True)
        def fresh(n):
            return np.arange(n, dtype=np.uint64) * np.uint64(3)

        adopt(globals())
    """))
    body = """
        import numpy as np, nrtmod
        from numba.core.runtime import rtsys
        a = np.arange(1, 100001, dtype=np.uint32)
        out = np.empty(a.size, np.uint64)
        nrtmod.prefix(a, out)
        assert (out == np.cumsum(a.astype(np.uint64))).all()
        print("RUNTIME_AFTER_PREFIX", rtsys._init)
        assert (nrtmod.fresh(5) == np.arange(5, dtype=np.uint64) * 3).all()
        print("RUNTIME_AFTER_FRESH", rtsys._init)
        print("HITS", sum(nrtmod.prefix.stats.cache_hits.values()))
    """
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    cold, out1 = _run(body, [str(tmp_path), ROOT], env)
    assert cold > 0 and "HITS 0" in out1
    warm, out2 = _run(body, [str(tmp_path), ROOT], env)
    assert warm == 0 and "HITS 1" in out2
    assert "RUNTIME_AFTER_PREFIX False" in out2 and "RUNTIME_AFTER_FRESH True" in out2


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 3 << 16), st.binary(max_size=3))
def test_nonzero_len_is_rstrip(head, zeros, tail):
    data = head + bytes(zeros) + tail
    assert nonzero_len(data) == len(data.rstrip(b"\0"))
    assert Segment(0x1000, data, 5).initialised == data.rstrip(b"\0")


def test_nonzero_len_on_large_images():
    big = bytes(5 << 20)
    assert nonzero_len(big) == 0
    b = bytearray(big)
    b[123_457] = 1
    assert nonzero_len(bytes(b)) == 123_458
    assert nonzero_len(np.ones(10, np.uint8).tobytes() + bytes(1 << 17)) == 10


def test_a_dependencys_stamp_is_in_the_index(tmp_path):
    """adopt(..., depends=...): the index's stamp carries the dependencies' (name, mtime,
    size), so touching one (a lanes module, kernels/field.py) makes the kernels a miss; in
    a fresh interpreter with its own cache directory: compiled, then loaded, then
    compiled again after the dependency's mtime moves."""
    mod = tmp_path / "depmod.py"
    dep = tmp_path / "dep_ir.py"
    dep.write_text("# the code generator a kernel would compile in\n")
    mod.write_text(textwrap.dedent("""
        from numba import njit
        from steadfast._jit_cache import adopt

        @njit(cache=True)
        def twice(x):
            return 2 * x

        adopt(globals(), depends=("dep_ir.py",))
    """))
    child = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        import depmod
        stamp = depmod.twice._cache._cache_file._source_stamp
        assert stamp[1][0][0] == "dep_ir.py", stamp
        depmod.twice(3)
        print(sum(depmod.twice._cache_hits.values()), sum(depmod.twice._cache_misses.values()))
    """)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def run():
        r = subprocess.run([sys.executable, "-c", child, str(tmp_path)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        return tuple(int(v) for v in r.stdout.split())

    assert run() == (0, 1)                   # compiled and saved
    assert run() == (1, 0)                   # loaded
    st = os.stat(dep)
    os.utime(dep, (st.st_atime, st.st_mtime + 10))
    assert run() == (0, 1)                   # the dependency moved: compiled again
    assert run() == (1, 0)


def test_every_module_stamps_the_files_its_kernels_call_into():
    """A cached kernel's machine code includes the njit functions it calls from other files
    (field functions, the verifier's scalar arithmetic, another module's kernels): each
    such file must be in its module's ``adopt(..., depends=...)``, or an edit to it alone
    leaves the old code in use (numba stamps the kernel's own file only)."""
    import importlib

    from numba.core.registry import CPUDispatcher
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    checked, gaps = 0, []
    for pkg in ("kernels", "verifier", "rv32", "prover/core"):
        for dirpath, _, files in os.walk(os.path.join(root, pkg)):
            for f in sorted(files):
                path = os.path.join(dirpath, f)
                if not f.endswith(".py") or "adopt(globals()" not in Path(path).read_text():
                    continue
                name = "steadfast." + os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                mod = importlib.import_module(name)
                own = [v for v in vars(mod).values() if isinstance(v, CPUDispatcher)
                       and os.path.abspath(v.py_func.__code__.co_filename) == path]
                cached = [v for v in own if type(getattr(v, "_cache", None)).__name__
                          in ("HitCache", "NoRuntimeHitCache")]
                if not cached:
                    continue
                stamp = cached[0]._cache._cache_file._source_stamp
                extra = stamp[1] if isinstance(stamp, tuple) and len(stamp) == 2 \
                    and isinstance(stamp[1], tuple) else ()
                callees = {os.path.abspath(v.py_func.__code__.co_filename)
                           for v in vars(mod).values() if isinstance(v, CPUDispatcher)}
                missing = [os.path.relpath(c, root) for c in sorted(callees - {path})
                           if _jit_cache._stamp(c) not in extra]
                if missing:
                    gaps.append(f"{name}: depends lacks {missing}")
                checked += 1
    assert not gaps
    assert checked >= 15
