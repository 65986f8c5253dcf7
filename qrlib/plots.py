"""One figure style and one way to save figures (PNG + PDF + caption naming the profile).

Every saved figure carries, drawn on the figure itself, the profile and the setting that
produced it (``profile: cpu · SciFact test, BM25``), so a PNG copied out of the repository
cannot pass for a paper-scale result. Helpers keep legends outside the data
(:func:`legend_outside`), give many near-identical lines a readable style (key lines
coloured, the rest faint: :func:`highlight_styles`) and rotate crowded category ticks
(:func:`tidy_ticks`).
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from qrlib.core.io import atomic_path, atomic_write

STAMP_GID = "qrlib-stamp"


def setup() -> None:
    """Apply the workbook's matplotlib/seaborn style."""
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")


def stamp(fig: Any, profile: str, setting: str | None = None) -> Any:
    """Draw ``profile: <name> · <setting>`` under everything else on the figure (axes, tick
    labels, legends below), left-aligned and wrapped to the width the figure's content
    takes, so the stamp neither overlaps the plot nor widens the saved image. Once: a
    second call replaces the first stamp."""
    import textwrap

    for t in list(fig.texts):
        if t.get_gid() == STAMP_GID:
            t.remove()
    text = f"profile: {profile}" + (f" · {setting}" if setting else "")
    fig.canvas.draw()  # lay out the content first, to measure it
    box = fig.get_tightbbox(fig.canvas.get_renderer())  # inches
    w, h = fig.get_figwidth(), fig.get_figheight()
    x0, width = max(box.x0, 0.0), min(box.x1, w) - max(box.x0, 0.0)
    chars = max(40, int(width * 72 / (8 * 0.62)))  # 8 pt characters that fit the content width
    wrapped = "\n".join(textwrap.wrap(text, chars, break_long_words=True)) or text
    return fig.text(x0 / w, (box.y0 - 0.06) / h, wrapped, ha="left", va="top", fontsize=8,
                    color="0.35", gid=STAMP_GID, transform=fig.transFigure)


def save_figure(fig: Any, name: str, figures_dir: str | os.PathLike, *, caption: str,
                profile: str, setting: str | None = None) -> Path:
    """Save ``fig`` as ``<name>.png`` and ``<name>.pdf`` and record its caption.

    The caption always says which profile produced the figure, and the figure itself is
    stamped with the profile and ``setting`` (data, subset, model), so a figure made in a
    reduced setting (``smoke``/``cpu``) can never pass for a paper-scale one.
    """
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    stamp(fig, profile, setting)
    full_caption = f"{caption} [profile: {profile}]" + (f" [setting: {setting}]" if setting else "")
    for ext in ("png", "pdf"):
        with atomic_path(figures_dir / f"{name}.{ext}") as tmp:
            fig.savefig(tmp, format=ext, dpi=DPI, bbox_inches="tight",
                        metadata={"Title": name} if ext == "pdf" else None)
    atomic_write(figures_dir / f"{name}.caption.txt", full_caption + "\n")
    return figures_dir / f"{name}.png"


DPI = 150


def legend_outside(target: Any, handles: list | None = None, labels: list | None = None, *,
                   where: str = "right", title: str | None = None, ncol: int | None = None,
                   fontsize: int | float = 8) -> Any:
    """Put the legend of an Axes or a Figure outside the data: to the ``right`` (one
    column, top-aligned) or ``below`` (centred, several columns)."""
    is_fig = hasattr(target, "legends") and hasattr(target, "axes") and not hasattr(target, "plot")
    if handles is None:
        src = target.axes[0] if is_fig else target
        handles, labels = src.get_legend_handles_labels()
    if not is_fig and target.get_legend() is not None:
        target.get_legend().remove()
    if where == "right":
        kw = dict(loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=ncol or 1)
        if is_fig:
            kw = dict(loc="center left", bbox_to_anchor=(1.0, 0.5), ncol=ncol or 1)
    elif where == "below":  # under the x label of an Axes, under everything for a Figure
        n = ncol or min(len(handles), 4)
        y = 0.0 if is_fig else (-0.3 if target.get_xlabel() else -0.14)
        kw = dict(loc="upper center", bbox_to_anchor=(0.5, y), ncol=n)
    else:
        raise ValueError(f"where must be 'right' or 'below', got {where!r}")
    return target.legend(handles, labels, title=title, fontsize=fontsize, frameon=False, **kw)


