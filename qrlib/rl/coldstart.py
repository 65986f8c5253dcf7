"""RL after an SFT cold start, as two steps that fit in CPU memory on long prompts.

``train(cfg)`` with ``sft_steps > 0`` runs the SFT cold start and the GRPO run in one
call, with one ``gradient_checkpointing`` setting for both. On prompts that carry a whole
database schema (DeepRetrieval's SQL task, notebook 13) the SFT pass at batch 4 without
checkpointing went from 14 to over 24 GiB within one step and was killed on the 23 GiB
machine, while the GRPO pass fits without checkpointing (and needs it off to keep the
shared-prompt log-prob pass). :func:`rl_after_sft` therefore runs

1. the SFT (:func:`qrlib.rl.sft.sft_warm_start`, the same rows, steps, learning rate and
   LoRA shape) with gradient checkpointing on, saved to ``<run_dir>/rl/<name>-sft/sft/adapter``;
2. :func:`qrlib.generation.engine` and heap released (:func:`qrlib.rl.release.release_memory`);
3. the GRPO run from that adapter (``init_adapter``, ``sft_steps=0``) with ``cfg``'s own
   checkpointing setting.

The maths is that of ``train(cfg)`` with ``sft_steps > 0`` (the GRPO run continues the
SFT's LoRA weights); only the activation memory of the SFT pass and the random stream
differ.
"""
from __future__ import annotations

import dataclasses
import json
import time
from typing import Any, Sequence

from qrlib.core.errors import QrlibError
from qrlib.core.io import save_json
from qrlib.generation.contract import CONTRACT_FILE, DecodingContract
from qrlib.rl.checkpoints import RUN_LENGTH_FIELDS, fingerprint
from qrlib.rl.config import TrainConfig, resolve_dtype
from qrlib.rl.release import release_memory

__all__ = ["sft_adapter", "rl_after_sft"]


def sft_adapter(cfg: TrainConfig, rows: Sequence[dict[str, Any]]) -> str:
    """The SFT cold start of ``cfg`` (``sft_steps`` steps on the rows' ``sft_target``) with
    gradient checkpointing on; reuses a saved adapter trained with the same settings and
    rows. Returns the adapter folder."""
    from transformers import set_seed

    from qrlib.generation.policy import load_policy
    from qrlib.rl.sft import sft_warm_start

    sft_cfg = dataclasses.replace(cfg, name=f"{cfg.name}-sft", gradient_checkpointing=True)
    out = sft_cfg.output_dir / "sft" / "adapter"
    # the reuse key is the whole config but the RL run's length and checkpoint cadence (as
    # qrlib.rl.checkpoints.prepare_output): a field it left out once let a changed run reuse
    # an SFT adapter trained for another
    settings = {k: str(v) for k, v in dataclasses.asdict(cfg).items()
                if k not in RUN_LENGTH_FIELDS}
    settings["rows_fingerprint"] = fingerprint(sorted(rows, key=lambda r: r["qid"]))
    marker = sft_cfg.output_dir / "sft_settings.json"
    if (out / "adapter_config.json").exists() and marker.exists() and \
            json.loads(marker.read_text()) == settings:
        if not (out / CONTRACT_FILE).exists():  # an adapter saved before contracts existed
            DecodingContract.of(sft_cfg).save(out)
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(marker.stat().st_mtime))
        print(f"[qrlib.rl.coldstart] {sft_cfg.name}: SFT adapter trained on {when} with these "
              f"settings ({cfg.sft_steps} steps); reused")
        return str(out)
    marker.unlink(missing_ok=True)
    set_seed(cfg.seed)
    model, tok = load_policy(cfg.model, dtype=resolve_dtype(cfg.dtype), device="cpu")
    sft_warm_start(sft_cfg, model, tok, [dict(r) for r in rows], cfg.lora_config())
    del model, tok
    save_json(settings, marker)  # written last: an interrupted SFT is redone
    return str(out)


def rl_after_sft(cfg: TrainConfig, *, env: Any, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """SFT (checkpointed, :func:`sft_adapter`), memory released, then ``train`` from the SFT
    adapter with ``sft_steps=0``. The summary is ``train``'s, with ``sft_adapter`` and
    ``sft_steps`` set."""
    from qrlib.rl.train import train

    if cfg.sft_steps <= 0:
        raise QrlibError(f"rl_after_sft needs sft_steps > 0 (got {cfg.sft_steps})")
    if cfg.init_adapter:
        raise QrlibError("rl_after_sft starts from the base policy; init_adapter must be None "
                         f"(got {cfg.init_adapter!r})")
    adapter = sft_adapter(cfg, rows)
    release_memory()
    summary = train(dataclasses.replace(cfg, sft_steps=0, init_adapter=adapter),
                    env=env, rows=rows)
    return {**summary, "sft_adapter": adapter, "sft_steps": cfg.sft_steps}
