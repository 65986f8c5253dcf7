"""DeepRetrieval beyond BEIR: the steps notebook 11 calls.

1. The audit of Table 2's BM25 baselines against the released code (pat-jj/DeepRetrieval):
   :func:`lucene_grid` runs Lucene BM25 with and without the released ``contents:`` query
   prefix under both released BM25 settings, scored by standard nDCG@10 and by the released
   evaluation script (:func:`qrlib.retrieval.lucene.released_ndcg10`); :func:`audit_table`
   sets the published baseline and trained result beside them; :func:`prefix_damage` counts
   the queries whose first word the prefix swallows; :func:`engine_table` compares qrlib's
   ``bm25s`` with Lucene on the same queries.
2. Literature search (Table 1 left) through the PubMed and ClinicalTrials.gov adapters on
   replayed answers, scored by the Recall@3K tier reward of Table 8
   (:func:`litsearch_rewards`).
3. Evidence seeking (Table 1 right) for the raw question: :func:`evidence_sets`,
   :func:`answer_coverage`, :func:`raw_hits` and :func:`raw_table`, with H@N as
   :mod:`qrlib.methods.deepretrieval.evidence` defines it.

The sentences of the notebook's closing cell are built here too (:func:`audit_lines`,
:func:`evidence_summary`, :func:`final_summary`), from the saved tables.
"""
from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.data.datasets import load_dataset, subset
from qrlib.eval.agreement import top_k_overlap
from qrlib.eval.prose import spread
from qrlib.eval.metrics import evaluate
from qrlib.methods.deepretrieval import evidence as ev
from qrlib.methods.deepretrieval.released import released_bm25
from qrlib.retrieval import lucene as qlucene
from qrlib.retrieval.lucene_tokens import LuceneTokensBM25
from qrlib.retrieval.retrievers import build_retriever, run_queries
from qrlib.rl.env import RewardEnv

__all__ = ["ACCEPT_NDCG", "TABLE2_COLUMN", "base_name", "lucene_status", "prefix_demo", "load_collections",
           "ndcg10", "lucene_grid", "audit_table", "audit_figure", "prefix_damage",
           "engine_table", "audit_lines", "show_search", "LIT_QRELS", "Q_GOOD", "Q_NARROW",
           "Q_TRIALS", "lit_completions", "litsearch_rewards", "free_port", "live_search",
           "evidence_sets", "answer_coverage", "raw_hits", "raw_table", "hits_figure",
           "evidence_summary", "final_summary"]

#: How close (nDCG@10) the released query string must come to a published baseline to
#: reproduce it.
ACCEPT_NDCG = 0.005

#: Table 2's column of each audited collection (sparse retrieval).
TABLE2_COLUMN = {"scifact": "SciFact S", "nfcorpus": "NFCorpus S", "hotpotqa": "HotpotQA S"}

# The literature-search demo: one PICO question per engine, with placeholder relevant ids.
Q_GOOD = "(metformin) AND (type 2 diabetes) AND (cardiovascular outcomes)"
Q_NARROW = "(xqzvnonexistentterm) AND (zzqplaceholder)"
Q_TRIALS = "(semaglutide) AND (obesity)"
LIT_QRELS = {"pico-pubmed": {"38912345": 1, "37654321": 1, "99999999": 1},
             "pico-trials": {"NCT04184622": 1, "NCT00968708": 1, "NCT09999999": 1}}


def base_name(name: str) -> str:
    """``hotpotqa`` for any ``hotpotqa-*`` subset, else the name itself."""
    return "hotpotqa" if name.startswith("hotpotqa") else name


def lucene_status(lucene: bool | str) -> bool:
    """Whether to run Lucene: ``lucene`` is True (required: an error when unavailable),
    False (skip) or ``"auto"`` (when Pyserini and Java are present). Prints the decision."""
    ok, why = qlucene.lucene_available()
    if lucene is True and not ok:
        raise QrlibError(f"lucene=True but {why}")
    use = bool(lucene) and ok
    print("Lucene (Pyserini):", "used" if use else f"skipped ({'lucene=False' if not lucene else why})")
    return use


