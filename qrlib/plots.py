"""One figure style and one way to save figures (PNG + PDF + caption naming the profile)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from qrlib.workbook import atomic_path, atomic_write


def setup() -> None:
    """Apply the workbook's matplotlib/seaborn style."""
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")


def save_figure(fig: Any, name: str, figures_dir: str | os.PathLike, *, caption: str,
                profile: str) -> Path:
    """Save ``fig`` as ``<name>.png`` and ``<name>.pdf`` and record its caption.

    The caption always says which profile produced the figure, so a figure made in a
    reduced setting (``smoke``/``cpu``) can never pass for a paper-scale one.
    """
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    full_caption = f"{caption} [profile: {profile}]"
    for ext in ("png", "pdf"):
        with atomic_path(figures_dir / f"{name}.{ext}") as tmp:
            fig.savefig(tmp, format=ext, dpi=150, bbox_inches="tight",
                        metadata={"Title": name} if ext == "pdf" else None)
    atomic_write(figures_dir / f"{name}.caption.txt", full_caption + "\n")
    return figures_dir / f"{name}.png"
