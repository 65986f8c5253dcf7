"""ACQO Stage I, the exploration stage (ACQO Sec. 3.4.2): the steps notebook 06 calls
around :func:`qrlib.rl.train.train`.

* :func:`stage1_env` is Stage I's reward environment: RSF over the sub-queries, the best
  non-empty subset scored by Eq. 6, wrapped by :class:`~qrlib.methods.acqo.curriculum.SubqueryProbe`
  so the log can draw ACQO Fig. 4;
* :func:`demo_rewards` scores four hand-written answers (format gate of Eq. 5);
* :func:`weaker_rows` keeps the questions the raw question serves worst (ACQO App. B);
* :func:`sample_candidates` and :func:`choose_targets` are the rejection-sampling cold
  start (the best sampled split when it beats the question, scored by Eq. 9 with no bonus);
* :func:`curves_figure`, :func:`curve_summary`, :func:`last_rollouts` and
  :func:`findings_sentences` read the runs' logs back.
"""
from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qrlib.generation import policy
from qrlib.generation.parsing import parse_completion, sft_target
from qrlib.methods.acqo.curriculum import (SubqueryProbe, generate_decompositions,
                                           rejection_targets, weaker_share)
from qrlib.methods.acqo.study import quarters, rule_split
from qrlib.rl.env import RewardEnv
from qrlib.rl.release import release_memory

Row = Mapping[str, Any]


def stage1_env(retriever: Any, qrels: Mapping, *, reward_k: int, eta: float,
               delta: float) -> SubqueryProbe:
    """Stage I's reward (Eq. 3-6): at most three sub-queries (more is a format failure,
    Eq. 5), each retrieved, RSF-fused, the best subset scored; the probe adds the fused
    and best-single-sub-query nDCG@10 to every record (ACQO Fig. 4)."""
    env = RewardEnv(retriever, qrels, reward="acqo_stage1", fmt="acqo", k=reward_k,
                    max_subqueries=3, lenient=True, eta=eta, delta=delta)
    return SubqueryProbe(env, k=10)


def demo_rewards(env: SubqueryProbe, row: Row) -> tuple[list[float], pd.DataFrame]:
    """Rewards of four answers to one training question: the question as it is, the
    question plus its last word, four sub-queries, and no JSON; and the env's records."""
    q = row["question"]
    demo = [f'{{"query": "{q}"}}', f'{{"query": "{q}%%{q.split()[-1]}"}}',
            '{"query": "a%%b%%c%%d"}', "no JSON at all"]
    rewards = env(None, demo, qid=[row["qid"]] * 4, query=[q] * 4)
    return rewards, pd.DataFrame(env.records)[["queries", "format_ok", "gold_ranks", "reward",
                                               "part_fused_ndcg@10", "part_best_sub_ndcg@10"]]


def weaker_rows(env: RewardEnv, rows: Sequence[Row], share: float,
                label: str = "") -> tuple[list[Row], dict[str, float]]:
    """The ``share`` of ``rows`` whose question, searched as it is, gets the lowest Stage I
    reward (ACQO App. B drops the better half on HotpotQA), and every question's reward."""
    qids = [r["qid"] for r in rows]
    raw = dict(zip(qids, env.score([sft_target(r["question"], "acqo") for r in rows], qids)))
    keep = set(weaker_share(raw, share))
    kept = [raw[q] for q in keep]
    print(f"{label}: Stage I trains on {len(keep)} of {len(rows)} questions; the raw "
          f"question's reward {np.mean(kept):.3f} on them, {np.mean(list(raw.values())):.3f} on all")
    return [r for r in rows if r["qid"] in keep], raw


def rule_candidate(row: Row) -> dict[str, Any] | None:
    """The question plus up to two heuristic sub-queries, as a cold-start candidate in the
    prompt's answer format (None when the rule finds no split)."""
    subs = rule_split(row["question"])
    if len(subs) < 2:
        return None
    return {"qid": row["qid"], "completion": json.dumps({"query": "%%".join(subs)},
                                                        ensure_ascii=False),
            "format_ok": True, "subqueries": subs, "rule": True}


def sample_candidates(model: str, pool: Sequence[Row], prompt: str, *, n: int, rule: bool,
                      **sampling: Any) -> tuple[list[dict], list[dict], float]:
    """``n`` sampled decompositions of every question of ``pool`` by the untrained
    ``model`` (``sampling``: :func:`~qrlib.methods.acqo.curriculum.generate_decompositions`'s
    keywords), and the candidates: every sample, plus the rule split when ``rule``.
    The sampling model and its engine are released before returning
    (:func:`qrlib.rl.release.release_memory`), so Stage I's training does not carry them:
    the first vLLM import keeps a traceback that holds this frame, and with it the model
    (16 questions x 4 samples of Qwen2.5-Coder-0.5B: 3.6 GiB resident after closing the
    engine alone, 1.2 GiB after the release; notebook 06's training sat about 3 GiB above
    notebook 12's and peaked at 16,500 MiB). Returns ``(samples, candidates, generation seconds)``."""
    m, tok = policy.load_policy(model)
    t0 = time.perf_counter()
    rolls = generate_decompositions(m, tok, pool, prompt, n=n, do_sample=True, **sampling)
    gen_s = time.perf_counter() - t0
    del m
    release_memory()
    cands = [dict(r, rule=False) for r in rolls]
    if rule:
        cands += [c for c in map(rule_candidate, pool) if c is not None]
    return rolls, cands, gen_s


