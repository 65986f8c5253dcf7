"""Training throughput: old vs new GRPO settings in one run, and where a step's time goes.

Runs short GRPO trainings (SciFact train claims, BM25, expansion mode, DeepRetrieval nDCG
reward through qrlib.rl.env.RewardEnv) with the SAME prompts, rollouts per step and token
budget under several engine settings, one after the other in this process, and prints for
each: rollouts per second, seconds per step, the share of step time in generation, in the
reward (parse + batched retrieval + scoring) and in the rest (log-probs, KL, backward,
optimiser), and the speed-up over the first (reference) setting measured in the same run.

Settings (``--variants``, comma-separated):
  ref      what qrlib trained with before the engine work: fp32, GRPO preset (KL beta 0.001: one
           reference pass with the LoRA adapter disabled), TRL's default gradient
           checkpointing, LoRA dropout 0.05
  nockpt   as ref without gradient checkpointing (no recomputed activations)
  autocast as nockpt with generation and the log-prob/loss passes under bf16 autocast
  nodrop   as nockpt with LoRA dropout 0 (fp32)
  default  the engine's CPU default now: no checkpointing, LoRA dropout 0, bf16
           autocast where the CPU has native bf16 matmul (AMX / AVX512-BF16), GRPO preset
  new      as default with the DAPO preset (beta 0: no reference pass)
  hf       = new: rollouts from transformers ``generate``, TRL's log-prob pass over every
           prompt + completion (the reference)
  hf-shared as hf with each group's prompt run once in the log-prob passes
           (qrlib.rl.sharedprefix; TrainConfig.shared_prompt_pass, the default)
  vllm-unshared  as hf with rollouts from the in-process vLLM engine (bf16; TRL colocate
           mode with qrlib's weight push, qrlib.generation.engine). Engine start is reported apart
           ("setup": wall time outside the measured steps, model load included)
  vllm     vLLM rollouts and the shared-prompt pass (the default)
  vllm-nois as vllm without TRL's importance-sampling correction (saves the no-grad
           forward pass that computes the learner's log-probs of every rollout)
  vllm-preload as vllm, its process started with tcmalloc and Intel OpenMP in LD_PRELOAD
           (what vLLM's CPU worker asks for; Debian's libtcmalloc-minimal4 and the
           libiomp5.so the install brings; the variant fails if neither is found)

Several models in one run: ``--model qwen2.5-coder-0.5b,smollm2``.

    python benchmarks/bench_train.py --model qwen2.5-coder-0.5b --steps 3 --generations 8 --tokens 32
The reward share should stay below 10% of a step; the script exits 1 if it does not.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

VARIANTS = {
    "ref": {"dtype": "float32", "algorithm": "grpo", "gradient_checkpointing": True,
            "cpu_autocast": False, "lora_dropout": 0.05},
    "nockpt": {"dtype": "float32", "algorithm": "grpo", "gradient_checkpointing": False,
               "cpu_autocast": False, "lora_dropout": 0.05},
    "autocast": {"dtype": "float32", "algorithm": "grpo", "gradient_checkpointing": False,
                 "cpu_autocast": True, "lora_dropout": 0.05},
    "nodrop": {"dtype": "float32", "algorithm": "grpo", "gradient_checkpointing": False,
               "cpu_autocast": False, "lora_dropout": 0.0},
    "default": {"dtype": "float32", "algorithm": "grpo", "gradient_checkpointing": False,
                "cpu_autocast": True, "lora_dropout": 0.0},
    "new": {"dtype": "float32", "algorithm": "dapo", "gradient_checkpointing": False,
            "cpu_autocast": True, "lora_dropout": 0.0},
}
for _v in ("ref", "nockpt", "autocast", "nodrop", "default", "new"):
    VARIANTS[_v]["shared_prompt_pass"] = False  # as they were measured
VARIANTS["hf"] = dict(VARIANTS["new"], use_vllm=False)
VARIANTS["hf-shared"] = dict(VARIANTS["hf"], shared_prompt_pass=True)
VARIANTS["vllm-unshared"] = dict(VARIANTS["new"], use_vllm=True)
VARIANTS["vllm"] = dict(VARIANTS["new"], use_vllm=True, shared_prompt_pass=True)
VARIANTS["vllm-nois"] = dict(VARIANTS["vllm"], vllm_importance_sampling_correction=False)
VARIANTS["vllm-preload"] = dict(VARIANTS["vllm"])
PRELOAD_VARIANTS = {"vllm-preload"}


def run_one(model: str, steps: int, gens: int, tokens: int, retriever: str,
            settings: dict, prompts: int = 1) -> dict:
    import pandas as pd

    from qrlib.rl.train import load_config, train

    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(dict(
            name="bench", run_dir=tmp, model=model, dataset="scifact", split="train",
            n_queries=32, n_distractors=None, retriever=retriever,
            fmt="deepretrieval-nothink", prefill='<answer>{"query": "',
            prompt={"user": "Claim: {query}\nWrite a keyword search query for abstracts that "
                            "support or refute it. Reply <answer>{{\"query\": \"...\"}}</answer>."},
            max_steps=steps, num_generations=gens, max_completion_length=tokens,
            prompts_per_step=prompts,
            save_steps=10_000, expansion=True, reward_params={"k": 100, "lenient": True},
            **settings))
        t0 = time.perf_counter()
        s = train(cfg)
        wall = time.perf_counter() - t0
        log = pd.read_csv(s["log"])
    # the first step includes one-off warm-up (allocations, kernel selection): skip it
    body = log.iloc[1:] if len(log) > 1 else log
    step = body.step_seconds.sum()
    gen = body.generation_seconds.sum()
    rew = body.reward_seconds.sum()
    return {"steps": len(body), "s_per_step": step / len(body),
            "rollouts_per_s": len(body) * gens * prompts / step, "generation": gen / step,
            "reward": rew / step, "update": max(step - gen - rew, 0.0) / step,
            "mean_length": body.completion_length.mean(), "wall": wall,
            "setup": wall - log.step_seconds.sum()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--steps", type=int, default=3, help="steps per setting (first is warm-up)")
    ap.add_argument("--generations", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--prompts", type=int, default=1, help="questions per step (GRPO groups)")
    ap.add_argument("--retriever", default="bm25")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--variants", default="hf,vllm")
    ap.add_argument("--one", nargs=2, metavar=("MODEL", "VARIANT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:  # one setting in this fresh process; the parent reads the JSON line
        r = run_one(a.one[0], a.steps, a.generations, a.tokens, a.retriever, VARIANTS[a.one[1]],
                    a.prompts)
        print("RESULT " + json.dumps(r), flush=True)
        return 0
    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    names = [v.strip() for v in a.variants.split(",") if v.strip()]
    bad = [v for v in names if v not in VARIANTS]
    if bad:
        print(f"error: unknown variant(s) {bad}; accepted: {sorted(VARIANTS)}", file=sys.stderr)
        return 2
    res = {}
    for model in [m.strip() for m in a.model.split(",") if m.strip()]:
        print(f"model={model} steps/setting={a.steps} (first one warm-up) rollouts/step="
              f"{a.prompts} x {a.generations} max_tokens={a.tokens} "
              f"threads={torch.get_num_threads()}")
        for v in names:
            # each setting in its own process: engines, threads and memory do not carry over
            cmd = [sys.executable, __file__, "--one", model, v, "--steps", str(a.steps),
                   "--generations", str(a.generations), "--tokens", str(a.tokens),
                   "--prompts", str(a.prompts),
                   "--retriever", a.retriever] + (["--threads", str(a.threads)]
                                                  if a.threads else [])
            env = None
            if v in PRELOAD_VARIANTS:
                from qrlib.workbook.preload import preload_libs

                libs = preload_libs()
                if not libs:
                    print(f"error: {v} needs libtcmalloc_minimal.so.4 (apt install "
                          "libtcmalloc-minimal4) and libiomp5.so in the venv; one is missing",
                          file=sys.stderr)
                    return 2
                env = dict(os.environ, LD_PRELOAD=":".join(libs))
                print(f"[{v}] LD_PRELOAD={env['LD_PRELOAD']}", flush=True)
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
            if proc.returncode or not line:
                print(f"error: setting {v} on {model} failed:\n{proc.stderr[-2000:]}",
                      file=sys.stderr)
                return 1
            res[model, v] = r = json.loads(line[-1][len("RESULT "):])
            print(f"[{v:5s}] {VARIANTS[v]}: {r['rollouts_per_s']:.3f} rollouts/s, "
                  f"{r['s_per_step']:.1f} s/step; generation {r['generation']:.0%}, reward "
                  f"{r['reward']:.2%}, update+logprobs {r['update']:.0%}; mean completion "
                  f"{r['mean_length']:.1f} tokens; setup {r['setup']:.0f} s", flush=True)
        ref = res[model, names[0]]
        for v in names[1:]:
            cur = res[model, v]
            gen_ref = ref["generation"] * ref["s_per_step"]
            gen_cur = cur["generation"] * cur["s_per_step"]
            print(f"speed-up {v} vs {names[0]} ({model}, same run): "
                  f"{cur['rollouts_per_s'] / ref['rollouts_per_s']:.2f}x rollouts/s; "
                  f"generation {gen_ref / max(gen_cur, 1e-9):.1f}x faster per step")
    ok = all(r["reward"] < 0.10 for r in res.values())
    print("reward share < 10% of step time:", "OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
