"""The TRL side of an RL run: the ``GRPOConfig``, the rollout backend and qrlib's
``GRPOTrainer`` subclass.

* :func:`grpo_args` -- TRL ``GRPOConfig`` of a :class:`~qrlib.rl.config.TrainConfig`
  (vLLM colocate rollouts when asked);
* :func:`rollout_backend` -- ``"vllm"`` or ``"hf"`` for the run's rollouts;
* :func:`push_weights_on_cpu` -- TRL's colocate weight sync replaced by vLLM's
  ``reload_weights`` on the CPU backend;
* :func:`trainer_class` -- ``GRPOTrainer`` with DAPO dynamic sampling, CPU bf16 autocast
  and the shared-prompt log-prob pass (:mod:`qrlib.rl.sharedprefix`);
* :func:`live_groups` and :func:`splice` -- the batch surgery of dynamic sampling.
"""
from __future__ import annotations

from typing import Any

from qrlib.generation import engine
from qrlib.generation.engine import push_weights
from qrlib.rl.config import TrainConfig, grad_checkpointing, micro_batch
from qrlib.rl.sharedprefix import causal_lm_parts, prompt_groups, shared_prompt_logps

__all__ = ["grpo_args", "rollout_backend", "push_weights_on_cpu", "trainer_class",
           "live_groups", "splice", "context_length", "hf_stop_strings"]


def grpo_args(cfg: TrainConfig, batch: int, cuda: bool, dtype: str, *,
              max_prompt_tokens: int | None = None) -> Any:
    """TRL ``GRPOConfig`` for the run (vLLM colocate rollouts when ``use_vllm``): one
    generation of ``batch`` rollouts per optimizer step, trained in micro-batches
    (:func:`qrlib.rl.config.micro_batch`); the vLLM context is ``vllm_max_model_length``,
    else ``max_prompt_tokens + max_completion_length`` rounded up to 256."""
    from trl import GRPOConfig

    micro, accum = micro_batch(cfg, cuda)  # micro * accum == batch by construction
    g = cfg.resolved()
    extra: dict[str, Any] = {}
    extra.update({k: getattr(cfg, k) for k in ("top_k", "min_p") if getattr(cfg, k) is not None})
    if rollout_backend(cfg) == "vllm":
        if not cuda:
            engine.require_vllm()
            engine.configure_env()
        extra.update(use_vllm=True, vllm_mode="colocate", vllm_enable_sleep_mode=False,
                     vllm_gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
                     vllm_max_model_length=context_length(cfg, max_prompt_tokens),
                     vllm_importance_sampling_correction=cfg.vllm_importance_sampling_correction)
        if cfg.stop:
            # the stop string stays in the completion, so the parser sees the closed JSON
            extra["generation_kwargs"] = {"stop": list(cfg.stop),
                                          "include_stop_str_in_output": True}
    elif cfg.stop:
        extra["generation_kwargs"] = {"stop_strings": list(cfg.stop)}  # see hf_stop_strings
    return GRPOConfig(
        output_dir=str(cfg.output_dir), max_steps=cfg.max_steps,
        learning_rate=cfg.learning_rate, warmup_steps=cfg.warmup_steps,
        lr_scheduler_type=cfg.lr_scheduler_type,
        # qrlib masks truncated rollouts itself (QrlibGRPOTrainer.qrlib_mask_truncated):
        # TRL's test would also mask every rollout that ended at a vLLM stop string
        mask_truncated_completions=False,
        max_grad_norm=cfg.max_grad_norm,
        per_device_train_batch_size=micro, gradient_accumulation_steps=accum,
        steps_per_generation=accum,
        num_generations=cfg.num_generations, max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature, top_p=cfg.top_p, loss_type=g["loss_type"],
        epsilon=g["epsilon"], epsilon_high=g["epsilon_high"], beta=g["beta"],
        scale_rewards=g["scale_rewards"], logging_steps=1, save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit, report_to="none", seed=cfg.seed,
        use_cpu=not cuda, bf16=cuda and dtype == "bfloat16",
        gradient_checkpointing=grad_checkpointing(cfg),
        remove_unused_columns=False, disable_tqdm=True, dataloader_num_workers=0, **extra)


