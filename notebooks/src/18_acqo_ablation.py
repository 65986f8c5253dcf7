# ---
# jupyter:
#   qrlib:
#     reads: [06_acqo_stage1, 07_acqo_stage2, 12_acqo_vanilla_rl]  # earlier notebooks whose artifacts this one reads (qrlib.freshness)
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # reads 06's, 07's and 12's runs; writes the RRF-trained runs
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run; 07's per-question table is read from here
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for subsets and the bootstrap
data_dir = None  # BEIR folders; None means ../shared/data or $QRLIB_DATA
model = "smollm2"  # policy (06's and 07's)
retrievers = ["bm25"]  # training retrievers of 06/07 (one ablation per retriever)
runs = ["rrf-stage2"]  # readings of "without RSF" to train: rrf-stage2 (Stage II only), rrf-both (Stage I and II)
lam = 1.0  # Stage II top-rank bonus weight, ACQO Eq. 10 (07's)
k_star = 0  # Stage II bonus ranks, ACQO Eq. 10 (07's)
test_datasets = ["2wikimultihopqa-mini"]  # 07's (and 12's) test sets
n_test_queries = 4  # 07's n_test_queries (None: all)
n_test_distractors = 60  # 07's n_test_distractors (None: the full corpus)
eval_batch_size = 8  # questions decoded together (07's)
eval_autocast = False  # bf16 autocast of the greedy decoding (07's: fp32)
eval_k = 100  # depth of each sub-query's list and of the fused list
n_decode_check = 4  # test questions 07's ACQO adapter decodes again here; must equal 07's
bootstrap = 2000  # paired-bootstrap resamples
n_examples = 4  # example decompositions shown
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
rollouts = "hf"  # generation engine: hf | vllm (qrlib.generation.engine)
dense_model = "minilm"  # encoder of the dense retriever: offline all-MiniLM-L6-v2; a hub id (BAAI/bge-base-en-v1.5) on GPU

# %% [markdown]
# # 18 · ACQO's ablation: without RSF, without Stage II, without decomposition
#
# *Paper:* [When Should I Search More: Adaptive Complex Query Optimization with Reinforcement Learning](https://arxiv.org/abs/2601.21208) (Wen, Deng, Wei, Chen, Qiao and Sun; arXiv:2601.21208, 2026).
#
# ACQO Table 5 removes one of its three components at a time and reports what is lost.
# Two of the three rows are already trained elsewhere in the workbook, and this notebook
# scores them on the same test questions:
#
# | Table 5 row | what it is here | trained in |
# |---|---|---|
# | ACQO | Stage I + II, sub-queries fused by RSF | 06-07 |
# | without Stage II | the Stage I adapter | 06 |
# | without query decomposition | one query, nDCG@10 reward, the same step budget | 12 |
# | **without RSF** | the curriculum with Reciprocal Rank Fusion instead | **here** |
#
# **Rank-Score Fusion** (ACQO Eq. 1-2, as notebook 03 implements it) orders a document by
# its rank consensus over the $M$ sub-query lists, $P(d) = 1 / \sum_i 1/r_i(d)$ (ascending:
# first in one list gives $P = 1$), and breaks ties by its strongest score
# $S(d) = \max_i s_i(d)$. **Reciprocal Rank Fusion** (Cormack et al., 2009) uses
#
# $$ \mathrm{RRF}(d) = \sum_{i=1}^{M} \frac{1}{60 + r_i(d)} , $$
#
# which flattens the head of each list ($1/61$ vs $1/62$ for ranks 1 and 2, where RSF has
# $1$ vs $1/2$) and ignores scores. The fusion enters twice: in the reward of every rollout
# (Stage I scores the best subset's fused list, Eq. 6; Stage II the fusion of all
# sub-queries, Eq. 9-10), and at test time.
#
# **Which reading of "without RSF".** The paper does not say whether its "w/o RSF" model
# repeats both stages with RRF. Two readings are offered (`runs`):
#
# - `rrf-stage2`: Stage II retrained with RRF in its reward, from 06's Stage I adapter (which
#   was trained with RSF), on the questions 07's tau filter kept; RRF at test.
# - `rrf-both`: Stage I retrained with RRF from 06's cold-start adapter, then Stage II with
#   RRF from it; RRF at test. This is the full ablation and costs a Stage I run again.
#
# Each training run is 07's (or 06's) saved `config.json` with only its name and start
# adapter changed, and its reward environment must print as ACQO's did with only the fusion
# changed (`qrlib.methods.acqo.ablation.check_env`). A free third row separates training
# from inference: ACQO's own sub-queries fused by RRF at test.

