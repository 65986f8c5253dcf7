"""``make gpu-bundle``: everything the GPU check (``benchmarks/gpu_check.sh``) needs that the
lent GPU machine lacks, in one ignored folder that travels with the call.

The machine has no network, Python 3.12 with torch, transformers, peft, accelerate,
sentence-transformers (:data:`IMAGE_HAS`, as the device tool's KINDS.md lists the image);
one call carries at most 64 MiB (working tree plus carried paths). The bundle holds:

* ``wheels/`` -- CPython 3.12 manylinux x86_64 wheels of qrlib's dependencies (and theirs)
  that the image lacks, at the versions installed here where such a wheel exists;
* ``tokenizer/`` -- Qwen2.5's tokenizer (from the offline Qwen2.5-Coder-0.5B GGUF);
* ``data/`` -- the offline SciFact, NFCorpus, HotpotQA-mini and Spider-dev folders the check and the
  unit tests read;
* ``commit.txt`` -- the commit the bundle was built at (the tree travels without ``.git``).

It fails, leaving nothing half-written, when the bundle is over :data:`LIMIT_MIB`.
Usage: ``python benchmarks/gpu_bundle.py [FOLDER]`` (default ``.gpu-bundle``).
"""
from __future__ import annotations

import importlib.metadata as md
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parent.parent
LIMIT_MIB = 60
#: Distributions in the GPU image ('cuda', read 2026-11-17; the device tool's KINDS.md).
IMAGE_HAS = set("""absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc
anyio attrs botorch build certifi charset-normalizer chex click cloudpickle cmake colorama
contourpy coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler
cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic
frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib
jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator
lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx
ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc
nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand
nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13
nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging
pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf
psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest
pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core
scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools
shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz
torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers
treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug
wheel wrapt xarray xxhash yarl zipp""".split())
#: What the training and evaluation path imports (pyproject's dependencies without the
#: notebook runner, JupyterLab and FAISS: the check runs no notebook and no dense index).
ROOTS = ["trl", "datasets", "gguf", "bm25s", "PyStemmer", "rank-bm25", "ir-measures",
         "ir-datasets", "ranx", "pyndeval", "tabulate"]
DATA = ["scifact", "nfcorpus", "hotpotqa-mini", "spider-dev"]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(roots: list[str]) -> dict[str, str]:
    """Installed distributions reachable from ``roots`` through their requirements (markers
    evaluated for Linux x86_64 CPython 3.12, no extras), minus the image's; name -> version."""
    env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython",
           "extra": ""}
    todo, seen, out = list(roots), set(), {}
    while todo:
        name = norm(todo.pop())
        if name in seen or name in IMAGE_HAS:
            continue
        seen.add(name)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            raise SystemExit(f"gpu-bundle: {name} is not installed here; run `make install`")
        out[name] = dist.version
        for raw in dist.requires or []:
            req = Requirement(raw)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(req.name)
    return out


def download(pins: dict[str, str], dest: Path) -> list[str]:
    """cp312 manylinux x86_64 wheels of ``pins`` into ``dest`` (the pinned version, else the
    newest with such a wheel); returns the names that had to float."""
    base = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
            "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
            "--abi", "abi3", "--abi", "none", "-d", str(dest)]
    for p in PLATFORMS + ["any"]:
        base += ["--platform", p]
    floated = []
    for name, version in sorted(pins.items()):
        if subprocess.run(base + [f"{name}=={version}"], capture_output=True).returncode == 0:
            continue
        floated.append(name)
        res = subprocess.run(base + [name], capture_output=True, text=True)
        if res.returncode != 0:
            raise SystemExit(f"gpu-bundle: no CPython 3.12 manylinux wheel of {name}: "
                             f"{res.stderr.strip().splitlines()[-1:]}")
    return floated


def size_mib(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def main(argv: list[str]) -> int:
    target = (REPO / (argv[0] if argv else ".gpu-bundle")).resolve()
    tmp = Path(tempfile.mkdtemp(prefix=".gpu-bundle.", dir=target.parent))
    try:
        pins = closure(ROOTS)
        floated = download(pins, tmp / "wheels")
        sys.path.insert(0, str(REPO / "benchmarks"))
        import gpu_check

        gpu_check.write_tokenizer(tmp / "tokenizer")
        from qrlib.data.datasets import candidate_dirs

        for name in DATA:
            src = next((d for d in candidate_dirs(name) if d.is_dir()), None)
            if src is None:
                raise SystemExit(f"gpu-bundle: offline data set {name} not found")
            shutil.copytree(src, tmp / "data" / name)
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO, capture_output=True, text=True).stdout.strip()
        (tmp / "commit.txt").write_text(head + ("-dirty" if dirty else "") + "\n")
        total = size_mib(tmp)
        parts = {p.name: round(size_mib(p), 1) for p in sorted(tmp.iterdir()) if p.is_dir()}
        if total > LIMIT_MIB:
            raise SystemExit(f"gpu-bundle: {total:.1f} MiB is over the {LIMIT_MIB} MiB limit "
                             f"({parts}); nothing written")
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"gpu-bundle: {target} {total:.1f} MiB ({parts}); {len(pins)} wheels"
          + (f", newer than here for want of a cp312 wheel: {floated}" if floated else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
