"""Evidence seeking with a rewriter (DeepRetrieval Table 1 right, Fig. 3-4, App. E): the steps
notebook 17 calls.

1. :func:`evidence_set` takes a split's span-answerable questions, their answer strings and
   the answer-bearing passages (:func:`~qrlib.methods.deepretrieval.evidence.answer_qrels`,
   the qrels of the answer-rank reward and of H@N alike);
2. :func:`train_rewriter` trains a rewriter with GRPO on the answer-rank tier reward
   (Table 8: 5 / 4 / 2 / 1 / 0.5 / 0.1 for the first answer-bearing passage at rank <= 5 /
   20 / 50 / 100 / 1000 / 3000, -3.5 otherwise), with or without ``<think>``;
3. :func:`rewrite_and_score` rewrites every question greedily, finds the answer strings the
   rewrite injected (App. E), and scores H@N of the rewrite and of the cleaned rewrite;
4. :func:`evidence_rows` turns those into the table of Table 1 right / Fig. 3 and the
   comparison rows (rewrite vs raw, rewrite vs cleaned, cleaned vs raw) of the workbook's
   one schema.
"""
from __future__ import annotations

import gc
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


from qrlib.eval.compare import compare
from qrlib.generation import policy, rewrite
from qrlib.generation.prompts import as_template
from qrlib.methods.deepretrieval import evidence as ev
from qrlib.rl.env import RewardEnv
from qrlib.rl.train import load_config, train

__all__ = ["EvidenceSet", "answerable_qids", "evidence_set", "train_rewriter", "rewrite_and_score",
           "evidence_rows"]


@dataclass
class EvidenceSet:
    """One split's questions with answers: the dataset, ``{qid: question}``, ``{qid:
    answer strings}``, ``{qid: {answer-bearing doc: 1}}`` and how many yes/no questions were
    left out."""

    ds: Any
    questions: dict[str, str]
    answers: dict[str, list[str]]
    qrels: dict[str, dict[str, int]]
    yes_no_left_out: int


def answerable_qids(ds: Any, qids: Sequence[str] | None = None, *,
                    drop_yes_no: bool = True) -> list[str]:
    """The questions of ``ds`` (or ``qids``) kept for evidence seeking: all, or without the
    yes/no ones when ``drop_yes_no`` (no passage states such an answer). Cheap: no corpus
    scan, so a caller can pick a sample before :func:`evidence_set` builds its qrels."""
    keep = list(qids if qids is not None else ds.queries)
    if not drop_yes_no:
        return keep
    answers = ev.dataset_answers(ds, keep)
    return [q for q in keep if ev.span_answerable(answers[q])]


def evidence_set(ds: Any, *, drop_yes_no: bool = True, n_queries: int | None = None,
                 qids: Sequence[str] | None = None) -> EvidenceSet:
    """The span-answerable questions of ``ds`` (yes/no questions left out when
    ``drop_yes_no``: no passage states such an answer), the first ``n_queries`` of them."""
    answers_all = ev.dataset_answers(ds)
    candidates = list(qids if qids is not None else ds.queries)
    keep = answerable_qids(ds, candidates, drop_yes_no=drop_yes_no)
    dropped = len(candidates) - len(keep)
    if n_queries is not None:
        keep = keep[:n_queries]
    answers = {q: answers_all[q] for q in keep}
    return EvidenceSet(ds, {q: ds.queries[q] for q in keep}, answers,
                       ev.answer_qrels(ds.corpus, answers), dropped)


def train_rewriter(data: EvidenceSet, searcher: Any, *, name: str, prompt: str,
                   run_dir: str | os.PathLike, **train_kw: Any) -> dict[str, Any]:
    """GRPO on ``data``'s questions with the answer-rank tier reward
    (``deepretrieval_answer_rank``) against ``searcher`` (BM25 over ``data.ds.corpus``);
    ``prompt`` is ``deepretrieval/evidence-nothink`` or ``-think``. ``train_kw`` goes to
    :class:`qrlib.rl.train.TrainConfig`. Returns :func:`qrlib.rl.train.train`'s summary."""
    meta = as_template(prompt).meta
    env = RewardEnv(searcher, data.qrels, reward="deepretrieval_answer_rank", fmt=meta["fmt"],
                    queries=data.questions, lenient=True)
    cfg = load_config(dict(name=name, run_dir=str(run_dir), prompt=prompt, fmt=meta["fmt"],
                           prefill=meta.get("prefill", ""), reward="deepretrieval_answer_rank",
                           reward_params={"lenient": True}, n_queries=len(data.questions),
                           **train_kw))
    return train(cfg, env=env, queries=data.questions)