# %%
import time

from qrlib import session

S = session.start("18_acqo_ablation", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  torch_threads=torch_threads, rollouts=rollouts,
                  dense_model=dense_model)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import dataclasses
import json
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from qrlib import plots
from qrlib.core.errors import QrlibError
from qrlib.core.io import read_table, save_json, save_table
from qrlib.data import datasets as qdata
from qrlib.eval import metrics, published
from qrlib.eval.compare import compare, comparison_table
from qrlib.eval.scale import fmt_scale, log_scale, scale_columns
from qrlib.generation import engine
from qrlib.methods.acqo.ablation import (RUNS, check_env, check_same_test, load_subqueries,
                                         load_validity,
                                         rerun_config, saved_env, training_collection)
from qrlib.methods.acqo.artifacts import Stage1Record
from qrlib.methods.acqo.curriculum import SubqueryProbe, search_fused
from qrlib.methods.acqo.transfer import Stage2Record, decompose
from qrlib.retrieval import retrievers as retrieval
from qrlib.rl.env import RewardEnv
from qrlib.rl.train import load_config, train

unknown = sorted(set(runs) - set(RUNS))
if unknown:
    raise QrlibError(f"runs: unknown reading {unknown[0]!r}; accepted: {', '.join(RUNS)}")
S1 = Stage1Record.load(run_dir / "06_acqo_stage1")
S2 = Stage2Record.load(run_dir / "07_acqo_stage2")
VANILLA = json.loads((run_dir / "12_acqo_vanilla_rl" / "vanilla.json").read_text()) \
    if (run_dir / "12_acqo_vanilla_rl" / "vanilla.json").exists() else None
if VANILLA is None:
    raise QrlibError(f"notebook 18 reads 12's runs from {run_dir / '12_acqo_vanilla_rl'}, "
                     f"which does not exist; run notebook 12 of profile {profile} first")
print(f"profile={profile} model={model}; 06 trained {sorted(S1.summaries)}, 07 "
      f"{sorted(S2.summaries)}, 12 {sorted(VANILLA['summaries'])}")

# %% [markdown]
# ## 1. Training without RSF
#
# 06's training corpus and questions are rebuilt from its record; Stage II trains on the
# questions 07 kept. The environments are built as 06 and 07 built theirs, with
# `fusion="rrf"`.

# %%
CORPUS, QRELS = training_collection(
    S1, lambda name: qdata.load_dataset(name, "train", data_dir=data_dir))
print(f"training corpus: {len(CORPUS)} paragraphs, {len(QRELS)} training questions")


def train_retriever(kind):
    """06's and 07's training retriever over the rebuilt corpus."""
    if kind == "bm25":
        return retrieval.build_retriever("bm25", CORPUS, k1=1.2, b=0.75)
    return retrieval.build_retriever("dense", CORPUS, index="hnsw", hnsw_m=32,
                                     cache_dir=cache_dir, show_progress=False)


def acqo_env(retr, reward, **extra):
    """06's and 07's reward environment with RRF in the loop."""
    return SubqueryProbe(RewardEnv(retr, QRELS, reward=reward, fmt="acqo", k=S1.reward_k,
                                   max_subqueries=3, lenient=True, eta=S1.eta,
                                   delta=S1.delta, fusion="rrf", **extra), k=10)


