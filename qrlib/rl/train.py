"""RL training of query rewriters with TRL's ``GRPOTrainer`` and a PEFT LoRA adapter.

The RL algorithm is TRL's, not ours: this module only turns a :class:`TrainConfig` (one
mapping from a params file) into a prompt dataset, a reward environment
(:class:`qrlib.rl.env.RewardEnv`), a ``GRPOConfig`` and a LoRA config, and then runs
``GRPOTrainer.train`` with resume-from-last-checkpoint and a per-step CSV log.

Algorithms (``algorithm`` key; every field can still be overridden):

* ``grpo`` -- group-relative advantages, token loss normalised per sequence, symmetric
  clipping ``epsilon`` and a KL penalty ``beta`` (DeepRetrieval App. B.2 uses KL 0.001,
  temperature 0.6).
* ``dapo`` -- DAPO's token-level normalisation (TRL ``loss_type="dapo"``), clip-higher
  (``epsilon_high=0.28``) and no KL term.

Entry points: :func:`train` (from a notebook) and ``python -m qrlib.rl.train --config FILE``,
which also works as ``accelerate launch --config_file params/accelerate_multi_gpu.yaml -m
qrlib.rl.train --config FILE`` on several GPUs. On CPU the model trains in fp32; on CUDA in
bf16 (that path exists but was never run in this project: no GPU was available).

This module holds the orchestration (:func:`train`); the parts live beside it and the names
notebooks and tests use are re-exported here:

* :mod:`qrlib.rl.config` -- :class:`TrainConfig`, :data:`ALGORITHMS`, :func:`load_config`,
  the device defaults;
* :mod:`qrlib.rl.rows` -- training rows, the prompt dataset, the reward environment;
* :mod:`qrlib.rl.steplog` -- :class:`TimedReward`, :class:`StepLogger`, quiet trainer output;
* :mod:`qrlib.rl.checkpoints` -- complete checkpoints, run folders, finished runs;
* :mod:`qrlib.rl.sft` -- the SFT cold start;
* :mod:`qrlib.rl.trainer` -- the ``GRPOConfig`` and the ``GRPOTrainer`` subclass;
* :mod:`qrlib.rl.cli` -- the command line (:func:`main`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import weakref
from pathlib import Path
from typing import Any, Iterator, Sequence

from qrlib.core.errors import QrlibError
from qrlib.core.git import commit_info
from qrlib.core.io import save_json
from qrlib.core.lock import run_lock
from qrlib.data.rows import check_rows, rows_from_queries
from qrlib.eval.scale import fmt_scale, log_scale
from qrlib.generation import engine
from qrlib.generation.contract import CONTRACT_FILE, DecodingContract
from qrlib.rl.health import HEALTH_FILE, template_examples, write_health
from qrlib.generation.parsing import sft_target
from qrlib.generation.policy import load_policy
from qrlib.generation.prompts import as_template
from qrlib.rl import cli
from qrlib.rl.checkpoints import (COMPLETE_MARKER, CheckpointMarker, finished, fingerprint,
                                  last_checkpoint, prepare_output)
from qrlib.rl.config import (ALGORITHMS, TrainConfig, cuda_available, load_config,
                             resolve_autocast, resolve_dtype)
from qrlib.rl.rows import build_env, build_prompts, fill_prefill, load_rows
from qrlib.rl.release import drop_stored_tracebacks, release_memory
from qrlib.rl.sft import sft_warm_start
from qrlib.rl.steplog import GenTimer, StepLogger, TimedReward, quiet_progress, warnings_to
from qrlib.rl.trainer import (grpo_args, hf_stop_strings, push_weights_on_cpu, rollout_backend,
                              trainer_class)

__all__ = ["TrainConfig", "ALGORITHMS", "train", "build_prompts", "StepLogger",
           "TimedReward", "last_checkpoint", "load_config", "load_rows", "resolve_dtype",
           "main",
           # re-exported for the callers of qrlib.rl.train (notebooks, tests, benchmarks)
           "COMPLETE_MARKER", "fill_prefill", "resolve_autocast", "rollout_backend",
           "sft_target"]


def train(cfg: TrainConfig | dict[str, Any], *, env: Any = None,
          rows: Sequence[dict[str, Any]] | None = None,
          queries: dict[str, str] | None = None) -> dict[str, Any]:
    """Run (or resume) one GRPO/DAPO training and return a summary (see :func:`_train`).

    One process at a time may train into a run's folder: a second one (another
    ``python -m qrlib.rl.train`` or notebook on the same ``run_dir``/``name``) stops with a
    one-line error naming the PID holding ``<run_dir>/rl/.locks/<name>/run.lock``; the lock
    of a killed trainer is taken over. A run that trained gives its memory back before
    returning (:func:`qrlib.rl.release.release_memory`: generation engines closed, stored
    library tracebacks dropped, freed heap returned), so trainings can follow each other in
    one process."""
    if isinstance(cfg, dict):
        cfg = load_config(cfg)
    lock = Path(cfg.run_dir) / "rl" / ".locks" / cfg.name
    rank = process_rank()[0]
    if rank > 0:  # a data-parallel launch: rank 0 holds the run's lock, the others their own
        lock = lock / f"rank{rank}"
    with run_lock(lock, what="qrlib.rl.train"), \
            warnings_to(cfg.output_dir / "warnings.log"):
        trains = not (cfg.resume and finished(cfg))
        summary = _train(cfg, env=env, rows=rows, queries=queries)
    if trains:  # the finished run's memory back to the system before the next one
        release_memory()
    return summary


def commit_label() -> str:
    """The commit the training ran at (``+ changes`` when qrlib's sources differed from it)."""
    info = commit_info()
    return info["commit"] + (" + changes" if info.get("dirty") else "")


def reuse_note(cfg: TrainConfig, done: dict[str, Any]) -> str:
    """``"<run> already trained to step 60 (max_steps 60) on 2026-11-27 15:40 UTC at
    commit abc (60 steps, 118 queries, 1104 rollouts, 31.2 min); reused, nothing to do"``:
    what a notebook that finds a finished run says of it (when, where and how much)."""
    import pandas as pd

    out = cfg.output_dir
    when = done.get("trained_at") or time.strftime(
        "%Y-%m-%d %H:%M UTC", time.gmtime((out / "summary.json").stat().st_mtime))
    at = f" at commit {done['commit']}" if done.get("commit") else ""
    try:
        scale = f" ({fmt_scale(log_scale(pd.read_csv(out / 'log.csv', dtype={'qids': str})))})"
    except (OSError, ValueError, KeyError):
        scale = ""
    return (f"{cfg.name} already trained to step {done['steps']} (max_steps {cfg.max_steps}) "
            f"on {when}{at}{scale}; reused, nothing to do")


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
        env = build_env(cfg, ds)
    check_rows(rows, columns=tuple(getattr(env, "required_columns", ()) or ()))
    if hasattr(env, "missing_columns"):  # requirements with alternatives (gold_sql | gold_rows)
        missing = env.missing_columns(list(rows[0]))
        if missing:
            raise QrlibError(f"training rows lack reward column(s) {missing}; the rows have "
                             f"{sorted(rows[0])}")
    current = json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
    current["rows_fingerprint"] = fingerprint(sorted(rows, key=lambda r: r["qid"]))
    current["env"] = repr(env)
    with main_process_first():  # the run folder is prepared once, by the first rank
        prepare_output(cfg, current)
        done = finished(cfg) if cfg.resume else None
        if done is None:
            save_json(current, out / "config.json")
            resume = last_checkpoint(out, quarantine=True, verbose=True) if cfg.resume else None
    if done is not None:
        for folder in (out / "adapter", out / "sft" / "adapter"):  # runs finished before
            if folder.is_dir() and not (folder / CONTRACT_FILE).exists() and \
                    process_rank()[0] == 0:  # contracts existed
                DecodingContract.of(cfg).save(folder)
        if process_rank()[0] == 0 and (out / "log.csv").exists() and \
                not (out / HEALTH_FILE).exists():
            write_health(out)
        print(f"[qrlib.rl.train] {reuse_note(cfg, done)}", flush=True)
        return done
    set_seed(cfg.seed)
    fmt = cfg.completion_format
    reward = TimedReward(env, fmt, cfg.prefill, stop=cfg.stop,
                         budget=cfg.max_completion_length,
                         examples=template_examples(cfg.prompt))

    cuda = cuda_available()
    dtype = resolve_dtype(cfg.dtype)
    if rollout_backend(cfg) == "vllm" or cfg.sft_steps > 0:
        # the trainer starts its own engine, and the SFT cold start needs the memory: the
        # process's other engines (a cold start's sampling engine) close before the policy loads
        engine.close_engines()
    # load on CPU: the Trainer/accelerate places the model on each process's own device
    model, tok = load_policy(cfg.model, adapter=cfg.init_adapter, dtype=dtype, device="cpu",
                             trainable=cfg.init_adapter is not None)
    peft_config = None if cfg.init_adapter else cfg.lora_config()
    if cfg.sft_steps > 0 and resume is None:
        model = sft_warm_start(cfg, model, tok, rows, peft_config)
        peft_config = None  # the SFT trainer already wrapped the model in LoRA
    if peft_config is None and dtype != "float32":  # keep trainable LoRA weights in fp32
        for p in model.parameters():
            if p.requires_grad:
                p.data = p.data.float()
    batch = cfg.prompts_per_step * cfg.num_generations
    n_rows = cfg.max_steps * cfg.prompts_per_step
    data = build_prompts(rows, tok, template, repeat_to=n_rows, seed=cfg.seed,
                         prefill=cfg.prefill)
    longest = None
    if rollout_backend(cfg) == "vllm" and cfg.vllm_max_model_length is None:
        longest = max(len(tok(p, add_special_tokens=False)["input_ids"])
                      for p in set(data["prompt"]))
    args = grpo_args(cfg, batch, cuda, dtype, max_prompt_tokens=longest)
    timer: dict[str, float] = {}
    resumed_step = int(Path(resume).name.split("-")[1]) if resume else 0
    logger = StepLogger(out / "log.csv", reward, timer, samples_path=out / "samples.jsonl",
                        resumed_step=resumed_step)
    trainer_cls = trainer_class()

    trainer_layers: Any = weakref.WeakSet()  # the colocated engine's vLLM layer records
    # TRL's colocate mode starts its vLLM engine here
    with engine.engine_start_guard(), engine.recording_layers(trainer_layers):
        trainer = trainer_cls(model=model, reward_funcs=[reward], args=args,
                              train_dataset=data, processing_class=tok,
                              peft_config=peft_config, callbacks=[logger, CheckpointMarker()])
    quiet_progress(trainer)
    hf_stop_strings(trainer, tok)  # TRL's HF rollouts end at cfg.stop too
    if getattr(trainer, "vllm_generation", None) is not None and not cuda:
        push_weights_on_cpu(trainer)
    trainer.qrlib_dynamic_sampling = cfg.dynamic_sampling
    trainer.qrlib_mask_truncated = cfg.mask_truncated_completions
    trainer.qrlib_reward = reward
    trainer.qrlib_autocast = resolve_autocast(cfg)
    trainer.qrlib_shared_prompt = cfg.shared_prompt_pass
    trainer.qrlib_refill = build_prompts(rows, tok, template, seed=cfg.seed + 1,
                                         prefill=cfg.prefill).to_list()
    GenTimer(trainer, timer)
    t0 = time.perf_counter()
    with engine.recording_layers(trainer_layers):  # weight pushes may record more
        result = trainer.train(resume_from_checkpoint=resume)
    wall = time.perf_counter() - t0
    adapter_sha = adapter_fingerprint(trainer.accelerator.unwrap_model(trainer.model))
    gen = getattr(trainer, "vllm_generation", None)
    if gen is not None and getattr(gen, "llm", None) is not None:
        engine.forget_layers(trainer_layers)  # as Engine.close (vLLM's layer records)
        engine.shutdown(gen.llm)  # the engine's memory back before the next model loads
        gen.llm = None
    trainer.save_model(str(out / "adapter"))
    tok.save_pretrained(str(out / "adapter"))
    if trainer.accelerator.is_main_process:  # test decoding reads it (rewrite_queries)
        DecodingContract.of(cfg).save(out / "adapter")
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
               "shared_prompt_passes": getattr(trainer, "qrlib_shared_passes", 0),
               # distinct prompts per training micro-batch: 1 when each holds one group
               "prompts_per_pass": (round(trainer.qrlib_pass_prompts / trainer.qrlib_logp_passes, 3)
                                    if getattr(trainer, "qrlib_logp_passes", 0) else None),
               "adapter_sha256": adapter_sha,
               "trained_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "commit": commit_label(),
               "processes": trainer.accelerator.num_processes}
    if trainer.accelerator.is_main_process:
        save_json(summary, out / "summary.json")
        if (out / "log.csv").exists():
            write_health(out)  # the per-step health table (qrlib.rl.health)
    # a library's stored exception would keep this call's frames (the trainer, the policy,
    # the engine) alive for the rest of the process (qrlib.rl.release)
    del trainer, model, result, gen
    drop_stored_tracebacks()
    return summary


def process_rank() -> tuple[int, int]:
    """(global rank, world size) of a ``torchrun`` / ``accelerate launch`` process; (0, 1)
    in a plain process."""
    import os

    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


@contextlib.contextmanager
def main_process_first() -> Iterator[None]:
    """Run the block on rank 0 first, then on the other ranks (accelerate's
    ``PartialState.main_process_first``); a plain context in a single process."""
    if process_rank()[1] <= 1:
        yield
        return
    from accelerate import PartialState

    with PartialState().main_process_first():
        yield


def adapter_fingerprint(model: Any) -> str:
    """sha256 over the names and bytes of the model's trainable parameters (the LoRA
    adapter): equal on every rank of a data-parallel run, and across runs that are
    bit-reproducible."""
    import hashlib

    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        if p.requires_grad:
            h.update(name.encode())
            h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    """``python -m qrlib.rl.train --config FILE [--set key=value ...]``
    (:func:`qrlib.rl.cli.main` running :func:`train`)."""
    return cli.main(argv, run=train)


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except QrlibError as exc:
        import sys

        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2)
