"""Docs that cannot drift: docs/api.md's ProverConfig table, ProverConfig's docstring and
prove()'s docstring give the dataclass's defaults."""
from __future__ import annotations

import ast
import dataclasses
import pathlib
import re

from steadfast.prover.api import ProverConfig
from steadfast.prover.core.prove import prove
from steadfast.verifier.proof_format import Params

API_MD = pathlib.Path(__file__).resolve().parents[1] / "docs" / "api.md"


def _config_table() -> dict:
    """field -> default as documented: the rows of the table under '### `ProverConfig`'
    (first column the field names in backticks, second their defaults, comma-separated
    Python literals in the same order)."""
    text = API_MD.read_text()
    start = text.index("### `ProverConfig`")
    rows = [line for line in text[start:].split("\n\n", 2)[1].splitlines()
            if line.startswith("| `")]
    documented = {}
    for row in rows:
        names_col, default_col = [c.strip() for c in row.strip("|").split("|")[:2]]
        names = re.findall(r"`(\w+)`", names_col)
        values = ast.literal_eval("(" + default_col.replace("`", "") + ",)")
        assert len(names) == len(values), row
        documented.update(zip(names, values))
    return documented


def test_api_md_config_table_is_the_dataclass():
    documented = _config_table()
    fields = {f.name: f.default for f in dataclasses.fields(ProverConfig)}
    assert sorted(documented) == sorted(fields), "every field documented, nothing else"
    assert documented == fields


def test_docstrings_give_the_protocol_defaults():
    p = Params()
    cfg_doc = " ".join(ProverConfig.__doc__.split())
    assert (f"defaults: :class:`verifier.proof_format.Params`'s, {p.log_blowup}, "
            f"{p.num_queries} and {p.pow_bits}") in cfg_doc
    prove_doc = " ".join(prove.__doc__.split())
    assert (f"log_blowup {p.log_blowup}, {p.num_queries} queries, {p.pow_bits} bits of "
            "proof of work") in prove_doc