def prefix_demo(queries: Sequence[str]) -> Any:
    """Each query's Lucene tokens, plain and with the released ``contents:`` prefix."""
    import pandas as pd

    return pd.DataFrame([{"query": q, "Lucene tokens": qlucene.analyze(q),
                          "with contents: prefix": qlucene.analyze("contents:" + q)}
                         for q in queries])


def load_collections(names: Sequence[str], split: str, *, data_dir: str | os.PathLike | None,
                     full: bool, n_queries: int | None, n_distractors: int | None,
                     seed: int) -> dict[str, Any]:
    """Each collection's ``split`` (a seeded subset unless ``full``), printed as loaded."""
    out = {}
    for name in names:
        ds = load_dataset(name, split, data_dir=data_dir)
        if not full:
            ds = subset(ds, n_queries=n_queries, n_distractors=n_distractors, seed=seed)
        ds.name = name
        out[name] = ds
        print(f"{name:16s} {ds!r}")
    return out


def ndcg10(run: Any, ds: Any) -> float:
    """Standard nDCG@10 of ``run`` on ``ds``'s qrels (trec_eval's, via ir-measures)."""
    return float(evaluate(run, ds.qrels, ["nDCG@10"])["nDCG@10"][0])


def _qrel_rows(ds: Any, split: str) -> list[tuple[str, str, int]]:
    path = Path(ds.meta["source"]) / "qrels" / f"{split}.tsv"
    return [r for r in qlucene.read_qrel_rows(path) if r[0] in ds.queries and r[1] in ds.corpus]


def lucene_grid(collections: Mapping[str, Any], *, split: str, threads: int | None,
                cache: Path) -> Any:
    """Lucene BM25 per collection under both released settings (k1, b) = (0.9, 0.4) and
    (1.2, 0.75), plain queries and ``contents:``-prefixed ones: standard nDCG@10 and the
    released script's, and whether the row is the released setting of that collection. The
    index is built (or read from ``cache``) once per collection."""
    import pandas as pd

    rows = []
    for name, ds in collections.items():
        t0 = time.perf_counter()
        lr = qlucene.LuceneBM25Retriever(ds.corpus, threads=threads, cache=cache)
        print(f"{name}: Lucene index {'read from cache' if lr.loaded_from_cache else 'built'} "
              f"in {time.perf_counter() - t0:.1f} s ({lr.num_docs} docs)")
        lr.close()  # the index is cached; each setting below opens its own searcher
        qrows, rel = _qrel_rows(ds, split), released_bm25(name)
        for k1, b in ((0.9, 0.4), (1.2, 0.75)):
            for prefix in ("", "contents:"):  # one searcher per setting, on the cached index
                run = run_queries(qlucene.LuceneBM25Retriever(
                    ds.corpus, k1=k1, b=b, query_prefix=prefix, threads=threads, cache=cache),
                    ds.queries, k=10)
                rows.append({"dataset": name, "k1": k1, "b": b, "query": repr(prefix or "plain"),
                             "nDCG@10": ndcg10(run, ds),
                             "nDCG@10 (released eval)": qlucene.released_ndcg10(
                                 qrows, ds.queries, run, rel["protocol"]),
                             "released setting": (k1, b) == (rel["k1"], rel["b"])})
    return pd.DataFrame(rows)


