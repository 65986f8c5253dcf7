"""The training half of notebooks 08 and 15 (SAGE Sec. 2.3-2.5, Tables 1-3) as calls.

:mod:`qrlib.methods.sage.pipeline` trains and evaluates one variant on one dataset; this
module runs it over the notebooks' grid and shapes what they show:

* :class:`Retrievers` builds one index per (collection cut, retriever kind), once;
* :func:`load_data` cuts each dataset (:func:`~qrlib.methods.sage.pipeline.sage_data`);
* :func:`train_runs` trains every variant on every dataset, :func:`training_curves` reads
  their logs for the reward and length figure (SAGE App. A.4);
* :func:`evaluate_runs` rewrites the test queries with every run under its training's
  decoding contract and pairs each row with the raw query (Tables 1-3 columns);
  :func:`pairwise` adds the rewards against each other (Direct, SCS, CRS, unguided);
* :func:`strategy_choice` counts the strategy ids of the test rewrites; the ``*_records``
  and ``*_sentences`` functions give the notebooks' recorded numbers and extra findings.

Notebook 08's sampled pools (best-of-N, Fig. 3; the CRS readings) are in
:mod:`qrlib.methods.sage.pools`, which notebook 15 does not import.
"""
from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from qrlib.core.errors import QrlibError
from qrlib.core.io import load_json
from qrlib.eval.compare import compare, describe
from qrlib.eval.scale import SCALE_COLUMNS
from qrlib.eval.stats import fmt_interval, span
from qrlib.retrieval import retrievers as retrieval

if TYPE_CHECKING:  # the pipeline loads the trainer; imported where it is used
    from qrlib.methods.sage import pipeline as sage

__all__ = ["Retrievers", "Evaluation", "PAIRS", "CAPTIONS", "caption", "load_data",
           "train_runs", "summaries_json", "training_curves", "training_setting",
           "evaluate_runs", "per_query_pairs", "pairwise", "describe_pairs", "sage_labels",
           "strategy_choice", "ablation_labels", "scs_runs_of_08", "result_records",
           "trained_sentences", "ablation_sentence"]

#: The rewards against each other, (a, b) for a - b (SAGE's claim: SCS, CRS > Direct > unguided).
PAIRS: tuple[tuple[str, str], ...] = (("direct", "unguided"), ("scs", "direct"),
                                      ("crs", "direct"), ("scs", "unguided"),
                                      ("crs", "unguided"))

CAPTIONS: dict[str, str] = {
    "08_sage_training_curves": ("SAGE training: shaped reward and response length per GRPO step "
                                "(SAGE App. A.4; paper: Qwen3-4B, 4,096-token budget)"),
    "08_sage_results": ("SAGE on the test queries ({retriever}): nDCG@10, Δ vs the raw "
                        "query with a 95% paired-bootstrap interval, modification rate, format-"
                        "valid rate and generated tokens (SAGE Tables 1-2 columns); training "
                        "scale ({scale}) from each run's log"),
    "08_per_query": ("Per-query nDCG@10 of each trained SAGE rewriter (y) against the "
                     "raw query (x) on the test queries; title: n, wins / losses / ties "
                     "and the mean difference with its 95 % paired-bootstrap interval"),
    "08_sage_strategy_choice": ("Strategy ids chosen in the greedy test rewrites, before and "
                                "after training"),
    "08_comparisons": ("Every paired comparison of notebook 08 (SAGE, nDCG@10; mean difference "
                       "with a 95% paired bootstrap over the test queries; the "
                       "qrlib.eval.compare schema, with the training scale of the method)"),
    "15_ablation_training_curves": ("SAGE-SCS under three exploration settings: shaped reward "
                                    "and response length per GRPO step (SAGE Table 3's runs)"),
    "15_sage_ablation": ("Exploration ablation (SAGE Table 3): nDCG@10, Δ vs the raw query "
                         "with a 95% paired-bootstrap interval, modification rate, format-valid "
                         "rate; training scale ({scale}) from each run's log "
                         "[profile: {profile}]"),
    "15_comparisons": ("Every row of the exploration ablation minus the raw query (nDCG@10, "
                       "95% paired bootstrap over the test queries; qrlib.eval.compare schema) "
                       "[profile: {profile}]"),
    "15_strategy_choice": ("Strategy ids chosen in the greedy test rewrites of every ablation "
                           "row [profile: {profile}]"),
}


