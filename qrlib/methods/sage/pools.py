"""Pools of sampled rewrites (SAGE Sec. 3.1, Fig. 3; Eq. 2): notebook 08's first section.

For every test query each prompt *family* (SAGE's five strategies, DMQR-RAG's four, one
generic prompt) gets a pool of sampled rewrites, each searched and scored nDCG@10:

* :func:`prompt_families`, :func:`pool_sizes` and :func:`sample_pools` build the pools;
  :func:`score_pools` searches them (a rewrite that yields no query searches the raw one);
* :func:`best_of_n_table` is Fig. 3's curve, the exact expected best of N draws
  (:mod:`qrlib.methods.sage.bestofn`); :func:`family_comparisons` pairs the families by
  query; :func:`strategy_best_share` says which strategy wins each pool;
* :func:`crs_readings` replays the pools as GRPO groups to show that CRS (Eq. 2) gives
  Direct's update weights (:mod:`qrlib.methods.sage.crs`);
* :func:`best_of_n_figure`, the ``*_records`` functions and :func:`headroom_sentence` give
  the notebook's figure, recorded numbers and finding.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from qrlib.core.errors import QrlibError
from qrlib.eval.compare import compare, comparison_table
from qrlib.methods.sage import crs as CRS
from qrlib.methods.sage.bestofn import best_of_n_curve, best_of_n_per_query, best_share

__all__ = ["CAPTIONS", "prompt_families", "pool_sizes", "describe_pools", "load_cuts",
           "sample_pools", "score_pools", "best_of_n_table", "bon_setting",
           "best_of_n_figure", "family_comparisons", "strategy_best_share", "beats_raw",
           "examples", "crs_readings", "bon_records", "crs_records", "headroom_sentence"]

CAPTIONS: dict[str, str] = {
    "08_best_of_n": ("Best-of-N nDCG@10 (exact expectation over draws of N rewrites from each "
                     "query's pool; oracle choice with the qrels) per prompt family"),
    "08_best_of_n_figure": ("Best-of-N nDCG@10 of SAGE's strategy prompts vs DMQR-RAG "
                            "strategies vs a generic rewrite prompt (SAGE Fig. 3's analysis; "
                            "paper: Qwen3 0.6-8B, BGE-base / Contriever, full BEIR test sets)"),
    "08_best_of_n_comparisons": ("Best-of-N nDCG@10 of each prompt family against the raw "
                                 "query and against the other families, at N = 1 and the "
                                 "largest N (per-query expected best-of-N, 95% paired "
                                 "bootstrap over the test queries; the qrlib.eval.compare "
                                 "schema)"),
    "08_strategy_best_share": ("Share of queries where each prompt (strategy) gave its "
                               "family's best rewrite (ties split), and share of queries where "
                               "the family's best rewrite beats the raw query"),
    "08_crs_readings": ("CRS (SAGE Eq. 2) against Direct on the sampled groups of section 1: "
                        "the GRPO update weights differ by 0 under the paper's group-median "
                        "baseline, and only under the readings where the baseline does not "
                        "cancel"),
}
SAGE_FAMILY = "SAGE strategies"


def prompt_families(registered: Iterable[str]) -> dict[str, list[str]]:
    """The three families of Fig. 3's comparison, SAGE first: ``sage/s1``..``sage/s5``
    (Table 4's strategies), the registered ``dmqr/*`` prompts and ``generic/rewrite``."""
    return {SAGE_FAMILY: [f"sage/s{i}" for i in range(1, 6)],
            "DMQR-RAG": [n for n in registered if n.startswith("dmqr/")],
            "generic": ["generic/rewrite"]}


def pool_sizes(families: Mapping[str, Sequence[str]], samples_per_prompt: int,
               generic_samples: int, n_max: int) -> dict[str, int]:
    """Samples per prompt of each family (``generic_samples`` for the one generic prompt);
    a one-line error when a family's pool is smaller than the largest N."""
    pool = {f: (generic_samples if f == "generic" else samples_per_prompt) for f in families}
    for fam, names in families.items():
        size = pool[fam] * len(names)
        if n_max > size:
            raise QrlibError(f"bon_ns goes to {n_max} but the {fam} pool has only {size} "
                             "rewrites; raise bon_samples_per_prompt")
    return pool


def describe_pools(families: Mapping[str, Sequence[str]], pool: Mapping[str, int]) -> str:
    """``"SAGE strategies: 5 prompt(s) x 4 samples = pool 20"``, a line per family."""
    return "\n".join(f"{fam}: {len(names)} prompt(s) x {pool[fam]} samples = pool "
                     f"{pool[fam] * len(names)}" for fam, names in families.items())


def load_cuts(names: Iterable[str], *, n_queries: int | None, n_distractors: int | None,
              seed: int = 0, data_dir: Any = None) -> dict[str, Any]:
    """Seeded test cuts ``{name: Dataset}`` (:func:`qrlib.data.datasets.subset`); prints sizes."""
    from qrlib.data import datasets as qdata

    out = {}
    for name in names:
        ds = qdata.load_dataset(name, "test", data_dir=data_dir)
        out[name] = qdata.subset(ds, n_queries=n_queries, n_distractors=n_distractors,
                                 seed=seed)
        print(f"{name}: {len(out[name].queries)} test queries, {len(out[name].corpus)} docs")
    return out


def pool_key(model: str, dataset: str, queries: Mapping[str, str], prompt: str, n: int,
             **settings: Any) -> str:
    """What one prompt's pool of samples depends on, hashed: the model, the queries, the
    prompt as rendered, ``n``, the sampling settings, the generation backend, whether the
    CPU samples in bf16, and the source of the code that samples (a change to any of it
    gives a new key, so a stale pool is never read back)."""
    import hashlib
    import json
    from pathlib import Path

    from qrlib.generation import engine, policy, prompts, rewrite

    code = b"".join(Path(m.__file__).read_bytes() for m in (engine, policy, prompts, rewrite))
    blob = json.dumps({"model": model, "dataset": dataset, "queries": sorted(queries.items()),
                       "prompt": repr(prompts.as_template(prompt)), "n": n,
                       "settings": settings, "backend": engine.backend(),
                       "bf16": policy.cpu_has_native_bf16(),
                       "code": hashlib.sha256(code).hexdigest()}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def sample_pools(model: str, data: Mapping[str, Any], families: Mapping[str, Sequence[str]],
                 pool: Mapping[str, int], *, max_new_tokens: int, temperature: float,
                 batch_size: int, seed: int = 0, cache: Any = None) -> Any:
    """``pool[family]`` sampled rewrites of every test query per prompt
    (:func:`qrlib.generation.rewrite.sample_rewrites`, prompt ``j`` of a family seeded
    ``seed + 1000 j``), with ``dataset``, ``family`` and ``prompt`` columns. The policy is
    loaded here (only if some pool is not in ``cache``) and released with its engine before
    returning (:func:`qrlib.rl.release.release_memory`: a stored vLLM traceback otherwise
    keeps it alive through the trainings that follow); prints the count and the seconds.

    ``cache`` (a folder): each prompt's pool is written there as it is done
    (``<pool_key>.parquet``) and read back instead of sampled again, so a run stopped and
    resumed (``qrlib park``) does not sample its finished pools twice; each pool is seeded
    on its own, so a pool read back is the one sampling would give."""
    from pathlib import Path

    from qrlib.core.io import atomic_path
    from qrlib.generation import policy, rewrite
    from qrlib.rl.release import release_memory

    t0 = time.perf_counter()
    pol = tok = None
    frames, read = [], 0
    for name, ds in data.items():
        for fam, names in families.items():
            for j, pname in enumerate(names):
                settings = {"max_new_tokens": max_new_tokens, "temperature": temperature,
                            "batch_size": batch_size, "seed": seed + 1000 * j}
                path = (Path(cache) / f"{pool_key(model, name, ds.queries, pname, pool[fam], **settings)}"
                        f".parquet") if cache is not None else None
                if path is not None and path.exists():
                    df, read = pd.read_parquet(path), read + 1
                else:
                    if pol is None:
                        pol, tok = policy.load_policy(model)
                    df = rewrite.sample_rewrites(pol, tok, ds.queries, pname, pool[fam],
                                                 **settings)
                    if path is not None:
                        path.parent.mkdir(parents=True, exist_ok=True)
                        with atomic_path(path) as tmp:
                            df.to_parquet(tmp, index=False)
                df["dataset"], df["family"], df["prompt"] = name, fam, pname
                frames.append(df)
    if pol is not None:
        del pol
        release_memory()
    samples = pd.concat(frames, ignore_index=True)
    seconds = time.perf_counter() - t0
    total = sum(len(v) for v in families.values()) * len(data)
    print(f"{len(samples)} sampled rewrites in {seconds:.0f}s ({seconds / len(samples):.2f}s each)"
          + (f"; {read} of {total} prompt pools read back from an earlier, stopped run" if read else ""))
    return samples


def score_pools(samples: Any, data: Mapping[str, Any], retrievers: Callable[[Any, str], Any],
                kinds: Sequence[str], k: int = 10) -> Any:
    """Every sample searched with every retriever kind: columns ``retriever``, ``ndcg``
    (nDCG@``k`` of the rewrite) and ``raw`` (of its raw query)."""
    from qrlib.rl import rewards

    frames = []
    for name, ds in data.items():
        sel = samples[samples.dataset == name]
        for kind in kinds:
            retr = retrievers(ds, kind)
            ranked = retr.search(sel.search_text.tolist(), k)
            raw_rank = dict(zip(ds.queries, retr.search(list(ds.queries.values()), k)))
            s = sel.assign(retriever=kind, ndcg=[rewards.ndcg_at_k(r, ds.qrels[q], k)
                                                 for r, q in zip(ranked, sel.qid)])
            s["raw"] = s.qid.map({q: rewards.ndcg_at_k(raw_rank[q], ds.qrels[q], k)
                                  for q in ds.queries})
            frames.append(s)
    return pd.concat(frames, ignore_index=True)


def _pools(g: Any) -> dict[str, list[float]]:
    return {q: gg.ndcg.tolist() for q, gg in g.groupby("qid")}


def best_of_n_table(scored: Any, ns: Sequence[int]) -> Any:
    """Fig. 3's curves: per dataset, retriever, family and N, the mean over queries of the
    expected best of N rewrites from the query's pool,
    :math:`\\sum_{j=N}^{M} s_{(j)} \\binom{j-1}{N-1} / \\binom{M}{N}`, beside the raw query,
    the mean sample and the format-valid share."""
    rows = []
    for (name, kind, fam), g in scored.groupby(["dataset", "retriever", "family"]):
        pools = _pools(g)
        raw = g.groupby("qid").raw.first()
        for n, v in best_of_n_curve(pools, ns).items():
            rows.append({"dataset": name, "retriever": kind, "family": fam, "N": n,
                         "best-of-N nDCG@10": v, "raw nDCG@10": raw.mean(),
                         "mean sample nDCG@10": g.ndcg.mean(), "format ok": g.format_ok.mean(),
                         "queries": len(pools)})
    return pd.DataFrame(rows)


def bon_setting(model: str, n_queries: int | None, n_distractors: int | None) -> str:
    """The setting line of the best-of-N figure."""
    corpus = "full" if n_distractors is None else f"judged+{n_distractors}"
    return f"{model}, {n_queries} test queries/dataset, corpus {corpus}"


def best_of_n_figure(bon: Any, datasets: Sequence[str], kinds: Sequence[str],
                     families: Sequence[str]) -> Any:
    """A panel per dataset and retriever: best-of-N against N (log scale) per family, the
    raw query dashed."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, axes = plt.subplots(len(datasets), len(kinds),
                             figsize=(4.2 * len(kinds), 3.2 * len(datasets)), squeeze=False)
    color = {f: f"C{i}" for i, f in enumerate(families)}
    for i, name in enumerate(datasets):
        for j, kind in enumerate(kinds):
            ax = axes[i][j]
            sel = bon[(bon.dataset == name) & (bon.retriever == kind)]
            for fam, g in sel.groupby("family"):
                ax.plot(g.N, g["best-of-N nDCG@10"], marker="o", color=color[fam], label=fam)
            ax.axhline(sel["raw nDCG@10"].iloc[0], color="k", ls="--", lw=1, label="raw query")
            ax.set_xscale("log", base=2)
            ax.set(title=f"{name} · {kind}", xlabel="N rewrites", ylabel="best-of-N nDCG@10")
    fig.tight_layout()
    plots.legend_outside(fig, *axes[0][0].get_legend_handles_labels(), title="prompt family")
    return fig


def _label(fam: str, n: int) -> str:
    return f"{fam}, best of {n}" + (" (oracle)" if n > 1 else "")


def family_comparisons(scored: Any, families: Sequence[str], ns: Iterable[int], *,
                       resamples: int = 10_000, seed: int = 0) -> Any:
    """Per-query expected best-of-N of each family at each N of ``ns``, paired by query
    (95 % bootstrap) against the raw query and against every later family in
    ``families`` (SAGE first, as in Fig. 3), in the comparison schema."""
    families = list(families)
    per_q: dict[tuple[str, str, str, int], dict[str, float]] = {}
    for (name, kind, fam), g in scored.groupby(["dataset", "retriever", "family"]):
        pools = _pools(g)
        for n in sorted(set(ns)):
            per_q[name, kind, fam, n] = best_of_n_per_query(pools, n)
        per_q[name, kind, "raw query", 0] = g.groupby("qid").raw.first().to_dict()
    rows = []
    for (name, kind, fam, n), scores in per_q.items():
        if fam == "raw query":
            continue
        others = [("raw query", 0, "raw query", "baseline")] + [
            (f2, n, _label(f2, n), "untrained") for f2 in families[families.index(fam) + 1:]]
        for f2, n2, base_label, bkind in others:
            rows.append(compare(scores, per_q[name, kind, f2, n2], paper="sage", dataset=name,
                                retriever=kind, metric="nDCG@10", method=_label(fam, n),
                                kind="untrained", baseline=base_label, baseline_kind=bkind,
                                resamples=resamples, seed=seed))
    return comparison_table(rows)


def strategy_best_share(scored: Any) -> Any:
    """Per dataset, retriever and family: the share of queries whose best sample came from
    each prompt (ties split, :func:`~qrlib.methods.sage.bestofn.best_share`), and the share
    of queries where the pool's best beats the raw query."""
    rows = []
    for (name, kind, fam), g in scored.groupby(["dataset", "retriever", "family"]):
        share: dict[Any, float] = {}
        for _, gg in g.groupby("qid"):
            for lab, v in best_share(gg.ndcg.tolist(), gg.prompt.tolist()).items():
                share[lab] = share.get(lab, 0.0) + v
        nq = g.qid.nunique()
        beats = (g.groupby("qid").ndcg.max() > g.groupby("qid").raw.first() + 1e-9).mean()
        for lab, v in sorted(share.items()):
            rows.append({"dataset": name, "retriever": kind, "family": fam, "prompt": lab,
                         "best share": v / nq, "family beats raw": beats})
    return pd.DataFrame(rows)


def beats_raw(share: Any) -> Any:
    """The *beats raw* share, dataset and retriever by family."""
    return share.groupby(["dataset", "retriever", "family"])["family beats raw"].first().unstack()


def examples(samples: Any, data: Mapping[str, Any]) -> Any:
    """The first sample of each prompt for the first test query of each dataset."""
    ex = samples.groupby(["dataset", "family", "prompt"]).head(1)
    ex = ex[ex.qid.isin([next(iter(ds.queries)) for ds in data.values()])]
    return ex[["dataset", "family", "prompt", "query", "rewrite", "format_ok"]]


def crs_readings(scored: Any, family: str = SAGE_FAMILY) -> Any:
    """Each query's pool of ``family`` as one GRPO group (rewards = nDCG@10, strategy =
    prompt): how far CRS's update weights are from Direct's under every
    :data:`~qrlib.methods.sage.crs.READINGS` entry (max and mean absolute gap, share of
    rollouts whose sign differs)."""
    rows = []
    for (name, kind), g in scored[scored.family == family].groupby(["dataset", "retriever"]):
        gaps: dict[str, list[float]] = {reading: [] for reading in CRS.READINGS}
        flips: dict[str, list[bool]] = {reading: [] for reading in CRS.READINGS}
        for _, grp in g.groupby("qid"):
            r, st = grp.ndcg.tolist(), grp.prompt.tolist()
            direct = CRS.group_advantages(r)
            for reading in CRS.READINGS:
                a = CRS.crs_advantages(r, st, reading=reading)
                gaps[reading] += [abs(x - y) for x, y in zip(a, direct)]
                flips[reading] += [(x > 1e-9) != (y > 1e-9) for x, y in zip(a, direct)]
        for reading in CRS.READINGS:
            rows.append({"dataset": name, "retriever": kind, "CRS reading": reading,
                         "groups": g.qid.nunique(), "max |A_CRS - A_Direct|": max(gaps[reading]),
                         "mean |A_CRS - A_Direct|": sum(gaps[reading]) / len(gaps[reading]),
                         "rollouts whose sign differs": sum(flips[reading]) / len(flips[reading])})
    return pd.DataFrame(rows)


def bon_records(bon: Any, bon_cmp: Any, beats: Any) -> dict[str, Any]:
    """Recorded numbers of section 1: best-of-N at the largest N and the raw query, each
    family comparison ([diff, lo, hi]) and each family's beats-raw share."""
    out: dict[str, Any] = {}
    for _, r in bon[bon.N == bon.N.max()].iterrows():
        out[f"bon.{r.dataset}.{r.retriever}.{r.family}.best_of_{r.N}"] = r["best-of-N nDCG@10"]
        out[f"bon.{r.dataset}.{r.retriever}.raw"] = r["raw nDCG@10"]
    for _, r in bon_cmp.iterrows():
        out[f"bon.{r.dataset}.{r.retriever}.{r.method} minus {r.baseline}"] = [r["diff"], r.lo,
                                                                               r.hi]
    for (name, kind), r in beats.iterrows():
        for fam, v in r.items():
            out[f"bon.{name}.{kind}.{fam}.beats_raw"] = v
    return out


def crs_records(table: Any) -> dict[str, Any]:
    """``crs.<dataset>.<retriever>.max_gap_vs_direct`` under the paper's group reading."""
    return {f"crs.{r.dataset}.{r.retriever}.max_gap_vs_direct": r["max |A_CRS - A_Direct|"]
            for _, r in table[table["CRS reading"] == "group"].iterrows()}


def headroom_sentence(bon: Any) -> str:
    """The strongest family per dataset and retriever at the largest N, against the raw query."""
    top = bon[bon.N == bon.N.max()]
    best = top.loc[top.groupby(["dataset", "retriever"])["best-of-N nDCG@10"].idxmax()]
    return (f"With {bon.N.max()} samples per query and an oracle picking the best, the "
            "strongest family is "
            + "; ".join(f"{r.family} on {r.dataset}/{r.retriever} "
                        f"({r['best-of-N nDCG@10']:.3f} against {r['raw nDCG@10']:.3f} raw)"
                        for _, r in best.iterrows())
            + ": the headroom a rewriter could reach.")
