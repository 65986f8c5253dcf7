"""The steps of notebook 09, the document-selection study of Petcu et al. (2025), "Query
Decomposition for RAG: Balancing Exploration-Exploitation".

In the order the notebook calls them:

* requests and decompositions: :func:`load_requests`, :func:`rule_decompositions`,
  :func:`add_model_decompositions` (the paper's Figure 6 prompt), :func:`arms_for`;
* one ranked list per arm and the document embeddings: :func:`retrieve_arms`,
  :func:`embed_pools`;
* one :class:`~qrlib.methods.bandits.bandits.Request` per (dataset, decomposition, request,
  sample): :func:`build_units`, :func:`pool_stats`;
* the Table 1 policies run to a 100 % budget: :func:`simulate_units`, :func:`summarise`,
  the figures :func:`plot_budget_curves` and :func:`plot_gain_over_rank` (paper Figures 4,
  8-11) and :func:`precision_table`;
* alpha-nDCG of the selection order (Tables 3 and 5): :func:`alpha_ndcg_frame`,
  :func:`alpha_table`;
* serial against hierarchical bandits (Table 4, Sec. 5.3): :func:`hierarchical_units`,
  :func:`simulate_hierarchy`, :func:`hierarchy_table`;
* the paper's findings checked on the run: :class:`PairedChecks`, :func:`holds`,
  :func:`all_hold`, :func:`direction_checks`, :func:`key_numbers`,
  :func:`paper_comparison`, :func:`why_differences`, :func:`findings`.

Pure table and text functions take DataFrames; the functions that load data, retrieve or
encode are the ones named so.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qrlib.eval import published
from qrlib.eval.compare import compare
from qrlib.eval.prose import paragraph
from qrlib.eval.stats import fmt_interval, verdict
from qrlib.methods.bandits import bandits as B
from qrlib.methods.bandits import decompose as D

Decompositions = dict[tuple[str, str], dict[str, list[list[str]]]]  # (dataset, kind) -> qid -> samples
Ranked = dict[tuple[str, str], list[tuple[str, float]]]             # (dataset, arm text) -> list

# the paper's key policies: drawn in colour (with 95 % CI bands), the other Table 1 rows grey
KEY_POLICIES = ("random", "rank", "egreedy", "bernoulli", "bernoulli_top3", "gaussian",
                "topk_ucb_div")
BAND_POLICIES = ("random", "topk_ucb_div")   # bands of the extremes in the budget figures
HIER_BUDGETS = (0.1, 0.2)                     # Table 4's budgets
CHECK_COLUMNS = ["paper's finding", "holds here",
                 "evidence (paired diff. [95% bootstrap CI] over requests)"]


# =========================================================================== 1. requests
def load_requests(datasets: Sequence[str], split: str, n_requests: int | None, *,
                  data_dir: str | None, seed: int) -> dict[str, Any]:
    """``{name: Dataset}``: ``n_requests`` seeded requests of each dataset's ``split`` (all
    when None), with their whole paragraph pool (no distractor subset)."""
    from qrlib.data.datasets import load_dataset, subset

    data = {}
    for name in datasets:
        ds = load_dataset(name, split, data_dir=data_dir)
        data[name] = subset(ds, n_requests, None, seed=seed) if n_requests else ds
    return data


def rule_decompositions(data: Mapping[str, Any], kinds: Sequence[str],
                        max_subqueries: int) -> Decompositions:
    """The model-free decompositions (one sample per request): ``heuristic``
    (:func:`~qrlib.methods.bandits.decompose.heuristic_split`) and ``oracle`` (one sub-query
    per gold supporting title, or the judged documents' titles)."""
    decomp: Decompositions = {}
    for name, ds in data.items():
        qids = sorted(ds.queries)
        if "heuristic" in kinds:
            decomp[(name, "heuristic")] = {q: [D.heuristic_split(ds.queries[q], max_subqueries)]
                                           for q in qids}
        if "oracle" in kinds:
            decomp[(name, "oracle")] = {
                q: [D.oracle_split(ds.queries[q], ds.query_meta[q].get("supporting_titles")
                                   or [ds.corpus[d]["title"] for d in ds.qrels[q]])]
                for q in qids}
    return decomp


def add_model_decompositions(decomp: Decompositions, data: Mapping[str, Any], *,
                             kinds: Sequence[str], model_name: str | None, n_requests: int,
                             n_samples: int, n_queries: int, max_new_tokens: int,
                             cache_path: Path, seed: int) -> str:
    """Add ``(dataset, "model")`` decompositions to ``decomp`` (in place): the first
    ``n_requests`` requests of each dataset, ``n_samples`` sampled decompositions each, from
    the paper's problem-definition prompt (Figure 6, our rewording). Returns a note saying
    what happened; a failure to load or run the model is a note, not an error (the study
    runs on without it)."""
    if "model" not in kinds:
        return "not requested"
    if not model_name:
        return "skipped: decompose_model is not set"
    try:
        from qrlib.generation.policy import load_policy
        t0 = time.perf_counter()
        model, tok = load_policy(model_name)
        picked = [(name, q) for name, ds in data.items() for q in sorted(ds.queries)[:n_requests]]
        outs = D.model_split([data[n].queries[q] for n, q in picked], model, tok,
                             prompt="bandit/problem-definition", n_queries=n_queries,
                             n_samples=n_samples, max_new_tokens=max_new_tokens,
                             cache_path=cache_path, model_name=model_name, seed=seed,
                             batch_size=16)
        for (name, q), samples in zip(picked, outs):
            decomp.setdefault((name, "model"), {})[q] = samples
        cache = json.loads(Path(cache_path).read_text())
        n_fb = sum(v["fallback"] for v in cache.values())
        note = (f"{model_name}: {len(cache)} decompositions, {n_fb} unparsable "
                f"ones replaced by the heuristic split, {time.perf_counter() - t0:.0f} s")
        del model
        return note
    except Exception as exc:  # noqa: BLE001 - the study runs on without the model
        return f"skipped: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def decomposition_examples(decomp: Decompositions, data: Mapping[str, Any]) -> str:
    """One line per (dataset, kind): the first request and its first decomposition."""
    lines = []
    for (name, kind), dd in decomp.items():
        q0 = sorted(dd)[0]
        lines.append(f"[{name} / {kind}] {data[name].queries[q0]!r}\n    -> {dd[q0][0]}")
    return "\n".join(lines)


def arms_for(text: str, subqs: Sequence[str], add_question_arm: bool = True) -> list[str]:
    """The arms of one decomposition: the non-blank sub-queries, preceded by the request
    itself when ``add_question_arm`` (a sub-query equal to it, case aside, is dropped)."""
    arms = [s for s in subqs if s and s.strip()]
    if add_question_arm:
        arms = [text] + [s for s in arms if s.strip().lower() != text.strip().lower()]
    return arms


# =========================================================================== 2. lists
def retrieve_arms(data: Mapping[str, Any], decomp: Decompositions, retriever: str, depth: int,
                  *, add_question_arm: bool, hier_parents: int, hier_children: int,
                  log: Callable[[str], Any] = print) -> Ranked:
    """The top-``depth`` list of every arm text once per dataset (one batched search): the
    arms of every decomposition and of the two-level hierarchy of Sec. 6."""
    from qrlib.retrieval.retrievers import build_retriever

    retrievers = {name: build_retriever(retriever, ds.corpus) for name, ds in data.items()}
    ranked: Ranked = {}
    for name, ds in data.items():
        texts = sorted({a for (n, _), dd in decomp.items() if n == name
                        for q, samples in dd.items() for s in samples
                        for a in arms_for(ds.queries[q], s, add_question_arm)})
        hier_texts = sorted({t for q in ds.queries
                             for node in D.heuristic_hierarchy(ds.queries[q], hier_parents,
                                                               hier_children)
                             for t in [node["parent"], *node["children"]]})
        todo = sorted(set(texts) | set(hier_texts))
        t0 = time.perf_counter()
        for t, res in zip(todo, retrievers[name].search(todo, depth)):
            ranked[(name, t)] = res
        log(f"{name}: {len(todo)} sub-queries retrieved in {time.perf_counter() - t0:.1f} s")
    return ranked


def embed_pools(data: Mapping[str, Any], ranked: Ranked, cache_root: Path,
                log: Callable[[str], Any] = print) -> dict[str, dict[str, np.ndarray]]:
    """``{dataset: {doc id: MiniLM vector}}`` of every pooled document, through qrlib's
    per-document embedding cache (vectors notebooks 02 or 03 computed are reused)."""
    from qrlib.retrieval.retrievers import encode_corpus

    out = {}
    for name in data:
        pooled = sorted({d for (n, _), res in ranked.items() if n == name for d, _ in res})
        t0 = time.perf_counter()
        ids, emb = encode_corpus({d: data[name].corpus[d] for d in pooled}, model="minilm",
                                 cache_dir=cache_root, show_progress=len(pooled) > 500)
        out[name] = dict(zip(ids, emb))
        log(f"{name}: {len(pooled)} pooled docs embedded/loaded in {time.perf_counter() - t0:.1f} s")
    return out


def build_units(data: Mapping[str, Any], decomp: Decompositions, ranked: Ranked,
                embeddings: Mapping[str, Mapping[str, np.ndarray]], *, add_question_arm: bool,
                min_relevant: int) -> list[dict[str, Any]]:
    """One unit per (dataset, decomposition, request, sample): its columns and its
    :class:`~qrlib.methods.bandits.bandits.Request` under ``"req"``. Requests without any
    retrieved document, or whose pool holds fewer than ``min_relevant`` relevant documents,
    are left out (the paper keeps requests with enough relevant documents too)."""
    units = []
    for (name, kind), dd in decomp.items():
        ds = data[name]
        for q, samples in dd.items():
            for si, subqs in enumerate(samples):
                arms = arms_for(ds.queries[q], subqs, add_question_arm)
                lists = [ranked[(name, a)] for a in arms]
                if not any(lists):
                    continue
                req = B.make_request(lists, ds.qrels[q], embeddings=embeddings[name], queries=arms)
                if req.rel.sum() < min_relevant:
                    continue
                units.append({"dataset": name, "decomposition": kind, "qid": q, "sample": si,
                              "arms": len(arms), "pool": req.n_docs,
                              "relevant": int(req.rel.sum()), "gold": len(ds.qrels[q]),
                              "req": req})
    return units


def pool_stats(units: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Per (dataset, decomposition): requests kept, runs, mean arms, pooled documents,
    relevant documents in the pool, gold documents and the relevant share of the pool."""
    unit_df = pd.DataFrame([{k: v for k, v in u.items() if k != "req"} for u in units])
    stats = (unit_df.groupby(["dataset", "decomposition"])
             .agg(requests=("qid", "nunique"), runs=("qid", "size"), arms=("arms", "mean"),
                  pool=("pool", "mean"), relevant_in_pool=("relevant", "mean"),
                  gold=("gold", "mean")).reset_index())
    stats["share_relevant"] = stats.relevant_in_pool / stats.pool
    return stats


# =========================================================================== 3-4. runs
def simulate_units(units: Sequence[Mapping[str, Any]], policy_names: Sequence[str], reps: int,
                   budgets: Sequence[float], seed: int
                   ) -> tuple[pd.DataFrame, dict[tuple[int, str], np.ndarray], float]:
    """Run every policy ``reps`` times on every unit to a 100 % budget (one run gives every
    budget as a prefix, paper Sec. 4.3). Returns the per-request table (precision and
    recall at each budget, mean over repetitions), the selection orders
    ``{(unit, policy): (reps, U) array}`` and the seconds it took. Seeds are
    ``[seed, unit, policy]``, so a run is reproducible policy by policy."""
    from tqdm.auto import tqdm

    orders: dict[tuple[int, str], np.ndarray] = {}
    rows = []
    t0 = time.perf_counter()
    for ui, u in enumerate(tqdm(units, desc="simulate", unit="request")):
        for pi, pname in enumerate(policy_names):
            order = B.simulate(u["req"], pname, reps, seed=[seed, ui, pi])
            orders[(ui, pname)] = order
            prec, rec = B.precision_recall(order, u["req"].rel, budgets)
            for bi, b in enumerate(budgets):
                rows.append({"unit": ui, "dataset": u["dataset"],
                             "decomposition": u["decomposition"], "qid": u["qid"],
                             "policy": pname, "budget": b, "precision": prec[:, bi].mean(),
                             "recall": np.nanmean(rec[:, bi])})
    return pd.DataFrame(rows), orders, time.perf_counter() - t0


def summarise(df: pd.DataFrame, keys: list[str], col: str) -> pd.DataFrame:
    """Mean, std, count and the 95 % normal half-width ``ci95`` of ``col`` per group of
    ``keys`` (the grouped form of :func:`~qrlib.methods.bandits.bandits.mean_ci`; a group of
    one has half-width 0)."""
    g = df.groupby(keys)[col]
    out = g.agg(["mean", "std", "count"]).reset_index()
    out["ci95"] = 1.96 * out["std"].fillna(0) / np.sqrt(out["count"])
    return out


def _legend(fig: Any, axes: Any, policy_names: Sequence[str], labels: Mapping[str, str],
            title: str) -> None:
    from qrlib import plots

    handles, labs = axes[0][0].get_legend_handles_labels()
    key = [p for p in KEY_POLICIES if p in policy_names]
    order = [labs.index(labels[p]) for p in key if labels[p] in labs]
    order += [i for i in range(len(labs)) if i not in order]
    plots.legend_outside(fig, [handles[i] for i in order], [labs[i] for i in order], title=title)


def _line(ax: Any, s_: pd.DataFrame, label: str, style: Mapping[str, Any], band: bool,
          alpha: float) -> None:
    ax.plot(s_.budget * 100, s_["mean"], label=label, **style)
    if band:
        ax.fill_between(s_.budget * 100, s_["mean"] - s_.ci95, s_["mean"] + s_.ci95,
                        color=style["color"], alpha=alpha, lw=0)


def plot_budget_curves(cur: pd.DataFrame, metric: str, policy_names: Sequence[str],
                       labels: Mapping[str, str]) -> Any:
    """One panel per (dataset, decomposition): ``metric`` of the selected documents against
    the budget for every policy (paper Figures 4, 8-11), the key policies in colour, bands
    for random and Eq. 1. ``cur`` is :func:`summarise` over dataset, decomposition, policy
    and budget."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    styles = plots.highlight_styles(policy_names, [p for p in KEY_POLICIES if p in policy_names])
    ds_names, kinds = sorted(set(cur.dataset)), sorted(set(cur.decomposition))
    fig, axes = plt.subplots(len(ds_names), len(kinds),
                             figsize=(4.0 * len(kinds), 3.2 * len(ds_names)), squeeze=False,
                             sharex=True)
    for r_, name in enumerate(ds_names):
        for c_, kind in enumerate(kinds):
            ax = axes[r_][c_]
            sub = cur[(cur.dataset == name) & (cur.decomposition == kind)]
            for pname in policy_names:
                s_ = sub[sub.policy == pname].sort_values("budget")
                if not s_.empty:
                    _line(ax, s_, labels[pname], styles[pname], pname in BAND_POLICIES, 0.15)
            ax.set_title(f"{name} / {kind}", fontsize=9)
            if r_ == len(ds_names) - 1:
                ax.set_xlabel("budget (% of pooled documents)")
            if c_ == 0:
                ax.set_ylabel(f"{metric} of selected docs")
    fig.tight_layout()
    _legend(fig, axes, policy_names, labels, "policy (grey: other Table 1 variants)")
    return fig


def budget_caption(metric: str, reps: int, depth: int, max_subqueries: int) -> str:
    """The caption of :func:`plot_budget_curves`' figure."""
    return (f"{metric.capitalize()} of the selected documents against the budget for "
            f"every Table 1 policy (paper Figures 4, 8-11), mean over {reps} repetitions "
            f"per request and over requests; the paper's key policies in colour, the other "
            f"variants grey; 95% CI bands (over requests) for random and Eq. 1, the "
            f"paired differences with their CIs are in the next figure. Smaller than the paper: multi-hop QA "
            f"requests with 2-4 gold paragraphs, {depth} docs per sub-query, at most "
            f"{max_subqueries} sub-queries (+ the request).")


def gain_over_rank(res: pd.DataFrame) -> pd.DataFrame:
    """Each bandit policy's precision minus the random rank-aware baseline's, paired per
    (unit, budget), summarised per dataset, policy and budget (:func:`summarise`)."""
    base = res[res.policy == "rank"].set_index(["unit", "budget"]).precision
    dif = res[~res.policy.isin(["rank", "random"])].copy()
    dif["delta"] = dif.precision.to_numpy() - base.loc[list(zip(dif.unit, dif.budget))].to_numpy()
    return summarise(dif, ["dataset", "policy", "budget"], "delta")


def plot_gain_over_rank(gain: pd.DataFrame, policy_names: Sequence[str],
                        labels: Mapping[str, str]) -> Any:
    """One panel per dataset: :func:`gain_over_rank` against the budget, bands for the key
    policies, a black line at 0."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    key = [p for p in KEY_POLICIES if p in policy_names]
    styles = plots.highlight_styles(policy_names, key)
    ds_names = sorted(set(gain.dataset))
    fig, axes = plt.subplots(1, len(ds_names), figsize=(5.2 * len(ds_names), 3.6), squeeze=False,
                             sharey=True)
    for ax, name in zip(axes[0], ds_names):
        for pname in policy_names:
            s_ = gain[(gain.dataset == name) & (gain.policy == pname)].sort_values("budget")
            if not s_.empty:
                _line(ax, s_, labels[pname], styles[pname], pname in key, 0.12)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("budget (% of pooled documents)")
    axes[0][0].set_ylabel("precision gain over rank-aware baseline")
    fig.tight_layout()
    _legend(fig, axes, policy_names, labels, "policy (grey: other variants)")
    return fig


def precision_table(cur: pd.DataFrame, budgets: Sequence[float],
                    labels: Mapping[str, str]) -> pd.DataFrame:
    """``mean ± ci95`` precision per (dataset, decomposition, policy) at the budgets the
    paper discusses (10, 20, 30, 50 and 100 %), one ``P@b%`` column each."""
    key_b = [b for b in budgets if round(b * 100) in (10, 20, 30, 50, 100)]
    pt = cur[cur.budget.isin(key_b)].copy()
    pt["value"] = pt["mean"].map("{:.3f}".format) + " ± " + pt["ci95"].map("{:.3f}".format)
    table = pt.pivot_table(index=["dataset", "decomposition", "policy"], columns="budget",
                           values="value", aggfunc="first")
    table.columns = [f"P@{round(c * 100)}%" for c in table.columns]
    table = table.reset_index()
    table["policy"] = table.policy.map(labels)
    return table


# =========================================================================== 5. alpha-nDCG
def alpha_ndcg_frame(units: Sequence[Mapping[str, Any]],
                     orders: Mapping[tuple[int, str], np.ndarray],
                     policy_names: Sequence[str], cutoffs: Sequence[int],
                     alpha_reps: int) -> pd.DataFrame:
    """alpha-nDCG@K (alpha = 0.5) of the first ``alpha_reps`` selection orders of every
    (unit, policy), mean over repetitions (:func:`~qrlib.methods.bandits.bandits.alpha_ndcg`)."""
    from tqdm.auto import tqdm

    rows = []
    reqs = {str(ui): u["req"] for ui, u in enumerate(units)}
    for pname in tqdm(policy_names, desc="alpha-nDCG"):
        keys = {str(ui): orders[(ui, pname)][:alpha_reps] for ui in range(len(units))}
        vals = B.alpha_ndcg(keys, reqs, cutoffs)
        for ui, u in enumerate(units):
            v = np.nanmean(vals[str(ui)], axis=0)
            for ci, kk in enumerate(cutoffs):
                rows.append({"unit": ui, "dataset": u["dataset"],
                             "decomposition": u["decomposition"], "policy": pname,
                             "K": kk, "alpha_nDCG": v[ci]})
    return pd.DataFrame(rows)


def alpha_table(an: pd.DataFrame, policy_names: Sequence[str],
                labels: Mapping[str, str]) -> pd.DataFrame:
    """Our mean alpha-nDCG per policy and (dataset/decomposition/@K), next to the paper's
    Table 3 completed by Table 5 (Gaussian, Bernoulli top-k=3) from ``published.yaml``."""
    s = summarise(an, ["dataset", "decomposition", "policy", "K"], "alpha_nDCG")
    tab = s.pivot_table(index="policy", columns=["dataset", "decomposition", "K"],
                        values="mean").reindex(policy_names)
    tab.columns = [f"{d.split('-')[0]}/{k}/@{K}" for d, k, K in tab.columns]
    tab.index = [labels[p] for p in tab.index]
    cols = ["Researchy @5", "Researchy @10", "NeuCLIR24 @5", "NeuCLIR24 @10", "NeuCLIR24 @20"]
    t3 = published.table("bandit", "Table 3", column=cols, wide=True, index="key")
    t5 = published.table("bandit", "Table 5", column=cols, wide=True, index="key")
    paper = pd.concat([t3, t5[~t5.index.isin(t3.index)]]).reindex(B.PAPER_ORDER)[cols]
    paper.columns = ["paper " + c.replace("NeuCLIR24", "NeuCLIR") for c in cols]
    paper.index = [B.POLICIES[p].label for p in paper.index]
    return tab.join(paper, how="left").reset_index(names="policy")


# =========================================================================== 6. hierarchy
def hierarchical_units(data: Mapping[str, Any], ranked: Ranked,
                       embeddings: Mapping[str, Mapping[str, np.ndarray]], *, parents: int,
                       children: int, min_relevant: int) -> list[dict[str, Any]]:
    """One two-level request per question: the parents of
    :func:`~qrlib.methods.bandits.decompose.heuristic_hierarchy` first (parent -1), then each
    parent's children (parent = its index)."""
    units = []
    for name, ds in data.items():
        for q in sorted(ds.queries):
            tree = D.heuristic_hierarchy(ds.queries[q], parents, children)
            arms = [node["parent"] for node in tree]
            parent = [-1] * len(tree)
            for pi_, node in enumerate(tree):
                arms += node["children"]
                parent += [pi_] * len(node["children"])
            lists = [ranked[(name, a)] for a in arms]
            if not any(lists):
                continue
            req = B.make_request(lists, ds.qrels[q], embeddings=embeddings[name], parent=parent,
                                 queries=arms)
            if req.rel.sum() >= min_relevant:
                units.append({"dataset": name, "qid": q, "req": req})
    return units


def hier_modes(loose: Sequence[float] | None) -> list[str]:
    """``serial``, ``hierarchical`` and, with a loose (n, tau), ``hierarchical-loose``."""
    return ["serial", "hierarchical"] + (["hierarchical-loose"] if loose else [])


def simulate_hierarchy(units: Sequence[Mapping[str, Any]], policy_names: Sequence[str],
                       reps: int, *, n: int, tau: float, lam: float,
                       loose: Sequence[float] | None, seed: int) -> pd.DataFrame:
    """Precision at 10 and 20 % of every policy in every mode of :func:`hier_modes` (the
    paper's (n, tau, lambda), or the loose (n, tau)); seeds ``[seed, 7, unit, policy]``."""
    from tqdm.auto import tqdm

    rows = []
    for ui, u in enumerate(tqdm(units, desc="serial vs hierarchical")):
        for pi, pname in enumerate(policy_names):
            for mode in hier_modes(loose):
                n_, tau_ = (n, tau) if mode != "hierarchical-loose" else loose
                order = B.simulate(u["req"], pname, reps, seed=[seed, 7, ui, pi],
                                   hierarchical=(mode != "serial"), n_min=int(n_),
                                   tau=float(tau_), lam=lam)
                prec, _ = B.precision_recall(order, u["req"].rel, HIER_BUDGETS)
                for bi, b in enumerate(HIER_BUDGETS):
                    rows.append({"dataset": u["dataset"], "qid": u["qid"], "policy": pname,
                                 "mode": mode, "budget": b, "precision": prec[:, bi].mean()})
    return pd.DataFrame(rows)


def _pm_ci(g: pd.DataFrame) -> np.ndarray:
    return (g["mean"].map("{:+.3f}".format) + " ± " + g["ci95"].map("{:.3f}".format)).values


def hierarchy_table(hier: pd.DataFrame, policy_names: Sequence[str], labels: Mapping[str, str],
                    loose: Sequence[float] | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mean precision per policy, mode and budget, the paired hierarchical-minus-serial
    differences (± 95 % CI) and the paper's Table 4 alongside; and the per-request
    ``gain`` frame (``diff`` = hierarchical - serial, ``diff_loose`` with the loose run)."""
    modes = hier_modes(loose)
    hs = summarise(hier, ["policy", "mode", "budget"], "precision")
    tab = hs.pivot_table(index="policy", columns=["budget", "mode"], values="mean").reindex(policy_names)
    tab = tab[[(b, m) for b in HIER_BUDGETS for m in modes]]
    short = {"serial": "Ser.", "hierarchical": "Hier.", "hierarchical-loose": "Hier. loose"}
    tab.columns = [f"{short[m]} b={round(b * 100)}%" for b, m in tab.columns]
    paper_t4 = published.table("bandit", "Table 4", wide=True, index="key")
    for col in ["Ser. 10%", "Hier. 10%", "Ser. 20%", "Hier. 20%"]:
        tab[f"paper {col}"] = paper_t4[col].reindex(tab.index).to_numpy()
    gain = hier.pivot_table(index=["dataset", "qid", "policy", "budget"], columns="mode",
                            values="precision").reset_index()
    gain["diff"] = gain["hierarchical"] - gain["serial"]
    if loose:
        gain["diff_loose"] = gain["hierarchical-loose"] - gain["serial"]
    gs = summarise(gain, ["policy", "budget"], "diff")
    for b in HIER_BUDGETS:
        g = gs[gs.budget == b].set_index("policy").reindex(policy_names)
        tab[f"Hier.-Ser. b={round(b * 100)}% (±95% CI)"] = _pm_ci(g)
        if loose:
            g2 = summarise(gain, ["policy", "budget"], "diff_loose")
            g2 = g2[g2.budget == b].set_index("policy").reindex(policy_names)
            tab[f"loose-Ser. b={round(b * 100)}% (±95% CI)"] = _pm_ci(g2)
    tab.index = [labels[p] for p in tab.index]
    return tab.reset_index(names="policy"), gain


# =========================================================================== 7. checks
def holds(row: Mapping[str, Any]) -> str:
    """How a finding (``method`` above ``baseline``) fares: "yes" (interval above 0), "no"
    (interval below 0) or "not shown" (the interval contains 0, ties included)."""
    return {"beats": "yes", "falls below": "no"}.get(verdict(row["lo"], row["hi"]), "not shown")


def all_hold(rows: Sequence[Mapping[str, Any]]) -> str:
    """One verdict over several paired comparisons: "yes" when every one holds, "no" when
    one goes the other way, else "not shown"."""
    vs = [holds(r) for r in rows]
    return "yes" if vs and all(v == "yes" for v in vs) else ("no" if "no" in vs else "not shown")


def small_budgets(budgets: Sequence[float]) -> list[float]:
    """The budgets the checks average over: those <= 30 %."""
    return [b for b in budgets if b <= 0.3 + 1e-9]


def precision_by_policy(res: pd.DataFrame, col: str = "precision") -> pd.DataFrame:
    """Mean per-request ``col`` as a policy x budget frame."""
    return res.groupby(["policy", "budget"])[col].mean().unstack("budget")


@dataclass
class PairedChecks:
    """Paired comparisons of policies on per-request precision, averaged over the budgets
    <= 30 % (``unit_small``: unit x policy), each a row of the workbook's comparison schema
    (:func:`qrlib.eval.compare.compare`, 95 % paired bootstrap over requests) kept in
    ``rows`` in the order they were made."""

    unit_small: pd.DataFrame
    labels: Mapping[str, str]
    dataset: str
    retriever: str
    seed: int
    rows: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_runs(cls, res: pd.DataFrame, budgets: Sequence[float], labels: Mapping[str, str], *,
                  dataset: str, retriever: str, seed: int) -> PairedChecks:
        small = small_budgets(budgets)
        unit_small = (res[res.budget.isin(small)].groupby(["unit", "policy"]).precision.mean()
                      .unstack())
        return cls(unit_small, labels, dataset, retriever, seed)

    def paired(self, a: str, b: str) -> dict[str, Any]:
        """Policy ``a`` minus ``b`` (mean over budgets <= 30 %), recorded in ``rows``."""
        row = compare(self.unit_small[a].to_dict(), self.unit_small[b].to_dict(),
                      paper="bandits", dataset=self.dataset, retriever=self.retriever,
                      metric="precision, budgets <= 30%", method=self.labels[a],
                      kind="model-free", baseline=self.labels[b],
                      baseline_kind="baseline" if b == "random" else "model-free",
                      seed=self.seed)
        self.rows.append(row)
        return row

    def hierarchy(self, gain: pd.DataFrame, mode: str, name: str) -> dict[str, Any]:
        """``mode`` minus serial at 10 %, per request averaged over the Bernoulli family
        (Table 4's comparison), recorded in ``rows``."""
        g = gain[(gain.budget == 0.1) & gain.policy.str.startswith("bernoulli")]
        g = g.groupby(["dataset", "qid"])[[mode, "serial"]].mean()
        keys = [f"{d_}/{q_}" for d_, q_ in g.index]
        row = compare(dict(zip(keys, g[mode])), dict(zip(keys, g["serial"])), paper="bandits",
                      dataset=self.dataset, retriever=self.retriever,
                      metric="precision at 10%, Bernoulli family", method=f"{mode} ({name})",
                      kind="model-free", baseline="serial", baseline_kind="model-free",
                      seed=self.seed)
        self.rows.append(row)
        return row


def direction_checks(P: PairedChecks, pm: pd.DataFrame,
                     gain: pd.DataFrame | None) -> list[tuple[str, str, str]]:
    """The paper's findings as (finding, verdict, evidence), checked on this run: every
    policy meets at 100 %; bandits beat random at <= 30 %; rank information helps (top-k=3
    over the rank-aware baseline; top-k, rank-aware and Eq. 1 over plain Bernoulli; a top-k
    policy best overall, Figures 4, 8-9, Tables 4-5); Gaussian trails Bernoulli (Table 5);
    hierarchy beats serial at 10 % (Table 4; skipped when ``gain`` is None)."""
    us, labels, paired = P.unit_small, P.labels, P.paired
    checks = []
    if 1.0 in pm.columns:
        spread = float(pm[1.0].max() - pm[1.0].min())
        checks.append(("all policies meet at 100 %", "yes" if spread < 1e-9 else "no",
                       f"max spread of precision@100% {spread:.1e}"))
    if "random" in us:
        sig = [p for p in us if p != "random" and holds(paired(p, "random")) == "yes"]
        checks.append(("bandits beat random at <= 30 %",
                       "yes" if len(sig) == us.shape[1] - 1 else f"{len(sig)} policies",
                       f"{len(sig)}/{us.shape[1] - 1} policies significantly above random"))
    if "rank" in us and "bernoulli_top3" in us:
        r = paired("bernoulli_top3", "rank")
        checks.append(("rank information helps: top-k=3 beats the rank-aware baseline",
                       holds(r), fmt_interval(r)))
    if "bernoulli" in us:
        for p in ("bernoulli_top3", "bernoulli_top5", "bernoulli_rank", "topk_ucb_div"):
            if p in us:
                r = paired(p, "bernoulli")
                checks.append((f"{labels[p]} beats plain Bernoulli", holds(r), fmt_interval(r)))
        if "gaussian" in us:
            r = paired("bernoulli", "gaussian")
            checks.append(("Gaussian (scores) trails Bernoulli", holds(r), fmt_interval(r)))
    means_small = us.mean().drop(["random", "rank"], errors="ignore")
    best_top = means_small[[p for p in means_small.index if "top" in p]]
    best_rest = means_small[[p for p in means_small.index if "top" not in p]]
    if len(best_top) and len(best_rest):
        r = paired(best_top.idxmax(), best_rest.idxmax())  # the best top-k against the best other
        checks.append(("a top-k Bernoulli policy is the best overall", holds(r), fmt_interval(r)))
    if gain is not None:
        for mode, name_ in (("hierarchical", "paper n, tau"), ("hierarchical-loose", "loose n, tau")):
            if mode in gain:
                r = P.hierarchy(gain, mode, name_)
                checks.append((f"hierarchy ({name_}) beats serial at 10 % (Bernoulli family)",
                               holds(r), fmt_interval(r)))
    return checks


def key_numbers(res: pd.DataFrame, checks: Sequence[tuple[str, str, str]], n_units: int,
                gain: pd.DataFrame | None) -> dict[str, Any]:
    """The numbers the smoke tests read: precision at 10, 20, 30 and 100 % and recall at
    100 % per policy, the requests simulated, each check's verdict and the hierarchical
    minus serial gain at 10 % (Bernoulli family)."""
    pm, rm = precision_by_policy(res), precision_by_policy(res, "recall")
    out: dict[str, Any] = {}
    for pname in pm.index:
        for b in (0.1, 0.2, 0.3, 1.0):
            if b in pm.columns:
                out[f"precision.{pname}.b={b:g}"] = pm.loc[pname, b]
        if 1.0 in rm.columns:
            out[f"recall.{pname}.b=1"] = rm.loc[pname, 1.0]
    out["requests_simulated"] = n_units
    for finding, verdict_, _ in checks:
        out[f"check.{finding}"] = verdict_
    if gain is not None:
        hb10 = gain[(gain.budget == 0.1) & gain.policy.str.startswith("bernoulli")]
        out["hier_minus_serial.bernoulli_family.b=0.1"] = hb10["diff"].mean()
    return out


# =========================================================================== the paper
def _near_10(pm: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Our mean precision at the budget nearest 10 %, and the bandits (not random, not
    rank) sorted best first."""
    p10 = pm[min(pm.columns, key=lambda b: abs(b - 0.1))]
    bandit_pols = [p for p in p10.index if p not in ("random", "rank")]
    return p10, p10[bandit_pols].sort_values(ascending=False)


def paper_comparison(pm: pd.DataFrame, check_df: pd.DataFrame, P: PairedChecks,
                     profile: str) -> pd.DataFrame:
    """The paper's findings beside its Table 4 numbers (ResearchyQuestions, 10 %) and ours
    (~10 %, pooled), with the verdict of this run (from ``check_df`` or a paired check)."""
    us = P.unit_small
    p10, ranked = _near_10(pm)
    t4 = published.table("bandit", "Table 4", wide=True, index="key")
    verdict_of = dict(zip(check_df["paper's finding"], check_df["holds here"]))
    evidence_of = dict(zip(check_df["paper's finding"], check_df.iloc[:, 2]))

    def ours(p: str) -> str:
        return f"{p10[p]:.3f}" if p in p10.index else "–"

    def paper(p: str, col: str = "Ser. 10%") -> str:
        return f"{t4.loc[p, col]:.3f}" if p in t4.index else "–"

    def check(prefix: str) -> str:
        hit = [k for k in verdict_of if k.startswith(prefix)]
        return f"{verdict_of[hit[0]]} ({evidence_of[hit[0]]})" if hit else "not checked in this run"

    def rank_of(p: str) -> str:
        return (f"{ours(p)} (rank {list(ranked.index).index(p) + 1} of {len(ranked)} bandits)"
                if p in ranked else "–")

    def pair_text(a: str, b: str) -> str:
        r = P.paired(a, b)
        return f"{r['score']:.3f} vs {r['baseline score']:.3f} at <= 30 % ({fmt_interval(r)})"

    bern = [p for p in p10.index if p not in ("random", "rank") and p.startswith("bernoulli")
            and p in us]
    egreedy_next = [p for p in ranked.index if p != "egreedy"][:1]
    not_checked = "not checked in this run"
    rows = [
        ("bandits beat random", f"random {paper('random')}, Bernoulli {paper('bernoulli')}",
         f"random {ours('random')}, bandits {ranked.min():.3f}-{ranked.max():.3f}",
         check("bandits beat random")),
        ("the rank-aware baseline is below every Bernoulli policy",
         f"{paper('rank')} vs Bernoulli {paper('bernoulli')}",
         f"{ours('rank')} vs Bernoulli {ours('bernoulli')} (~10 %)",
         all_hold([P.paired(p, "rank") for p in bern]) if "rank" in us and bern else not_checked),
        ("top-k Bernoulli (k=3) beats Bernoulli",
         f"{paper('bernoulli_top3')} vs {paper('bernoulli')}",
         f"{ours('bernoulli_top3')} vs {ours('bernoulli')}", check("Bernoulli top-k=3 beats")),
        ("top-k UCB diversity (Eq. 1) is among the best", paper("topk_ucb_div"),
         rank_of("topk_ucb_div"), check("Top-k UCB diversity")),
        ("ε-greedy is best at 10-20 % (Sec. 5.1, NeuCLIR)", paper("egreedy"), rank_of("egreedy"),
         holds(P.paired("egreedy", egreedy_next[0])) if "egreedy" in us and egreedy_next
         and egreedy_next[0] in us else not_checked),
        ("Gaussian trails Bernoulli (Table 5)", f"{paper('gaussian')} vs {paper('bernoulli')}",
         pair_text("bernoulli", "gaussian") if {"bernoulli", "gaussian"} <= set(us) else "–",
         check("Gaussian")),
        ("hierarchy helps at 10 % (Bernoulli)",
         f"Hier. {paper('bernoulli', 'Hier. 10%')} vs Ser. {paper('bernoulli')}",
         "see `09_serial_vs_hierarchical`", check("hierarchy (paper")),
    ]
    return pd.DataFrame(rows, columns=["paper's finding", "paper (Table 4, 10 %)",
                                       f"ours ({profile}, ~10 %)", "holds here"])


def why_differences(pool: pd.DataFrame, *, hier_n: int, hier_tau: float,
                    hier_loose: Sequence[float] | None, decompositions: Sequence[str],
                    model_requests: int, model_samples: int, model_note: str,
                    gpu: Mapping[str, Any] | None = None) -> str:
    """Markdown: why our numbers differ from the paper's (pool size, few relevant
    documents, the hierarchy threshold of Sec. 5.3, alpha-nDCG's subtopics, the model
    decompositions of this profile and of ``params/gpu.yaml``), from this run's
    ``09_pool_stats`` and the paper's Sec. 4 setting."""
    if gpu is None:
        import yaml

        from qrlib.core.io import REPO_ROOT

        gpu = yaml.safe_load((REPO_ROOT / "params" / "gpu.yaml").read_text())["notebooks"].get(
            "09_bandit_selection", {})  # the gpu profile sets this section itself (no `extends`)
    setup_ = published.table("bandit", "Sec. 4", wide=True)["value"]
    k_, n_ = setup_["NeuCLIR sub-queries per request k"], setup_["documents retrieved per sub-query n"]
    why = [
        f"- **Pool size.** A request here pools {pool['pool'].min():.1f}-{pool['pool'].max():.1f} "
        f"documents on average (`09_pool_stats`), against up to {k_ * n_:.0f} "
        f"on NeuCLIR ({k_:.0f} sub-queries x {n_:.0f} documents, paper Sec. 4). A 10 % budget is then a few "
        "documents here, so precision at 10 % is decided by which arm is tried first; \"try every "
        "arm once\" (the UCB term's limit) wins because each sub-query's top document is the most "
        "likely gold paragraph.",
        f"- **Few relevant documents.** Requests hold {pool['relevant_in_pool'].min():.1f}-"
        f"{pool['relevant_in_pool'].max():.1f} relevant documents in their pool, so absolute "
        "precision at 100 % is low; ε-greedy jumps to a random arm after each irrelevant document, "
        "which is most of them.",
        f"- **Hierarchy threshold.** With the paper's (n, τ) = ({hier_n}, {hier_tau}) a parent must "
        f"return {hier_n} relevant documents to expand from a flat prior (posterior mean "
        f"{(1 + hier_n) / (2 + hier_n):.2f} > τ only if all were relevant), which two gold "
        "paragraphs rarely allow; the hierarchical run becomes \"parents first\". The looser "
        f"setting {hier_loose} expands, but the deterministic children overlap their parents.",
        "- **α-nDCG.** Our subtopics are the sub-queries' relevant documents and each request has "
        "few, so policies that read top ranks first score high (`09_alpha_ndcg`); compare "
        "orderings with the paper's Tables 3 and 5, not levels.",
        (f"- **Model decompositions** cover {model_requests} requests x {model_samples} samples per "
         f"dataset in this profile ({model_note})." if "model" in decompositions else
         "- **Model decompositions** are not run in this profile.") + " The gpu profile (`params/gpu.yaml`) decomposes "
        f"{gpu.get('model_requests', '?')} requests x {gpu.get('model_samples', '?')} samples with "
        f"{gpu.get('decompose_model', '?')}; the paper uses "
        f"{setup_['decompositions per request']:.0f} decompositions per request.",
    ]
    return "**Why the differences**\n\n" + "\n".join(why)


def order_small(pm: pd.DataFrame, budgets: Sequence[float]) -> pd.Series:
    """Mean precision over the budgets <= 30 % per policy, best first."""
    return pm.loc[:, small_budgets(budgets)].mean(axis=1).sort_values(ascending=False)


def _short_verdict(holds: str) -> str:
    """``"not shown (+0.002 [-0.003, +0.007])"`` -> ``"not shown: +0.002 [-0.003, +0.007]"``
    (a verdict without its evidence is returned as it is)."""
    head, _, rest = holds.partition(" (")
    return f"{head}: {rest[:-1]}" if rest.endswith(")") else holds


def findings(check_df: pd.DataFrame, comparison: pd.DataFrame, pm: pd.DataFrame,
             budgets: Sequence[float], labels: Mapping[str, str], *, n_units: int,
             reps: int) -> str:
    """The "What we found" paragraph: how many of the findings in the two tables hold, go
    the other way or are not shown, the ones not reproduced (named in one sentence), the
    best and weakest policy and the spread at a 100 % budget."""
    verdicts = pd.concat([check_df[["paper's finding", "holds here"]],
                          comparison[["paper's finding", "holds here"]]], ignore_index=True)
    verdicts["verdict"] = verdicts["holds here"].str.split(" ").str[0]  # "yes (...)" -> "yes"
    verdicts = verdicts.drop_duplicates("paper's finding")
    count = verdicts.verdict.value_counts()
    yes, no = count.get("yes", 0), count.get("no", 0)
    rest = len(verdicts) - yes - no
    out = [f"Of the {len(verdicts)} findings checked in the two tables above, "
           f"{yes} hold{'s' if yes == 1 else ''} (interval above 0), {no} go"
           f"{'es' if no == 1 else ''} the other way and {rest} {'is' if rest == 1 else 'are'} "
           f"not shown (the interval contains 0, or not checked) on this run ({n_units} "
           f"simulated requests, {reps} repetitions each)."]
    missed = verdicts[verdicts.verdict != "yes"]
    if len(missed):
        out.append("Not reproduced here: " + ", ".join(
            f"*{name}* ({_short_verdict(holds)})"
            for name, holds in zip(missed["paper's finding"], missed["holds here"])) + ".")
    best = order_small(pm, budgets)
    p10, ranked = _near_10(pm)
    random_ = f"{p10['random']:.3f}" if "random" in p10.index else "–"
    out.append(f"The best policy at budgets <= 30 % is {labels[best.index[0]]} "
               f"({best.iloc[0]:.3f} mean precision); at ~10 % the weakest bandit is "
               f"{labels[ranked.index[-1]]} ({p10[ranked.index[-1]]:.3f}) and random reaches "
               f"{random_}.")
    if 1.0 in pm.columns:
        out.append(f"At a 100 % budget every policy has read the same pool: precision spread "
                   f"{pm[1.0].max() - pm[1.0].min():.1e} across policies.")
    return paragraph(out)