def audit_table(collections: Mapping[str, Any], grid: Any, table2: Any, *, use_lucene: bool,
                k1: float, b: float, cache: Path) -> Any:
    """One row per collection on the same queries: the published BM25 and DeepRetrieval-3B
    (Table 2, as fractions), Lucene plain / prefixed / prefixed under the released
    evaluation (at the released setting, from ``grid``), ``bm25s`` at (``k1``, ``b``), and
    the trained result's gain over the published baseline and over plain Lucene scored the
    released way (NaN on the HotpotQA subset, whose corpus is not the paper's)."""
    import pandas as pd

    rows = []
    for name, ds in collections.items():
        bm = build_retriever("bm25", ds.corpus, k1=k1, b=b, cache=cache)
        col = TABLE2_COLUMN[base_name(name)]
        pub_base = float(table2.loc["BM25 / Dense", col])
        pub_trained = float(table2.loc["DeepRetrieval-3B", col])
        row = {"dataset": name, "queries": len(ds.queries), "docs": len(ds.corpus),
               "published BM25": pub_base / 100}
        if use_lucene:
            rel = released_bm25(name)
            g = grid[(grid.dataset == name) & (grid.k1 == rel["k1"])
                     & (grid.b == rel["b"])].set_index("query")
            row.update({"Lucene plain": g.loc["'plain'", "nDCG@10"],
                        "Lucene contents:": g.loc["'contents:'", "nDCG@10"],
                        "Lucene contents:, released eval": g.loc["'contents:'", "nDCG@10 (released eval)"],
                        "Lucene plain, released eval": g.loc["'plain'", "nDCG@10 (released eval)"]})
        row["bm25s"] = ndcg10(run_queries(bm, ds.queries, k=10), ds)
        row["published DeepRetrieval-3B"] = pub_trained / 100
        row["gain vs published BM25"] = (pub_trained - pub_base) / 100
        if use_lucene:  # only where our corpus is the paper's (hotpotqa-large is a subset)
            row["gain vs plain Lucene (released eval)"] = (
                pub_trained / 100 - row["Lucene plain, released eval"]
                if base_name(name) != "hotpotqa" else float("nan"))
        rows.append(row)
    return pd.DataFrame(rows)


def audit_figure(audit: Any) -> Any:
    """Grouped bars per collection: the published and measured nDCG@10 columns present."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.8))
    cols = [c for c in ["published BM25", "Lucene plain", "Lucene contents:",
                        "Lucene contents:, released eval", "bm25s", "published DeepRetrieval-3B"]
            if c in audit.columns]
    audit.set_index("dataset")[cols].plot.bar(ax=ax, rot=0)
    ax.set_ylabel("nDCG@10")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.set_title("Table 2 BM25 baselines: published vs measured here")
    fig.tight_layout()
    return fig


def damage_counts(plain: Sequence[Sequence[str]],
                  prefixed: Sequence[Sequence[str]]) -> dict[str, float]:
    """From each query's analysed tokens without and with the prefix: the mean query length,
    the share whose first token is glued to ``contents:`` (that word is lost), and the share
    left with no searchable term."""
    import numpy as np

    glued = [bool(p) and p[0].startswith("contents:") for p in prefixed]
    nothing = [len(p) - (1 if g else 0) == 0 for p, g in zip(prefixed, glued)]
    return {"mean query tokens": np.mean([len(t) for t in plain]),
            "share first word lost": np.mean(glued), "share with no term left": np.mean(nothing)}


def prefix_damage(collections: Mapping[str, Any]) -> Any:
    """:func:`damage_counts` per collection, with Anserini's default English analyzer."""
    import pandas as pd

    rows = []
    for name, ds in collections.items():
        qs = list(ds.queries.values())
        rows.append({"dataset": name, **damage_counts([qlucene.analyze(q) for q in qs],
                                                      [qlucene.analyze("contents:" + q) for q in qs])})
    return pd.DataFrame(rows)


def _timed(retriever: Any, ds: Any, reps: int = 2) -> tuple[Any, float]:
    """The run of ``ds``'s queries and the best queries per second over ``reps`` passes."""
    best, run = float("inf"), None
    for _ in range(reps):
        t0 = time.perf_counter()
        run = run_queries(retriever, ds.queries, k=10)
        best = min(best, time.perf_counter() - t0)
    return run, len(ds.queries) / best


