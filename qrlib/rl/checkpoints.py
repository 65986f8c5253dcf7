"""Checkpoints and run folders of an RL run: which checkpoint to resume from, whether a
run folder holds this run, and whether the run is already finished.

* :data:`COMPLETE_MARKER` and :class:`CheckpointMarker` -- the file a transformers callback
  writes into ``checkpoint-N`` once the Trainer has saved it;
* :func:`checkpoint_ok` and :func:`last_checkpoint` -- the newest *complete* checkpoint
  (one a kill cut short is skipped, or quarantined);
* :func:`fingerprint` -- a short hash of any JSON-able value (the training rows);
* :func:`prepare_output` -- moves aside a run folder that holds another run's config;
* :func:`finished` -- the saved summary of a run that already reached ``max_steps``.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from qrlib.rl.config import TrainConfig
from qrlib.rl.steplog import trainer_callback_base

__all__ = ["COMPLETE_MARKER", "checkpoint_ok", "last_checkpoint", "CheckpointMarker",
           "fingerprint", "prepare_output", "finished"]

COMPLETE_MARKER = ".qrlib-complete"


def checkpoint_ok(ck: Path) -> tuple[bool, str]:
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
        ok, why = checkpoint_ok(ck)
        if ok:
            if verbose:
                print(f"[qrlib.rl.train] resuming from {ck.name} ({why})")
            return str(ck)
        print(f"[qrlib.rl.train] skipping {ck.name}: incomplete ({why})")
        if quarantine:
            os.replace(ck, d / f"incomplete-{ck.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    return None


class CheckpointMarker(trainer_callback_base()):  # type: ignore[misc]
    """Write ``checkpoint-N/.qrlib-complete`` once the Trainer has saved checkpoint N."""

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        ck = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if ck.is_dir() and state.is_world_process_zero:
            (ck / COMPLETE_MARKER).write_text(str(state.global_step))


# --------------------------------------------------------------------------- run folder
def fingerprint(obj: Any) -> str:
    """16 hex digits of the SHA-256 of ``obj`` as JSON with sorted keys."""
    import hashlib

    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


#: Config fields a run may change and stay the same run (its length and checkpoint cadence).
RUN_LENGTH_FIELDS = frozenset({"max_steps", "resume", "save_steps", "save_total_limit"})


def prepare_output(cfg: TrainConfig, current: dict[str, Any]) -> None:
    """Move aside a run folder holding another run (anything but the step budget and
    checkpoint cadence differs, including the rows and the reward environment)."""
    out = cfg.output_dir
    if (out / "config.json").exists():
        try:
            saved = json.loads((out / "config.json").read_text())
        except ValueError:
            saved = {}
        ignore = RUN_LENGTH_FIELDS
        if {k: v for k, v in saved.items() if k not in ignore} != \
                {k: v for k, v in current.items() if k not in ignore}:
            diff = sorted(k for k in set(saved) | set(current) if k not in ignore
                          and saved.get(k) != current.get(k))
            stale = out.with_name(f"{out.name}.stale-{time.strftime('%Y%m%d-%H%M%S')}")
            print(f"[qrlib.rl.train] {out} holds a run with another config (differs in "
                  f"{diff[:6]}); moved to {stale.name}")
            os.replace(out, stale)
    out.mkdir(parents=True, exist_ok=True)


def finished(cfg: TrainConfig) -> dict[str, Any] | None:
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
