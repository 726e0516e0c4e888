#!/usr/bin/env bash
# Type-check the public API with mypy (not part of CI: mypy is not a test dependency).
#   .venv/bin/pip install mypy && bash scripts/typecheck.sh [mypy options]
# The repository's folders install as steadfast.<folder> (pyproject package-dir); imports
# between them are relative (tests/test_structure.py), but the absolute public names
# (steadfast.prover.api) are what this checks, so it lays those names out as symlinks in
# a temporary directory and points MYPYPATH at it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-$root/.venv/bin/python}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/steadfast"
for f in "$root"/steadfast/*.py "$root"/steadfast/py.typed; do ln -s "$f" "$tmp/steadfast/"; done
for d in air kernels prover verifier vm rv32; do ln -s "$root/$d" "$tmp/steadfast/$d"; done
cd "$tmp"
# --follow-imports=silent: report the modules named here, use the rest for their types
MYPYPATH="$tmp" "$py" -m mypy --follow-imports=silent --cache-dir "$tmp/.mypy_cache" \
    -m steadfast.prover.api -m steadfast.prover.cli.display -m steadfast.prover.engine.prover_core \
    -m steadfast.prover.engine.config -m steadfast.prover.blocks.prover -m steadfast.prover.blocks.proof \
    -m steadfast.prover.programs.prover -m steadfast.prover.programs.verify \
    -m steadfast.prover.engine.air_proof "$@"
