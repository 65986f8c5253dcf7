"""Describing the collections (notebook 01): sizes, judgment depth, lengths, the multi-hop
question types, a pooled corpus and Spider's databases.

* :func:`load_splits` loads every (dataset, split) that exists;
* :func:`dataset_stats` is the size / judgment / length table (BEIR's Table 1 columns,
  Thakur et al. 2021) with the per-query and per-document lengths behind it;
  :func:`plot_lengths` draws those;
* :func:`hotpot_questions`, :func:`hotpot_tables`, :func:`twowiki_questions`,
  :func:`twowiki_types` and :func:`plot_multihop_types`: question types of the multi-hop sets
  (HotpotQA's bridge/comparison and levels; 2WikiMultihopQA's four types);
* :func:`pooled_corpus`: one multi-hop corpus alone and pooled with the others;
* :func:`spider_per_db` and :func:`plot_spider_dbs`: Spider dev questions per database;
* :func:`key_numbers` and :func:`findings`: what the notebook records and concludes.

A data module: it imports nothing from ``qrlib.methods``.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from qrlib.eval.prose import paragraph, spread

Loaded = Mapping[tuple[str, str], Any]   # (dataset, split) -> Dataset


def words(s: str) -> int:
    """Whitespace words of a string."""
    return len(s.split())


def sample_ids(ids: Any, n: int | None, rng: np.random.Generator) -> list[str]:
    """``n`` ids drawn without replacement from the sorted ids (all of them, sorted, when
    ``n`` is None or not smaller than their number)."""
    ids = sorted(ids)
    if n is None or n >= len(ids):
        return ids
    return [ids[i] for i in rng.choice(len(ids), size=n, replace=False)]


def load_splits(datasets: Sequence[str], splits: Sequence[str],
                data_dir: str | None) -> dict[tuple[str, str], Any]:
    """``{(dataset, split): Dataset}`` for every pair that exists (a split a dataset lacks
    is skipped; any other loading error is raised)."""
    from qrlib.core.errors import QrlibError
    from qrlib.data.datasets import load_dataset

    loaded = {}
    for name in datasets:
        for split in splits:
            try:
                loaded[(name, split)] = load_dataset(name, split, data_dir=data_dir)
            except QrlibError as exc:
                if "has no split" in str(exc):
                    continue
                raise
    return loaded


def dataset_stats(loaded: Loaded, splits: Sequence[str], max_docs: int | None,
                  seed: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One row per (dataset, split): documents, queries, qrels lines, judged and relevant
    (grade > 0) documents per query, the grade histogram, query words and document words
    (of ``title + text``, over up to ``max_docs`` documents sampled once per corpus with
    ``seed``). Also the query lengths (dataset, split, words) and the document lengths
    (dataset, words; once per corpus)."""
    rng = np.random.default_rng(seed)
    rows, qlen_rows, dlen_rows = [], [], []
    doc_len_cache: dict[str, list[int]] = {}
    for (name, split), ds in loaded.items():
        judged = [len(r) for r in ds.qrels.values()]
        rel = [sum(v > 0 for v in r.values()) for r in ds.qrels.values()]
        grades = Counter(v for r in ds.qrels.values() for v in r.values())
        qlens = [words(t) for t in ds.queries.values()]
        if name not in doc_len_cache:
            doc_len_cache[name] = [words(ds.doc_text(d))
                                   for d in sample_ids(ds.corpus, max_docs, rng)]
        dl = doc_len_cache[name]
        rows.append({"dataset": name, "split": split, "docs": len(ds.corpus),
                     "queries": len(ds.queries), "qrels": sum(judged),
                     "judged/query": np.mean(judged), "relevant/query": np.mean(rel),
                     "max judged": max(judged),
                     "grades": " ".join(f"{g}:{c}" for g, c in sorted(grades.items())),
                     "query words (mean)": np.mean(qlens), "query words (max)": max(qlens),
                     "doc words (mean)": np.mean(dl), "doc words (median)": np.median(dl)})
        qlen_rows += [{"dataset": name, "split": split, "words": n} for n in qlens]
        if split == splits[-1] or (name, splits[-1]) not in loaded:
            dlen_rows += [{"dataset": name, "words": n} for n in dl]
    return pd.DataFrame(rows), pd.DataFrame(qlen_rows), pd.DataFrame(dlen_rows)


