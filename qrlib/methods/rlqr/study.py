"""Notebook 14's grid as calls: RL-QR on each index and retriever (Alg. 1, Eq. 5-7, Tables 1-3).

:mod:`qrlib.methods.rlqr.pipeline` does one step for one index; this module runs the
notebook's grid (datasets x retrievers x training sets) and shapes what it shows:

1. :func:`load_indexes` cuts each BEIR test collection and builds its retrievers;
2. :func:`synthesize_all` writes the synthetic questions of every index (Alg. 1) and
   summarises them (Table 1's columns);
3. :func:`train_all` trains one rewriter per index, retriever and training set (:data:`SETS`)
   on synthetic questions only, rewarded by Eq. 5-6;
4. :func:`rewrite_test` decodes the real test queries with the untrained model and each
   adapter under the training's decoding contract, and :func:`evaluate` scores them against
   the raw query (Table 2's layout, nDCG@3, with query length as Table 3);
5. figures, examples, recorded numbers and the extra findings.
"""
from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from qrlib.core.errors import QrlibError
from qrlib.eval.compare import compare, comparison_table
from qrlib.eval.scale import SCALE_COLUMNS, fmt_scale, log_scale, scale_columns
from qrlib.eval.scoring import search_scores
from qrlib.eval.stats import fmt_interval, span

__all__ = ["SETS", "MEASURES", "CAPTIONS", "caption", "load_indexes", "synthesize_all",
           "synthesis_examples", "training_questions", "train_all", "read_logs",
           "curves_figure", "curves_setting", "rewrite_test", "evaluate", "per_query_pairs",
           "rewrite_examples", "records", "extra_sentences"]

#: Training sets: key -> (row label, run-name suffix).
SETS: dict[str, tuple[str, str]] = {"all": ("RL-QR", ""),
                                    "hard": ("RL-QR (hard questions)", "-hard"),
                                    "room": ("RL-QR (source at 2-50)", "-room")}
MEASURES = ("nDCG@3", "nDCG@10")

CAPTIONS: dict[str, str] = {
    "14_synthesis": ("RL-QR query synthesis with {model}: usable questions, their length in "
                     "words, and how often each retriever ranks the source document 1st / in "
                     "the top 10 when the question is searched as it is [profile: {profile}]"),
    "14_rlqr_curves": ("RL-QR training on synthetic queries: reward, its nDCG part and format "
                       "validity per step"),
    "14_rlqr_results": ("RL-QR on the real test queries: nDCG@3, query length in words (mean, "
                        "std; Tables 2-3 layout), format and modification rates; training "
                        "scale ({scale}) from each run's log; the rewriters saw synthetic "
                        "queries only [profile: {profile}]"),
    "14_comparisons": ("Untrained and RL-QR rewrites minus the raw query, nDCG@3 and nDCG@10, "
                       "95% paired bootstrap over the test queries (qrlib.eval.compare schema) "
                       "[profile: {profile}]"),
    "14_per_query": ("Per-query nDCG@3 of each RL-QR rewriter (y) against the raw query (x) on "
                     "the real test queries; title: n, wins / losses / ties and the mean "
                     "difference with its 95 % paired-bootstrap interval"),
}


def caption(name: str, **fields: Any) -> str:
    """The caption of table or figure ``name``, its ``{fields}`` filled (``{scale}``: the
    training-scale columns)."""
    return CAPTIONS[name].format(scale=", ".join(SCALE_COLUMNS), **fields)


