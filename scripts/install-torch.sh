#!/usr/bin/env bash
# Install gengen's train extra (torch, transformers, datasets, peft, accelerate, tokenizers: the list is the
# `train` extra of pyproject.toml, read from there) into a Python environment. Prints which path it took.
#
#   scripts/install-torch.sh PYTHON            e.g. scripts/install-torch.sh .venv/bin/python
#
# Paths, in this order:
#   1. cpu-index: PyTorch's own CPU wheel index (probed with a 10 s time-out), for torch only; the rest of
#      the extra from the default index. No CUDA libraries.
#   2. pypi: the plain install from the default index, as `pip install 'gengen[train]'` does. On Linux x86_64
#      PyPI's torch is the CUDA build: with its NVIDIA libraries about 5 GB on disk (the whole extra: 116 s here);
#      it runs on the CPU when no GPU is present. Taken when the CPU index is unreachable, and directly when
#      nvidia-smi is on PATH (a GPU machine wants the CUDA build).
#   3. cpu-standins: only when asked for with GENGEN_TORCH=cpu-standins, for machines that reach PyPI only and
#      cannot spare the NVIDIA libraries (1.9 GB in all, 85 s here). PyPI's CUDA torch wheel is installed
#      without its NVIDIA/CUDA/triton requirements, which are removed from its installed metadata (so pip
#      neither pulls them back when it installs peft or accelerate nor reports them missing in `pip check`;
#      the removed lines are kept in torch-*.dist-info/GENGEN_CPU_STANDINS); tiny stand-in shared objects
#      for the CUDA libraries torch's .so files link against are built here with gcc into torch/lib, each
#      answering every call with "no CUDA device", so torch runs on the CPU as the CPU build does
#      (torch.cuda.is_available() is False).
# GENGEN_TORCH=cpu-index|pypi|cpu-standins forces a path (cpu-index fails if the index is unreachable);
# GENGEN_TORCH_INDEX overrides the CPU index's address. Every path ends with a real training step and `pip check`.
# Idempotent: when the extra already imports, trains and passes `pip check`, it returns in a few seconds.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 PYTHON   (the environment's python, e.g. .venv/bin/python)" >&2
    exit 2
fi
PY="$1"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CPU_INDEX="${GENGEN_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
CHOICE="${GENGEN_TORCH:-auto}"
PIP=("$PY" -m pip install --disable-pip-version-check --progress-bar off)

case "$CHOICE" in
    auto | cpu-index | pypi | cpu-standins) ;;
    *)
        echo "install-torch: error: GENGEN_TORCH=$CHOICE: expected cpu-index, pypi or cpu-standins (or unset)" >&2
        exit 2
        ;;
esac

log() { echo "install-torch: $*"; }

