"""Notebook 19's grid as calls: the training-free rows beside every trained one.

:mod:`qrlib.methods.prompting.spqe` holds the method (SPQE's three readings of
:math:`(q, d_H)`, the candidate prompts and their contracts); this module runs it over the
notebook's datasets and retrievers and shapes what it shows:

1. :func:`load_cuts` cuts each dataset's test split and a development split (training
   queries) over one corpus, and builds the retrievers; :class:`Scorer` scores any search
   texts per query;
2. :func:`pseudo_docs` and :func:`spqe_scores`: a pseudo-document per test query and the
   three SPQE readings searched;
3. :func:`select_prompts` picks the best (prompt, mode) on development queries,
   :func:`chosen_prompts` says which prompts must decode the test, and
   :func:`best_prompt_scores` scores them;
4. :func:`results_table` (score beside generation cost), :func:`comparisons` (each row
   minus the raw query, 95 % paired bootstrap), :func:`vs_raw_figure`, :func:`records`
   and :func:`findings`.

Nothing here trains; the generation calls take the policy from the notebook.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from qrlib.core.errors import QrlibError
from qrlib.core.io import atomic_write
from qrlib.eval.compare import compare, comparison_table
from qrlib.eval.prose import count_sentence, paragraph, row_sentence, spread
from qrlib.eval.scale import scale_columns
from qrlib.eval.stats import span, verdict
from qrlib.methods.prompting import spqe

__all__ = ["ORDER", "CAPTIONS", "caption", "load_cuts", "Scorer", "pseudo_docs",
           "passage_examples", "spqe_scores", "select_prompts", "chosen_prompts",
           "save_frames", "best_prompt_scores", "gen_stats", "results_table", "comparisons",
           "save_per_query", "vs_raw_figure", "records", "findings"]

#: The training-free methods in the figure's order.
ORDER = ("spqe", "spqe-q2d", "pseudo-doc", "best-prompt")

CAPTIONS: dict[str, str] = {
    "19_prompt_selection": ("Development {main} of every candidate prompt and mode (training "
                            "queries, never the test split); 'chosen' marks the one that "
                            "decodes the test [profile: {profile}]"),
    "19_prompting_results": ("Training-free rows on each test split: the raw query, SPQE's "
                             "three readings and the best of the untrained policy's prompts "
                             "({model}); pseudo-documents of at most {pseudo_doc_tokens} "
                             "tokens, rewrites of at most {rewrite_tokens}; truncated = share "
                             "of completions at the budget [profile: {profile}]"),
    "19_comparisons": ("Per-query {main} differences of each training-free row against the raw "
                       "query, 95 % paired-bootstrap intervals over the test queries "
                       "({bootstrap} resamples) [profile: {profile}]"),
    "19_prompting_vs_raw": ("Mean per-query {main} difference of each training-free row "
                            "against the raw query with its 95 % paired-bootstrap interval; "
                            "n = test queries"),
}


def caption(name: str, **fields: Any) -> str:
    """The caption of table or figure ``name`` with its ``{fields}`` filled."""
    return CAPTIONS[name].format(**fields)


def load_cuts(datasets: Sequence[str], retrievers: Mapping[str, Sequence[str]], *,
              n_test_queries: int | None, n_dev_queries: int | None,
              n_distractors: int | None, seed: int = 0, data_dir: Any = None,
              cache_dir: Any = None) -> tuple[dict[str, tuple[Any, Any]], dict]:
    """``(data, retr)``: per dataset ``(test, dev)`` seeded cuts (dev from the train split,
    bringing only its judged documents), and ``{(dataset, kind): retriever}`` over both
    cuts' documents; prints the sizes."""
    from qrlib.data import datasets as qdata
    from qrlib.retrieval import retrievers as retrieval

    data, retr = {}, {}
    for name in datasets:
        te = qdata.subset(qdata.load_dataset(name, "test", data_dir=data_dir),
                          n_queries=n_test_queries, n_distractors=n_distractors, seed=seed)
        dev = qdata.subset(qdata.load_dataset(name, "train", data_dir=data_dir),
                           n_queries=n_dev_queries, n_distractors=0 if n_distractors is not None
                           else None, seed=seed)
        corpus = {**te.corpus, **dev.corpus}
        data[name] = (te, dev)
        for kind in retrievers[name]:
            kw = {"cache_dir": cache_dir, "show_progress": False} if kind == "dense" else {}
            retr[name, kind] = retrieval.build_retriever(kind, corpus, **kw)
        print(f"{name}: {len(te.queries)} test queries, {len(dev.queries)} dev queries, "
              f"{len(corpus)} documents; retrievers {', '.join(retrievers[name])}")
    return data, retr


