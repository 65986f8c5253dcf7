"""ACQO's ablation (Table 5, Sec. 4.4): the steps notebook 18 calls.

Table 5 removes one component at a time: Rank-Score Fusion (RRF fuses the sub-query lists
instead, in the reward and at test), Stage II of the curriculum, and query decomposition.
The last two need no training here (07's Stage I adapter; 12's single-query RL); the first
retrains, and must differ from ACQO in the fusion only:

* :func:`rerun_config` is an earlier run's saved training config (``config.json``) under a
  new name and start adapter, so every other setting is the one ACQO trained with;
* :func:`check_env` fails unless the ablation's reward environment prints as ACQO's did with
  only the fusion changed (:func:`check_swap`: only one named field changed);
* :func:`training_collection` rebuilds 06's training corpus and qrels from its record;
* :func:`load_subqueries` reads the test decompositions 07 and 12 saved, so their rows are
  scored here without decoding again;
* :func:`check_same_test` fails unless the raw question scores as 07 published it.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.methods.acqo.study import rebuild_collection as training_collection  # noqa: F401

# Fields of a saved config.json that qrlib.rl.train writes beside TrainConfig's own.
_RUN_ONLY = ("rows_fingerprint", "env")
RUNS = ("rrf-stage2", "rrf-both")  # readings of "without RSF" (notebook 18 explains both)
# Levers on Stage I, not Table 5 rows (notebook 18 explains): fused-stage1 rewards Stage I
# with the fused list of all its sub-queries (Eq. 9 with lambda = 0) instead of Eq. 6.
LEVERS = ("fused-stage1",)


def rerun_config(config_json: str | os.PathLike, *, name: str,
                 init_adapter: str | None, **over: Any) -> dict[str, Any]:
    """The TrainConfig fields of the run saved at ``config_json``, renamed, started from
    ``init_adapter``, with ``over`` applied (a one-line error for an unknown run)."""
    path = Path(config_json)
    if not path.exists():
        raise QrlibError(f"no saved training config at {path}; run the notebook that trains "
                         f"it first")
    cfg = json.loads(path.read_text(encoding="utf-8"))
    for key in _RUN_ONLY:
        cfg.pop(key, None)
    cfg.update(name=name, init_adapter=init_adapter, **over)
    return cfg


def saved_env(config_json: str | os.PathLike) -> str:
    """The reward environment a run trained with, as its config.json recorded it."""
    return json.loads(Path(config_json).read_text(encoding="utf-8"))["env"]


def check_env(env: Any, reference: str, *, fusion: str, reference_fusion: str = "rsf") -> None:
    """Raise unless ``repr(env)`` is ``reference`` with ``fusion={reference_fusion!r}``
    replaced by ``fusion={fusion!r}``: the ablation changes the fusion and nothing else."""
    check_swap(env, reference, field="fusion", value=fusion, reference_value=reference_fusion)


def check_swap(env: Any, reference: str, *, field: str, value: str,
               reference_value: str) -> None:
    """Raise unless ``repr(env)`` is ``reference`` with ``{field}={reference_value!r}``
    replaced by ``{field}={value!r}``: a rerun that changes one field and nothing else."""
    old, new = f"{field}={reference_value!r}", f"{field}={value!r}"
    if old not in reference:
        raise QrlibError(f"the reference run's environment names no {reference_value} "
                         f"{field}: {reference}")
    if repr(env) != reference.replace(old, new):
        raise QrlibError(f"the rerun's reward environment {env!r} differs from the reference "
                         f"{reference} in more than the {field}")


def load_subqueries(path: str | os.PathLike, key: str, writer: str) -> dict[str, list[str]]:
    """``{qid: sub-queries}`` of the entry ``key`` of a decompositions file as 07
    (``"<row> | <dataset>"``) and 12 (``"<dataset> | <retriever>"``) save them."""
    return {d["qid"]: list(d["subqueries"]) for d in _entry(path, key, writer)}


def load_validity(path: str | os.PathLike, key: str, writer: str) -> float:
    """Share of the entry's decompositions that were well-formed (its test validity)."""
    entry = _entry(path, key, writer)
    return sum(bool(d.get("format_ok")) for d in entry) / max(len(entry), 1)


def _entry(path: str | os.PathLike, key: str, writer: str) -> list[dict[str, Any]]:
    """The decompositions of entry ``key`` of ``path`` (one-line errors naming ``writer``)."""
    path = Path(path)
    if not path.exists():
        raise QrlibError(f"{path} does not exist; run {writer} first")
    data = json.loads(path.read_text(encoding="utf-8"))
    if key not in data:
        raise QrlibError(f"{path} has no entry {key!r} (it has: {', '.join(sorted(data))}); "
                         f"rerun {writer} with these settings")
    return list(data[key])


def check_same_test(mine: Mapping[str, float], published: Mapping[str, float], *,
                    where: str, tol: float = 1e-5) -> None:
    """Raise unless the raw question's per-question scores equal the ones notebook 07
    published (same questions, same corpus, same retriever)."""
    a, b = {str(k): v for k, v in mine.items()}, {str(k): v for k, v in published.items()}
    if sorted(a) != sorted(b):
        raise QrlibError(f"{where}: {len(a)} test questions here, {len(b)} in 07's table: the "
                         f"test settings do not match notebook 07's")
    worst = max((abs(a[q] - b[q]) for q in a), default=0.0)
    if worst > tol:
        raise QrlibError(f"{where}: the raw question's nDCG@10 differs from 07's by up to "
                         f"{worst:.2g}: the test settings do not match notebook 07's")

