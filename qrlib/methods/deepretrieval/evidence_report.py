"""Evidence seeking with trained rewriters (DeepRetrieval Sec. 3.1, Table 1 right, Fig. 3-4,
App. E): the bookkeeping notebook 17 calls around :mod:`~qrlib.methods.deepretrieval.evidence_rl`.

* :data:`PROMPTS` and :func:`run_datasets` name the runs (``nothink``, ``think``, ``room``)
  and the datasets each covers; :func:`load_sets` builds the training and test question sets
  with their answer-bearing passages and BM25 indexes (and the ``room`` run's questions whose
  raw first answer-bearing rank leaves room to improve); :func:`sets_table` describes them;
* :func:`shared_untrained` finds an earlier run whose untrained rewrites can be reused;
  :func:`evidence_tables` turns the scored rewrites into the evidence table and the
  comparison rows (rewrite, cleaned rewrite and raw question, and with vs without
  reasoning); :func:`result_records`, :func:`injection_examples`, :func:`reasoning_table` and
  :func:`extra_sentences` feed the later cells; :func:`rollout_lengths` and
  :func:`lengths_figure` read the reasoning and query lengths of Fig. 4 from the logged
  rollouts.
"""
from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.data import datasets as qdata
from qrlib.eval.compare import compare
from qrlib.eval.curves import scale_setting
from qrlib.eval.scale import scale_columns
from qrlib.generation.contract import DecodingContract
from qrlib.generation.prompts import as_template
from qrlib.methods.deepretrieval import evidence as ev
from qrlib.methods.deepretrieval import evidence_rl as er
from qrlib.methods.deepretrieval import reasoning
from qrlib.retrieval import retrievers as retrieval
from qrlib.rl.rows import room_filter

__all__ = ["PROMPTS", "run_datasets", "load_sets", "sets_table", "shared_untrained",
           "both_runs", "evidence_tables", "result_records", "injection_examples",
           "reasoning_table", "extra_sentences", "rollout_lengths", "lengths_figure",
           "outcome_pairs"]

#: The prompt of each run: ``room`` is the no-reasoning run on questions with room to improve.
PROMPTS = {"nothink": "deepretrieval/evidence-nothink", "think": "deepretrieval/evidence-think",
           "room": "deepretrieval/evidence-nothink"}


def run_datasets(runs: Sequence[str], datasets: Sequence[str],
                 think_datasets: Sequence[str] | None,
                 room_datasets: Sequence[str] | None = None) -> dict[str, list[str]]:
    """Run -> the datasets it trains and tests on (the ``think`` run only
    ``think_datasets`` and the ``room`` run only ``room_datasets`` when given); a one-line
    error for an unknown run or dataset."""
    unknown = [r for r in runs if r not in PROMPTS]
    if unknown:
        raise QrlibError(f"unknown run(s) {unknown}; accepted: {', '.join(PROMPTS)}")
    only = {"think": think_datasets, "room": room_datasets}
    for run, given in only.items():
        extra = sorted(set(given or []) - set(datasets))
        if extra:
            raise QrlibError(f"{run}_datasets {extra} are not in datasets; accepted: "
                             f"{', '.join(datasets)}")
    return {run: [n for n in datasets if only.get(run) is None or n in only[run]]
            for run in runs}


