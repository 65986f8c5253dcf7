"""RL-QR end to end (RL-QR Alg. 1 and Sec. 3.2): the steps notebook 14 calls.

1. :func:`synthesis_docs` picks documents of the index that no test query judges;
2. :func:`synthesize` has an offline model write one (scenario, question, answer) per
   document (:mod:`qrlib.methods.rlqr.synthesis` parses and filters), cached in the run folder;
3. :func:`synthesis_summary` says how usable the set is and how often each retriever ranks
   the source document first;
4. :func:`training_set` turns the usable questions into queries and qrels (the source is
   the only relevant document); :func:`hard_subset` keeps those the raw question does not
   already solve for a retriever (a lever against learning to copy);
5. :func:`train_rewriter` trains one rewriter per retriever with the reward of Eq. 5-6
   (``reward="rlqr"``), parsing rollouts exactly as the evaluation does (lenient);
6. :func:`~qrlib.eval.scoring.search_scores` (re-exported) scores any search texts on the
   real test queries.

The model and retriever objects come in from the notebook; nothing here downloads.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qrlib.core.errors import QrlibError
from qrlib.eval.scoring import search_scores
from qrlib.generation import policy
from qrlib.generation.prompts import as_template, render_prompt
from qrlib.rl.env import RewardEnv
from qrlib.rl.release import release_memory
from qrlib.rl.train import load_config, train
from qrlib.methods.rlqr.synthesis import (PREFILL, load_synthesis, parse_synthesis,
                                          save_synthesis, usable)

__all__ = ["REWRITE_PROMPT", "SYNTHESIS_PROMPT", "synthesis_docs", "synthesize",
           "synthesis_summary", "training_set", "hard_subset", "train_rewriter",
           "search_scores"]

REWRITE_PROMPT = "rlqr/rewrite"
SYNTHESIS_PROMPT = "rlqr/synthesis"


def synthesis_docs(ds: Any, n_docs: int, seed: int = 0) -> list[str]:
    """``n_docs`` document ids of ``ds.corpus`` drawn without replacement from those that
    no query of ``ds`` judges (the test queries' documents stay unseen in training)."""

    judged = {d for rel in ds.qrels.values() for d in rel}
    pool = sorted(set(ds.corpus) - judged)
    if not pool:
        raise QrlibError(f"{ds.name}: every document is judged by a test query; nothing to "
                         "synthesise from (use a larger corpus cut)")
    rng = np.random.default_rng(seed)
    return [pool[i] for i in rng.choice(len(pool), size=min(n_docs, len(pool)), replace=False)]


def synthesize(ds: Any, docs: Sequence[str], folder: str | Path, *, model: str,
               doc_words: int = 160, max_new_tokens: int = 96, batch_size: int = 8,
               autocast: bool | None = True) -> tuple[Any, str]:
    """Every synthesis attempt as a DataFrame (``qid, doc_id, completion, usable, reason,
    scenario, question, answer``) and how it was obtained: reused from ``folder`` when its
    manifest matches these settings, else generated greedily by ``model`` (loaded here and
    freed before returning) and saved there in BEIR layout."""


    manifest = {"dataset": ds.name, "docs": list(docs), "model": model,
                "prompt": as_template(SYNTHESIS_PROMPT).user, "doc_words": doc_words,
                "max_new_tokens": max_new_tokens, "prefill": PREFILL}
    attempts, why = load_synthesis(folder, manifest)
    if attempts is not None:
        return pd.DataFrame(attempts), why
    syn, tok = policy.load_policy(model)
    texts = [render_prompt(SYNTHESIS_PROMPT, tok, prefill=PREFILL,
                           document=" ".join(ds.doc_text(d).split()[:doc_words])) for d in docs]
    t0 = time.perf_counter()
    outs = policy.generate(syn, tok, texts, max_new_tokens=max_new_tokens,
                           batch_size=batch_size, autocast=autocast)
    seconds = time.perf_counter() - t0
    del syn
    release_memory()  # model and engine: a stored vLLM traceback otherwise keeps them alive
    attempts = []
    for d, out in zip(docs, outs):
        item = parse_synthesis(out, PREFILL)
        ok, reason = usable(item, ds.doc_text(d))
        attempts.append({"qid": f"syn-{d}", "doc_id": d, "completion": out, "usable": ok,
                         "reason": reason,
                         **(item or dict.fromkeys(("scenario", "question", "answer"), ""))})
    save_synthesis(folder, attempts, {**manifest, "seconds": round(seconds, 1)})
    return pd.DataFrame(attempts), f"generated in {seconds:.0f} s ({why})"


def synthesis_summary(name: str, attempts: Any,
                      searchers: Mapping[str, Callable[[list[str], int], list]]) -> dict[str, Any]:
    """One row: documents tried, usable questions (count, share), question length in words
    (mean, std), and per retriever how often the source document ranks 1st / in the top 10
    when the synthesised question is searched as it is."""
    keep = attempts[attempts.usable]
    words = keep.question.str.split().str.len()
    row: dict[str, Any] = {
        "dataset": name, "documents": len(attempts), "usable": len(keep),
        "usable share": len(keep) / max(1, len(attempts)),
        "question words mean": float(words.mean()) if len(keep) else float("nan"),
        "question words std": float(words.std()) if len(keep) > 1 else float("nan")}
    for kind, search in searchers.items():
        if not len(keep):
            continue
        ranked = search(keep.question.tolist(), 10)
        pos = [next((i for i, (doc, _) in enumerate(r, 1) if doc == src), None)
               for r, src in zip(ranked, keep.doc_id)]
        row[f"{kind} source@1"] = sum(p == 1 for p in pos) / len(pos)
        row[f"{kind} source@10"] = sum(p is not None for p in pos) / len(pos)
    return row


def training_set(attempts: Any) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """``(queries, qrels)`` of the usable synthesised questions: each question's only
    relevant document is its source (RL-QR Sec. 3.1)."""
    keep = attempts[attempts.usable]
    if not len(keep):
        raise QrlibError(f"no usable synthesised question among {len(attempts)} attempts; "
                         "synthesise from more documents or use a stronger synthesis model")
    return (dict(zip(keep.qid, keep.question)),
            {q: {d: 1} for q, d in zip(keep.qid, keep.doc_id)})


def hard_subset(queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]],
                searcher: Any, *, solved_at: int = 1) -> tuple[dict[str, str],
                                                            dict[str, dict[str, int]]]:
    """The synthetic questions the raw question does not already solve for ``searcher``:
    their source document is not within the first ``solved_at`` results. A question whose
    source already ranks first gives the rewriter nothing to gain over copying it, and
    copying is what the policy then learns (ACQO's tau filter, Eq. 7-8, makes the same
    choice for its Stage II)."""
    qids = list(queries)
    ranked = searcher.search([queries[q] for q in qids], solved_at)
    keep = [q for q, r in zip(qids, ranked)
            if not any(doc in qrels[q] for doc, _ in r[:solved_at])]
    return {q: queries[q] for q in keep}, {q: dict(qrels[q]) for q in keep}