def plot_lengths(q: pd.DataFrame, d: pd.DataFrame) -> Any:
    """Box plots (outliers hidden) of query lengths per collection and split, and of
    document lengths per collection (log scale)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from qrlib import plots

    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    sns.boxplot(data=q, x="words", y="dataset", hue="split", ax=axes[0], showfliers=False)
    axes[0].set(title="Query length", xlabel="query length (words)", ylabel="collection")
    plots.legend_outside(axes[0], where="below", title="split")
    sns.boxplot(data=d, x="words", y="dataset", ax=axes[1], showfliers=False, color="C2")
    axes[1].set_xscale("log")
    axes[1].set(title="Document length (title + text)", xlabel="document length (words, log scale)",
                ylabel="")
    fig.tight_layout()
    return fig


def hotpot_questions(loaded: Loaded, datasets: Sequence[str],
                     splits: Sequence[str]) -> pd.DataFrame:
    """One row per HotpotQA question: type, level, where the label came from, context
    setting and original HotpotQA split ("unknown" where the source has no label)."""
    rows = []
    for name in [n for n in datasets if n.startswith("hotpotqa")]:
        for split in splits:
            ds = loaded.get((name, split))
            if ds is None:
                continue
            for qid, m in ds.query_meta.items():
                rows.append({"dataset": name, "split": split, "type": m.get("type") or "unknown",
                             "level": m.get("level") or "unknown",
                             "label source": m.get("type_level_source") or "",
                             "context": m.get("context_setting", "distractor"),
                             "hotpot split": m.get("hotpot_split", "dev")})
    return pd.DataFrame(rows)


def hotpot_tables(hp: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Question counts per (dataset, split, type, level) and per (dataset, context, hotpot
    split)."""
    types = (hp.groupby(["dataset", "split", "type", "level"]).size()
             .rename("questions").reset_index())
    ctx = (hp.groupby(["dataset", "context", "hotpot split"]).size().rename("questions")
           .reset_index())
    return types, ctx


def twowiki_questions(loaded: Loaded, splits: Sequence[str],
                      name: str = "2wikimultihopqa-mini") -> pd.DataFrame:
    """One row per 2WikiMultihopQA question: type, where the type came from ("label",
    inferred, or "none") and its number of gold paragraphs."""
    rows = []
    for split in splits:
        ds = loaded.get((name, split))
        if ds is None:
            continue
        for qid, m in ds.query_meta.items():
            rows.append({"split": split, "type": m.get("type") or "unknown",
                         "type source": m.get("type_source") or "label" if m.get("type") else "none",
                         "gold paragraphs": m.get("num_supporting") or len(ds.qrels[qid])})
    return pd.DataFrame(rows)


def twowiki_types(tw: pd.DataFrame) -> pd.DataFrame:
    """Question counts per (split, type, type source, gold paragraphs)."""
    return (tw.groupby(["split", "type", "type source", "gold paragraphs"]).size()
            .rename("questions").reset_index())


def plot_multihop_types(hp: pd.DataFrame, tw: pd.DataFrame) -> Any:
    """Stacked bars: HotpotQA test questions by type per collection (top) and
    2WikiMultihopQA-mini questions by type per split (bottom); a panel stays empty when its
    frame is."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, axes = plt.subplots(2, 1, figsize=(9, 6.4))
    if len(hp):
        ct = hp[hp.split == "test"].groupby(["dataset", "type"]).size().unstack(fill_value=0)
        ct.plot.barh(stacked=True, ax=axes[0])
        axes[0].set(title="HotpotQA test questions by type", xlabel="questions (count)",
                    ylabel="collection")
        plots.legend_outside(axes[0], title="type")
    if len(tw):
        ct2 = tw.groupby(["split", "type"]).size().unstack(fill_value=0)
        ct2.plot.barh(stacked=True, ax=axes[1])
        axes[1].set(title="2WikiMultihopQA-mini questions by type", xlabel="questions (count)",
                    ylabel="split")
        plots.legend_outside(axes[1], title="type")
    fig.tight_layout()
    return fig


def corpus_row(label: str, ds: Any) -> dict[str, Any]:
    """Size and judgment density of one collection's test corpus: documents, queries,
    judged documents over all queries, their fraction of the corpus, judged per query and
    documents per judged document."""
    judged_all = {d for r in ds.qrels.values() for d in r}
    return {"corpus": label, "docs": len(ds.corpus), "test queries": len(ds.queries),
            "judged docs (all test queries)": len(judged_all),
            "judged fraction": len(judged_all) / len(ds.corpus),
            "judged per query": np.mean([len(r) for r in ds.qrels.values()]),
            "docs per judged doc": len(ds.corpus) / max(len(judged_all), 1)}


def pooled_corpus(base: str, extra: Sequence[str],
                  data_dir: str | None) -> tuple[list[dict[str, Any]], Any]:
    """:func:`corpus_row` of ``base``'s test collection alone and with the ``extra``
    corpora pooled in as distractors, and the pooled collection's count of ids the corpora
    share (``extra_corpora_shared_ids``)."""
    from qrlib.data.datasets import load_dataset

    own = load_dataset(base, "test", data_dir=data_dir)
    pooled = load_dataset(base, "test", data_dir=data_dir, extra_corpora=extra)
    rows = [corpus_row(f"{base} {label}", ds)
            for label, ds in (("own corpus", own), ("pooled corpus", pooled))]
    return rows, pooled.meta.get("extra_corpora_shared_ids")


def spider_per_db(sp: Any) -> pd.DataFrame:
    """Spider questions per database (the skipped ones of a missing database included),
    whether its SQLite file is present and its number of tables, most questions first."""
    per_db = pd.DataFrame(sp.examples).groupby("db_id").size().rename("questions").to_frame()
    for db, n in sp.skipped.items():
        per_db.loc[db, "questions"] = n
    per_db["sqlite present"] = [db in sp.db_paths for db in per_db.index]
    per_db["tables"] = [len(sp.schemas[db]["tables"]) for db in per_db.index]
    return per_db.sort_values("questions", ascending=False).reset_index()


def plot_spider_dbs(per_db: pd.DataFrame) -> Any:
    """Horizontal bars of :func:`spider_per_db`, red where the SQLite file is missing."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    colors = ["C3" if not p else "C0" for p in per_db["sqlite present"]]
    ax.barh(per_db["db_id"], per_db["questions"], color=colors)
    ax.invert_yaxis()
    ax.set_xlabel("questions (count)")
    ax.set_ylabel("database")
    ax.set_title("Spider dev: questions per database (red: SQLite file missing)")
    fig.tight_layout()
    return fig


