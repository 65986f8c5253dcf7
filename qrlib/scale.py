"""The training scale behind a result row (issue 24, item 5).

Every trained row of the workbook says how much training produced it, read from the runs'
own per-step logs (:func:`qrlib.train.log_scale`), never from the requested settings:

* ``policy``: the model (or ``-`` for rows without one, e.g. the raw query);
* ``RL steps``: optimizer steps taken, summed over the runs behind the row (Stage I + II);
* ``train queries``: distinct training queries the RL steps saw (union over the runs);
* ``rollouts``: rollouts scored;
* ``train min``: wall minutes of the training steps (this machine's CPU minutes);
* ``test queries``: questions the row is evaluated on.

An untrained row has zeros, so a table can be filtered on ``RL steps > 0``. A warm start
(SFT) is not RL: its steps go to ``SFT steps`` (0 when none).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# The tables with trained rows, by notebook; each carries SCALE_COLUMNS (tests read them).
TRAINED_TABLES = {
    "05_vanilla_rl": ("05_test_results", "05_paired_differences"),
    "07_acqo_stage2": ("07_acqo_results",),
    "08_sage_rlqr": ("08_sage_results", "08_sage_ablation", "08_rlqr_results"),
    "10_evaluation": ("10_vs_raw",),
}
SCALE_COLUMNS = ("policy", "RL steps", "SFT steps", "train queries", "rollouts", "train min",
                 "test queries")


def scale_columns(policy: str | None, logs: Sequence[Any] = (), *, test_queries: int,
                  sft_steps: int = 0, sft_queries: int = 0) -> dict[str, Any]:
    """The :data:`SCALE_COLUMNS` of one row from the ``log.csv`` frames of the RL runs
    behind it (several for a curriculum; empty for an untrained row). ``sft_queries``:
    distinct queries of a warm start, counted when no RL run saw more."""
    import pandas as pd

    from qrlib.train import log_scale

    per = [log_scale(lg) for lg in logs]
    queries = log_scale(pd.concat(list(logs), ignore_index=True))["queries"] if per else 0
    return {"policy": policy or "-",
            "RL steps": int(sum(s["steps"] for s in per)),
            "SFT steps": int(sft_steps),
            "train queries": int(max(queries, sft_queries)),
            "rollouts": int(sum(s["rollouts"] for s in per)),
            "train min": round(float(sum(s["minutes"] for s in per)), 1),
            "test queries": int(test_queries)}


def missing_scale(columns: Sequence[str]) -> list[str]:
    """The :data:`SCALE_COLUMNS` a table's header lacks (what the tests check)."""
    have = set(columns)
    return [c for c in SCALE_COLUMNS if c not in have]
