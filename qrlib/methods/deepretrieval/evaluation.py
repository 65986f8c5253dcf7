"""One evaluation of every rewrite a run left behind: the steps notebook 10 calls.

The training notebooks save their greedy test rewrites (``<source>/rewrites/<dataset>/
<method>.jsonl``) and the test collection each was scored on (a
:class:`~qrlib.data.cut.CollectionCut`). This module finds them (:func:`find_rewrites`,
:func:`trained_adapters`), rebuilds the collections (:func:`load_collections`), searches and
scores every method with the measures of ACQO's Tables 2-3 and splits the per-query latency
as its Table 6a does (:func:`score_methods`), compares each method with the raw query by a
paired bootstrap (:func:`vs_raw_rows`, with the training scale of :func:`method_scale`),
re-times generation of each adapter (:func:`fresh_timing`) and writes the closing summary
(:func:`result_records`, :func:`summary_lines`).

It reads what the training notebooks wrote but never imports their trainer, so evaluating a
run does not depend on the training code.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from qrlib.core.io import load_json
from qrlib.core.records import load_record
from qrlib.data import datasets as qdata
from qrlib.data.cut import CollectionCut
from qrlib.eval import metrics
from qrlib.eval.compare import compare, describe
from qrlib.eval.prose import count_sentence, spread, strongest_weakest
from qrlib.eval.scale import scale_columns
from qrlib.eval.stats import span
from qrlib.generation import policy, rewrite
from qrlib.retrieval import fusion, retrievers as retrieval

__all__ = ["MEASURES", "LABELS", "find_rewrites", "inventory", "trained_adapters",
           "load_collections", "Retrievers", "score_methods", "method_scale", "vs_raw_rows",
           "fresh_timing", "vs_raw_figure", "result_records", "summary_lines"]

#: The eight measures of ACQO Tables 2-3, as ir-measures names.
MEASURES = ("RR@3", "nDCG@3", "R@4", "R@10", "R@100", "AP@10", "RR@10", "nDCG@10")
#: The paper's names of those measures where they differ (MRR is RR, MAP is AP).
LABELS = {"RR@3": "MRR@3", "RR@10": "MRR@10", "AP@10": "MAP@10", "nDCG@3": "NDCG@3",
          "nDCG@10": "NDCG@10"}

Found = list[tuple[str, str, str, Path]]  # (source notebook, dataset, method, rewrite file)


def find_rewrites(run_dir: str | os.PathLike, sources: Sequence[str]
                  ) -> tuple[Found, dict[str, dict]]:
    """Every rewrite file under ``run_dir/<source>/rewrites/*/*.jsonl`` as ``(source,
    dataset, method, path)``, and each source's ``settings.json`` (``{}`` without one); a
    source that left no rewrites is named in one printed line and skipped."""
    run_dir = Path(run_dir)
    found, settings = [], {}
    for src in sources:
        base = run_dir / src
        if not (base / "rewrites").exists():
            print(f"{src}: no rewrites under {base} (notebook not run in this profile?)")
            continue
        settings[src] = load_json(base / "settings.json") if (base / "settings.json").exists() else {}
        for p in sorted((base / "rewrites").glob("*/*.jsonl")):
            found.append((src, p.parent.name, p.stem, p))
    return found, settings


def inventory(found: Found) -> Any:
    """The ``source``, ``dataset``, ``method`` of every rewrite file, as a frame."""
    import pandas as pd

    return pd.DataFrame([(s, d, m) for s, d, m, _ in found], columns=["source", "dataset", "method"])


def trained_adapters(run_dir: str | os.PathLike, found: Found) -> list[Path]:
    """The adapter folder behind each trained rewrite found (run ``<dataset>-<kind>-<mode>``
    for method ``trained-<kind>-<mode>``), sorted; an error names those missing."""
    run_dir = Path(run_dir)
    adapters = sorted({run_dir / "rl" / f"{d}-{m[len('trained-'):]}" / "adapter"
                       for _, d, m, _ in found if m.startswith("trained-")})
    missing = [a for a in adapters if not (a / "adapter_config.json").exists()]
    assert not missing, f"trained rewrites without their adapter: {missing}"
    return adapters


def load_collections(run_dir: str | os.PathLike, found: Found,
                     data_dir: str | os.PathLike | None) -> dict[tuple[str, str], tuple[Any, dict]]:
    """``{(source, dataset): (test queries with qrels, corpus)}`` rebuilt from each source's
    :class:`~qrlib.data.cut.CollectionCut` record, so every method is scored on exactly the
    queries and documents its notebook used."""
    coll = {}
    for src, name, _, _ in found:
        if (src, name) not in coll:
            cut = load_record(CollectionCut, Path(run_dir) / src / "collections" / f"{name}.json",
                              writer=f"notebook {src}")
            coll[src, name] = cut.load(data_dir)
    return coll