def copy_env(retriever: Any, qrels: Mapping, *, reward_k: int, eta: float,
             delta: float) -> RewardEnv:
    """The cold start's judge: the fused list of *all* sub-queries, Eq. 9 without the
    top-rank bonus (lambda = 0), strict format: what the test will measure."""
    return RewardEnv(retriever, qrels, reward="acqo_stage2", fmt="acqo", k=reward_k,
                     max_subqueries=3, lenient=False, eta=eta, delta=delta, lam=0.0, k_star=0)


def n_subqueries(completion: str) -> int:
    """Sub-queries of a target completion (lenient parse)."""
    return len(parse_completion(completion, "acqo", lenient=True).queries)


def target_row(targets: Mapping[str, Mapping], cands: Sequence[Mapping], rolls: Sequence[Mapping],
               scores: Sequence[float], copies: Sequence[float], *,
               copy_targets: bool) -> dict[str, Any]:
    """One row of the cold-start table for one retriever: sample validity and scores, the
    share of questions whose target is a sample or the rule split, targets by size."""
    rule_of = {c["qid"]: c["completion"] for c in cands if c["rule"]}
    chosen = [t for t in targets.values() if t["sampled"]]
    n_rule = sum(t["completion"] == rule_of.get(q) for q, t in targets.items() if t["sampled"])
    n_sub = [len(r["subqueries"]) for r in rolls if r["format_ok"]]
    return {
        "questions": len(targets), "samples": len(rolls),
        "format-valid samples": np.mean([r["format_ok"] for r in rolls]),
        "sub-queries per valid sample": np.mean(n_sub) if n_sub else 0.0,
        "mean sample score": float(np.mean(scores)),
        "question-as-is score": float(np.mean(copies)),
        "questions with a target": len(chosen),
        "target is a sample": (len(chosen) - n_rule) / len(targets),
        "target is the rule split": n_rule / len(targets),
        "copy targets in SFT": (len(targets) - len(chosen)) if copy_targets else 0,
        **{f"targets with {n} sub-quer{'y' if n == 1 else 'ies'}":
           sum(n_subqueries(t["completion"]) == n for t in chosen) for n in (1, 2, 3)},
        "mean gain of chosen samples": float(np.mean([t["gain"] for t in chosen])) if chosen else 0.0}


def choose_targets(rows: Sequence[Row], cands: Sequence[Mapping], rolls: Sequence[Mapping],
                   env: RewardEnv, *, copy_targets: bool) -> tuple[dict, list[dict], dict]:
    """Rejection sampling for one retriever's Stage I questions ``rows``: every candidate
    and the unchanged question scored by ``env`` (:func:`copy_env`); a question's SFT target
    is its best candidate when that beats the question strictly, else the question itself
    (or no target when not ``copy_targets``). Returns ``(targets, rows with sft_target,
    table row)``."""
    mine = {r["qid"] for r in rows}
    cands = [c for c in cands if c["qid"] in mine]
    all_scores = env.score([c["completion"] for c in cands], [c["qid"] for c in cands])
    scores = [w for c, w in zip(cands, all_scores) if not c["rule"]]  # the model's own
    qids = [r["qid"] for r in rows]
    copies = env.score([sft_target(r["question"], "acqo") for r in rows], qids)
    targets = rejection_targets([{**c, "reward": w} for c, w in zip(cands, all_scores)],
                                dict(zip(qids, copies)))
    warm = [{**r, "sft_target": targets[r["qid"]]["completion"]
             or (sft_target(r["question"], "acqo") if copy_targets else "")} for r in rows]
    return targets, warm, target_row(targets, cands, rolls, scores, copies,
                                     copy_targets=copy_targets)


def target_examples(rows: Sequence[Row], targets: Mapping[str, Mapping], n: int) -> pd.DataFrame:
    """The first ``n`` questions whose target is a sampled decomposition, with its gain."""
    return pd.DataFrame([{"question": r["question"], "target": targets[r["qid"]]["completion"],
                          "gain over the question as is": targets[r["qid"]]["gain"]}
                         for r in rows if targets[r["qid"]]["sampled"]][:n])


