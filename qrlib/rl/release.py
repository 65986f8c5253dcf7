"""Give a finished training's memory back before the next one in the same process.

Measured (notebook 13 at ``cpu``): after ``train()`` returns, a 0.5B GRPO run
with vLLM rollouts still holds about 10.7 GiB in the process, and ``gc.collect()`` frees
none of it. Three causes:

* **A stored traceback.** ``vllm.multimodal.media.audio`` tries ``import torchcodec`` when
  it is first imported and keeps the ``ImportError`` as a module global. When that first
  import happens inside ``trainer.train()``, the exception's traceback holds the trainer's
  frames, hence the trainer, the policy, its optimizer and the engine's weights, for the
  life of the process (about 5.3 GiB of live tensors here). :func:`drop_stored_tracebacks`
  clears the tracebacks of exceptions that library modules keep as globals.
* **The allocator.** The rest (about 5.4 GiB) is memory glibc's ``malloc`` has freed but
  not returned to the system; ``malloc_trim(0)`` returns it (:func:`release_memory`; under
  tcmalloc, its ``MallocExtension_ReleaseFreeMemory``).

* **A compile hook.** TRL's colocated vLLM engine compiles its model, and vLLM's
  ``TorchCompileWithNoGuardsWrapper`` registers a bound ``bytecode_hook`` with
  ``torch._dynamo.convert_frame.register_bytecode_hook`` that it never removes: the hook
  keeps the engine's whole model (Qwen2.5-Coder-0.5B: +1.45 GiB of resident memory per
  training, measured on notebook 05 at ``cpu``, which peaked at 19.0 GB over four runs).
  :func:`drop_compile_hooks` removes the hooks of closed engines (about 80 % of that growth
  back in a probe of two trainings: +0.30 instead of +1.45 GiB per run).

Without this, the SFT cold start of a second run in the same process (notebook 13's
"RL after SFT") went out of memory on the 23 GiB machine.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import math
import sys
from typing import Iterable

__all__ = ["drop_stored_tracebacks", "drop_compile_hooks", "release_free_heap",
           "release_memory", "memory_gib"]


def drop_stored_tracebacks(prefixes: Iterable[str] = ("vllm",)) -> int:
    """Set ``__traceback__`` to ``None`` on every exception (and its cause/context) held as
    a global of a loaded module whose name starts with one of ``prefixes``; the exception
    objects themselves stay, so code that re-raises them still can. Returns how many
    tracebacks were cleared."""
    prefixes = tuple(prefixes)
    cleared = 0
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(prefixes):
            continue
        for value in list(getattr(module, "__dict__", {}).values()):
            seen: set[int] = set()
            exc = value
            while isinstance(exc, BaseException) and id(exc) not in seen:
                seen.add(id(exc))
                if exc.__traceback__ is not None:
                    exc.__traceback__ = None
                    cleared += 1
                exc = exc.__cause__ or exc.__context__
    return cleared


def drop_compile_hooks(prefixes: Iterable[str] = ("vllm",)) -> int:
    """Remove from torch dynamo's bytecode-hook registry every hook that is a bound method
    of an object of a module starting with one of ``prefixes`` (vLLM's compile wrapper,
    which keeps its engine's model alive otherwise); how many were removed. Only between
    trainings, when no engine of ``prefixes`` is running (:func:`release_memory`)."""
    convert_frame = sys.modules.get("torch._dynamo.convert_frame")
    hooks = getattr(convert_frame, "_bytecode_hooks", None)
    if not isinstance(hooks, dict):
        return 0
    prefixes = tuple(prefixes)
    drop = [k for k, h in hooks.items()
            if type(getattr(h, "__self__", None)).__module__.startswith(prefixes)]
    for k in drop:
        hooks.pop(k, None)
    return len(drop)


def _tcmalloc_release() -> bool:
    """tcmalloc's ``MallocExtension_ReleaseFreeMemory()`` where tcmalloc is the process's
    allocator (``LD_PRELOAD``, :mod:`qrlib.workbook.preload`); False otherwise."""
    try:
        fn = ctypes.CDLL(None).MallocExtension_ReleaseFreeMemory
    except (OSError, AttributeError, TypeError):
        return False
    fn()
    return True


def _malloc_trim() -> bool:
    """Hand the allocator's free pages back to the system: tcmalloc's release where it is
    loaded, glibc's ``malloc_trim(0)`` otherwise; False where neither exists (macOS, musl)."""
    if _tcmalloc_release():
        return True
    name = ctypes.util.find_library("c")
    try:
        ctypes.CDLL(name).malloc_trim(0)
        return True
    except (OSError, AttributeError, TypeError):
        return False


def release_free_heap() -> bool:
    """Once per training step (:class:`qrlib.rl.steplog.StepLogger`): the pages the step
    freed go back to the system, so the resident set at rest does not creep up step after
    step. Measured on notebook 06 at ``cpu`` (2 cores): with glibc alone the kernel's RSS at
    rest grew about 22 MB a step (12.6 to 14.8 GiB over 100 steps, peak 16.4 GB); tcmalloc
    with ``TCMALLOC_AGGRESSIVE_DECOMMIT`` kept it at 9 GiB but spent 38 % of the CPU in the
    kernel re-faulting pages (steps of 45-67 s instead of about 30 s). Releasing once per
    step pays the page faults once per step instead of on every free."""
    return _malloc_trim()


def memory_gib() -> dict[str, float]:
    """This process's resident memory now (``rss_gib``, psutil) and its peak so far
    (``peak_rss_gib``, ``getrusage``'s ``ru_maxrss``: KiB on Linux, bytes on macOS; ``nan``
    where there is no ``resource`` module), in GiB. The training step log records both, so
    the peak covers every pass of a step (generation, log-prob pass, backward)."""
    import psutil

    rss = psutil.Process().memory_info().rss / 2**30
    try:
        import resource
    except ImportError:
        return {"rss_gib": round(rss, 3), "peak_rss_gib": math.nan}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = peak / 2**30 if sys.platform == "darwin" else peak / 2**20
    return {"rss_gib": round(rss, 3), "peak_rss_gib": round(peak, 3)}


def release_memory(prefixes: Iterable[str] = ("vllm",)) -> dict[str, float | int | bool]:
    """Between two trainings: close qrlib's generation engines, drop stored library
    tracebacks (:func:`drop_stored_tracebacks`) and compile hooks
    (:func:`drop_compile_hooks`), collect, and hand freed heap back to the
    system (and, on CUDA, PyTorch's cached GPU blocks to the driver). Returns the
    process's resident memory before and after (GiB) and what was done."""
    from qrlib.generation import engine

    before = memory_gib()["rss_gib"]
    engine.close_engines()
    cleared = drop_stored_tracebacks(prefixes)
    hooks = drop_compile_hooks(prefixes)
    gc.collect()
    trimmed = _malloc_trim()
    cuda = engine.free_cuda_cache()  # PyTorch's cached CUDA blocks back to the driver
    after = memory_gib()["rss_gib"]
    return {"rss_before_gib": round(before, 2), "rss_after_gib": round(after, 2),
            "tracebacks_cleared": cleared, "compile_hooks_dropped": hooks,
            "malloc_trim": trimmed, "cuda_cache_freed": cuda}