class Retrievers(retrieval.IndexCache):
    """One index per ``((source, dataset), retriever kind)`` over the collection's corpus,
    built on first use."""

    def __init__(self, coll: Mapping[tuple[str, str], tuple[Any, dict]], *,
                 cache_dir: str | os.PathLike | None = None) -> None:
        super().__init__(cache_dir=cache_dir)
        self.coll = coll

    def __call__(self, key: tuple[str, str], kind: str) -> Any:
        return self.get(key, kind, self.coll[key][1])


def _search_lists(retr: Any, texts: list[list[str]], k: int) -> tuple[list, float, float]:
    """Search each query's texts (one, or several fused with RSF): the ranked lists, the
    one-query-at-a-time retrieval seconds and the fusion seconds, both per query."""
    flat = [t for ts in texts for t in ts]
    t0 = time.perf_counter()
    for t in flat:  # one query at a time: online latency
        retr.search([t], k)
    t_ret = (time.perf_counter() - t0) / len(texts)
    res = retr.search(flat, k)
    lists, i = [], 0
    t0 = time.perf_counter()
    for ts in texts:
        sub = res[i:i + len(ts)]
        i += len(ts)
        lists.append(sub[0] if len(sub) == 1 else fusion.rsf(sub))
    t_fus = (time.perf_counter() - t0) / len(texts) if any(len(ts) > 1 for ts in texts) else 0.0
    return lists, t_ret, t_fus


def score_methods(found: Found, coll: Mapping[tuple[str, str], tuple[Any, dict]],
                  retrievers: Callable[[tuple[str, str], str], Any], kinds: Sequence[str], *,
                  k: int) -> tuple[Any, Any, Any, dict, dict]:
    """Search every method's rewrites with every retriever kind (a trained adapter only with
    the one it was trained for) to depth ``k`` and score :data:`MEASURES`.

    Returns ``(effect, latency, tokens, per_query, valid)``: one row per dataset, retriever
    and method (sorted); per-query generation, retrieval and fusion milliseconds and their
    total (ACQO Table 6a); generated tokens per method (Table 8); per-query nDCG@10 frames
    keyed ``(dataset, retriever, method)``; and the test format validity per ``(dataset,
    method)`` (None when the file has no ``format_ok``)."""
    import pandas as pd

    rows, lat_rows, tok_rows, perq, valid = [], [], [], {}, {}
    for src, name, method, path in found:
        df = pd.read_json(path, lines=True, dtype={"qid": str})
        valid[name, method] = float(df.format_ok.mean()) if "format_ok" in df else None
        te, _ = coll[src, name]
        for kind in kinds:
            if method.startswith("trained-") and not method.startswith(f"trained-{kind}-"):
                continue
            texts = (df.search_texts.tolist() if "search_texts" in df
                     else [[t] for t in df.search_text.tolist()])
            lists, t_ret, t_fus = _search_lists(retrievers((src, name), kind), texts, k)
            run = dict(zip(df.qid, lists))
            ev = metrics.evaluate(run, te.qrels, MEASURES)
            perq[name, kind, method] = metrics.evaluate(run, te.qrels, ["nDCG@10"], per_query=True)
            rows.append({"dataset": name, "retriever": kind, "method": method, "source": src,
                         "n_queries": len(df), **{LABELS.get(m, m): ev[m].iloc[0] for m in MEASURES}})
            lat_rows.append({"dataset": name, "retriever": kind, "method": method,
                             "generation_ms": 1000 * df.gen_seconds.mean() if "gen_seconds" in df else 0.0,
                             "retrieval_ms": 1000 * t_ret, "fusion_ms": 1000 * t_fus})
        if "gen_tokens" in df:
            tok_rows.append({"dataset": name, "method": method, "mean_tokens": df.gen_tokens.mean(),
                             "median_tokens": df.gen_tokens.median(), "max_tokens": df.gen_tokens.max()})
    effect = pd.DataFrame(rows).sort_values(["dataset", "retriever", "method"]).reset_index(drop=True)
    latency = pd.DataFrame(lat_rows)
    latency["total_ms"] = latency[["generation_ms", "retrieval_ms", "fusion_ms"]].sum(axis=1)
    return effect, latency, pd.DataFrame(tok_rows), perq, valid


