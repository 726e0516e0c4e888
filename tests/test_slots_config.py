"""ProverConfig.slots (issue #38 item 1; docs/api.md "ProverConfig", docs/rv32.md "Slots"):
how the RV32 prover chooses k, the items a row of a slotted table holds -- "size" (the
default: the smallest proof, k = 1 in practice) or "cells" (the fewest committed cells).
The choice is the prover's alone: every verifier reads k back off the proof's widths.

Checked here at small sizes: the field's validation and its command-line option and
profile, a program, a segmented program and a block proved with "cells" -- each verified
by the unchanged verifiers, its k read back equal to what ``choose_slots(..., "cells")``
picks, fewer committed cells than "size" -- and "size" given explicitly being the
default's bytes."""
from __future__ import annotations

import pytest

from steadfast import rv32
from steadfast.prover.api import ConfigError, Prover, ProverConfig
from steadfast.prover.cli import _prove_parser
from steadfast.prover.cli.common import EXIT_USAGE, Fail, prover_config
from steadfast.prover.common.errors import ConfigTypeError
from steadfast.prover.engine.config import PROFILES, SLOT_OBJECTIVES
from steadfast.prover.programs.proof import ProgramProof
from steadfast.prover.programs.verify import verify_program
from steadfast.rv32.block import slots_of as block_slots_of
from steadfast.rv32.statement import slots_of
from steadfast.rv32.tables import SLOTTED
from steadfast.rv32.traces import build_traces
from steadfast.verifier.proof_format import decode

import rv32_samples as S

# a loop of ALU, SHIFT, BITWISE, LOAD/STORE and BRANCH instructions: every wide chip holds
# enough items that "cells" packs several a row
SRC = """
    li s0, 0
    li s1, 150
    li sp, 0x20000
loop:
    lw t0, 0(sp)
    addi t0, t0, 3
    slli t1, t0, 3
    srli t2, t1, 2
    xor t3, t1, t2
    and t4, t3, t0
    sw t4, 0(sp)
    addi s0, s0, 1
    blt s0, s1, loop
    lw a0, 0(sp)
    li a7, 93
    ecall
"""
CHEAP = dict(num_queries=6, pow_bits=1, logup_pow_bits=1, deep_pow_bits=1, commit_pow_bits=1,
             backend="host")


def test_slots_field_checked():
    assert ProverConfig().slots == "split" and SLOT_OBJECTIVES == ("size", "cells", "split",
                                                                    "cells-split")
    from steadfast.rv32.tables import SLOT_MODES
    assert tuple(SLOT_MODES) == SLOT_OBJECTIVES         # the trace builders' one table of them
    assert ProverConfig(slots="cells").slots == "cells"
    assert ProverConfig(slots="split").slots == "split"
    with pytest.raises(ConfigError,
                       match=r"slots must be one of size, cells, split, cells-split, got 'fewest'") as e:
        ProverConfig(slots="fewest")
    assert e.value.field == "slots"
    with pytest.raises(ConfigTypeError, match="slots must be str"):
        ProverConfig(slots=3)
    # what the trace builders get: the blowup and the objective, together
    assert ProverConfig(slots="cells", log_blowup=1).trace_options() == {
        "log_blowup": 1, "slot_objective": "cells"}


def test_slots_option_and_profile():
    """--slots sets the field; --profile fastest is fast's parameters with "cells-split"; an
    explicit --slots wins over the profile's; no option keeps the default's "split";
    small and smallest (the proof-size profiles) take "size"."""
    parse = _prove_parser().parse_args
    assert prover_config(parse(["x.elf"])).slots == "split"
    assert prover_config(parse(["x.elf", "--slots", "size"])).slots == "size"
    for name in ("small", "smallest"):
        assert prover_config(parse(["x.elf", "--profile", name])).slots == "size"
    assert prover_config(parse(["x.elf", "--profile", "fast"])).slots == "split"
    assert prover_config(parse(["x.elf", "--slots", "cells"])).slots == "cells"
    fastest = prover_config(parse(["x.elf", "--profile", "fastest"]))
    assert fastest.slots == "cells-split"
    assert prover_config(parse(["x.elf", "--slots", "cells-split"])).slots == "cells-split"
    assert {k: v for k, v in PROFILES["fastest"].items() if k != "slots"} == PROFILES["fast"]
    assert prover_config(parse(["x.elf", "--profile", "fastest", "--slots", "size"])).slots \
        == "size"
    with pytest.raises(Fail, match=r"--slots: invalid choice: 'fewest'") as e:
        parse(["x.elf", "--slots", "fewest"])
    assert e.value.code == EXIT_USAGE


