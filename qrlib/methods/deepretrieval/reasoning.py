"""Reasoning length and query length (DeepRetrieval Fig. 4, App. D.1), read from completions.

Fig. 4 follows, over RL steps, how long the ``<think>`` block is and how long the generated
query is, with and without reasoning. Our step log keeps the completion length in tokens
only, so both lengths are read back from the completions the trainer logs each step
(``samples.jsonl``, a few rollouts per step) and from the greedy test rewrites:

* reasoning words: the words before the first ``</think>`` (the ``<think>`` tag may be in
  the prompt's prefill); an unclosed block counts up to ``<answer>`` or the end, since a
  truncated chain is still reasoning the model spent tokens on; 0 without a think block;
* query words: the words of the query the lenient parser recovers (as the reward does);
  missing (NaN) when no query can be read;
* echo: whether the chain is the prompt's own example chain (the text its layout shows
  between ``<think>`` and ``</think>``, e.g. "your reasoning"), compared case- and
  whitespace-insensitively: a short chain can be concise reasoning or a copied template,
  and only this tells them apart. NaN when no example chain is given.

All scans are single passes over the text (``str.find``), so hostile completions stay
linear.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.generation.parsing import THINK_CLOSE, THINK_OPEN, parse_completion

__all__ = ["reasoning_text", "reasoning_words", "layout_chain", "query_words", "lengths", "mean_lengths", "sample_lengths",
           "length_curves", "early_late", "reasoning_figure"]

ANSWER_OPEN = "<answer>"


def reasoning_text(text: str) -> str:
    """The reasoning chain of one completion (see the module docstring); "" without one."""
    close = text.find(THINK_CLOSE)
    opened = text.find(THINK_OPEN)
    if close >= 0:
        start = opened + len(THINK_OPEN) if 0 <= opened < close else 0
        return text[start:close]
    if opened < 0:
        return ""
    start = opened + len(THINK_OPEN)
    end = text.find(ANSWER_OPEN, start)
    return text[start:end if end >= 0 else len(text)]


def reasoning_words(text: str) -> int:
    """Words of the reasoning chain of one completion."""
    return len(reasoning_text(text).split())


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def layout_chain(prompt_text: str) -> str:
    """The example chain a prompt's layout shows: the text between its last ``<think>`` and
    the ``</think>`` after it ("" when the prompt shows none)."""
    opened = prompt_text.rfind(THINK_OPEN)
    if opened < 0:
        return ""
    start = opened + len(THINK_OPEN)
    close = prompt_text.find(THINK_CLOSE, start)
    return prompt_text[start:close].strip() if close >= 0 else ""


def query_words(text: str, fmt: str) -> float:
    """Words of the query read from ``text`` in format ``fmt`` (lenient), NaN when none."""
    res = parse_completion(text, fmt, lenient=True,
                           think_prefilled=THINK_CLOSE in text and THINK_OPEN not in text)
    return float(len(res.queries[0].split())) if res.queries else math.nan


def lengths(text: str, fmt: str, example: str = "") -> dict[str, float]:
    """``{"reasoning words", "query words", "echo"}`` of one completion; ``example``: the
    prompt's example chain (:func:`layout_chain`), echo NaN when empty."""
    if not isinstance(text, str):
        raise QrlibError(f"a completion must be a string, got {type(text).__name__}")
    chain = reasoning_text(text)
    echo = float(_norm(chain) == _norm(example)) if example.strip() else math.nan
    return {"reasoning words": float(len(chain.split())), "query words": query_words(text, fmt),
            "echo": echo}


def sample_lengths(path: str | os.PathLike, fmt: str, example: str = "") -> Any:
    """One row per logged rollout of a run's ``samples.jsonl`` (step, reward, lengths,
    echo of ``example``)."""
    import pandas as pd

    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                s = json.loads(line)
                rows.append({"step": int(s["step"]), "reward": float(s["reward"]),
                             **lengths(s["completion"], fmt, example)})
            except (ValueError, KeyError, TypeError) as exc:
                raise QrlibError(f"{path}:{i}: not a sample line with step, reward and "
                                 f"completion ({type(exc).__name__})") from None
    if not rows:
        raise QrlibError(f"{path} holds no samples")
    return pd.DataFrame(rows)


def length_curves(samples: Any) -> Any:
    """Per step: mean reasoning words, mean query words (over the samples with a query), the
    share of chains echoing the prompt's example ("echo share") and the number of samples,
    from :func:`sample_lengths`."""
    g = samples.groupby("step")
    return g.agg(**{"reasoning words": ("reasoning words", "mean"),
                    "query words": ("query words", "mean"),
                    "echo share": ("echo", "mean"),
                    "samples": ("step", "size")}).reset_index()


def early_late(log: Any, curves: Any) -> dict[str, float]:
    """Mean training reward (step log) and reasoning / query words (:func:`length_curves`)
    over the first and the last quarter of the steps (at least one step each):
    ``{"reward early", "reward late", "reasoning words early", ..., "echo share late"}``."""
    steps = sorted(log.step)
    if not steps:
        raise QrlibError("early_late needs a step log with at least one step")
    q = max(1, len(steps) // 4)
    parts = {"early": steps[:q], "late": steps[-q:]}
    out = {}
    for col, frame in (("reward", log), ("reasoning words", curves), ("query words", curves),
                       ("echo share", curves)):
        for when, keep in parts.items():
            out[f"{col} {when}"] = float(frame[frame.step.isin(keep)][col].mean())
    return out


def reasoning_figure(runs: Mapping[str, tuple[Any, Any]], *, window: int | None = None) -> Any:
    """Fig. 4's three panels per run: training reward (from the step log), reasoning words
    and query words (from :func:`length_curves`), running means over ``window`` steps (a
    quarter of the run when None). ``runs``: label -> (step log, length curves)."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    for i, (label, (log, cur)) in enumerate(runs.items()):
        w = window or max(1, len(log) // 4)
        axes[0].plot(log.step, log.reward.rolling(w, min_periods=1).mean(), color=f"C{i}",
                     label=label)
        for ax, col in zip(axes[1:], ("reasoning words", "query words")):
            ax.plot(cur.step, cur[col].rolling(w, min_periods=1).mean(), color=f"C{i}")
    for ax, title in zip(axes, ("training reward", "reasoning length", "query length")):
        ax.set(title=f"{title} (running mean)", xlabel="GRPO step")
    axes[0].set_ylabel("reward")
    axes[1].set_ylabel("words in <think>")
    axes[2].set_ylabel("words in the query")
    fig.tight_layout()
    plots.legend_outside(fig, *axes[0].get_legend_handles_labels(), title="run")
    return fig


def mean_lengths(texts: Iterable[str], fmt: str, *, prefill: str = "",
                 example: str = "") -> dict[str, float]:
    """Mean reasoning and query words over completions (query words over those with one) and
    the share echoing ``example`` (NaN without one); ``prefill``: the answer's start given
    in the prompt (e.g. ``<think>``), which a generated completion does not repeat."""
    rows = [lengths(prefill + t, fmt, example) for t in texts]
    if not rows:
        raise QrlibError("mean_lengths needs at least one completion")
    q = [r["query words"] for r in rows if not math.isnan(r["query words"])]
    return {"reasoning words": sum(r["reasoning words"] for r in rows) / len(rows),
            "query words": sum(q) / len(q) if q else math.nan,
            "echo share": sum(r["echo"] for r in rows) / len(rows)}