def method_scale(name: str, method: str, n_test: int, *, run_dir: str | os.PathLike,
                 settings: Mapping[str, Mapping[str, Any]],
                 valid: Mapping[tuple[str, str], float | None]) -> dict[str, Any]:
    """The training scale of a method's row from its run's log (:mod:`qrlib.eval.scale`); a
    trained method whose run log is missing is an error, not a row without training."""
    import pandas as pd

    if not method.startswith("trained-"):
        pol = None if method == "raw" else next(
            (s.get("model") for s in settings.values() if s.get("model")), None)
        return scale_columns(pol, test_queries=n_test,
                             test_valid=None if method == "raw" else valid[name, method])
    log = Path(run_dir) / "rl" / f"{name}-{method[len('trained-'):]}" / "log.csv"
    assert log.exists(), f"{method} on {name}: no training log at {log}"
    pol = load_json(log.parent / "config.json").get("model")
    return scale_columns(pol, [pd.read_csv(log, dtype={"qids": str})], test_queries=n_test,
                         test_valid=valid[name, method])


def vs_raw_rows(perq: Mapping[tuple[str, str, str], Any],
                scale: Callable[[str, str, int], Mapping[str, Any]], *, resamples: int = 10_000,
                seed: int = 0) -> list[dict[str, Any]]:
    """Every method against the raw query on the same retriever and queries: nDCG@10, paired
    bootstrap (:func:`qrlib.eval.compare.compare`); ``kind`` trained or untrained by name."""
    out = []
    for (name, kind, method), pq in perq.items():
        if method == "raw" or (name, kind, "raw") not in perq:
            continue
        a = pq.set_index("query_id")["nDCG@10"].to_dict()
        b = perq[name, kind, "raw"].set_index("query_id")["nDCG@10"].to_dict()
        out.append(compare(a, b, paper="deepretrieval", dataset=name, retriever=kind,
                           metric="nDCG@10", method=method,
                           kind="trained" if method.startswith("trained-") else "untrained",
                           baseline="raw", scale=scale(name, method, len(a)),
                           resamples=resamples, seed=seed))
    return out


def fresh_timing(adapters: Sequence[Path], coll: Mapping[tuple[str, str], tuple[Any, dict]],
                 settings: Mapping[str, Any], n_queries: int) -> Any:
    """Generation time of each adapter on its dataset's first ``n_queries`` test queries, one
    at a time and in one batch, decoded with the adapter's own contract (its training's
    prompt, stop strings and budget). One row per adapter and batch size; none when
    ``n_queries`` is 0."""
    import pandas as pd

    fresh = []
    if not n_queries:
        return pd.DataFrame(fresh)
    for a in adapters:
        cfg = load_json(a.parent / "config.json")
        name = cfg["dataset"]
        src = next(iter(settings), None)
        te = coll[src, name][0] if (src, name) in coll else qdata.load_dataset(name, "test")
        qs = dict(list(te.queries.items())[:n_queries])
        m, tok = policy.load_policy(cfg["model"], adapter=a)
        for bs in (1, len(qs)):
            df = rewrite.rewrite_queries(m, tok, qs, contract=a,
                                         mode="expand" if cfg.get("expansion") else "rewrite",
                                         batch_size=bs, progress=False)
            fresh.append({"adapter": a.parent.name, "batch_size": bs,
                          "generation_ms_per_query": 1000 * df.gen_seconds.mean(),
                          "tokens_per_query": df.gen_tokens.mean()})
        del m
    return pd.DataFrame(fresh)


def vs_raw_figure(vs_raw: Any) -> tuple[Any, str]:
    """Each method's nDCG@10 minus the raw query's with its interval as an error bar, one
    colour per (dataset, retriever), a dashed line at 0. Returns ``(figure, setting)``, the
    setting naming the test queries per dataset."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    pairs = [" · ".join(k) for k in dict.fromkeys(zip(vs_raw.dataset, vs_raw.retriever))]
    methods = list(dict.fromkeys(vs_raw.method))
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.35 * len(vs_raw)))
    step = 0.8 / max(1, len(pairs))
    for j, pair in enumerate(pairs):
        sel = vs_raw[(vs_raw.dataset + " · " + vs_raw.retriever) == pair]
        y = [methods.index(m) + (j - (len(pairs) - 1) / 2) * step for m in sel.method]
        ax.errorbar(sel["diff"], y, xerr=[sel["diff"] - sel["lo"], sel["hi"] - sel["diff"]],
                    fmt="o", capsize=3, color=f"C{j}", label=pair)
    ax.axvline(0, color="0.4", ls="--", lw=1)
    ax.set_yticks(range(len(methods)), methods)
    ax.invert_yaxis()
    ax.set(xlabel="nDCG@10 minus the raw query's (95 % paired bootstrap)", ylabel="method")
    plots.legend_outside(ax, title="dataset · retriever")
    n_q = ", ".join(f"{d}: {n} queries"
                    for d, n in vs_raw.groupby("dataset")["test queries"].max().items())
    return fig, n_q


def result_records(effect: Any, latency: Any, vs_raw: Any) -> dict[str, Any]:
    """The key numbers the smoke tests read, in recording order: NDCG@10 per row, mean
    retrieval milliseconds per retriever, and each comparison's ``[diff, lo, hi]``."""
    out: dict[str, Any] = {}
    for r in effect.to_dict("records"):
        out[f"{r['dataset']}.{r['retriever']}.{r['method']}.ndcg10"] = r["NDCG@10"]
    if len(latency):
        for kind, grp in latency.groupby("retriever"):
            out[f"latency.{kind}.retrieval_ms"] = grp.retrieval_ms.mean()
    for r in vs_raw.to_dict("records"):
        out[f"{r['dataset']}.{r['retriever']}.{r['method']}.vs_raw"] = [r["diff"], r["lo"], r["hi"]]
    return out


