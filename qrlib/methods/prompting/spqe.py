"""SPQE and the best-of-prompts baseline: training-free rows beside every RL row.

SPQE (Xu et al., arXiv:2510.17139 Sec. 3): the untrained policy writes a hypothetical
document :math:`d_H \\sim \\pi(\\cdot \\mid q)` and the augmented query :math:`(q, d_H)` is
searched. The paper leaves how :math:`q` and :math:`d_H` are joined to the retriever; three
readings, each a row (:data:`READINGS`):

* ``spqe``: :math:`q \\oplus d_H`, the query then the passage (the plain reading);
* ``spqe-q2d``: :math:`q^{\\oplus n} \\oplus d_H`, Query2doc's sparse recipe (Wang et al.
  2023, Sec. 2: the query repeated :math:`n = 5` times so that the passage does not drown
  its terms in BM25);
* ``pseudo-doc``: :math:`d_H` alone, HyDE's reading (Gao et al. 2023: the passage replaces
  the query).

The best-of-prompts baseline rewrites with each candidate prompt
(:data:`PROMPT_CANDIDATES`) on *training* queries, scores every (prompt, mode) there and
keeps the best (:func:`choose_prompt`); only that one decodes the test split.

Pure text functions first, then the two generation calls (I/O at the edges).
"""
from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.generation.parsing import SEARCH_MODES, searched_text

__all__ = ["READINGS", "PROMPT_CANDIDATES", "augmented_text", "clean_passage", "reading_texts",
           "mode_texts", "pseudo_documents", "choose_prompt", "candidate_contracts",
           "is_truncated"]

READINGS: dict[str, int] = {"spqe": 1, "spqe-q2d": 5, "pseudo-doc": 0}
"""Reading -> how many times the query precedes the passage (0: the passage alone)."""

PROMPT_CANDIDATES: tuple[str, ...] = ("dmqr/general", "dmqr/keyword", "dmqr/pseudo-answer",
                                      "dmqr/core-content", "generic/rewrite")
"""Registered rewriting prompts the best-of-prompts baseline chooses from."""

MODES = SEARCH_MODES

_SPACE = re.compile(r"\s+")
_LABEL = re.compile(r"^\s*(?:passage|answer|document|abstract)\s*:\s*", re.I)


def clean_passage(text: str) -> str:
    """A generated passage as one line: whitespace collapsed, a leading "Passage:" label
    dropped. Linear in the text."""
    return _LABEL.sub("", _SPACE.sub(" ", str(text)).strip(), count=1)


def augmented_text(query: str, passage: str, repeats: int) -> str:
    """:math:`q^{\\oplus n} \\oplus d_H` (``repeats`` = n; 0: the passage alone). An empty
    passage searches the query as it is."""
    if repeats < 0:
        raise QrlibError(f"repeats must be >= 0, got {repeats}")
    passage = clean_passage(passage)
    if not passage:
        return query
    return " ".join([query] * repeats + [passage])


def reading_texts(pseudo: Any, reading: str) -> dict[str, str]:
    """``{qid: searched text}`` of one :data:`READINGS` entry over the frame
    :func:`pseudo_documents` returns."""
    if reading not in READINGS:
        raise QrlibError(f"unknown SPQE reading {reading!r}; accepted: {', '.join(READINGS)}")
    n = READINGS[reading]
    return {str(q): augmented_text(t, p, n)
            for q, t, p in zip(pseudo["qid"], pseudo["query"], pseudo["passage"])}


def mode_texts(rewrites: Any, mode: str) -> dict[str, str]:
    """``{qid: searched text}`` of rewrites (:func:`qrlib.generation.rewrite.rewrite_queries`
    columns ``qid, query, rewrite``): ``rewrite`` searches the rewrite alone, ``expand`` the
    query and the rewrite; an empty rewrite searches the query (as ``rewrite_queries``)."""
    return {str(q): searched_text(t, str(r or ""), mode)
            for q, t, r in zip(rewrites["qid"], rewrites["query"], rewrites["rewrite"])}


def is_truncated(gen_tokens: int, max_new_tokens: int) -> bool:
    """Whether a completion used its whole budget: its re-tokenised length is within one
    token of ``max_new_tokens`` (decoding and re-encoding may merge one token pair)."""
    return int(gen_tokens) >= int(max_new_tokens) - 1


def choose_prompt(dev_scores: Mapping[tuple[str, str], float]) -> tuple[str, str]:
    """The (prompt, mode) with the highest mean development score; ties go to the first in
    the mapping's order (so the choice does not depend on float noise in sorting)."""
    if not dev_scores:
        raise QrlibError("choose_prompt: no development scores")
    best, best_score = None, float("-inf")
    for key, score in dev_scores.items():
        if score > best_score:
            best, best_score = key, score
    return best


def pseudo_documents(model: Any, tokenizer: Any, queries: Mapping[str, str], prompt: Any, *,
                     max_new_tokens: int, batch_size: int = 64,
                     autocast: bool | None = False) -> Any:
    """Greedy pseudo-documents of every query; one row per query with ``qid, query, passage,
    gen_tokens, truncated`` (:func:`is_truncated`) and ``gen_seconds``
    (per-query share of its batch). No prefill, no stop string, no parser: the completion
    is the passage."""
    import pandas as pd

    from qrlib.generation import engine, policy
    from qrlib.generation.prompts import render_prompt

    if max_new_tokens < 1:
        raise QrlibError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    qids = list(queries)
    size = engine.chunk_size(batch_size, len(qids))
    rows = []
    for s in range(0, len(qids), size):
        chunk = qids[s:s + size]
        texts = [render_prompt(prompt, tokenizer, queries[q], "") for q in chunk]
        t0 = time.perf_counter()
        outs = policy.generate(model, tokenizer, texts, max_new_tokens=max_new_tokens,
                               batch_size=size, autocast=autocast)
        per = (time.perf_counter() - t0) / len(chunk)
        lengths = policy.count_tokens(tokenizer, outs)
        rows += [{"qid": q, "query": queries[q], "passage": clean_passage(o), "gen_tokens": n,
                  "truncated": is_truncated(n, max_new_tokens), "gen_seconds": per}
                 for q, o, n in zip(chunk, outs, lengths)]
    return pd.DataFrame(rows, columns=["qid", "query", "passage", "gen_tokens", "truncated",
                                       "gen_seconds"])


def candidate_contracts(names: Sequence[str], max_new_tokens: int) -> dict[str, Any]:
    """A decoding contract per candidate prompt: its own format and prefill, stopped at
    ``</answer>``, within ``max_new_tokens``; dev and test decode with the same one."""
    from qrlib.generation.contract import DecodingContract
    from qrlib.generation.prompts import get

    out = {}
    for name in names:
        meta = get(name).meta
        out[name] = DecodingContract(prompt=name, prefill=meta.get("prefill", ""),
                                     stop=("</answer>",), max_new_tokens=int(max_new_tokens),
                                     fmt=meta.get("fmt", "deepretrieval-nothink"))
    return out
