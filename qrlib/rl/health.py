"""Training health as data: per step, what the rollouts were, and whether
a run collapsed onto copying the query or echoing its prompt.

A run's ``log.csv`` (:class:`qrlib.rl.steplog.StepLogger`) holds TRL's metrics and
qrlib's per-batch shares; :func:`health_table` takes the columns a reader checks first,

* ``reward``, ``format_valid``, ``truncated`` (cut off at the budget), ``zero_variance``
  (TRL's ``frac_reward_zero_std``: groups with no advantage signal), ``kl``, ``entropy``;
* ``copy``: share of rollouts that search with nothing but the input query (every query of
  the output equals it after :func:`qrlib.rl.rewards.normalise_query`, SAGE Eq. 3's test;
  :func:`qrlib.rl.steplog.copies_query`: ACQO's "question + sub-queries" is not a copy);
* ``echo``: share of rollouts whose reasoning or query equals one of the prompt's own
  examples or placeholders (:func:`template_examples`), the failure a copyable template
  invites,

and :func:`collapse` reads the last quarter of it: a run collapsed when its copy or echo
share there is above ``threshold`` (0.9). :func:`write_health` writes ``health.csv``
beside ``log.csv``. Pure functions but the two file helpers.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError

__all__ = ["HEALTH_COLUMNS", "template_examples", "echo_of", "health_table", "collapse",
           "collapse_line", "health_summary", "write_health", "read_health", "logs_of",
           "health_report"]

HEALTH_COLUMNS = ("step", "reward", "format_valid", "truncated", "zero_variance", "copy",
                  "echo", "kl", "entropy")
HEALTH_FILE = "health.csv"
_SENTINEL = "QRLIBSENTINELQUERY"


def _norm(text: str) -> str:
    from qrlib.rl.rewards import normalise_query

    return normalise_query(text)


def template_examples(prompt: Any) -> frozenset[str]:
    """Normalised texts a rollout could copy from the prompt itself: the content of every
    ``<think>`` block and every ``"query": "..."`` value (and its ``%%``-separated parts,
    ACQO's sub-queries) in its system and user messages: worked examples and layout
    placeholders such as ``<think> your reasoning </think>``; the input query left out."""
    import re

    from qrlib.generation.parsing import THINK_CLOSE, THINK_OPEN
    from qrlib.generation.prompts import as_template

    t = as_template(prompt)
    text = "\n".join(m["content"] for m in t.messages(**{f: _SENTINEL for f in t.fields}))
    found: set[str] = set()
    pos = 0
    while (i := text.find(THINK_OPEN, pos)) >= 0:
        j = text.find(THINK_CLOSE, i + len(THINK_OPEN))
        if j < 0:
            break
        found.add(text[i + len(THINK_OPEN):j])
        pos = j + len(THINK_CLOSE)
    for m in re.finditer(r'"query"\s*:\s*"([^"\n]*)"', text):
        found.add(m.group(1))
        found.update(m.group(1).split("%%"))
    return frozenset(n for n in (_norm(x) for x in found) if n and _SENTINEL.lower() not in n)


def echo_of(parsed: Any, examples: frozenset[str]) -> bool:
    """Whether a parsed rollout (:class:`qrlib.generation.parsing.ParseResult`) repeats a
    prompt example: its reasoning or one of its queries equals one after normalisation."""
    if not examples:
        return False
    texts = list(parsed.queries) + ([parsed.think] if getattr(parsed, "think", None) else [])
    return any(_norm(t) in examples for t in texts)


def health_table(log: Any) -> Any:
    """:data:`HEALTH_COLUMNS` of a run's ``log.csv`` frame (a column the run did not log is
    NaN; ``copy`` falls back to ``1 - modified`` for logs written before it existed)."""
    import numpy as np
    import pandas as pd

    if "step" not in getattr(log, "columns", ()):
        raise QrlibError("health_table: not a training log (no 'step' column)")
    out = pd.DataFrame({"step": log["step"].astype(int)})
    src = {"zero_variance": "frac_reward_zero_std"}
    for c in HEALTH_COLUMNS[1:]:
        col = src.get(c, c)
        out[c] = pd.to_numeric(log[col], errors="coerce") if col in log.columns else np.nan
    if out["copy"].isna().all() and "modified" in log.columns:
        out["copy"] = 1.0 - pd.to_numeric(log["modified"], errors="coerce")
    return out.reset_index(drop=True)


def collapse(health: Any, threshold: float = 0.9) -> dict[str, Any]:
    """The last quarter's mean copy and echo shares and whether either is above
    ``threshold`` (``collapsed``; ``why`` names which)."""
    import math

    n = len(health)
    if n == 0:
        raise QrlibError("collapse: the run logged no step")
    tail = health.iloc[n - max(1, n // 4):]
    out: dict[str, Any] = {"steps": n, "last_quarter_steps": len(tail)}
    why = []
    for c in ("copy", "echo", "truncated", "zero_variance", "format_valid"):
        v = float(tail[c].mean()) if c in tail and tail[c].notna().any() else math.nan
        out[c] = v
        if c in ("copy", "echo") and v > threshold:
            why.append(f"{c} share {v:.2f}")
    out["collapsed"] = bool(why)
    out["why"] = ", ".join(why)
    return out


def collapse_line(name: str, health: Any, threshold: float = 0.9) -> str:
    """One sentence: whether run ``name`` collapsed, from :func:`collapse`."""
    c = collapse(health, threshold)
    shares = ", ".join(f"{k} {c[k]:.2f}" for k in ("copy", "echo", "truncated", "zero_variance")
                       if c[k] == c[k])
    head = (f"{name}: COLLAPSED ({c['why']} above {threshold} in the last "
            f"{c['last_quarter_steps']} steps)" if c["collapsed"] else
            f"{name}: no collapse (last {c['last_quarter_steps']} of {c['steps']} steps)")
    return f"{head}; last-quarter shares: {shares}"


def health_summary(frame: Any, threshold: float = 0.9) -> Any:
    """One row per run of a :func:`read_health` frame: its last quarter's shares
    (:func:`collapse`) and the verdict (``collapsed``, ``why``)."""
    import pandas as pd

    return pd.DataFrame([{"run": run, **collapse(h, threshold)}
                         for run, h in frame.groupby("run", sort=False)])


def write_health(run_folder: str | os.PathLike) -> Path:
    """``health.csv`` beside the run's ``log.csv`` (rewritten from it)."""
    import pandas as pd

    from qrlib.core.io import atomic_write

    folder = Path(run_folder)
    log = folder / "log.csv"
    if not log.exists():
        raise QrlibError(f"{log} is missing: the run logged no step")
    h = health_table(pd.read_csv(log, dtype={"qids": str}))
    path = folder / HEALTH_FILE
    atomic_write(path, h.to_csv(index=False))
    return path


def read_health(logs: Mapping[str, str | os.PathLike] | Iterable[str | os.PathLike]) -> Any:
    """One frame of :func:`health_table` rows for several runs (``run`` column), from their
    ``log.csv`` paths (a mapping name -> path, or paths named by their folder)."""
    import pandas as pd

    items: Sequence[tuple[str, Any]] = (list(logs.items()) if isinstance(logs, Mapping)
                                        else [(Path(p).parent.name, p) for p in logs])
    frames = [health_table(pd.read_csv(p, dtype={"qids": str})).assign(run=name)
              for name, p in items]
    if not frames:
        raise QrlibError("read_health: no run logs given")
    return pd.concat(frames, ignore_index=True)


def logs_of(summaries: Mapping[Any, Mapping[str, Any]]) -> dict[str, str]:
    """``{run label: log.csv path}`` of :func:`qrlib.rl.train.train` summaries keyed by a
    label or a tuple of labels (joined by " / ")."""
    return {(" / ".join(map(str, k)) if isinstance(k, tuple) else str(k)): str(v["log"])
            for k, v in summaries.items()}


def health_report(summaries: Mapping[Any, Mapping[str, Any]], name: str, *,
                  tables_dir: str | os.PathLike, figures_dir: str | os.PathLike,
                  profile: str, setting: str | None = None,
                  threshold: float = 0.9) -> tuple[Any, list[str]]:
    """A notebook's training-health section in one call: the per-run verdicts saved as table
    ``<name>`` (:func:`health_summary`), the per-step figure ``<name>``
    (:func:`qrlib.plots.health_figure`), and one :func:`collapse_line` per run. Returns
    ``(table, lines)``; with no run, nothing is saved and the one line says so."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from qrlib import plots
    from qrlib.core.io import save_table

    if not summaries:
        return pd.DataFrame(), ["no training run in this profile: no health to show"]
    frame = read_health(logs_of(summaries))
    table = health_summary(frame, threshold)
    save_table(table, name, tables_dir,
               caption=f"Training health of each run: last-quarter means of the copy, echo, "
                       f"truncated, zero-variance and format-valid shares; collapsed = copy or "
                       f"echo share above {threshold} (qrlib.rl.health) [profile: {profile}]")
    fig = plots.health_figure(frame)
    plots.save_figure(fig, name, figures_dir, profile=profile, setting=setting,
                      caption="Training health per step (running means): reward, format-valid "
                              "and truncated shares, copy and echo shares (0.9 dotted), groups "
                              "with zero reward spread")
    plt.close(fig)
    lines = [collapse_line(run, h, threshold) for run, h in frame.groupby("run", sort=False)]
    return table, lines