def run_config(summary):
    """The config.json beside a run's adapter."""
    return Path(summary["log"]).parent / "config.json"


TRAINED = {}  # (reading, retriever) -> [Stage I summary, Stage II summary]
for kind in retrievers:
    retr = train_retriever(kind)
    s1, s2 = S1.summary(kind), S2.summaries.get(kind)
    if s2 is None:
        S2.adapter(kind)  # the one-line error naming what 07 trained
    kept = set(S2.kept[kind]) or {r["qid"] for r in S1.train_rows}
    rows2 = [r for r in S1.train_rows if r["qid"] in kept]
    for reading in runs:
        start2, logs = s1, [s1]
        if reading == "rrf-both":
            if not s1.get("sft_adapter"):
                raise QrlibError(f"rrf-both retrains Stage I from 06's cold-start adapter; 06 "
                                 f"ran no cold start for {kind} (sft_steps 0)")
            env1 = acqo_env(retr, "acqo_stage1")
            check_env(env1, saved_env(run_config(s1)), fusion="rrf")
            cfg1 = load_config(rerun_config(run_config(s1), name=f"acqo-stage1-rrf-{kind}",
                                            init_adapter=s1["sft_adapter"], sft_steps=0,
                                            run_dir=str(run_dir)))
            start2 = train(cfg1, env=env1, rows=S1.train_rows)
        env2 = acqo_env(retr, "acqo_stage2", lam=lam, k_star=k_star)
        check_env(env2, saved_env(run_config(s2)), fusion="rrf")
        cfg2 = load_config(rerun_config(run_config(s2), name=f"acqo-stage2-{reading}-{kind}",
                                        init_adapter=start2["adapter"], run_dir=str(run_dir)))
        t0 = time.perf_counter()
        summ2 = train(cfg2, env=env2, rows=rows2)
        TRAINED[reading, kind] = [start2, summ2]
        print(f"{reading}/{kind}: Stage II {summ2['steps']} steps on {len(rows2)} questions "
              f"({time.perf_counter() - t0:.0f}s this session)")
_ = save_json({f"{r} | {k}": v for (r, k), v in TRAINED.items()}, out_dir / "ablation_runs.json")

# %% [markdown]
# ### Training health
#
# Per step and run (`qrlib.rl.health`): the reward, the shares of rollouts that are
# well-formed and that hit the token budget, the share that copy the input query (*copy*)
# or repeat one of the prompt's own examples or placeholders (*echo*), and the share of
# groups whose rewards are all equal (no GRPO signal). A run has **collapsed** when its
# copy or echo share is above 0.9 over its last quarter of steps.

# %%
from qrlib.rl.health import health_report

