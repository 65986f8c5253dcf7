"""Vanilla RL query rewriting in DeepRetrieval's style (Sec. 2.2, App. B.2): the steps notebook
05 calls.

The policy writes a query :math:`q'` for a claim :math:`q`; the fixed retriever searches it and
the reward is the retrieval metric plus a format term (Eq. 1, with nDCG@k as the metric of
classic retrieval, Table 8). Here:

* :data:`PROMPTS` holds the two ways of using the model's text (``rewrite``: the query
  replaces the claim; ``expand``: it is appended to it) in DeepRetrieval's *w/o reasoning*
  answer layout;
* :func:`load_pair`, :func:`runs_for`, :class:`Retrievers` and :func:`make_env` set up the data,
  the indexes and the reward environment; :func:`train_config` is the GRPO configuration of one
  ``retriever:mode`` run; a run ``retriever+room:mode`` trains on the claims with room to
  improve only (:func:`train_queries`, a lever row beside the run on every claim);
* :func:`read_logs`, :func:`training_curves`, :func:`gain_over_raw` and
  :func:`training_summary` read the per-step logs back;
* :func:`evaluate_rewrites`, :func:`comparison_rows`, :func:`scatter_pairs` and
  :func:`example_rewrites` build the test tables; :func:`save_for_evaluation` writes what
  notebook 10 reads; :func:`result_records` and :func:`modified_sentence` feed "What we found".

Every function that computes something is a function of its arguments; reading and writing
files happens in :func:`read_logs` and :func:`save_for_evaluation` only.
"""
from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from qrlib.core.io import atomic_write, save_json
from qrlib.core.records import save_record
from qrlib.data import datasets as qdata
from qrlib.data.cut import CollectionCut
from qrlib.eval import metrics
from qrlib.eval.compare import compare
from qrlib.eval.scale import log_scale, scale_columns
from qrlib.eval.stats import fmt_interval, span
from qrlib.retrieval import retrievers as retrieval
from qrlib.rl import rewards
from qrlib.rl.env import RewardEnv
from qrlib.rl.config import load_config

__all__ = ["PROMPTS", "FMT", "PREFILL", "POOLS", "load_pair", "runs_for", "retriever_of",
           "train_queries", "Retrievers", "make_env",
           "train_config", "read_logs", "training_curves", "curves_setting", "gain_over_raw",
           "gain_figure", "training_summary", "raw_rewrites", "row_scale", "evaluate_rewrites",
           "comparison_rows", "scatter_pairs", "example_rewrites", "save_for_evaluation",
           "result_records", "modified_sentence"]

#: The two prompts, each with one worked example (small models follow an example better than
#: a description); the answer layout is DeepRetrieval's ``<answer>{"query": "..."}</answer>``.
PROMPTS: dict[str, dict[str, str]] = {
    "rewrite": {
        "system": "",
        "user": ("Rewrite this scientific claim as a keyword query for searching research "
                 "abstracts.\nExample: Vitamin D lowers fracture risk in the elderly -> "
                 "<answer>{{\"query\": \"vitamin D supplementation fracture risk older adults\"}}"
                 "</answer>\nClaim: {query}"),
    },
    "expand": {
        "system": "",
        "user": ("Give extra keywords (synonyms, related terms) missing from this scientific "
                 "claim, to help find matching research abstracts.\nExample: Vitamin D lowers "
                 "fracture risk in the elderly -> <answer>{{\"query\": \"cholecalciferol hip "
                 "bone density osteoporosis trial\"}}</answer>\nClaim: {query}"),
    },
}
#: The training pools a run's retriever may name after a ``+`` (``bm25+room``): ``room`` keeps
#: the training claims whose raw claim ranks its first relevant abstract within the notebook's
#: ``room_ranks`` (neither solved at rank 1, where copying the claim is optimal, nor out of
#: reach, where every rewrite scores alike).
POOLS = ("room",)
#: The output format the reward and the test parse with (no ``<think>`` block).
FMT = "deepretrieval-nothink"
#: The start of the assistant turn when ``prefill`` is on: the format holds by construction.
PREFILL = '<answer>{"query": "'


