"""RL training of query rewriters with TRL's ``GRPOTrainer`` and a PEFT LoRA adapter.

The RL algorithm is TRL's, not ours: this module only turns a :class:`TrainConfig` (one
mapping from a params file) into a prompt dataset, a reward environment
(:class:`qrlib.rl.env.RewardEnv`), a ``GRPOConfig`` and a LoRA config, and then runs
``GRPOTrainer.train`` with resume-from-last-checkpoint and a per-step CSV log.

Algorithms (``algorithm`` key; every field can still be overridden):

* ``grpo`` -- group-relative advantages, token loss normalised per sequence, symmetric
  clipping ``epsilon`` and a KL penalty ``beta`` (DeepRetrieval Sec. B.2 uses KL 0.001,
  temperature 0.6).
* ``dapo`` -- DAPO's token-level normalisation (TRL ``loss_type="dapo"``), clip-higher
  (``epsilon_high=0.28``) and no KL term.

Entry points: :func:`train` (from a notebook) and ``python -m qrlib.rl.train --config FILE``,
which also works as ``accelerate launch --config_file params/accelerate_multi_gpu.yaml -m
qrlib.rl.train --config FILE`` on several GPUs. On CPU the model trains in fp32; on CUDA in
bf16 (that path exists but was never run in this project: no GPU was available).
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import json
import math
import os
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import qrlib.methods.registry  # noqa: F401  (every paper's prompts, formats, rewards)
from qrlib.core.errors import QrlibError
from qrlib.core.io import atomic_path, atomic_write, save_json
from qrlib.core.lock import run_lock
from qrlib.data import datasets as qdata, rows as qrows
from qrlib.data.rows import check_rows, rows_from_queries
from qrlib.generation import engine
from qrlib.generation.engine import push_weights
from qrlib.generation.parsing import completion_text, parse_completion, sft_target
from qrlib.generation.policy import cpu_has_native_bf16, load_policy
from qrlib.generation.prompts import as_template, render_prompt
from qrlib.retrieval import retrievers as retrieval
from qrlib.rl.env import RewardEnv
from qrlib.rl.rewards import same_query
from qrlib.rl.sharedprefix import causal_lm_parts, prompt_groups, shared_prompt_logps

__all__ = ["TrainConfig", "ALGORITHMS", "train", "build_prompts", "StepLogger",
           "TimedReward", "last_checkpoint", "load_config", "load_rows", "resolve_dtype",
           "main"]

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
    dtype: str | None = None              # None: bf16 on CUDA, fp32 on CPU
    cpu_autocast: bool | None = None      # bf16 autocast of generation and of the log-prob /
    #                                       loss passes on CPU; None: on when the CPU
    #                                       multiplies bf16 natively (AMX / AVX512-BF16).
    #                                       fp32 master weights, so the update stays fp32.
    #                                       With LoRA dropout off, bench_train measures it
    #                                       at 1.8x (SmolLM2); with dropout on it gained
    #                                       nothing (bf16 dropout masks are slow on CPU)
    init_adapter: str | None = None       # continue from a saved LoRA adapter
    # data: a row source (qrlib.data.rows): "queries" (a retrieval collection), "spider"
    # (text-to-SQL on the train/test databases), or a .jsonl file of rows
    rows: str = "queries"
    row_params: dict[str, Any] = field(default_factory=dict)  # e.g. {"test_fraction": 0.3}
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
    fmt: str | None = None                # completion format (generation.parsing); None: the prompt's
    prompt: str | dict[str, str] = "deepretrieval/bm25-think"  # registry name or {system,user}
    expansion: bool = False               # RewardEnv mode="expand": search original + model text
    prefill: str = ""                     # text the assistant turn starts with, e.g. '{"query": "';
    #                                       {field} names a row column, filled per row
    #                                       (fill_prefill): '{"query": "{question}%%'
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
    dynamic_sampling: int = 0             # DAPO dynamic sampling: up to this many extra
    #                                       generation rounds per step replace groups whose
    #                                       rewards are all equal with fresh prompts (0 = off)
    gradient_checkpointing: bool | None = None  # None: off on CPU (memory is not the limit
    #                                       for these models; recomputing activations costs
    #                                       about a fifth of a step), TRL's default (on) on CUDA
    use_vllm: bool | None = None          # rollouts from an in-process vLLM engine (TRL
    #                                       colocate mode; on the CPU with qrlib's weight push,
    #                                       qrlib.generation.engine); None: the process default
    #                                       (qrlib.generation.engine.set_backend, "hf" unless set).
    #                                       $QRLIB_ROLLOUTS=hf|vllm overrides both
    vllm_gpu_memory_utilization: float = 0.3  # CUDA only; the CPU engine's KV cache is
    #                                       VLLM_CPU_KVCACHE_SPACE GiB (qrlib sets 1)
    vllm_max_model_length: int = 2048     # prompt + completion tokens the engine accepts
    vllm_importance_sampling_correction: bool = True  # TRL: reweight by the learner/sampler
    #                                       probability ratio (bf16 engine vs the policy);
    #                                       costs one extra no-grad forward pass per step
    stop: list[str] = field(default_factory=list)  # stop strings of the vLLM rollouts (the
    #                                       HF path ignores them and says so), e.g. ['"}']
    learning_rate: float = 1e-5
    lr_scheduler_type: str = "constant"   # transformers scheduler (TRL GRPOConfig). Constant for
    #                                       RL: TRL's default "linear" decays the rate to 0 over
    #                                       max_steps, so a 3-step run trained at 5e-5, 3.3e-5,
    #                                       1.7e-5 (issue 24's audit); "linear" restores it
    warmup_steps: int = 0
    max_grad_norm: float = 1.0
    top_k: int | None = None              # rollout top-k sampling (TRL GRPOConfig); None: off
    min_p: float | None = None            # rollout min-p sampling (TRL GRPOConfig); None: off
    mask_truncated_completions: bool = False  # DAPO Sec. 3.4 (overlong filtering): rollouts
    #                                       cut at max_completion_length get no loss (TRL)
    shared_prompt_pass: bool = True       # log-prob passes run each group's prompt once
    #                                       and its completions on the cached prompt
    #                                       (qrlib.rl.sharedprefix; same values as TRL's pass);
    #                                       False: TRL's pass over every prompt+completion
    # LoRA
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0             # 0: log-probs of a completion are deterministic,
    #                                       so the GRPO ratio compares the same function
    #                                       (TRL's disable_dropout; DeepRetrieval and
    #                                       ConvSearch-R1 train without dropout in verl).
    #                                       0.05 was the default until session 5; on CPU the
    #                                       dropout masks cost ~25% of a step
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

    def template_meta(self) -> dict[str, Any]:
        """``meta`` of the configured prompt ({} for an inline prompt)."""
        return dict(as_template(self.prompt).meta)

    @property
    def completion_format(self) -> str:
        """``fmt`` if given, else the prompt's ``meta["fmt"]``, else ``deepretrieval``."""
        return self.fmt or self.template_meta().get("fmt") or "deepretrieval"


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
    defaults = TrainConfig()
    for key, value in data.items():
        want = getattr(defaults, key)
        if value is None or want is None:
            continue
        ok = (isinstance(value, bool) if isinstance(want, bool) else
              isinstance(value, (int, float)) and not isinstance(value, bool)
              if isinstance(want, float) else
              isinstance(value, int) and not isinstance(value, bool) if isinstance(want, int)
              else isinstance(value, list) if isinstance(want, list) else True)
        if not ok:
            hint = (" (YAML reads 5e-5 as text; write 5.0e-5)"
                    if isinstance(value, str) and isinstance(want, float) else "")
            raise QrlibError(f"train config: {key} must be {type(want).__name__} like its "
                             f"default {want!r}, got {value!r}{hint}")
    return TrainConfig(**data)


