"""Small steps every ACQO notebook (06, 07, 12, 16, 18) repeats: rebuilding 06's training
collection and reward environment, building the training and test retrievers, cutting the
test sets, the model-free rule split, scoring a set of decompositions, reading a run's log
by quarters, and the settings line stamped on a figure.

It imports neither the trainer nor the transfer or ablation modules, so a notebook that
imports it depends on no more than the notebooks already did (``qrlib.workbook.freshness``).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from qrlib.core.errors import QrlibError
from qrlib.core.io import read_table
from qrlib.data import datasets as qdata
from qrlib.eval import metrics
from qrlib.eval.scale import fmt_scale, log_scale
from qrlib.methods.acqo.curriculum import search_fused
from qrlib.methods.bandits.decompose import heuristic_split
from qrlib.retrieval.retrievers import build_retriever
from qrlib.rl.env import RewardEnv
from qrlib.eval.stats import span

QUARTERS = ("first quarter", "last quarter")


def training_collection(record: Any, *, data_dir: Any = None) -> tuple[dict, dict]:
    """06's training corpus and qrels again, from the train split of each training set
    (:func:`rebuild_collection`)."""
    return rebuild_collection(record, lambda name: qdata.load_dataset(name, "train",
                                                                      data_dir=data_dir))


def rebuild_collection(record: Any, load: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """06's training corpus and qrels again: the paragraphs whose ids ``record``
    (:class:`~qrlib.methods.acqo.artifacts.Stage1Record`) saved, from each training set
    ``load(name)`` returns, and the qrels of its training questions."""
    ids, keep = set(record.corpus_ids), {r["qid"] for r in record.train_rows}
    corpus, qrels = {}, {}
    for name in record.train_datasets:
        ds = load(name)
        corpus.update({d: doc for d, doc in ds.corpus.items() if d in ids})
        qrels.update({q: rel for q, rel in ds.qrels.items() if q in keep})
    if len(corpus) != len(ids):
        raise QrlibError(f"06's training corpus could not be rebuilt: {len(ids) - len(corpus)} "
                         f"of its {len(ids)} paragraphs are missing from "
                         f"{', '.join(record.train_datasets)}")
    return corpus, qrels


def acqo_env(record: Any, retriever: Any, qrels: Mapping, reward: str,
             **extra: Any) -> RewardEnv:
    """ACQO's reward environment with 06's settings (``record``: its Stage1Record): at most
    three sub-queries, lenient parse, Eq. 3-5's k, eta and delta; ``extra``: the Stage II
    bonus (``lam``, ``k_star``, Eq. 10) or another ``fusion``."""
    return RewardEnv(retriever, qrels, reward=reward, fmt="acqo", k=record.reward_k,
                     max_subqueries=3, lenient=True, eta=record.eta, delta=record.delta, **extra)


def rule_split(question: str, max_subqueries: int = 3) -> list[str]:
    """The model-free row: the question and up to two sub-queries of
    :func:`~qrlib.methods.bandits.decompose.heuristic_split`, duplicates once."""
    return list(dict.fromkeys([question] + heuristic_split(question, 2)))[:max_subqueries]


def train_retriever(kind: str, corpus: Mapping[str, Any], *, cache_dir: Any = None,
                    hnsw_m: int = 32, ef_construction: int | None = None) -> Any:
    """The retriever of ACQO's training reward: BM25 with k1 = 1.2, b = 0.75, or the dense
    encoder over an HNSW index (ACQO trains against an approximate index, App. A.1)."""
    if kind == "bm25":
        return build_retriever("bm25", corpus, k1=1.2, b=0.75)
    extra = {} if ef_construction is None else {"ef_construction": ef_construction}
    return build_retriever("dense", corpus, index="hnsw", hnsw_m=hnsw_m, cache_dir=cache_dir,
                           show_progress=False, **extra)


def eval_retriever(kind: str, corpus: Mapping[str, Any], *, cache_dir: Any = None) -> Any:
    """An exact test retriever (BM25, or the dense encoder with a flat index)."""
    return build_retriever(kind, corpus, **({"cache_dir": cache_dir, "show_progress": False}
                                            if kind == "dense" else {}))


def eval_retrievers(test: Mapping[str, Any], kinds: Iterable[str], *,
                    cache_dir: Any = None) -> dict[tuple[str, str], Any]:
    """``{(dataset, kind): retriever}`` over each test set's own corpus."""
    return {(name, kind): eval_retriever(kind, ds.corpus, cache_dir=cache_dir)
            for name, ds in test.items() for kind in kinds}


