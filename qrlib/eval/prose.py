"""Sentences from tables: the pieces every "What we found" paragraph is built from.

A leaf module (numbers and strings only, no paper imported), so a notebook that writes its
own closing text depends on nothing but what it reads: :func:`paragraph` joins sentences
(at most :data:`MAX_SENTENCES`), :func:`split_sentences` counts them, :func:`spread` states
a column's range with the row at each end, :func:`row_sentence` and :func:`count_sentence`
read comparison rows (:mod:`qrlib.eval.compare` schema) with verdicts from their intervals.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.eval.stats import fmt_interval, verdict

__all__ = ["MAX_SENTENCES", "split_sentences", "paragraph", "spread", "row_sentence",
           "count_sentence", "strongest_weakest"]

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


def strongest_weakest(rows: Any, describe: Any = row_sentence) -> list[str]:
    """``["The strongest: ...", "The weakest: ..."]`` for comparison ``rows``: the row with the
    highest lower bound, and the one with the lowest upper bound when that is below 0 (and
    another row), each put in words by ``describe``."""
    best, worst = rows.loc[rows["lo"].idxmax()], rows.loc[rows["hi"].idxmin()]
    out = [f"The strongest: {describe(best)}."]
    if worst.name != best.name and worst["hi"] < 0:
        out.append(f"The weakest: {describe(worst)}.")
    return out