def curves_figure(logs: Mapping[str, pd.DataFrame], window: int = 4) -> Any:
    """ACQO Fig. 4 and two diagnostics, per step (rolling mean of ``window``): the Stage I
    reward, sub-queries per rollout, fused vs best single sub-query nDCG@10, the share of
    groups with zero reward spread and the share of well-formed rollouts."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    def roll(s: pd.Series) -> pd.Series:
        return s.rolling(window, min_periods=1).mean()

    fig, axes = plt.subplots(1, 5, figsize=(21, 3.6))
    for i, (kind, log) in enumerate(logs.items()):
        c = f"C{i}"
        axes[0].plot(log.step, log.reward, color=c, alpha=0.35)
        axes[0].plot(log.step, roll(log.reward), color=c, label=kind)
        if "part/n_sub" in log:
            axes[1].plot(log.step, roll(log["part/n_sub"]), color=c, label=kind)
        for col, ls, what in (("part/fused_ndcg@10", "-", "fused list"),
                              ("part/best_sub_ndcg@10", "--", "best single sub-query")):
            if col in log:
                axes[2].plot(log.step, roll(log[col]), color=c, ls=ls, label=f"{kind}: {what}")
        axes[3].plot(log.step, roll(log.frac_reward_zero_std), color=c, label=kind)
        axes[4].plot(log.step, roll(log.format_valid), color=c, label=kind)
    axes[0].set(xlabel="training step", ylabel=f"Stage I reward G(I) (rolling mean of {window})")
    axes[1].set(xlabel="training step", ylabel="sub-queries per rollout")
    axes[2].set(xlabel="training step", ylabel=f"nDCG@10 (rolling mean of {window})")
    axes[3].set(xlabel="training step", ylabel="groups with zero reward spread", ylim=(-0.05, 1.05))
    axes[4].set(xlabel="training step", ylabel="format-valid rollouts", ylim=(-0.05, 1.05))
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            plots.legend_outside(ax, where="below")
    fig.tight_layout()
    return fig


def curve_summary(logs: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """First vs last quarter of each run: reward, sub-queries, fused and best single
    nDCG@10, format validity, zero-spread groups and seconds per step."""
    empty = pd.Series(dtype=float)
    return pd.DataFrame([{
        "retriever": kind, "steps": label, "reward": part.reward.mean(),
        "sub-queries": part.get("part/n_sub", empty).mean(),
        "fused nDCG@10": part.get("part/fused_ndcg@10", empty).mean(),
        "best single nDCG@10": part.get("part/best_sub_ndcg@10", empty).mean(),
        "format valid": part.format_valid.mean(),
        "zero-spread groups": part.frac_reward_zero_std.mean(),
        "s/step": part.step_seconds.mean()}
        for kind, log in logs.items() for label, part in quarters(log)])


def curve_records(table: pd.DataFrame) -> dict[str, float]:
    """``{"bm25.first.reward": ..., "bm25.last.sub_queries": ...}`` of :func:`curve_summary`."""
    out = {}
    for _, r in table.iterrows():
        tag = "first" if r.steps.startswith("first") else "last"
        out[f"{r.retriever}.{tag}.reward"] = r.reward
        out[f"{r.retriever}.{tag}.sub_queries"] = r["sub-queries"]
    return out


def last_rollouts(run_dir: str | Path, names: Mapping[str, str], n: int) -> pd.DataFrame:
    """The last ``n`` logged rollouts of each run (``names``: retriever -> run name)."""
    samples = []
    for kind, name in names.items():
        path = Path(run_dir) / "rl" / name / "samples.jsonl"
        for line in path.read_text(encoding="utf-8").splitlines()[-n:]:
            s = json.loads(line)
            samples.append({"retriever": kind, "step": s["step"], "question": s["query"],
                            "completion": s["completion"], "reward": s["reward"]})
    return pd.DataFrame(samples)


def findings_sentences(table: pd.DataFrame, health: pd.DataFrame,
                       retrievers: Sequence[str]) -> list[str]:
    """What Stage I changed between its first and last quarter, per retriever; how many
    runs collapsed; and that these are training-set numbers."""
    out = []
    for kind in retrievers:
        t = table[table.retriever == kind].set_index("steps")
        f, l = t.loc["first quarter"], t.loc["last quarter"]
        out.append(
            f"With {kind}, Stage I's mean reward went from {f.reward:.3f} to {l.reward:.3f} between "
            f"the first and the last quarter of training, the sub-queries per rollout from "
            f"{f['sub-queries']:.2f} to {l['sub-queries']:.2f}, and the fused nDCG@10 of the "
            f"training questions from {f['fused nDCG@10']:.3f} to {l['fused nDCG@10']:.3f} (best "
            f"single sub-query {f['best single nDCG@10']:.3f} to {l['best single nDCG@10']:.3f}).")
    collapsed = health[health.collapsed.astype(bool)] if len(health) else health
    out.append(f"{len(collapsed)} of {len(health)} Stage I runs collapsed into copying the "
               "question or the prompt's example." if len(health) else "No run trained here.")
    out.append("These are training-set numbers: whether the decomposer helps on held-out "
               "questions is notebook 07's comparison.")
    return out
