"""The command line of the trainer: ``python -m qrlib.rl.train --config FILE [--set
key=value ...]`` (also under ``accelerate launch ... -m qrlib.rl.train``).

:func:`main` parses the arguments, loads the :class:`~qrlib.rl.config.TrainConfig` and
hands it to the training function it is given; :func:`qrlib.rl.train.main` gives it
:func:`qrlib.rl.train.train` (passed in, so this module does not import the trainer that
imports it).
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Any, Callable

from qrlib.core.errors import QrlibError
from qrlib.rl.config import TrainConfig, load_config

__all__ = ["DESCRIPTION", "main"]

DESCRIPTION = "RL training of query rewriters with TRL's ``GRPOTrainer`` and a PEFT LoRA adapter."


def main(argv: list[str] | None = None, *,
         run: Callable[[TrainConfig], dict[str, Any]]) -> int:
    """``python -m qrlib.rl.train --config FILE [--set key=value ...]``: the config, with the
    overrides, trained by ``run``; prints its summary as JSON."""
    p = argparse.ArgumentParser(prog="python -m qrlib.rl.train", description=DESCRIPTION)
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
    summary = run(load_config(a.config, **overrides))
    print(json.dumps(summary, indent=2))
    return 0
