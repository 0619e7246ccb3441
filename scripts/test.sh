#!/usr/bin/env bash
# Runs every check of the project: the linters of .pre-commit-config.yaml (ruff, ruff format, mypy, cargo fmt,
# clippy), the Rust unit tests, the stub check, `pip check`, the wheel check (scripts/check-wheel.sh), and the
# whole pytest suite with the package's doctests (statistics, R cross-validation, store, training, analysis,
# report, numpydoc validation of the public docstrings).
# Expects scripts/install.sh to have run. GENGEN_REQUIRE_R=1 makes missing R/rpy2 a failure instead of a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
export GENGEN_REQUIRE_R="${GENGEN_REQUIRE_R:-1}"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "linters: pre-commit run --all-files (ruff, ruff format, mypy, cargo fmt, clippy)"
.venv/bin/pre-commit run --all-files
step "cargo test"
cargo test --quiet
step "stubtest (python/gengen/_core.pyi against the built extension)"
.venv/bin/python -m mypy.stubtest gengen._core --ignore-missing-stub
step "pip check"
.venv/bin/python -m pip check
step "wheel: maturin build, installed alone into a fresh venv, imported"
bash scripts/check-wheel.sh
step "pytest (tests and the package's doctests)"
doctest_ignore=()
# Without the train extra (GENGEN_NO_TRAIN=1) the one module that imports torch at load cannot be collected;
# the train tests skip themselves.
.venv/bin/python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' ||
    doctest_ignore=(--ignore=python/gengen/score.py)
.venv/bin/python -m pytest --doctest-modules python/gengen "${doctest_ignore[@]}" tests -q -ra "$@"
