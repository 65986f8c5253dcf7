"""One decoding contract per trained rewriter.

A trained row must measure the method, not a difference between how its rollouts were
decoded in training and how its test queries are decoded: the same prompt, prefill, stop
strings, token budget and parser. :class:`DecodingContract` is those five, taken from the
run's :class:`~qrlib.rl.config.TrainConfig`; :func:`qrlib.rl.train.train` writes it beside
the adapter (``decoding.json``), and :func:`qrlib.generation.rewrite.rewrite_queries`
decodes with it when given the adapter folder (``contract=``), refusing an explicit
setting that differs from it.

Measured before this existed (``tables/cpu/05_test_results.md``): training stopped rollouts
at ``</answer>``, the test decoded without a stop string within 24 tokens, and the trained
dense rewriter was well-formed on 0.000 of 300 test claims against 0.99-1.00 of its
training rollouts.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.core.io import atomic_write

__all__ = ["DecodingContract", "CONTRACT_FILE", "decoding_settings"]

CONTRACT_FILE = "decoding.json"


@dataclass(frozen=True)
class DecodingContract:
    """How a rewriter's completions are produced and read.

    ``prompt``: a registered prompt name or an inline ``{system, user}`` template;
    ``prefill``: the text the assistant turn starts with; ``stop``: strings that end a
    completion (kept in it); ``max_new_tokens``: the token budget; ``fmt``: the completion
    format the parser reads (:mod:`qrlib.generation.parsing`)."""

    prompt: Any
    prefill: str = ""
    stop: tuple[str, ...] = ()
    max_new_tokens: int = 32
    fmt: str = "deepretrieval-nothink"

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop", tuple(self.stop or ()))
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise QrlibError(f"decoding contract: max_new_tokens must be an integer >= 1, "
                             f"got {self.max_new_tokens!r}")

    @classmethod
    def of(cls, cfg: Any) -> "DecodingContract":
        """The contract of a training run (``prompt``, ``prefill``, ``stop``,
        ``max_completion_length``, ``completion_format`` of a ``TrainConfig``)."""
        return cls(prompt=cfg.prompt, prefill=cfg.prefill, stop=tuple(cfg.stop),
                   max_new_tokens=int(cfg.max_completion_length), fmt=cfg.completion_format)

    def save(self, folder: str | os.PathLike) -> Path:
        """Write ``decoding.json`` into ``folder`` (an adapter folder)."""
        path = Path(folder) / CONTRACT_FILE
        atomic_write(path, json.dumps(asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, folder: str | os.PathLike) -> "DecodingContract":
        """The contract saved in ``folder`` (an adapter a training run wrote)."""
        path = Path(folder) / CONTRACT_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise QrlibError(f"{path} is missing: the adapter was not saved by "
                             f"qrlib.rl.train.train (which writes its decoding contract); "
                             f"pass a DecodingContract instead") from None
        except ValueError as exc:
            raise QrlibError(f"{path} is not valid JSON ({exc})") from None
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise QrlibError(f"{path}: unknown field(s) {unknown}; accepted: {sorted(known)}")
        return cls(**data)

    @classmethod
    def resolve(cls, contract: "DecodingContract | str | os.PathLike") -> "DecodingContract":
        """A contract, or the one saved in an adapter folder."""
        return contract if isinstance(contract, cls) else cls.load(contract)

    def check(self, **used: Any) -> None:
        """Raise a one-line error naming every setting in ``used`` (``prompt=``,
        ``prefill=``, ``stop=``, ``max_new_tokens=``, ``fmt=``; ``None`` = not given)
        that differs from the contract."""
        diff = []
        for key, value in used.items():
            if value is None:
                continue
            want = getattr(self, key)
            got = tuple(value) if key == "stop" else value
            if got != want:
                diff.append(f"{key} {got!r} (trained with {want!r})")
        if diff:
            raise QrlibError("test decoding differs from the run's training decoding: "
                             + "; ".join(diff) + "; drop the argument or retrain")


def decoding_settings(contract: Any, *, prompt: Any = None, fmt: str | None = None,
                      prefill: str | None = None, max_new_tokens: int | None = None,
                      stop: Any = None) -> dict[str, Any]:
    """The five settings a test decoding uses: the contract's (a
    :class:`DecodingContract` or an adapter folder) when one is given, refusing an explicit
    argument that differs from it (:meth:`DecodingContract.check`); else the arguments as
    given (``None`` where not given). Keys: ``prompt, fmt, prefill, max_new_tokens, stop``
    (``stop`` a list)."""
    if contract is None:
        return {"prompt": prompt, "fmt": fmt, "prefill": prefill,
                "max_new_tokens": max_new_tokens, "stop": list(stop or [])}
    c = DecodingContract.resolve(contract)
    c.check(prompt=prompt, fmt=fmt, prefill=prefill, max_new_tokens=max_new_tokens, stop=stop)
    return {"prompt": c.prompt, "fmt": c.fmt, "prefill": c.prefill,
            "max_new_tokens": c.max_new_tokens, "stop": list(c.stop)}