def caption(name: str, **fields: Any) -> str:
    """The caption of table or figure ``name`` (:data:`CAPTIONS`), its ``{fields}`` filled;
    ``{scale}`` is always the training-scale column list."""
    return CAPTIONS[name].format(scale=", ".join(SCALE_COLUMNS), **fields)


class Retrievers(retrieval.IndexCache):
    """``RETR(ds, kind)``: one index per (collection name, corpus size, kind), built on
    first use; a dense one with ``dense_model`` and the shared cache."""

    def __call__(self, ds: Any, kind: str) -> Any:
        return self.get((ds.name, len(ds.corpus)), kind, ds.corpus)


def load_data(names: Iterable[str], **cut: Any) -> dict[str, tuple[Any, Any, Any]]:
    """``{name: (train, test, full)}`` (:func:`~qrlib.methods.sage.pipeline.sage_data` with
    ``cut``: n_train_queries, n_test_queries, n_distractors, seed, data_dir); prints the
    sizes."""
    from qrlib.methods.sage import pipeline as sage

    data = {name: sage.sage_data(name, **cut) for name in names}
    for name, (tr, te, full) in data.items():
        print(f"{name}: train {len(tr.queries)}, test {len(te.queries)}, docs {len(full.corpus)}")
    return data


def train_runs(runs: Sequence[sage.Variant], data: Mapping[str, tuple[Any, Any, Any]],
               retrievers: Retrievers, *, retriever: str, run_dir: str | os.PathLike,
               train_steps: int, n_train_queries: int | None, n_distractors: int | None,
               stop: Sequence[str] = (),
               append: Mapping[str, Mapping[str, dict]] | None = None,
               **train_kw: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """Train every variant of ``runs`` on every dataset with GRPO
    (:func:`~qrlib.methods.sage.pipeline.train_variant`), the run named
    ``sage-<dataset>-<retriever>-<key>`` so that notebook 15 finds 08's SCS run.
    ``train_kw``: model, prompts_per_step, num_generations, max_completion_length,
    temperature, learning_rate, beta, seed, dynamic_sampling. ``append``: runs trained
    elsewhere, ``{dataset: {key: summary}}``, placed after that dataset's runs. Returns
    ``{(dataset, key): summary}``; prints steps and seconds per run."""
    from qrlib.methods.sage import pipeline as sage

    kw = dict(retriever=retriever, max_steps=train_steps, stop=list(stop),
              save_steps=max(1, train_steps // 4), n_queries=n_train_queries,
              n_distractors=n_distractors, **train_kw)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for name, (tr, te, full) in data.items():
        for v in runs:
            t0 = time.perf_counter()
            out[name, v.key] = s = sage.train_variant(
                v, retrievers(full, retriever), full, tr.queries,
                name=f"sage-{name}-{retriever}-{v.key}", run_dir=run_dir, dataset=name, **kw)
            print(f"{name} {v.key}: {s['steps']} steps, {time.perf_counter() - t0:.0f}s")
        for key, s in (append or {}).get(name, {}).items():
            out[name, key] = s
    return out


def summaries_json(summaries: Mapping[tuple[str, str], Any]) -> dict[str, Any]:
    """``{"dataset:key": summary}``, the layout of ``sage_summaries.json``."""
    return {f"{n}:{k}": v for (n, k), v in summaries.items()}


def scs_runs_of_08(run_dir: str | os.PathLike, names: Iterable[str]) -> dict[str, dict]:
    """Notebook 08's SAGE-SCS summary per dataset, read from
    ``run_dir/08_sage/sage_summaries.json``; a one-line error says what to rerun. Prints
    each run's steps, copy penalty and retriever (from its ``config.json``)."""
    path = Path(run_dir) / "08_sage" / "sage_summaries.json"
    if not path.exists():
        raise QrlibError(f"{path} is missing: run notebook 08 first (with scs in sage_runs)")
    runs, out = load_json(path), {}
    for name in names:
        key = f"{name}:scs"
        if key not in runs:
            raise QrlibError(f"notebook 08 trained no SAGE-SCS run on {name} (it has: "
                             f"{', '.join(runs)}); add scs to its sage_runs")
        out[name] = runs[key]
        cfg = load_json(Path(runs[key]["adapter"]).parent / "config.json")
        print(f"{name}: 08's SCS run {runs[key]['steps']} steps, copy penalty "
              f"{cfg['reward_params'].get('p')}, retriever {cfg['retriever']}")
    return out


def ablation_labels(runs: Sequence[sage.Variant], copy_penalty: float) -> dict[str, str]:
    """Row labels of Table 3's runs by key, and 08's SCS run as the last row."""
    labels = {v.key: v.label for v in runs}
    labels["scs"] = f"SCS, proactive prompt, p={copy_penalty:g} (notebook 08's SAGE-SCS)"
    return labels


def training_curves(summaries: Mapping[tuple[str, str], Mapping[str, Any]],
                    labels: Mapping[str, str], *, with_dataset: bool) -> dict[str, Any]:
    """``{label: log frame}`` of every run, ``" (dataset)"`` appended when ``with_dataset``."""
    return {labels[key] + (f" ({name})" if with_dataset else ""):
            pd.read_csv(s["log"], dtype={"qids": str}) for (name, key), s in summaries.items()}


def training_setting(model: str, datasets: Sequence[str], retriever: str,
                     logs: Mapping[str, Any], *, per_run: bool = True) -> str:
    """The setting line of a training figure: policy, data, retriever and each run's scale
    (``"from the logs, per run: ..."``; ``"from the logs: ..."`` without ``per_run``)."""
    from qrlib.eval import curves

    lead = "from the logs, per run" if per_run else "from the logs"
    return f"{model}, {'/'.join(datasets)} {retriever}; {lead}: " + curves.scale_setting(logs)


@dataclass
class Evaluation:
    """The test evaluation of every labelled run on every dataset: ``results`` (a row per
    dataset and label, :func:`~qrlib.methods.sage.pipeline.result_rows`), ``comparisons``
    (each row minus the raw query, the :mod:`qrlib.eval.compare` schema) and, keyed by
    ``(dataset, label)``, the per-query nDCG@10, the rewrites and the scale columns."""

    results: Any
    comparisons: list[dict[str, Any]]
    scores: dict[tuple[str, str], Any] = field(default_factory=dict)
    rewrites: dict[tuple[str, str], Any] = field(default_factory=dict)
    scales: dict[tuple[str, str], Any] = field(default_factory=dict)


def evaluate_runs(model: str, labelled: Mapping[str, sage.Variant],
                  summaries: Mapping[tuple[str, str], Mapping[str, Any]],
                  data: Mapping[str, tuple[Any, Any, Any]], retrievers: Retrievers, *,
                  retriever: str, autocast: bool | None = False, resamples: int = 10_000,
                  seed: int = 0) -> Evaluation:
    """:func:`~qrlib.methods.sage.pipeline.evaluate` on every dataset: the raw query, the
    untrained model with each prompt, and each run of ``labelled`` (label -> variant, its
    summary ``summaries[dataset, variant.key]``), each decoding with its training's
    contract."""
    from qrlib.methods.sage import pipeline as sage

    rows: list[dict[str, Any]] = []
    ev = Evaluation(None, [])
    for name, (tr, te, full) in data.items():
        out = sage.evaluate(model, {label: (v.prompt, summaries[name, v.key])
                                    for label, v in labelled.items()},
                            te, full, retrievers(full, retriever), dataset=name,
                            retriever=retriever, autocast=autocast, resamples=resamples,
                            seed=seed)
        rows += out["rows"]
        ev.comparisons += out["comparisons"]
        for part in ("scores", "rewrites", "scales"):
            getattr(ev, part).update({(name, k): v for k, v in out[part].items()})
    ev.results = pd.DataFrame(rows)
    return ev


def per_query_pairs(comparisons: Sequence[Mapping[str, Any]],
                    scores: Mapping[tuple[str, str], Any]) -> tuple[dict, dict]:
    """For :func:`qrlib.plots.per_query_scatter`: each trained row against the raw query,
    ``({"dataset: method": (raw scores, method scores)}, {same key: interval text})``."""
    head = [r for r in comparisons if r["kind"] == "trained" and r["baseline kind"] == "baseline"]
    pairs = {f"{r['dataset']}: {r['method']}": (scores[r["dataset"], "raw query"].to_dict(),
                                                scores[r["dataset"], r["method"]].to_dict())
             for r in head}
    return pairs, {f"{r['dataset']}: {r['method']}": fmt_interval(r) for r in head}


def pairwise(ev: Evaluation, variants: Mapping[str, sage.Variant], keys: Iterable[str],
             datasets: Iterable[str], *, retriever: str, resamples: int = 10_000,
             seed: int = 0) -> list[dict[str, Any]]:
    """The trained rewards against each other (:data:`PAIRS` whose two keys were trained),
    a 95 % paired bootstrap on the same test queries, in the comparison schema."""
    keys = set(keys)
    out = []
    for name in datasets:
        for a, b in PAIRS:
            if a in keys and b in keys:
                la, lb = variants[a].label, variants[b].label
                out.append(compare(ev.scores[name, la].to_dict(), ev.scores[name, lb].to_dict(),
                                   paper="sage", dataset=name, retriever=retriever,
                                   metric="nDCG@10", method=la, kind="trained", baseline=lb,
                                   baseline_kind="trained", scale=ev.scales[name, la],
                                   resamples=resamples, seed=seed))
    return out


def describe_pairs(comparisons: Sequence[Mapping[str, Any]]) -> str:
    """One :func:`~qrlib.eval.compare.describe` sentence per trained-vs-trained row."""
    return "\n".join(describe(r) for r in comparisons if r["baseline kind"] == "trained")


def sage_labels(runs: Iterable[sage.Variant]) -> set[str]:
    """Labels whose rewrites carry a strategy id: the SAGE-prompt runs and the untrained
    model with their prompts."""
    runs = [v for v in runs if v.prompt.startswith("sage/")]
    return {f"untrained ({v.prompt})" for v in runs} | {v.label for v in runs}


def strategy_choice(rewrites: Mapping[tuple[str, str], Any],
                    labels: Iterable[str] | None = None) -> Any:
    """Share of the test rewrites per strategy id (``s1``..``s5``; ``none``: no valid id),
    one row per (dataset, label) of ``rewrites`` (all of them when ``labels`` is None)."""
    keep = None if labels is None else set(labels)
    rows = []
    for (name, label), df in rewrites.items():
        if keep is None or label in keep:
            ids = pd.to_numeric(df.strategy, errors="coerce").fillna(0).astype(int)
            counts = ids.value_counts(normalize=True)
            rows.append({"dataset": name, "model": label,
                         **{("none" if s == 0 else f"s{s}"): counts.get(s, 0.0)
                            for s in range(6)}})
    return pd.DataFrame(rows)


def result_records(results: Any, prefix: str = "", *, delta: bool = False) -> dict[str, Any]:
    """Recorded numbers of a results table: ``<prefix><dataset>.<model>.ndcg10`` and
    ``.modified`` (and ``.delta_vs_raw`` = [Δ, lo, hi] when ``delta``)."""
    out: dict[str, Any] = {}
    for _, r in results.iterrows():
        key = f"{prefix}{r.dataset}.{r.model}"
        out[f"{key}.ndcg10"] = r["nDCG@10"]
        if delta:
            out[f"{key}.delta_vs_raw"] = [r["ΔnDCG@10 vs raw"], r.lo, r.hi]
        out[f"{key}.modified"] = r.modified
    return out


def trained_sentences(choice: Any, results: Any, cmp: Any) -> list[str]:
    """Notebook 08's findings on the trained rewriters: how concentrated their strategy
    choice is and how often they modify the query."""
    out = []
    trained = choice[~choice.model.str.startswith("untrained")]
    if len(trained):
        share = trained[[c for c in trained.columns if c.startswith("s")]].max(axis=1)
        out.append(f"Trained SAGE rewriters use their most frequent strategy for "
                   f"{span(share)} of test queries.")
    res = results[results.model.isin(cmp[cmp.kind == "trained"].method)]
    out.append(f"They modify {span(res.modified)} of the queries.")
    return out


def ablation_sentence(results: Any, labels: Iterable[str], paper_t3: Any) -> str:
    """Notebook 15's finding: the trained rows' modification rates beside Table 3's."""
    rows = results[results.model.isin(list(labels))]
    return (f"The trained rows modify {span(rows.modified)} "
            "of the test queries (SAGE Table 3: "
            + ", ".join(f"{r.row} {r.value:.1%}" for _, r in paper_t3.iterrows()) + ").")
