"""Figure helpers (qrlib.plots): the stamp sits below everything and never widens the
saved image; the per-query scatter counts what it shows."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.image as mpimg  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from qrlib import plots  # noqa: E402

LONG = ("Qwen2.5-Coder-0.5B, per run: 60-60 steps taken, 118-134 distinct train claims seen, "
        "2x8 rollouts/step, SciFact and NFCorpus test splits, BM25 and MiniLM dense, " * 3)


def _figure(legend_below: bool = False):
    fig, axes = plt.subplots(1, 2, figsize=(6, 3))
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="a")
        ax.set(xlabel="step", ylabel="reward")
    if legend_below:
        plots.legend_outside(fig, *axes[0].get_legend_handles_labels(), where="below")
    fig.tight_layout()
    return fig


def _stamp_of(fig):
    return next(t for t in fig.texts if t.get_gid() == plots.STAMP_GID)


def test_the_stamp_sits_below_the_axes_and_the_legend(tmp_path):
    for legend_below in (False, True):
        fig = _figure(legend_below)
        plots.save_figure(fig, "f", tmp_path, caption="c", profile="cpu", setting=LONG)
        r = fig.canvas.get_renderer()
        top = _stamp_of(fig).get_window_extent(r).y1
        lowest = min([ax.get_tightbbox(r).y0 for ax in fig.axes] +
                     [lg.get_window_extent(r).y0 for lg in fig.legends])
        assert top <= lowest, (legend_below, top, lowest)
        plt.close(fig)


def test_a_long_stamp_does_not_widen_the_saved_figure(tmp_path):
    plain = _figure()
    plain.savefig(tmp_path / "plain.png", dpi=plots.DPI, bbox_inches="tight")
    width = mpimg.imread(tmp_path / "plain.png").shape[1]
    fig = _figure()
    path = plots.save_figure(fig, "stamped", tmp_path, caption="c", profile="cpu", setting=LONG)
    stamped = mpimg.imread(path)
    assert stamped.shape[1] <= width * 1.02  # no wider than the content (was 3x for 15, 18)
    assert stamped.shape[0] > mpimg.imread(tmp_path / "plain.png").shape[0]  # a line below
    assert "\n" in _stamp_of(fig).get_text()  # wrapped, not cut
    plots.stamp(fig, "cpu", "short")  # a second stamp replaces the first
    assert [t.get_text() for t in fig.texts if t.get_gid() == plots.STAMP_GID] == \
        ["profile: cpu · short"]
    plt.close("all")


def test_per_query_scatter_counts_wins_losses_and_ties():
    base = {"q1": 0.5, "q2": 0.2, "q3": 1.0, "q4": 0.0}
    new = {"q1": 0.7, "q2": 0.1, "q3": 1.0, "q4": 0.0, "q9": 1.0}  # q9 has no baseline
    fig = plots.per_query_scatter({"trained": (base, new), "copy": (base, base)},
                                  metric="nDCG@10", intervals={"trained": "+0.05 [-0.1, +0.2]"})
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert "n=4, wins 1 / losses 1 / ties 2" in titles[0] and "Δ +0.05" in titles[0]
    assert "n=4, wins 0 / losses 0 / ties 4" in titles[1]
    assert len(fig.axes[0].collections[0].get_offsets()) == 4
    plt.close(fig)


def test_per_query_outcomes_stacks_both_wins_losses_neither():
    base = {"q1": 1, "q2": 0, "q3": 1, "q4": 0, "q5": 0}
    new = {"q1": 1, "q2": 1, "q3": 0, "q4": 0, "q5": 1, "q9": 1}  # q9 has no baseline
    assert plots.outcome_counts(base, new) == {"both": 1, "method only": 2, "baseline only": 1,
                                               "neither": 1}
    fig = plots.per_query_outcomes({"trained": (base, new), "copy": (base, base)},
                                   metric="H@20", intervals={"trained": "+0.20 [-0.4, +0.8]"})
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert ticks[0] == "trained (n=5)\nΔ +0.20 [-0.4, +0.8]" and ticks[1] == "copy (n=5)"
    widths = [round(p.get_width(), 3) for p in ax.patches]
    assert widths[:4] == [0.2, 0.4, 0.2, 0.2] and widths[4:] == [0.4, 0.0, 0.0, 0.6]
    plt.close(fig)
