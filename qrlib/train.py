"""RL training of query rewriters with TRL's ``GRPOTrainer`` and a PEFT LoRA adapter.

The RL algorithm is TRL's, not ours: this module only turns a :class:`TrainConfig` (one
mapping from a params file) into a prompt dataset, a reward environment
(:class:`qrlib.env.RewardEnv`), a ``GRPOConfig`` and a LoRA config, and then runs
``GRPOTrainer.train`` with resume-from-last-checkpoint and a per-step CSV log.

Algorithms (``algorithm`` key; every field can still be overridden):

* ``grpo`` -- group-relative advantages, token loss normalised per sequence, symmetric
  clipping ``epsilon`` and a KL penalty ``beta`` (DeepRetrieval Sec. B.2 uses KL 0.001,
  temperature 0.6).
* ``dapo`` -- DAPO's token-level normalisation (TRL ``loss_type="dapo"``), clip-higher
  (``epsilon_high=0.28``) and no KL term.

Entry points: :func:`train` (from a notebook) and ``python -m qrlib.train --config FILE``,
which also works as ``accelerate launch --config_file params/accelerate_multi_gpu.yaml -m
qrlib.train --config FILE`` on several GPUs. On CPU the model trains in fp32; on CUDA in
bf16 (that path exists but was never run in this project: no GPU was available).
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from qrlib.errors import QrlibError
from qrlib.prompts import render_prompt

__all__ = ["TrainConfig", "ALGORITHMS", "train", "build_prompts", "StepLogger",
           "TimedReward", "last_checkpoint", "load_config", "main"]

ALGORITHMS: dict[str, dict[str, Any]] = {
    "grpo": {"loss_type": "grpo", "epsilon": 0.2, "epsilon_high": None, "beta": 0.001,
             "scale_rewards": "group"},
    "dapo": {"loss_type": "dapo", "epsilon": 0.2, "epsilon_high": 0.28, "beta": 0.0,
             "scale_rewards": "group"},
}


@dataclass
class TrainConfig:
    """Everything one RL run needs. Unknown keys in a params file are errors."""

    name: str = "rl"                      # run name: output goes to <run_dir>/rl/<name>
    run_dir: str = "runs/dev"
    # policy
    model: str = "smollm2"                # smollm2 | qwen2.5-coder-0.5b | hub id
    dtype: str | None = None              # None: fp32 on CPU, bf16 on CUDA
    init_adapter: str | None = None       # continue from a saved LoRA adapter
    # data
    dataset: str = "scifact"
    split: str = "train"
    data_dir: str | None = None
    n_queries: int | None = 64            # training queries (random subset); None = all
    n_distractors: int | None = None      # corpus cut: judged docs + n distractors; None = full
    # retrieval + reward
    retriever: str = "bm25"               # bm25 | bm25-ref | dense
    retriever_params: dict[str, Any] = field(default_factory=dict)
    reward: str = "deepretrieval_ndcg"
    reward_params: dict[str, Any] = field(default_factory=dict)  # RewardEnv kwargs (k, lenient, ...)
    fmt: str = "deepretrieval"            # completion format, see qrlib.parsing
    prompt: str | dict[str, str] = "deepretrieval/rewrite"  # registry name or {system,user}
    expansion: bool = False               # RewardEnv mode="expand": search original + model text
    prefill: str = ""                     # text the assistant turn starts with, e.g. '{"query": "'
    # GRPO / DAPO
    algorithm: str = "grpo"
    max_steps: int = 20
    prompts_per_step: int = 1
    num_generations: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    max_completion_length: int = 48
    loss_type: str | None = None          # default from algorithm
    epsilon: float | None = None
    epsilon_high: float | None = None
    beta: float | None = None
    scale_rewards: str | None = None
    learning_rate: float = 1e-5
    warmup_steps: int = 0
    max_grad_norm: float = 1.0
    # LoRA
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: str | list[str] = "all-linear"
    # optional SFT warm start (TRL SFTTrainer): teaches the output format first
    sft_steps: int = 0
    sft_learning_rate: float = 1e-4
    # bookkeeping
    save_steps: int = 10
    save_total_limit: int = 2
    seed: int = 0
    resume: bool = True

    def resolved(self) -> dict[str, Any]:
        """The GRPO-specific values after applying the ``algorithm`` preset."""
        if self.algorithm not in ALGORITHMS:
            raise QrlibError(f"algorithm {self.algorithm!r} unknown; accepted: {sorted(ALGORITHMS)}")
        out = dict(ALGORITHMS[self.algorithm])
        for key in out:
            val = getattr(self, key)
            if val is not None:
                out[key] = val
        return out

    @property
    def output_dir(self) -> Path:
        return Path(self.run_dir) / "rl" / self.name


def load_config(source: str | os.PathLike | dict[str, Any], **overrides: Any) -> TrainConfig:
    """A :class:`TrainConfig` from a YAML/JSON file or a mapping, with overrides."""
    if isinstance(source, dict):
        data = dict(source)
    else:
        path = Path(source)
        if not path.exists():
            raise QrlibError(f"train config {path} not found")
        import yaml

        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict):
            raise QrlibError(f"train config {path} must be a mapping of TrainConfig fields")
    data.update(overrides)
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise QrlibError(f"train config: unknown key {unknown[0]!r}; accepted: {sorted(known)}")
    return TrainConfig(**data)


# --------------------------------------------------------------------------- prompts
def build_prompts(queries: dict[str, str], tokenizer: Any, prompt: str | dict[str, str],
                  *, repeat_to: int | None = None, seed: int = 0, prefill: str = "") -> Any:
    """A ``datasets.Dataset`` with columns ``prompt`` (chat text), ``qid``, ``query``.

    ``repeat_to``: cycle the (shuffled) queries until there are that many rows, so
    ``max_steps`` never runs out of data.
    """
    from datasets import Dataset

    qids = sorted(queries)
    random.Random(seed).shuffle(qids)
    rows = [{"prompt": render_prompt(prompt, tokenizer, queries[q], prefill), "qid": q,
             "query": queries[q]} for q in qids]
    if repeat_to and rows:
        rows = [rows[i % len(rows)] for i in range(max(repeat_to, len(rows)))]
    return Dataset.from_list(rows)


# --------------------------------------------------------------------------- reward wrappers
class TimedReward:
    """Wrap a TRL reward callable: time it, parse-check every completion, and keep the
    per-batch aggregates that :class:`StepLogger` writes (per-part rewards come from the
    numeric fields of ``env.records`` added during the batch)."""

    def __init__(self, env: Callable[..., list[float]], fmt: str, prefill: str = "") -> None:
        self.env = env
        self.prefill = prefill
        self.fmt = fmt
        self.seconds = 0.0
        self.calls = 0
        self.batches: list[dict[str, float]] = []
        self.samples: list[dict[str, Any]] = []
        self.__name__ = getattr(env, "__name__", type(env).__name__)

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
        from qrlib.parsing import completion_text, parse_completion

        t0 = time.perf_counter()
        texts = [self.prefill + completion_text(c) for c in completions]
        if self.prefill:  # the env must parse what the model's answer really was
            completions = texts
        parsed = [parse_completion(t, self.fmt) for t in texts]
        loose = [p if p.ok else parse_completion(t, self.fmt, lenient=True)
                 for p, t in zip(parsed, texts)]
        n_before = len(getattr(self.env, "records", []) or [])
        rewards = list(self.env(prompts, completions, **columns))
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        new = (getattr(self.env, "records", []) or [])[n_before:]
        oks = [r["format_ok"] for r in new if isinstance(r, dict) and "format_ok" in r]
        if len(oks) != len(parsed):  # env without records: our own strict parse
            oks = [p.ok for p in parsed]
        agg: dict[str, float] = {
            "format_valid": sum(map(bool, oks)) / max(len(oks), 1),
            "reward_seconds": time.perf_counter() - t0,
        }
        parts: dict[str, list[float]] = {}
        for rec in new:
            items = rec.items() if isinstance(rec, dict) else vars(rec).items()
            for k, v in items:
                if not k.startswith(("part_", "ndcg@", "recall@")):
                    continue
                if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                    parts.setdefault(k.removeprefix("part_"), []).append(float(v))
        for k, vs in parts.items():
            agg[f"part/{k}"] = sum(vs) / len(vs)
        originals = columns.get("query") or [None] * len(texts)
        rw = [p.queries[0] if p.queries else None for p in loose]
        agg["modified"] = (sum(1 for r, o in zip(rw, originals) if r is not None and o is not None
                               and r.strip().lower() != str(o).strip().lower())
                           / max(sum(r is not None for r in rw), 1))
        agg["qids"] = ";".join(dict.fromkeys(str(q) for q in (columns.get("qid") or [])))
        self.batches.append(agg)
        for t, p, r, o in list(zip(texts, parsed, rewards, originals))[:4]:
            self.samples.append({"query": o, "completion": t, "ok": p.ok, "reward": r})
        return rewards


# --------------------------------------------------------------------------- logging
def _trainer_callback_base() -> type:
    from transformers import TrainerCallback

    return TrainerCallback


class StepLogger(_trainer_callback_base()):  # type: ignore[misc]
    """Append one CSV row per optimisation step: TRL's GRPO metrics (reward mean/std,
    per-function reward, frac_reward_zero_std, completion length, KL, entropy, clip
    ratios) plus format-valid rate, modification rate, per-part rewards and step time."""

    COLUMNS = ["step", "reward", "reward_std", "frac_reward_zero_std", "format_valid",
               "modified", "completion_length", "kl", "entropy", "loss", "step_seconds",
               "reward_seconds", "generation_seconds", "qids"]

    def __init__(self, path: str | os.PathLike, reward: TimedReward,
                 timer: dict[str, float] | None = None) -> None:
        self.path = Path(path)
        self.reward = reward
        self.timer = timer if timer is not None else {}
        self._seen = 0
        self._t0 = time.perf_counter()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self._t0 = time.perf_counter()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None,
               **kw: Any) -> None:
        if not logs or "reward" not in logs or not state.is_world_process_zero:
            return
        batches = self.reward.batches[self._seen:]
        self._seen = len(self.reward.batches)
        row: dict[str, Any] = {
            "step": state.global_step,
            "reward": logs.get("reward"), "reward_std": logs.get("reward_std"),
            "frac_reward_zero_std": logs.get("frac_reward_zero_std"),
            "completion_length": logs.get("completions/mean_length"),
            "kl": logs.get("kl"), "entropy": logs.get("entropy"), "loss": logs.get("loss"),
            "step_seconds": round(time.perf_counter() - self._t0, 3),
            "generation_seconds": round(self.timer.pop("generation", 0.0), 3),
        }
        keys = sorted({k for b in batches for k in b} - {"qids"})
        for k in keys:
            vals = [b[k] for b in batches if k in b]
            row[k] = sum(vals) / len(vals) if k != "reward_seconds" else sum(vals)
        row["qids"] = ";".join(b["qids"] for b in batches if b.get("qids"))
        for k, v in logs.items():
            if k.startswith(("rewards/", "clip_ratio/")) and k not in row:
                row[k] = v
        self._write(row)

    def _write(self, row: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        old_rows: list[dict[str, Any]] = []
        if self.path.exists():
            with open(self.path, newline="") as fh:
                old_rows = [r for r in csv.DictReader(fh) if int(float(r["step"])) < row["step"]]
        cols = list(self.COLUMNS)
        for r in [*old_rows, row]:
            cols += [k for k in r if k not in cols]
        from qrlib.workbook import atomic_path

        with atomic_path(self.path) as tmp, open(tmp, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            for r in [*old_rows, row]:
                w.writerow({c: r.get(c, "") for c in cols})


def last_checkpoint(output_dir: str | os.PathLike) -> str | None:
    """The newest ``checkpoint-N`` folder under ``output_dir`` (None if there is none)."""
    from transformers.trainer_utils import get_last_checkpoint

    d = Path(output_dir)
    return get_last_checkpoint(str(d)) if d.is_dir() else None


# --------------------------------------------------------------------------- training
def _build_env(cfg: TrainConfig) -> tuple[Any, dict[str, str]]:
    """Dataset subset -> retriever -> :class:`qrlib.env.RewardEnv` for the config."""
    from qrlib import data as qdata
    from qrlib import retrieval
    from qrlib.env import RewardEnv

    ds = qdata.load_dataset(cfg.dataset, cfg.split, data_dir=cfg.data_dir)
    if cfg.n_queries is not None or cfg.n_distractors is not None:
        ds = qdata.subset(ds, n_queries=cfg.n_queries, n_distractors=cfg.n_distractors,
                          seed=cfg.seed)
    retr = retrieval.build_retriever(cfg.retriever, ds.corpus, **cfg.retriever_params)
    env = RewardEnv(retr, ds.qrels, reward=cfg.reward, fmt=cfg.fmt, queries=ds.queries,
                    mode="expand" if cfg.expansion else "rewrite", **cfg.reward_params)
    return env, ds.queries


def _sft_warm_start(cfg: TrainConfig, model: Any, tok: Any, queries: dict[str, str],
                    peft_config: Any) -> Any:
    """A few SFT steps on (prompt, format-valid copy of the query) pairs: teaches the
    output format only (the content is the original query, so it cannot teach retrieval)."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    rows = []
    for q in queries.values():
        target = sft_target(q, cfg.fmt)
        if cfg.prefill and target.startswith(cfg.prefill):
            target = target[len(cfg.prefill):]
        rows.append({"prompt": render_prompt(cfg.prompt, tok, q, cfg.prefill),
                     "completion": target + (tok.eos_token or "")})
    args = SFTConfig(output_dir=str(cfg.output_dir / "sft"), max_steps=cfg.sft_steps,
                     learning_rate=cfg.sft_learning_rate, per_device_train_batch_size=4,
                     logging_steps=1, save_strategy="no", report_to="none", seed=cfg.seed,
                     use_cpu=not _cuda(), bf16=_cuda(), completion_only_loss=True)
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=tok, peft_config=peft_config)
    trainer.train()
    return trainer.model