def load_sets(datasets: Sequence[str], runs: Mapping[str, Sequence[str]], *,
              data_dir: str | os.PathLike | None, drop_yes_no: bool, n_train: int | None,
              n_test: int | None, seed: int, ns: Sequence[int], room_ranks: Sequence[int],
              room_pool: int | None) -> tuple[dict, dict, dict]:
    """``(TRAIN, TEST, SEARCH)``: per dataset a seeded training sample of span-answerable
    train questions and the first ``n_test`` span-answerable test questions
    (:class:`~qrlib.methods.deepretrieval.evidence_rl.EvidenceSet`), and BM25 over each
    split's paragraphs (``SEARCH[split, dataset]``). ``runs``: run -> its datasets
    (:func:`run_datasets`). For each dataset of the ``room`` run, ``TRAIN[dataset, "room"]``
    keeps, from a larger draw (``room_pool``, default 3 x ``n_train``), the
    questions whose raw first answer-bearing rank lies in ``room_ranks``."""
    train, test, search = {}, {}, {}
    for name in datasets:
        tr = qdata.load_dataset(name, "train", data_dir=data_dir)
        ok = set(er.answerable_qids(tr, drop_yes_no=drop_yes_no))  # no corpus scan yet
        answerable = qdata.filter_queries(tr, lambda q, t, meta: q in ok)
        qids = list(qdata.subset(answerable, n_queries=n_train, n_distractors=0,
                                 seed=seed).queries)
        train[name] = er.evidence_set(tr, drop_yes_no=drop_yes_no, qids=qids)
        search["train", name] = retrieval.build_retriever("bm25", tr.corpus)
        if name in runs.get("room", ()):  # a larger draw, then the questions with room
            pool = list(qdata.subset(answerable, n_queries=room_pool or 3 * n_train,
                                     n_distractors=0, seed=seed).queries)
            cand = er.evidence_set(tr, drop_yes_no=drop_yes_no, qids=pool)
            first = ev.score_run(search["train", name], cand.questions, cand.ds, cand.answers,
                                 ns, k=max(room_ranks[1], max(ns)))
            keep = room_filter(first["first_rank"].to_dict(), *room_ranks)[:n_train]
            train[name, "room"] = er.evidence_set(tr, drop_yes_no=drop_yes_no, qids=keep)
            print(f"{name}: room run trains on {len(keep)} of {len(pool)} drawn questions (raw "
                  f"first answer-bearing rank {room_ranks[0]}-{room_ranks[1]})")
        test[name] = er.evidence_set(qdata.load_dataset(name, "test", data_dir=data_dir),
                                     drop_yes_no=drop_yes_no, n_queries=n_test)
        search["test", name] = retrieval.build_retriever("bm25", test[name].ds.corpus)
    return train, test, search


def sets_table(train: Mapping, test: Mapping, datasets: Sequence[str]) -> Any:
    """Per dataset and split: questions, yes/no questions left out, paragraphs and the
    median number of answer-bearing passages per question."""
    import pandas as pd

    return pd.DataFrame([{"dataset": n, "split": split, "questions": len(s.questions),
                          "yes/no left out": s.yes_no_left_out, "paragraphs": len(s.ds.corpus),
                          "answer-bearing passages (median)":
                              pd.Series([len(s.qrels[q]) for q in s.questions]).median()}
                         for n in datasets for split, s in (("train", train[n]), ("test", test[n]))])


def shared_untrained(run: str, runs: Sequence[str], summaries: Mapping[tuple[str, str], Mapping],
                     datasets_of: Mapping[str, Sequence[str]]) -> str | None:
    """An earlier run with the same prompt and the same decoding contract (read from the
    adapters of their first datasets), whose untrained rewrites ``run`` can reuse: the
    ``room`` run's are ``nothink``'s. None when there is none."""
    first = DecodingContract.load(summaries[datasets_of[run][0], run]["adapter"])
    return next((r for r in runs[:runs.index(run)] if PROMPTS[r] == PROMPTS[run]
                 and DecodingContract.load(summaries[datasets_of[r][0], r]["adapter"]) == first),
                None)


def both_runs(datasets: Sequence[str], datasets_of: Mapping[str, Sequence[str]]) -> list[str]:
    """The datasets both the ``think`` and the ``nothink`` run cover (Fig. 4's pairs)."""
    return [n for n in datasets if all(n in datasets_of.get(r, []) for r in ("think", "nothink"))]


def _valid(results: Mapping, run: str, name: str) -> dict[str, float]:
    return {s_: results[f"{s_} {run}", name]["rewrites"]["format_ok"].mean()
            for s_ in ("untrained", "trained")}


def _scales(results: Mapping, logs: Mapping, run: str, name: str, n: int,
            model: str) -> dict[str, dict[str, Any]]:
    """The untrained and trained rows' scale columns, each with its test validity."""
    valid = _valid(results, run, name)
    return {"untrained": scale_columns(model, test_queries=n, test_valid=valid["untrained"]),
            "trained": scale_columns(model, [logs[name, run]], test_queries=n,
                                     test_valid=valid["trained"])}