def engine_table(collections: Mapping[str, Any], *, k1: float, b: float, threads: int | None,
                 cache_root: Path, use_lucene: bool, same_tokens: bool) -> Any:
    """``bm25s`` and Lucene at the same (``k1``, ``b``) on the same queries: nDCG@10, top-10
    overlap and batched queries per second (Lucene timed after a warm-up pass); with
    ``same_tokens`` also ``bm25s`` over Lucene's own tokens, which separates the tokenizer
    from the engine."""
    import pandas as pd

    rows = []
    for name, ds in collections.items():
        bm = build_retriever("bm25", ds.corpus, k1=k1, b=b, cache=cache_root / "bm25")
        run_b, qps_b = _timed(bm, ds)
        row = {"dataset": name, "queries": len(ds.queries), "nDCG@10 bm25s": ndcg10(run_b, ds),
               "bm25s q/s": qps_b}
        if use_lucene:
            lr = qlucene.LuceneBM25Retriever(ds.corpus, k1=k1, b=b, threads=threads,
                                             cache=cache_root / "lucene")  # the cached index
            run_queries(lr, ds.queries, k=10)  # warm-up (JIT)
            run_l, qps_l = _timed(lr, ds)
            row.update({"nDCG@10 Lucene": ndcg10(run_l, ds), "Lucene q/s": qps_l,
                        "Lucene threads": lr.threads, "Lucene / bm25s speed": qps_l / qps_b,
                        "top-10 overlap bm25s vs Lucene": top_k_overlap(run_b, run_l, 10)})
            if same_tokens:
                run_t = run_queries(LuceneTokensBM25(ds.corpus, k1, b), ds.queries, k=10)
                row.update({"nDCG@10 bm25s on Lucene tokens": ndcg10(run_t, ds),
                            "top-10 overlap (Lucene tokens) vs Lucene": top_k_overlap(run_t, run_l, 10)})
        rows.append(row)
    return pd.DataFrame(rows)


def audit_lines(audit: Any, *, use_lucene: bool, full: bool) -> list[str]:
    """One bullet per collection: published vs Lucene plain / prefixed / released
    evaluation, and the published trained gain both ways (full test sets only)."""
    import pandas as pd

    if not use_lucene:
        return ["- Lucene was not available in this run; the audit needs the `lucene` extra."]
    if not full:
        return ["- Subsets: the audit needs the full test sets (profile cpu/gpu)."]
    lines = []
    a = audit.set_index("dataset")
    for name in a.index:
        r = a.loc[name]
        lines.append(f"- **{name}**: published BM25 {r['published BM25']:.3f}; Lucene plain "
                     f"{r['Lucene plain']:.3f}, with `contents:` {r['Lucene contents:']:.3f}, and "
                     f"{r['Lucene contents:, released eval']:.3f} under the released evaluation. "
                     f"Published trained {r['published DeepRetrieval-3B']:.3f}: "
                     f"{100 * r['gain vs published BM25']:+.1f} points over the published baseline"
                     + (f", {100 * r['gain vs plain Lucene (released eval)']:+.1f} over plain Lucene "
                        "scored the same way." if pd.notna(r['gain vs plain Lucene (released eval)'])
                        else " (subset: no like-for-like gain)."))
    return lines


def show_search(engine: Any, query: str, k: int) -> None:
    """Print the first ids an engine returns for ``query`` and the requests it sent."""
    [ranked] = engine.search([query], k)
    print(f"{type(engine).__name__}: {len(ranked)} ids for {query!r}: {[d for d, _ in ranked[:5]]} ...")
    for url in engine.transport.requests:
        print("   request:", url)


def lit_completions() -> dict[str, list[str]]:
    """Completions for the two PICO questions: a good query, a query that finds nothing and
    a completion without the answer layout (PubMed); one good query (trials)."""
    return {
        "pico-pubmed": [f'<think>Population: adults with T2D; intervention: metformin.</think>'
                        f'<answer>{{"query": "{Q_GOOD}"}}</answer>',
                        f'<think>very specific terms</think><answer>{{"query": "{Q_NARROW}"}}</answer>',
                        "metformin diabetes cardiovascular"],
        "pico-trials": [f'<think>GLP-1 agonist trials in obesity</think><answer>{{"query": "{Q_TRIALS}"}}</answer>'],
    }


