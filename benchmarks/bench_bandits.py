"""Speed of qrlib.methods.bandits.bandits: 1,000 repetitions of one request, every Table 1 policy, all
budgets (10 %..100 % come from one run to 100 %), against a plain-Python reference
(a per-repetition loop implementing Algorithm 1) measured in the same run.

    python benchmarks/bench_bandits.py [--reps 1000] [--arms 5] [--depth 10]

Prints the wall time of each policy for ``reps`` repetitions, the total over all policies
(serial and hierarchical), and the ratio to the reference loop for the Bernoulli policy.
"""
from __future__ import annotations

import argparse
import random
import time

import numpy as np

from qrlib.methods.bandits import bandits as B


def synthetic_request(arms: int, depth: int, seed: int = 0) -> B.Request:
    """Arms with different relevance rates; overlapping lists; random embeddings."""
    rng = np.random.default_rng(seed)
    pool = [f"d{i}" for i in range(int(arms * depth * 0.8))]
    rates = np.linspace(0.6, 0.05, arms)
    rel = {d: 1 for d in pool if rng.random() < 0.25}
    ranked = []
    for a in range(arms):
        good = [d for d in pool if d in rel]
        bad = [d for d in pool if d not in rel]
        lst: list[str] = []
        while len(lst) < depth:
            src = good if rng.random() < rates[a] else bad
            d = src[rng.integers(len(src))]
            if d not in lst:
                lst.append(d)
        ranked.append([(d, float(depth - j)) for j, d in enumerate(lst)])
    parents = [-1] * ((arms + 1) // 2) + [i % ((arms + 1) // 2) for i in range(arms // 2)]
    emb = rng.normal(size=(len(pool), 16))
    req = B.make_request(ranked, rel, parent=parents)
    return B.make_request(ranked, rel, parent=parents,
                          embeddings={d: emb[int(d[1:])] for d in req.doc_ids})


def reference_thompson(req: B.Request, reps: int, seed: int = 0) -> list[list[int]]:
    """Algorithm 1 in plain Python, one repetition at a time (the reference)."""
    rnd = random.Random(seed)
    K, N = req.lists.shape
    U = req.n_docs
    lists = [[int(d) for d in row if d < U] for row in req.lists]
    out = []
    for _ in range(reps):
        alpha, beta = [1.0] * K, [1.0] * K
        ptr = [0] * K
        selected: set[int] = set()
        order = []
        while len(order) < U:
            best, arm = -1.0, -1
            for k in range(K):
                while ptr[k] < len(lists[k]) and lists[k][ptr[k]] in selected:
                    ptr[k] += 1
                if ptr[k] < len(lists[k]):
                    th = rnd.betavariate(alpha[k], beta[k])
                    if th > best:
                        best, arm = th, k
            d = lists[arm][ptr[arm]]
            r = float(req.rel[d])
            alpha[arm] += r
            beta[arm] += 1 - r
            selected.add(d)
            order.append(d)
        out.append(order)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--arms", type=int, default=5)
    ap.add_argument("--depth", type=int, default=10)
    args = ap.parse_args()
    req = synthetic_request(args.arms, args.depth)
    budgets = [i / 10 for i in range(1, 11)]
    print(f"request: {req.n_arms} arms x {args.depth} docs, {req.n_docs} pooled docs, "
          f"{int(req.rel.sum())} relevant; {args.reps} repetitions; budgets 10%..100%")
    B.simulate(req, "bernoulli", 10, seed=0)  # warm-up
    total = {}
    for hier in (False, True):
        t_all = 0.0
        for name in B.PAPER_ORDER:
            t0 = time.perf_counter()
            order = B.simulate(req, name, args.reps, seed=1, hierarchical=hier)
            prec, rec = B.precision_recall(order, req.rel, budgets)
            dt = time.perf_counter() - t0
            t_all += dt
            if not hier:
                print(f"  {name:20s} {dt * 1000:7.1f} ms   P@10%={prec[:, 0].mean():.3f} "
                      f"P@100%={prec[:, -1].mean():.3f}")
        total[hier] = t_all
        print(f"all {len(B.PAPER_ORDER)} policies, {'hierarchical' if hier else 'serial'}: "
              f"{t_all:.2f} s for {args.reps} repetitions each")
    ref_reps = max(20, args.reps // 10)
    t0 = time.perf_counter()
    reference_thompson(req, ref_reps, seed=0)
    t_ref = (time.perf_counter() - t0) * args.reps / ref_reps
    t0 = time.perf_counter()
    B.simulate(req, "bernoulli", args.reps, seed=1)
    t_vec = time.perf_counter() - t0
    print(f"Bernoulli Thompson sampling, {args.reps} repetitions: vectorised {t_vec * 1000:.1f} ms, "
          f"plain-Python loop {t_ref * 1000:.0f} ms (extrapolated from {ref_reps}); "
          f"speed-up x{t_ref / t_vec:.1f}")


if __name__ == "__main__":
    main()
