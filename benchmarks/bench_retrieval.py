"""bm25s vs rank_bm25 on SciFact: throughput ratio and ranking agreement, in one run.

    python benchmarks/bench_retrieval.py [--dataset scifact] [--split test] [--repeats 3]

Both engines index the same tokens (qrlib.retrieval.Tokenizer: regex split, lower-case,
English stopwords, Snowball stemmer) with k1=1.2, b=0.75 and search the same queries for the
top 100. Throughput is queries / wall second of the batched search (best of ``--repeats``
for bm25s, whose single pass takes milliseconds; one pass for rank_bm25). Acceptance for the
workbook: bm25s at least 30x faster, nDCG@10 within 0.01, high top-10 overlap.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from qrlib.data import load_dataset
from qrlib.metrics import evaluate
from qrlib.retrieval import BM25Retriever


def timed_search(retriever: BM25Retriever, texts: list[str], k: int, repeats: int):
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = retriever.search(texts, k)
        best = min(best, time.perf_counter() - t0)
    return out, best


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="scifact")
    ap.add_argument("--split", default="test")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    ds = load_dataset(args.dataset, args.split)
    qids = list(ds.queries)
    texts = [ds.queries[q] for q in qids]
    res = {"dataset": args.dataset, "split": args.split, "docs": len(ds.corpus),
           "queries": len(qids), "k": args.k, "cpus": os.cpu_count(),
           "python": platform.python_version()}
    runs = {}
    for engine, reps in (("bm25s", args.repeats), ("rank_bm25", 1)):
        t0 = time.perf_counter()
        r = BM25Retriever(ds, engine=engine)
        build = time.perf_counter() - t0
        out, secs = timed_search(r, texts, args.k, reps)
        runs[engine] = dict(zip(qids, out))
        res[engine] = {"build_s": round(build, 3), "search_s": round(secs, 4),
                       "queries_per_s": round(len(qids) / secs, 1),
                       "nDCG@10": round(float(evaluate(runs[engine], ds.qrels,
                                                        ["nDCG@10"])["nDCG@10"][0]), 4)}
    res["speedup"] = round(res["bm25s"]["queries_per_s"] / res["rank_bm25"]["queries_per_s"], 1)
    res["ndcg10_diff"] = round(res["bm25s"]["nDCG@10"] - res["rank_bm25"]["nDCG@10"], 4)
    ov = [len({d for d, _ in runs["bm25s"][q][:10]} & {d for d, _ in runs["rank_bm25"][q][:10]})
          / max(1, min(10, len(runs["bm25s"][q]))) for q in qids]
    res["mean_top10_overlap"] = round(float(np.mean(ov)), 4)
    res["accept_speedup_ge_30x"] = res["speedup"] >= 30
    res["accept_ndcg_within_0.01"] = abs(res["ndcg10_diff"]) <= 0.01
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        for e in ("bm25s", "rank_bm25"):
            x = res[e]
            print(f"{e:10s} build {x['build_s']:7.3f}s  search {x['search_s']:8.4f}s  "
                  f"{x['queries_per_s']:10.1f} q/s  nDCG@10 {x['nDCG@10']:.4f}")
        print(f"speed-up bm25s / rank_bm25: {res['speedup']}x (acceptance >= 30x: "
              f"{res['accept_speedup_ge_30x']})")
        print(f"nDCG@10 difference: {res['ndcg10_diff']:+.4f} (acceptance |diff| <= 0.01: "
              f"{res['accept_ndcg_within_0.01']}); mean top-10 overlap: "
              f"{res['mean_top10_overlap']:.3f}")
    return res


if __name__ == "__main__":
    main()
