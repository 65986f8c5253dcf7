"""Indexes and raw-query baselines (notebook 02): build every retriever over every
collection, score the raw queries, and compare engines, evaluators and index types.

* :func:`load_collections`: the collections, pooled ones and subsets included;
* :func:`build_and_score`: build, search and score each (collection, retriever), timing
  both and saving the baseline for later notebooks (:mod:`qrlib.retrieval.baseline`);
* :func:`references` and :func:`baseline_table`: our nDCG@10 beside the published BM25-flat
  (Pyserini BEIR regressions) and MiniLM (MTEB) values; :func:`plot_baselines`;
* :func:`ranx_crosscheck`: the same metrics from a second evaluator;
* :func:`bm25_agreement`: bm25s against rank_bm25 on identical tokens;
* :func:`speed_table` and :func:`plot_speed`: throughput, build time, index size;
* :func:`hnsw_vs_flat`: ACQO's HNSW training index (appendix A.1) against the exact one;
* :func:`key_numbers` and :func:`findings`: what the notebook records and concludes.

No paper folder is imported (notebook 02 depends on no registration).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from qrlib.eval.prose import paragraph, spread
from qrlib.eval.metrics import label
from qrlib.eval.stats import span

Results = Mapping[tuple[str, str], Any]   # (collection, retriever) -> BaselineResult
Reference = Mapping[tuple[str, str], float]


def load_collections(datasets: Sequence[str], pooled: Mapping[str, Sequence[str]] | None,
                     split: str, *, data_dir: str | None, n_queries: int | None,
                     n_distractors: int | None, seed: int) -> dict[str, Any]:
    """``{name: Dataset}``: each dataset, each ``"<name>+pool"`` (``name`` with the listed
    corpora as extra distractors), then, when ``n_queries`` or ``n_distractors`` is set,
    seeded subsets of them all (:func:`qrlib.data.datasets.subset`); ``ds.name`` is the key."""
    from qrlib.data.datasets import load_dataset, subset

    collections = {name: load_dataset(name, split, data_dir=data_dir) for name in datasets}
    for name, extra in (pooled or {}).items():
        collections[f"{name}+pool"] = load_dataset(name, split, data_dir=data_dir,
                                                   extra_corpora=list(extra))
    if n_queries is not None or n_distractors is not None:
        collections = {n: subset(ds, n_queries=n_queries, n_distractors=n_distractors, seed=seed)
                       for n, ds in collections.items()}
    for name, ds in collections.items():
        ds.name = name
    return collections


def kinds_for(name: str, n_docs: int, retrievers: Sequence[str], dense_datasets: Sequence[str],
              reference_max_docs: int) -> list[str]:
    """The retrievers built for one collection: ``dense`` only on ``dense_datasets``, the
    slow ``bm25-ref`` only up to ``reference_max_docs`` documents."""
    return [r for r in retrievers if (r != "dense" or name in dense_datasets)
            and (r != "bm25-ref" or n_docs <= reference_max_docs)]


def build_and_score(collections: Mapping[str, Any], retrievers: Sequence[str], *,
                    dense_datasets: Sequence[str], reference_max_docs: int,
                    bm25_params: Mapping[str, Any], dense_params: Mapping[str, Any], k: int,
                    run_dir: Any, save_runs: bool, log: Callable[[str], Any] = print
                    ) -> tuple[dict[tuple[str, str], Any], list[dict[str, Any]]]:
    """For each collection and retriever (:func:`kinds_for`): build the index (timed),
    search every query to depth ``k`` and score it (:func:`qrlib.retrieval.baseline.run_baseline`),
    save the baseline under ``run_dir`` and log one line. Returns the results and one
    speed row each (build and search seconds, queries per second, index size in MB)."""
    from qrlib.retrieval.baseline import run_baseline, save_baseline
    from qrlib.retrieval.retrievers import build_retriever

    results, speed_rows = {}, []
    for name, ds in collections.items():
        for kind in kinds_for(name, len(ds.corpus), retrievers, dense_datasets,
                              reference_max_docs):
            params = dense_params if kind == "dense" else bm25_params
            t0 = time.perf_counter()
            retriever = build_retriever(kind, ds.corpus, **params)
            build_s = time.perf_counter() - t0
            res = run_baseline(ds, kind, k=k, retriever=retriever)
            results[(name, kind)] = res
            speed_rows.append({
                "dataset": name, "retriever": kind, "docs": len(ds.corpus),
                "queries": len(ds.queries), "build_s": build_s,
                "encode_cached": getattr(retriever, "loaded_from_cache", None) if kind == "dense" else None,
                "search_s": res.timings["search_s"], "queries_per_s": res.timings["queries_per_s"],
                "index_MB": retriever.index_nbytes() / 2**20})
            save_baseline(res, run_dir, save_run=save_runs)
            log(f"{name:24s} {kind:9s} build {build_s:7.2f}s  search {res.timings['search_s']:7.3f}s  "
                + "  ".join(f"{label(m)} {v:.4f}" for m, v in res.metrics.items()))
            del retriever
    return results, speed_rows


def references() -> tuple[pd.DataFrame, dict[tuple[str, str], float]]:
    """The published nDCG@10 references (``references.yaml``: BM25 flat, MiniLM MTEB) as a
    table, and ``{(dataset, retriever): value}`` (BM25's value also for ``bm25-ref``)."""
    from qrlib.eval import published

    refs = {"bm25": published.table("references", "BM25 flat", column="nDCG@10"),
            "dense": published.table("references", "MiniLM MTEB", column="nDCG@10")}
    ref = {(r.row, kind): r.value for kind, df in refs.items() for r in df.itertuples()}
    ref.update({(ds, "bm25-ref"): v for (ds, kind), v in list(ref.items()) if kind == "bm25"})
    return pd.concat(refs.values())[["table", "row", "column", "value", "source"]], ref


def baseline_table(results: Results, reference: Reference, *, full: bool,
                   dense_model: str) -> pd.DataFrame:
    """One row per (collection, retriever): queries and every metric, the published
    nDCG@10 and our difference to it, the latter only on full collections (and, for dense,
    only with the published model, MiniLM)."""
    rows = []
    for (name, kind), res in results.items():
        row = {"dataset": name, "retriever": kind, "queries": len(res.per_query),
               **{label(m): v for m, v in res.metrics.items()}}
        comparable = full and (kind != "dense" or dense_model == "minilm")
        ref = reference.get((name, kind)) if comparable else None
        row["reference nDCG@10"] = ref
        row["diff"] = row["nDCG@10"] - ref if ref is not None else None
        rows.append(row)
    return pd.DataFrame(rows)


def _bars(frame: pd.DataFrame, value: str, order: Sequence[str], retrievers: Sequence[str],
          **plot_kw: Any) -> tuple[Any, Any, pd.DataFrame]:
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, ax = plt.subplots(figsize=(10, 4))
    piv = frame.pivot(index="dataset", columns="retriever", values=value)
    piv = piv.reindex(index=list(order), columns=[r for r in retrievers if r in piv.columns])
    piv.plot.bar(ax=ax, rot=0, **plot_kw)
    plots.legend_outside(ax, title="retriever")
    plots.tidy_ticks(ax, rotation=20, wrap=18)
    return fig, ax, piv


def plot_baselines(baseline: pd.DataFrame, order: Sequence[str], retrievers: Sequence[str],
                   reference: Reference, full: bool) -> Any:
    """Grouped bars of raw-query nDCG@10 per collection and retriever; on full collections
    a black tick marks each published reference."""
    fig, ax, piv = _bars(baseline, "nDCG@10", order, retrievers)
    if full:
        for i, name in enumerate(piv.index):
            for j, kind in enumerate(piv.columns):
                ref = reference.get((name, kind))
                if ref is not None:
                    x = i + (j - (len(piv.columns) - 1) / 2) * 0.5 / len(piv.columns)
                    ax.plot([x - 0.07, x + 0.07], [ref, ref], color="black", lw=2)
    ax.set_ylabel("nDCG@10 of the raw queries")
    ax.set_xlabel("collection")
    ax.set_title("Raw-query nDCG@10" + (" (black ticks: published references)" if full else ""))
    fig.tight_layout()
    return fig


RANX = {"nDCG@10": "ndcg@10", "R@100": "recall@100", "AP@10": "map@10", "RR@10": "mrr@10"}


def ranx_crosscheck(results: Results, collections: Mapping[str, Any]) -> pd.DataFrame:
    """``|ir-measures - ranx|`` per measure of :data:`RANX` on every baseline run (ranx
    gets list ranks as scores, so both evaluators see the same order)."""
    import warnings

    import ranx

    warnings.filterwarnings("ignore", module="ranx")
    cross = []
    for (name, kind), res in results.items():
        ds = collections[name]
        qr = ranx.Qrels({q: dict(r) for q, r in ds.qrels.items()})
        rr = ranx.Run({q: {d: float(len(lst) - i) for i, (d, _) in enumerate(lst)} or {"__none__": 0.0}
                       for q, lst in res.run.items()})
        theirs = ranx.evaluate(qr, rr, list(RANX.values()))
        cross.append({"dataset": name, "retriever": kind,
                      **{f"|diff| {label(m)}": abs(res.metrics[m] - float(theirs[RANX[m]]))
                         for m in RANX}})
    return pd.DataFrame(cross)


def bm25_agreement(results: Results, order: Sequence[str]) -> pd.DataFrame:
    """bm25s against rank_bm25 per collection that has both: their nDCG@10 and its
    difference, the mean top-10 overlap and the share of queries with the same top-1."""
    from qrlib.eval.agreement import same_top1, top_k_overlap

    rows = []
    for name in order:
        a, b = results.get((name, "bm25")), results.get((name, "bm25-ref"))
        if a is None or b is None:
            continue
        rows.append({"dataset": name, "nDCG@10 bm25s": a.metrics["nDCG@10"],
                     "nDCG@10 rank_bm25": b.metrics["nDCG@10"],
                     "nDCG@10 diff": a.metrics["nDCG@10"] - b.metrics["nDCG@10"],
                     "mean top-10 overlap": top_k_overlap(a.run, b.run, 10),
                     "same top-1": same_top1(a.run, b.run)})
    return pd.DataFrame(rows)


def speed_table(speed_rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The speed rows with each row's throughput relative to rank_bm25 on the same
    collection (NaN where rank_bm25 was not built)."""
    speed = pd.DataFrame(list(speed_rows))
    ref_qps = speed[speed.retriever == "bm25-ref"].set_index("dataset")["queries_per_s"]
    speed["speed-up vs rank_bm25"] = [row.queries_per_s / ref_qps.get(row.dataset, np.nan)
                                      for row in speed.itertuples()]
    return speed


def plot_speed(speed: pd.DataFrame, order: Sequence[str], retrievers: Sequence[str]) -> Any:
    """Grouped bars of queries per second (log scale) per collection and retriever."""
    fig, ax, _ = _bars(speed, "queries_per_s", order, retrievers, logy=True)
    ax.set_ylabel("throughput (queries / second, log scale)")
    ax.set_xlabel("collection")
    ax.set_title("Search throughput, batched, top-100")
    fig.tight_layout()
    return fig


def hnsw_vs_flat(collections: Mapping[str, Any], names: Sequence[str] | None,
                 retrievers: Sequence[str], dense_params: Mapping[str, Any], *, m: int,
                 ef_construction: int, ef_search: int) -> list[dict[str, Any]]:
    """For each collection in ``names`` (when dense retrieval is on): an exact flat and an
    HNSW index over the same cached embeddings, the share of the flat top-10 HNSW
    recovers, both nDCG@10, build and search seconds."""
    from qrlib.eval.metrics import evaluate
    from qrlib.retrieval.retrievers import build_retriever

    rows = []
    for name in names or []:
        if name not in collections or "dense" not in retrievers:
            continue
        ds = collections[name]
        flat = build_retriever("dense", ds.corpus, **dense_params)
        hnsw = build_retriever("dense", ds.corpus, **{**dense_params, "index": "hnsw",
                                                       "hnsw_m": m,
                                                       "ef_construction": ef_construction,
                                                       "ef_search": ef_search})
        qids = list(ds.queries)
        texts = [ds.queries[q] for q in qids]
        t1 = time.perf_counter()
        run_f = dict(zip(qids, flat.search(texts, 10)))
        t2 = time.perf_counter()
        run_h = dict(zip(qids, hnsw.search(texts, 10)))
        t3 = time.perf_counter()
        rec = np.mean([len({d for d, _ in run_f[q]} & {d for d, _ in run_h[q]}) / 10 for q in qids])
        rows.append({"dataset": name, "docs": len(ds.corpus), "M": m,
                     "efConstruction": ef_construction, "efSearch": ef_search,
                     "HNSW build_s": hnsw.index_seconds, "flat index_s": flat.index_seconds,
                     "top-10 recall vs flat": rec,
                     "nDCG@10 flat": evaluate(run_f, ds.qrels, ["nDCG@10"])["nDCG@10"][0],
                     "nDCG@10 HNSW": evaluate(run_h, ds.qrels, ["nDCG@10"])["nDCG@10"][0],
                     "flat search_s": t2 - t1, "HNSW search_s": t3 - t2})
    return rows


def key_numbers(baseline: pd.DataFrame, agreement: pd.DataFrame, speed: pd.DataFrame,
                hnsw_rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The numbers the smoke tests read: nDCG@10 and R@100 per retriever and collection,
    the bm25 engines' top-10 overlap, bm25s's speed-up and HNSW's top-10 recall."""
    out: dict[str, Any] = {}
    for r in baseline.to_dict("records"):
        out[f"{r['retriever']}.{r['dataset']}.ndcg10"] = r["nDCG@10"]
        out[f"{r['retriever']}.{r['dataset']}.recall100"] = r["R@100"]
    for r in agreement.to_dict("records"):
        out[f"agreement.{r['dataset']}.top10_overlap"] = r["mean top-10 overlap"]
    for r in speed[speed.retriever == "bm25"].to_dict("records"):
        out[f"speedup.{r['dataset']}"] = r["speed-up vs rank_bm25"]
    for r in hnsw_rows:
        out[f"hnsw.{r['dataset']}.top10_recall_vs_flat"] = r["top-10 recall vs flat"]
    return out


def _baseline_sentences(order: Sequence[str], baseline: pd.DataFrame,
                        retrievers: Sequence[str]) -> list[str]:
    """Raw-query nDCG@10 per retriever over the collections (range and the collection at
    each end), and our difference to the published values where there are any."""
    rows = baseline[baseline.dataset.isin(list(order)) & baseline.retriever.isin(list(retrievers))
                    ].set_index(["dataset", "retriever"])
    parts = [f"{kind} {spread(rows.xs(kind, level='retriever')['nDCG@10'])}"
             for kind in retrievers if kind in rows.index.get_level_values("retriever")]
    out = ["Raw-query nDCG@10 runs " + "; ".join(parts) + "."] if parts else []
    diff = rows["diff"].dropna() if "diff" in rows else pd.Series(dtype=float)
    if len(diff):
        out.append(f"Beside the {len(diff)} published value{'s' if len(diff) != 1 else ''} "
                   f"ours differ by {spread(diff, '+.3f')} nDCG@10.")
    return out


def findings(order: Sequence[str], baseline: pd.DataFrame, retrievers: Sequence[str],
             agreement: pd.DataFrame, speed: pd.DataFrame,
             hnsw_rows: Sequence[Mapping[str, Any]], full: bool) -> str:
    """The "What we found" paragraph: raw-query nDCG@10 per retriever over the collections
    (beside the published values where comparable), the bm25 engines' agreement and speed
    ratio, HNSW's recall, and a caveat on subsets."""
    out = _baseline_sentences(order, baseline, retrievers)
    if len(agreement):
        out.append(f"bm25s and rank_bm25 on identical tokens differ by at most "
                   f"{agreement['nDCG@10 diff'].abs().max():.4f} nDCG@10 and their top-10 lists "
                   f"overlap {span(agreement['mean top-10 overlap'], '.2f')} on average.")
    fast = speed[speed.retriever == "bm25"].dropna(subset=["speed-up vs rank_bm25"])
    if len(fast):
        out.append(f"bm25s answers {span(fast['speed-up vs rank_bm25'], '.1f')}x more queries "
                   "per second than rank_bm25 in this run (the ratio depends on query length and "
                   "machine load).")
    if hnsw_rows:
        h = pd.DataFrame(list(hnsw_rows)).set_index("dataset")
        out.append(f"HNSW recovers {spread(h['top-10 recall vs flat'], '.4f')} of the exact "
                   f"top-10, its nDCG@10 differing from the flat index's by "
                   f"{spread(h['nDCG@10 HNSW'] - h['nDCG@10 flat'], '+.4f')}.")
    if not full:
        out.append("These are subsets (see the profile): easier than the full collections and "
                   "not comparable with published numbers.")
    return paragraph(out)
