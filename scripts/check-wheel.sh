#!/usr/bin/env bash
# Builds gengen's wheel as a user would get it (maturin, release) and proves it is complete: it holds every
# file git tracks under python/gengen (modules, the _core.pyi stub, py.typed, the demo's study.toml) plus the
# compiled extension, and, installed alone into a fresh virtual environment, it imports and computes.
#
# The fresh environment gets the wheel with --no-deps and borrows the third-party packages (numpy, pandas...)
# from .venv by a path entry placed *after* its own site-packages: gengen itself can only come from the
# wheel (the check asserts where it was imported from), and nothing is downloaded. Dependencies as declared
# are checked by `pip check` in .venv.
#
#   bash scripts/check-wheel.sh        (after scripts/install.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The interpreter of .venv, as `pip install -e .` and `maturin develop` use: cargo then reuses their build
# instead of recompiling pyo3 and the core for another PYO3_PYTHON.
.venv/bin/maturin build --release --quiet --interpreter .venv/bin/python --out "$tmp/dist" >"$tmp/build.log" 2>&1 || {
    cat "$tmp/build.log" >&2
    echo "check-wheel: maturin build failed" >&2
    exit 1
}
wheels=("$tmp"/dist/gengen-*.whl)
if [[ ${#wheels[@]} -ne 1 || ! -f ${wheels[0]} ]]; then
    echo "check-wheel: expected one wheel in $tmp/dist, found: ${wheels[*]}" >&2
    exit 1
fi
wheel=${wheels[0]}

git ls-files python/gengen >"$tmp/tracked.txt"
.venv/bin/python - "$wheel" "$tmp/tracked.txt" <<'EOF'
import sys
import zipfile

wheel, tracked_list = sys.argv[1], sys.argv[2]
names = set(zipfile.ZipFile(wheel).namelist())
tracked = [line.strip().removeprefix("python/") for line in open(tracked_list) if line.strip()]
missing = [path for path in tracked if path not in names]
extension = [name for name in names if name.startswith("gengen/_core") and name.endswith((".so", ".pyd"))]
if missing or not extension:
    sys.exit(f"check-wheel: {wheel} lacks {missing or 'the compiled extension gengen/_core'}")
print(f"check-wheel: {len(names)} files, all {len(tracked)} tracked package files and {extension[0]}")
EOF

python_bin=$(.venv/bin/python -c 'import sys; print(sys.executable)')
"$python_bin" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --no-deps --no-index --disable-pip-version-check "$wheel"
main_site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
fresh_site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# A plain path entry, appended: .venv's .pth files (among them the editable install's) are not read.
echo "$main_site" >"$fresh_site/zz-borrowed-dependencies.pth"

(cd "$tmp" && "$tmp/venv/bin/python" - "$fresh_site" <<'EOF'
import sys
from importlib import metadata, resources
from pathlib import Path

import numpy as np

import gengen
from gengen import _core, stats

fresh_site = Path(sys.argv[1]).resolve()
for module in (gengen, _core):
    origin = Path(module.__file__).resolve()
    assert origin.is_relative_to(fresh_site), f"{module.__name__} imported from {origin}, not from the wheel"
package = Path(gengen.__file__).parent
for name in ("py.typed", "_core.pyi"):
    assert (package / name).is_file(), f"the installed wheel has no gengen/{name}"
assert resources.files("gengen.demo").joinpath("study.toml").read_text(encoding="utf-8").strip()
assert gengen.__version__ == metadata.version("gengen"), (gengen.__version__, metadata.version("gengen"))

# Partial correlation of x and y given z, against the closed form from the three pairwise correlations.
rng = np.random.default_rng(17)
z = rng.normal(size=50)
x, y = z + rng.normal(size=50), z + rng.normal(size=50)
c = np.corrcoef([x, y, z])
expected = (c[0, 1] - c[0, 2] * c[1, 2]) / np.sqrt((1 - c[0, 2] ** 2) * (1 - c[1, 2] ** 2))
got = stats.partial_corr(x, y, z).r
assert abs(got - expected) < 1e-12, (got, expected)
print(f"check-wheel: gengen {gengen.__version__} from the wheel imports; partial_corr = {got:.6f} (closed form)")
EOF
)
