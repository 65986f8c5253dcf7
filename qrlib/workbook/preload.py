"""Faster allocator and OpenMP runtime for notebook kernels (vLLM's CPU worker asks for both).

vLLM's CPU backend warns unless tcmalloc and Intel OpenMP are in ``LD_PRELOAD``; measured here
(``benchmarks/bench_train.py --variants vllm,vllm-preload``, Qwen2.5-Coder-0.5B, 2 x 8
rollouts per GRPO step) they make a whole step about 1.35x faster, the update as much as the
generation. ``LD_PRELOAD`` only acts when a process starts, so the runner sets it for the
kernels it launches. ``QRLIB_PRELOAD=0`` turns it off.
"""
from __future__ import annotations

import glob
import os
import sys

TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4*"  # Debian libtcmalloc-minimal4


def preload_libs() -> list[str]:
    """tcmalloc (Debian's ``libtcmalloc-minimal4``) and the ``libiomp5.so`` that the install
    brings into the environment's ``lib/``, both or nothing (the pair is what was measured);
    ``[]`` when ``$QRLIB_PRELOAD`` is ``0``."""
    if os.environ.get("QRLIB_PRELOAD", "1") == "0":
        return []
    tcmalloc = sorted(glob.glob(TCMALLOC))[:1]
    iomp = sorted(glob.glob(os.path.join(sys.prefix, "lib", "libiomp5.so")))[:1]
    return tcmalloc + iomp if tcmalloc and iomp else []


def preload_env(current: str | None = None) -> dict[str, str]:
    """``{"LD_PRELOAD": ...}`` with :func:`preload_libs` ahead of ``current`` (duplicates
    dropped), or ``{}`` when there is nothing to add. tcmalloc keeps its default release
    policy: ``TCMALLOC_AGGRESSIVE_DECOMMIT=true`` (set here before) made notebook 06's steps
    45-67 s instead of about 30 s, 38 % of the CPU in the kernel re-faulting pages; the
    trainings hand freed pages back once per step instead
    (:func:`qrlib.rl.release.release_free_heap`), and between runs
    (:func:`qrlib.rl.release.release_memory`)."""
    libs = preload_libs()
    if not libs:
        return {}
    have = [p for p in (current or "").split(":") if p]
    return {"LD_PRELOAD": ":".join(dict.fromkeys([*libs, *have]))}
