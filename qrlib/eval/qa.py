"""Answer quality of a reader: exact match and token F1 against gold answers and aliases.

The two measures of SQuAD v1.1's official evaluation script (Rajpurkar et al. 2016), which
ACQO Table 10 and most multi-hop QA work report: both compare a predicted answer with every
gold answer (the answer and its aliases) after normalisation and keep the best.

* normalisation (:func:`normalise`): lower-case, punctuation removed, the articles a/an/the
  removed, whitespace collapsed (the script's ``normalize_answer``; note the DPR-style
  normalisation of :mod:`qrlib.methods.deepretrieval.evidence`, which reads punctuation as a
  token boundary for has-answer checks, is a different convention);
* EM (:func:`exact_match`): 1 when the normalised strings are equal;
* F1 (:func:`token_f1`): harmonic mean of token precision and recall over the bag of
  normalised tokens (0 when none is shared).

Pure functions; :func:`score_answers` turns ``{qid: prediction}`` and ``{qid: golds}`` into a
per-question table for the paired bootstrap.
"""
from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from qrlib.core.errors import QrlibError

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalise(text: str) -> str:
    """SQuAD v1.1's answer normalisation (linear in the length of ``text``)."""
    if not isinstance(text, str):
        raise QrlibError(f"an answer must be a str, got {type(text).__name__}")
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def _golds(golds: Sequence[str] | str) -> list[str]:
    golds = [golds] if isinstance(golds, str) else list(golds)
    if not golds:
        raise QrlibError("no gold answer to compare with")
    return golds


def exact_match(prediction: str, golds: Sequence[str] | str) -> float:
    """1.0 when ``prediction`` equals some gold answer after :func:`normalise`, else 0.0."""
    p = normalise(prediction)
    return float(any(p == normalise(g) for g in _golds(golds)))


def token_f1(prediction: str, golds: Sequence[str] | str) -> float:
    """The best token F1 of ``prediction`` against the gold answers (SQuAD v1.1)."""
    p = normalise(prediction).split()
    best = 0.0
    for g in _golds(golds):
        t = normalise(g).split()
        common = sum((Counter(p) & Counter(t)).values())
        if common:
            prec, rec = common / len(p), common / len(t)
            best = max(best, 2 * prec * rec / (prec + rec))
        elif not p and not t:
            best = max(best, 1.0)
    return best


def score_answers(predictions: Mapping[str, str],
                  golds: Mapping[str, Sequence[str]]) -> Any:
    """Per-question ``EM`` and ``F1`` (a DataFrame indexed by question id, in the order of
    ``predictions``); a question without gold answers is a one-line error naming it."""
    import pandas as pd

    rows = []
    for q, pred in predictions.items():
        if q not in golds:
            raise QrlibError(f"question {q!r} has no gold answers")
        rows.append({"query_id": q, "EM": exact_match(pred, golds[q]),
                     "F1": token_f1(pred, golds[q])})
    return pd.DataFrame(rows).set_index("query_id")
