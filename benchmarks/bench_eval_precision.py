"""Does the evaluation path keep what training changed?

A LoRA update is small: B·A is about 1e-5 per weight after a few steps, while bf16 resolves
about 1e-4 at |w| = 0.03. Merging the adapter into fp32 weights keeps it; decoding the merged
model under bf16 autocast rounds every weight to bf16 in each matmul and can erase it. This
benchmark decodes the same test queries greedily with one trained adapter on several paths
and prints, for each, the share of outputs that differ from the reference (fp32, adapter
kept as its own LoRA side path), the share that equal the *untrained* model's (the update
erased), and the decoding time as a ratio to the reference measured in the same run:

    python benchmarks/bench_eval_precision.py --run-dir runs/smoke --queries 32

Paths: ``fp32-unmerged`` (reference), ``fp32-merged``, ``bf16-merged`` (merged weights under
autocast: the evaluation path of notebooks 05 and 08 before this fix), ``bf16-unmerged``
(autocast, LoRA side path kept: the base weights round, the update is added in its own
matmul), and ``base`` under fp32 (no adapter).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PATHS = {  # name: (load the adapter?, merge it?, autocast?)
    "fp32-unmerged": (True, False, False),
    "fp32-merged": (True, True, False),
    "bf16-merged": (True, True, True),
    "bf16-unmerged": (True, False, True),
    "base-fp32": (False, False, False),
}


def decode(cfg: dict, adapter: Path, queries: dict[str, str], path: str, max_new_tokens: int
           ) -> tuple[list[str], float]:
    from qrlib.generation import policy, rewrite

    with_adapter, merge, autocast = PATHS[path]
    model, tok = policy.load_policy(cfg["model"], adapter=adapter if with_adapter else None,
                                    merge=merge)
    t0 = time.perf_counter()
    df = rewrite.rewrite_queries(model, tok, queries, cfg["prompt"], fmt=cfg["fmt"],
                                 prefill=cfg.get("prefill", ""),
                                 mode="expand" if cfg.get("expansion") else "rewrite",
                                 max_new_tokens=max_new_tokens, batch_size=16, progress=False,
                                 autocast=autocast)
    seconds = time.perf_counter() - t0
    del model
    gc.collect()
    return list(df["completion"]), seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", default="runs/smoke", help="run folder with rl/<run>/adapter")
    ap.add_argument("--adapter", default=None, help="one adapter folder (default: every one)")
    ap.add_argument("--queries", type=int, default=32, help="test queries per adapter")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    args = ap.parse_args(argv)

    from qrlib.data import datasets as qdata

    adapters = ([Path(args.adapter)] if args.adapter else
                sorted(p.parent for p in Path(args.run_dir).glob("rl/*/adapter/adapter_config.json")))
    if not adapters:
        print(f"error: no trained adapter under {args.run_dir}/rl/*/adapter", file=sys.stderr)
        return 2
    print("adapter | path | differs from fp32-unmerged | equals the untrained model | "
          "time vs fp32-unmerged")
    for adapter in adapters:
        cfg = json.loads((adapter.parent / "config.json").read_text())
        if not cfg.get("dataset") or cfg.get("fmt") is None:
            continue
        ds = qdata.load_dataset(cfg["dataset"], "test")
        queries = dict(list(ds.queries.items())[: args.queries])
        outs = {p: decode(cfg, adapter, queries, p, args.max_new_tokens) for p in PATHS}
        ref, t_ref = outs["fp32-unmerged"]
        base = outs["base-fp32"][0]
        for p, (texts, secs) in outs.items():
            diff = sum(a != b for a, b in zip(texts, ref)) / len(ref)
            same_base = sum(a == b for a, b in zip(texts, base)) / len(ref)
            print(f"{adapter.parent.name} | {p} | {diff:.2f} | {same_base:.2f} | "
                  f"{secs / t_ref:.2f}x ({secs:.1f} s, {len(ref)} queries)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