def _cells(prog, data, objective):
    tr = build_traces(prog, rv32.execute(prog, data, record=True), 1 << 20,
                      slot_objective=objective)
    return tr.slots, sum(tr.cells().values())


def test_program_proved_with_cells_verifies():
    prog = S.program(SRC)
    want, cells = _cells(prog, b"", "cells")
    _, size_cells = _cells(prog, b"", "size")
    assert cells < size_cells and max(want[n] for n in ("alu", "shift", "bitwise")) > 1, want
    proof = Prover(ProverConfig(slots="cells", **CHEAP)).prove_program(prog, b"")
    got = slots_of(decode(ProgramProof.from_bytes(proof.to_bytes()).proof))
    assert got == {n: want[n] for n in SLOTTED}
    v = verify_program(proof.to_bytes(), prog, b"", min_security_bits=0)
    assert v.exit_code == rv32.execute(prog, b"").exit_code
    # "size" given is the default: the same bytes as a config without the field
    a = Prover(ProverConfig(slots="size", **CHEAP)).prove_program(prog, b"").to_bytes()
    b = Prover(ProverConfig(**CHEAP)).prove_program(prog, b"").to_bytes()
    assert a == b != proof.to_bytes()


def test_segmented_program_with_cells_verifies():
    """Each segment chooses its own k; the chain and the verifier take them as they come."""
    prog = S.program(SRC.replace("li s1, 150", "li s1, 400"))
    p = Prover(ProverConfig(slots="cells", **CHEAP)).prove_program(
        prog, b"", max_cycles=1 << 16, segment_cycles=1024)
    assert len(p.segments) > 1
    v = verify_program(p.to_bytes(), prog, b"", min_security_bits=0)
    assert v.exit_code == rv32.execute(prog, b"").exit_code


def test_block_with_cells_verifies():
    from pathlib import Path
    from steadfast.prover.blocks.proof import TxBlockProof, verify_txblock
    from steadfast.rv32.blockfile import load_block
    block = load_block(Path(__file__).resolve().parents[1] / "examples" / "block.json")
    proof = Prover(ProverConfig(slots="cells", **CHEAP)).prove_block(block)
    raw = proof.to_bytes()
    decoded = decode(TxBlockProof.from_bytes(raw).proof)
    tx_slots, _ = block_slots_of(decoded, len(block.transactions))
    assert any(k > 1 for s in tx_slots for k in s.values()), tx_slots
    verify_txblock(raw, block, min_security_bits=0)


def test_cells_proof_is_the_same_on_the_device_pipeline():
    """The device pipeline (emu: its stages and residency on the CPU) proves the slotted
    tables "cells" chooses to the host's bytes."""
    prog = S.program(SRC)
    host = Prover(ProverConfig(slots="cells", **CHEAP)).prove_program(prog, b"").to_bytes()
    emu = Prover(ProverConfig(slots="cells", **{**CHEAP, "backend": "emu"})).prove_program(
        prog, b"").to_bytes()
    assert emu == host


def test_cli_fastest_profile_proves_and_verifies(tmp_path, capsys):
    """prove --profile fastest: the proof verifies with the default verify (100 bits), its
    statistics record slots "cells-split", and its tables hold several instructions a row."""
    import json
    import shutil
    from pathlib import Path
    from steadfast.prover.cli import main_prove, main_verify
    root = Path(__file__).resolve().parents[1]
    for src in ("examples/hello.elf", "examples/hello.in"):
        shutil.copy(root / src, tmp_path / Path(src).name)
    elf, inp, out = tmp_path / "hello.elf", tmp_path / "hello.in", tmp_path / "h.proof"
    stats = tmp_path / "h.json"
    code = main_prove([str(elf), "--input", str(inp), "--profile", "fastest", "-o", str(out),
                       "--stats-json", str(stats), "--backend", "host", "-q"])
    o, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in o + err, err
    rec = json.loads(stats.read_text())
    assert rec["slots"] == "cells-split" and rec["params"]["log_blowup"] == 1
    proof = ProgramProof.from_bytes(out.read_bytes())
    assert max(slots_of(decode(proof.proof)).values()) > 1
    code = main_verify([str(out), "--elf", str(elf), "--input", str(inp)])
    o, err = capsys.readouterr()
    assert code == 0 and "proof OK" in o, o + err