def litsearch_rewards(pubmed: Any, ctgov: Any, *, k: int,
                      completions: Mapping[str, Sequence[str]] | None = None,
                      qrels: Mapping[str, Mapping[str, int]] = LIT_QRELS) -> Any:
    """Each completion through ``RewardEnv(engine, qrels, reward="deepretrieval_recall",
    k=k)``: its parsed query, format, Recall@k, retrieval tier and total reward (Table 8)."""
    import pandas as pd

    rows = []
    for qid, comps in (completions or lit_completions()).items():
        engine = pubmed if qid == "pico-pubmed" else ctgov
        env = RewardEnv(engine, qrels, reward="deepretrieval_recall", fmt="deepretrieval", k=k)
        scores = env(completions=list(comps), qid=[qid] * len(comps))
        for r, rec in zip(scores, env.records):
            rows.append({"engine": type(engine).__name__, "qid": qid,
                         "query": rec["queries"][0] if rec["queries"] else "(none: format error)",
                         "format ok": rec["format_ok"], f"recall@{k}": rec.get("part_recall"),
                         "retrieval tier": rec.get("part_retrieval"), "reward": r})
    return pd.DataFrame(rows)


def free_port() -> int:
    """A local port with nothing listening (it stands in for an unreachable engine)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def live_search(k: int) -> Any:
    """The good PubMed query sent live to both engines: ids returned, the engine's count, or
    the one-line error."""
    import pandas as pd

    rows = []
    for engine in (build_retriever("pubmed", None), build_retriever("ctgov", None)):
        try:
            [ranked] = engine.search([Q_GOOD], k)
            rows.append({"engine": type(engine).__name__, "ids": len(ranked),
                         "engine count": engine.last_counts[0], "error": ""})
        except QrlibError as exc:
            rows.append({"engine": type(engine).__name__, "ids": 0, "engine count": None,
                         "error": str(exc)})
    return pd.DataFrame(rows)


def evidence_sets(names: Sequence[str], split: str, *, data_dir: str | os.PathLike | None,
                  drop_yes_no: bool, n_queries: int | None) -> tuple[dict[str, tuple], Any]:
    """``{name: (dataset, {qid: question}, {qid: answers})}`` of the scored questions (the
    first ``n_queries`` span-answerable ones when ``drop_yes_no``) and one row per set."""
    import numpy as np
    import pandas as pd

    sets, rows = {}, []
    for name in names:
        ds = load_dataset(name, split, data_dir=data_dir)
        answers_all = ev.dataset_answers(ds)
        qids = list(ds.queries)
        if drop_yes_no:
            qids = [q for q in qids if ev.span_answerable(answers_all[q])]
        if n_queries is not None:
            qids = qids[:n_queries]
        questions = {q: ds.queries[q] for q in qids}
        answers = {q: answers_all[q] for q in qids}
        sets[name] = (ds, questions, answers)
        rows.append({"dataset": name, "docs": len(ds.corpus), f"{split} questions": len(ds.queries),
                     "yes/no left out": sum(not ev.span_answerable(a) for a in answers_all.values())
                     if drop_yes_no else 0,
                     "scored": len(qids),
                     "answer strings per question": np.mean([len(a) for a in answers.values()])})
    return sets, pd.DataFrame(rows)


def coverage_row(questions: Sequence[str], answer_qrels: Mapping[str, Mapping[str, int]],
                 qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """How many passages contain an answer, per question: the share with none, the median
    and mean count, and the share whose gold (supporting) paragraph contains one."""
    import numpy as np

    counts = np.array([len(answer_qrels[q]) for q in questions])
    gold_has = [any(d in answer_qrels[q] for d in qrels.get(q, {})) for q in questions]
    return {"questions": len(questions),
            "no passage contains an answer": float((counts == 0).mean()),
            "median answer-bearing passages": float(np.median(counts)),
            "mean answer-bearing passages": float(counts.mean()),
            "a gold (supporting) paragraph contains an answer": float(np.mean(gold_has))}


def answer_coverage(sets: Mapping[str, tuple]) -> tuple[dict[str, dict], Any]:
    """Each set's answer-bearing passages (:func:`~qrlib.methods.deepretrieval.evidence.answer_qrels`)
    and one :func:`coverage_row` per set."""
    import pandas as pd

    aqrels, rows = {}, []
    for name, (ds, questions, answers) in sets.items():
        aqrels[name] = aq = ev.answer_qrels(ds.corpus, answers)
        rows.append({"dataset": name, **coverage_row(list(questions), aq, ds.qrels)})
    return aqrels, pd.DataFrame(rows)


def raw_hits(sets: Mapping[str, tuple], ns: Sequence[int], *, k1: float, b: float,
             cache: Path) -> dict[str, Any]:
    """Per set, H@N and the first answer-bearing rank of every question searched as written
    with ``bm25s`` (:func:`~qrlib.methods.deepretrieval.evidence.score_run`)."""
    out = {}
    for name, (ds, questions, answers) in sets.items():
        bm = build_retriever("bm25", ds.corpus, k1=k1, b=b, cache=cache)
        out[name] = ev.score_run(bm, questions, ds, answers, ns)
    return out


def raw_table(raw: Mapping[str, Any], table1: Any, hn: Sequence[str]) -> Any:
    """Our raw-question H@N per set, then Table 1's Original Query row per dataset (NQ,
    TriviaQA, SQuAD) where it has every H@N column."""
    import pandas as pd

    rows = [{"source": f"ours: {name} (raw question, bm25s)", "questions": len(df),
             **df[list(hn)].mean().to_dict(),
             "first answer rank (median, within top 20)": df["first_rank"].median()}
            for name, df in raw.items()]
    for ds_col in ("NQ", "TriviaQA", "SQuAD"):
        cols = [f"{ds_col} {h}" for h in hn if f"{ds_col} {h}" in table1.columns]
        if len(cols) == len(hn):
            rows.append({"source": f"published: {ds_col} (Original Query, BM25, 21M passages)",
                         **dict(zip(hn, table1.loc["Original Query", cols].tolist()))})
    return pd.DataFrame(rows)


def hits_figure(raw: Mapping[str, Any], hn: Sequence[str]) -> Any:
    """H@N bars of the raw question, one panel per set."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from qrlib import plots

    hn = list(hn)
    bars = pd.DataFrame([{"dataset": n, "query": "raw question", **raw[n][hn].mean().to_dict()}
                         for n in raw])
    fig, axes = plt.subplots(1, len(raw), figsize=(4.5 * len(raw), 3.6), squeeze=False)
    for ax, name in zip(axes[0], raw):
        bars[bars.dataset == name].set_index("query")[hn].T.plot.bar(ax=ax, rot=0, legend=False)
        ax.set_title(name)
        ax.set_ylim(0, 1)
        ax.set_ylabel("H@N (share of questions)")
    plots.legend_outside(axes[0][-1])
    fig.tight_layout()
    return fig