def _best_sentence(effect: Any) -> str:
    """How often the raw query has the highest NDCG@10 of its (dataset, retriever) block,
    its range, and the method that does where it does not."""
    best, raw, others = [], {}, []
    for (name, kind), grp in effect.groupby(["dataset", "retriever"]):
        g = grp.set_index("method")["NDCG@10"]
        top = g.idxmax()
        best.append(top)
        if "raw" in g.index:
            raw[(name, kind)] = g["raw"]
        if top != "raw":
            others.append(f"{top} on {name}/{kind} ({g[top]:.3f})")
    text = (f"The raw query{f', at NDCG@10 {spread(raw)},' if raw else ''} scores highest in "
            f"{best.count('raw')} of {len(best)} dataset/retriever block"
            f"{'s' if len(best) != 1 else ''}")
    return text + ("; the highest elsewhere: " + ", ".join(others) if others else "") + "."


def _latency_sentence(latency: Any, fresh: Any) -> str:
    """Generation time (upstream and re-timed here) against retrieval time per retriever,
    and which of the two dominates."""
    retrieval = ", ".join(f"{k} {g.retrieval_ms.mean():.2f} ms"
                          for k, g in latency.groupby("retriever"))
    gen = latency[latency.generation_ms > 0].generation_ms
    if not len(gen):
        return f"No method generates text in this run; retrieval takes {retrieval} per query."
    timed = ""
    if len(fresh):
        one = fresh[fresh.batch_size == 1].generation_ms_per_query
        many = fresh[fresh.batch_size > 1].generation_ms_per_query
        timed = (f" and, re-timed here (`10_generation_timing`), {span(one, '.0f')} ms one at a "
                 f"time" + (f" and {span(many, '.0f')} ms in one batch" if len(many) else ""))
    ret = latency.retrieval_ms
    lead = ("generation, not the search," if gen.min() > ret.max() else
            "the search, not generation," if gen.max() < ret.min() else "neither part")
    return (f"Generation took {span(gen, '.0f')} ms per query in the upstream notebooks' batched "
            f"test decoding (`10_latency`){timed}, against retrieval {retrieval}: {lead} "
            f"dominates the latency of every method.")


def _trained_sentences(vs_raw: Any) -> list[str]:
    """Each trained row against the raw query (:func:`qrlib.eval.compare.describe`) when
    there is one; else the count of verdicts, the strongest and, below 0, the weakest."""
    rows = vs_raw[vs_raw["kind"] == "trained"] if len(vs_raw) else vs_raw
    if len(rows) <= 1:
        return [f"{describe(r)}." for r in rows.to_dict("records")]
    return [count_sentence(rows, "trained"), *strongest_weakest(rows, describe)]


def summary_lines(effect: Any, latency: Any, fresh: Any, tokens: Any, vs_raw: Any) -> list[str]:
    """The sentences of "What we found" (two to six; join them with
    :func:`qrlib.eval.findings.paragraph`): how often the raw query is the best method per
    dataset and retriever, where the latency goes, the generated tokens, and the trained
    rows against the raw query (:func:`qrlib.eval.compare.describe`; counted, with the
    strongest and the weakest, when there are several)."""
    out = [_best_sentence(effect)] if len(effect) else []
    if len(latency):
        out.append(_latency_sentence(latency, fresh))
    tk = tokens[tokens.mean_tokens > 0] if len(tokens) else tokens
    if len(tk):
        out.append(f"Generated tokens per query average {span(tk.mean_tokens, '.1f')}.")
    return out + _trained_sentences(vs_raw)