def load_pair(name: str, *, data_dir: str | os.PathLike | None, n_train: int | None,
              n_test: int | None, n_distractors: int | None, seed: int) -> tuple[Any, Any, dict]:
    """``(train, test, corpus)`` of one dataset: seeded subsets of its train and test splits
    (the training subset keeps no distractors of its own when the test cut has some) and the
    corpus both search (the test cut's documents plus the training queries' judged ones)."""
    tr = qdata.load_dataset(name, "train", data_dir=data_dir)
    te = qdata.load_dataset(name, "test", data_dir=data_dir)
    tr = qdata.subset(tr, n_queries=n_train, n_distractors=0 if n_distractors is not None else None,
                      seed=seed)
    te = qdata.subset(te, n_queries=n_test, n_distractors=n_distractors, seed=seed)
    return tr, te, {**te.corpus, **tr.corpus}


def runs_for(train_runs: Iterable[str], name: str) -> list[tuple[str, str]]:
    """The ``(retriever, mode)`` runs of dataset ``name``: every ``"retriever:mode"`` of
    ``train_runs`` and the ``"name/retriever:mode"`` ones, in the order given; the retriever
    may name a training pool of :data:`POOLS` (``"bm25+room:rewrite"``)."""
    from qrlib.core.errors import QrlibError

    out = []
    for spec in train_runs:
        ds_, _, run = spec.rpartition("/")
        if ds_ in ("", name):
            kind_, sep, mode_ = run.partition(":")
            _, plus, pool = kind_.partition("+")
            if not sep or mode_ not in PROMPTS or not kind_ or (plus and pool not in POOLS):
                raise QrlibError(f"bad train_runs entry {spec!r}; accepted: [dataset/]retriever"
                                 f"[+{'|'.join(POOLS)}]:mode with mode one of {sorted(PROMPTS)}")
            out.append((kind_, mode_))
    return out


def retriever_of(kind: str) -> str:
    """The retriever of a run's kind (``"bm25+room"`` -> ``"bm25"``)."""
    return kind.partition("+")[0]


def train_queries(pair: tuple[Any, Any, dict], retriever: Any, kind: str, *,
                  room_ranks: Sequence[int] = (2, 50)) -> dict[str, str]:
    """The training claims of a run of ``kind``: every train claim of ``pair``, or for pool
    ``room`` those whose raw claim ``retriever`` ranks its first relevant abstract at
    ``room_ranks`` (:func:`qrlib.rl.rows.room_qids`)."""
    from qrlib.rl.rows import room_qids

    tr = pair[0]
    if kind.partition("+")[2] != "room":
        return dict(tr.queries)
    lo, hi = room_ranks
    return {q: tr.queries[q] for q in room_qids(tr.queries, tr.qrels, retriever, lo=lo, hi=hi)}


class Retrievers(retrieval.IndexCache):
    """One index per ``(dataset, retriever kind)`` over ``data[dataset][2]`` (the corpus of
    :func:`load_pair`), built on first use; prints how long each build took."""

    def __init__(self, data: Mapping[str, tuple[Any, Any, dict]], *,
                 cache_dir: str | os.PathLike | None = None) -> None:
        super().__init__(cache_dir=cache_dir, verbose=True)
        self.data = data

    def __call__(self, name: str, kind: str) -> Any:
        return self.get(name, retriever_of(kind), self.data[name][2])


def make_env(pair: tuple[Any, Any, dict], retriever: Any, *, mode: str, k: int, lenient: bool,
             format_penalty: float, fmt: str = FMT) -> RewardEnv:
    """The reward of Eq. 1 for classic retrieval (Table 8): nDCG@``k`` of the searched query
    when the answer format holds, ``format_penalty`` otherwise; over the train and test
    queries of ``pair`` (``mode`` ``expand`` searches claim + model text)."""
    tr, te, _ = pair
    return RewardEnv(retriever, {**te.qrels, **tr.qrels}, reward="deepretrieval_ndcg", fmt=fmt,
                     queries={**te.queries, **tr.queries}, mode=mode, k=k, lenient=lenient,
                     format_penalty=format_penalty)


