"""The first cell of a notebook: offline settings, seeds, threads, engine, folders, recorder.

Every notebook used to open with the same thirty lines; :func:`start` is them once::

    from qrlib import session
    S = session.start("13_deepretrieval_sql", run_dir=run_dir, figures_dir=figures_dir,
                      tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                      torch_threads=torch_threads, rollouts=rollouts)
    S.record("key.number", value)        # qrlib.eval.record.Recorder of this notebook

Call it before importing modules that load transformers: it sets ``HF_HUB_OFFLINE`` (no hub
download at run time), ``TOKENIZERS_PARALLELISM`` and ``$QRLIB_CACHE`` first.

Outputs stay clean (:func:`route_logs`): library logging (vLLM, transformers, TRL),
Python warnings, C-level messages on stderr and the trainer's per-step lines go to
``run_dir/<name>/run.log``; progress bars are off; recorded numbers go to the record file
without a printed line; tables print whole.
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
    run_dir = Path(run_dir)
    out_dir = run_dir / name
    out_dir.mkdir(parents=True, exist_ok=True)
    route_logs(out_dir / "run.log")
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
    return Session(name, run_dir, Path(figures_dir), Path(tables_dir), out_dir,
                   Recorder(run_dir, name, quiet=True), backend)


def _quiet_tqdm() -> None:
    """Every tqdm bar off, even one a library asks for with ``disable=False`` (which beats
    ``TQDM_DISABLE``): sentence-transformers' ``encode`` shows its bar whenever the root
    logger is at INFO, as it is once :func:`route_logs` ran."""
    try:
        import tqdm.std as tqdm_std
    except ImportError:
        return
    init = tqdm_std.tqdm.__init__
    if getattr(init, "qrlib_quiet", False):
        return

    def quiet_init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["disable"] = True
        init(self, *args, **kwargs)

    quiet_init.qrlib_quiet = True  # type: ignore[attr-defined]
    tqdm_std.tqdm.__init__ = quiet_init  # type: ignore[method-assign]


def route_logs(path: Path) -> Path:
    """Send everything but the notebook's own results to ``path`` (appended): the root
    logger (vLLM with ``VLLM_CONFIGURE_LOGGING=0``, transformers with its own handler
    removed, TRL, PEFT), Python warnings, and, inside a Jupyter kernel, C-level writes to
    file descriptor 2 (PyTorch's and vLLM's native warnings); progress bars off
    (``TQDM_DISABLE``, ``HF_HUB_DISABLE_PROGRESS_BARS``); the trainer's per-step lines
    (``QRLIB_RUN_LOG``, :mod:`qrlib.rl.steplog`); pandas prints every column."""
    import logging
    import sys
    import warnings

    for var, value in (("TQDM_DISABLE", "1"), ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
                       ("VLLM_CONFIGURE_LOGGING", "0"), ("QRLIB_RUN_LOG", str(path))):
        os.environ[var] = value
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    handler.qrlib_run_log = True  # a second start replaces it rather than adding another
    root.handlers = [h for h in root.handlers
                     if not getattr(h, "qrlib_run_log", False) and
                     (not isinstance(h, logging.StreamHandler) or isinstance(h, logging.FileHandler))
                     ] + [handler]
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    warnings.simplefilter("default")
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        pass
    else:
        hf_logging.disable_default_handler()
        hf_logging.enable_propagation()
        hf_logging.disable_progress_bar()
    _quiet_tqdm()
    if "ipykernel" in sys.modules:  # native stderr of this kernel into the log, not the cell
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.dup2(fd, 2)
        os.close(fd)
    import pandas as pd

    pd.set_option("display.max_columns", None)
    pd.set_option("display.max_rows", 500)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_colwidth", 120)
    return path