def _and(parts: Sequence[str]) -> str:
    """``"a, b and c"``."""
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else "".join(parts)


def _sp(values: Any, fmt: str = ".3f") -> str:
    """:func:`qrlib.eval.findings.spread` with a lone collection left unnamed (the
    sentence names the collections once)."""
    return spread(values, fmt, name_one=False)


def evidence_summary(raw: Mapping[str, Any], sets: Mapping[str, tuple], hn: Sequence[str], *,
                     split: str, drop_yes_no: bool) -> tuple[dict[str, float], list[str]]:
    """``(records, sentences)`` of section 4: H@N of the raw question per set, and one
    sentence naming them all for the closing cell (none without a set)."""
    records, parts = {}, []
    for name, df in raw.items():
        m = df[list(hn)].mean()
        for h in hn:
            records[f"evidence.raw.{name}.{h}"] = float(m[h])
        parts.append(", ".join(f"{h} {m[h]:.3f}" for h in hn) + f" on {name} ({len(df)} {split} "
                     f"questions, {len(sets[name][0].corpus):,} paragraphs)")
    if not parts:
        return records, []
    return records, [f"With bm25s the raw question reaches {_and(parts)}; "
                     + ("yes/no questions are left out and " if drop_yes_no else "")
                     + "the pooled corpora are not comparable with Table 1."]


