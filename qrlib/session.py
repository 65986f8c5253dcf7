"""The first cell of a notebook: offline settings, seeds, threads, engine, folders, recorder.

Every notebook used to open with the same thirty lines; :func:`start` is them once::

    from qrlib import session
    S = session.start("13_deepretrieval_sql", run_dir=run_dir, figures_dir=figures_dir,
                      tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                      torch_threads=torch_threads, rollouts=rollouts)
    S.record("key.number", value)        # qrlib.eval.record.Recorder of this notebook

Call it before importing modules that load transformers: it sets ``HF_HUB_OFFLINE`` (no hub
download at run time), ``TOKENIZERS_PARALLELISM`` and ``$QRLIB_CACHE`` first.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Session:
    """The folders of one notebook run and its recorder."""

    name: str
    run_dir: Path
    figures_dir: Path
    tables_dir: Path
    out_dir: Path  # run_dir / name: this notebook's own artifacts
    record: Any  # qrlib.eval.record.Recorder
    backend: str  # the generation engine (hf | vllm)


def start(name: str, *, run_dir: str | os.PathLike, figures_dir: str | os.PathLike,
          tables_dir: str | os.PathLike, cache_dir: str | os.PathLike | None = None,
          seed: int = 0, torch_threads: int = 0, rollouts: str | None = None,
          dense_model: str | None = None) -> Session:
    """Offline hub, the shared cache, plot style, torch's seed and threads, the generation
    backend (``rollouts``; ``$QRLIB_ROLLOUTS`` overrides), the encoder of dense retrievers
    built without one (``dense_model``; :func:`qrlib.retrieval.retrievers.set_default_dense_model`),
    ``run_dir/name`` created, and the notebook's recorder. Prints the backend."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if cache_dir:
        os.environ["QRLIB_CACHE"] = str(cache_dir)
    import torch

    from qrlib import plots
    from qrlib.eval.record import Recorder
    from qrlib.generation import engine

    plots.setup()
    if dense_model is not None:
        from qrlib.retrieval.retrievers import set_default_dense_model

        set_default_dense_model(dense_model)
    backend = engine.set_backend(rollouts) if rollouts else engine.backend()
    print("generation backend:", backend)
    torch.manual_seed(seed)
    if torch_threads:
        torch.set_num_threads(int(torch_threads))
    run_dir = Path(run_dir)
    out_dir = run_dir / name
    out_dir.mkdir(parents=True, exist_ok=True)
    return Session(name, run_dir, Path(figures_dir), Path(tables_dir), out_dir,
                   Recorder(run_dir, name), backend)
