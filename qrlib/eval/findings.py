"""A notebook's "What we found", in sentences built from its own tables.

:func:`what_we_found` reads a comparison table (:mod:`qrlib.eval.compare` schema) and, when
given, the training-health table (:func:`qrlib.rl.health.health_summary`), and writes two
to six sentences: how many methods beat their baseline, fall below it or cannot be told
apart (intervals, never point estimates); the strongest and the weakest row with their
95 % intervals; the likely reasons the workbook can see (a row whose test outputs were
mostly malformed, a run that collapsed into copying or echoing, a run too short to be a
result); and the scoreboard claims the notebook feeds with their verdicts
(:mod:`qrlib.eval.claims`). A rerun that changes the tables changes the text.

The notebooks that write their own closing text build it from the same pieces:
:func:`paragraph` joins their sentences (at most six), :func:`spread` states a column's
range with the rows at either end, :func:`split_sentences` is how both count sentences
(from :mod:`qrlib.eval.prose`, which the model-free notebooks import directly: this module
reads every paper's claims, so importing it would make any paper's change stale them).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qrlib.core.io import REPO_ROOT
from qrlib.eval.scale import PLUMBING_STEPS
from qrlib.eval import claims
from qrlib.eval.prose import (MAX_SENTENCES, count_sentence, paragraph, row_sentence,
                              split_sentences, spread, strongest_weakest)

__all__ = ["what_we_found", "row_sentence", "scoreboard_sentence", "count_sentence",
           "paragraph", "split_sentences", "spread", "MAX_SENTENCES"]


def _reasons(rows: Any, health: Any | None) -> list[str]:
    out = []
    flag = rows["valid flag"] if "valid flag" in rows else None
    if flag is not None:
        bad = rows[flag.fillna("").astype(str).str.len() > 0]
        if len(bad):
            names = "; ".join(f"{r['method']} ({r['dataset']}/{r['retriever']}: "
                              f"{float(r['test valid']):.2f} at test, "
                              f"{float(r['train valid']):.2f} in training's last quarter)"
                              for _, r in bad.drop_duplicates("method").iterrows())
            out.append(f"Flagged: test outputs were mostly malformed for {names}, so those "
                       "rows measure the decoding rather than the method.")
    if health is not None and len(health) and "collapsed" in health:
        col = health[health["collapsed"].astype(bool)]
        if len(col):
            out.append(f"{len(col)} of {len(health)} training runs collapsed ("
                       + "; ".join(f"{r['run']}: {r['why']}" for _, r in col.iterrows())
                       + " in the last quarter): the policy learned to copy the query or "
                         "the prompt's example, not to rewrite.")
    steps = rows["RL steps"].astype(int) if "RL steps" in rows else None
    if steps is not None and ((steps > 0) & (steps < PLUMBING_STEPS)).any():
        out.append(f"Runs under {PLUMBING_STEPS} optimizer steps are plumbing checks of the "
                   "pipeline, not results.")
    return out


def scoreboard_sentence(notebook: str, tables_dir: str | Path,
                        root: str | Path = REPO_ROOT) -> str:
    """``"Scoreboard: acqo-beats-raw not held, acqo-rsf-helps held."`` for the claims whose
    rows this notebook writes ("" when it feeds none)."""
    found = [claims.verdict_of(c, Path(tables_dir))
             for c in claims.load_claims(Path(root)) if c.notebook == notebook]
    if not found:
        return ""
    return "Scoreboard rows fed: " + ", ".join(f"{v['id']} {v['verdict']}" for v in found) + "."


def what_we_found(comparisons: Any, *, notebook: str, tables_dir: str | Path,
                  health: Any | None = None, kinds: Sequence[str] = ("trained",),
                  baseline_kinds: Sequence[str] = ("baseline",), subject: str = "trained",
                  extra: Sequence[str] = (), root: str | Path = REPO_ROOT) -> str:
    """Two to six sentences on the ``kinds`` rows of ``comparisons`` against their
    ``baseline_kinds`` baselines (see the module docstring); ``extra``: the notebook's own
    sentences (built from its tables), placed after the strongest and weakest rows."""
    rows = comparisons[comparisons["kind"].isin(list(kinds)) &
                       comparisons["baseline kind"].isin(list(baseline_kinds))]
    if rows.empty:
        return f"This run has no {subject} row to compare with its baseline."
    out = [count_sentence(rows, subject), *strongest_weakest(rows)]
    board = scoreboard_sentence(notebook, tables_dir, root)
    room = 6 - len(out) - bool(board)
    out += (_reasons(rows, health) + list(extra))[:max(room, 0)]
    if board:
        out.append(board)
    return " ".join(out)