class Scorer:
    """``score(name, kind, texts, qrels)``: per-query ``measures`` (a frame indexed by query
    id) of ``{qid: text}`` searched ``k`` deep with retriever ``retr[name, kind]``."""

    def __init__(self, retr: Mapping[tuple[str, str], Any], measures: Sequence[str],
                 k: int = 100) -> None:
        self.retr, self.measures, self.k = retr, list(measures), k

    def __call__(self, name: str, kind: str, texts: Mapping[str, str],
                 qrels: Mapping[str, Mapping[str, int]]) -> Any:
        from qrlib.eval import metrics
        from qrlib.retrieval import retrievers as retrieval

        run = retrieval.run_queries(self.retr[name, kind], texts, k=self.k)
        return metrics.evaluate(run, qrels, self.measures, per_query=True).set_index("query_id")

    def raw(self, data: Mapping[str, tuple[Any, Any]],
            retrievers: Mapping[str, Sequence[str]]) -> dict[tuple[str, str, str], Any]:
        """``{(dataset, kind, "raw"): scores}`` of the test queries as they are."""
        return {(name, kind, "raw"): self(name, kind, te.queries, te.qrels)
                for name, (te, _) in data.items() for kind in retrievers[name]}


def pseudo_docs(model: Any, tokenizer: Any, data: Mapping[str, tuple[Any, Any]],
                query_kinds: Mapping[str, str], folder: str | Path, *, max_new_tokens: int,
                batch_size: int = 64) -> dict[str, Any]:
    """A greedy pseudo-document per test query (:func:`~qrlib.methods.prompting.spqe.pseudo_documents`
    with ``prompting/pseudo-doc-<kind>``), saved as ``folder/<dataset>.jsonl``; prints
    length, truncation and minutes per dataset."""
    out = {}
    for name, (te, _) in data.items():
        p = out[name] = spqe.pseudo_documents(model, tokenizer, te.queries,
                                              f"prompting/pseudo-doc-{query_kinds[name]}",
                                              max_new_tokens=max_new_tokens,
                                              batch_size=batch_size)
        path = Path(folder) / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, p.to_json(orient="records", lines=True))
        print(f"{name}: {len(p)} passages, {p.gen_tokens.mean():.0f} tokens on average, "
              f"{p.truncated.mean():.0%} at the budget, {p.gen_seconds.sum() / 60:.1f} min")
    return out


def passage_examples(pseudo: Mapping[str, Any]) -> Any:
    """The first query of each dataset and its pseudo-document."""
    return pd.DataFrame([{"dataset": n, "query": p["query"].iloc[0],
                          "pseudo-document": p["passage"].iloc[0]} for n, p in pseudo.items()])


def spqe_scores(score: Scorer, data: Mapping[str, tuple[Any, Any]], pseudo: Mapping[str, Any],
                retrievers: Mapping[str, Sequence[str]]) -> dict[tuple[str, str, str], Any]:
    """Every SPQE reading (:data:`~qrlib.methods.prompting.spqe.READINGS`) searched with each
    retriever; ``spqe-q2d`` (the repeated query) with BM25 only."""
    return {(name, kind, reading): score(name, kind, spqe.reading_texts(pseudo[name], reading),
                                         te.qrels)
            for name, (te, _) in data.items() for kind in retrievers[name]
            for reading in spqe.READINGS if reading != "spqe-q2d" or kind == "bm25"}


