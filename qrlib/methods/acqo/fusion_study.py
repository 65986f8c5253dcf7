"""Rank-Score Fusion against the other fusion rules, with no model (notebook 03).

ACQO (Sec. 3.3, Eq. 1-2) merges the ranked lists of a question's sub-queries by Rank-Score
Fusion: rank consensus :math:`P(p) = 1/\\sum_j 1/r_j` first (ascending), the strongest
score :math:`S(p) = \\max_j s_j` only for ties. The fusion rules themselves live in
:mod:`qrlib.retrieval.fusion`; this module holds the study around them:

* :func:`toy_example` is the two-list example the notebook opens with;
* :func:`load_cut` and :func:`split_questions` load the multi-hop test sets and split every
  question twice without a model (oracle titles, heuristic rules);
* :func:`evaluate_fusions` searches every question and sub-query once per retriever and
  scores the raw question, single sub-queries and every fusion of the sub-query lists;
* :func:`tie_table`, :func:`tie_example` and :func:`timing_summary` count RSF's rank ties,
  show one, and time each rule;
* :func:`differences`, :func:`fusion_figure`, :func:`run_summary`, :func:`findings` and
  :func:`records` turn the tables into what the notebook shows, saves and records.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from qrlib.data.datasets import load_dataset, subset
from qrlib.eval.prose import paragraph, spread
from qrlib.eval.metrics import evaluate
from qrlib.methods.bandits.decompose import heuristic_split, oracle_split
from qrlib.retrieval import fusion
from qrlib.retrieval.retrievers import build_retriever
from qrlib.eval.stats import span

Ranked = Sequence[tuple[str, float]]
Lists = dict[tuple[str, str, str], dict[str, list[Ranked]]]  # (dataset, retriever, split) -> qid -> lists
SPLITS = ("oracle", "heuristic")
BEST_SINGLE = "best single sub-query (oracle pick)"


def rank_in(lst: Ranked, doc: str) -> int | None:
    """1-based rank of ``doc`` in ``lst`` (None: absent)."""
    return next((r + 1 for r, (x, _) in enumerate(lst) if x == doc), None)


def positions(fused: Ranked) -> dict[str, int]:
    """``{doc: 1-based position}`` in a fused list."""
    return {d: i + 1 for i, (d, _) in enumerate(fused)}


def toy_example(a: Ranked, b: Ranked, rrf_k: float = 60) -> pd.DataFrame:
    """Two ranked lists fused by RSF (Eq. 1-2) and by RRF: per document its ranks, P(p),
    S(p), RRF score and its position under both rules (absent ranks are ``<NA>``)."""
    keys = fusion.rsf_keys([a, b])
    rrf = fusion.rrf([a, b], k=rrf_k)
    toy = pd.DataFrame({
        "doc": list(keys),
        "rank in list A": [rank_in(a, d) for d in keys],
        "rank in list B": [rank_in(b, d) for d in keys],
        "P(p)": [float(keys[d][0]) for d in keys], "S(p)": [keys[d][1] for d in keys],
        "RRF score": [dict(rrf)[d] for d in keys],
    })
    toy["RSF position"] = toy["doc"].map(positions(fusion.rsf([a, b])))
    toy["RRF position"] = toy["doc"].map(positions(rrf))
    return toy.astype({"rank in list A": "Int64", "rank in list B": "Int64"})


def order(table: pd.DataFrame, column: str) -> str:
    """The documents of a toy table joined in the order of ``column`` (``"cab"``)."""
    return "".join(table.sort_values(column)["doc"])


def load_cut(name: str, split: str, *, data_dir: Any = None, n_queries: int | None = None,
             n_distractors: int | None = None, seed: int = 0) -> Any:
    """A dataset's split, cut to ``n_queries`` questions and ``n_distractors`` unjudged
    paragraphs when either is set (:func:`qrlib.data.datasets.subset`)."""
    ds = load_dataset(name, split, data_dir=data_dir)
    if n_queries is not None or n_distractors is not None:
        ds = subset(ds, n_queries=n_queries, n_distractors=n_distractors, seed=seed)
    return ds


def split_questions(ds: Any, max_subqueries: int = 3) -> dict[str, dict[str, list[str]]]:
    """Every question split twice without a model: ``oracle`` (one sub-query per gold
    supporting title; the question itself when it has none) and ``heuristic`` (entity
    spans, clauses, "X of Y" chains; at most ``max_subqueries``, ACQO's limit)."""
    out: dict[str, dict[str, list[str]]] = {"oracle": {}, "heuristic": {}}
    for q, text in ds.queries.items():
        titles = ds.query_meta.get(q, {}).get("supporting_titles") or []
        out["oracle"][q] = oracle_split(text, titles) if titles else [text]
        out["heuristic"][q] = heuristic_split(text)[:max_subqueries]
    return out


def overview(data: Mapping[str, Any], subq: Mapping[str, Mapping]) -> pd.DataFrame:
    """Questions, paragraphs and mean sub-queries per question of each split, per dataset."""
    return pd.DataFrame([{
        "dataset": name, "queries": len(ds.queries), "docs": len(ds.corpus),
        **{f"{sk} sub-queries / query": np.mean([len(v) for v in subq[name][sk].values()])
           for sk in SPLITS},
    } for name, ds in data.items()])


def split_example(data: Mapping[str, Any], subq: Mapping[str, Mapping], name: str) -> pd.DataFrame:
    """The first question of ``name`` as it is and under both splits."""
    q = next(iter(data[name].queries))
    return pd.DataFrame({"split": ["raw", *SPLITS],
                         "queries": [[data[name].queries[q]], subq[name]["oracle"][q],
                                     subq[name]["heuristic"][q]]})


def fusion_methods(*, k: int, rrf_k: float, depth: int,
                   comb_norm: str) -> dict[str, Callable[[Sequence[Ranked]], list]]:
    """The fusion rules compared, each ``lists -> fused list`` cut to ``depth``: RRF, RSF,
    CombSUM, CombMNZ and RRF over lists first cut to their top ``k``."""
    return {
        "RRF": lambda lists: fusion.rrf(lists, k=rrf_k, top=depth),
        "RSF": lambda lists: fusion.rsf(lists, top=depth),
        "CombSUM": lambda lists: fusion.combsum(lists, norm=comb_norm, top=depth),
        "CombMNZ": lambda lists: fusion.combmnz(lists, norm=comb_norm, top=depth),
        f"RRF (lists cut to {k})": lambda lists: fusion.rrf([l[:k] for l in lists], k=rrf_k,
                                                             top=depth),
    }


def method_order(k: int) -> list[str]:
    """The rows of the metrics table, top to bottom within a block."""
    return ["raw question", "sub-query 1 alone", "sub-query 2 alone", BEST_SINGLE, "RRF",
            f"RRF (lists cut to {k})", "RSF", "CombSUM", "CombMNZ", "RSF (raw + sub-queries)"]


def _mean_row(pq: pd.DataFrame, measures: Sequence[str], **key: str) -> dict[str, Any]:
    return {**key, **pq[list(measures)].mean().to_dict()}


def best_single_row(groups: Mapping[str, list[Ranked]], qrels: Mapping, measures: Sequence[str],
                    **key: str) -> dict[str, Any]:
    """Mean measures of the best single sub-query per question (chosen by the first measure,
    with the labels: a ceiling for any selection policy). Every sub-query list is scored in
    one call under pseudo query ids ``qid::j``."""
    run = {f"{q}::{j}": fusion.to_run(l) for q, g in groups.items() for j, l in enumerate(g)}
    qr = {f"{q}::{j}": qrels[q] for q, g in groups.items() for j in range(len(g))}
    pq = evaluate(run, qr, measures, per_query=True)
    pq["qid"] = pq["query_id"].str.rsplit("::", n=1).str[0]
    best = pq.sort_values(measures[0], ascending=False).groupby("qid").head(1)
    return _mean_row(best, measures, **key, method=BEST_SINGLE)


def evaluate_fusions(data: Mapping[str, Any], subq: Mapping[str, Mapping], retrievers: Sequence[str],
                     methods: Mapping[str, Callable], *, measures: Sequence[str], depth: int, k: int,
                     dense_model: str, cache_dir: Any = None) -> tuple[pd.DataFrame, Lists]:
    """For each (dataset, retriever): every raw question and sub-query searched once, to
    ``depth``; then the mean ``measures`` of the raw question, each of the first two
    sub-queries alone, every fusion in ``methods``, RSF over the raw question plus the
    sub-queries, and the best single sub-query. Fused lists go through
    :func:`qrlib.retrieval.fusion.to_run` (ir-measures would re-sort RSF's ties by id).

    Returns the metrics table (sorted by block and :func:`method_order`) and the sub-query
    lists ``{(dataset, retriever, split): {qid: lists}}`` the later sections reuse."""
    rows, lists_cache = [], {}
    for name, ds in data.items():
        for kind in retrievers:
            params = ({"model": dense_model, "cache_dir": cache_dir, "show_progress": False}
                      if kind == "dense" else {})
            t0 = time.perf_counter()
            ret = build_retriever(kind, ds.corpus, **params)
            build_s = time.perf_counter() - t0
            qids = list(ds.queries)
            texts = [ds.queries[q] for q in qids]
            texts += [s for sk in SPLITS for q in qids for s in subq[name][sk][q]]
            unique = list(dict.fromkeys(texts))
            t0 = time.perf_counter()
            res = dict(zip(unique, ret.search(unique, depth)))
            print(f"{name} / {kind}: index {build_s:.1f}s, {len(unique)} searches "
                  f"{time.perf_counter() - t0:.1f}s")
            runs = {("raw question", "-"): {q: fusion.to_run(res[ds.queries[q]]) for q in qids}}
            for sk in SPLITS:
                groups = {q: [res[s] for s in subq[name][sk][q]] for q in qids}
                lists_cache[(name, kind, sk)] = groups
                for j in range(2):
                    runs[(f"sub-query {j + 1} alone", sk)] = {
                        q: fusion.to_run(g[min(j, len(g) - 1)]) for q, g in groups.items()}
                for m, fn in methods.items():
                    runs[(m, sk)] = {q: fusion.to_run(fn(g)) for q, g in groups.items()}
                runs[("RSF (raw + sub-queries)", sk)] = {
                    q: fusion.to_run(fusion.rsf([res[ds.queries[q]]] + g, top=depth))
                    for q, g in groups.items()}
            for (method, sk), run in runs.items():
                pq = evaluate(run, ds.qrels, measures, per_query=True)
                rows.append(_mean_row(pq, measures, dataset=name, retriever=kind, split=sk,
                                      method=method))
            for sk in SPLITS:
                rows.append(best_single_row(lists_cache[(name, kind, sk)], ds.qrels, measures,
                                            dataset=name, retriever=kind, split=sk))
    results = pd.DataFrame(rows)
    results["method"] = pd.Categorical(results["method"], method_order(k), ordered=True)
    results = results.sort_values(["dataset", "retriever", "split", "method"])
    return results.reset_index(drop=True), lists_cache


def pivot(results: pd.DataFrame, measure: str) -> pd.DataFrame:
    """``measure`` per (dataset, retriever, split) block, one column per method."""
    return results.pivot_table(index=["dataset", "retriever", "split"], columns="method",
                               values=measure, observed=True)


def differences(results: pd.DataFrame, measure: str) -> pd.DataFrame:
    """RSF minus RRF, CombSUM and the best single sub-query, per block (positive: RSF
    better); blocks without a fusion (the raw question's) are dropped."""
    piv = pivot(results, measure)
    return pd.DataFrame({"RSF - RRF": piv["RSF"] - piv["RRF"],
                         "RSF - CombSUM": piv["RSF"] - piv["CombSUM"],
                         "RSF - best single": piv["RSF"] - piv[BEST_SINGLE]}).dropna()


def fusion_figure(results: pd.DataFrame, *, datasets: Sequence[str], retrievers: Sequence[str],
                  measure: str) -> Any:
    """Horizontal bars of ``measure`` per method (y axis, where long names cannot collide),
    one panel per (dataset, retriever), one bar per split; the legend outside."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, axes = plt.subplots(len(datasets), len(retrievers), figsize=(5.2 * len(retrievers),
                             2.9 * len(datasets)), squeeze=False, sharex=True, sharey=True)
    show = ["raw question", "sub-query 1 alone", "RRF", "RSF", "CombSUM", "CombMNZ"]
    for i, name in enumerate(datasets):
        for j, kind in enumerate(retrievers):
            ax = axes[i][j]
            sub = results[(results.dataset == name) & (results.retriever == kind)
                          & results.method.isin(show)]
            piv = sub.pivot_table(index="method", columns="split", values=measure,
                                  observed=True).reindex(show[::-1])
            piv.rename(columns={"-": "raw question"}).plot.barh(ax=ax, legend=False, width=0.8)
            ax.set_title(f"{name} · {kind}", fontsize=10)
            ax.set_ylabel("")
            ax.set_xlabel(f"{measure} (test)" if i == len(datasets) - 1 else "")
            ax.set_xlim(0, 1)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.tight_layout()
    plots.legend_outside(fig, handles, labels, title="sub-queries from")
    return fig


def p_ties(lists: Sequence[Ranked], k: int) -> tuple[list[str], list[str]]:
    """RSF's top ``k`` and those of its documents whose rank consensus P(p) equals another
    top-k document's (their order is decided by the score S(p))."""
    keys = fusion.rsf_keys(lists)
    top = [d for d, _ in fusion.rsf(lists, top=k)]
    ps = [round(keys[d][0], 12) for d in top]
    return top, [d for d, p in zip(top, ps) if ps.count(p) > 1]


def tie_table(lists_cache: Lists, *, k: int, rrf_k: float) -> tuple[pd.DataFrame, tuple | None]:
    """Per (dataset, retriever, split), over questions with at least two sub-queries: the
    share with a P-tie in RSF's top ``k`` (decided by S(p)), tied documents per question
    and the share whose RSF top ``k`` differs from RRF's. Also the first BM25 tie found,
    ``(dataset, retriever, split, qid, lists, tied docs)`` (None when there is none)."""
    rows, example = [], None
    for (name, kind, sk), groups in lists_cache.items():
        n_tied_q = n_tied_docs = n_diff = n_multi = 0
        for q, g in groups.items():
            if len(g) < 2:
                continue
            n_multi += 1
            top, tied = p_ties(g, k)
            n_tied_docs += len(tied)
            n_tied_q += bool(tied)
            n_diff += top != [d for d, _ in fusion.rrf(g, k=rrf_k, top=k)]
            if tied and example is None and kind == "bm25":
                example = (name, kind, sk, q, g, tied)
        n = max(n_multi, 1)
        rows.append({"dataset": name, "retriever": kind, "split": sk,
                     "questions with >= 2 sub-queries": n_multi,
                     f"share with a P-tie in top-{k}": n_tied_q / n,
                     "tied docs per question": n_tied_docs / n,
                     f"share where RSF top-{k} != RRF top-{k}": n_diff / n})
    return pd.DataFrame(rows), example


def tie_example(example: tuple | None, data: Mapping[str, Any], subq: Mapping[str, Mapping], *,
                depth: int, rrf_k: float) -> pd.DataFrame | None:
    """The tied documents of one question (from :func:`tie_table`): their ranks per
    sub-query, P(p), S(p), positions under RSF and RRF and whether they are gold. Prints
    the question and its sub-queries first; None when no tie was found."""
    if example is None:
        return None
    name, kind, sk, q, g, tied = example
    keys = fusion.rsf_keys(g)
    rsf_pos = positions(fusion.rsf(g, top=depth))
    rrf_pos = positions(fusion.rrf(g, k=rrf_k, top=depth))
    print(f"{name} / {kind} / {sk} split, question: {data[name].queries[q]}")
    print("sub-queries:", subq[name][sk][q])
    return pd.DataFrame([{"doc": d, "ranks per sub-query": [rank_in(lst, d) for lst in g],
                          "P(p)": keys[d][0], "S(p)": keys[d][1], "RSF position": rsf_pos[d],
                          "RRF position": rrf_pos[d], "gold": data[name].qrels[q].get(d, 0) > 0}
                         for d in tied]).sort_values("RSF position")


def timing_summary(lists_cache: Lists, methods: Mapping[str, Callable], *,
                   repeats: int) -> pd.DataFrame:
    """Microseconds per question of each fusion rule (best of ``repeats`` passes over every
    question's lists), mean and max over the (dataset, retriever, split) blocks."""
    rows = []
    for (name, kind, sk), groups in lists_cache.items():
        gl = list(groups.values())
        for m, fn in methods.items():
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                for g in gl:
                    fn(g)
                best = min(best, time.perf_counter() - t0)
            rows.append({"dataset": name, "retriever": kind, "split": sk, "method": m,
                         "us per question": 1e6 * best / max(len(gl), 1)})
    return pd.DataFrame(rows).groupby("method")["us per question"].agg(["mean", "max"]).round(1)


def run_summary(*, profile: str, datasets: Sequence[str], retrievers: Sequence[str], k: int,
                depth: int, data: Mapping[str, Any], results: pd.DataFrame, ties: pd.DataFrame,
                timing: pd.DataFrame) -> dict[str, Any]:
    """The run's settings and tables as one JSON-ready dict (``03_fusion/summary.json``)."""
    return {
        "profile": profile, "datasets": datasets, "retrievers": retrievers, "k": k,
        "depth": depth, "n_queries": {n: len(d.queries) for n, d in data.items()},
        "n_docs": {n: len(d.corpus) for n, d in data.items()},
        "metrics": results.assign(method=results.method.astype(str)).to_dict(orient="records"),
        "ties": ties.to_dict(orient="records"),
        "timing_us_per_question": timing["mean"].to_dict(),
    }


def _split_clause(nd: pd.DataFrame, raw_q: pd.Series, split: str, unit: str = "") -> str:
    """``"on the oracle split RSF reaches 0.964-1.000 against 0.802-1.000 for the raw
    question (above it in 4 of 4 blocks) and 0.918-0.996 for CombSUM"`` (``unit`` after
    RSF's range)."""
    blk = nd.xs(split, level="split")
    raw = raw_q.reindex(blk.index)
    return (f"on the {split} split RSF reaches {span(blk['RSF'], '.3f')}{unit} against "
            f"{span(raw, '.3f')} for the raw question (above it in "
            f"{int((blk['RSF'] > raw).sum())} of {len(blk)} blocks) and "
            f"{span(blk['CombSUM'], '.3f')} for CombSUM")


def findings(results: pd.DataFrame, ties: pd.DataFrame, timing: pd.DataFrame, *, measure: str,
             k: int, rrf_k: float) -> str:
    """The "What we found" paragraph, read from the three tables: RSF against RRF over
    the blocks (the extreme blocks named), RSF, the raw question and CombSUM per split,
    the share of rank-consensus ties and the fusion time."""
    nd = pivot(results, measure)
    nd = nd.dropna(subset=["RSF"]) if "RSF" in nd else nd.iloc[:0]
    if nd.empty:
        return "No block of this run has a fused list to compare."
    raw_q = results[results.method == "raw question"].set_index(["dataset", "retriever"])[measure]
    diff = nd["RSF"] - nd["RRF"]
    splits = list(dict.fromkeys(nd.index.get_level_values("split")))
    share = ties[f"share with a P-tie in top-{k}"]
    per_split = "; ".join(_split_clause(nd, raw_q, sk, f" {measure}" if i == 0 else "")
                          for i, sk in enumerate(splits))
    return paragraph([
        f"RSF scores above RRF (k={rrf_k}) in {int((diff > 0).sum())} of {len(nd)} blocks, "
        f"RSF - RRF running {spread(diff, '+.3f')} {measure}.",
        per_split[:1].upper() + per_split[1:] + ".",
        f"A rank-consensus tie in RSF's top {k} (broken by the score) occurs for "
        f"{span(share)} of questions." if len(share) else "",
        f"Fusing one question's lists takes {span(timing['mean'], '.0f')} µs in pure Python, "
        "depending on the method."
        if len(timing) else ""])


def records(toy: pd.DataFrame, results: pd.DataFrame, ties: pd.DataFrame, *, measure: str,
            k: int) -> dict[str, Any]:
    """The numbers the tests read: the toy orders, each block's raw / RRF / RSF / CombSUM
    ``measure`` and its share of P-ties."""
    out: dict[str, Any] = {"toy.rsf_order": order(toy, "RSF position"),
                           "toy.rrf_order": order(toy, "RRF position")}
    for r in results[results.method.isin(["raw question", "RRF", "RSF", "CombSUM"])].to_dict("records"):
        out[f"{r['dataset']}.{r['retriever']}.{r['split']}.{r['method']}.ndcg"] = r[measure]
    for r in ties.to_dict("records"):
        out[f"{r['dataset']}.{r['retriever']}.{r['split']}.share_p_tie"] = \
            r[f"share with a P-tie in top-{k}"]
    return out


def cut_setting(n_queries: int | None, n_distractors: int | None, depth: int) -> str:
    """The figure stamp's setting: the cut (or the full subsets) and the list depth."""
    smaller = n_queries is not None or n_distractors is not None
    return (f"{n_queries} questions + {n_distractors} distractors per dataset" if smaller
            else "full multi-hop subsets") + f", lists of depth {depth}"