def load_indexes(datasets: Sequence[str], kinds: Sequence[str], *, n_test_queries: int | None,
                 n_distractors: int | None, seed: int = 0, data_dir: Any = None,
                 cache_dir: Any = None) -> tuple[dict[str, Any], dict[tuple[str, str], Any]]:
    """``(data, retrievers)``: each dataset's seeded test cut, and a retriever of each kind
    over its corpus, ``{(dataset, kind): retriever}``; prints the sizes."""
    from qrlib.data import datasets as qdata
    from qrlib.retrieval import retrievers as retrieval

    data, retr = {}, {}
    for name in datasets:
        full = qdata.load_dataset(name, "test", data_dir=data_dir)
        data[name] = te = qdata.subset(full, n_queries=n_test_queries,
                                       n_distractors=n_distractors, seed=seed)
        for kind in kinds:
            kw = {"cache_dir": cache_dir, "show_progress": False} if kind == "dense" else {}
            retr[name, kind] = retrieval.build_retriever(kind, te.corpus, **kw)
        print(f"{name}: {len(te.queries)} test queries, {len(te.corpus)} documents")
    return data, retr


def synthesize_all(data: Mapping[str, Any], retrievers: Mapping[tuple[str, str], Any],
                   kinds: Sequence[str], folder: str | Path, *, model: str, n_docs: int,
                   doc_words: int, max_new_tokens: int, seed: int = 0) -> tuple[dict, Any]:
    """Alg. 1 on every index: ``n_docs`` unjudged documents each
    (:func:`~qrlib.methods.rlqr.pipeline.synthesis_docs`), a (scenario, question, answer)
    per document by ``model`` (cached under ``folder/<dataset>``), and a summary row per
    index (:func:`~qrlib.methods.rlqr.pipeline.synthesis_summary`). Returns
    ``(attempts by dataset, summary table)``; each synthesis releases its model and engine
    itself (:func:`~qrlib.methods.rlqr.pipeline.synthesize`)."""
    from qrlib.methods.rlqr import pipeline as rlqr  # it loads the trainer

    attempts, rows = {}, []
    for name, te in data.items():
        docs = rlqr.synthesis_docs(te, n_docs, seed=seed)
        attempts[name], how = rlqr.synthesize(te, docs, Path(folder) / name, model=model,
                                              doc_words=doc_words,
                                              max_new_tokens=max_new_tokens)
        print(f"{name}: {len(docs)} documents, synthesis {how}")
        rows.append(rlqr.synthesis_summary(name, attempts[name],
                                           {k: retrievers[name, k].search for k in kinds}))
    return attempts, pd.DataFrame(rows)


def synthesis_examples(attempts: Mapping[str, Any], n: int) -> Any:
    """The first ``n`` synthesis attempts of each index (the reason says why one was dropped)."""
    return pd.concat([a.head(n).assign(dataset=name) for name, a in attempts.items()])[
        ["dataset", "doc_id", "usable", "reason", "scenario", "question"]]


def training_questions(tset: str, queries: Mapping[str, str],
                       qrels: Mapping[str, Mapping[str, int]], searcher: Any) -> tuple[dict, dict]:
    """The questions of training set ``tset`` (:data:`SETS`): all of them, the ``hard``
    ones (:func:`~qrlib.methods.rlqr.pipeline.hard_subset`) or those with ``room``
    (:func:`~qrlib.methods.rlqr.pipeline.room_subset`)."""
    if tset not in SETS:
        raise QrlibError(f"unknown train_sets {[tset]}; accepted: {', '.join(SETS)}")
    from qrlib.methods.rlqr import pipeline as rlqr  # it loads the trainer

    if tset == "all":
        return dict(queries), {q: dict(r) for q, r in qrels.items()}
    pick = rlqr.hard_subset if tset == "hard" else rlqr.room_subset
    return pick(queries, qrels, searcher)