# --------------------------------------------------------------------------- prompts
def build_prompts(queries: dict[str, str] | Sequence[dict[str, Any]], tokenizer: Any,
                  prompt: str | dict[str, str], *, repeat_to: int | None = None, seed: int = 0,
                  prefill: str = "") -> Any:
    """A ``datasets.Dataset``: one row per training question with a ``prompt`` column (the
    chat-formatted text, ending with ``prefill``) and every column of the rows.

    ``queries`` is a list of rows (:mod:`qrlib.data.rows`; the template's fields are read from
    each row) or, for single-query prompts, a mapping qid -> query text. The rows are
    shuffled with ``seed``; ``repeat_to`` cycles them until there are exactly that many
    (so ``max_steps`` never runs out of data and never gets more).
    """
    from datasets import Dataset

    rows = (rows_from_queries(queries) if isinstance(queries, Mapping)
            else [dict(r) for r in queries])
    template = as_template(prompt)
    check_rows(rows, fields=template.fields)
    rows.sort(key=lambda r: r["qid"])
    random.Random(seed).shuffle(rows)
    out = []
    for r in rows:
        values = {f: r[f] for f in template.fields}
        if "prompt" in r:
            raise QrlibError("training rows may not have a 'prompt' column (it is built here)")
        out.append({"prompt": render_prompt(template, tokenizer,
                                            prefill=fill_prefill(prefill, r), **values), **r})
    if repeat_to and out:
        out = [out[i % len(out)] for i in range(repeat_to)]
    return Dataset.from_list(out)


_FIELD = re.compile(r"\{(\w+)\}")


