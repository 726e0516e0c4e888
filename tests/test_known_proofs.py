"""Known answers for the proof bytes: the bundled inputs' proofs, pinned by their sha256.

Every other identity test compares two runs of one tree (host = sim, one budget against
another, a recovery against a clean run); none says that today's tree writes the bytes
yesterday's wrote.  That is a promise of the format (docs/protocol.md section 5, "Known
answers"): with the parameters unchanged a proof's bytes do not move -- across releases,
backends, thread counts and machines (the example block's hash was taken on an AMD Zen 4
in earlier sessions; all of these on an Intel Emerald Rapids, the block's equal).

If one of these fails:
* you changed the protocol, a parameter set or a table's layout on purpose: say so in
  docs/protocol.md, update the hash there and here, in the same commit;
* you did not: the change made the prover's output depend on something it must not (an
  order, a thread count, a cache), or altered the format by accident -- find it.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys

from steadfast.prover.api import Prover, ProverConfig
from steadfast.rv32.blockfile import load_block

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BLOCK = "examples/block.json"
HELLO, HELLO_IN = "examples/hello.elf", "examples/hello.in"
SHA256 = "guests/bin/sha256.elf"

KNOWN = {
    "block default": "ec2b58a521cf6423dddac896ae3fe4223ef5b7183fe5bec983577ebb70f89c2d",
    "block fastest": "9776d86643b4e6cc365c558a4758d8391ac545c97abb627fd6de000c9f9b2177",
    "block epochs 2^10": "b0491bccf24ba3d8293e2a8ff8ade92134071cf25d67357f96153654924fd92a",
    "hello default": "ab19daf3cae1adaa11b25e08f4f093dddf6fbd139d29a2f917371c5e278c3917",
    "hello small": "ad43787fac82959e3f868938cb601098e6f7e904180bad46c02bdc681c23cbe9",
    "sha256 abc segments 2^11": "a8c7ccf52c0143e02dca689f789f11510ecacbb45cc6595e532f7ce031dd85d2",
}


def _path(p: str) -> str:
    return os.path.join(ROOT, p)


def _sha(proof) -> str:
    return hashlib.sha256(proof.to_bytes()).hexdigest()


def _check(name: str, got: str) -> None:
    assert got == KNOWN[name], (
        f"the proof bytes of '{name}' moved: sha256 {got}, known {KNOWN[name]} "
        "(docs/protocol.md 'Known answers': update both on purpose, or find what made "
        "the output depend on something it must not)")


def _prover(**fields) -> Prover:
    return Prover(ProverConfig(backend="host", **fields))


def test_the_example_block():
    _check("block default", _sha(_prover().prove_block(load_block(_path(BLOCK)))))


def test_the_example_block_at_fastest():
    # another parameter set and the cells-split slot layout
    p = Prover(ProverConfig.for_profile("fastest", backend="host"))
    _check("block fastest", _sha(p.prove_block(load_block(_path(BLOCK)))))


def test_the_example_block_in_epochs():
    proof = _prover(segment_cycles=1 << 10).prove_block(load_block(_path(BLOCK)))
    assert type(proof).__name__ == "BlockEpochsProof"
    _check("block epochs 2^10", _sha(proof))


def _hello_input() -> bytes:
    with open(_path(HELLO_IN), "rb") as fh:
        return fh.read()


def test_the_hello_program():
    _check("hello default", _sha(_prover().prove_program(_path(HELLO), _hello_input())))


def test_the_hello_program_at_small():
    p = Prover(ProverConfig.for_profile("small", backend="host"))
    _check("hello small", _sha(p.prove_program(_path(HELLO), _hello_input())))


def test_a_program_in_segments():
    proof = _prover().prove_program(_path(SHA256), b"abc", segment_cycles=1 << 11)
    assert type(proof).__name__ == "SegmentedProof" and len(proof.segments) == 3
    _check("sha256 abc segments 2^11", _sha(proof))


def test_the_example_block_on_one_thread():
    """The same bytes from a process whose numba pool has one thread (this machine's
    tests run on two): the schedule is not in the proof."""
    code = ("import hashlib, sys\n"
            "from steadfast.prover.api import Prover, ProverConfig\n"
            "from steadfast.rv32.blockfile import load_block\n"
            f"p = Prover(ProverConfig(backend='host')).prove_block(load_block({_path(BLOCK)!r}))\n"
            "sys.stdout.write(hashlib.sha256(p.to_bytes()).hexdigest())\n")
    env = dict(os.environ, NUMBA_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    _check("block default", r.stdout.strip()[-64:])


def test_the_known_answers_are_documented():
    with open(_path("docs/protocol.md"), encoding="utf-8") as fh:
        text = fh.read()
    for name, digest in KNOWN.items():
        assert digest in text, f"docs/protocol.md lacks the known answer of '{name}'"
