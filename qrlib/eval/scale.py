"""The training scale behind a result row.

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

Beside the scale, every trained row states whether its test decoding produced what training
produced (:data:`VALIDITY_COLUMNS`): ``test valid`` (share of test outputs in the trained
format), ``train valid`` (share of format-valid rollouts in the last quarter of the final
run's steps) and ``valid flag`` (``test valid < 0.9`` below :data:`VALID_BAR`). A flagged row
measures its decoding, not its method. Beside them, the collapse check of the same quarter
(:data:`COLLAPSE_COLUMNS`): ``train copy`` (share of rollouts that copied the input query) and
``train echo`` (share that echoed the prompt's own examples), the step log's ``copy`` and
``echo`` columns (:mod:`qrlib.rl.health`; NaN for a log without them or an untrained row).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Below this many optimizer steps a training run is a plumbing check, not a result (the
# developers' guide asks for at least 60 steps of at least 2 questions x 8 rollouts).
PLUMBING_STEPS = 60
SCALE_COLUMNS = ("policy", "RL steps", "SFT steps", "train queries", "rollouts", "train min",
                 "test queries")
#: Test outputs well-formed below this share flag a row (the trained model's test decoding
#: does not produce what its training produced).
VALID_BAR = 0.9
#: The last training quarter's collapse shares (:mod:`qrlib.rl.health`'s ``copy`` and ``echo``).
COLLAPSE_COLUMNS = ("train copy", "train echo")
VALIDITY_COLUMNS = ("test valid", "train valid", "valid flag", *COLLAPSE_COLUMNS)


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


def last_quarter_mean(log: Any, column: str = "format_valid") -> float:
    """Mean of ``column`` (``format_valid`` by default) over the last quarter of a run's
    steps (NaN without the column)."""
    if column not in log or not len(log):
        return float("nan")
    steps = sorted(log["step"].unique()) if "step" in log else []
    last = log[log["step"].isin(steps[len(steps) - max(1, len(steps) // 4):])] if steps else log
    value = float(last[column].mean())
    return round(value, 4) if value == value else float("nan")


def validity_columns(test_valid: float | None, logs: Sequence[Any] = ()) -> dict[str, Any]:
    """The :data:`VALIDITY_COLUMNS` of one row: its test format validity, the last-quarter
    training validity of the final run in ``logs`` (NaN untrained), the flag, and that
    quarter's copy and echo shares."""
    tv = float("nan") if test_valid is None else round(float(test_valid), 4)
    final = logs[-1] if len(logs) else None
    def quarter(column: str) -> float:
        return last_quarter_mean(final, column) if final is not None else float("nan")
    return {"test valid": tv, "train valid": quarter("format_valid"),
            "valid flag": f"test valid < {VALID_BAR}" if tv == tv and tv < VALID_BAR else "",
            "train copy": quarter("copy"), "train echo": quarter("echo")}


def scale_columns(policy: str | None, logs: Sequence[Any] = (), *, test_queries: int,
                  sft_steps: int = 0, sft_queries: int = 0,
                  test_valid: float | None = None) -> dict[str, Any]:
    """The :data:`SCALE_COLUMNS` and :data:`VALIDITY_COLUMNS` of one row from the
    ``log.csv`` frames of the RL runs behind it (several for a curriculum, the final one
    last; empty for an untrained row). ``sft_queries``: distinct queries of a warm start,
    counted when no RL run saw more; ``test_valid``: the row's share of well-formed test
    outputs (None for a row without a model)."""
    import pandas as pd

    logs = list(logs)
    per = [log_scale(lg) for lg in logs]
    queries = log_scale(pd.concat(logs, ignore_index=True))["queries"] if per else 0
    return {"policy": policy or "-",
            "RL steps": int(sum(s["steps"] for s in per)),
            "SFT steps": int(sft_steps),
            "train queries": int(max(queries, sft_queries)),
            "rollouts": int(sum(s["rollouts"] for s in per)),
            "train min": round(float(sum(s["minutes"] for s in per)), 1),
            "test queries": int(test_queries),
            **validity_columns(test_valid, logs)}


def flagged(row: Any) -> str:
    """``" (flagged: test outputs well-formed 0.00, training's last quarter 0.99; ...)"`` for a row
    whose ``valid flag`` is set, else ``""`` (appended to a row's sentence)."""
    flag = row.get("valid flag")
    if not isinstance(flag, str) or not flag.strip():  # "" is read back from a CSV as NaN
        return ""
    train = float(row.get("train valid", float("nan")))
    train = f", training's last quarter {train:.2f}" if train == train else ""
    return (f" (flagged: test outputs well-formed {float(row['test valid']):.2f}{train}; the row "
            "measures the decoding, not the method)")


def missing_scale(columns: Sequence[str]) -> list[str]:
    """The :data:`SCALE_COLUMNS` a table's header lacks (what the tests check)."""
    have = set(columns)
    return [c for c in SCALE_COLUMNS if c not in have]
