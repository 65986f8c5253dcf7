"""DeepRetrieval's database search (Sec. 3.3, Table 3) on Spider: the steps notebook 13 calls
around the task code of :mod:`qrlib.methods.deepretrieval.sql_task`.

* :func:`split_table` describes the by-database split and the hardness levels used;
* :func:`run_specs`, :func:`run_contract`, :func:`sql_env` and :func:`sql_config` set up the
  three RL runs (from scratch, after an SFT cold start on gold SQL, with reasoning) with the
  execution-match reward of Table 8 and the decoding contract each run trains with;
* :func:`sql_curves` draws the per-step logs; :func:`eval_models` lists the rows of the test
  (zero-shot, SFT, RL), each with the contract it decodes with;
* :func:`row_scales`, :func:`table3`, :func:`comparison_rows` and :func:`result_records`
  build Table 3 on our test databases, its paired comparisons and the recorded numbers;
  :func:`examples` and :func:`best_sentence` feed the last cells.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qrlib.eval.compare import compare
from qrlib.eval.scale import fmt_scale, log_scale, scale_columns
from qrlib.generation import prompts
from qrlib.generation.contract import DecodingContract
from qrlib.methods.deepretrieval import sql_task
from qrlib.rl.config import load_config
from qrlib.rl.env import RewardEnv

__all__ = ["split_table", "run_specs", "run_contract", "sql_env", "sql_config", "sql_curves",
           "eval_models", "row_scales", "table3", "comparison_rows", "result_records",
           "examples", "best_sentence", "outcome_pairs", "BASE", "SFT_ROW"]

#: The row every other row is compared with: the zero-shot model without reasoning.
BASE = "zero-shot (nothink)"
#: The row of the SFT-only adapter (the cold start's first step).
SFT_ROW = "SFT on gold (nothink)"


def split_table(all_train: Sequence[Mapping], all_test: Sequence[Mapping],
                train_rows: Sequence[Mapping], test_rows: Sequence[Mapping],
                levels: Mapping[str, str]) -> Any:
    """One row per part (train, test): databases, questions, questions used and the used
    questions per Spider hardness level."""
    import pandas as pd

    return pd.DataFrame([{"part": part, "databases": len({r["db_id"] for r in rs}),
                          "questions": len(rs), "used": len(used),
                          **{lv: sum(levels[r["qid"]] == lv for r in used) for lv in sql_task.LEVELS}}
                         for part, rs, used in (("train", all_train, train_rows),
                                                ("test", all_test, test_rows))])


def run_specs(train_rows: Sequence[Mapping], *, rl_prompt: str, prefill: str, sft_steps: int,
              think_prompt: str) -> dict[str, dict[str, Any]]:
    """The three runs by row label: RL from scratch, RL after SFT on the gold SQL (its rows
    carry ``sft_target``), and RL from scratch with reasoning (the think prompt's prefill)."""
    return {"RL from scratch": dict(run="scratch", sft_steps=0, rows=list(train_rows),
                                    prompt=rl_prompt, prefill=prefill),
            "RL after SFT": dict(run="coldstart", sft_steps=sft_steps, prompt=rl_prompt,
                                 prefill=prefill,
                                 rows=sql_task.gold_targets(train_rows, rl_prompt)),
            "RL from scratch (think)": dict(run="think", sft_steps=0, rows=list(train_rows),
                                            prompt=think_prompt,
                                            prefill=prompts.get(think_prompt).meta["prefill"])}


def run_contract(spec: Mapping[str, Any], *, max_new_tokens: int,
                 think_max_new_tokens: int) -> DecodingContract:
    """The decoding contract of a run (prompt, prefill, stop at ``</answer>``, budget,
    parser): its rollouts and its test queries decode with it, and so does a zero-shot row
    with its prompt. Reasoning (the ``think`` run) gets the longer budget."""
    long = spec["run"] == "think"
    return DecodingContract(prompt=spec["prompt"], prefill=spec["prefill"], stop=("</answer>",),
                            max_new_tokens=think_max_new_tokens if long else max_new_tokens,
                            fmt=prompts.get(spec["prompt"]).meta["fmt"])


def sql_env(spec: Mapping[str, Any], *, preset: str, exec_bonus: float,
            timeout_s: float) -> RewardEnv:
    """The execution-match reward (``deepretrieval_sql``): Table 8's (``preset="paper"``) or
    the released ``spider.py``'s, with App. F's bonus for SQL that runs when non-zero."""
    return RewardEnv(None, {}, reward="deepretrieval_sql",
                     fmt=prompts.get(spec["prompt"]).meta["fmt"],
                     think_prefilled=spec["prefill"].endswith("<think>"),
                     preset=None if preset == "paper" else preset, sql_timeout_s=timeout_s,
                     **({"exec_bonus": exec_bonus} if exec_bonus else {}))


def sql_config(spec: Mapping[str, Any], contract: DecodingContract, *, max_steps: int,
               lora_r: int, **fields: Any) -> Any:
    """The :class:`~qrlib.rl.config.TrainConfig` of run ``sql-<run>``: DAPO with the
    contract's prompt, prefill, budget and stop strings, the run's SFT steps, LoRA alpha =
    2r and a checkpoint every quarter of the steps; ``fields`` (model, sampling, rates, ...)
    as given."""
    return load_config(dict(
        name=f"sql-{spec['run']}", prompt=contract.prompt, prefill=contract.prefill,
        reward="deepretrieval_sql", algorithm="dapo", max_steps=max_steps,
        sft_steps=spec["sft_steps"], max_completion_length=contract.max_new_tokens,
        lora_r=lora_r, lora_alpha=2 * lora_r, stop=list(contract.stop),
        save_steps=max(1, max_steps // 4), **fields))


def sql_curves(logs: Mapping[str, Any], model: str) -> tuple[Any, str]:
    """Reward, format-valid share and completion length per step (rolling mean of 8), one
    colour per run; returns ``(figure, setting)`` with each run's scale read from its log."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.4))
    for i, (label, log) in enumerate(logs.items()):
        for ax, col in zip(axes, ("reward", "format_valid", "completion_length")):
            ax.plot(log.step, log[col].rolling(8, min_periods=1).mean(), color=f"C{i}",
                    label=label)
    axes[0].set(xlabel="training step", ylabel="reward (rolling mean of 8)")
    axes[1].set(xlabel="training step", ylabel="format-valid rollouts", ylim=(-0.05, 1.05))
    axes[2].set(xlabel="training step", ylabel="completion tokens (reasoning + SQL)")
    for ax in axes:
        plots.legend_outside(ax, where="below")
    fig.tight_layout()
    setting = f"{model}; from the logs: " + "; ".join(f"{k} {fmt_scale(log_scale(lg))}"
                                                      for k, lg in logs.items())
    return fig, setting


def eval_models(contracts: Mapping[str, DecodingContract], zero_shot_prompts: Sequence[str],
                summaries: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[Any, Any]]:
    """Label -> ``(adapter or None, contract)`` of every test row: a zero-shot row per prompt
    with the contract of the run trained with that prompt, the SFT-only adapter of the
    cold-start run (skipped when it has none), and each trained adapter with its own saved
    contract (``decoding.json``)."""
    models = {f"zero-shot ({p.split('-')[-1]})": (None, contracts[p]) for p in zero_shot_prompts}
    if "RL after SFT" in summaries:
        a = summaries["RL after SFT"].get("sft_adapter")
        if a is not None:  # sft_steps == 0 leaves none
            models[SFT_ROW] = (a, a)
    for label, s in summaries.items():
        models[label] = (s["adapter"], s["adapter"])
    return models


def row_scales(logs: Mapping[str, Any], runs: Mapping[str, Mapping[str, Any]],
               gen: Mapping[str, Any], *, model: str, n_test: int, sft_steps: int,
               n_train: int) -> dict[str, dict[str, Any]]:
    """The scale columns of every row (:func:`qrlib.eval.scale.scale_columns`): RL rows from
    their logs (with the SFT steps of a cold start), the SFT row with its SFT steps only,
    the zero-shot rows untrained; each with its test format validity."""
    sft = dict(sft_steps=sft_steps, sft_queries=n_train)
    out = {label: scale_columns(model, [log], test_queries=n_test,
                                test_valid=gen[label].format_ok.mean(),
                                **(sft if runs[label]["sft_steps"] else {}))
           for label, log in logs.items()}
    if SFT_ROW in gen:
        out[SFT_ROW] = scale_columns(model, test_queries=n_test,
                                     test_valid=gen[SFT_ROW].format_ok.mean(), **sft)
    for label in gen:  # untrained rows: no training, their own test validity
        out.setdefault(label, scale_columns(model, test_queries=n_test,
                                            test_valid=gen[label].format_ok.mean()))
    return out


def table3(scores: Mapping[str, Any], gen: Mapping[str, Any], levels: Mapping[str, str],
           scale: Mapping[str, Mapping[str, Any]]) -> Any:
    """Table 3 on our test databases: per row, execution accuracy overall and per hardness
    level, the shares that ran and were well-formed, generated tokens, reasoning words, and
    the training scale."""
    import pandas as pd

    rows = []
    for label, sc in scores.items():
        acc = sql_task.accuracy_by_level(sc, levels)
        rows.append({"model": label, "execution accuracy": acc["all"],
                     **{lv: acc.get(lv, float("nan")) for lv in sql_task.LEVELS},
                     "ran": sc.executed.mean(), "well-formed": gen[label].format_ok.mean(),
                     "gen tokens": gen[label].gen_tokens.mean(),
                     "think words": gen[label].think_words.mean(), **scale[label]})
    return pd.DataFrame(rows)


def comparison_rows(scores: Mapping[str, Any], scale: Mapping[str, Mapping[str, Any]], *,
                    base: str = BASE, resamples: int = 10_000,
                    seed: int = 0) -> list[dict[str, Any]]:
    """Every row against ``base`` question by question (execution match as 0/1, paired
    bootstrap); RL rows are ``trained``, the SFT row a ``warm start``, others untrained."""
    out = []
    if base not in scores:
        return out
    ref = dict(zip(scores[base].qid, scores[base].exec_match.astype(float)))
    for label, sc in scores.items():
        if label == base:
            continue
        trained = label.startswith(("RL", "SFT"))
        out.append(compare(
            dict(zip(sc.qid, sc.exec_match.astype(float))), ref,
            paper="deepretrieval", dataset="spider-dev (test databases)", retriever="sqlite",
            metric="execution accuracy", method=label,
            kind="trained" if label.startswith("RL") else "warm start" if trained else "untrained",
            baseline=base, baseline_kind="untrained", scale=scale[label],
            resamples=resamples, seed=seed))
    return out


def outcome_pairs(scores: Mapping[str, Any], comparisons: Any
                  ) -> tuple[dict[str, tuple[dict, dict]], dict[str, str]]:
    """For :func:`qrlib.plots.per_query_outcomes`: per comparison row, ``method ->
    (baseline's execution matches, the row's)`` by question id, and the row's interval."""
    from qrlib.eval.stats import fmt_interval

    def match(label: str) -> dict:
        return dict(zip(scores[label].qid, scores[label].exec_match.astype(float)))

    pairs = {r["method"]: (match(r["baseline"]), match(r["method"]))
             for _, r in comparisons.iterrows()}
    return pairs, {r["method"]: fmt_interval(r) for _, r in comparisons.iterrows()}


def result_records(table: Any, comparisons: Any) -> dict[str, Any]:
    """The recorded numbers: each row's execution accuracy, then each comparison's
    ``[diff, lo, hi]``."""
    out: dict[str, Any] = {}
    for _, r in table.iterrows():
        out[f"sql.{r.model}.exec_acc"] = r["execution accuracy"]
    for _, r in comparisons.iterrows():
        out[f"sql.{r.method} minus {r.baseline}"] = [r["diff"], r.lo, r.hi]
    return out


def examples(gen: Mapping[str, Any], scores: Mapping[str, Any], rows: Sequence[Mapping],
             n: int, labels: Sequence[str] = (BASE, "RL after SFT")) -> Any:
    """The first ``n`` test questions of each of ``labels`` present: generated SQL, whether
    it matched, and the gold SQL."""
    import pandas as pd

    ex = []
    for label in labels:
        if label in gen:
            g, s = gen[label].set_index("qid"), scores[label].set_index("qid")
            for r in rows[:n]:
                ex.append({"model": label, "question": r["question"],
                           "generated": g.loc[r["qid"], "sql"],
                           "match": bool(s.loc[r["qid"], "exec_match"]), "gold": r["gold_sql"]})
    return pd.DataFrame(ex)


def best_sentence(table: Any) -> str:
    """``"The highest execution accuracy is 0.250 (RL after SFT; 83% of its statements
    ran)."``"""
    best = table.loc[table["execution accuracy"].idxmax()]
    return (f"The highest execution accuracy is {best['execution accuracy']:.3f} ({best.model}; "
            f"{best.ran:.0%} of its statements ran).")