def context_length(cfg: TrainConfig, max_prompt_tokens: int | None) -> int:
    """The vLLM engine's context: ``vllm_max_model_length``, else the longest prompt plus
    ``max_completion_length`` rounded up to a multiple of 256 (2,048 when the prompts are
    not known)."""
    if cfg.vllm_max_model_length is not None:
        return int(cfg.vllm_max_model_length)
    if max_prompt_tokens is None:
        return 2048
    need = max_prompt_tokens + cfg.max_completion_length
    return -(-need // 256) * 256


def hf_stop_strings(trainer: Any, tokenizer: Any) -> bool:
    """Make TRL's HF rollouts honour ``generation_kwargs["stop_strings"]``.

    transformers stops a sequence at a stop string only when ``generate`` is given the
    tokenizer, which TRL does not pass: the model's ``generate`` is wrapped to pass it.
    A stopped sequence is then filled with the pad token, and TRL masks a completion after
    its first EOS only: the pad id is added to the ids TRL masks at, so the filler never
    enters the loss (the completion keeps one pad token, as a finished one keeps its EOS).
    Returns whether anything was changed (no stop strings, or vLLM rollouts: nothing)."""
    import functools

    kwargs = getattr(trainer, "generation_kwargs", None) or {}
    if not kwargs.get("stop_strings") or getattr(trainer, "use_vllm", False):
        return False
    model = trainer.accelerator.unwrap_model(trainer.model)
    if not getattr(model, "_qrlib_stop_tokenizer", False):
        model.generate = functools.partial(model.generate, tokenizer=tokenizer)
        model._qrlib_stop_tokenizer = True
    pad = tokenizer.pad_token_id
    if pad is not None and pad not in trainer.eos_token_ids:
        trainer.eos_token_ids = [*trainer.eos_token_ids, pad]
    return True


def rollout_backend(cfg: TrainConfig) -> str:
    """``"vllm"`` or ``"hf"`` for the run's rollouts (``$QRLIB_ROLLOUTS`` over ``use_vllm``)."""
    return engine.backend(cfg.use_vllm)


def push_weights_on_cpu(trainer: Any) -> None:
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


def trainer_class() -> type:
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
    from trl.trainer.grpo_trainer import split_tensor_dict

    class QrlibGRPOTrainer(GRPOTrainer):
        qrlib_dynamic_sampling = 0
        qrlib_mask_truncated = False
        qrlib_reward: Any = None  # the TimedReward whose last_truncated flags the batch
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
            if self.accelerator.num_processes > 1:
                # the pass calls the inner model, around DDP's forward: the gradients would
                # not be averaged across ranks (measured: two ranks ended with different
                # adapters, tests/test_multiprocess.py)
                return None
            if getattr(causal_lm_parts(model)[0], "gradient_checkpointing", False):
                return None  # no prompt cache under checkpointing: TRL's own pass
            groups = prompt_groups(input_ids, attention_mask, input_ids.size(1) - logits_to_keep)
            if torch.is_grad_enabled():  # a training micro-batch: count its prompts
                self.qrlib_logp_passes = getattr(self, "qrlib_logp_passes", 0) + 1
                self.qrlib_pass_prompts = (getattr(self, "qrlib_pass_prompts", 0)
                                           + (input_ids.size(0) if groups is None
                                              else groups[0].numel()))
            if groups is None:
                return None
            self.qrlib_shared_passes = getattr(self, "qrlib_shared_passes", 0) + 1
            logps, ents = shared_prompt_logps(model, input_ids, attention_mask, logits_to_keep,
                                              groups, temperature=self.temperature,
                                              compute_entropy=compute_entropy)
            return logps, ents, None

        def _qrlib_masked(self, out):
            # DAPO Sec. 3.4 overlong filtering with qrlib's truncation test
            # (qrlib.rl.steplog.is_truncated): a rollout cut off by the budget gets no loss
            flags = getattr(self.qrlib_reward, "last_truncated", None)
            if not self.qrlib_mask_truncated or flags is None:
                return out
            mask = out["completion_mask"]
            if len(flags) != mask.shape[0]:
                raise RuntimeError(f"truncation flags for {len(flags)} rollouts, batch has "
                                   f"{mask.shape[0]}")
            keep = torch.tensor([not f for f in flags], device=mask.device, dtype=mask.dtype)
            out["completion_mask"] = mask * keep.unsqueeze(1)
            return out

        def _prepare_inputs(self, generation_batch):  # type: ignore[override]
            # TRL shuffles a generation batch's rows before it splits them into the step's
            # micro-batches. With one optimizer step per generation (qrlib's grpo_args) the
            # order cannot change the update, whose gradient sums over every micro-batch, but
            # the shuffle mixes the groups: a micro-batch of 8 from 2 groups of 8 then carries
            # both prompts, so the shared-prompt pass runs (and holds the activations of)
            # every prompt in every micro-batch. Kept in generation order (groups contiguous,
            # as TRL's sampler and `splice` leave them), a micro-batch holds whole groups or
            # part of one.
            args = self.args
            if (not self.model.training or not self.qrlib_shared_prompt
                    or args.steps_per_generation != args.gradient_accumulation_steps):
                return super()._prepare_inputs(generation_batch)
            every = args.steps_per_generation * self.num_iterations
            if self._step % every == 0 or self._buffered_inputs is None:
                batch = self._generate_and_score_completions(generation_batch)
                self._buffered_inputs = split_tensor_dict(batch, args.steps_per_generation)
            return self._buffered_inputs[self._step % args.steps_per_generation]

        def _generate(self, *a, **kw):  # type: ignore[override]
            if not self.qrlib_autocast:
                return super()._generate(*a, **kw)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return super()._generate(*a, **kw)

        def _generate_and_score_completions(self, inputs):  # type: ignore[override]
            out = self._qrlib_masked(super()._generate_and_score_completions(inputs))
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
            good = [(0, i) for i in live_groups(out["advantages"], g)]
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
                extra = self._qrlib_masked(super()._generate_and_score_completions(fresh))
                pools.append(extra)
                live = live_groups(extra["advantages"], g)[:need]
                good += [(len(pools) - 1, i) for i in live]
                stats["groups_replaced"] += len(live)
                need -= len(live)
            stats["rounds"] += rounds
            stats["zero_groups_kept"] += need
            chosen = good + dead[:need]
            return splice(pools, chosen, g)

    return QrlibGRPOTrainer


def live_groups(advantages: Any, g: int) -> list[int]:
    """Indices of the groups (runs of ``g`` rows) with some non-zero advantage."""
    a = advantages.reshape(-1, g)
    return [i for i in range(a.shape[0]) if bool((a[i] != 0).any())]


def splice(pools: list[dict[str, Any]], chosen: list[tuple[int, int]], g: int) -> dict[str, Any]:
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