def sft_target(query: str, fmt: str) -> str:
    """A format-valid completion carrying ``query`` (for the SFT warm start)."""
    body = json.dumps({"query": query}, ensure_ascii=False)
    if fmt == "deepretrieval-nothink":
        return f"<answer>{body}</answer>"
    if fmt == "deepretrieval":  # a reasoning block is required; keep it minimal
        return f"<think>The query keeps the key terms.</think>\n<answer>{body}</answer>"
    if fmt == "plain":
        return query
    return body


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


class _GenTimer:
    """Accumulate wall time of the trainer's generation calls (for the step breakdown)."""

    def __init__(self, trainer: Any, store: dict[str, float]) -> None:
        orig = trainer._generate
        self.store = store

        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return orig(*a, **kw)
            finally:
                store["generation"] = store.get("generation", 0.0) + time.perf_counter() - t0

        trainer._generate = timed


def train(cfg: TrainConfig | dict[str, Any], *, env: Any = None,
          queries: dict[str, str] | None = None) -> dict[str, Any]:
    """Run (or resume) one GRPO/DAPO training and return a summary.

    ``env``/``queries`` may be passed directly (a TRL reward callable and qid -> text);
    otherwise they are built from the config with :class:`qrlib.env.RewardEnv`.
    Writes under ``cfg.output_dir``: ``checkpoint-N/`` (resumable), ``adapter/`` (final
    LoRA), ``log.csv`` (one row per step), ``samples.jsonl``, ``config.json``, ``summary.json``.
    """
    import torch
    from peft import LoraConfig
    from transformers import set_seed
    from trl import GRPOConfig, GRPOTrainer

    from qrlib.policy import load_policy
    from qrlib.workbook import save_json

    if isinstance(cfg, dict):
        cfg = load_config(cfg)
    out = cfg.output_dir
    current = json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
    if (out / "config.json").exists():
        saved = json.loads((out / "config.json").read_text())
        ignore = {"max_steps", "resume", "save_steps", "save_total_limit"}
        if {k: v for k, v in saved.items() if k not in ignore} != \
                {k: v for k, v in current.items() if k not in ignore}:
            stale = out.with_name(f"{out.name}.stale-{time.strftime('%Y%m%d-%H%M%S')}")
            print(f"[qrlib.train] {out} holds a run with another config; moved to {stale.name}")
            os.replace(out, stale)
    out.mkdir(parents=True, exist_ok=True)
    save_json(current, out / "config.json")
    set_seed(cfg.seed)
    if env is None:
        env, built_queries = _build_env(cfg)
        queries = queries or built_queries
    if not queries:
        raise QrlibError("train: no training queries (pass queries= or a dataset with qrels)")
    reward = TimedReward(env, cfg.fmt, cfg.prefill)

    cuda = _cuda()
    dtype = cfg.dtype or ("bfloat16" if cuda else "float32")
    # load on CPU: the Trainer/accelerate places the model on each process's own device
    model, tok = load_policy(cfg.model, adapter=cfg.init_adapter, dtype=dtype, device="cpu",
                             trainable=cfg.init_adapter is not None)
    peft_config = None if cfg.init_adapter else LoraConfig(
        r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
        target_modules=cfg.lora_target_modules, task_type="CAUSAL_LM")
    if cfg.sft_steps > 0 and last_checkpoint(out) is None:
        model = _sft_warm_start(cfg, model, tok, queries, peft_config)
        peft_config = None  # the SFT trainer already wrapped the model in LoRA
    g = cfg.resolved()
    batch = cfg.prompts_per_step * cfg.num_generations
    args = GRPOConfig(
        output_dir=str(out), max_steps=cfg.max_steps, learning_rate=cfg.learning_rate,
        warmup_steps=cfg.warmup_steps, max_grad_norm=cfg.max_grad_norm,
        per_device_train_batch_size=batch, gradient_accumulation_steps=1,
        num_generations=cfg.num_generations, max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature, top_p=cfg.top_p, loss_type=g["loss_type"],
        epsilon=g["epsilon"], epsilon_high=g["epsilon_high"], beta=g["beta"],
        scale_rewards=g["scale_rewards"], logging_steps=1, save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit, report_to="none", seed=cfg.seed,
        use_cpu=not cuda, bf16=cuda and dtype == "bfloat16",
        remove_unused_columns=False,
        disable_tqdm=False, dataloader_num_workers=0)
    n_rows = cfg.max_steps * cfg.prompts_per_step
    ds = build_prompts(queries, tok, cfg.prompt, repeat_to=n_rows, seed=cfg.seed,
                       prefill=cfg.prefill)
    timer: dict[str, float] = {}
    logger = StepLogger(out / "log.csv", reward, timer)
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=ds,
                          processing_class=tok, peft_config=peft_config, callbacks=[logger])
    _GenTimer(trainer, timer)
    resume = last_checkpoint(out) if cfg.resume else None
    t0 = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    wall = time.perf_counter() - t0
    trainer.save_model(str(out / "adapter"))
    tok.save_pretrained(str(out / "adapter"))
    with open(out / "samples.jsonl", "a", encoding="utf-8") as fh:
        for s in reward.samples:
            fh.write(json.dumps(s, ensure_ascii=False) + "\n")
    summary = {"name": cfg.name, "model": cfg.model, "steps": trainer.state.global_step,
               "resumed_from": resume, "train_seconds": round(wall, 1),
               "reward_seconds": round(reward.seconds, 1),
               "rollouts": reward.calls * batch, "adapter": str(out / "adapter"),
               "log": str(out / "log.csv"), "train_loss": getattr(result, "training_loss", None),
               "torch_threads": torch.get_num_threads()}
    if trainer.accelerator.is_main_process:
        save_json(summary, out / "summary.json")
    return summary


def main(argv: list[str] | None = None) -> int:
    """``python -m qrlib.train --config FILE [--set key=value ...]``."""
    p = argparse.ArgumentParser(prog="python -m qrlib.train", description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, help="YAML file of TrainConfig fields")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one field (YAML value), e.g. --set max_steps=5")
    a = p.parse_args(argv)
    import yaml

    overrides = {}
    for item in a.set:
        if "=" not in item:
            raise QrlibError(f"--set expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        overrides[k] = yaml.safe_load(v)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    summary = train(load_config(a.config, **overrides))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except QrlibError as exc:
        import sys

        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2)