def room_subset(queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]],
                searcher: Any, *, lo: int = 2, hi: int = 50) -> tuple[dict[str, str],
                                                                   dict[str, dict[str, int]]]:
    """The synthetic questions whose raw question ranks their source at ``lo``..``hi`` for
    ``searcher`` (:func:`qrlib.rl.rows.room_filter`): neither solved at rank 1 (copying is
    then optimal) nor out of reach (no reward spread)."""
    from qrlib.rl.rows import room_qids

    keep = room_qids(queries, qrels, searcher, lo=lo, hi=hi)
    return {q: queries[q] for q in keep}, {q: dict(qrels[q]) for q in keep}


def train_rewriter(name: str, searcher: Any, queries: Mapping[str, str],
                   qrels: Mapping[str, Mapping[str, int]], *, run_dir: str | Path,
                   k: int = 3, prefill: str = "<answer>", **train_kw: Any) -> dict[str, Any]:
    """Train one RL-QR rewriter for the index ``searcher`` (a built retriever) on synthetic
    ``queries`` (Eq. 5-6:
    ``lambda1 nDCG@k + lambda2`` x the group-normalised format penalty; ``k`` = 3 as the
    paper evaluates). Rollouts are parsed leniently, as the test rewrites are, so chatter
    around ``<answer>`` costs through the penalty, not by finding no query. ``train_kw``
    goes to :class:`qrlib.rl.train.TrainConfig` (model, retriever kind, steps, sampling, ...).
    Returns :func:`qrlib.rl.train.train`'s summary (adapter, log, steps, ...)."""

    env = RewardEnv(searcher, dict(qrels), reward="rlqr", fmt="plain", queries=dict(queries),
                    k=k, lenient=True)
    cfg = load_config(dict(name=name, run_dir=str(run_dir), prompt=REWRITE_PROMPT, fmt="plain",
                           reward="rlqr",
                           prefill=prefill, n_queries=len(queries),
                           reward_params={"k": k, "lenient": True}, **train_kw))
    return train(cfg, env=env, queries=dict(queries))