def select_prompts(score: Scorer, data: Mapping[str, tuple[Any, Any]],
                   dev_rewrites: Mapping[tuple[str, str], Any],
                   retrievers: Mapping[str, Sequence[str]], main: str) -> tuple[Any, dict]:
    """Mean development ``main`` of every (prompt, mode) per dataset and retriever, from
    ``dev_rewrites`` (``{(dataset, prompt): rewrites of the dev queries}``), and the chosen
    pair (:func:`~qrlib.methods.prompting.spqe.choose_prompt`). Returns ``(selection
    table with a 'chosen' column, {(dataset, kind): (prompt, mode)})``."""
    rows, chosen = [], {}
    for name, (_, dev) in data.items():
        frames = {p: df for (n, p), df in dev_rewrites.items() if n == name}
        for kind in retrievers[name]:
            dev_scores = {}
            for p, df in frames.items():
                for mode in spqe.MODES:
                    s = score(name, kind, spqe.mode_texts(df, mode), dev.qrels)[main].mean()
                    dev_scores[p, mode] = s
                    rows.append({"dataset": name, "retriever": kind, "prompt": p, "mode": mode,
                                 f"dev {main}": s, "format_ok": df.format_ok.mean(),
                                 "modified": df.modified.mean(),
                                 "dev queries": len(dev.queries)})
            chosen[name, kind] = spqe.choose_prompt(dev_scores)
    selection = pd.DataFrame(rows)
    selection["chosen"] = [chosen[r.dataset, r.retriever] == (r.prompt, r["mode"])
                           for _, r in selection.iterrows()]
    return selection, chosen


def chosen_prompts(chosen: Mapping[tuple[str, str], tuple[str, str]]) -> list[tuple[str, str]]:
    """``[(dataset, prompt)]``: each prompt chosen for some retriever of a dataset, once,
    datasets in order and prompts sorted; these decode the test queries."""
    names = list(dict.fromkeys(n for n, _ in chosen))
    return [(n, p) for n in names for p in sorted({c[0] for (m, _), c in chosen.items()
                                                   if m == n})]


def save_frames(frames: Mapping[tuple[str, str], Any], folder: str | Path) -> None:
    """Each ``(dataset, prompt)`` frame as ``folder/<dataset>/<prompt with _>.jsonl``."""
    for (name, p), df in frames.items():
        path = Path(folder) / name / f"{p.replace('/', '_')}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, df.to_json(orient="records", lines=True))


def best_prompt_scores(score: Scorer, data: Mapping[str, tuple[Any, Any]],
                       best: Mapping[tuple[str, str], Any],
                       chosen: Mapping[tuple[str, str], tuple[str, str]]) -> dict:
    """``{(dataset, kind, "best-prompt"): scores}``: the chosen prompt's test rewrites
    searched in the chosen mode."""
    out = {}
    for (name, kind), (p, mode) in chosen.items():
        te = data[name][0]
        out[name, kind, "best-prompt"] = score(name, kind, spqe.mode_texts(best[name, p], mode),
                                               te.qrels)
    return out


