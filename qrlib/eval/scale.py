"""The training scale behind a result row (issue 24, item 5).

Every trained row of the workbook says how much training produced it, read from the runs'
own per-step logs (:func:`log_scale`), never from the requested settings:

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

# Below this many optimizer steps a training run is a plumbing check, not a result (the
# developers' guide; issue 24 asks for at least 60 steps of at least 2 questions x 8 rollouts).
PLUMBING_STEPS = 60
SCALE_COLUMNS = ("policy", "RL steps", "SFT steps", "train queries", "rollouts", "train min",
                 "test queries")


def log_scale(log: Any) -> dict[str, float]:
    """The training scale a run actually reached, read from its per-step ``log.csv`` (not
    from the requested settings): optimizer steps taken, distinct training queries seen,
    rollouts scored and wall minutes of the steps."""
    qids: set[str] = set()
    for v in (log["qids"].dropna() if "qids" in log else []):
        qids.update(q for q in str(v).split(";") if q and q != "nan")
    rollouts = float(log["rollouts"].sum()) if "rollouts" in log else float("nan")
    minutes = float(log["step_seconds"].sum()) / 60 if "step_seconds" in log else float("nan")
    return {"steps": int(log["step"].nunique()) if "step" in log else 0,
            "queries": len(qids), "rollouts": rollouts, "minutes": minutes}


def fmt_scale(scale: dict[str, float]) -> str:
    """``"12 steps, 24 queries, 192 rollouts, 3.1 min"`` from :func:`log_scale`."""
    return (f"{scale['steps']} steps, {scale['queries']} queries, {scale['rollouts']:.0f} "
            f"rollouts, {scale['minutes']:.1f} min")


def plumbing_note(rl_steps: int) -> str:
    """``"; a plumbing check, not a result"`` for a run under :data:`PLUMBING_STEPS` RL
    steps, ``""`` otherwise (appended to a row's description)."""
    return "; a plumbing check, not a result" if 0 < rl_steps < PLUMBING_STEPS else ""


def scale_columns(policy: str | None, logs: Sequence[Any] = (), *, test_queries: int,
                  sft_steps: int = 0, sft_queries: int = 0) -> dict[str, Any]:
    """The :data:`SCALE_COLUMNS` of one row from the ``log.csv`` frames of the RL runs
    behind it (several for a curriculum; empty for an untrained row). ``sft_queries``:
    distinct queries of a warm start, counted when no RL run saw more."""
    import pandas as pd

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
