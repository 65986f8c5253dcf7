"""What ACQO's Stage I notebook (06) hands to Stage II (07): one typed record.

Saved by 06 as ``run_dir/06_acqo_stage1/stage1.json`` with
:func:`qrlib.core.records.save_record` and loaded by 07 with :meth:`Stage1Record.load`,
which fails in one line when the file is absent or was written with other fields.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.core.records import load_record, save_record

FILE = "stage1.json"


@dataclass(frozen=True)
class Stage1Record:
    """Stage I's runs and the settings Stage II must repeat (ACQO Sec. 3.4)."""

    summaries: dict[str, dict[str, Any]]  # retriever -> qrlib.rl.train.train's summary (adapter, sft_adapter, steps, ...)
    train_rows: list[dict[str, Any]]  # the pooled training questions
    prompt: str  # prompt registry name of the decomposition prompt
    prefill: str  # start of the assistant's answer
    train_datasets: list[str]  # datasets whose train splits were pooled
    corpus_ids: list[str]  # paragraph ids of the training corpus
    eta: float  # ACQO Eq. 4 decay
    delta: float  # ACQO Eq. 5 format penalty
    reward_k: int  # ranks scored by Phi (Eq. 3)
    n_distractors: int | None  # distractor paragraphs per dataset (None: full corpus)
    max_completion_length: int  # token budget of one rollout
    warm_start_samples: int  # rejection-sampling cold start samples per question (0: off)
    sft_steps: int  # SFT steps of the cold start
    sft_questions: dict[str, int] = field(default_factory=dict)  # retriever -> questions whose SFT target is a sample

    def save(self, folder: str | os.PathLike) -> Path:
        return save_record(self, Path(folder) / FILE)

    @classmethod
    def load(cls, folder: str | os.PathLike) -> "Stage1Record":
        return load_record(cls, Path(folder) / FILE, writer="notebook 06_acqo_stage1")

    def summary(self, retriever: str) -> dict[str, Any]:
        """The Stage I summary of ``retriever``; a one-line error when 06 did not train it."""
        if retriever not in self.summaries:
            raise QrlibError(f"notebook 06 trained no Stage I adapter for {retriever!r} "
                             f"(it trained: {', '.join(sorted(self.summaries)) or 'none'})")
        return self.summaries[retriever]

    def contract(self, retriever: str, prompt: str | None = None) -> Any:
        """The decoding contract Stage I of ``retriever`` trained with (its adapter's
        ``decoding.json``: prompt, prefill, stop strings, budget, parser), with another
        ``prompt`` for an untrained row that is decoded as Stage I's rollouts were."""
        import dataclasses

        from qrlib.generation.contract import DecodingContract

        c = DecodingContract.load(self.summary(retriever)["adapter"])
        return c if prompt is None else dataclasses.replace(c, prompt=prompt)