def gen_stats(method: str, chosen: tuple[str, str] | None, best: Any, pseudo: Any,
              query_kind: str, rewrite_tokens: int) -> dict[str, Any]:
    """The generation cost beside a row: what generated it, its format-valid share, tokens
    per query, the share at the budget and the seconds per query (all 0 for the raw query)."""
    if method == "raw":
        return {"detail": "-", "format_ok": 1.0, "gen_tokens": 0.0, "truncated": 0.0,
                "gen_s_per_query": 0.0}
    if method == "best-prompt":
        p, mode = chosen
        return {"detail": f"{p} ({mode})", "format_ok": best.format_ok.mean(),
                "gen_tokens": best.gen_tokens.mean(),
                "truncated": best.gen_tokens.map(
                    lambda n: spqe.is_truncated(n, rewrite_tokens)).mean(),
                "gen_s_per_query": best.gen_seconds.mean()}
    return {"detail": f"prompting/pseudo-doc-{query_kind}", "format_ok": 1.0,
            "gen_tokens": pseudo.gen_tokens.mean(), "truncated": pseudo.truncated.mean(),
            "gen_s_per_query": pseudo.gen_seconds.mean()}


def results_table(scores: Mapping[tuple[str, str, str], Any],
                  chosen: Mapping[tuple[str, str], tuple[str, str]],
                  best: Mapping[tuple[str, str], Any], pseudo: Mapping[str, Any],
                  query_kinds: Mapping[str, str], *, model: str, measures: Sequence[str],
                  rewrite_tokens: int) -> Any:
    """A row per (dataset, retriever, method): mean of each measure, :func:`gen_stats`,
    and the scale columns (no training)."""
    rows = []
    for (name, kind, method), sc in scores.items():
        c = chosen.get((name, kind))
        rows.append({"dataset": name, "retriever": kind, "method": method,
                     **{m: sc[m].mean() for m in measures},
                     **gen_stats(method, c, best.get((name, c[0])) if c else None,
                                 pseudo.get(name), query_kinds.get(name, ""), rewrite_tokens),
                     **scale_columns(None if method == "raw" else model,
                                     test_queries=len(sc))})
    return pd.DataFrame(rows)


def comparisons(scores: Mapping[tuple[str, str, str], Any], metrics: str | Sequence[str], *,
                model: str, resamples: int = 10_000, seed: int = 0) -> Any:
    """Every training-free row minus the raw query in each of ``metrics`` (the main one
    first; a trained row reported in another metric, RL-QR's nDCG@3, pairs with its own),
    95 % paired bootstrap over the test queries, in the comparison schema (kind
    ``untrained``)."""
    rows = []
    for metric in [metrics] if isinstance(metrics, str) else list(metrics):
        for (name, kind, method), sc in scores.items():
            if method == "raw":
                continue
            if metric not in sc:
                raise QrlibError(f"compared metric {metric!r} is not among the scored measures "
                                 f"{list(sc.columns)}; add it to measures")
            rows.append(compare(sc[metric].to_dict(), scores[name, kind, "raw"][metric].to_dict(),
                                paper="prompting", dataset=name, retriever=kind, metric=metric,
                                method=method, kind="untrained", baseline="raw",
                                baseline_kind="baseline",
                                scale=scale_columns(model, test_queries=len(sc)),
                                resamples=resamples, seed=seed))
    return comparison_table(rows)


def save_per_query(scores: Mapping[tuple[str, str, str], Any], path: str | Path) -> Path:
    """Every per-query score (columns dataset, retriever, method, qid and the measures) as
    one CSV, which the trained rows' comparisons with these baselines read."""
    pq = pd.concat([sc.assign(dataset=n, retriever=k, method=m).rename_axis("qid").reset_index()
                    for (n, k, m), sc in scores.items()], ignore_index=True)
    return atomic_write(path, pq.to_csv(index=False))


