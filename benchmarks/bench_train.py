"""Training throughput and where a GRPO step's time goes (generation / reward / update).

Runs a short GRPO training (default: SmolLM2-135M + LoRA, SciFact train claims, BM25,
DeepRetrieval nDCG reward through qrlib.env.RewardEnv) and prints, from the per-step log:
rollouts per second, and the share of step time spent in generation, in the reward
(parse + batched retrieval + scoring) and in the rest (log-probs, KL, backward, optimiser).
The reward share should stay below 10% of a step; the script exits 1 if it does not.

    python benchmarks/bench_train.py [--model smollm2] [--steps 3] [--generations 8]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--generations", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--retriever", default="bm25")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    import pandas as pd
    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    from qrlib.train import load_config, train

    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(dict(
            name="bench", run_dir=tmp, model=a.model, dataset="scifact", split="train",
            n_queries=32, n_distractors=None, retriever=a.retriever,
            fmt="deepretrieval-nothink", prefill='<answer>{"query": "',
            prompt={"user": "Claim: {query}\nWrite a keyword search query for abstracts that "
                            "support or refute it. Reply <answer>{{\"query\": \"...\"}}</answer>."},
            max_steps=a.steps, num_generations=a.generations, max_completion_length=a.tokens,
            save_steps=10_000, expansion=True, reward_params={"k": 100, "lenient": True}))
        t0 = time.perf_counter()
        s = train(cfg)
        wall = time.perf_counter() - t0
        log = pd.read_csv(s["log"])
    step = log.step_seconds.sum()
    gen = log.generation_seconds.sum()
    rew = log.reward_seconds.sum()
    upd = max(step - gen - rew, 0.0)
    rollouts = len(log) * a.generations
    print(f"model={a.model} steps={len(log)} rollouts/step={a.generations} "
          f"max_tokens={a.tokens} threads={torch.get_num_threads()}")
    print(f"throughput: {rollouts / step:.3f} rollouts/s over the steps "
          f"({step / len(log):.1f} s/step; train() wall {wall:.1f}s incl. setup)")
    print(f"share of step time: generation {gen / step:.1%}, reward {rew / step:.2%}, "
          f"update+logprobs {upd / step:.1%}")
    print(f"reward vs generation (same run): {rew / max(gen, 1e-9):.4f}x")
    ok = rew / step < 0.10
    print("reward share < 10% of step time:", "OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