def key_numbers(stats: pd.DataFrame, per_db: pd.DataFrame | None = None,
                skipped: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The numbers the smoke tests read: queries and relevant documents per query of each
    (dataset, split), documents per dataset, and Spider's usable and skipped questions."""
    out: dict[str, Any] = {}
    for r in stats.to_dict("records"):
        out[f"{r['dataset']}.{r['split']}.queries"] = r["queries"]
        out[f"{r['dataset']}.{r['split']}.relevant_per_query"] = r["relevant/query"]
        out[f"{r['dataset']}.docs"] = r["docs"]
    if per_db is not None:
        out["spider.questions_usable"] = int(per_db.loc[per_db["sqlite present"], "questions"].sum())
        out["spider.questions_skipped"] = int(sum((skipped or {}).values()))
    return out


def _collections_sentences(test: pd.DataFrame) -> list[str]:
    """One sentence for a single test collection; two (sizes, then judgments and lengths)
    giving each column's range and the collections at its ends for several."""
    if len(test) == 1:
        name, r = next(test.iterrows())
        return [f"The test collection {name} has {r['docs']:,} documents and {r['queries']:,} "
                f"test queries with {r['relevant/query']:.2f} relevant documents per query (up "
                f"to {r['max judged']} judged for one query); queries average "
                f"{r['query words (mean)']:.1f} words and the median document has "
                f"{r['doc words (median)']:.0f} words."]
    most = test["max judged"].idxmax()
    return [f"The {len(test)} test collections hold {spread(test['docs'], ',.0f')} documents "
            f"and {spread(test['queries'], ',.0f')} test queries.",
            f"Relevant documents per query run {spread(test['relevant/query'], '.2f')}, with up "
            f"to {test.loc[most, 'max judged']} judged for one {most} query; queries average "
            f"{spread(test['query words (mean)'], '.1f')} words and the median document has "
            f"{spread(test['doc words (median)'], '.0f')} words."]


def findings(stats: pd.DataFrame, pool_rows: Sequence[Mapping[str, Any]], pooled_base: str,
             per_db: pd.DataFrame | None = None, sp: Any = None) -> str:
    """The "What we found" paragraph: the test collections' sizes, judgments and lengths
    (ranges, with the collection at each end), the pooled corpus's growth and Spider's
    usable share (where ``per_db`` and ``sp`` are given)."""
    test = stats[stats.split == "test"].set_index("dataset")
    out = _collections_sentences(test) if len(test) else []
    if pool_rows:
        own, big = pool_rows[0], pool_rows[-1]
        out.append(f"Pooling the other Wikipedia sets into {pooled_base} grows its corpus from "
                   f"{own['docs']:,} to {big['docs']:,} documents, so judged documents make up "
                   f"{big['judged fraction']:.1%} of it instead of {own['judged fraction']:.1%}.")
    if per_db is not None:
        out.append(f"On Spider dev {int(per_db.loc[per_db['sqlite present'], 'questions'].sum()):,} "
                   f"questions can be executed and {sum(sp.skipped.values())} are on the missing "
                   f"database(s) {', '.join(sp.meta['missing_databases'])}.")
    return paragraph(out)
