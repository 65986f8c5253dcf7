"""Raw-query baselines: retrieve with the original query text, score with ir-measures.

``python -m qrlib baseline --dataset scifact --retriever bm25`` prints nDCG@10, R@100,
MAP@10 (ir-measures ``AP@10``) and MRR@10 (``RR@10``) — the "Raw" rows that every
query-optimisation paper compares against (e.g. ACQO Tables 2-4, DeepRetrieval's BM25
baselines). k1/b default to 1.2/0.75 (ACQO A.1 for HotpotQA; BEIR's BM25 setting).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from qrlib.core.errors import QrlibError
from qrlib.core.io import atomic_write, load_json, save_json
from qrlib.data.datasets import load_dataset
from qrlib.eval.metrics import BASELINE_MEASURES, evaluate, label
from qrlib.retrieval.retrievers import RETRIEVER_KINDS, build_retriever, run_queries


@dataclass
class BaselineResult:
    """One dataset x retriever: the run, per-query and aggregate metrics, timings."""

    dataset: str
    retriever: str
    split: str
    run: dict[str, list[tuple[str, float]]]
    per_query: pd.DataFrame
    metrics: dict[str, float]
    timings: dict[str, float] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "retriever": self.retriever, "split": self.split,
                "queries": len(self.per_query),
                **{label(m): v for m, v in self.metrics.items()}, **self.timings}


def run_baseline(ds: Any, kind: str, *, k: int = 100, measures=BASELINE_MEASURES,
                 retriever: Any = None, **params: Any) -> BaselineResult:
    """Retrieve every query of ``ds`` with ``kind`` (or a prebuilt ``retriever``) and score it."""
    if not ds.queries:
        raise QrlibError(f"dataset {ds.name} has no queries in split {ds.meta.get('split')!r}")
    t0 = time.perf_counter()
    r = retriever if retriever is not None else build_retriever(kind, ds.corpus, **params)
    t1 = time.perf_counter()
    run = run_queries(r, ds.queries, k=k)
    t2 = time.perf_counter()
    per_q = evaluate(run, ds.qrels, measures, per_query=True)
    agg = {m: float(per_q[m].mean()) for m in measures}
    return BaselineResult(ds.name, kind, str(ds.meta.get("split")), run, per_q, agg,
                          {"build_s": t1 - t0, "search_s": t2 - t1,
                           "queries_per_s": len(ds.queries) / max(t2 - t1, 1e-9)})


def baseline_main(dataset: str, retriever: str = "bm25", split: str = "test",
                  as_json: bool = False, *, data_dir: str | None = None, k: int = 100,
                  **params: Any) -> dict[str, Any]:
    """CLI entry: load ``dataset``, run the raw queries through ``retriever``, print metrics."""
    if retriever not in RETRIEVER_KINDS:
        raise QrlibError(f"unknown retriever {retriever!r}; accepted: {', '.join(RETRIEVER_KINDS)}")
    ds = load_dataset(dataset, split, data_dir=data_dir)
    res = run_baseline(ds, retriever, k=k, **params)
    row = res.row()
    if as_json:
        print(json.dumps(row, indent=2))
    else:
        df = pd.DataFrame([row])
        print(df.to_markdown(index=False, floatfmt=".4f"))
    return row


# --------------------------------------------------------------------------- artifacts
def baseline_dir(run_dir: str | Path) -> Path:
    """Where notebook 02 writes raw-query baselines: ``<run_dir>/baselines``."""
    return Path(run_dir) / "baselines"


def _stem(dataset: str, retriever: str) -> str:
    return f"{dataset}__{retriever}".replace("/", "_")


def save_baseline(res: BaselineResult, run_dir: str | Path, *, save_run: bool = True) -> dict[str, str]:
    """Write per-query metrics (CSV) and the ranked run (JSON, top-k) atomically."""
    out = baseline_dir(run_dir)
    stem = _stem(res.dataset, res.retriever)
    paths = {"per_query": str(out / f"{stem}.per_query.csv")}
    atomic_write(paths["per_query"], res.per_query.to_csv(index=False))
    if save_run:
        paths["run"] = str(out / f"{stem}.run.json")
        save_json({q: [[d, round(s, 6)] for d, s in lst] for q, lst in res.run.items()},
                  paths["run"])
    return paths


def load_baseline(run_dir: str | Path, dataset: str, retriever: str = "bm25"
                  ) -> tuple[pd.DataFrame, dict[str, list[tuple[str, float]]] | None]:
    """(per-query metrics, run or None) written by notebook 02 for ``dataset`` x ``retriever``."""
    out = baseline_dir(run_dir)
    stem = _stem(dataset, retriever)
    pq = out / f"{stem}.per_query.csv"
    if not pq.exists():
        have = sorted(p.name.split(".")[0] for p in out.glob("*.per_query.csv"))
        raise QrlibError(f"no baseline for {dataset} x {retriever} in {out}; run notebook 02 "
                         f"first (available: {', '.join(have) or 'none'})")
    per_q = pd.read_csv(pq, dtype={"query_id": str})
    rp = out / f"{stem}.run.json"
    run = {q: [(d, float(s)) for d, s in lst] for q, lst in load_json(rp).items()} \
        if rp.exists() else None
    return per_q, run