def load_test_cuts(names: Iterable[str], *, data_dir: Any = None, n_queries: int | None = None,
              n_distractors: int | None = None, seed: int = 0) -> dict[str, Any]:
    """Each test split cut as notebook 07 cuts it: ``n_queries`` questions and their judged
    paragraphs plus ``n_distractors`` others (None: all)."""
    return {name: qdata.subset(qdata.load_dataset(name, "test", data_dir=data_dir),
                               n_queries=n_queries, n_distractors=n_distractors, seed=seed)
            for name in names}


def score_subqueries(retriever: Any, qrels: Mapping, subqueries: Mapping[str, Sequence[str]],
                     measures: Sequence[str], *, k: int = 100, fusion: str = "rsf",
                     n_sub: bool = True) -> tuple[pd.DataFrame, dict[str, float]]:
    """Per-question ``measures`` of the fused list of each question's sub-queries (ACQO
    Eq. 1-2 for ``rsf``), with an ``n_sub`` column (sub-queries written) unless ``n_sub`` is
    False, and the seconds of retrieval and fusion."""
    run, t = search_fused(retriever, subqueries, k=k, fusion=fusion)
    pq = metrics.evaluate(run, qrels, measures, per_query=True)
    if n_sub:
        pq["n_sub"] = pq.query_id.map({q: len(v) for q, v in subqueries.items()})
    return pq, t


def subqueries_of(decompositions: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """``{qid: sub-queries}`` of a list of decompositions."""
    return {d["qid"]: d["subqueries"] for d in decompositions}


def validity(decompositions: Sequence[Mapping[str, Any]]) -> float:
    """Share of well-formed outputs (the row's test validity)."""
    return sum(d["format_ok"] for d in decompositions) / len(decompositions)


def read_log(path: str | Path) -> pd.DataFrame:
    """A run's ``log.csv`` (query ids kept as strings)."""
    return pd.read_csv(path, dtype={"qids": str})


def quarters(log: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The first and the last quarter of a run's steps (at least one step each)."""
    q = max(1, len(log) // 4)
    return [(QUARTERS[0], log.head(q)), (QUARTERS[1], log.tail(q))]


def logs_setting(logs: Mapping[Any, pd.DataFrame], sep: str = "; ") -> str:
    """``"bm25 2 steps, ..."``: each run's training scale read from its log."""
    return sep.join(f"{k} {fmt_scale(log_scale(lg))}" for k, lg in logs.items())


def sub_queries_range(table: pd.DataFrame) -> str:
    """``"1.00-2.50"``: the smallest and largest mean sub-queries of a table's rows."""
    return span(table["sub-queries"], ".2f")


def published_table(tables_dir: str | Path, name: str, *, reader: str, writer: str,
                    profile: str) -> pd.DataFrame:
    """A table another notebook published in this profile (a one-line error naming the
    notebook to run when it is absent)."""
    path = Path(tables_dir) / f"{name}.csv"
    if not path.exists():
        raise QrlibError(f"notebook {reader} reads {writer}'s table {path}, which does not "
                         f"exist; run notebook {writer} of profile {profile} first")
    return read_table(path)


def interval(r: Mapping[str, Any]) -> str:
    """``"+0.021 [+0.014, +0.027]"`` of a comparison row."""
    return f"{r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]"
