"""The fuzzer of the other proof files (bench/fuzz_formats.py): a program's proof (STRV),
a program in segments (STRS) and a block in epochs (STBE), at the tests' sizes and weak
parameters.  A short run accepts nothing false and raises nothing untyped; the fuzzer
classifies a forgery as accepted and a true statement as true (checked with a broken
verify); its layout walks the whole file; its cases are deterministic and change
something."""
from __future__ import annotations

import io
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import fuzz_formats as ff  # noqa: E402

LINE = re.compile(r"^fuzz-formats: (\d+) mutated, (\d+) accepted, (\d+) untyped errors$")


@pytest.fixture(scope="module")
def honest():
    return {fmt: ff.honest_cases(fmt, log=lambda *a: None, small=True) for fmt in ff.FORMATS}


def _run(argv):
    buf = io.StringIO()
    rc = ff.main(argv + ["--small"], out=buf)
    return rc, buf.getvalue().rstrip("\n").split("\n")


def test_short_fuzz_accepts_nothing_false_and_raises_nothing_untyped(honest, tmp_path):
    n = 40
    rc, lines = _run([str(n), "--seed", "5", "--save-dir", str(tmp_path)])
    m = LINE.match(lines[-1])
    assert m, lines[-1]
    assert (int(m[1]), int(m[2]), int(m[3])) == (3 * n, 0, 0), "\n".join(lines)
    assert rc == 0 and not os.listdir(tmp_path)


def test_every_kind_is_drawn_and_changes_something(honest):
    for fmt, h in honest.items():
        kinds = set()
        for i in range(60):
            kind, desc, data, st = ff.draw_case(3, fmt, i, h)
            assert data != h["bytes"] or st is not h["statement"], desc
            assert ff.draw_case(3, fmt, i, h)[:3] == (kind, desc, data)   # deterministic
            kinds.add(kind)
        want = {"file", "inner", "statement"} | (set() if fmt == "program" else
                                                {"record", "parts"})
        assert kinds == want, (fmt, kinds)


def test_the_layout_tiles_the_file(honest):
    """Every byte of each honest file is in exactly one field, and the container's headers
    and every inner STARK proof's are found."""
    for fmt, h in honest.items():
        pos = 0
        for f in sorted(h["layout"].fields, key=lambda f: f.start):
            assert f.start == pos, (fmt, f)
            pos = f.end
        assert pos == len(h["bytes"]), fmt
        names = [f.name for f in h["layout"].fields]
        assert names[0] == "magic"
        inner_magics = sum(1 for f in h["layout"].fields if f.cat == "header"
                           and f.name.endswith("magic"))
        assert inner_magics == len(h["inners"]) >= (1 if fmt == "program" else 3), fmt


def test_a_forgery_is_accepted_and_a_true_statement_is_true(honest, monkeypatch, tmp_path):
    """With a verify that accepts everything, a changed statement is reported as accepted
    (and fails the run), while a file whose verified statement is still the machine's is
    reported as true; an untyped exception is untyped."""
    from steadfast.prover import api
    h = honest["segments"]
    st = h["statement"]
    real = api.verify(h["bytes"], elf=st["elf"], input=st["input"], min_security_bits=0)
    import dataclasses

    def lax(data, *a, **kw):
        if kw.get("input") != st["input"]:          # a false statement, "verified"
            return dataclasses.replace(real, output=b"forged")
        return real
    monkeypatch.setattr(api, "verify", lax)
    rc, lines = _run(["30", "--formats", "segments", "--seed", "2", "--save-dir",
                      str(tmp_path)])
    m = LINE.match(lines[-1])
    assert rc == 1 and int(m[2]) > 0 and int(m[3]) == 0
    assert any(line.startswith("TRUE segments case") for line in lines)
    assert any(line.startswith("ACCEPTED segments case") and "input" in line for line in lines)
    assert os.listdir(tmp_path)

    hp = honest["program"]

    def boom(data, *a, **kw):                       # the honest proof passes, nothing else
        if data == hp["bytes"] and kw.get("input") == hp["statement"]["input"] and \
                kw["elf"].digest() == hp["statement"]["elf"].digest() and \
                kw.get("max_cycles") is None:
            return None
        raise KeyError("not a verification error")
    monkeypatch.setattr(api, "verify", boom)
    rc, lines = _run(["3", "--formats", "program", "--seed", "2"])
    m = LINE.match(lines[-1])
    assert rc == 1 and (int(m[2]), int(m[3])) == (0, 3)
