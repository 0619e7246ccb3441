#!/usr/bin/env bash
# Runs every check of the project: Rust format, lints and unit tests, Python lints, the stub check, and the
# whole pytest suite (statistics, R cross-validation, store, training, analysis, report).
# Expects scripts/install.sh to have run. GENGEN_REQUIRE_R=1 makes missing R/rpy2 a failure instead of a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
export GENGEN_REQUIRE_R="${GENGEN_REQUIRE_R:-1}"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy -D warnings"
cargo clippy --all-targets --features python --quiet -- -D warnings
step "cargo test"
cargo test --quiet
step "ruff"
.venv/bin/ruff check python tests benches
.venv/bin/ruff format --check python tests benches
step "stubtest (python/gengen/_core.pyi against the built extension)"
.venv/bin/python -m mypy.stubtest gengen._core --ignore-missing-stub
step "pytest"
.venv/bin/python -m pytest --doctest-modules python/gengen/stats tests -q -ra "$@"
