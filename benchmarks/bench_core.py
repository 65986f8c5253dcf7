"""Speed of the method core: fusion, reward scoring, and a 64-completion reward batch.

    python benchmarks/bench_core.py [--queries 1000] [--repeats 5] [--data-dir DIR]

Prints, per query/rollout, the time of each fusion method (3 lists of depth 100) and of
each reward (pure scoring on precomputed lists), and the wall time of one RewardEnv call on
64 completions with BM25 over SciFact (parse + one batched search + fusion + reward). The
reference measured in the same run is the cost of one BM25 search per query, i.e. the
retrieval the fusion and reward are added to. Acceptance targets: fusion + reward < 1 ms
per query on average; a 64-completion batch < 0.2 s.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from qrlib.retrieval import fusion
from qrlib.rl import rewards as R


def best_time(fn, repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def synthetic_groups(n: int, n_lists: int = 3, depth: int = 100, pool: int = 300, seed: int = 0):
    rng = random.Random(seed)
    groups, qrels = [], []
    for _ in range(n):
        docs = [f"d{i}" for i in range(pool)]
        lists = []
        for _ in range(n_lists):
            picked = rng.sample(docs, depth)
            lists.append([(d, float(depth - i) + rng.random()) for i, d in enumerate(picked)])
        groups.append(lists)
        qrels.append({d: 1 for d in rng.sample(docs, 2)})
    return groups, qrels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    n = args.queries
    groups, qrels = synthetic_groups(n)
    report: dict[str, float] = {}

    print(f"== fusion: {n} queries x 3 lists x depth 100 (us per query, best of {args.repeats})")
    for name in ("rrf", "rsf", "combsum", "combmnz"):
        t = best_time(lambda: [fusion.fuse(g, name, top=100) for g in groups], args.repeats)
        report[f"fusion_{name}_us"] = 1e6 * t / n
        print(f"  {name:8s} {1e6 * t / n:8.1f} us")

    print(f"== reward scoring on precomputed lists (us per rollout)")
    obs = [R.Observation(qid=str(i), ranked=fusion.rsf(g, top=100), qrels=q, sub_ranked=g,
                         queries=["x"], original_query="y", strategy=1 + i % 5,
                         tagged=True, n_outside=i % 3)
           for i, (g, q) in enumerate(zip(groups, qrels))]
    cases = {"deepretrieval_ndcg": {}, "deepretrieval_recall": {}, "acqo_stage1": {},
             "acqo_stage2": {"k_star": 3}, "sage_scs": {}, "sage_crs": {}, "rlqr": {}}
    for name, params in cases.items():
        rw = R.make_reward(name, **params)
        if rw.level == "group":
            chunks = [obs[i:i + 8] for i in range(0, n, 8)]
            t = best_time(lambda: [rw.score(c) for c in chunks], args.repeats)
        else:
            t = best_time(lambda: rw.score(obs), args.repeats)
        report[f"reward_{name}_us"] = 1e6 * t / n
        print(f"  {name:22s} {1e6 * t / n:8.1f} us")
    worst = max(report[f"fusion_rsf_us"] + report[f"reward_{c}_us"] for c in cases)
    mean = statistics.fmean(report["fusion_rsf_us"] + report[f"reward_{c}_us"] for c in cases)
    print(f"  RSF + reward: mean {mean:.1f} us, worst {worst:.1f} us per query "
          f"-> {'PASS' if mean < 1000 else 'FAIL'} (< 1 ms avg)")

    print("== RewardEnv batch of 64 completions, BM25 on SciFact")
    from qrlib.data.datasets import load_dataset
    from qrlib.rl.env import RewardEnv
    from qrlib.retrieval.retrievers import build_retriever
    ds = load_dataset("scifact", "test", data_dir=args.data_dir)
    t0 = time.perf_counter()
    ret = build_retriever("bm25", ds.corpus)
    print(f"  index build {time.perf_counter() - t0:.2f}s ({len(ds.corpus)} docs, not counted)")
    rng = random.Random(1)
    qids = rng.sample(sorted(ds.queries), 8)
    qcol = [q for q in qids for _ in range(8)]
    words = {q: ds.queries[q].split() for q in qids}

    def drop(q):
        return " ".join(w for w in words[q] if rng.random() > 0.25) or ds.queries[q]

    ref = best_time(lambda: ret.search([ds.queries[q] for q in qcol], 10), args.repeats)
    report["bm25_search_64_s"] = ref
    print(f"  reference: one batched BM25 search of 64 raw queries {ref * 1e3:.1f} ms "
          f"({ref / 64 * 1e6:.0f} us per query)")
    dr = [f"<think>t</think><answer>{json.dumps({'query': drop(q)})}</answer>" for q in qcol]
    ac = [json.dumps({"query": f"{drop(q)}%%{drop(q)}"}) for q in qcol]
    sg = [json.dumps({"query": drop(q), "strategy": 1 + i % 5}) for i, q in enumerate(qcol)]
    batches = {"deepretrieval_ndcg": ("deepretrieval", dr, {"k": 10}),
               "acqo_stage2 (2 sub-queries)": ("acqo", ac, {"k_star": 3}),
               "acqo_stage1 (2 sub-queries)": ("acqo", ac, {}),
               "sage_scs": ("sage", sg, {"k": 10})}
    for label, (fmt, comps, params) in batches.items():
        env = RewardEnv(ret, ds.qrels, reward=label.split()[0], fmt=fmt, keep_records=True,
                        **params)
        t = best_time(lambda: env(None, comps, qid=qcol), args.repeats)
        report[f"env64_{label}_s"] = t
        print(f"  {label:28s} {t * 1e3:7.1f} ms per batch ({t / ref:4.1f}x the raw search) "
              f"-> {'PASS' if t < 0.2 else 'FAIL'} (< 0.2 s)")
    print(json.dumps({k: round(v, 6) for k, v in report.items()}))


if __name__ == "__main__":
    main()
