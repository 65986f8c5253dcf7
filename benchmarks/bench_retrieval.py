"""bm25s vs rank_bm25 on SciFact: throughput ratio and ranking agreement, in one run.

    python benchmarks/bench_retrieval.py [--dataset scifact] [--split test] [--repeats 3]

Both engines index the same tokens (qrlib.retrieval.retrievers.Tokenizer: regex split, lower-case,
English stopwords, Snowball stemmer) with k1=1.2, b=0.75 and search the same queries for the
top 100. Throughput is queries / wall second of the batched search (best of ``--repeats``
for bm25s, whose single pass takes milliseconds; one pass for rank_bm25). Acceptance for the
workbook: bm25s at least 30x faster, nDCG@10 within 0.01, high top-10 overlap.

Then, when the ``lucene`` extra is installed (Pyserini + a Java runtime), Lucene BM25
(qrlib.retrieval.lucene, Anserini's multi-threaded ``batch_search``, the same k1/b as bm25s, its own
analyzer) against bm25s on ``--lucene-datasets`` (default SciFact and NFCorpus):
queries per second after one untimed warm-up pass (JIT), the ratio Lucene / bm25s measured in
this run, nDCG@10 of both and their top-10 overlap. Without the extra that part is skipped
with the reason printed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from qrlib.data.datasets import load_dataset
from qrlib.eval.metrics import evaluate
from qrlib.retrieval.retrievers import BM25Retriever


def timed_search(retriever: BM25Retriever, texts: list[str], k: int, repeats: int):
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = retriever.search(texts, k)
        best = min(best, time.perf_counter() - t0)
    return out, best


def lucene_vs_bm25s(args) -> dict:
    """Lucene (Pyserini) batch search vs bm25s on the same queries; prints one line each."""
    from qrlib.retrieval import lucene

    ok, why = lucene.lucene_available()
    if not ok:
        print(f"Lucene comparison skipped: {why}")
        return {"skipped": why}
    out = {}
    for name in [d for d in args.lucene_datasets.split(",") if d]:
        ds = load_dataset(name, args.split)
        qids = list(ds.queries)
        texts = [ds.queries[q] for q in qids]
        row = {"docs": len(ds.corpus), "queries": len(qids), "threads": args.lucene_threads}
        t0 = time.perf_counter()
        bm = BM25Retriever(ds, engine="bm25s")
        row["bm25s_build_s"] = round(time.perf_counter() - t0, 3)
        run_b, secs_b = timed_search(bm, texts, args.k, args.repeats)
        t0 = time.perf_counter()
        lu = lucene.LuceneBM25Retriever(ds, k1=bm.k1, b=bm.b, threads=args.lucene_threads)
        row["lucene_build_s"] = round(time.perf_counter() - t0, 3)
        row["lucene_index_cached"] = lu.loaded_from_cache
        t0 = time.perf_counter()
        lu.search(texts, args.k)  # warm-up: the JVM compiles the hot paths on first use
        row["lucene_warmup_s"] = round(time.perf_counter() - t0, 3)
        run_l, secs_l = timed_search(lu, texts, args.k, args.repeats)
        run_b, run_l = dict(zip(qids, run_b)), dict(zip(qids, run_l))
        row["bm25s_queries_per_s"] = round(len(qids) / secs_b, 1)
        row["lucene_queries_per_s"] = round(len(qids) / secs_l, 1)
        row["lucene_over_bm25s"] = round(secs_b / secs_l, 3)
        for key, run in (("bm25s", run_b), ("lucene", run_l)):
            row[f"{key}_nDCG@10"] = round(float(evaluate(run, ds.qrels, ["nDCG@10"])["nDCG@10"][0]), 4)
        ov = [len({d for d, _ in run_b[q][:10]} & {d for d, _ in run_l[q][:10]})
              / max(1, min(10, len(run_l[q]), len(run_b[q]) or 10)) for q in qids]
        row["mean_top10_overlap"] = round(float(np.mean(ov)), 4)
        lu.close()
        out[name] = row
        print(f"{name:10s} Lucene ({args.lucene_threads} threads) {row['lucene_queries_per_s']:9.1f} q/s "
              f"vs bm25s {row['bm25s_queries_per_s']:9.1f} q/s -> Lucene/bm25s "
              f"{row['lucene_over_bm25s']:.3f}x; nDCG@10 Lucene {row['lucene_nDCG@10']:.4f} "
              f"bm25s {row['bm25s_nDCG@10']:.4f}; top-10 overlap {row['mean_top10_overlap']:.3f}")
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="scifact")
    ap.add_argument("--split", default="test")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--lucene-datasets", default="scifact,nfcorpus")
    ap.add_argument("--lucene-threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-lucene", action="store_true", help="skip the Lucene comparison")
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
    if not args.no_lucene:
        res["lucene"] = lucene_vs_bm25s(args)
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