def fill_prefill(prefill: str, row: Mapping[str, Any]) -> str:
    """The assistant-turn prefill of one row: ``{field}`` placeholders naming a row column
    become that column's value, escaped as JSON string content (prefills open a JSON
    answer, e.g. ``{"query": "{question}%%`` makes the question the first sub-query and
    leaves the model to decide whether and what to add; issue 24). Other braces stay."""
    if "{" not in prefill:
        return prefill
    return _FIELD.sub(lambda m: (json.dumps(str(row[m.group(1)]), ensure_ascii=False)[1:-1]
                                 if m.group(1) in row else m.group(0)), prefill)


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
        t0 = time.perf_counter()
        pre = [self.prefill] * len(completions)
        if "{" in self.prefill:  # row placeholders: fill them from this row's columns
            keys = [k for k in columns if isinstance(columns[k], list)
                    and len(columns[k]) == len(completions)]
            pre = [fill_prefill(self.prefill, {k: columns[k][i] for k in keys})
                   for i in range(len(completions))]
        texts = [p + completion_text(c) for p, c in zip(pre, completions)]
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
            "n": len(texts),
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
                               and not same_query(r, str(o)))
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
                 timer: dict[str, float] | None = None, *,
                 samples_path: str | os.PathLike | None = None, resumed_step: int = 0) -> None:
        self.path = Path(path)
        self.reward = reward
        self.timer = timer if timer is not None else {}
        self._seen = 0
        self._seen_samples = 0
        self._t0 = time.perf_counter()
        self.samples_path = Path(samples_path) if samples_path else None
        if self.samples_path is not None:
            self._trim_samples(resumed_step)

    def _trim_samples(self, keep_upto: int) -> None:
        """Drop sample rows of steps after ``keep_upto`` (a killed segment that the
        resumed run trains again), keep every earlier row."""
        p = self.samples_path
        if p is None or not p.exists():
            return
        kept = []
        for line in p.read_text(encoding="utf-8").splitlines():
            try:
                if int(json.loads(line).get("step", 0)) <= keep_upto:
                    kept.append(line)
            except (ValueError, AttributeError):
                continue

        atomic_write(p, "".join(k + "\n" for k in kept))

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self._t0 = time.perf_counter()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None,
               **kw: Any) -> None:
        if not logs or "reward" not in logs or not state.is_world_process_zero:
            return
        batches = self.reward.batches[self._seen:]
        self._seen = len(self.reward.batches)
        row: dict[str, Any] = {
            "step": state.global_step, "learning_rate": logs.get("learning_rate"),
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
            row[k] = sum(vals) if k in ("reward_seconds", "n") else sum(vals) / len(vals)
        row["qids"] = ";".join(b["qids"] for b in batches if b.get("qids"))
        if "n" in row:
            row["rollouts"] = row.pop("n")
        print(f"[qrlib.rl.train] step {row['step']}: reward {row.get('reward') or 0:.3f}"
              + (f", format-valid {row['format_valid']:.2f}" if "format_valid" in row else "")
              + f", {row['step_seconds']:.1f} s", flush=True)
        for k, v in logs.items():
            if k.startswith(("rewards/", "clip_ratio/")) and k not in row:
                row[k] = v
        self._write(row)
        new = self.reward.samples[self._seen_samples:]
        self._seen_samples = len(self.reward.samples)
        if self.samples_path is not None and new:
            with open(self.samples_path, "a", encoding="utf-8") as fh:
                for smp in new:
                    fh.write(json.dumps({"step": state.global_step, **smp},
                                        ensure_ascii=False, default=str) + "\n")

    def _write(self, row: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        old_rows: list[dict[str, Any]] = []
        if self.path.exists():
            with open(self.path, newline="") as fh:
                old_rows = [r for r in csv.DictReader(fh) if int(float(r["step"])) < row["step"]]
        cols = list(self.COLUMNS)
        for r in [*old_rows, row]:
            cols += [k for k in r if k not in cols]

        with atomic_path(self.path) as tmp, open(tmp, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            for r in [*old_rows, row]:
                w.writerow({c: r.get(c, "") for c in cols})


COMPLETE_MARKER = ".qrlib-complete"


def _quiet_progress(trainer: Any) -> None:
    """Drop transformers' per-step printers (HTML progress objects in notebooks, a log dict
    per step otherwise); :class:`StepLogger` prints one line per step instead."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)
    with contextlib.suppress(ImportError):
        from transformers.utils.notebook import NotebookProgressCallback

        trainer.remove_callback(NotebookProgressCallback)


def _checkpoint_ok(ck: Path) -> tuple[bool, str]:
    """Whether ``ck`` (a ``checkpoint-N`` folder) was written to the end: the marker our
    callback writes after the Trainer saved it, or, for folders without one, every file a
    resume reads is present and readable (trainer state JSON, weights header, optimizer
    and scheduler archives)."""
    import zipfile

    if (ck / COMPLETE_MARKER).exists():
        return True, "marked complete"
    try:
        state = json.loads((ck / "trainer_state.json").read_text())
        if "global_step" not in state:
            return False, "trainer_state.json has no global_step"
    except (OSError, ValueError) as exc:
        return False, f"trainer_state.json unreadable ({type(exc).__name__})"
    weights = [p for p in (ck / "adapter_model.safetensors", ck / "model.safetensors")
               if p.exists()]
    if not weights:
        return False, "no weights file"
    try:
        from safetensors import safe_open

        with safe_open(str(weights[0]), "pt") as fh:
            list(fh.keys())
    except Exception as exc:  # noqa: BLE001 -- any decoding failure means incomplete
        return False, f"{weights[0].name} unreadable ({type(exc).__name__})"
    for name in ("optimizer.pt", "scheduler.pt"):
        if not (ck / name).exists() or not zipfile.is_zipfile(ck / name):
            return False, f"{name} missing or truncated"
    return True, "files verified"


def last_checkpoint(output_dir: str | os.PathLike, *, quarantine: bool = False,
                    verbose: bool = False) -> str | None:
    """The newest *complete* ``checkpoint-N`` under ``output_dir`` (None if none).

    A checkpoint a kill interrupted is skipped (and with ``quarantine`` renamed to
    ``incomplete-checkpoint-N-<time>`` so no later resume or rotation trips over it)."""
    d = Path(output_dir)
    if not d.is_dir():
        return None
    cks = sorted((p for p in d.glob("checkpoint-*") if p.is_dir()
                  and p.name.split("-", 1)[1].isdigit()),
                 key=lambda p: int(p.name.split("-", 1)[1]), reverse=True)
    for ck in cks:
        ok, why = _checkpoint_ok(ck)
        if ok:
            if verbose:
                print(f"[qrlib.rl.train] resuming from {ck.name} ({why})")
            return str(ck)
        print(f"[qrlib.rl.train] skipping {ck.name}: incomplete ({why})")
        if quarantine:
            os.replace(ck, d / f"incomplete-{ck.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    return None


class _CheckpointMarker(_trainer_callback_base()):  # type: ignore[misc]
    """Write ``checkpoint-N/.qrlib-complete`` once the Trainer has saved checkpoint N."""

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        ck = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if ck.is_dir() and state.is_world_process_zero:
            (ck / COMPLETE_MARKER).write_text(str(state.global_step))


# --------------------------------------------------------------------------- training
def load_rows(cfg: TrainConfig) -> tuple[list[dict[str, Any]], Any]:
    """Rows of the config's row source and, for retrieval sources, the (cut) dataset."""
    if cfg.rows == "queries":
        ds = qdata.load_dataset(cfg.dataset, cfg.split, data_dir=cfg.data_dir)
        if cfg.n_queries is not None or cfg.n_distractors is not None:
            ds = qdata.subset(ds, n_queries=cfg.n_queries, n_distractors=cfg.n_distractors,
                              seed=cfg.seed)
        return qrows.rows_from_dataset(ds), ds
    if cfg.rows == "spider":
        spider = qdata.load_spider(cfg.data_dir)
        rows = qrows.rows_from_spider(spider, cfg.split, **cfg.row_params)
        if cfg.n_queries is not None and len(rows) > cfg.n_queries:
            rows = random.Random(cfg.seed).sample(rows, cfg.n_queries)
        return rows, None
    if str(cfg.rows).endswith(".jsonl"):
        rows = qrows.read_rows(cfg.rows)
        if cfg.n_queries is not None and len(rows) > cfg.n_queries:
            rows = random.Random(cfg.seed).sample(rows, cfg.n_queries)
        return rows, None
    raise QrlibError(f"rows {cfg.rows!r} unknown; accepted: {list(qrows.SOURCES)} or a "
                     ".jsonl file of rows")


def _build_env(cfg: TrainConfig, ds: Any) -> Any:
    """Retriever (when the source is a collection) -> :class:`qrlib.rl.env.RewardEnv`."""
    params = dict(cfg.reward_params)
    meta = cfg.template_meta()
    if meta.get("max_subqueries") and "max_subqueries" not in params:
        params["max_subqueries"] = meta["max_subqueries"]
    retr = qrels = queries = None
    if ds is not None:
        retr = retrieval.build_retriever(cfg.retriever, ds.corpus, **cfg.retriever_params)
        qrels, queries = ds.qrels, ds.queries
    return RewardEnv(retr, qrels or {}, reward=cfg.reward, fmt=cfg.completion_format,
                     queries=queries, mode="expand" if cfg.expansion else "rewrite", **params)


def _sft_warm_start(cfg: TrainConfig, model: Any, tok: Any, rows: Sequence[dict[str, Any]],
                    peft_config: Any) -> Any:
    """A few SFT steps before RL (TRL ``SFTTrainer``). The target of a row is its
    ``sft_target`` column (e.g. gold SQL, the best sampled decomposition: a real cold
    start); when no row has one, every row's target is a format-valid copy of its query
    (teaches the output format only). When some rows have a target, only those rows are
    used for SFT (the others are RL-only). The SFT-only adapter is saved to
    ``<output_dir>/sft/adapter`` so it can be evaluated as its own row."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    template = as_template(cfg.prompt)
    fmt = cfg.completion_format
    if any("sft_target" in r for r in rows):
        rows = [r for r in rows if r.get("sft_target")]
    if not rows:
        raise QrlibError("sft_steps > 0 but no row has a non-empty sft_target")
    out = []
    for r in rows:
        target = r["sft_target"] if "sft_target" in r else sft_target(r.get("query", ""), fmt)
        pre = fill_prefill(cfg.prefill, r)
        if pre and target.startswith(pre):
            target = target[len(pre):]
        values = {f: r[f] for f in template.fields}
        out.append({"prompt": render_prompt(template, tok, prefill=pre, **values),
                    "completion": target + (tok.eos_token or "")})
    args = SFTConfig(output_dir=str(cfg.output_dir / "sft"), max_steps=cfg.sft_steps,
                     learning_rate=cfg.sft_learning_rate, per_device_train_batch_size=4,
                     logging_steps=1, save_strategy="no", report_to="none", seed=cfg.seed,
                     use_cpu=not _cuda(), bf16=_cuda(), completion_only_loss=True,
                     disable_tqdm=True, gradient_checkpointing=_checkpointing(cfg))
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(out),
                         processing_class=tok, peft_config=peft_config)
    _quiet_progress(trainer)
    trainer.train()
    trainer.save_model(str(cfg.output_dir / "sft" / "adapter"))
    tok.save_pretrained(str(cfg.output_dir / "sft" / "adapter"))
    return trainer.model


def _checkpointing(cfg: TrainConfig) -> bool:
    """Gradient checkpointing of the SFT and RL passes: ``cfg.gradient_checkpointing``, else
    on with CUDA and off on the CPU. One value for both trainers: TRL's SFT default (on) was
    left switched on in the model for the RL stage, which then could not keep the prompt's
    cache for the shared-prompt pass."""
    return _cuda() if cfg.gradient_checkpointing is None else bool(cfg.gradient_checkpointing)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def resolve_dtype(dtype: str | None) -> str:
    """The policy weights' dtype for ``dtype=None``: bf16 on CUDA, fp32 on CPU.

    Not bf16 weights on CPU: decoding with bf16 weights was far slower here (8 x 48 tokens
    of Qwen2.5-Coder-0.5B: 266 s) than fp32 weights under bf16 autocast, which
    :attr:`TrainConfig.cpu_autocast` turns on for generation and the log-prob passes."""
    if dtype:
        return dtype
    return "bfloat16" if _cuda() else "float32"


def resolve_autocast(cfg: "TrainConfig") -> bool:
    """Whether the log-prob/loss passes run under CPU bf16 autocast (see ``cpu_autocast``)."""
    if _cuda():
        return False

    return cpu_has_native_bf16() if cfg.cpu_autocast is None else bool(cfg.cpu_autocast)


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


def _fingerprint(obj: Any) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _prepare_output(cfg: TrainConfig, current: dict[str, Any]) -> None:
    """Move aside a run folder holding another run (anything but the step budget and
    checkpoint cadence differs, including the rows and the reward environment)."""
    out = cfg.output_dir
    if (out / "config.json").exists():
        try:
            saved = json.loads((out / "config.json").read_text())
        except ValueError:
            saved = {}
        ignore = {"max_steps", "resume", "save_steps", "save_total_limit"}
        if {k: v for k, v in saved.items() if k not in ignore} != \
                {k: v for k, v in current.items() if k not in ignore}:
            diff = sorted(k for k in set(saved) | set(current) if k not in ignore
                          and saved.get(k) != current.get(k))
            stale = out.with_name(f"{out.name}.stale-{time.strftime('%Y%m%d-%H%M%S')}")
            print(f"[qrlib.rl.train] {out} holds a run with another config (differs in "
                  f"{diff[:6]}); moved to {stale.name}")
            os.replace(out, stale)
    out.mkdir(parents=True, exist_ok=True)


def _finished(cfg: TrainConfig) -> dict[str, Any] | None:
    """The saved summary when this run already reached ``max_steps`` (nothing to do)."""
    out = cfg.output_dir
    try:
        summary = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    if summary.get("steps", -1) >= cfg.max_steps and \
            (out / "adapter" / "adapter_config.json").exists():
        return summary
    return None


def train(cfg: TrainConfig | dict[str, Any], *, env: Any = None,
          rows: Sequence[dict[str, Any]] | None = None,
          queries: dict[str, str] | None = None) -> dict[str, Any]:
    """Run (or resume) one GRPO/DAPO training and return a summary (see :func:`_train`).

    One process at a time may train into a run's folder: a second one (another
    ``python -m qrlib.rl.train`` or notebook on the same ``run_dir``/``name``) stops with a
    one-line error naming the PID holding ``<run_dir>/rl/.locks/<name>/run.lock``; the lock
    of a killed trainer is taken over."""
    if isinstance(cfg, dict):
        cfg = load_config(cfg)
    with run_lock(Path(cfg.run_dir) / "rl" / ".locks" / cfg.name, what="qrlib.rl.train"), \
            _warnings_to(cfg.output_dir / "warnings.log"):
        return _train(cfg, env=env, rows=rows, queries=queries)


@contextlib.contextmanager
def _warnings_to(path: Path) -> Any:
    """Send Python warnings and transformers/TRL log messages below ERROR to ``path``
    while training, so executed notebooks show the step log, not kilobytes of warnings."""
    import logging
    import warnings

    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    loggers = [logging.getLogger(n) for n in ("transformers", "trl", "peft", "accelerate")]
    saved = [(lg, lg.handlers[:], lg.propagate) for lg in loggers]
    with open(path, "a", encoding="utf-8") as fh, warnings.catch_warnings():
        def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                 line: Any = None) -> None:
            fh.write(warnings.formatwarning(message, category, filename, lineno, line))

        warnings.showwarning = show
        for lg in loggers:
            lg.handlers, lg.propagate = [handler], False
        try:
            yield path
        finally:
            for lg, handlers, propagate in saved:
                lg.handlers, lg.propagate = handlers, propagate
            handler.close()


def _train(cfg: TrainConfig, *, env: Any = None,
           rows: Sequence[dict[str, Any]] | None = None,
           queries: dict[str, str] | None = None) -> dict[str, Any]:
    """Run (or resume) one GRPO/DAPO training and return a summary.

    The training rows come from ``rows`` (a list of dicts, :mod:`qrlib.data.rows`), or
    ``queries`` (qid -> text, for single-query prompts), or the config's row source; the
    reward from ``env`` (any TRL reward callable) or a :class:`qrlib.rl.env.RewardEnv` built
    from the config. Every row column reaches the reward as a keyword (``qid``, ``query``,
    ``db_path``, ``gold_sql``, ``answers``, ...); a column the env declares in
    ``required_columns`` but the rows lack is a one-line error.

    Writes under ``cfg.output_dir``: ``checkpoint-N/`` (resumable; a checkpoint cut short
    by a kill is skipped), ``adapter/`` (final LoRA), ``log.csv`` (one row per step),
    ``samples.jsonl`` (a few completions per step, kept across resumes), ``config.json``
    (with fingerprints of the rows and the env), ``summary.json``. A run that already
    reached ``max_steps`` returns its summary without training again.
    """
    import torch
    from peft import LoraConfig
    from transformers import set_seed

    if isinstance(cfg, dict):
        cfg = load_config(cfg)
    out = cfg.output_dir
    ds = None
    if rows is None and queries is not None:
        rows = rows_from_queries(queries)
    if rows is None:
        rows, ds = load_rows(cfg)
    rows = [dict(r) for r in rows]
    template = as_template(cfg.prompt)
    check_rows(rows, fields=template.fields)
    if env is None:
        env = _build_env(cfg, ds)
    check_rows(rows, columns=tuple(getattr(env, "required_columns", ()) or ()))
    if hasattr(env, "missing_columns"):  # requirements with alternatives (gold_sql | gold_rows)
        missing = env.missing_columns(list(rows[0]))
        if missing:
            raise QrlibError(f"training rows lack reward column(s) {missing}; the rows have "
                             f"{sorted(rows[0])}")
    current = json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
    current["rows_fingerprint"] = _fingerprint(sorted(rows, key=lambda r: r["qid"]))
    current["env"] = repr(env)
    _prepare_output(cfg, current)
    done = _finished(cfg) if cfg.resume else None
    if done is not None:
        print(f"[qrlib.rl.train] {out} already trained to step {done['steps']} "
              f"(max_steps {cfg.max_steps}); nothing to do")
        return done
    save_json(current, out / "config.json")
    set_seed(cfg.seed)
    fmt = cfg.completion_format
    reward = TimedReward(env, fmt, cfg.prefill)

    cuda = _cuda()
    dtype = resolve_dtype(cfg.dtype)
    resume = last_checkpoint(out, quarantine=True, verbose=True) if cfg.resume else None
    # load on CPU: the Trainer/accelerate places the model on each process's own device
    model, tok = load_policy(cfg.model, adapter=cfg.init_adapter, dtype=dtype, device="cpu",
                             trainable=cfg.init_adapter is not None)
    peft_config = None if cfg.init_adapter else LoraConfig(
        r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
        target_modules=cfg.lora_target_modules, task_type="CAUSAL_LM")
    if cfg.sft_steps > 0 and resume is None:
        model = _sft_warm_start(cfg, model, tok, rows, peft_config)
        peft_config = None  # the SFT trainer already wrapped the model in LoRA
    if peft_config is None and dtype != "float32":  # keep trainable LoRA weights in fp32
        for p in model.parameters():
            if p.requires_grad:
                p.data = p.data.float()
    batch = cfg.prompts_per_step * cfg.num_generations
    args = _grpo_args(cfg, batch, cuda, dtype)
    n_rows = cfg.max_steps * cfg.prompts_per_step
    data = build_prompts(rows, tok, template, repeat_to=n_rows, seed=cfg.seed,
                         prefill=cfg.prefill)
    timer: dict[str, float] = {}
    resumed_step = int(Path(resume).name.split("-")[1]) if resume else 0
    logger = StepLogger(out / "log.csv", reward, timer, samples_path=out / "samples.jsonl",
                        resumed_step=resumed_step)
    trainer_cls = _trainer_class()

    if args.use_vllm:  # the trainer starts its own engine: free the process's others first
        engine.close_engines()

    with engine.engine_start_guard():  # TRL's colocate mode starts its vLLM engine here
        trainer = trainer_cls(model=model, reward_funcs=[reward], args=args,
                              train_dataset=data, processing_class=tok,
                              peft_config=peft_config, callbacks=[logger, _CheckpointMarker()])
    _quiet_progress(trainer)
    if getattr(trainer, "vllm_generation", None) is not None and not cuda:
        _push_weights_on_cpu(trainer)
    trainer.qrlib_dynamic_sampling = cfg.dynamic_sampling
    trainer.qrlib_autocast = resolve_autocast(cfg)
    trainer.qrlib_shared_prompt = cfg.shared_prompt_pass
    trainer.qrlib_refill = build_prompts(rows, tok, template, seed=cfg.seed + 1,
                                         prefill=cfg.prefill).to_list()
    _GenTimer(trainer, timer)
    t0 = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    wall = time.perf_counter() - t0
    gen = getattr(trainer, "vllm_generation", None)
    if gen is not None and getattr(gen, "llm", None) is not None:
        engine.shutdown(gen.llm)  # the engine's memory back before the next model loads
        gen.llm = None
    trainer.save_model(str(out / "adapter"))
    tok.save_pretrained(str(out / "adapter"))
    summary = {"name": cfg.name, "model": cfg.model, "dtype": dtype,
               "cpu_autocast": trainer.qrlib_autocast,
               "steps": trainer.state.global_step,
               "resumed_from": resume, "train_seconds": round(wall, 1),
               "reward_seconds": round(reward.seconds, 1),
               "rollouts": reward.calls and sum(b.get("n", batch) for b in reward.batches),
               "dynamic_sampling": dict(getattr(trainer, "qrlib_ds_stats", {})),
               "adapter": str(out / "adapter"),
               "sft_adapter": (str(out / "sft" / "adapter")
                               if (out / "sft" / "adapter" / "adapter_config.json").exists()
                               else None),
               "log": str(out / "log.csv"), "train_loss": getattr(result, "training_loss", None),
               "torch_threads": torch.get_num_threads(),
               "rollouts_backend": rollout_backend(cfg),
               "weight_pushes": getattr(trainer, "qrlib_pushes", None),
               "shared_prompt_passes": getattr(trainer, "qrlib_shared_passes", 0)}
    if trainer.accelerator.is_main_process:
        save_json(summary, out / "summary.json")
    return summary


def _grpo_args(cfg: TrainConfig, batch: int, cuda: bool, dtype: str) -> Any:
    """TRL ``GRPOConfig`` for the run (vLLM colocate rollouts when ``use_vllm``)."""
    from trl import GRPOConfig

    g = cfg.resolved()
    extra: dict[str, Any] = {}
    extra.update({k: getattr(cfg, k) for k in ("top_k", "min_p") if getattr(cfg, k) is not None})
    if rollout_backend(cfg) == "vllm":
        if not cuda:
            engine.require_vllm()
            engine.configure_env()
        extra.update(use_vllm=True, vllm_mode="colocate", vllm_enable_sleep_mode=False,
                     vllm_gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
                     vllm_max_model_length=cfg.vllm_max_model_length,
                     vllm_importance_sampling_correction=cfg.vllm_importance_sampling_correction)
        if cfg.stop:
            # the stop string stays in the completion, so the parser sees the closed JSON
            extra["generation_kwargs"] = {"stop": list(cfg.stop),
                                          "include_stop_str_in_output": True}
    elif cfg.stop:
        print(f"[qrlib.rl.train] stop strings {cfg.stop} apply to vLLM rollouts only; the HF "
              f"path generates up to max_completion_length")
    return GRPOConfig(
        output_dir=str(cfg.output_dir), max_steps=cfg.max_steps,
        learning_rate=cfg.learning_rate, warmup_steps=cfg.warmup_steps,
        lr_scheduler_type=cfg.lr_scheduler_type,
        mask_truncated_completions=cfg.mask_truncated_completions,
        max_grad_norm=cfg.max_grad_norm,
        per_device_train_batch_size=batch, gradient_accumulation_steps=1,
        num_generations=cfg.num_generations, max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature, top_p=cfg.top_p, loss_type=g["loss_type"],
        epsilon=g["epsilon"], epsilon_high=g["epsilon_high"], beta=g["beta"],
        scale_rewards=g["scale_rewards"], logging_steps=1, save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit, report_to="none", seed=cfg.seed,
        use_cpu=not cuda, bf16=cuda and dtype == "bfloat16",
        gradient_checkpointing=_checkpointing(cfg),
        remove_unused_columns=False, disable_tqdm=True, dataloader_num_workers=0, **extra)


def rollout_backend(cfg: TrainConfig) -> str:
    """``"vllm"`` or ``"hf"`` for the run's rollouts (``$QRLIB_ROLLOUTS`` over ``use_vllm``)."""
    return engine.backend(cfg.use_vllm)


def _push_weights_on_cpu(trainer: Any) -> None:
    """Replace TRL's colocate weight sync by vLLM's ``reload_weights`` (CPU backend).

    TRL writes each tensor through the engine model's ``load_weights``, which fails on vLLM's
    CPU backend (it repacks linear weights and drops the parameters). The replacement pushes
    the policy's weights with the LoRA delta folded in (:func:`qrlib.generation.engine.policy_weights`)
    through ``collective_rpc("reload_weights", weights_iterator=...)``, then clears the
    prefix cache; ``trainer.qrlib_pushes`` counts the pushes (a test reads it).
    """
    gen = trainer.vllm_generation
    trainer.qrlib_pushes = 0

    def sync_weights() -> None:
        # the engine started from the base folder, so only LoRA-adapted weights change
        push_weights(gen.llm, trainer.accelerator.unwrap_model(trainer.model),
                     adapted_only=True)
        trainer.qrlib_pushes += 1

    gen.sync_weights = sync_weights


def _trainer_class() -> type:
    """TRL's ``GRPOTrainer`` with DAPO's dynamic sampling (DAPO Sec. 3.2) and CPU bf16
    autocast of the log-prob passes (``qrlib_autocast``) added.

    With ``qrlib_dynamic_sampling = n > 0``, after a batch is generated and scored, every
    group whose rewards are all equal (all advantages exactly 0: it teaches nothing) is
    replaced by a group of a freshly drawn prompt, for up to ``n`` extra generation
    rounds; groups still missing after that are filled with the zero-spread groups, so
    the batch size never changes. ``qrlib_ds_stats`` counts rounds, groups replaced and
    groups kept with zero spread. Single-process only (on several processes a group may
    span devices); elsewhere it is switched off with a warning.
    """
    import contextlib

    import torch
    from trl import GRPOTrainer

    class QrlibGRPOTrainer(GRPOTrainer):
        qrlib_dynamic_sampling = 0
        qrlib_autocast = False
        qrlib_shared_prompt = False
        qrlib_refill: list[dict[str, Any]] = []

        def _get_per_token_logps_and_entropies(self, *a, **kw):  # type: ignore[override]
            # the loss and log-prob forward passes (and so their backward) in bf16 on CPUs
            # with native bf16 matmul; fp32 weights, so no precision is lost in the update
            ctx = (torch.autocast("cpu", dtype=torch.bfloat16) if self.qrlib_autocast
                   else contextlib.nullcontext())
            with ctx:
                shared = self._qrlib_shared_prompt_pass(*a, **kw)
                if shared is not None:
                    return shared
                return super()._get_per_token_logps_and_entropies(*a, **kw)

        def _qrlib_shared_prompt_pass(self, model, input_ids, attention_mask, logits_to_keep,
                                      batch_size=None, compute_entropy=False,
                                      compute_aux_loss=False, **extra):
            # each group's prompt once (qrlib.rl.sharedprefix); None: TRL's own pass
            if (not self.qrlib_shared_prompt or compute_aux_loss
                    or any(v is not None for v in extra.values())):
                return None
            if getattr(causal_lm_parts(model)[0], "gradient_checkpointing", False):
                return None  # no prompt cache under checkpointing: TRL's own pass
            groups = prompt_groups(input_ids, attention_mask, input_ids.size(1) - logits_to_keep)
            if groups is None:
                return None
            self.qrlib_shared_passes = getattr(self, "qrlib_shared_passes", 0) + 1
            logps, ents = shared_prompt_logps(model, input_ids, attention_mask, logits_to_keep,
                                              groups, temperature=self.temperature,
                                              compute_entropy=compute_entropy)
            return logps, ents, None

        def _generate(self, *a, **kw):  # type: ignore[override]
            if not self.qrlib_autocast:
                return super()._generate(*a, **kw)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return super()._generate(*a, **kw)

        def _generate_and_score_completions(self, inputs):  # type: ignore[override]
            out = super()._generate_and_score_completions(inputs)
            n = int(self.qrlib_dynamic_sampling or 0)
            if n <= 0 or not self.model.training or not self.qrlib_refill:
                return out
            if self.accelerator.num_processes > 1:
                print("[qrlib.rl.train] dynamic sampling is single-process only; off")
                self.qrlib_dynamic_sampling = 0
                return out
            g = self.num_generations
            stats = self.__dict__.setdefault("qrlib_ds_stats", {
                "steps": 0, "steps_fired": 0, "rounds": 0, "groups_replaced": 0,
                "zero_groups_kept": 0})
            stats["steps"] += 1
            pools = [out]
            good = [(0, i) for i in _live_groups(out["advantages"], g)]
            dead = [(0, i) for i in range(len(inputs) // g) if (0, i) not in good]
            need = len(inputs) // g - len(good)
            if need:
                stats["steps_fired"] += 1
            rounds = 0
            while need > 0 and rounds < n:
                rounds += 1
                cursor = self.__dict__.setdefault("qrlib_refill_cursor", 0)
                fresh = []
                for j in range(need):
                    row = self.qrlib_refill[(cursor + j) % len(self.qrlib_refill)]
                    fresh += [dict(row) for _ in range(g)]
                self.qrlib_refill_cursor = cursor + need
                extra = super()._generate_and_score_completions(fresh)
                pools.append(extra)
                live = _live_groups(extra["advantages"], g)[:need]
                good += [(len(pools) - 1, i) for i in live]
                stats["groups_replaced"] += len(live)
                need -= len(live)
            stats["rounds"] += rounds
            stats["zero_groups_kept"] += need
            chosen = good + dead[:need]
            return _splice(pools, chosen, g)

    return QrlibGRPOTrainer


def _live_groups(advantages: Any, g: int) -> list[int]:
    """Indices of the groups (runs of ``g`` rows) with some non-zero advantage."""
    a = advantages.reshape(-1, g)
    return [i for i in range(a.shape[0]) if bool((a[i] != 0).any())]


def _splice(pools: list[dict[str, Any]], chosen: list[tuple[int, int]], g: int) -> dict[str, Any]:
    """One generation batch made of the groups ``chosen`` ((pool, group) pairs) of several
    batches from ``_generate_and_score_completions``: prompt tensors are left-padded,
    per-token tensors right-padded to a common length; ``num_items_in_batch`` recounted."""
    import torch

    if len(pools) == 1 and chosen == [(0, i) for i in range(len(chosen))]:
        return pools[0]
    out: dict[str, Any] = {}
    for key, val in pools[0].items():
        if key == "num_items_in_batch" or not torch.is_tensor(val) or val.dim() == 0:
            out[key] = val
            continue
        parts = []
        for p, i in chosen:
            t = pools[p][key][i * g:(i + 1) * g]
            parts.append(t)
        if val.dim() >= 2:
            width = max(t.shape[1] for t in parts)
            left = key.startswith("prompt")
            padded = []
            for t in parts:
                pad = width - t.shape[1]
                if pad:
                    fill = torch.zeros((t.shape[0], pad, *t.shape[2:]), dtype=t.dtype,
                                       device=t.device)
                    t = torch.cat([fill, t] if left else [t, fill], dim=1)
                padded.append(t)
            parts = padded
        out[key] = torch.cat(parts, dim=0)
    if "completion_mask" in out and torch.is_tensor(pools[0].get("num_items_in_batch")):
        out["num_items_in_batch"] = out["completion_mask"].sum().to(
            pools[0]["num_items_in_batch"].dtype)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m qrlib.rl.train --config FILE [--set key=value ...]``."""
    p = argparse.ArgumentParser(prog="python -m qrlib.rl.train", description=__doc__.split("\n")[0])
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
