#!/usr/bin/env bash
# Install gengen's train extra (torch, transformers, datasets, peft, accelerate, tokenizers) into a Python
# environment, using nothing but PyPI.
#
#   scripts/install-torch.sh PYTHON            e.g. scripts/install-torch.sh .venv/bin/python
#
# PyPI's Linux x86_64 torch wheel is a CUDA build whose requirements pull about 2.3 GB of NVIDIA libraries
# (cuBLAS, cuDNN, NCCL, ...). On a machine without a GPU this script instead installs
#   1. the torch wheel alone (--no-deps, ~540 MB) and torch's requirements minus the NVIDIA/CUDA/triton ones;
#   2. tiny stand-in shared objects for the CUDA libraries that torch's .so files link against, built here
#      with gcc into torch/lib. Each stand-in exports the symbols torch imports from that library and
#      answers every call with "no CUDA device", so torch loads and runs on the CPU exactly as the CPU build
#      does (torch.cuda.is_available() is False);
#   3. the other packages, with peft and accelerate installed --no-deps so pip does not pull the NVIDIA
#      libraries back in through their torch requirement.
# The result is checked with a real training step; if the check fails the script falls back to the plain,
# full install. Set GENGEN_TORCH=full (or have nvidia-smi on PATH) to get the full CUDA install directly.
# Idempotent: when everything already imports and trains, it returns in a few seconds.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 PYTHON   (the environment's python, e.g. .venv/bin/python)" >&2
    exit 2
fi
PY="$1"
TORCH_SPEC="${GENGEN_TORCH_SPEC:-torch>=2.2}"
OTHERS=("transformers>=4.56" "datasets>=2.20" "tokenizers>=0.19" "safetensors" "huggingface-hub")
NO_DEPS=("peft>=0.12" "accelerate>=0.33")
PIP=("$PY" -m pip install --disable-pip-version-check --progress-bar off)

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
print(f"torch {torch.__version__} ok (cuda available: {torch.cuda.is_available()}), "
      f"transformers {transformers.__version__}, peft {peft.__version__}")
EOF
}

# Install the requirements of already-installed distributions, leaving out those matching a regex.
install_requirements_of() {
    local exclude="$1"
    shift
    local reqs
    reqs=$("$PY" - "$exclude" "$@" <<'EOF'
import re
import sys
from importlib.metadata import requires

from packaging.requirements import Requirement

exclude = re.compile(sys.argv[1], re.IGNORECASE)
out = []
for dist in sys.argv[2:]:
    for line in requires(dist) or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if exclude.search(req.name):
            continue
        req.marker = None
        out.append(str(req))
print("\n".join(sorted(set(out))))
EOF
)
    if [[ -n "$reqs" ]]; then
        mapfile -t reqarr <<<"$reqs"
        "${PIP[@]}" "${reqarr[@]}"
    fi
}

build_cuda_stubs() {
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
needed = set()
for obj in objects:
    needed.update(re.findall(r"\(NEEDED\).*\[(.+?)\]", run("readelf", "-d", str(obj))))
missing = sorted(name for name in needed if name not in present and f"{name} " not in system)

# Versioned references name their library's version node (e.g. cudaMalloc@libcudart.so.13, x@NVSHMEM).
undefined, defined = set(), set()
for obj in objects:
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
        cmd = ["gcc", "-shared", "-fPIC", "-O0", "-o", str(lib_dir / lib), f"-Wl,-soname,{lib}", str(src)]
        if script:
            vs = pathlib.Path(tmp, "stub.map")
            vs.write_text("\n".join(script) + "\n")
            cmd.insert(-1, f"-Wl,--version-script,{vs}")
        subprocess.run(cmd, check=True)
    print(f"install-torch: built {len(contents)} CUDA stand-ins in {lib_dir}: {', '.join(contents)}")
EOF_STUBS
}

full_install() {
    echo "install-torch: full install from PyPI (torch with its CUDA libraries)"
    "${PIP[@]}" "$TORCH_SPEC" "${OTHERS[@]}" "${NO_DEPS[@]}"
}

if check 2>/dev/null; then
    exit 0
fi

start=$(date +%s)
"${PIP[@]}" packaging >/dev/null
if [[ "${GENGEN_TORCH:-}" == "full" ]] || command -v nvidia-smi >/dev/null 2>&1; then
    full_install
    check
else
    echo "install-torch: CPU install (torch wheel without its NVIDIA requirements + CUDA stand-ins)"
    "${PIP[@]}" --no-deps "$TORCH_SPEC"
    install_requirements_of '^(nvidia-|cuda-|triton$)' torch
    build_cuda_stubs
    "${PIP[@]}" "${OTHERS[@]}"
    "${PIP[@]}" --no-deps "${NO_DEPS[@]}"
    # Leave out the packages installed above: naming them again would let pip pull torch's CUDA requirements.
    install_requirements_of '^(torch|accelerate|peft|transformers)$' peft accelerate
    if ! check; then
        echo "install-torch: the CPU install did not pass its check; falling back to the full install" >&2
        full_install
        check
    fi
fi
echo "install-torch: done in $(( $(date +%s) - start )) s"
