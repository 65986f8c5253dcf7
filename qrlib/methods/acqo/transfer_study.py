"""ACQO away from home (ACQO Sec. 4.3, Fig. 5, Table 10): the tables and figure notebook 16
builds around :mod:`qrlib.methods.acqo.transfer`.

* :func:`trained_rows` lists the rows (raw question, rule split, Stage I and ACQO per
  training retriever) with their kind, training retriever and the logs behind them;
* :func:`score_transfer` scores every row on every test set with every evaluation
  retriever (in and out of domain, with the training retriever or the other one) and
  compares it with the raw question;
* :func:`answer_all` and :func:`reader_table` let a local reader answer from each row's
  top documents and score EM / F1 (SQuAD v1.1) against the raw question's;
* :func:`delta_figure` draws every row minus the raw question with its interval.

No trainer is imported here: notebook 16 trains nothing.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from qrlib.eval import metrics, qa
from qrlib.eval.compare import compare
from qrlib.eval.scale import scale_columns
from qrlib.methods.acqo.curriculum import search_fused
from qrlib.methods.acqo.study import read_log, validity
from qrlib.methods.acqo.transfer import ranked_ids, rule_split
from qrlib.methods.deepretrieval.evidence import dataset_answers

RAW = "raw question"
RULE = "rule: question + heuristic split"


def trained_rows(stage1: Any, stage2: Any, trained_with: Sequence[str]) -> tuple[dict, dict, dict, dict]:
    """The rows of the study: ``(adapters, kinds, training retrievers, scales)``, each keyed
    by row label; adapters are None for the rows without a model; a scale is ``(RL logs,
    SFT steps, SFT questions)`` of the runs behind the row (Stage I, then Stage II)."""
    adapters: dict[str, Any] = {RAW: None, RULE: None}
    kinds = {RAW: "baseline", RULE: "model-free"}
    retr_of, scale = {}, {}
    for kind in trained_with:
        s1_log, s2_log = read_log(stage1.summary(kind)["log"]), read_log(stage2.summaries[kind]["log"])
        sft = stage1.sft_steps if stage1.summary(kind).get("sft_adapter") else 0
        warm = stage1.sft_questions.get(kind, 0) if sft else 0
        for label, adapter, logs in ((f"Stage I ({kind}-trained)", stage1.summary(kind)["adapter"],
                                      [s1_log]),
                                     (f"ACQO: Stage I+II ({kind}-trained)", stage2.adapter(kind),
                                      [s1_log, s2_log])):
            adapters[label], kinds[label], retr_of[label] = adapter, "trained", kind
            scale[label] = (logs, sft, warm)
    return adapters, kinds, retr_of, scale


def fixed_subqueries(test: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, list[str]]]:
    """The sub-queries of the rows without a model: the question alone, and the question
    plus up to two rule-based sub-queries."""
    out = {}
    for name, ds in test.items():
        out[RAW, name] = {q: [t] for q, t in ds.queries.items()}
        out[RULE, name] = {q: rule_split(t) for q, t in ds.queries.items()}
    return out


def row_scale(model: str, scale: Mapping[str, tuple], generated: Mapping[tuple[str, str], Sequence],
              label: str, n: int, name: str) -> dict[str, Any]:
    """The scale columns of a row (from its runs' logs when trained) and its test validity."""
    if label in scale:
        logs, sft, warm = scale[label]
        return scale_columns(model, logs, test_queries=n, sft_steps=sft, sft_queries=warm,
                             test_valid=validity(generated[label, name]))
    return scale_columns(None, test_queries=n)


def score_transfer(test: Mapping[str, Any], retrievers: Mapping[tuple[str, str], Any],
                   subs: Mapping[tuple[str, str], Mapping[str, Sequence[str]]],
                   kinds: Mapping[str, str], scale_of: Any, *, eval_retrievers: Sequence[str],
                   k: int, bootstrap: int, seed: int) -> tuple[dict, dict, list[dict]]:
    """Every row (``kinds``' labels) on every test set and evaluation retriever: the
    RSF-fused run, per-question nDCG@10 and R@10, and the row minus the raw question in
    nDCG@10 (95 % paired bootstrap; ``scale_of(label, n, dataset)`` gives its scale).
    Returns ``(runs, per-question tables, comparison rows)``, keyed by (row, dataset,
    retriever)."""
    runs, per_q, rows = {}, {}, []
    for name, ds in test.items():
        for kind in eval_retrievers:
            for label in kinds:
                runs[label, name, kind], _ = search_fused(retrievers[name, kind], subs[label, name],
                                                          k=k)
                per_q[label, name, kind] = metrics.evaluate(
                    runs[label, name, kind], ds.qrels, ("nDCG@10", "R@10"),
                    per_query=True).set_index("query_id")
            raw = per_q[RAW, name, kind]["nDCG@10"].to_dict()
            for label in kinds:
                if label == RAW:
                    continue
                pq = per_q[label, name, kind]["nDCG@10"]
                rows.append(compare(pq.to_dict(), raw, paper="acqo", dataset=name, retriever=kind,
                                    metric="nDCG@10", method=label, kind=kinds[label],
                                    baseline=RAW, scale=scale_of(label, len(pq), name),
                                    resamples=bootstrap, seed=seed))
    return runs, per_q, rows


def transfer_table(per_q: Mapping[tuple[str, str, str], pd.DataFrame],
                   subs: Mapping[tuple[str, str], Mapping[str, Sequence[str]]],
                   in_domain: set[str], retr_of: Mapping[str, str]) -> pd.DataFrame:
    """nDCG@10, R@10 and sub-queries per question of every row, test set (in or out of
    the training domain) and retriever (``cross-retriever``: not the one it trained with,
    ACQO Fig. 5)."""
    return pd.DataFrame([
        {"dataset": name, "domain": "in" if name in in_domain else "out", "retriever": kind,
         "cross-retriever": label in retr_of and retr_of[label] != kind,
         "model": label, "nDCG@10": pq["nDCG@10"].mean(), "R@10": pq["R@10"].mean(),
         "sub-queries": pd.Series({q: len(s) for q, s in subs[label, name].items()}).mean()}
        for (label, name, kind), pq in per_q.items()])


def examples(ds: Any, subs: Mapping[tuple[str, str], Mapping[str, Sequence[str]]],
             labels: Sequence[str], name: str, n: int) -> pd.DataFrame:
    """The first ``n`` questions of ``name`` with every row's sub-queries."""
    return pd.DataFrame([{"question": ds.queries[q], "row": label,
                          "sub-queries": " | ".join(subs[label, name][q])}
                         for q in list(ds.queries)[:n] for label in labels])


def answer_all(reader_model: str, test: Mapping[str, Any], runs: Mapping[tuple, Any],
               labels: Sequence[str], *, retriever: str, n_queries: int | None,
               **reading: Any) -> tuple[dict, dict]:
    """Answers of the local reader from each row's fused ``retriever`` list, for the first
    ``n_queries`` questions of each test set (None: all), and their EM / F1 against the
    gold answers and aliases (``reading``: :func:`qrlib.generation.reader.answer`'s
    top_k, passage_words, max_new_tokens, autocast). The reader is freed after."""
    from qrlib.generation import engine, policy, reader

    m, tok = policy.load_policy(reader_model)
    answers, scores = {}, {}
    for name, ds in test.items():
        qids = list(ds.queries)[:n_queries] if n_queries else list(ds.queries)
        golds = dataset_answers(ds, qids)
        for label in labels:
            ranked = ranked_ids(runs[label, name, retriever], qids)
            answers[label, name] = reader.answer(m, tok, {q: ds.queries[q] for q in qids}, ranked,
                                                 ds.corpus, **reading)
            scores[label, name] = qa.score_answers(answers[label, name], golds)
    del m
    engine.close_engines()
    return answers, scores


def reader_table(scores: Mapping[tuple[str, str], pd.DataFrame], kinds: Mapping[str, str],
                 scale_of: Any, *, datasets: Sequence[str], retriever: str, bootstrap: int,
                 seed: int) -> tuple[pd.DataFrame, list[dict]]:
    """EM and F1 of every row per test set, with each row minus the raw question and its
    95 % paired bootstrap (ACQO Table 10's question). Returns the table and the
    comparison rows."""
    rows, cmp_rows = [], []
    for name in datasets:
        base = scores[RAW, name]
        for label in kinds:
            pq = scores[label, name]
            row = {"dataset": name, "retriever": retriever, "model": label,
                   "EM": pq.EM.mean(), "F1": pq.F1.mean(), "questions": len(pq)}
            if label != RAW:
                for m in ("EM", "F1"):
                    c = compare(pq[m].to_dict(), base[m].to_dict(), paper="acqo", dataset=name,
                                retriever=retriever, metric=f"reader {m}", method=label,
                                kind=kinds[label], baseline=RAW,
                                scale=scale_of(label, len(pq), name), resamples=bootstrap,
                                seed=seed)
                    cmp_rows.append(c)
                    row[f"Δ{m} vs raw"], row[f"{m} lo"], row[f"{m} hi"] = c["diff"], c["lo"], c["hi"]
            rows.append(row)
    return pd.DataFrame(rows), cmp_rows


def answer_examples(test: Mapping[str, Any], answers: Mapping[tuple[str, str], Mapping[str, str]],
                    labels: Sequence[str], n: int) -> pd.DataFrame:
    """The first ``n`` answered questions of each test set: gold answers and every row's."""
    out = []
    for name, ds in test.items():
        qids = list(answers[RAW, name])
        golds = dataset_answers(ds, qids)
        out += [{"dataset": name, "question": ds.queries[q], "gold": " | ".join(golds[q]),
                 **{label: answers[label, name][q] for label in labels}} for q in qids[:n]]
    return pd.DataFrame(out)


def delta_figure(cmp: pd.DataFrame, *, retrievers: Sequence[str], datasets: Sequence[str],
                 in_domain: set[str]) -> Any:
    """Every row minus the raw question (nDCG@10, 95 % interval), one panel per evaluation
    retriever, one colour per test set (in or out of the training domain)."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, axes = plt.subplots(1, len(retrievers), figsize=(5.5 * len(retrievers), 3.4),
                             squeeze=False)
    for ax, kind in zip(axes[0], retrievers):
        sel = cmp[(cmp.retriever == kind) & (cmp.metric == "nDCG@10")]
        labels = list(dict.fromkeys(sel.method))
        for i, name in enumerate(datasets):
            g = sel[sel.dataset == name].set_index("method").reindex(labels)
            ax.errorbar([j + 0.35 * i for j in range(len(labels))], g["diff"],
                        yerr=[g["diff"] - g.lo, g.hi - g["diff"]], fmt="o", color=f"C{i}",
                        label=f"{name} ({'in' if name in in_domain else 'out of'} domain)")
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xticks(range(len(labels)), [lab.split(":")[0] for lab in labels], rotation=20,
                      ha="right")
        ax.set(title=f"searched with {kind}", ylabel="ΔnDCG@10 vs raw question")
    fig.tight_layout()
    plots.legend_outside(fig, *axes[0][0].get_legend_handles_labels(), title="test set")
    return fig


def extra_sentences(ndcg: pd.DataFrame, in_domain: set[str]) -> list[str]:
    """"What we found"'s own sentences: trained rows out of domain, the rule split."""
    out_dom = ndcg[(ndcg.kind == "trained") & ~ndcg.dataset.isin(in_domain)]
    extra = [] if out_dom.empty else [
        f"Out of domain ({', '.join(sorted(set(out_dom.dataset)))}), the trained rows beat the raw "
        f"question in {int((out_dom.lo > 0).sum())} of {len(out_dom)} comparisons."]
    rule = ndcg[ndcg.kind == "model-free"]
    extra += [f"The model-free rule split beats the raw question in {int((rule.lo > 0).sum())} and "
              f"falls below it in {int((rule.hi < 0).sum())} of {len(rule)} comparisons."]
    return extra


def records(transfer: pd.DataFrame, reader: pd.DataFrame, cmp: pd.DataFrame) -> dict[str, Any]:
    """The numbers the tests read: every row's nDCG@10, the reader's F1 and every
    comparison ``[diff, lo, hi]``."""
    out: dict[str, Any] = {}
    for _, r in transfer.iterrows():
        out[f"{r.dataset}.{r.retriever}.{r.model}.ndcg10"] = r["nDCG@10"]
    for _, r in reader.iterrows():
        out[f"reader.{r.dataset}.{r.model}.f1"] = r.F1
    for _, r in cmp.iterrows():
        out[f"{r.dataset}.{r.retriever}.{r.metric}.{r.method}.vs_raw"] = [r["diff"], r.lo, r.hi]
    return out
