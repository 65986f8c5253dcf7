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
range with the rows at either end, :func:`split_sentences` is how both count sentences.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.core.io import REPO_ROOT
from qrlib.eval.scale import PLUMBING_STEPS
from qrlib.eval.stats import fmt_interval, verdict
from qrlib.eval import claims

__all__ = ["what_we_found", "row_sentence", "scoreboard_sentence", "count_sentence",
           "paragraph", "split_sentences", "spread", "MAX_SENTENCES"]

#: The most sentences a "What we found" paragraph may have.
MAX_SENTENCES = 6

# A sentence ends at ".", "!" or "?" and a space, unless the dot closes an abbreviation.
_BREAK = re.compile(r"(?<!\bSec\.)(?<!\bEq\.)(?<!\bFig\.)(?<!\bal\.)(?<!\bvs\.)"
                    r"(?<!\bcf\.)(?<!\be\.g\.)(?<!\bi\.e\.)(?<=[.!?])\s+")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``: it breaks after ".", "!" or "?" and whitespace, except
    after an abbreviation ("Sec.", "Eq.", "Fig.", "et al.", "vs.", "cf.", "e.g.", "i.e.")."""
    return [s for s in _BREAK.split(text.strip()) if s]


def paragraph(sentences: Sequence[str]) -> str:
    """The non-empty ``sentences`` joined into one markdown paragraph; a
    :class:`~qrlib.core.errors.QrlibError` when the result has more than
    :data:`MAX_SENTENCES` sentences (counted with :func:`split_sentences`)."""
    text = " ".join(s.strip() for s in sentences if s and s.strip())
    n = len(split_sentences(text))
    if n > MAX_SENTENCES:
        raise QrlibError(f"a 'What we found' paragraph has {n} sentences, more than "
                         f"{MAX_SENTENCES}: {text[:200]}")
    return text


def _label(key: Any) -> str:
    return "/".join(map(str, key)) if isinstance(key, tuple) else str(key)


def spread(values: Mapping[Any, float] | Any, fmt: str = ".3f", *, name_one: bool = True) -> str:
    """``"0.810 (scifact) to 0.992 (hotpotqa-mini)"``: the lowest and the highest of
    ``values`` (a Series or a mapping; tuple keys read ``a/b``) with the row of each;
    ``"0.810 (scifact)"`` for one value (``"0.810"`` with ``name_one=False``, where the
    sentence names it), ``"2.00 (all 3)"`` when all read the same and ``""`` for none
    (missing values are left out)."""
    items = [(k, float(v)) for k, v in values.items() if v is not None and v == v]
    if not items:
        return ""
    lo, hi = min(items, key=lambda kv: kv[1]), max(items, key=lambda kv: kv[1])
    a, b = format(lo[1], fmt), format(hi[1], fmt)
    if len(items) == 1:
        return f"{a} ({_label(lo[0])})" if name_one else a
    if a == b:
        return f"{a} (all {len(items)})"
    return f"{a} ({_label(lo[0])}) to {b} ({_label(hi[0])})"


def row_sentence(r: Any) -> str:
    """``"ACQO (bm25-trained) beats the raw question on 2wiki/bm25 (nDCG@10 +0.021
    [+0.014, +0.027], 516 queries)"``."""
    return (f"{r['method']} {verdict(r['lo'], r['hi'])} {r['baseline']} on "
            f"{r['dataset']}/{r['retriever']} ({r['metric']} {fmt_interval(r)}, "
            f"{int(r['test queries'])} queries)")


def count_sentence(rows: Any, subject: str) -> str:
    """``"Of 3 trained rows compared with raw query, 1 beats it ..."``: the verdicts of the
    comparison ``rows`` (:func:`qrlib.eval.stats.verdict`) counted."""
    v = [verdict(lo, hi) for lo, hi in zip(rows["lo"], rows["hi"])]
    n, up, down = len(v), v.count("beats"), v.count("falls below")
    base = ", ".join(sorted(set(rows["baseline"])))
    return (f"Of {n} {subject} row{'s' if n != 1 else ''} compared with {base}, {up} "
            f"beat{'s' if up == 1 else ''} it with a 95 % interval above 0, {down} fall"
            f"{'s' if down == 1 else ''} below it and {n - up - down} cannot be told apart "
            f"from it.")


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
    out = [count_sentence(rows, subject)]
    best = rows.loc[rows["lo"].idxmax()]
    worst = rows.loc[rows["hi"].idxmin()]
    out.append(f"The strongest: {row_sentence(best)}.")
    if worst.name != best.name and worst["hi"] < 0:
        out.append(f"The weakest: {row_sentence(worst)}.")
    board = scoreboard_sentence(notebook, tables_dir, root)
    room = 6 - len(out) - bool(board)
    out += (_reasons(rows, health) + list(extra))[:max(room, 0)]
    if board:
        out.append(board)
    return " ".join(out)