def vs_raw_figure(cmp: Any, scores: Mapping[tuple[str, str, str], Any],
                  blocks: Sequence[tuple[str, str]], main: str) -> Any:
    """Each method's mean difference from the raw query with its interval, a group of
    points per (dataset, retriever) block, in :data:`ORDER`."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(blocks)), 3.8))
    width = 0.8 / len(ORDER)
    for j, m in enumerate(ORDER):
        sub = cmp[cmp.method == m].set_index(["dataset", "retriever"])
        xs = [i + (j - (len(ORDER) - 1) / 2) * width for i, b in enumerate(blocks)
              if b in sub.index]
        rs = [sub.loc[b] for b in blocks if b in sub.index]
        if not rs:
            continue
        ax.errorbar(xs, [r["diff"] for r in rs],
                    yerr=[[r["diff"] - r["lo"] for r in rs], [r["hi"] - r["diff"] for r in rs]],
                    fmt="o", capsize=3, color=f"C{j}", label=m)
    ax.axhline(0, color="0.4", lw=0.8)
    ax.set_xticks(range(len(blocks)))
    ax.set_xticklabels([f"{n}\n{k} (n={len(scores[n, k, 'raw'])})" for n, k in blocks],
                       fontsize=8)
    ax.set_ylabel(f"{main} minus raw query")
    ax.set_title("Training-free rows against the raw query (95 % paired intervals)")
    plots.legend_outside(ax)
    return fig


def records(cmp: Any, pseudo: Mapping[str, Any]) -> dict[str, Any]:
    """Recorded numbers: each comparison's diff, lo and hi, and the share of
    pseudo-documents cut at the budget per dataset."""
    out: dict[str, Any] = {}
    for r in cmp.to_dict("records"):
        key = f"{r['dataset']}.{r['retriever']}.{r['method']}"
        out[f"{key}.diff"], out[f"{key}.lo"], out[f"{key}.hi"] = r["diff"], r["lo"], r["hi"]
    for name, p in pseudo.items():
        out[f"{name}.pseudo_doc_truncated"] = float(p.truncated.mean())
    return out


def _method_tally(cmp: Any) -> str:
    """``"spqe 0/1/3, pseudo-doc 0/2/3"``: per method, the rows above the raw query, below
    it, and in all (verdicts of :func:`qrlib.eval.stats.verdict`)."""
    v = [verdict(lo, hi) for lo, hi in zip(cmp["lo"], cmp["hi"])]
    tally = pd.DataFrame({"method": cmp["method"].to_numpy(), "v": v})
    return ", ".join(f"{m} {(g.v == 'beats').sum()}/{(g.v == 'falls below').sum()}/{len(g)}"
                     for m, g in tally.groupby("method", sort=False))


def findings(cmp: Any, pseudo: Mapping[str, Any], *, main: str, pseudo_doc_tokens: int) -> str:
    """The "What we found" paragraph: the verdicts counted (over all rows and per method),
    the largest gain and the largest loss against the raw query with their intervals, the
    pseudo-documents' truncation, and what a trained row must beat."""
    if cmp.empty:
        return "This run has no training-free row to compare with the raw query."
    best, worst = cmp.loc[cmp["diff"].idxmax()], cmp.loc[cmp["diff"].idxmin()]
    raw = cmp.drop_duplicates(["dataset", "retriever"]).set_index(["dataset", "retriever"])
    out = [f"The raw query scores {main} {spread(raw['baseline score'])} over "
           f"{len(raw)} dataset/retriever block{'s' if len(raw) != 1 else ''} "
           f"({span(raw['test queries'], '.0f')} test queries each).",
           count_sentence(cmp, "training-free")[:-1] + "; per method (above / below / rows): "
           + _method_tally(cmp) + ".",
           f"The largest gain: {row_sentence(best)}"
           + (f"; the largest loss: {row_sentence(worst)}" if worst.name != best.name else "")
           + "."]
    if pseudo:
        out.append(f"Pseudo-documents used their whole {pseudo_doc_tokens}-token budget for "
                   + ", ".join(f"{p.truncated.mean():.0%} of {n}" for n, p in pseudo.items())
                   + " queries; a cut passage still searches, so the budget bounds the passage "
                     "length rather than deciding validity.")
    out.append("A trained row is worth its training only where it beats both the raw query "
               "and the best of these rows on the same queries, which this run's per-query "
               "scores (`per_query.csv` in its run folder) let one pair.")
    return paragraph(out)