def _engine_sentence(t_eng: Any) -> str:
    """bm25s against Lucene on the same queries: nDCG@10 difference, top-10 overlap (also
    on Lucene's own tokens) and Lucene's throughput."""
    tokens = (f" ({_sp(t_eng['top-10 overlap (Lucene tokens) vs Lucene'], '.2f')} with "
              "Lucene's own tokens)"
              if "top-10 overlap (Lucene tokens) vs Lucene" in t_eng.columns else "")
    return (f"On the same queries with equal k1/b, bm25s minus Lucene is "
            f"{_sp(t_eng['nDCG@10 bm25s'] - t_eng['nDCG@10 Lucene'], '+.3f')} nDCG@10, their "
            f"top-10 lists overlap {_sp(t_eng['top-10 overlap bm25s vs Lucene'], '.2f')}"
            f"{tokens}, and Lucene's batched search answers {_sp(t_eng['Lucene q/s'], ',.0f')} "
            f"queries per second ({_sp(t_eng['Lucene / bm25s speed'], '.2f')} times bm25s) in "
            "this run.")


def _audit_sentence(t_audit: Any, t_dmg: Any | None, full: bool) -> str:
    """Each Lucene reading minus the published BM25 over the collections (the collection
    at each end named), with the share of queries the prefix costs their first word."""
    pub = t_audit["published BM25"]
    names = _and(list(t_audit.index))
    scope = (f"On {names}" if full else
             f"On subsets of {names} (plumbing only, not comparable with the paper)")
    damage = ("" if t_dmg is None else
              f" (it costs {_sp(t_dmg['share first word lost'], '.0%')} of the queries their "
              f"first word; they average {_sp(t_dmg['mean query tokens'], '.1f')} tokens)")
    return (f"{scope}, against the published BM25 nDCG@10 of {_sp(pub)}, Lucene with plain "
            f"queries is {_sp(t_audit['Lucene plain'] - pub, '+.3f')}, with the released "
            f"`contents:` prefix {_sp(t_audit['Lucene contents:'] - pub, '+.3f')}{damage}, "
            f"with the prefix and the released evaluation script "
            f"{_sp(t_audit['Lucene contents:, released eval'] - pub, '+.3f')} and bm25s "
            f"{_sp(t_audit['bm25s'] - pub, '+.3f')}.")


def _full_checks(t_audit: Any) -> str:
    """On the full test sets: NFCorpus's published baseline against the released query
    string (within :data:`ACCEPT_NDCG` or not), SciFact's remaining gaps, HotpotQA's
    published value that the subset cannot check ("" when none applies)."""
    parts = []
    if "nfcorpus" in t_audit.index:
        d = t_audit.loc["nfcorpus", "Lucene contents:"] - t_audit.loc["nfcorpus", "published BM25"]
        parts.append(f"the released query string {'reproduces' if abs(d) <= ACCEPT_NDCG else 'misses'}"
                     f" NFCorpus's published baseline ({d:+.4f}; acceptance: {ACCEPT_NDCG})")
    if "scifact" in t_audit.index:
        r = t_audit.loc["scifact"]
        parts.append(f"on SciFact the prefix alone leaves "
                     f"{r['Lucene contents:'] - r['published BM25']:+.4f} to the published value "
                     f"and the released evaluation script (one item per qrels row, last target "
                     f"per query) {r['Lucene contents:, released eval'] - r['published BM25']:+.4f}")
    if "hotpotqa-large" in t_audit.index:
        parts.append(f"HotpotQA's published {t_audit.loc['hotpotqa-large', 'published BM25']:.3f} "
                     "cannot be checked on the hotpotqa-large subset")
    return "On the full test sets, " + "; ".join(parts) + "." if parts else ""