HEALTH, health_lines = health_report({k: v[1] for k, v in TRAINED.items()}, "18_health",
                                     tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# ### Training curves beside ACQO's
#
# The Stage II reward of each run (RRF-fused lists score differently from RSF-fused ones,
# so the levels are not comparable; the trends are) and the sub-queries per rollout.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
CURVES = {("ACQO (RSF)", k): pd.read_csv(S2.summaries[k]["log"]) for k in retrievers}
CURVES.update({(f"without RSF [{r}]", k): pd.read_csv(v[1]["log"])
               for (r, k), v in TRAINED.items()})
for i, ((label, kind), log) in enumerate(CURVES.items()):
    for ax, col in zip(axes, ("reward", "part/n_sub")):
        if col in log:
            ax.plot(log.step, log[col].rolling(4, min_periods=1).mean(), color=f"C{i}",
                    label=f"{label}, {kind}")
axes[0].set(xlabel="Stage II step", ylabel="Stage II reward (rolling mean of 4)")
axes[1].set(xlabel="Stage II step", ylabel="sub-queries per rollout")
plots.legend_outside(axes[1])
fig.tight_layout()
_ = plots.save_figure(fig, "18_stage2_curves", figures_dir, profile=profile,
                  caption="Stage II with RSF (07) and with RRF (here) in the reward",
                  setting=f"{model}; from the logs: " + "; ".join(
                      f"{lab} {k}: {fmt_scale(log_scale(lg))}" for (lab, k), lg in CURVES.items()))

# %% [markdown]
# ## 2. The test: 07's questions and corpus
#
# The same test cut as 07; the raw question is scored again and must give 07's
# per-question nDCG@10, and 07's ACQO adapter decodes the first `n_decode_check` questions
# again and must write 07's sub-queries: both check that every row below is scored on the
# same footing. ACQO's, Stage I's and 12's test sub-queries are read from their notebooks'
# saved decompositions; the RRF-trained adapters decode here.

# %%
PER_Q_07 = read_table(tables_dir / "07_per_question_ndcg10.csv") \
    if (tables_dir / "07_per_question_ndcg10.csv").exists() else None
if PER_Q_07 is None:
    raise QrlibError(f"notebook 18 reads 07's table {tables_dir / '07_per_question_ndcg10.csv'}"
                     f", which does not exist; run notebook 07 of profile {profile} first")
TEST = {name: qdata.subset(qdata.load_dataset(name, "test", data_dir=data_dir),
                           n_queries=n_test_queries, n_distractors=n_test_distractors,
                           seed=seed) for name in test_datasets}
DEC07 = run_dir / "07_acqo_stage2" / "decompositions.json"
DEC12 = run_dir / "12_acqo_vanilla_rl" / "rewrites.json"
ROWS, FUSION, SCALE, GEN = {}, {}, {}, {}  # (label, dataset, kind) -> sub-queries / fusion / scale
VALID = {}  # (label, dataset, kind) -> test validity (share of well-formed decompositions)
s1_logs = {k: pd.read_csv(S1.summary(k)["log"], dtype={"qids": str}) for k in retrievers}
for kind in retrievers:
    sft = S1.sft_steps if S1.summary(kind).get("sft_adapter") else 0
    warm = S1.sft_questions.get(kind, 0) if sft else 0
    s2_log = pd.read_csv(S2.summaries[kind]["log"], dtype={"qids": str})
    van_log = pd.read_csv(VANILLA["summaries"][kind]["log"], dtype={"qids": str})
    acqo, stage1 = f"ACQO: Stage I+II ({kind}-trained)", f"Stage I ({kind}-trained)"
    for name, ds in TEST.items():
        ROWS["raw question", name, kind] = {q: [t] for q, t in ds.queries.items()}
        ROWS["ACQO", name, kind] = load_subqueries(DEC07, f"{acqo} | {name}", "notebook 07")
        ROWS["ACQO, RRF at test only", name, kind] = ROWS["ACQO", name, kind]
        ROWS["without Stage II", name, kind] = load_subqueries(DEC07, f"{stage1} | {name}",
                                                               "notebook 07")
        ROWS["without query decomposition", name, kind] = load_subqueries(
            DEC12, f"{name} | {kind}", "notebook 12")
        FUSION.update({("ACQO, RRF at test only", name, kind): "rrf"})
        for label, path, key, writer in (
                ("ACQO", DEC07, f"{acqo} | {name}", "notebook 07"),
                ("ACQO, RRF at test only", DEC07, f"{acqo} | {name}", "notebook 07"),
                ("without Stage II", DEC07, f"{stage1} | {name}", "notebook 07"),
                ("without query decomposition", DEC12, f"{name} | {kind}", "notebook 12")):
            VALID[label, name, kind] = load_validity(path, key, writer)
        SCALE.update({("ACQO", kind): ([s1_logs[kind], s2_log], sft, warm),
                      ("ACQO, RRF at test only", kind): ([s1_logs[kind], s2_log], sft, warm),
                      ("without Stage II", kind): ([s1_logs[kind]], sft, warm),
                      ("without query decomposition", kind): ([van_log], 0, 0)})
    # the decoding check: 07's ACQO adapter again, on the first questions of each test set
    if n_decode_check:
        firsts = {name: sorted(ds.queries)[:n_decode_check] for name, ds in TEST.items()}
        sub = {name: dataclasses.replace(
                   ds, queries={q: ds.queries[q] for q in firsts[name]},
                   qrels={q: ds.qrels[q] for q in firsts[name]},
                   query_meta={q: m for q, m in ds.query_meta.items() if q in firsts[name]})
               for name, ds in TEST.items()}
        again = decompose(model, S2.adapter(kind), sub, batch_size=eval_batch_size,
                          autocast=eval_autocast)  # the adapter's decoding contract
        for name, dec in again.items():
            same = sum(d["subqueries"] == ROWS["ACQO", name, kind][d["qid"]] for d in dec)
            record(f"{name}.{kind}.decode_check_agreement", same / len(dec))
            print(f"{name}/{kind}: 07's adapter re-decodes {same} of {len(dec)} questions as "
                  f"07 did")
            if same < 0.9 * len(dec):  # batching may move a rare greedy tie; settings, many
                raise QrlibError(f"{name}/{kind}: 07's ACQO adapter decodes {len(dec) - same} "
                                 f"of {len(dec)} test questions differently here than in 07; "
                                 f"the decoding settings do not match 07's")
    for (reading, k), (start, summ2) in TRAINED.items():
        if k != kind:
            continue
        label = f"without RSF [{reading}]"
        for name, dec in decompose(model, summ2["adapter"], TEST, batch_size=eval_batch_size,
                                   autocast=eval_autocast).items():  # its decoding contract
            GEN[label, name, kind] = dec
            ROWS[label, name, kind] = {d["qid"]: d["subqueries"] for d in dec}
            FUSION[label, name, kind] = "rrf"
            VALID[label, name, kind] = sum(d["format_ok"] for d in dec) / len(dec)
        logs = [pd.read_csv(start["log"], dtype={"qids": str}),
                pd.read_csv(summ2["log"], dtype={"qids": str})]
        SCALE[label, kind] = (logs, sft, warm)
engine.close_engines()
_ = save_json({" | ".join(k): v for k, v in GEN.items()}, out_dir / "decompositions.json")

# %% [markdown]
# ## 3. Table 5's columns, and each row against ACQO
#
# nDCG@3, R@3 and R@10 (Table 5's TopiOCQA columns), MAP@10 (its HotpotQA column) and
# nDCG@10 of every row on the whole test cut. Every row is compared by a 95% paired
# bootstrap with the raw question, and ACQO with every ablated row (Table 5's question: a
# positive difference means the removed component helped).

# %%
MEASURES = ["nDCG@3", "R@3", "R@10", "AP@10", "nDCG@10"]
PER_Q, table_rows, cmp_rows = {}, [], []
RETR = {(name, kind): retrieval.build_retriever(
            kind, TEST[name].corpus,
            **({"cache_dir": cache_dir, "show_progress": False} if kind == "dense" else {}))
        for name in test_datasets for kind in retrievers}
for (label, name, kind), subs in ROWS.items():
    run, _ = search_fused(RETR[name, kind], subs, k=eval_k,
                          fusion=FUSION.get((label, name, kind), "rsf"))
    PER_Q[label, name, kind] = pq = metrics.evaluate(
        run, TEST[name].qrels, MEASURES, per_query=True).set_index("query_id")
    scale = SCALE.get((label, kind))
    table_rows.append({"dataset": name, "retriever": kind, "row": label,
                       "fusion": FUSION.get((label, name, kind), "rsf"),
                       **{metrics.label(m): pq[m].mean() for m in MEASURES},
                       "sub-queries": sum(map(len, subs.values())) / len(subs),
                       **scale_columns(model if scale else None, scale[0] if scale else (),
                                       test_queries=len(pq),
                                       sft_steps=scale[1] if scale else 0,
                                       sft_queries=scale[2] if scale else 0,
                                       test_valid=VALID.get((label, name, kind)))})
for name in test_datasets:
    for kind in retrievers:
        published_raw = PER_Q_07[(PER_Q_07.dataset == name) & (PER_Q_07.retriever == kind)]
        check_same_test(PER_Q["raw question", name, kind]["nDCG@10"].to_dict(),
                        published_raw.set_index(published_raw.query_id.astype(str))[
                            "raw question"].to_dict(), where=f"{name}/{kind}")
        raw = PER_Q["raw question", name, kind]["nDCG@10"].to_dict()
        acqo = PER_Q["ACQO", name, kind]["nDCG@10"].to_dict()
        for (label, n2, k2), pq in PER_Q.items():
            if (n2, k2) != (name, kind) or label == "raw question":
                continue
            sc = SCALE.get((label, kind))
            scale = scale_columns(model, sc[0], test_queries=len(pq), sft_steps=sc[1],
                                  sft_queries=sc[2],
                                  test_valid=VALID.get((label, name, kind))) if sc else None
            cmp_rows.append(compare(pq["nDCG@10"].to_dict(), raw, paper="acqo", dataset=name,
                                    retriever=kind, metric="nDCG@10", method=label,
                                    kind="trained", baseline="raw question", scale=scale,
                                    resamples=bootstrap, seed=seed))
            if label != "ACQO":
                acqo_scale = scale_columns(model, SCALE["ACQO", kind][0], test_queries=len(pq),
                                           sft_steps=SCALE["ACQO", kind][1],
                                           sft_queries=SCALE["ACQO", kind][2],
                                           test_valid=VALID["ACQO", name, kind])
                cmp_rows.append(compare(acqo, pq["nDCG@10"].to_dict(), paper="acqo",
                                        dataset=name, retriever=kind, metric="nDCG@10",
                                        method="ACQO", kind="trained", baseline=label,
                                        baseline_kind="trained", scale=acqo_scale,
                                        resamples=bootstrap, seed=seed))
ABLATION = pd.DataFrame(table_rows)
save_table(ABLATION.round(4), "18_ablation", tables_dir,
           caption="ACQO Table 5's rows on 07's test questions: nDCG@3, R@3, R@10, MAP@10, "
                   "nDCG@10, fusion at test, sub-queries per question, and each row's training "
                   f"scale from its runs' logs [profile: {profile}]")
COMPARISONS = comparison_table(cmp_rows)
save_table(COMPARISONS.round(4), "18_comparisons", tables_dir,
           caption="Paired comparisons in nDCG@10 (mean difference, 95% paired bootstrap over "
                   "the test questions; the qrlib.eval.compare schema): every row against the "
                   "raw question, and ACQO against every ablated row")
for _, r in COMPARISONS.iterrows():
    record(f"{r.dataset}.{r.retriever}.{r.method} minus {r.baseline}", [r["diff"], r.lo, r.hi])
ABLATION.drop(columns=["policy"], errors="ignore").round(3)

# %% [markdown]
# ### Beside the paper's Table 5
#
# ACQO minus each ablated row, in points: the paper's (TopiOCQA NDCG@3 and HotpotQA MAP@10,
# BM25, `qrlib/methods/acqo/published.yaml`) and ours (nDCG@3 and MAP@10 on 2Wiki).

# %%
paper = published.table("acqo", "Table 5", wide=True)
PAPER_ROW = {"without RSF": "without RSF", "without Stage II": "without Stage II",
             "without query decomposition": "without QD"}
drops = []
for name in test_datasets:
    for kind in retrievers:
        ours = ABLATION[(ABLATION.dataset == name) & (ABLATION.retriever == kind)].set_index("row")
        for label in ours.index:
            if label in ("raw question", "ACQO"):
                continue
            key = next((v for k, v in PAPER_ROW.items() if label.startswith(k)), None)
            drops.append({"dataset": name, "retriever": kind, "row": label,
                          "ours ΔnDCG@3": 100 * (ours.loc["ACQO", "nDCG@3"] - ours.loc[label, "nDCG@3"]),
                          "ours ΔMAP@10": 100 * (ours.loc["ACQO", "MAP@10"] - ours.loc[label, "MAP@10"]),
                          "paper ΔNDCG@3 (TopiOCQA, BM25)": (
                              paper.loc["ACQO", "TopiOCQA BM25 NDCG@3"]
                              - paper.loc[key, "TopiOCQA BM25 NDCG@3"]) if key else float("nan"),
                          "paper ΔMAP@10 (HotpotQA, BM25)": (
                              paper.loc["ACQO", "HotpotQA BM25 MAP@10"]
                              - paper.loc[key, "HotpotQA BM25 MAP@10"]) if key else float("nan")})
DROPS = pd.DataFrame(drops)
save_table(DROPS.round(2), "18_vs_paper", tables_dir,
           caption="ACQO minus each ablated row, points: ours (2Wiki test) beside ACQO Table 5's "
                   "(TopiOCQA NDCG@3, HotpotQA MAP@10; BM25)")
DROPS.round(2)

# %% [markdown]
# ### The differences with their intervals

# %%
vs_acqo = COMPARISONS[(COMPARISONS.method == "ACQO") & (COMPARISONS["baseline kind"] == "trained")]
fig, ax = plt.subplots(figsize=(7.5, 0.6 + 0.5 * max(1, len(vs_acqo))))
ylab = [f"{r.baseline} ({r.retriever})" for r in vs_acqo.itertuples()]
ax.errorbar(vs_acqo["diff"], range(len(vs_acqo)),
            xerr=[vs_acqo["diff"] - vs_acqo.lo, vs_acqo.hi - vs_acqo["diff"]], fmt="o", capsize=3)
ax.axvline(0, color="grey", lw=0.8)
ax.set_yticks(range(len(vs_acqo)), ylab)
ax.set(xlabel="ACQO minus the ablated row, nDCG@10 (95% paired bootstrap)")
fig.tight_layout()
_ = plots.save_figure(fig, "18_ablation", figures_dir, profile=profile,
                  caption="What each of ACQO's components is worth on the test questions",
                  setting=f"{model}; {len(TEST[test_datasets[0]].queries)} test questions; "
                          + "; ".join(f"{lab} ({k}): " + ", ".join(
                              fmt_scale(log_scale(lg)) for lg in logs)
                              for (lab, k), (logs, _, _) in SCALE.items()
                              if lab.startswith("without")))

# %% [markdown]
# ## 4. Examples

# %%
name0, kind0 = test_datasets[0], retrievers[0]
labels = [lab for (lab, n, k) in ROWS if (n, k) == (name0, kind0) and lab != "ACQO, RRF at test only"]
qids = sorted(TEST[name0].queries)[:n_examples]
pd.set_option("display.max_colwidth", 120)
pd.DataFrame([{"question": TEST[name0].queries[q],
               **{lab: " %% ".join(ROWS[lab, name0, kind0][q]) for lab in labels
                  if lab != "raw question"}} for q in qids]).T

# %% [markdown]
# ## What we found
#
# Built from `18_comparisons`, `18_ablation` and `18_health` of this run by
# `qrlib.workbook.findings` (here each ablation row is also compared with ACQO itself):

# %%
from IPython.display import Markdown

from qrlib.workbook.findings import what_we_found

vs_acqo = COMPARISONS[(COMPARISONS.method == "ACQO") & (COMPARISONS.baseline != "raw question")]
extra = [f"ACQO against {r['baseline']} on {r['dataset']}/{r['retriever']}: {r['diff']:+.3f} "
         f"[{r['lo']:+.3f}, {r['hi']:+.3f}]." for _, r in vs_acqo.iterrows()]
display(Markdown(what_we_found(COMPARISONS[COMPARISONS.baseline == "raw question"],
                               notebook="18_acqo_ablation", tables_dir=tables_dir,
                               health=HEALTH, extra=extra, subject="ACQO and ablation")))
