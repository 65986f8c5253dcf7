"""The optional SFT cold start of an RL run (TRL ``SFTTrainer``, ``sft_steps > 0``):
:func:`sft_warm_start` teaches the output format, or a real cold start from the rows'
``sft_target`` column, before the first GRPO step.
"""
from __future__ import annotations

from typing import Any, Sequence

from qrlib.core.errors import QrlibError
from qrlib.generation.contract import DecodingContract
from qrlib.generation.parsing import sft_target
from qrlib.generation.prompts import as_template, render_prompt
from qrlib.rl.config import TrainConfig, cuda_available, grad_checkpointing
from qrlib.rl.rows import fill_prefill
from qrlib.rl.steplog import quiet_progress

__all__ = ["sft_warm_start"]


def sft_warm_start(cfg: TrainConfig, model: Any, tok: Any, rows: Sequence[dict[str, Any]],
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
                     use_cpu=not cuda_available(), bf16=cuda_available(),
                     completion_only_loss=True, disable_tqdm=True,
                     gradient_checkpointing=grad_checkpointing(cfg))
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(out),
                         processing_class=tok, peft_config=peft_config)
    quiet_progress(trainer)
    trainer.train()
    trainer.save_model(str(cfg.output_dir / "sft" / "adapter"))
    tok.save_pretrained(str(cfg.output_dir / "sft" / "adapter"))
    DecodingContract.of(cfg).save(cfg.output_dir / "sft" / "adapter")  # its test decoding
    return trainer.model
