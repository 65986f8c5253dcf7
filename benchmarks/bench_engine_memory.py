"""Memory a closed vLLM engine keeps: the reference (close only) vs forgetting vLLM's reload records.

Measured leak (it sent 13 and 14 out of memory): a ``qrlib.generation.engine``
engine that received a weight push (``engine_for`` / ``Engine.load_weights``, vLLM's
``reload_weights``) is not given back when it is closed, about 3.5 GiB per engine for
Qwen2.5-Coder-0.5B in fp32. The cause is in vLLM's layerwise reloading
(``vllm.model_executor.model_loader.reload.layerwise``): ``LAYERWISE_INFO`` is a
module-global ``WeakKeyDictionary`` with an entry for every module of the engine's model
(273 for Qwen2.5-0.5B), and a strong path leads from the values back to the keys: the
``weight_loader`` closures vLLM wraps around a layer's parameters hold the layer (found by
walking ``gc.get_referrers`` from a vLLM ``RMSNorm`` still alive after close). So the weak
keys never die, and the layers keep the engine's tensors reachable.

This script runs, in a fresh subprocess per setting, ``--cycles`` times: load the policy,
push it into a new fp32 engine, generate, close the engine, drop the model, collect and
``malloc_trim`` (``qrlib.rl.release.release_memory``). It prints the process's resident
memory after each cycle and the memory kept per cycle after the first, for

  ref      close only (what qrlib does today)
  forget   close, then clear ``LAYERWISE_INFO``

and the ratio ref / forget. Clearing the whole dictionary is right here (one engine at a
time); the cure for ``Engine.close()`` must drop only the closed engine's layers, since a
bf16 sampler and an fp32 evaluator can be open together.

    python benchmarks/bench_engine_memory.py --cycles 3
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

SETTINGS = ("ref", "forget")


def _cycle_rss(setting: str, cycles: int, model: str) -> list[float]:
    """Resident GiB after each cycle, in this process."""
    import gc

    import psutil

    from qrlib.generation import engine
    from qrlib.generation.policy import load_policy
    from qrlib.rl.release import release_memory

    out = []
    for _ in range(cycles):
        policy, tok = load_policy(model)
        eng = engine.engine_for(policy, "float32")
        eng.generate(["Rewrite the search query: who wrote Hamlet?"] * 8, max_new_tokens=16)
        engine.close_engines()
        del eng, policy, tok
        gc.collect()
        if setting == "forget":
            from vllm.model_executor.model_loader.reload import layerwise

            layerwise.LAYERWISE_INFO.clear()
        release_memory()
        out.append(psutil.Process().memory_info().rss / 2**30)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--worker", choices=SETTINGS, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.cycles < 2:
        ap.error("--cycles must be at least 2 (the first cycle also pays one-off imports)")
    if a.worker:
        print(json.dumps(_cycle_rss(a.worker, a.cycles, a.model)))
        return 0
    kept = {}
    for s in SETTINGS:
        res = subprocess.run([sys.executable, __file__, "--worker", s, "--cycles", str(a.cycles),
                              "--model", a.model], capture_output=True, text=True)
        if res.returncode:
            print(res.stderr[-2000:], file=sys.stderr)
            print(f"setting {s} failed (exit {res.returncode})", file=sys.stderr)
            return 1
        rss = json.loads(res.stdout.strip().splitlines()[-1])
        kept[s] = (rss[-1] - rss[0]) / (len(rss) - 1)
        print(f"{s:7s} RSS after each cycle (GiB): {', '.join(f'{r:.2f}' for r in rss)}; "
              f"kept per cycle after the first: {kept[s]:.2f} GiB")
    print(f"memory kept per closed engine, ref / forget: "
          f"{kept['ref'] / max(kept['forget'], 0.01):.1f}x ({a.model}, fp32, {a.cycles} cycles)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