def rewrite_and_score(model: str, adapter: str | os.PathLike | None,
                      contracts: Mapping[str, Any], sets: Mapping[str, EvidenceSet],
                      searchers: Mapping[str, Any], ns: Sequence[int], *,
                      batch_size: int = 8,
                      autocast: bool | None = False) -> dict[tuple[str, str], dict[str, Any]]:
    """For each decoding contract (key -> a :class:`~qrlib.generation.contract.DecodingContract`
    or an adapter folder: the prompt, prefill, stop strings, budget and parser of training)
    and dataset: ``{(key, dataset): {"rewrites", "injection", "rewrite", "cleaned"}}``: the
    greedy rewrites (indexed by qid), the injection frame (answer strings the rewrite added
    and the cleaned rewrite, App. E), and H@N of the rewrite and of the cleaned rewrite
    (:func:`~qrlib.methods.deepretrieval.evidence.score_run`). The model (with ``adapter``
    when given) is loaded once and freed after."""
    m, tok = policy.load_policy(model, adapter=adapter)
    out = {}
    try:
        for key, contract in contracts.items():
            for name, s in sets.items():
                rw = rewrite.rewrite_queries(m, tok, s.questions, contract=contract,
                                             batch_size=batch_size, progress=False,
                                             autocast=autocast).set_index("qid")
                searched = rw["search_text"].to_dict()
                inj = ev.injection_frame(s.questions, searched, s.answers)
                out[key, name] = {
                    "rewrites": rw, "injection": inj,
                    "rewrite": ev.score_run(searchers[name], searched, s.ds, s.answers, ns),
                    "cleaned": ev.score_run(searchers[name], inj["cleaned"].to_dict(), s.ds,
                                            s.answers, ns)}
    finally:
        del m
        gc.collect()
    return out


def evidence_rows(raw: Any, scored: Mapping[str, Any], *, dataset: str, rewriter: str,
                  kind: str, scale: Mapping[str, Any], ns: Sequence[int],
                  resamples: int = 10_000, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Rows of the evidence table for one rewriter on one dataset (raw question, rewrite,
    cleaned rewrite: H@N, and for the rewrite its format, modification and injection rates
    and generated tokens) and the comparison rows, for every N: rewrite vs raw question,
    rewrite vs cleaned rewrite (what injection bought) and cleaned rewrite vs raw question.
    ``scale``: :func:`qrlib.eval.scale.scale_columns` of the rewriter (its ``test queries``
    must equal the number of questions)."""
    hn = [f"H@{n}" for n in ns]
    rw, inj = scored["rewrites"], scored["injection"]
    base = {"dataset": dataset, "rewriter": rewriter, "questions": len(raw)}
    rows = [{**base, "query": "raw question", **raw[hn].mean().to_dict()},
            {**base, "query": "rewrite", **scored["rewrite"][hn].mean().to_dict(),
             "format ok": rw["format_ok"].mean(), "modified": rw["modified"].mean(),
             "injection rate": inj["has_injection"].mean(), "gen tokens": rw["gen_tokens"].mean()},
            {**base, "query": "cleaned rewrite", **scored["cleaned"][hn].mean().to_dict()}]
    cmp_rows = []
    for h in hn:
        for method, baseline, a, b, bkind in (
                (f"{rewriter}: rewrite", "raw question", scored["rewrite"], raw, "baseline"),
                (f"{rewriter}: rewrite", f"{rewriter}: cleaned rewrite", scored["rewrite"],
                 scored["cleaned"], kind),
                (f"{rewriter}: cleaned rewrite", "raw question", scored["cleaned"], raw,
                 "baseline")):
            cmp_rows.append(compare(a[h].to_dict(), b[h].to_dict(), paper="deepretrieval",
                                    dataset=dataset, retriever="bm25", metric=h, method=method,
                                    kind=kind, baseline=baseline, baseline_kind=bkind,
                                    scale=scale, resamples=resamples, seed=seed))
    return rows, cmp_rows
