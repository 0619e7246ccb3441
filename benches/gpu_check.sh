#!/usr/bin/env bash
# The standing GPU check (benches/gpu_check.py): run it first whenever a GPU is at hand, paste its table into
# benches/README.md with the date and the card. About 5 minutes on one H100; nothing is downloaded.
#   bash benches/gpu_check.sh            # on the GPU
#   bash benches/gpu_check.sh --tiny     # on the CPU with tiny shapes (what the test suite runs)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || command -v python )}"
exec "$PYTHON" benches/gpu_check.py "$@"
