"""The configuration of one RL run: :class:`TrainConfig`, the algorithm presets and the device
defaults.

* :class:`TrainConfig` -- every field of a training params file, grouped and documented with
  its source (TRL ``GRPOConfig``, transformers ``TrainingArguments``, PEFT ``LoraConfig``,
  the DAPO paper, ACQO App. A.2, DeepRetrieval App. B.2);
* :data:`ALGORITHMS` -- the ``grpo`` and ``dapo`` presets of the loss and clipping fields;
* :func:`load_config` -- a checked :class:`TrainConfig` from a YAML/JSON file or a mapping;
* :func:`resolve_dtype`, :func:`resolve_autocast`, :func:`grad_checkpointing`,
  :func:`cuda_available` -- what ``None`` means for the device-dependent fields.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import qrlib.methods.registry  # noqa: F401  (every paper's prompts, formats, rewards)
from qrlib.core.errors import QrlibError
from qrlib.generation.policy import cpu_has_native_bf16
from qrlib.generation.prompts import as_template

__all__ = ["ALGORITHMS", "TrainConfig", "load_config", "resolve_dtype", "resolve_autocast",
           "grad_checkpointing", "cuda_available", "micro_batch", "CUDA_MICRO_BATCH",
           "CPU_MICRO_TOKENS"]

#: Largest micro-batch (rollouts per forward/backward) chosen on CUDA when none is set.
CUDA_MICRO_BATCH = 16
#: On the CPU, when none is set: the largest micro-batch whose rollouts hold at most this many
#: completion tokens (``micro * max_completion_length``). The log-prob pass keeps a
#: vocabulary-wide row of log-probs per completion token for the backward (151,936 floats
#: for Qwen2.5); measured on notebook 17's think run (16 rollouts of up to 128 tokens), the
#: training process peaked at 15.85 GiB in one pass per step and at 13.07 GiB in two.
CPU_MICRO_TOKENS = 1024

ALGORITHMS: dict[str, dict[str, Any]] = {
    "grpo": {"loss_type": "grpo", "epsilon": 0.2, "epsilon_high": None, "beta": 0.001,
             "scale_rewards": "group"},
    "dapo": {"loss_type": "dapo", "epsilon": 0.2, "epsilon_high": 0.28, "beta": 0.0,
             "scale_rewards": "group"},
}


@dataclass
class TrainConfig:
    """Everything one RL run needs. Unknown keys in a params file are errors.

    A field's source says where its name and meaning come from: a TRL ``GRPOConfig`` /
    ``SFTConfig`` argument, a transformers ``TrainingArguments`` argument, a PEFT
    ``LoraConfig`` argument, or qrlib (for the fields TRL has no equivalent of). Paper
    settings are quoted where the papers give one.

    Parameters:
        > Run and checkpoints

        name (`str`, defaults to `"rl"`):
            Run name. The run writes to ``<run_dir>/rl/<name>`` (:attr:`output_dir`); one
            process at a time holds ``<run_dir>/rl/.locks/<name>``. qrlib.
        run_dir (`str`, defaults to `"runs/dev"`):
            The run folder (a profile's ``run_dir``). qrlib.
        seed (`int`, defaults to `0`):
            Seed of the row subset and shuffling, of ``transformers.set_seed`` and of the TRL
            and SFT trainers. transformers ``TrainingArguments.seed``.
        resume (`bool`, defaults to `True`):
            Resume from the newest *complete* ``checkpoint-N`` of the run, and return the
            saved summary without training when the run already reached ``max_steps``.
            ``False``: train from step 0. qrlib (transformers
            ``Trainer.train(resume_from_checkpoint=...)``).
        save_steps (`int`, defaults to `10`):
            Save a checkpoint every this many steps. transformers ``TrainingArguments``.
        save_total_limit (`int`, defaults to `2`):
            Keep at most this many checkpoints. transformers ``TrainingArguments``.

        > Model

        model (`str`, defaults to `"smollm2"`):
            The policy: an offline model of :mod:`qrlib.generation.policy` (``smollm2``,
            ``qwen2.5-coder-0.5b``) or a hub id / model folder. qrlib.
        dtype (`str` or `None`, defaults to `None`):
            torch dtype of the policy weights. ``None``: ``bfloat16`` on CUDA, ``float32`` on
            the CPU (:func:`resolve_dtype`). qrlib.
        cpu_autocast (`bool` or `None`, defaults to `None`):
            bf16 autocast on the CPU of generation and of the log-prob / loss passes; the
            master weights stay fp32, so the update is fp32. ``None``: on where the CPU
            multiplies bf16 natively (AMX / AVX512-BF16, :func:`resolve_autocast`); never on
            CUDA. ``benchmarks/bench_train.py`` measures 1.8x per step on SmolLM2 with
            ``lora_dropout`` 0 and no gain with dropout on (bf16 dropout masks are slow on
            the CPU). qrlib (``torch.autocast``).
        init_adapter (`str` or `None`, defaults to `None`):
            Folder of a saved LoRA adapter to continue training (the LoRA fields are then
            unused); ``None``: a fresh adapter from the LoRA fields. qrlib (PEFT
            ``PeftModel.from_pretrained``).

        > Data and retrieval

        rows (`str`, defaults to `"queries"`):
            Row source (:mod:`qrlib.data.rows`): ``"queries"`` (the queries of the
            retrieval collection ``dataset``), ``"spider"`` (text-to-SQL rows of the Spider
            train or test databases) or the path of a ``.jsonl`` file of rows. qrlib.
        row_params (`dict[str, Any]`, defaults to `{}`):
            Keyword arguments of the row source, e.g. ``{"test_fraction": 0.3}`` for
            ``spider`` (:func:`qrlib.data.rows.rows_from_spider`). qrlib.
        dataset (`str`, defaults to `"scifact"`):
            Retrieval collection of ``rows: queries`` (:mod:`qrlib.data.datasets`). qrlib.
        split (`str`, defaults to `"train"`):
            Split of the collection, or of Spider's databases (train | test | all). qrlib.
        data_dir (`str` or `None`, defaults to `None`):
            Folder the collection (or Spider) is read from first; ``None``: qrlib's default
            lookup (:mod:`qrlib.data.datasets`). qrlib.
        n_queries (`int` or `None`, defaults to `64`):
            Train on a random subset (``seed``) of this many rows; ``None``: every row. qrlib.
        n_distractors (`int` or `None`, defaults to `None`):
            Corpus cut of ``rows: queries``: the judged documents plus this many others
            (:func:`qrlib.data.datasets.subset`); ``None``: the full corpus. qrlib.
        retriever (`str`, defaults to `"bm25"`):
            The fixed retriever the reward searches with: ``bm25`` | ``bm25-ref`` | ``dense``
            (:func:`qrlib.retrieval.retrievers.build_retriever`). qrlib.
        retriever_params (`dict[str, Any]`, defaults to `{}`):
            Keyword arguments of ``build_retriever`` (k1, b, model, ...). qrlib.

        > Prompt and completion format

        prompt (`str` or `dict[str, str]`, defaults to `"deepretrieval/bm25-think"`):
            A registered prompt (:mod:`qrlib.generation.prompts`) or an inline
            ``{"system": ..., "user": ...}`` template; its ``{field}`` placeholders name
            row columns. qrlib.
        prefill (`str`, defaults to `""`):
            Text the assistant turn starts with, which the model continues, e.g.
            ``'{"query": "'``. A ``{field}`` naming a row column is filled per row,
            JSON-escaped (:func:`qrlib.rl.rows.fill_prefill`), e.g. ``'{"query":
            "{question}%%'``. The reward parses prefill + completion. qrlib.
        fmt (`str` or `None`, defaults to `None`):
            Completion format the reward parses (:mod:`qrlib.generation.parsing`); ``None``:
            the prompt's ``meta["fmt"]``, else ``"deepretrieval"``
            (:attr:`completion_format`). qrlib.

        > Reward

        reward (`str`, defaults to `"deepretrieval_ndcg"`):
            Registered reward (:mod:`qrlib.rl.rewards`) of the
            :class:`~qrlib.rl.env.RewardEnv`. qrlib.
        reward_params (`dict[str, Any]`, defaults to `{}`):
            ``RewardEnv`` keyword arguments (``k``, ``lenient``, ...); ``max_subqueries``
            defaults to the prompt's ``meta``. qrlib.
        expansion (`bool`, defaults to `False`):
            ``RewardEnv`` mode ``"expand"``: search the original query plus the model's
            text; ``False``: ``"rewrite"``, the model's query replaces the original. qrlib.

        > Algorithm and sampling

        algorithm (`str`, defaults to `"grpo"`):
            Preset of ``loss_type``, ``epsilon``, ``epsilon_high``, ``beta`` and
            ``scale_rewards`` (:data:`ALGORITHMS`); a field set explicitly overrides its
            preset. ``"grpo"``: TRL's per-sequence normalised loss, symmetric clipping,
            KL 0.001. ``"dapo"``: DAPO's token-level loss (DAPO Sec. 3.3), clip-higher
            (Sec. 3.1) and no KL term; ACQO App. A.2 trains with DAPO. qrlib.
        prompts_per_step (`int`, defaults to `1`):
            Distinct prompts per optimisation step: one generation batch of
            ``prompts_per_step * num_generations`` rollouts, one optimizer step. qrlib.
        micro_batch_size (`int` or `None`, defaults to `None`):
            Rollouts per forward/backward pass; the step's batch is split into
            ``batch / micro_batch_size`` micro-batches with gradient accumulation (TRL
            ``per_device_train_batch_size`` and ``gradient_accumulation_steps``, with
            ``steps_per_generation`` equal to the latter: one generation per optimizer step).
            It must divide the batch. ``None``: on the CPU the largest divisor of the batch
            whose rollouts hold at most ``CPU_MICRO_TOKENS`` (1,024) completion tokens (the
            whole batch of 16 up to 64-token budgets; 8 at 128 tokens, which took notebook
            17's think run from 15.85 to 13.07 GiB), on CUDA the largest divisor up to 16
            (16 sequences of 256 tokens of a 3B model peaked at 18 GiB on an H100,
            ``tables/gpu-check``). qrlib.
        num_generations (`int`, defaults to `8`):
            Rollouts per prompt (the group). TRL ``GRPOConfig``; ACQO App. A.2: 8.
        temperature (`float`, defaults to `1.0`):
            Rollout sampling temperature. TRL ``GRPOConfig``; DeepRetrieval App. B.2: 0.6,
            ACQO App. A.2: 0.8.
        top_p (`float`, defaults to `1.0`):
            Rollout nucleus sampling. TRL ``GRPOConfig``; ACQO App. A.2: 0.8.
        top_k (`int` or `None`, defaults to `None`):
            Rollout top-k sampling; ``None``: not passed (off). TRL ``GRPOConfig``.
        min_p (`float` or `None`, defaults to `None`):
            Rollout min-p sampling; ``None``: not passed (off). TRL ``GRPOConfig``.
        max_completion_length (`int`, defaults to `48`):
            Tokens per rollout. TRL ``GRPOConfig``; ACQO App. A.2: 256.
        loss_type (`str` or `None`, defaults to `None`):
            ``None``: the ``algorithm`` preset (``"grpo"`` or ``"dapo"``). TRL ``GRPOConfig``.
        epsilon (`float` or `None`, defaults to `None`):
            Lower (and, without ``epsilon_high``, upper) clipping bound; ``None``: the preset
            (0.2). TRL ``GRPOConfig``.
        epsilon_high (`float` or `None`, defaults to `None`):
            Upper clipping bound; ``None``: the preset (``dapo``: 0.28, DAPO Sec. 3.1
            clip-higher; ``grpo``: ``epsilon``). TRL ``GRPOConfig``.
        beta (`float` or `None`, defaults to `None`):
            KL coefficient; ``None``: the preset (``grpo``: 0.001 as DeepRetrieval App. B.2;
            ``dapo``: 0, no reference model). TRL ``GRPOConfig``.
        scale_rewards (`str` or `None`, defaults to `None`):
            Advantage scaling; ``None``: the preset (``"group"``). TRL ``GRPOConfig``.
        dynamic_sampling (`int`, defaults to `0`):
            DAPO Sec. 3.2 dynamic sampling: up to this many extra generation rounds per step
            replace the groups whose rewards are all equal with groups of fresh prompts; 0:
            off. Single-process only. qrlib (:func:`qrlib.rl.trainer.trainer_class`).
        mask_truncated_completions (`bool`, defaults to `True`):
            Rollouts cut off by ``max_completion_length`` get no loss (DAPO Sec. 3.4,
            overlong filtering), so a budget that cuts rollouts off cannot teach the
            shortest valid output whatever it retrieves. A rollout that used every token and does not end at a stop
            string is cut off (:func:`qrlib.rl.steplog.is_truncated`; TRL's own test would
            also drop every rollout that ended at a vLLM stop string); the share is logged
            per step (``truncated`` in ``log.csv``) whether or not it is masked. TRL
            ``GRPOConfig`` (its name; qrlib's mask).

        > vLLM rollouts

        use_vllm (`bool` or `None`, defaults to `None`):
            Rollouts from an in-process vLLM engine (TRL colocate mode; on the CPU with
            qrlib's weight push, :mod:`qrlib.generation.engine`). ``None``: the process
            default (:func:`qrlib.generation.engine.set_backend`, ``"hf"`` unless set).
            ``$QRLIB_ROLLOUTS=hf|vllm`` overrides both. TRL ``GRPOConfig``.
        vllm_gpu_memory_utilization (`float`, defaults to `0.3`):
            CUDA only; the CPU engine's KV cache is ``VLLM_CPU_KVCACHE_SPACE`` GiB (qrlib
            sets 1). TRL ``GRPOConfig``.
        vllm_max_model_length (`int` or `None`, defaults to `None`):
            Prompt + completion tokens the engine accepts. ``None``: the longest training
            prompt plus ``max_completion_length``, rounded up to a multiple of 256 (a Spider
            schema and 512 SQL tokens outgrow a fixed 2,048). TRL ``GRPOConfig``.
        vllm_importance_sampling_correction (`bool`, defaults to `True`):
            Reweight by the learner / sampler probability ratio (bf16 engine vs the policy);
            costs one extra no-grad forward pass per step. TRL ``GRPOConfig``.
        stop (`list[str]`, defaults to `[]`):
            Stop strings of the rollouts, kept in the completion, e.g. ``['"}']``: vLLM
            ``SamplingParams`` through TRL's ``generation_kwargs``, and on the HF path
            transformers' ``stop_strings`` (the tokens after a stop are masked out of the
            loss, :func:`qrlib.rl.trainer.hf_stop_strings`). qrlib.

        > Optimisation

        max_steps (`int`, defaults to `20`):
            Optimisation steps of the RL run. transformers ``TrainingArguments``.
        learning_rate (`float`, defaults to `1e-5`):
            transformers ``TrainingArguments``.
        lr_scheduler_type (`str`, defaults to `"constant"`):
            Learning-rate schedule. ``"constant"`` trains every step at ``learning_rate``;
            ``"linear"`` (TRL's default) decays it to 0 over ``max_steps``, so a short run
            trains mostly below the configured rate. transformers ``TrainingArguments``.
        warmup_steps (`int`, defaults to `0`):
            transformers ``TrainingArguments``.
        max_grad_norm (`float`, defaults to `1.0`):
            Gradient clipping norm. transformers ``TrainingArguments``.
        gradient_checkpointing (`bool` or `None`, defaults to `None`):
            Recompute activations in the backward pass, in both the SFT and the RL trainer
            (:func:`grad_checkpointing`). ``None``: on with CUDA (TRL's default), off on the
            CPU (memory is not the limit for these models, recomputing costs about a fifth
            of a step, and it disables ``shared_prompt_pass``). transformers
            ``TrainingArguments``.
        shared_prompt_pass (`bool`, defaults to `True`):
            The log-prob passes run each group's prompt once and its completions on the
            cached prompt (:mod:`qrlib.rl.sharedprefix`; same values as TRL's pass);
            ``False``: TRL's pass over every prompt + completion. qrlib.

        > LoRA

        lora_r (`int`, defaults to `16`):
            Adapter rank. PEFT ``LoraConfig.r``.
        lora_alpha (`int`, defaults to `32`):
            PEFT ``LoraConfig``.
        lora_dropout (`float`, defaults to `0.0`):
            0 makes the log-probs of a completion deterministic, so the GRPO ratio compares
            the same function (as TRL's ``disable_dropout``; DeepRetrieval and ConvSearch-R1
            train without dropout in verl); on the CPU dropout masks cost about 25 % of a
            step. PEFT ``LoraConfig``.
        lora_target_modules (`str` or `list[str]`, defaults to `"all-linear"`):
            PEFT ``LoraConfig.target_modules``.

        > SFT cold start

        sft_steps (`int`, defaults to `0`):
            Supervised steps before RL that teach the output format (or a real cold start
            from the rows' ``sft_target`` column; :func:`qrlib.rl.sft.sft_warm_start`); 0:
            none. Skipped when the run resumes from a checkpoint. TRL ``SFTTrainer``
            (``max_steps``).
        sft_learning_rate (`float`, defaults to `1e-4`):
            TRL ``SFTConfig.learning_rate``.
    """

    # Field order carries no meaning: a run's saved config.json is compared as a mapping
    # (qrlib.rl.checkpoints.prepare_output). Names, types and defaults do: they are the run's.
    # ---- run and checkpoints
    name: str = "rl"
    run_dir: str = "runs/dev"
    seed: int = 0
    resume: bool = True
    save_steps: int = 10
    save_total_limit: int = 2
    # ---- model
    model: str = "smollm2"
    dtype: str | None = None
    cpu_autocast: bool | None = None
    init_adapter: str | None = None
    # ---- data and retrieval
    rows: str = "queries"
    row_params: dict[str, Any] = field(default_factory=dict)
    dataset: str = "scifact"
    split: str = "train"
    data_dir: str | None = None
    n_queries: int | None = 64
    n_distractors: int | None = None
    retriever: str = "bm25"
    retriever_params: dict[str, Any] = field(default_factory=dict)
    # ---- prompt and completion format
    prompt: str | dict[str, str] = "deepretrieval/bm25-think"
    prefill: str = ""
    fmt: str | None = None
    # ---- reward
    reward: str = "deepretrieval_ndcg"
    reward_params: dict[str, Any] = field(default_factory=dict)
    expansion: bool = False
    # ---- algorithm and sampling
    algorithm: str = "grpo"
    prompts_per_step: int = 1
    num_generations: int = 8
    micro_batch_size: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    min_p: float | None = None
    max_completion_length: int = 48
    loss_type: str | None = None
    epsilon: float | None = None
    epsilon_high: float | None = None
    beta: float | None = None
    scale_rewards: str | None = None
    dynamic_sampling: int = 0
    mask_truncated_completions: bool = True
    # ---- vLLM rollouts
    use_vllm: bool | None = None
    vllm_gpu_memory_utilization: float = 0.3
    vllm_max_model_length: int | None = None
    vllm_importance_sampling_correction: bool = True
    stop: list[str] = field(default_factory=list)
    # ---- optimisation
    max_steps: int = 20
    learning_rate: float = 1e-5
    lr_scheduler_type: str = "constant"
    warmup_steps: int = 0
    max_grad_norm: float = 1.0
    gradient_checkpointing: bool | None = None
    shared_prompt_pass: bool = True
    # ---- LoRA
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: str | list[str] = "all-linear"
    # ---- SFT cold start
    sft_steps: int = 0
    sft_learning_rate: float = 1e-4

    def lora_config(self) -> Any:
        """The PEFT ``LoraConfig`` of the run's adapter, one for the SFT cold start and RL."""
        from peft import LoraConfig

        return LoraConfig(r=self.lora_r, lora_alpha=self.lora_alpha,
                          lora_dropout=self.lora_dropout,
                          target_modules=self.lora_target_modules, task_type="CAUSAL_LM")

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


# --------------------------------------------------------------------------- device defaults
def cuda_available() -> bool:
    """Whether torch sees a CUDA device."""
    import torch

    return torch.cuda.is_available()


def micro_batch(cfg: TrainConfig, cuda: bool) -> tuple[int, int]:
    """(rollouts per forward/backward pass, gradient-accumulation steps) of one optimizer
    step of ``prompts_per_step * num_generations`` rollouts (see ``micro_batch_size``)."""
    batch = cfg.prompts_per_step * cfg.num_generations
    micro = cfg.micro_batch_size
    if micro is None:
        cap = (CUDA_MICRO_BATCH if cuda
               else max(1, CPU_MICRO_TOKENS // max(1, cfg.max_completion_length)))
        micro = max(d for d in range(1, min(batch, cap) + 1) if batch % d == 0)
    if micro < 1 or batch % micro:
        raise QrlibError(f"micro_batch_size {micro} must divide the step's batch of {batch} "
                         f"rollouts (prompts_per_step x num_generations); accepted: the "
                         f"divisors of {batch}")
    return micro, batch // micro


def grad_checkpointing(cfg: TrainConfig) -> bool:
    """Gradient checkpointing of the SFT and RL passes: ``cfg.gradient_checkpointing``, else
    on with CUDA and off on the CPU. One value for both trainers: TRL's SFT default (on) was
    left switched on in the model for the RL stage, which then could not keep the prompt's
    cache for the shared-prompt pass."""
    return (cuda_available() if cfg.gradient_checkpointing is None
            else bool(cfg.gradient_checkpointing))


def resolve_dtype(dtype: str | None) -> str:
    """The policy weights' dtype for ``dtype=None``: bf16 on CUDA, fp32 on CPU.

    Not bf16 weights on CPU: decoding with bf16 weights was far slower here (8 x 48 tokens
    of Qwen2.5-Coder-0.5B: 266 s) than fp32 weights under bf16 autocast, which
    :attr:`TrainConfig.cpu_autocast` turns on for generation and the log-prob passes."""
    if dtype:
        return dtype
    return "bfloat16" if cuda_available() else "float32"


def resolve_autocast(cfg: "TrainConfig") -> bool:
    """Whether the log-prob/loss passes run under CPU bf16 autocast (see ``cpu_autocast``)."""
    if cuda_available():
        return False

    return cpu_has_native_bf16() if cfg.cpu_autocast is None else bool(cfg.cpu_autocast)