def _gain_sentence(t_audit: Any) -> str:
    """The published DeepRetrieval-3B gain over the published baseline and over plain
    Lucene scored the same way, on the collections that are not HotpotQA subsets."""
    own = t_audit[[not n.startswith("hotpotqa") for n in t_audit.index]]
    sub = [n for n in t_audit.index if n.startswith("hotpotqa")]
    note = (f"no gain is stated for {_and(sub)}, "
            f"{'a subset' if len(sub) == 1 else 'subsets'} of the paper's corpus" if sub else "")
    if not len(own):
        return note[:1].upper() + note[1:] + "." if note else ""
    plain = _sp(100 * own["gain vs plain Lucene (released eval)"], "+.1f")
    where = "" if len(own) == len(t_audit) else f" on {_and(list(own.index))}"
    return (f"Published DeepRetrieval-3B{where} ({_sp(own['published DeepRetrieval-3B'])}) gains "
            f"{_sp(100 * own['gain vs published BM25'], '+.1f')} points over the published "
            "baseline" + (f" and {plain} over plain Lucene scored the same way" if plain else "")
            + (f"; {note}" if note else "") + ".")


def final_summary(tables_dir: str | os.PathLike, *, full: bool,
                  litsearch_k: int) -> tuple[dict[str, Any], list[str]]:
    """``(records, sentences)`` of "What we found" (at most five; the closing cell adds
    :func:`evidence_summary`'s and joins them with :func:`qrlib.eval.findings.paragraph`),
    read back from the saved tables (``11_baseline_audit``, ``11_engines``,
    ``11_litsearch_env`` and, with Lucene, ``11_prefix_damage``): the audit over the
    collections, the checks on the full test sets, the published gains, bm25s vs Lucene,
    and the replayed literature-search rewards. Records are in recording order."""
    import pandas as pd

    tdir = Path(tables_dir)
    t_audit = pd.read_csv(tdir / "11_baseline_audit.csv").set_index("dataset")
    t_eng = pd.read_csv(tdir / "11_engines.csv").set_index("dataset")
    t_lit = pd.read_csv(tdir / "11_litsearch_env.csv")
    lucene = "Lucene contents:" in t_audit.columns
    rec: dict[str, Any] = {}
    for name, r in t_audit.iterrows():
        rec[f"bm25s.{name}.ndcg10"] = r["bm25s"]
        if lucene:
            rec[f"lucene_plain.{name}.ndcg10"] = r["Lucene plain"]
            rec[f"lucene_prefix.{name}.ndcg10"] = r["Lucene contents:"]
            rec[f"lucene_prefix_released_eval.{name}.ndcg10"] = r["Lucene contents:, released eval"]
    if lucene:
        dmg = tdir / "11_prefix_damage.csv"
        t_dmg = pd.read_csv(dmg).set_index("dataset") if dmg.exists() else None
        out = [_audit_sentence(t_audit, t_dmg, full), _full_checks(t_audit) if full else "",
               _gain_sentence(t_audit)]
        if "nfcorpus" in t_audit.index and full:
            n = t_audit.loc["nfcorpus"]
            rec["nfcorpus.prefix_minus_published"] = n["Lucene contents:"] - n["published BM25"]
        if "Lucene / bm25s speed" in t_eng.columns:
            for name, r in t_eng.iterrows():
                rec[f"engines.{name}.top10_overlap"] = r["top-10 overlap bm25s vs Lucene"]
            out.append(_engine_sentence(t_eng))
    else:
        out = ["Lucene (Pyserini) was not available, so the audit did not run (it needs the "
               "`lucene` extra and a Java runtime); bm25s reaches nDCG@10 "
               f"{spread(t_audit['bm25s'])}."]
    out.append("The literature-search adapters score the replayed answers "
               + ", ".join(f"{r.qid} {r.reward:+.2f}" for r in t_lit.itertuples())
               + f" (Recall@{litsearch_k} tiers), and a live search without network fails in "
                 "one line.")
    rec["litsearch.rewards"] = [float(x) for x in t_lit.reward]
    return rec, [s for s in out if s]
