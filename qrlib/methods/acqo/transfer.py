"""ACQO's trained decomposer away from home (ACQO Sec. 4.3-4.4, Fig. 5, Table 10): the steps
notebook 16 calls.

* :class:`Stage2Record` reads what notebook 07 saved of Stage II (``stage2.json``: the run
  summaries per retriever, tau(q) and the kept questions) as a typed record;
* :func:`rule_split` is the model-free row: the question plus up to two sub-queries of
  :func:`qrlib.methods.bandits.decompose.heuristic_split`;
* :func:`decompose` writes every test question's sub-queries with the base policy or an
  adapter (greedy, :func:`qrlib.methods.acqo.curriculum.generate_decompositions`);
* :func:`ranked_ids` turns a fused run into ranked document ids for the reader
  (:mod:`qrlib.generation.reader`).
"""
from __future__ import annotations

import gc
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.core.records import load_record, save_record
from qrlib.data import rows as qrows
from qrlib.generation import policy
from qrlib.methods.acqo.curriculum import generate_decompositions
from qrlib.methods.acqo.study import rule_split  # noqa: F401  (the model-free row)

STAGE2_FILE = "stage2.json"


@dataclass(frozen=True)
class Stage2Record:
    """Stage II's runs (ACQO Sec. 3.4) as notebook 07 saves them."""

    summaries: dict[str, dict[str, Any]]  # retriever -> qrlib.rl.train.train's summary
    tau: dict[str, dict[str, float]]  # retriever -> question id -> tau(q) (Eq. 7)
    kept: dict[str, list[str]]  # retriever -> the questions Stage II trained on (Eq. 8)

    def save(self, folder: str | os.PathLike) -> Path:
        return save_record(self, Path(folder) / STAGE2_FILE)

    @classmethod
    def load(cls, folder: str | os.PathLike) -> "Stage2Record":
        return load_record(cls, Path(folder) / STAGE2_FILE, writer="notebook 07_acqo_stage2")

    def adapter(self, retriever: str) -> str:
        """The Stage II adapter trained with ``retriever``; a one-line error when 07 has none."""
        if retriever not in self.summaries:
            raise QrlibError(f"notebook 07 trained no Stage II adapter for {retriever!r} "
                             f"(it trained: {', '.join(sorted(self.summaries)) or 'none'})")
        return self.summaries[retriever]["adapter"]


def decompose(model: str, adapter: str | os.PathLike | None, datasets: Mapping[str, Any],
              prompt: Any = None, *, contract: Any = None, prefill: str | None = None,
              max_new_tokens: int | None = None, batch_size: int = 16,
              autocast: bool | None = False) -> dict[str, list[dict]]:
    """``{dataset: decompositions}`` of every test question of each dataset, greedy, by the
    base ``model`` or with ``adapter`` (loaded once, freed after). With an adapter the
    decoding contract defaults to the one its training saved (``contract=adapter``:
    prompt, prefill, stop strings, budget, parser); without one, pass a contract or the
    prompt and its settings (:func:`qrlib.methods.acqo.curriculum.generate_decompositions`)."""
    if contract is None and adapter is not None:
        contract = adapter
    m, tok = policy.load_policy(model, adapter=adapter)
    try:
        return {name: generate_decompositions(m, tok, qrows.rows_from_dataset(ds), prompt,
                                              prefill=prefill, max_new_tokens=max_new_tokens,
                                              contract=contract, progress=False,
                                              autocast=autocast, batch_size=batch_size)
                for name, ds in datasets.items()}
    finally:
        del m
        gc.collect()


def ranked_ids(run: Mapping[str, Mapping[str, float]],
               qids: Sequence[str] | None = None) -> dict[str, list[str]]:
    """``{qid: doc ids best first}`` of a ``{qid: {doc: score}}`` run (ties keep the run's
    order)."""
    qids = list(run) if qids is None else list(qids)
    return {q: [d for d, _ in sorted(run.get(q, {}).items(), key=lambda x: -x[1])]
            for q in qids}