def train_config(run_name: str, *, dataset: str, retriever: str, mode: str, lora_r: int,
                 max_steps: int, reward_params: Mapping[str, Any], prompt: Mapping[str, str],
                 **fields: Any) -> Any:
    """The :class:`qrlib.rl.train.TrainConfig` of one run: ``fields`` (model, algorithm,
    beta, sampling, budget, ...) plus what follows from the run: LoRA alpha = 2r, a
    checkpoint every quarter of the steps, expansion for mode ``expand``."""
    return load_config(dict(name=run_name, dataset=dataset, retriever=retriever, prompt=prompt,
                            expansion=mode == "expand", max_steps=max_steps, lora_r=lora_r,
                            lora_alpha=2 * lora_r, save_steps=max(1, max_steps // 4),
                            reward_params=dict(reward_params), **fields))


def read_logs(summaries: Mapping[str, Mapping[str, Any]]) -> Any:
    """Every run's per-step ``log.csv`` in one frame, with a ``run`` column."""
    import pandas as pd

    logs = []
    for run_name, s in summaries.items():
        lg = pd.read_csv(s["log"], dtype={"qids": str})
        lg["run"] = run_name
        logs.append(lg)
    return pd.concat(logs, ignore_index=True)


def training_curves(logs: Any, *, reward_k: int) -> tuple[Any, dict[str, str]]:
    """Three panels per run: mean reward (faint per step, bold running mean over a fifth of
    the run), format-valid rate and completion length. Returns ``(figure, {run: colour})``."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    run_colors = {r: f"C{i}" for i, r in enumerate(sorted(logs.run.unique()))}  # one per run
    for run_name, lg in logs.groupby("run"):
        w, c = max(1, len(lg) // 5), run_colors[run_name]
        axes[0].plot(lg.step, lg.reward, alpha=0.3, lw=1, color=c)
        axes[0].plot(lg.step, lg.reward.rolling(w, min_periods=1).mean(), lw=2, color=c,
                     label=run_name)
        axes[1].plot(lg.step, lg.format_valid.rolling(w, min_periods=1).mean(), lw=2, color=c)
        axes[2].plot(lg.step, lg.completion_length.rolling(w, min_periods=1).mean(), lw=2,
                     color=c)
    axes[0].set(title="mean reward (faint: per step, bold: running mean)", xlabel="GRPO step",
                ylabel=f"reward (nDCG@{reward_k}, format penalty)")
    axes[1].set(title="format-valid rate (running mean)", xlabel="GRPO step",
                ylabel="share of rollouts", ylim=(-0.05, 1.05))
    axes[2].set(title="completion length (running mean)", xlabel="GRPO step", ylabel="tokens")
    fig.tight_layout()
    plots.legend_outside(fig, *axes[0].get_legend_handles_labels(),
                         title="run (dataset-retriever-mode)")
    return fig, run_colors


def curves_setting(logs: Any, *, model: str, lora_r: int, reward_k: int, prompts_per_step: int,
                   num_generations: int) -> tuple[str, str]:
    """``(setting, caption)`` of the training-curve figure: the scale each run reached, read
    from its log (:func:`qrlib.eval.scale.log_scale`), never from the requested settings."""
    scale = {r: log_scale(lg) for r, lg in logs.groupby("run")}
    steps = [v["steps"] for v in scale.values()]
    queries = [v["queries"] for v in scale.values()]
    setting = (f"{model}, per run: {min(steps)}-{max(steps)} steps taken, "
               f"{min(queries)}-{max(queries)} distinct train claims seen, "
               f"{prompts_per_step}x{num_generations} rollouts/step")
    caption = (f"GRPO training of {model} + LoRA r={lora_r}: reward nDCG@{reward_k}, "
               f"{prompts_per_step}x{num_generations} rollouts/step; scale from the logs: "
               + "; ".join(f"{r} {v['steps']} steps, {v['queries']} claims, "
                           f"{v['rollouts']:.0f} rollouts" for r, v in scale.items())
               + " (paper: Qwen2.5-3B, batch 64, PPO)")
    return setting, caption


def raw_ndcg(pair: tuple[Any, Any, dict], retriever: Any, qid: str, k: int) -> float:
    """nDCG@``k`` of query ``qid`` searched as written (the raw claim's reward)."""
    tr, te, _ = pair
    text = {**te.queries, **tr.queries}[qid]
    ranked = retriever.search([text], k)[0]
    return rewards.ndcg_at_k(ranked, {**te.qrels, **tr.qrels}[qid], k)


def gain_over_raw(logs: Any, raw_score: Callable[[str, str, str], float]) -> Any:
    """Per run and step, the mean reward minus the mean raw-claim score of that step's
    claims (``qids`` column, ``;``-separated): ``raw_score(dataset, retriever, qid)``; the
    run name is ``dataset-retriever-mode``. Steps without claims are left out."""
    import pandas as pd

    gains = []
    for run_name, lg in logs.groupby("run"):
        name, kind, _ = run_name.rsplit("-", 2)
        for _, r in lg.iterrows():
            qs = [q for q in str(r.get("qids", "")).split(";") if q and q != "nan"]
            if qs:
                base = sum(raw_score(name, kind, q) for q in qs) / len(qs)
                gains.append({"run": run_name, "step": r.step, "gain": r.reward - base})
    return pd.DataFrame(gains)


def gain_figure(gains: Any, run_colors: Mapping[str, str], *, reward_k: int) -> Any:
    """The gain over the raw claim per step (faint) and its running mean over a quarter of
    the run (bold), one colour per run as in :func:`training_curves`."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for run_name, g in gains.groupby("run"):
        w, c = max(1, len(g) // 4), run_colors.get(run_name, "C0")
        ax.plot(g.step, g.gain, alpha=0.35, lw=1, color=c, marker=".", ms=4)
        ax.plot(g.step, g.gain.rolling(w, min_periods=1).mean(), lw=2.2, color=c, label=run_name)
    ax.axhline(0, color="k", lw=0.8)
    ax.set(title="mean reward minus raw-claim reward (faint: per step)", xlabel="GRPO step",
           ylabel=f"gain over raw claim (nDCG@{reward_k})")
    plots.legend_outside(ax, title="run (running mean)")
    return fig


def training_summary(logs: Any, model: str) -> Any:
    """One row per run: its scale from the log, and reward and format-valid rate of the first
    vs the last quarter of the steps (gain over the raw claim by halves when the log has a
    ``gain`` column), the share of zero-spread groups and seconds per step."""
    import pandas as pd

    def one(g: Any) -> Any:
        q, h, sc = max(1, len(g) // 4), max(1, len(g) // 2), log_scale(g)
        return pd.Series({
            "policy": model, "steps": len(g), "distinct_queries": sc["queries"],
            "rollouts": sc["rollouts"], "train_minutes": sc["minutes"],
            "reward_first_quarter": g.reward.head(q).mean(),
            "reward_last_quarter": g.reward.tail(q).mean(),
            "format_first_quarter": g.format_valid.head(q).mean(),
            "format_last_quarter": g.format_valid.tail(q).mean(),
            "gain_first_half": g["gain"].head(h).mean() if "gain" in g else float("nan"),
            "gain_second_half": g["gain"].tail(h).mean() if "gain" in g else float("nan"),
            "frac_zero_std": g.frac_reward_zero_std.mean(),
            "s_per_step": g.step_seconds.mean()})

    return logs.groupby("run").apply(one, include_groups=False).reset_index()


def raw_rewrites(queries: Mapping[str, str]) -> Any:
    """The raw-query row in the layout of :func:`qrlib.generation.rewrite.rewrite_queries`:
    the query itself searched, nothing generated."""
    import pandas as pd

    return pd.DataFrame({"qid": list(queries), "query": list(queries.values()),
                         "search_text": list(queries.values()), "rewrite": "", "modified": False,
                         "format_ok": True, "gen_tokens": 0, "gen_seconds": 0.0})


def row_scale(name: str, method: str, n_test: int, *, rewrites: Mapping[tuple[str, str], Any],
              logs: Any, model: str) -> dict[str, Any]:
    """The training scale of a result row (:func:`qrlib.eval.scale.scale_columns`): from the
    run's log for ``trained-<kind>-<mode>`` (run ``<name>-<kind>-<mode>``), none for the raw
    query; with its test format validity beside training's."""
    valid = None if method == "raw" else rewrites[name, method].format_ok.mean()
    if method.startswith("trained-"):
        run_name = f"{name}-{method[len('trained-'):]}"
        return scale_columns(model, [logs[logs.run == run_name]], test_queries=n_test,
                             test_valid=valid)
    return scale_columns(None if method == "raw" else model, test_queries=n_test,
                         test_valid=valid)


def evaluate_rewrites(rewrites: Mapping[tuple[str, str], Any], tests: Mapping[str, Any],
                      retrievers: Callable[[str, str], Any], kinds: Sequence[str], *, k: int,
                      scale: Callable[[str, str, int], Mapping[str, Any]]
                      ) -> tuple[Any, dict[tuple[str, str, str], Any]]:
    """Search every ``(dataset, method)`` rewrite frame's ``search_text`` with every retriever
    kind (a trained adapter only with the retriever it was trained on) to depth ``k``, and
    score nDCG@10 and R@100. Returns ``(results, per_query)``: one row per dataset, retriever
    and method (means, format and modification rates, rewrite words, generation and retrieval
    time per query, the row's ``scale(dataset, method, n_test)``), and the per-query frames
    keyed ``(dataset, retriever, method)``."""
    import pandas as pd

    rows, per_query = [], {}
    for name, te in tests.items():
        for kind in kinds:
            retr = retrievers(name, kind)
            for method, df in [(m_, d_) for (n_, m_), d_ in rewrites.items() if n_ == name]:
                if method.startswith("trained-") and retriever_of(method.split("-")[1]) != kind:
                    continue  # an adapter is evaluated with the retriever it was trained on
                t0 = time.perf_counter()
                res = retr.search(df.search_text.tolist(), k)
                t_ret = (time.perf_counter() - t0) / len(df)
                ev = metrics.evaluate(dict(zip(df.qid, res)), te.qrels, ("nDCG@10", "R@100"),
                                      per_query=True)
                per_query[name, kind, method] = ev
                rw = df[df.rewrite.str.len() > 0]
                rows.append({"dataset": name, "retriever": kind, "method": method,
                             "nDCG@10": ev["nDCG@10"].mean(), "R@100": ev["R@100"].mean(),
                             "format_ok": df.format_ok.mean(), "modified": df.modified.mean(),
                             "rewrite_words": (rw.rewrite.str.split().str.len().mean()
                                               if len(rw) else 0.0),
                             "gen_tokens": df.gen_tokens.mean(),
                             "gen_s_per_query": df.gen_seconds.mean(),
                             "retrieval_s_per_query": t_ret,
                             **scale(name, method, len(te.queries))})
    return pd.DataFrame(rows), per_query


def _scores(frame: Any, metric: str = "nDCG@10") -> dict[str, float]:
    return frame.set_index("query_id")[metric].to_dict()


def comparison_rows(per_query: Mapping[tuple[str, str, str], Any],
                    scale: Callable[[str, str, int], Mapping[str, Any]], *,
                    seed: int = 0) -> list[dict[str, Any]]:
    """Each trained method against the raw claim (``baseline``) and against the untrained
    model with the same prompt (``untrained``), nDCG@10 per claim, paired bootstrap
    (:func:`qrlib.eval.compare.compare`, its default 10,000 resamples)."""
    out = []
    for (name, kind, method), ev in per_query.items():
        if not method.startswith("trained-"):
            continue
        mode = method.split("-")[-1]
        new = _scores(ev)
        for ref, ref_kind in (("raw", "baseline"), (f"untrained-{mode}", "untrained")):
            out.append(compare(new, _scores(per_query[name, kind, ref]), paper="deepretrieval",
                               dataset=name, retriever=kind, metric="nDCG@10", method=method,
                               kind="trained", baseline=ref, baseline_kind=ref_kind,
                               scale=scale(name, method, len(new)), seed=seed))
    return out


def scatter_pairs(cmp: Any, per_query: Mapping[tuple[str, str, str], Any]
                  ) -> tuple[dict[str, tuple[dict, dict]], dict[str, str]]:
    """For :func:`qrlib.plots.per_query_scatter`: per trained-vs-raw comparison row,
    ``"dataset/retriever: method" -> (raw claim scores, rewrite scores)`` and the row's
    interval text."""
    vs_raw = cmp[cmp["baseline kind"] == "baseline"]
    pairs, intervals = {}, {}
    for _, r in vs_raw.iterrows():
        label = f"{r['dataset']}/{r['retriever']}: {r['method']}"
        pairs[label] = (_scores(per_query[r["dataset"], r["retriever"], "raw"]),
                        _scores(per_query[r["dataset"], r["retriever"], r["method"]]))
        intervals[label] = fmt_interval(r)
    return pairs, intervals


def example_rewrites(rewrites: Mapping[tuple[str, str], Any],
                     runs: Mapping[str, Sequence[tuple[str, str]]], n: int) -> Any:
    """The first ``n`` test claims of every run with the untrained and the trained rewrite."""
    import pandas as pd

    rows = []
    for name, specs in runs.items():
        for kind, mode in specs:
            a = rewrites[name, f"untrained-{mode}"].set_index("qid")
            b = rewrites[name, f"trained-{kind}-{mode}"].set_index("qid")
            for q in list(a.index)[:n]:
                rows.append({"run": f"{name}-{kind}-{mode}", "claim": a.loc[q, "query"],
                             "untrained": a.loc[q, "rewrite"], "trained": b.loc[q, "rewrite"]})
    return pd.DataFrame(rows)


def save_for_evaluation(out_dir: str | os.PathLike, rewrites: Mapping[tuple[str, str], Any],
                        data: Mapping[str, tuple[Any, Any, dict]], contracts: Mapping[str, Any],
                        settings: Mapping[str, Any]) -> list[str]:
    """What notebook 10 reads: ``rewrites/<dataset>/<method>.jsonl``, ``settings.json``
    (``settings`` plus each mode's decoding contract) and one
    :class:`~qrlib.data.cut.CollectionCut` per dataset in ``collections/<dataset>.json``.
    Returns the rewrite file names, sorted."""
    out_dir = Path(out_dir)
    for (name, method), df in rewrites.items():
        p = out_dir / "rewrites" / name / f"{method}.jsonl"
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(p, df.to_json(orient="records", lines=True))
    save_json({**settings, "contracts": {m: dataclasses.asdict(c) for m, c in contracts.items()}},
              out_dir / "settings.json")
    for name, (tr, te, corpus) in data.items():  # the exact test collection
        save_record(CollectionCut.of(te, corpus), out_dir / "collections" / f"{name}.json")
    return sorted(p.name for p in (out_dir / "rewrites").rglob("*.jsonl"))


def result_records(train: Any, test: Any) -> dict[str, Any]:
    """The key numbers the smoke tests read, in recording order: per run its steps and
    last-quarter format validity; per test row its nDCG@10 and modification rate."""
    out: dict[str, Any] = {}
    for r in train.to_dict("records"):
        out[f"train.{r['run']}.steps"] = r["steps"]
        out[f"train.{r['run']}.format_last_quarter"] = r["format_last_quarter"]
    for r in test.to_dict("records"):
        key = f"test.{r['dataset']}.{r['retriever']}.{r['method']}"
        out[f"{key}.ndcg10"] = r["nDCG@10"]
        out[f"{key}.modified"] = r["modified"]
    return out


def modified_sentence(test: Any) -> str:
    """``"The trained rewriters changed 40%-95% of the test claims (expand, rewrite mode);
    ..."``: the range of the trained rows' modification rates."""
    trained = test[test.method.str.startswith("trained-")]
    modes = sorted({m.rsplit("-", 1)[-1] for m in trained.method})
    return (f"The trained rewriters changed {span(trained.modified)} of the test claims ({', '.join(modes)} mode); "
            "the untrained rows with the same prompts are their second baseline.")