def evidence_tables(results: Mapping[tuple[str, str], Mapping], raw: Mapping[str, Any],
                    test: Mapping[str, Any], logs: Mapping[tuple[str, str], Any],
                    runs: Sequence[str], datasets_of: Mapping[str, Sequence[str]],
                    datasets: Sequence[str], *, model: str, ns: Sequence[int],
                    resamples: int, seed: int) -> tuple[list[dict], list[dict]]:
    """The evidence rows and comparison rows of every run and dataset
    (:func:`~qrlib.methods.deepretrieval.evidence_rl.evidence_rows`: rewrite, cleaned
    rewrite and raw question, untrained then trained), then, where both runs exist, the
    rewriter with reasoning against the one without in the same state (untrained, trained),
    H@N per question."""
    rows, cmp_rows = [], []
    for run in runs:
        for name in datasets_of[run]:
            sc = _scales(results, logs, run, name, len(test[name].questions), model)
            for state in ("untrained", "trained"):
                r_, c_ = er.evidence_rows(raw[name], results[f"{state} {run}", name],
                                          dataset=name, rewriter=f"{state} {run}", kind=state,
                                          scale=sc[state], ns=ns, resamples=resamples, seed=seed)
                rows += r_
                cmp_rows += c_
    for name in both_runs(datasets, datasets_of):  # with vs without reasoning, same state
        sc = _scales(results, logs, "think", name, len(test[name].questions), model)
        for state in ("untrained", "trained"):
            cmp_rows += [compare(results[f"{state} think", name]["rewrite"][h].to_dict(),
                                 results[f"{state} nothink", name]["rewrite"][h].to_dict(),
                                 paper="deepretrieval", dataset=name, retriever="bm25", metric=h,
                                 method=f"{state} think: rewrite", kind=state,
                                 baseline=f"{state} nothink: rewrite", baseline_kind=state,
                                 scale=sc[state], resamples=resamples, seed=seed)
                         for h in (f"H@{n}" for n in ns)]
    return rows, cmp_rows


def outcome_pairs(results: Mapping[tuple[str, str], Mapping], raw: Mapping[str, Any], cmp: Any,
                  metric: str) -> tuple[dict[str, tuple[dict, dict]], dict[str, str]]:
    """For :func:`qrlib.plots.per_query_outcomes`: every "rewrite vs raw question" row of
    ``cmp`` at ``metric`` (H@N, 0/1 per question) as ``"dataset: rewriter" -> (raw hits,
    rewrite hits)`` by question id, and the row's interval."""
    from qrlib.eval.stats import fmt_interval

    rows = cmp[(cmp.metric == metric) & (cmp.baseline == "raw question")
               & cmp.method.str.endswith(": rewrite")]
    pairs, intervals = {}, {}
    for _, r in rows.iterrows():
        rewriter, label = r["method"][:-len(": rewrite")], f"{r['dataset']}: {r['method']}"
        pairs[label] = (raw[r["dataset"]][metric].to_dict(),
                        results[rewriter, r["dataset"]]["rewrite"][metric].to_dict())
        intervals[label] = fmt_interval(r)
    return pairs, intervals


def result_records(results: Mapping[tuple[str, str], Mapping], raw: Mapping[str, Any],
                   datasets: Sequence[str], hn: Sequence[str]) -> dict[str, float]:
    """The recorded numbers: per rewriter and dataset its injection rate and H@N at the
    deepest N; per dataset the raw question's H@N at the deepest N."""
    out = {}
    for (label, name), res in results.items():
        out[f"{name}.{label}.injection_rate"] = float(res["injection"]["has_injection"].mean())
        out[f"{name}.{label}.{hn[-1]}"] = float(res["rewrite"][hn[-1]].mean())
    for name in datasets:
        out[f"{name}.raw.{hn[-1]}"] = float(raw[name][hn[-1]].mean())
    return out


def injection_examples(results: Mapping[tuple[str, str], Mapping], n: int) -> Any:
    """Up to ``n`` rewrites per rewriter and dataset that injected an answer string, with the
    cleaned query and the first answer-bearing rank of both."""
    import pandas as pd

    ex = []
    for (label, name), res in results.items():
        inj = res["injection"]
        for q, r in inj[inj["has_injection"]].head(n).iterrows():
            ex.append({"dataset": name, "rewriter": label, "question": r["question"],
                       "rewrite": r["rewrite"], "injected": "; ".join(r["injected"]),
                       "cleaned": r["cleaned"],
                       "first rank rewrite": res["rewrite"].loc[q, "first_rank"],
                       "first rank cleaned": res["cleaned"].loc[q, "first_rank"]})
    return pd.DataFrame(ex)


