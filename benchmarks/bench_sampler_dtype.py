"""How much of a rollout's time is the sampler's precision, on this CPU?

The in-process vLLM engine samples every RL rollout in bf16 (``qrlib.generation.engine``,
README "Rollouts"). A CPU with native bf16 matmul (AMX or AVX512-BF16) runs those kernels
fast; a CPU without it (AVX2) emulates them, and a long training's steps there took 193-341 s
against 30-32 s on AVX512-BF16 (notebook 08, README). Whether sampling in fp32 on such a CPU
would pay is what this script measures: for each engine dtype, in a fresh subprocess, it
starts the engine on the base model, warms it with one call, then times ``--repeats`` calls
of the rollout shape of the long trainings (notebook 15: 2 prompts x 8 samples, 48 new
tokens, temperature 0.8) and prints seconds per call, generated tokens per second and the
ratio of each dtype's time to the bf16 sampler's (the reference, the training default),
measured in the same run:

    python benchmarks/bench_sampler_dtype.py                  # Qwen2.5-Coder-0.5B, 15's shape
    python benchmarks/bench_sampler_dtype.py --model smollm2 --repeats 5

It measures the sampler alone (no weight push, no learner pass); it does not change what
the trainings use. Samples are drawn with the engine's seed, so both dtypes decode the same
prompts with the same sampling settings; the token counts they produce may differ a little.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DTYPES = ("bfloat16", "float32")  # the first is the reference
QUERIES = (
    "vitamin d deficiency and bone fractures in older adults",
    "does aspirin lower the risk of colorectal cancer",
    "statin use and muscle pain",
    "effects of green tea on blood pressure",
)


def _one(dtype: str, model: str, prompts: int, n: int, max_new_tokens: int,
         temperature: float, repeats: int) -> dict:
    """Start one engine of ``dtype``, warm it, time ``repeats`` rollout calls."""
    from transformers import AutoTokenizer

    from qrlib.generation import engine, policy

    folder = policy.ensure_dequantised(model)  # the folder only: no policy load
    tok = AutoTokenizer.from_pretrained(str(folder))
    texts = [tok.apply_chat_template(
        [{"role": "user", "content": f"Rewrite this search query for a search engine: {q}"}],
        tokenize=False, add_generation_prompt=True) for q in QUERIES[:prompts]]
    t0 = time.perf_counter()
    eng = engine.get_engine(folder, dtype)
    start_s = time.perf_counter() - t0
    kw = dict(max_new_tokens=max_new_tokens, do_sample=True, temperature=temperature,
              num_return_sequences=n)
    eng.generate(texts, **kw)  # warm-up, untimed
    secs, tokens = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        outs = eng.generate(texts, **kw)
        secs.append(time.perf_counter() - t0)
        tokens += sum(len(tok(o, add_special_tokens=False)["input_ids"]) for o in outs)
    engine.close_engines()
    return {"dtype": dtype, "start_s": start_s, "call_s": sum(secs) / len(secs),
            "tokens_per_s": tokens / sum(secs), "tokens_per_call": tokens / repeats}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--n", type=int, default=8, help="samples per prompt (GRPO's G)")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--one", choices=DTYPES, help=argparse.SUPPRESS)  # the subprocess
    a = ap.parse_args(argv)
    if not 1 <= a.prompts <= len(QUERIES):
        ap.error(f"--prompts must be 1..{len(QUERIES)}, got {a.prompts}")
    if a.repeats < 1 or a.n < 1 or a.max_new_tokens < 1:
        ap.error("--repeats, --n and --max-new-tokens must be >= 1")
    args = (a.model, a.prompts, a.n, a.max_new_tokens, a.temperature, a.repeats)
    if a.one:
        print(json.dumps(_one(a.one, *args)))
        return 0

    from qrlib.workbook.publish import machine_info, machine_label

    print(f"machine: {machine_label(machine_info())}; {a.model}, {a.prompts} prompts x "
          f"{a.n} samples, {a.max_new_tokens} new tokens, T {a.temperature}, "
          f"{a.repeats} timed calls after one warm-up")
    rows = []
    for dtype in DTYPES:  # a fresh process each: engine memory and kernels start clean
        cmd = [sys.executable, __file__, "--one", dtype, "--model", a.model,
               "--prompts", str(a.prompts), "--n", str(a.n),
               "--max-new-tokens", str(a.max_new_tokens),
               "--temperature", str(a.temperature), "--repeats", str(a.repeats)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            print(f"{dtype}: failed: {res.stderr.strip().splitlines()[-1:]}")
            return 1
        rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
    ref = rows[0]["call_s"]
    print(f"{'dtype':<10} {'start s':>8} {'s/call':>8} {'tok/call':>9} {'tok/s':>7} "
          f"{'time vs bf16':>13}")
    for r in rows:
        print(f"{r['dtype']:<10} {r['start_s']:8.1f} {r['call_s']:8.2f} "
              f"{r['tokens_per_call']:9.0f} {r['tokens_per_s']:7.1f} {r['call_s'] / ref:13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
