"""Parameter profiles (issue #38 item 2; docs/api.md "Profiles"): ``ProverConfig.for_profile``
and ``prove --profile default|fast|small|smallest|fastest`` -- the documented sets, >= 100 conjectured bits
each, the explicit options over the profile, the default profile = the configuration (and
so the bytes) of a ``prove`` without --profile, a ``small`` proof that verifies with the
default minimum and is smaller than the default's of the same program and input, and an
unknown profile as a clear error (exit 2 / ConfigError).  Small sizes: examples/hello.elf."""
import re
import shutil
from pathlib import Path

import pytest

from steadfast.prover.api import ConfigError, Prover, ProverConfig
from steadfast.prover.cli import _prove_parser, main_prove, main_verify
from steadfast.prover.cli.common import prover_config
from steadfast.prover.engine.config import PROFILES
from steadfast.verifier.proof_format import Params

ROOT = Path(__file__).resolve().parents[1]
API_MD = ROOT / "docs" / "api.md"


def run(main, argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_the_profiles_as_documented():
    """docs/api.md's profile table is PROFILES; default is Params' defaults."""
    assert set(PROFILES) == {"default", "fast", "small", "smallest", "fastest"}
    p = Params()
    assert PROFILES["default"] == {"log_blowup": p.log_blowup, "num_queries": p.num_queries,
                                   "pow_bits": p.pow_bits, "log_fri_arity": p.log_fri_arity,
                                   "log_cap": p.log_cap}
    text = API_MD.read_text()
    table = text[text.index("### Profiles"):].split("\n\n", 2)[1]
    rows = {}
    for line in table.splitlines():
        m = re.match(r"\| `(\w+)` \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|", line)
        if m:
            rows[m.group(1)] = dict(zip(("log_blowup", "num_queries", "pow_bits",
                                         "log_fri_arity", "log_cap"),
                                        (int(g) for g in m.groups()[1:])))
    assert rows == {k: {**{f: x for f, x in v.items() if f != "slots"},
                        "log_fri_arity": 1 << v["log_fri_arity"]}
                    for k, v in PROFILES.items()}, rows
    # every profile but fastest keeps the default slots ("size"); the table says which
    assert {k for k, v in PROFILES.items() if v.get("slots", "size") != "size"} == {"fastest"}
    assert '`slots="cells-split"`' in table.split("| `fastest` |")[1].split("\n")[0]


def test_for_profile_and_unknown():
    for name, kw in PROFILES.items():
        cfg = ProverConfig.for_profile(name, backend="host")
        assert {k: getattr(cfg, k) for k in kw} == kw
        assert cfg.params().query_bits() >= 100
    assert ProverConfig.for_profile("default") == ProverConfig()
    cfg = ProverConfig.for_profile("small", num_queries=30)        # a field over the profile
    assert (cfg.log_blowup, cfg.num_queries, cfg.pow_bits) == (3, 30, 22)
    with pytest.raises(ConfigError, match=r"unknown profile 'tiny'; choose one of default, "
                                          r"fast, small, smallest, fastest"):
        ProverConfig.for_profile("tiny")


def test_cli_profile_options():
    """prove's options: no --profile is the default configuration (the same bytes as
    before profiles); --profile P gives P's set; an explicit option wins."""
    parse = _prove_parser().parse_args
    assert prover_config(parse(["x.elf", "--backend", "host"])) == ProverConfig(backend="host")
    cfg = prover_config(parse(["x.elf", "--profile", "small"]))
    assert {k: getattr(cfg, k) for k in PROFILES["small"]} == PROFILES["small"]
    cfg = prover_config(parse(["x.elf", "--profile", "fast", "--queries", "90",
                               "--pow-bits", "12"]), log_cap=2)
    assert (cfg.log_blowup, cfg.num_queries, cfg.pow_bits, cfg.log_cap) == (1, 90, 12, 2)


def test_unknown_profile_exit_2(tmp_path, capsys):
    elf = tmp_path / "hello.elf"
    shutil.copy(ROOT / "examples" / "hello.elf", elf)
    code, out, err = run(main_prove, [elf, "--profile", "tiny", "--backend", "host"], capsys)
    assert code == 2 and not (tmp_path / "hello.proof").exists()
    assert "--profile" in err and "'tiny'" in err and "default, fast, small, smallest, fastest" in err.replace(
        "'", ""), err


def test_small_profile_proof_verifies_and_is_smaller(tmp_path, capsys):
    """hello on hello.in: --profile small and the default, both verified by the default
    verify (100 bits minimum); the small proof is the smaller file and records its
    parameters."""
    for src in ("examples/hello.elf", "examples/hello.in"):
        shutil.copy(ROOT / src, tmp_path / Path(src).name)
    elf, inp = tmp_path / "hello.elf", tmp_path / "hello.in"
    sizes = {}
    for prof in ("small", "default"):
        out = tmp_path / f"{prof}.proof"
        code, _, err = run(main_prove, [elf, "--input", inp, "--profile", prof, "-o", out,
                                        "--backend", "host", "-q"], capsys)
        assert code == 0, err
        code, o, err = run(main_verify, [out, "--elf", elf, "--input", inp], capsys)
        assert code == 0, err
        sizes[prof] = out.stat().st_size
    assert sizes["small"] < sizes["default"], sizes
    from steadfast.prover.programs.proof import ProgramProof
    p = ProgramProof.from_bytes((tmp_path / "small.proof").read_bytes()).params
    assert (p.log_blowup, p.num_queries, p.pow_bits) == (3, 27, 22)
    # and the library's proof of the default profile is the CLI's bytes without --profile
    ref = Prover(ProverConfig.for_profile("default", backend="host")).prove_program(
        elf, inp.read_bytes()).to_bytes()
    assert ref == (tmp_path / "default.proof").read_bytes()