def reasoning_table(results: Mapping[tuple[str, str], Mapping], test: Mapping[str, Any],
                    logs: Mapping[tuple[str, str], Any], lengths: Mapping[tuple[str, str], Any],
                    examples: Mapping[str, str], hn: Sequence[str]) -> Any:
    """Per rewriter and dataset: test H@N, format rate, generated tokens and the reasoning
    and query words and echo share of the greedy test rewrites
    (:func:`~qrlib.methods.deepretrieval.reasoning.mean_lengths`); for trained rewriters
    also the early and late training values (:func:`~qrlib.methods.deepretrieval.reasoning.early_late`)."""
    import pandas as pd

    rows = []
    for (label, name), res in results.items():
        run = label.split()[-1]  # "untrained think" -> think
        meta = as_template(PROMPTS[run]).meta
        row = {"dataset": name, "rewriter": label, "questions": len(test[name].questions),
               **res["rewrite"][list(hn)].mean().to_dict(),
               "format ok": res["rewrites"]["format_ok"].mean(),
               "gen tokens": res["rewrites"]["gen_tokens"].mean(),
               **{f"test {k}": v for k, v in reasoning.mean_lengths(
                   res["rewrites"]["completion"], meta["fmt"], prefill=meta["prefill"],
                   example=examples[run]).items()}}
        if label.startswith("trained"):
            row.update(reasoning.early_late(logs[name, run], lengths[name, run]))
        rows.append(row)
    return pd.DataFrame(rows)


def extra_sentences(reasoning_rows: Any, results: Mapping[tuple[str, str], Mapping]) -> list[str]:
    """The notebook's own sentences for "What we found": how long the think rewriters' test
    chains are (and, where the prompt shows an example chain, how often they copy it), and
    the range of the trained rewriters' injection rates."""
    import math

    def chain(r: Mapping[str, Any]) -> str:
        echo = r["test echo share"]
        return (f"{r['rewriter']} on {r['dataset']} reasons in {r['test reasoning words']:.1f} "
                f"words on average" + ("" if echo is None or math.isnan(echo) else
                                       f" and copies the prompt's example chain in {echo:.0%}"
                                       " of test rewrites"))

    extra = []
    think = reasoning_rows[reasoning_rows.rewriter.str.endswith(" think")]
    if len(think):
        extra.append("With reasoning, " + "; ".join(chain(r) for r in think.to_dict("records"))
                     + ".")
    inj = [res["injection"]["has_injection"].mean() for (label, _), res in results.items()
           if label.startswith("trained")]
    if inj:
        extra.append(f"Trained rewrites put an answer string into the query for {min(inj):.1%}-"
                     f"{max(inj):.1%} of the questions (string match).")
    return extra


def rollout_lengths(summaries: Mapping[tuple[str, str], Mapping], runs: Sequence[str]
                    ) -> tuple[dict[str, str], dict[tuple[str, str], Any]]:
    """``(examples, lengths)``: the example chain each run's prompt shows (empty when none:
    :func:`~qrlib.methods.deepretrieval.reasoning.layout_chain`), and per trained run the
    reasoning and query words per step of the rollouts it logged (``samples.jsonl`` beside
    its ``log.csv``)."""
    examples = {run: reasoning.layout_chain(as_template(PROMPTS[run]).user) for run in runs}
    lengths = {(name, run): reasoning.length_curves(reasoning.sample_lengths(
        Path(summaries[name, run]["log"]).with_name("samples.jsonl"),
        as_template(PROMPTS[run]).meta["fmt"], examples[run])) for (name, run) in summaries}
    return examples, lengths


def lengths_figure(logs: Mapping[tuple[str, str], Any], lengths: Mapping[tuple[str, str], Any],
                   both: Sequence[str], model: str) -> tuple[Any, str] | tuple[None, None]:
    """Fig. 4's panels (:func:`~qrlib.methods.deepretrieval.reasoning.reasoning_figure`) for
    every think run and, on the datasets in ``both``, its nothink partner; ``(figure,
    setting)``, or ``(None, None)`` without a think run."""
    shown = [(n, r) for (n, r) in lengths if n in both or r == "think"]
    if not shown:
        return None, None
    fig = reasoning.reasoning_figure({f"{n} · {r}": (logs[n, r], lengths[n, r]) for n, r in shown})
    return fig, f"{model}; from the logs: " + scale_setting({f"{n} · {r}": logs[n, r]
                                                             for n, r in shown})
