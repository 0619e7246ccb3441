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
    doctest_ignore=(--ignore=python/gengen/scoring/score.py)
.venv/bin/python -m pytest --doctest-modules python/gengen "${doctest_ignore[@]}" tests -q -ra "$@"
# numpy picks its SIMD kernels by CPU: on AVX-512 its exp/log round differently (by 1-2 ulps) from other CPUs.
# The numerical tests that compare vectorised code with a scalar path run once more with AVX-512 turned off, so
# that one machine checks both (the names are numpy's dispatch targets of AVX-512 that this CPU has).
avx512=$(.venv/bin/python -c 'from numpy._core._multiarray_umath import __cpu_dispatch__ as d, __cpu_features__ as f
print(" ".join(n for n in d if ("AVX512" in n or n == "X86_V4") and f.get(n)))' 2>/dev/null || true)
if [ -n "$avx512" ]; then
    step "numerical tests again with numpy's AVX-512 kernels off (NPY_DISABLE_CPU_FEATURES=\"$avx512\")"
    NPY_DISABLE_CPU_FEATURES="$avx512" .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_tails_array.py \
        tests/test_group_estimates_vectorised.py tests/test_leave_one_out_closed_form.py \
        tests/test_leave_one_out_test_vectorised.py tests/test_pooled_vectorised.py tests/test_verdict_vectorised.py \
        tests/test_group_work_vectorised.py
fi