check() {
    "$PY" - <<'EOF'
import accelerate, datasets, peft, tokenizers, transformers  # noqa: F401
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Flatten(), torch.nn.Linear(32, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
x = torch.randint(0, 16, (6, 4))
y = torch.tensor([0, 1, 0, 1, 0, 1])
losses = []
for _ in range(5):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
assert losses[-1] < losses[0], losses
print(f"torch {torch.__version__} trains (cuda available: {torch.cuda.is_available()}), "
      f"transformers {transformers.__version__}, peft {peft.__version__}, accelerate {accelerate.__version__}")
EOF
}

# Which path installed the torch that is there (for the message of an idempotent re-run).
installed_path() {
    "$PY" - <<'EOF'
from importlib.metadata import distribution, distributions

torch = distribution("torch")
if torch.read_text("GENGEN_CPU_STANDINS") is not None:
    print("cpu-standins")
elif "+cpu" in torch.version:
    print("cpu-index")
elif any((dist.metadata["Name"] or "").lower().startswith("nvidia-") for dist in distributions()):
    print("pypi (CUDA build with its NVIDIA libraries)")
else:
    print("unknown (a torch wheel without its NVIDIA libraries, not installed by this script)")
EOF
}

cpu_index_reachable() {
    "$PY" - "$CPU_INDEX" <<'EOF'
import sys
import urllib.request

try:
    urllib.request.urlopen(f"{sys.argv[1].rstrip('/')}/torch/", timeout=10).close()
except Exception as error:  # noqa: BLE001 - any failure means: not reachable from here
    print(f"install-torch: {sys.argv[1]} not reachable ({error})")
    sys.exit(1)
EOF
}

# Remove torch's NVIDIA/CUDA/triton requirements from its installed METADATA (keeping them, and the list of
# stand-in libraries, in GENGEN_CPU_STANDINS), and record both files in RECORD so `pip uninstall` removes them.
strip_cuda_requirements() {
    "$PY" - "$@" <<'EOF'
import base64
import hashlib
import re
import sys
from importlib.metadata import distribution
from pathlib import Path

torch = distribution("torch")
site = Path(torch.locate_file(""))
info = site / f"torch-{torch.version}.dist-info"
cuda = re.compile(r"^Requires-Dist:\s*(nvidia-|cuda-|triton\b)", re.IGNORECASE)
lines = (info / "METADATA").read_text(encoding="utf-8").splitlines(keepends=True)
removed = [line for line in lines if cuda.match(line)]
(info / "METADATA").write_text("".join(line for line in lines if not cuda.match(line)), encoding="utf-8")
marker = info / "GENGEN_CPU_STANDINS"
previous = marker.read_text(encoding="utf-8").split("\n\n", 1)[0] if marker.exists() else ""
kept = previous or "".join(removed).strip()
libs = "\n".join(sys.argv[1:])
marker.write_text(
    "Installed by gengen's scripts/install-torch.sh (GENGEN_TORCH=cpu-standins): torch without these "
    "requirements,\n" + kept + "\n\nand with CPU-only stand-ins for these CUDA libraries in torch/lib:\n" + libs + "\n",
    encoding="utf-8",
)


def record_line(path):
    data = path.read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path.relative_to(site).as_posix()},sha256={digest},{len(data)}"


owned = [info / "METADATA", marker] + [site / "torch" / "lib" / name for name in sys.argv[1:]]
names = {path.relative_to(site).as_posix() for path in owned}
record = info / "RECORD"
rows = [row for row in record.read_text(encoding="utf-8").splitlines() if row.split(",", 1)[0] not in names]
record.write_text("\n".join(rows + [record_line(path) for path in owned]) + "\n", encoding="utf-8")
print(f"install-torch: torch's metadata no longer requires {len(removed) or 'the already removed'} NVIDIA/CUDA/triton packages")
EOF
}

build_cuda_standins() {
    "$PY" - <<'EOF_STUBS'
"""Build stand-ins for the CUDA shared libraries that torch's .so files link against but CPU code never calls."""
import importlib.util
import pathlib
import re
import subprocess
import tempfile

torch_dir = pathlib.Path(importlib.util.find_spec("torch").origin).parent
lib_dir = torch_dir / "lib"
objects = sorted(lib_dir.glob("*.so*")) + sorted(torch_dir.glob("_C*.so"))
system = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout


def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


present = {path.name for path in lib_dir.glob("*.so*")}
previous_standins = {path.name for path in lib_dir.glob("*.so*") if b"torch was installed for the CPU" in path.read_bytes()}
present -= previous_standins
needed = set()
for obj in objects:
    needed.update(re.findall(r"\(NEEDED\).*\[(.+?)\]", run("readelf", "-d", str(obj))))
missing = sorted(name for name in needed if name not in present and f"{name} " not in system)

# Versioned references name their library's version node (e.g. cudaMalloc@libcudart.so.13, x@NVSHMEM).
undefined, defined = set(), set()
for obj in objects:
    if obj.name in previous_standins:
        continue
    for line in run("nm", "-D", "--undefined-only", str(obj)).splitlines():
        parts = line.split()
        if parts and parts[0] == "U":
            undefined.add(parts[-1])
    for line in run("nm", "-D", "--defined-only", str(obj)).splitlines():
        defined.add(line.split()[-1].split("@")[0])
by_version = {}
for sym in undefined:
    if "@" in sym:
        name, version = sym.split("@", 1)
        by_version.setdefault(version.lstrip("@"), set()).add(name)
# Unversioned CUDA-family symbols (cuFile, cuSPARSELt, NCCL, driver API) that no torch object defines.
cuda_prefix = re.compile(r"^(cu[A-Z]|cuda|cufile|cuFile|cusparseLt|nccl|nvshmem|cupti|cublas|cudnn|nvrtc)")
loose = {s for s in undefined if "@" not in s and s not in defined and cuda_prefix.match(s)}


def owner(version):
    for name in missing:
        if name == version or name.startswith(f"lib{version.lower()}"):
            return name
    return None


contents = {name: {} for name in missing}
for version, names in by_version.items():
    lib = owner(version)
    if lib is not None:
        contents[lib].setdefault(version, set()).update(names)
host = next((n for n in missing if n.startswith("libcudart")), missing[0] if missing else None)
if host is not None:
    contents[host].setdefault(None, set()).update(loose)

with tempfile.TemporaryDirectory() as tmp:
    for lib, groups in contents.items():
        src = pathlib.Path(tmp, "stub.c")
        lines = ['static const char message[] = "CUDA is not available: torch was installed for the CPU";']
        script = []
        for version, names in groups.items():
            for name in sorted(names):
                if name.endswith("GetErrorString") or name.endswith("GetErrorName"):
                    lines.append(f"const char *{name}(void) {{ return message; }}")
                elif name in ("cudaGetDeviceCount", "cuDeviceGetCount"):
                    lines.append(f"int {name}(int *count) {{ if (count) *count = 0; return 100; }}")
                else:
                    lines.append(f"int {name}(void) {{ return 100; }}")
            if version is not None:
                script.append(f"{version} {{ global: {'; '.join(sorted(names))}; }};")
        src.write_text("\n".join(lines) + "\n")
        # Built beside and renamed over: a process that has the old file mapped keeps it intact.
        cmd = ["gcc", "-shared", "-fPIC", "-O0", "-o", str(lib_dir / f".{lib}.new"), f"-Wl,-soname,{lib}", str(src)]
        if script:
            vs = pathlib.Path(tmp, "stub.map")
            vs.write_text("\n".join(script) + "\n")
            cmd.insert(-1, f"-Wl,--version-script,{vs}")
        subprocess.run(cmd, check=True)
        (lib_dir / f".{lib}.new").replace(lib_dir / lib)
print("\n".join(contents))
EOF_STUBS
}