# Okabe & Ito's colour-blind-safe palette (black first: the baseline usually goes there)
OKABE_ITO = ["#000000", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#0072B2", "#CC79A7",
             "#F0E442"]


def highlight_styles(names: Iterable[str], key: Iterable[str], *,
                     faint_color: str = "0.65") -> dict[str, dict[str, Any]]:
    """Line styles for many series: the ``key`` ones in distinct colour-blind-safe colours
    (Okabe-Ito, in the order given), thick and on top; the others thin, grey and behind.
    ``{name: plot kwargs}``."""
    names = list(names)
    key = [n for n in key if n in set(names)]          # in the caller's order of importance
    palette = (OKABE_ITO * (len(key) // len(OKABE_ITO) + 1))[:len(key)]
    out = {}
    for n in names:
        if n in key:
            out[n] = dict(color=palette[key.index(n)], lw=2.2, alpha=1.0, zorder=3, ls="-")
        else:
            out[n] = dict(color=faint_color, lw=0.9, alpha=0.7, zorder=1, ls="-")
    return out


def tidy_ticks(ax: Any, axis: str = "x", rotation: float = 30, *, wrap: int | None = 14) -> None:
    """Rotate (and word-wrap) category tick labels so neighbours cannot collide."""
    import textwrap

    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    texts = [t.get_text() for t in labels]
    if wrap:
        texts = ["\n".join(textwrap.wrap(t, wrap)) or t for t in texts]
    if axis == "x":
        ax.set_xticks(ax.get_xticks())
        ax.set_xticklabels(texts, rotation=rotation, ha="right" if rotation else "center",
                           rotation_mode="anchor", fontsize=9)
    else:
        ax.set_yticks(ax.get_yticks())
        ax.set_yticklabels(texts, fontsize=9)


def health_figure(frame: Any, *, window: int = 5) -> Any:
    """Training health per step (:func:`qrlib.rl.health.read_health` frame, one line per
    run, running means over ``window`` steps): reward; format-valid and truncated shares;
    copy and echo shares (the collapse threshold 0.9 dashed); zero-variance share."""
    import matplotlib.pyplot as plt

    panels = [("reward", ("reward",)), ("format / truncated", ("format_valid", "truncated")),
              ("copy / echo", ("copy", "echo")), ("zero-variance groups", ("zero_variance",))]
    fig, axes = plt.subplots(1, len(panels), figsize=(15, 3.3))
    styles = ("-", "--")
    for i, (run, h) in enumerate(frame.groupby("run", sort=False)):
        for ax, (title, cols) in zip(axes, panels):
            for col, ls in zip(cols, styles):
                y = h[col].rolling(window, min_periods=1).mean()
                if y.notna().any():
                    ax.plot(h["step"], y, color=f"C{i}", ls=ls,
                            label=f"{run} · {col}" if len(cols) > 1 else run)
            ax.set(title=title, xlabel="step")
    for ax in axes[1:]:
        ax.set_ylim(-0.05, 1.05)
    axes[2].axhline(0.9, color="0.4", lw=0.8, ls=":")
    legend_outside(fig, *axes[2].get_legend_handles_labels(), where="below")
    fig.tight_layout()
    return fig


#: The four outcomes of a query under a 0/1 metric, method against baseline, and their colours.
OUTCOMES = (("both", "#009E73"), ("method only", "#0072B2"), ("baseline only", "#D55E00"),
            ("neither", "0.8"))


def outcome_counts(base: Any, new: Any) -> dict[str, int]:
    """For a 0/1 metric (a hit, an execution match): how many of the queries in both
    mappings both rows solve, only the method, only the baseline, neither (the discordant
    pairs are the wins and losses of a paired test)."""
    qids = set(base) & set(new)
    b = {q: float(base[q]) > 0 for q in qids}
    n = {q: float(new[q]) > 0 for q in qids}
    return {"both": sum(b[q] and n[q] for q in qids),
            "method only": sum(n[q] and not b[q] for q in qids),
            "baseline only": sum(b[q] and not n[q] for q in qids),
            "neither": sum(not (b[q] or n[q]) for q in qids)}


def per_query_outcomes(pairs: dict[str, tuple[Any, Any]], *, metric: str,
                       baseline: str = "raw query", intervals: dict[str, str] | None = None) -> Any:
    """The per-query view of a 0/1 metric, where a scatter would pile every query on four
    corners: one stacked bar per row (``pairs``: label -> (baseline, method) mappings query
    id -> 0/1) with the shares of queries both solve, only the method (wins), only the
    baseline (losses), neither (:func:`outcome_counts`); counts on the segments, and n with
    the paired difference from ``intervals`` in the row's label."""
    import matplotlib.pyplot as plt

    labels = list(pairs)
    fig, ax = plt.subplots(figsize=(8.5, 0.7 * len(labels) + 1.6))
    ticks = []
    for i, label in enumerate(labels):
        counts = outcome_counts(*pairs[label])
        n = sum(counts.values())
        left = 0.0
        for name, colour in OUTCOMES:
            w = counts[name] / n if n else 0.0
            ax.barh(i, w, left=left, color=colour, label=name if i == 0 else None)
            if w >= 0.06:
                ax.text(left + w / 2, i, str(counts[name]), ha="center", va="center", fontsize=8)
            left += w
        tick = f"{label} (n={n})"
        if intervals and label in intervals:
            tick += f"\nΔ {intervals[label]}"
        ticks.append(tick)
    ax.set_yticks(range(len(labels)), ticks, fontsize=8)
    ax.invert_yaxis()
    ax.set(xlim=(0, 1), xlabel=f"share of test queries ({metric}: method vs {baseline})")
    legend_outside(ax, title="solved by")
    fig.tight_layout()
    return fig


def per_query_scatter(pairs: dict[str, tuple[Any, Any]], *, metric: str,
                      baseline: str = "raw query", intervals: dict[str, str] | None = None,
                      ncols: int = 3) -> Any:
    """One panel per row: each test query as a point, its ``baseline`` score on x and the
    method's on y (``pairs``: label -> (baseline scores, method scores), mappings query id
    -> value over the same queries), the diagonal dashed. Above the diagonal: the method
    won that query. Each panel's title gives n, wins / losses / ties and, from
    ``intervals`` (label -> ``"+0.012 [+0.001, +0.024]"``), the paired difference."""
    import matplotlib.pyplot as plt
    import numpy as np

    labels = list(pairs)
    ncols = max(1, min(ncols, len(labels)))
    nrows = -(-len(labels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 4.0 * nrows), squeeze=False)
    rng = np.random.default_rng(0)
    for ax, label in zip(axes.flat, labels):
        base, new = pairs[label]
        qids = sorted(set(base) & set(new))
        x = np.array([float(base[q]) for q in qids])
        y = np.array([float(new[q]) for q in qids])
        d = y - x
        jitter = 0.006 * rng.standard_normal((2, len(qids)))  # ties at 0/1 stay visible
        ax.scatter(x + jitter[0], y + jitter[1], s=9, alpha=0.45,
                   c=np.where(d > 0, "#0072B2", np.where(d < 0, "#D55E00", "0.6")), lw=0)
        lo = min(0.0, float(np.nanmin(x)) if len(x) else 0.0, float(np.nanmin(y)) if len(y) else 0.0)
        hi = max(1.0, float(np.nanmax(x)) if len(x) else 1.0, float(np.nanmax(y)) if len(y) else 1.0)
        ax.plot([lo, hi], [lo, hi], color="0.3", lw=0.8, ls="--")
        ax.set(xlim=(lo - 0.03, hi + 0.03), ylim=(lo - 0.03, hi + 0.03), aspect="equal",
               xlabel=f"{baseline} {metric}", ylabel=f"method {metric}")
        head = f"{label}\nn={len(qids)}, wins {int((d > 0).sum())} / losses {int((d < 0).sum())}" \
               f" / ties {int((d == 0).sum())}"
        if intervals and label in intervals:
            head += f"\nΔ {intervals[label]}"
        ax.set_title(head, fontsize=9)
    for ax in list(axes.flat)[len(labels):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig
