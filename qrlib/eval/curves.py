"""Training curves from the trainer's per-step logs (``log.csv`` of :func:`qrlib.rl.train.train`).

:func:`reward_and_length` draws, per run, the running mean of the step's mean reward and of
its mean completion length (the two panels SAGE App. A.4 and DeepRetrieval Fig. 4 show),
and :func:`scale_setting` writes the "from the logs" part of a figure's setting line
(:func:`qrlib.eval.scale.log_scale`), so figures state the scale the runs reached.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qrlib import plots
from qrlib.eval.scale import fmt_scale, log_scale


def reward_and_length(logs: Mapping[str, Any], *, reward: str = "mean reward") -> Any:
    """A two-panel figure: reward and completion length per GRPO step (running mean over a
    quarter of each run), one colour per run; ``logs``: label -> the run's log frame."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for i, (label, lg) in enumerate(logs.items()):
        w = max(1, len(lg) // 4)
        axes[0].plot(lg.step, lg.reward.rolling(w, min_periods=1).mean(), color=f"C{i}",
                     label=label)
        axes[1].plot(lg.step, lg.completion_length.rolling(w, min_periods=1).mean(),
                     color=f"C{i}")
    axes[0].set(title=f"{reward} (running mean)", xlabel="GRPO step", ylabel="reward")
    axes[1].set(title="completion length (running mean)", xlabel="GRPO step", ylabel="tokens")
    fig.tight_layout()
    plots.legend_outside(fig, *axes[0].get_legend_handles_labels(), title="run")
    return fig


def scale_setting(logs: Mapping[str, Any]) -> str:
    """``"label: 60 RL steps, ...; label: ..."``: each run's scale read from its log."""
    return "; ".join(f"{label} {fmt_scale(log_scale(lg))}" for label, lg in logs.items())
