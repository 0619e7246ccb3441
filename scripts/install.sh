#!/usr/bin/env bash
# Installs everything gengen needs on a fresh Debian machine, into ./.venv, idempotently:
#   - R and the R packages the cross-validation tests use (Debian packages; needs root, skipped otherwise),
#     ppcor (from CRAN when reachable, else from ../shared/r/ppcor_1.1.tar.gz when present; skipped when
#     already installed), and Chromium for the report's browser test;
#   - a virtual environment with gengen built from source (Rust extension in release mode through maturin)
#     and its extras: test, dev, r (rpy2<3.6), cluster (ray, submitit), lm-eval, and train (through
#     scripts/install-torch.sh: torch from PyTorch's CPU index when reachable, else the default index; it
#     prints which path it took).
# Re-running it is cheap: present packages are kept and the extension is rebuilt incrementally.
#
#   bash scripts/install.sh            # everything
#   GENGEN_NO_TRAIN=1 bash scripts/install.sh   # analysis only: no torch/transformers
#   GENGEN_TORCH=cpu-standins bash scripts/install.sh   # PyPI's torch without its 5 GB of NVIDIA libraries
set -euo pipefail
cd "$(dirname "$0")/.."

# r-cran-mass: ppcor's only dependency (ppcor itself is not packaged in Debian).
DEBIAN_PACKAGES=(r-base-core r-base-dev r-cran-ggm r-cran-psych r-cran-mgcv r-cran-corpcor r-cran-mass chromium)
CRAN="${GENGEN_CRAN:-https://cloud.r-project.org}"
PPCOR_TARBALL="../shared/r/ppcor_1.1.tar.gz"
PYTHON="${PYTHON:-python3}"

log() { printf '\033[1minstall:\033[0m %s\n' "$*"; }

missing_debian=()
for package in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing_debian+=("$package")
done
if ((${#missing_debian[@]})); then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        log "Debian packages: ${missing_debian[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing_debian[@]}" >/dev/null
    else
        log "not root (or no apt-get): skipping ${missing_debian[*]}; the R and browser tests will be skipped"
    fi
fi

# ppcor: the R tests compare gengen with it live, and R/gengen_analyse.R uses it when present.
install_ppcor() {
    command -v Rscript >/dev/null || return 0
    if Rscript -e 'quit(status = !requireNamespace("ppcor", quietly = TRUE))' >/dev/null 2>&1; then
        return 0
    fi
    if ! Rscript -e 'quit(status = !requireNamespace("MASS", quietly = TRUE))' >/dev/null 2>&1; then
        log "R package MASS missing (Debian: r-cran-mass): skipping ppcor; its live comparisons will be skipped"
        return 0
    fi
    # A short probe first: install.packages() against an unreachable mirror only gives up after minutes.
    if command -v curl >/dev/null && curl -fs --max-time 10 -o /dev/null "$CRAN/src/contrib/PACKAGES"; then
        log "R package ppcor from CRAN ($CRAN)"
        Rscript -e "install.packages('ppcor', repos = '$CRAN', quiet = TRUE)" >/dev/null 2>&1 || true
    elif [[ -f "$PPCOR_TARBALL" ]]; then
        log "R package ppcor from $PPCOR_TARBALL (CRAN unreachable)"
        R CMD INSTALL "$PPCOR_TARBALL" >/dev/null 2>&1 || true
    fi
    if Rscript -e 'quit(status = !requireNamespace("ppcor", quietly = TRUE))' >/dev/null 2>&1; then
        log "ppcor $(Rscript -e 'cat(as.character(packageVersion("ppcor")))')"
    else
        log "could not install ppcor (no CRAN, no $PPCOR_TARBALL, or R's library not writable); its comparisons will be skipped"
    fi
}
install_ppcor

if ! command -v cargo >/dev/null; then
    echo "install: cargo (Rust) is required to build gengen's extension: https://rustup.rs" >&2
    exit 1
fi

if [[ ! -x .venv/bin/python ]]; then
    log "virtual environment .venv ($($PYTHON --version))"
    "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install --disable-pip-version-check --progress-bar off -q)
"${PIP[@]}" --upgrade pip
"${PIP[@]}" "maturin>=1.5,<2"

if [[ -z "${GENGEN_NO_TRAIN:-}" ]]; then
    log "train extra (torch, transformers, datasets, peft, accelerate)"
    bash scripts/install-torch.sh .venv/bin/python
fi

# One editable install (one build of the extension) with every extra; lm-eval (issue 19) needs torch, so it
# comes with the train extra and after install-torch.sh, which pip then keeps.
extras="test,dev,r,cluster"
[[ -n "${GENGEN_NO_TRAIN:-}" ]] || extras+=",lm-eval"
log "gengen and its extras [$extras] (building the Rust extension)"
"${PIP[@]}" -e ".[$extras]"
# pip compiles the modules it installs, but an editable install leaves gengen's own source uncompiled, and where
# PYTHONDONTWRITEBYTECODE is set (as on the project's machines) every command would compile it again
# (~0.1 s of each CLI start). Compiled once here; a changed file is recompiled in memory as usual.
.venv/bin/python -m compileall -q python/gengen
log "done: $(.venv/bin/python -c 'import gengen; print("gengen", gengen.__version__)')"