if summary=$(check 2>/dev/null) && "$PY" -m pip check >/dev/null 2>&1; then
    log "already installed: ${summary##*$'\n'}; path: $(installed_path)"
    exit 0
fi

# The train extra, one requirement a line, from pyproject.toml (the one place it is listed).
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || "${PIP[@]}" -q tomli
mapfile -t TRAIN < <("$PY" - "$ROOT/pyproject.toml" <<'EOF'
import sys

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

with open(sys.argv[1], "rb") as file:
    print("\n".join(tomllib.load(file)["project"]["optional-dependencies"]["train"]))
EOF
)
TORCH_REQ=""
for req in "${TRAIN[@]}"; do
    [[ "$req" =~ ^torch([^a-zA-Z0-9_.-]|$) ]] && TORCH_REQ="$req"
done
if [[ -z "$TORCH_REQ" ]]; then
    echo "install-torch: error: pyproject.toml's train extra names no torch requirement" >&2
    exit 1
fi

start=$(date +%s)
if [[ "$CHOICE" == "auto" ]]; then
    if command -v nvidia-smi >/dev/null 2>&1; then
        log "nvidia-smi found: the CUDA build from the default index"
        CHOICE=pypi
    elif cpu_index_reachable; then
        CHOICE=cpu-index
    else
        CHOICE=pypi
    fi
fi

case "$CHOICE" in
    cpu-index)
        log "path cpu-index: torch from PyTorch's CPU index ($CPU_INDEX), the rest of the train extra from the default index"
        "${PIP[@]}" --index-url "$CPU_INDEX" "$TORCH_REQ"
        "${PIP[@]}" "${TRAIN[@]}"
        ;;
    pypi)
        log "path pypi: the train extra from the default index, torch with its CUDA libraries (~5 GB)"
        "${PIP[@]}" "${TRAIN[@]}"
        ;;
    cpu-standins)
        log "path cpu-standins (GENGEN_TORCH=cpu-standins): PyPI's torch without its NVIDIA libraries, CUDA stand-ins built here"
        "${PIP[@]}" --no-deps "$TORCH_REQ"
        built=$(build_cuda_standins) # an assignment, so that set -e stops on a failed build
        mapfile -t standins <<<"$built"
        log "built ${#standins[@]} CUDA stand-ins in torch/lib: ${standins[*]}"
        strip_cuda_requirements "${standins[@]}"
        # torch's remaining requirements and the rest of the extra, resolved normally against that torch.
        "${PIP[@]}" "${TRAIN[@]}"
        ;;
esac
check
"$PY" -m pip check
log "done in $(($(date +%s) - start)) s (path: $CHOICE)"