def train_all(attempts: Mapping[str, Any], retrievers: Mapping[tuple[str, str], Any],
              kinds: Sequence[str], train_sets: Sequence[str], *, run_dir: str | Path,
              train_steps: int, stop: Sequence[str] = (), lora_r: int = 16,
              lever_datasets: Sequence[str] | None = None,
              **train_kw: Any) -> tuple[dict[tuple[str, str, str], dict], Any]:
    """One rewriter per (dataset, retriever, training set) on the synthetic questions
    (:func:`~qrlib.methods.rlqr.pipeline.train_rewriter`, run ``rlqr-<dataset>-<kind>``
    plus the set's suffix); a set with no question trains nothing (said in one line). The
    sets other than ``all`` (the levers) train only on ``lever_datasets`` when it is given.
    ``train_kw``: k, prefill, model, algorithm, beta, prompts_per_step, num_generations,
    max_completion_length, temperature, top_p, learning_rate, dynamic_sampling, seed.
    Returns ``(summaries, training-set sizes)``; prints each run and the sizes."""
    from qrlib.methods.rlqr import pipeline as rlqr  # it loads the trainer

    unknown = [t for t in train_sets if t not in SETS]
    if unknown:
        raise QrlibError(f"unknown train_sets {unknown}; accepted: {', '.join(SETS)}")
    extra = sorted(set(lever_datasets or []) - set(attempts))
    if extra:
        raise QrlibError(f"lever_datasets {extra} are not in datasets; accepted: "
                         f"{', '.join(attempts)}")
    summaries, sizes = {}, []
    for name, att in attempts.items():
        queries, qrels = rlqr.training_set(att)
        sets = [t for t in train_sets if t == "all" or lever_datasets is None
                or name in lever_datasets]
        for kind in kinds:
            for tset in sets:
                q_, r_ = training_questions(tset, queries, qrels, retrievers[name, kind])
                sizes.append({"dataset": name, "retriever": kind, "training set": tset,
                              "questions": len(q_)})
                if not q_:
                    print(f"{name} · {kind}: no {tset} training question, so no rewriter for it")
                    continue
                summaries[name, kind, tset] = s = rlqr.train_rewriter(
                    f"rlqr-{name}-{kind}{SETS[tset][1]}", retrievers[name, kind], q_, r_,
                    run_dir=run_dir, dataset=name, retriever=kind, max_steps=train_steps,
                    lora_r=lora_r, lora_alpha=2 * lora_r, stop=list(stop),
                    save_steps=max(1, train_steps // 4), **train_kw)
                print(name, kind, tset, {k: s[k] for k in ("steps", "train_seconds", "rollouts")})
    sizes = pd.DataFrame(sizes)
    print(sizes.to_string(index=False))
    gc.collect()  # the trainers' models and engines, before the evaluation loads its own
    return summaries, sizes


def read_logs(summaries: Mapping[Any, Mapping[str, Any]]) -> dict[Any, Any]:
    """Each run's per-step log frame, by the summaries' keys."""
    return {key: pd.read_csv(s["log"], dtype={"qids": str}) for key, s in summaries.items()}


def curves_figure(logs: Mapping[tuple[str, str, str], Any], reward_k: int) -> Any:
    """Three panels per step (rolling mean of 8): the reward, its nDCG@k part and the share
    of well-formed rollouts, a colour per run."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.4))
    for i, ((name, kind, tset), log) in enumerate(logs.items()):
        ndcg = next((c for c in ("part/ndcg", f"part/ndcg@{reward_k}") if c in log), None)
        for ax, col in zip(axes, ("reward", ndcg, "format_valid")):
            if col:
                ax.plot(log.step, log[col].rolling(8, min_periods=1).mean(), color=f"C{i}",
                        label=f"{name} · {kind} · {tset}")
    axes[0].set(xlabel="GRPO step", ylabel="reward (rolling mean of 8)")
    axes[1].set(xlabel="GRPO step", ylabel=f"nDCG@{reward_k} part")
    axes[2].set(xlabel="GRPO step", ylabel="well-formed rollouts", ylim=(-0.05, 1.05))
    for ax in axes:
        plots.legend_outside(ax, where="below")
    fig.tight_layout()
    return fig


def curves_setting(model: str, logs: Mapping[tuple[str, ...], Any]) -> str:
    """The setting line of the training figure: the policy and each run's scale."""
    return f"{model}; from the logs: " + "; ".join(
        f"{'/'.join(key)} {fmt_scale(log_scale(lg))}" for key, lg in logs.items())


def _rewrite(model: str, queries: Mapping[str, str], contract: Any, adapter: Any,
             autocast: bool | None) -> Any:
    from qrlib.generation import policy, rewrite
    from qrlib.generation.contract import DecodingContract

    if adapter is not None and DecodingContract.load(adapter) != contract:
        raise QrlibError(f"{adapter}: its decoding contract differs from the notebook's")
    m, tok = policy.load_policy(model, adapter=adapter)
    df = rewrite.rewrite_queries(m, tok, queries, contract=adapter or contract,
                                 autocast=autocast, progress=False)
    del m
    gc.collect()  # the engine stays: the next model's weights are pushed into it (as in 13);
    return df     # a new engine per model was never given back, and six went out of memory


def rewrite_test(model: str, data: Mapping[str, Any],
                 summaries: Mapping[tuple[str, str, str], Mapping[str, Any]], *, contract: Any,
                 autocast: bool | None = False) -> dict[tuple[str, ...], Any]:
    """Greedy rewrites of each index's real test queries: ``(dataset, "untrained")`` by the
    base model under ``contract`` (the training's: prompt, prefill, stop strings, budget,
    parser), and ``(dataset, kind, set)`` by each trained adapter under its own, which must
    equal ``contract``."""
    out: dict[tuple[str, ...], Any] = {}
    for name, te in data.items():
        out[name, "untrained"] = _rewrite(model, te.queries, contract, None, autocast)
        for key, s in summaries.items():
            if key[0] == name:
                out[key] = _rewrite(model, te.queries, contract, s["adapter"], autocast)
    return out


def _row(name: str, kind: str, label: str, pq: Any, texts: Mapping[str, str], df: Any,
         scale: Mapping[str, Any]) -> dict[str, Any]:
    words = pd.Series([len(t.split()) for t in texts.values()])
    return {"dataset": name, "retriever": kind, "model": label, "nDCG@3": pq["nDCG@3"].mean(),
            "query words mean": words.mean(), "query words std": words.std(),
            "format ok": 1.0 if df is None else df.format_ok.mean(),
            "modified": 0.0 if df is None else df.modified.mean(), **scale}


def evaluate(data: Mapping[str, Any], retrievers: Mapping[tuple[str, str], Any],
             kinds: Sequence[str], rewrites: Mapping[tuple[str, ...], Any],
             logs: Mapping[tuple[str, str, str], Any], *, model: str,
             train_sets: Sequence[str], resamples: int = 2000,
             seed: int = 0) -> tuple[Any, Any, dict]:
    """Table 2's layout on the real test queries, per index and retriever: the raw query,
    the untrained rewrites and each trained rewriter (searched with its own retriever), a
    row each (nDCG@3, query words mean and std, format and modification rates, training
    scale), and each rewrite minus the raw query in nDCG@3 and nDCG@10 (95 % paired
    bootstrap). Returns ``(results, comparisons, per-query scores)``, the last as
    ``{(dataset, kind): {label: DataFrame of MEASURES}}``."""
    from qrlib.generation import engine

    rows, cmp_rows, per_q = [], [], {}
    for name, te in data.items():
        n = len(te.queries)
        untrained = rewrites[name, "untrained"]
        for kind in kinds:
            methods = {"raw query": (None, scale_columns(None, test_queries=n), "baseline"),
                       "untrained": (untrained, scale_columns(
                           model, test_queries=n, test_valid=untrained.format_ok.mean()),
                           "untrained")}
            for tset in [t for t in train_sets if (name, kind, t) in rewrites]:
                df = rewrites[name, kind, tset]
                methods[SETS[tset][0]] = (df, scale_columns(
                    model, [logs[name, kind, tset]], test_queries=n,
                    test_valid=df.format_ok.mean()), "trained")
            retr = retrievers[name, kind]
            raw = search_scores(retr, te.qrels, te.queries, MEASURES)
            scores = {}
            for label, (df, scale, _) in methods.items():
                texts = te.queries if df is None else dict(zip(df.qid, df.search_text))
                scores[label] = raw if df is None else search_scores(retr, te.qrels, texts,
                                                                          MEASURES)
                rows.append(_row(name, kind, label, scores[label], texts, df, scale))
            per_q[name, kind] = scores
            for metric in MEASURES:
                for label, (df, scale, kind_) in methods.items():
                    if df is not None:
                        cmp_rows.append(compare(scores[label][metric].to_dict(),
                                                raw[metric].to_dict(), paper="rlqr",
                                                dataset=name, retriever=kind, metric=metric,
                                                method=label, kind=kind_, baseline="raw query",
                                                scale=scale, resamples=resamples, seed=seed))
    engine.close_engines()
    return pd.DataFrame(rows), comparison_table(cmp_rows), per_q


def per_query_pairs(comparisons: Any, per_q: Mapping[tuple[str, str], Mapping[str, Any]],
                    metric: str = "nDCG@3") -> tuple[dict, dict]:
    """For :func:`qrlib.plots.per_query_scatter`: each trained rewriter against the raw
    query in ``metric``, ``({"dataset/kind: method": (raw, method)}, {same: interval})``."""
    head = comparisons[(comparisons.kind == "trained") & (comparisons.metric == metric)]
    key = {f"{r.dataset}/{r.retriever}: {r.method}": r for r in head.itertuples()}
    pairs = {k: (per_q[r.dataset, r.retriever]["raw query"][metric].to_dict(),
                 per_q[r.dataset, r.retriever][r.method][metric].to_dict())
             for k, r in key.items()}
    return pairs, {k: fmt_interval(r._asdict()) for k, r in key.items()}


def rewrite_examples(data: Mapping[str, Any], rewrites: Mapping[tuple[str, ...], Any],
                     kinds: Sequence[str], train_sets: Sequence[str], n: int) -> Any:
    """The first ``n`` test queries of each index and retriever with their untrained and
    trained rewrites."""
    ex = []
    for name, te in data.items():
        base = rewrites[name, "untrained"].set_index("qid")
        for kind in kinds:
            trained = {SETS[t][0]: rewrites[name, kind, t].set_index("qid") for t in train_sets
                       if (name, kind, t) in rewrites}
            for q in list(te.queries)[:n]:
                ex.append({"index": f"{name} · {kind}", "query": te.queries[q],
                           "untrained": base.loc[q, "rewrite"],
                           **{label: df.loc[q, "rewrite"] for label, df in trained.items()}})
    return pd.DataFrame(ex)


def records(synth: Any, results: Any, comparisons: Any) -> dict[str, Any]:
    """Recorded numbers: usable synthetic questions per index, nDCG@3 of every row, and
    every comparison with the raw query as [diff, lo, hi]."""
    out: dict[str, Any] = {f"{r['dataset']}.synthesis.usable": r["usable"]
                           for r in synth.to_dict("records")}
    for r in results.to_dict("records"):
        out[f"{r['dataset']}.{r['retriever']}.{r['model']}.ndcg3"] = r["nDCG@3"]
    for r in comparisons.to_dict("records"):
        out[f"{r['dataset']}.{r['retriever']}.{r['method']}.{r['metric']}.vs_raw"] = [
            r["diff"], r["lo"], r["hi"]]
    return out


def extra_sentences(results: Any, comparisons: Any, synth: Any) -> list[str]:
    """Notebook 14's own findings: how often the trained rewriters modify the query, and
    where BM25 already ranks the source of most synthetic questions first (copying is then
    near-optimal)."""
    trained = results[results.model.isin(comparisons[comparisons.kind == "trained"].method)]
    out = [f"The trained rewriters modify {span(trained.modified)} of the real test queries."]
    out += [f"On {r['dataset']}, BM25 ranks the source document first for "
            f"{r.get('bm25 source@1', float('nan')):.0%} of the {r['usable']} synthetic "
            "training questions as they are, so copying them is already near-optimal there."
            for r in synth.to_dict("records") if r.get("bm25 source@1", 0) >= 0.5]
    return out
