# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # adapters and rewrites
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for subsets, sampling and training
data_dir = None  # BEIR folders; None means /work/shared/data or $QRLIB_DATA
model = "smollm2"  # policy for sampling and training: smollm2 | qwen2.5-coder-0.5b | hub id
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
rollouts = "hf"  # generation engine of training rollouts and sampling/evaluation: hf (transformers generate) | vllm (in-process vLLM engine, qrlib.generation.engine)
bootstrap = 10000  # paired-bootstrap resamples for every interval
dense_model = "minilm"  # offline all-MiniLM-L6-v2; a hub id such as BAAI/bge-base-en-v1.5 on GPU
# --- 1. strategy-guided prompting, best-of-N (SAGE Sec. 3.1, Fig. 3)
bon_datasets = ["scifact", "nfcorpus"]  # test queries of these collections
bon_retrievers = ["bm25", "dense"]  # every sampled rewrite is searched with each
bon_n_queries = 4  # test queries per dataset (random subset); None means all
bon_n_distractors = 300  # corpus cut: judged docs + this many others; None means full
bon_samples_per_prompt = 4  # pool per query: 5x this (SAGE), 4x this (DMQR), generic_samples
bon_generic_samples = 16  # pool of the single generic prompt
bon_ns = [1, 2, 4, 8, 16]  # N of best-of-N, each at most the smallest pool
bon_max_new_tokens = 32  # token budget of one sampled rewrite
bon_temperature = 1.0  # sampling temperature
bon_batch_size = 64  # sequences generated together
# --- 2-3. SAGE training (Sec. 2.3-2.5, Tables 1-3)
sage_datasets = ["nfcorpus"]  # train split for RL, test split for evaluation
sage_retriever = "dense"  # SAGE targets dense retrieval
sage_runs = ["unguided", "direct", "scs", "crs"]  # reward variants (qrlib.methods.sage.pipeline.variants); unguided is DeepRetrieval-style RL; Table 3's ablation is notebook 15
copy_penalty = 0.05  # p of SAGE Eq. 3 (Sec. 4.3 uses 0.05; Table 3 shows 0.02)
reasoning = False  # the paper's prompts with <think> (sage/proactive, sage/conservative); False: their no-reasoning variants (same layout and examples, a CPU budget)
n_train_queries = 16  # training queries (random subset of the train split)
n_test_queries = 20  # test queries; None means all
n_distractors = 300  # corpus cut for training and test; None means full
train_steps = 2  # GRPO steps per run
prompts_per_step = 1  # distinct queries per step
num_generations = 4  # rollouts per query (the GRPO group)
max_completion_length = 32  # token budget of one rollout
temperature = 1.0  # sampling temperature of rollouts
learning_rate = 5e-5  # LoRA learning rate
beta = 0.001  # KL coefficient
dynamic_sampling = 0  # DAPO dynamic sampling rounds for groups whose rewards are all equal (0: off)
stop = []  # stop strings of vLLM rollouts (kept in the completion), e.g. ["}"] for the JSON answer
eval_autocast = False  # bf16 autocast of the greedy test rewriting (faster, but 16-19 % of a trained adapter's greedy outputs then differ from fp32: benchmarks/bench_eval_precision.py); None: where the CPU has native bf16 matmul

# %% [markdown]
# # 08 · SAGE: strategy-guided rewriting
#
# *Paper:* [SAGE: Strategy-Adaptive Generation Engine for Query Rewriting](https://arxiv.org/abs/2506.19783) (Wang, Gong, Zhang and Wang; arXiv:2506.19783, 2025).
#
# SAGE changes *what the policy is asked to do* rather than the retriever or the fusion
# (RL-QR, the other method of this kind, has its own notebook, 14):
#
# * **SAGE** gives the model a menu of five interpretable rewriting strategies (semantic
#   expansion, entity disambiguation, sub-question decomposition, concise rewriting,
#   neutralised claim reformulation). First as prompts: how good is the best of N sampled
#   rewrites (an oracle upper bound, SAGE Fig. 3)? Then as an RL action: the policy emits
#   a strategy id and a rewrite, and GRPO is fed nDCG@10 reshaped so that good *strategies*
#   get credit (SCS, Eq. 1) or so that rollouts compete with the group median (CRS, Eq. 2),
#   with a penalty for copying the query (Eq. 3).
#
# Everything is compared with the raw query on the same test queries, with 95%
# paired-bootstrap intervals. Settings are far below the papers' (Qwen3-4B, BGE-base,
# 4,096-token budget); the profile is stamped on every figure and caption.

# %%
import gc
import time

from qrlib import session

S = session.start("08_sage", run_dir=run_dir, figures_dir=figures_dir, tables_dir=tables_dir,
                  cache_dir=cache_dir, seed=seed, torch_threads=torch_threads, rollouts=rollouts)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import matplotlib.pyplot as plt
import pandas as pd
import torch

from qrlib.data import datasets as qdata
from qrlib import plots
from qrlib.generation import policy, rewrite
from qrlib.retrieval import retrievers as retrieval
from qrlib.rl import rewards
from qrlib.methods.sage.bestofn import best_of_n_curve, best_of_n_per_query, best_share
from qrlib.generation.prompts import REGISTRY, as_template
from qrlib.methods.sage import pipeline as sage
from qrlib.eval.compare import compare, comparison_table, describe
from qrlib.eval import curves
from qrlib.eval.stats import fmt_interval
from qrlib.eval.scale import SCALE_COLUMNS
from qrlib.core.io import save_json, save_table

print(f"profile={profile} policy={model} torch threads={torch.get_num_threads()}")

RETRIEVERS = {}


def get_retriever(ds, kind):
    """One index per (collection cut, retriever kind), built once."""
    key = (ds.name, len(ds.corpus), kind)
    if key not in RETRIEVERS:
        kw = ({"cache_dir": cache_dir, "show_progress": False, "model": dense_model}
              if kind == "dense" else {})
        RETRIEVERS[key] = retrieval.build_retriever(kind, ds.corpus, **kw)
    return RETRIEVERS[key]


# %% [markdown]
# ## 1. Strategy-guided prompting and best-of-N scaling (SAGE Sec. 3.1, Fig. 3)
#
# Three prompt *families* rewrite the same test queries:
#
# * **SAGE strategies**: one prompt per strategy of SAGE Table 4 (`sage/s1` ... `sage/s5`);
# * **DMQR-RAG**: the four rewriting strategies SAGE compares against (general, keyword,
#   pseudo-answer, core content; `dmqr/*`);
# * **generic**: a single "write a better search query" prompt (`generic/rewrite`).
#
# For every query each family gets a *pool* of sampled rewrites (the same number from each
# of its prompts). Best-of-N is what an oracle that sees the qrels gets by keeping the best
# of N rewrites: an upper bound on what a policy could learn to pick. We report its exact
# expectation over all draws of N rewrites from the pool (without replacement),
#
# $$ \mathbb{E}\big[\max_{i\le N} s_i\big] = \sum_{j=N}^{M} s_{(j)}\,
#    \binom{j-1}{N-1}\Big/\binom{M}{N}, $$
#
# with $s_{(1)}\le\dots\le s_{(M)}$ the pool's nDCG@10 sorted (`qrlib.methods.sage.bestofn`).

# %%
FAMILIES = {
    "SAGE strategies": [f"sage/s{i}" for i in range(1, 6)],
    "DMQR-RAG": [n for n in REGISTRY if n.startswith("dmqr/")],
    "generic": ["generic/rewrite"],
}
POOL = {f: (bon_generic_samples if f == "generic" else bon_samples_per_prompt)
        for f in FAMILIES}
for fam, names in FAMILIES.items():
    size = POOL[fam] * len(names)
    assert max(bon_ns) <= size, (f"bon_ns goes to {max(bon_ns)} but the {fam} pool has only "
                                 f"{size} rewrites; raise bon_samples_per_prompt")
    print(f"{fam}: {len(names)} prompt(s) x {POOL[fam]} samples = pool {size}")
print("\n--- sage/s3 as the model sees it:\n" + as_template("sage/s3").user.format(query="<query>"))

# %%
BON_DATA = {}
for name in bon_datasets:
    ds = qdata.load_dataset(name, "test", data_dir=data_dir)
    BON_DATA[name] = qdata.subset(ds, n_queries=bon_n_queries, n_distractors=bon_n_distractors,
                                  seed=seed)
    print(f"{name}: {len(BON_DATA[name].queries)} test queries, {len(BON_DATA[name].corpus)} docs")

t0 = time.perf_counter()
pol, tok = policy.load_policy(model)
SAMPLES = []
for name, ds in BON_DATA.items():
    for fam, names in FAMILIES.items():
        for j, pname in enumerate(names):
            df = rewrite.sample_rewrites(pol, tok, ds.queries, pname, POOL[fam],
                                         max_new_tokens=bon_max_new_tokens,
                                         temperature=bon_temperature,
                                         batch_size=bon_batch_size, seed=seed + 1000 * j)
            df["dataset"], df["family"], df["prompt"] = name, fam, pname
            SAMPLES.append(df)
del pol
gc.collect()
SAMPLES = pd.concat(SAMPLES, ignore_index=True)
bon_gen_seconds = time.perf_counter() - t0
print(f"{len(SAMPLES)} sampled rewrites in {bon_gen_seconds:.0f}s "
      f"({bon_gen_seconds / len(SAMPLES):.2f}s each)")

# %% [markdown]
# Every sampled rewrite is searched with every retriever and scored against the qrels
# (nDCG@10); a completion that yields no query is searched as the raw query (so a format
# failure can never score below the raw query in the *pool*, but it is counted in the
# format column).

# %%
SCORED = []
for name, ds in BON_DATA.items():
    sel = SAMPLES[SAMPLES.dataset == name]
    for kind in bon_retrievers:
        retr = get_retriever(ds, kind)
        ranked = retr.search(sel.search_text.tolist(), 10)
        raw_rank = dict(zip(ds.queries, retr.search(list(ds.queries.values()), 10)))
        s = sel.assign(retriever=kind, ndcg=[rewards.ndcg_at_k(r, ds.qrels[q], 10)
                                             for r, q in zip(ranked, sel.qid)])
        s["raw"] = s.qid.map({q: rewards.ndcg_at_k(raw_rank[q], ds.qrels[q], 10)
                              for q in ds.queries})
        SCORED.append(s)
SCORED = pd.concat(SCORED, ignore_index=True)

rows = []
for (name, kind, fam), g in SCORED.groupby(["dataset", "retriever", "family"]):
    pools = {q: gg.ndcg.tolist() for q, gg in g.groupby("qid")}
    raw = g.groupby("qid").raw.first()
    for n, v in best_of_n_curve(pools, bon_ns).items():
        rows.append({"dataset": name, "retriever": kind, "family": fam, "N": n,
                     "best-of-N nDCG@10": v, "raw nDCG@10": raw.mean(),
                     "mean sample nDCG@10": g.ndcg.mean(), "format ok": g.format_ok.mean(),
                     "queries": len(pools)})
BON = pd.DataFrame(rows)
save_table(BON.round(4), "08_best_of_n", tables_dir,
           caption=("Best-of-N nDCG@10 (exact expectation over draws of N rewrites from each "
                    "query's pool; oracle choice with the qrels) per prompt family"))
for _, r in BON[BON.N == max(bon_ns)].iterrows():
    record(f"bon.{r.dataset}.{r.retriever}.{r.family}.best_of_{r.N}", r["best-of-N nDCG@10"])
    record(f"bon.{r.dataset}.{r.retriever}.raw", r["raw nDCG@10"])
BON[BON.N.isin([1, max(bon_ns)])].round(3)

# %%
fig, axes = plt.subplots(len(bon_datasets), len(bon_retrievers),
                         figsize=(4.2 * len(bon_retrievers), 3.2 * len(bon_datasets)),
                         squeeze=False)
fam_color = {f: f"C{i}" for i, f in enumerate(FAMILIES)}
for i, name in enumerate(bon_datasets):
    for j, kind in enumerate(bon_retrievers):
        ax = axes[i][j]
        sel = BON[(BON.dataset == name) & (BON.retriever == kind)]
        for fam, g in sel.groupby("family"):
            ax.plot(g.N, g["best-of-N nDCG@10"], marker="o", color=fam_color[fam], label=fam)
        ax.axhline(sel["raw nDCG@10"].iloc[0], color="k", ls="--", lw=1, label="raw query")
        ax.set_xscale("log", base=2)
        ax.set(title=f"{name} · {kind}", xlabel="N rewrites", ylabel="best-of-N nDCG@10")
fig.tight_layout()
plots.legend_outside(fig, *axes[0][0].get_legend_handles_labels(), title="prompt family")
setting_bon = (f"{model}, {bon_n_queries} test queries/dataset, corpus "
               f"{'full' if bon_n_distractors is None else f'judged+{bon_n_distractors}'}")
_ = plots.save_figure(fig, "08_best_of_n", figures_dir, profile=profile, setting=setting_bon,
                  caption=("Best-of-N nDCG@10 of SAGE's strategy prompts vs DMQR-RAG strategies "
                           "vs a generic rewrite prompt (SAGE Fig. 3's analysis; paper: Qwen3 "
                           "0.6-8B, BGE-base / Contriever, full BEIR test sets)"))

# %% [markdown]
# ### Do the families separate? Paired intervals over the test queries
#
# Each family's best-of-N against the raw query, and the families against each other, at
# N = 1 (one sampled rewrite) and the largest N: the per-query expected best-of-N values
# paired by query, 95 % paired bootstrap (`qrlib.eval.compare`). The oracle picks with the
# qrels, so these rows bound what choosing among the family's rewrites could give; they
# are not a deployable rewriter.

# %%
PER_Q_BON, cmp_bon = {}, []
for (name, kind, fam), g in SCORED.groupby(["dataset", "retriever", "family"]):
    pools = {q: gg.ndcg.tolist() for q, gg in g.groupby("qid")}
    for n in sorted({1, max(bon_ns)}):
        PER_Q_BON[name, kind, fam, n] = best_of_n_per_query(pools, n)
    PER_Q_BON[name, kind, "raw query", 0] = g.groupby("qid").raw.first().to_dict()
for (name, kind, fam, n), per_q in PER_Q_BON.items():
    if fam == "raw query":
        continue
    label = f"{fam}, best of {n}" + (" (oracle)" if n > 1 else "")
    others = [("raw query", 0, "raw query", "baseline")] + [
        (f2, n, f"{f2}, best of {n}" + (" (oracle)" if n > 1 else ""), "untrained")
        for f2 in list(FAMILIES)[list(FAMILIES).index(fam) + 1:]]  # SAGE first, as in Fig. 3
    for f2, n2, base_label, bkind in others:
        cmp_bon.append(compare(per_q, PER_Q_BON[name, kind, f2, n2], paper="sage", dataset=name,
                               retriever=kind, metric="nDCG@10", method=label, kind="untrained",
                               baseline=base_label, baseline_kind=bkind, resamples=bootstrap,
                               seed=seed))
BON_CMP = comparison_table(cmp_bon)
save_table(BON_CMP.round(4), "08_best_of_n_comparisons", tables_dir,
           caption=("Best-of-N nDCG@10 of each prompt family against the raw query and against "
                    "the other families, at N = 1 and the largest N (per-query expected "
                    "best-of-N, 95% paired bootstrap over the test queries; the "
                    "qrlib.eval.compare schema)"))
for _, r in BON_CMP.iterrows():
    record(f"bon.{r.dataset}.{r.retriever}.{r.method} minus {r.baseline}",
           [r["diff"], r.lo, r.hi])
BON_CMP[["dataset", "retriever", "method", "baseline", "diff", "lo", "hi", "wins", "losses",
         "test queries"]].round(3)

# %% [markdown]
# ### Which strategy gives the best rewrite, and how often does any beat the raw query?
#
# For every query and family, the strategy whose sample scored highest gets the credit
# (ties split). *Beats raw* is the share of queries where the best rewrite in the pool
# scores strictly above the raw query: headroom a learned strategy choice could exploit.

# %%
rows = []
for (name, kind, fam), g in SCORED.groupby(["dataset", "retriever", "family"]):
    share = {}
    for _, gg in g.groupby("qid"):
        for lab, v in best_share(gg.ndcg.tolist(), gg.prompt.tolist()).items():
            share[lab] = share.get(lab, 0.0) + v
    nq = g.qid.nunique()
    beats = (g.groupby("qid").ndcg.max() > g.groupby("qid").raw.first() + 1e-9).mean()
    for lab, v in sorted(share.items()):
        rows.append({"dataset": name, "retriever": kind, "family": fam, "prompt": lab,
                     "best share": v / nq, "family beats raw": beats})
STRAT = pd.DataFrame(rows)
save_table(STRAT.round(3), "08_strategy_best_share", tables_dir,
           caption=("Share of queries where each prompt (strategy) gave its family's best "
                    "rewrite (ties split), and share of queries where the family's best "
                    "rewrite beats the raw query"))
BEATS = STRAT.groupby(["dataset", "retriever", "family"])["family beats raw"].first().unstack()
for (name, kind), r in BEATS.iterrows():
    for fam, v in r.items():
        record(f"bon.{name}.{kind}.{fam}.beats_raw", v)
BEATS.round(2)

# %% [markdown]
# A few sampled rewrites per family (first test query of each dataset):

# %%
ex = SAMPLES.groupby(["dataset", "family", "prompt"]).head(1)
ex = ex[ex.qid.isin([next(iter(ds.queries)) for ds in BON_DATA.values()])]
ex[["dataset", "family", "prompt", "query", "rewrite", "format_ok"]]

# %% [markdown]
# ## 2. SAGE training: strategy id + rewrite, GRPO with Direct, SCS and CRS rewards
#
# The policy now answers `<answer>{"query": "...", "strategy": k}</answer>`, the layout of
# SAGE App. A.1 (Fig. 5), with one worked example per strategy in the prompt. With
# `reasoning` it first thinks inside `<think>` as the paper's prompt asks
# (`sage/proactive`); without, the answer is prefilled up to `{"query": "` and there is
# no reasoning block, so the small CPU model spends its budget on the query
# (`sage/guided`). With $r_i$ the nDCG@10
# of rollout $i$ in a group of $G$ rollouts of the same query:
#
# * **Direct**: $r_i$;
# * **SCS** (Eq. 1): $r_i / \mathrm{rank}(s_i)$, where strategies are ranked by their mean
#   reward within the group;
# * **CRS** (Eq. 2): $r_i - \mathrm{median}(r_1..r_G)$;
# * each minus $p$ when the rewrite equals the query (Eq. 3, $p$ = `copy_penalty`).
#
# The **unguided** baseline is DeepRetrieval-style RL on the same data, steps and model:
# the generic rewrite prompt (no strategies) and plain nDCG@10. In every run a rollout
# whose answer breaks its format earns 0. The formats differ in one rule: DeepRetrieval's
# (unguided) allows nothing after `</answer>`, SAGE's JSON answer tolerates trailing text;
# the format-valid column of the results shows what that costs a small model.

# %%
VARIANTS = sage.variants(copy_penalty, reasoning=reasoning)
RUNS = sage.pick(sage_runs, VARIANTS)  # a one-line error names an unknown key
SAGE_DATA = {name: sage.sage_data(name, n_train_queries=n_train_queries,
                                  n_test_queries=n_test_queries, n_distractors=n_distractors,
                                  seed=seed, data_dir=data_dir) for name in sage_datasets}
for name, (tr, te, full) in SAGE_DATA.items():
    print(f"{name}: train {len(tr.queries)}, test {len(te.queries)}, docs {len(full.corpus)}")
TRAIN_KW = dict(model=model, retriever=sage_retriever, max_steps=train_steps,
                prompts_per_step=prompts_per_step, num_generations=num_generations,
                max_completion_length=max_completion_length, temperature=temperature,
                learning_rate=learning_rate, beta=beta, seed=seed,
                dynamic_sampling=dynamic_sampling, stop=list(stop),
                save_steps=max(1, train_steps // 4), n_queries=n_train_queries,
                n_distractors=n_distractors)

SAGE_SUMMARIES = {}
for name, (tr, te, full) in SAGE_DATA.items():
    for v in RUNS:  # runs are named by variant, so notebook 15 finds SCS's run here
        t0 = time.perf_counter()
        SAGE_SUMMARIES[name, v.key] = s_ = sage.train_variant(
            v, get_retriever(full, sage_retriever), full, tr.queries,
            name=f"sage-{name}-{sage_retriever}-{v.key}", run_dir=run_dir, dataset=name,
            **TRAIN_KW)
        print(f"{name} {v.key}: {s_['steps']} steps, {time.perf_counter() - t0:.0f}s")
_ = save_json({f"{n}:{k}": v for (n, k), v in SAGE_SUMMARIES.items()}, out_dir / "sage_summaries.json")

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

HEALTH, health_lines = health_report(SAGE_SUMMARIES, "08_health",
                                     tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# ### Training curves (SAGE App. A.4): reward and response length per step

# %%
CURVES = {VARIANTS[key].label + (f" ({name})" if len(sage_datasets) > 1 else ""):
          pd.read_csv(s_["log"], dtype={"qids": str}) for (name, key), s_ in SAGE_SUMMARIES.items()}
fig = curves.reward_and_length(CURVES, reward="mean shaped reward")
setting_sage = (f"{model}, {'/'.join(sage_datasets)} {sage_retriever}; from the logs, per run: "
                + curves.scale_setting(CURVES))
_ = plots.save_figure(fig, "08_sage_training_curves", figures_dir, profile=profile,
                  setting=setting_sage,
                  caption=("SAGE training: shaped reward and response length per GRPO step "
                           "(SAGE App. A.4; paper: Qwen3-4B, 4,096-token budget)"))

# %% [markdown]
# ### Test evaluation: raw query, untrained prompts, trained rewriters
#
# Greedy rewrites of the test queries; the search text is the rewrite (the raw query when
# the completion yields none). *Modified* is the share of rewrites that differ from the
# query (SAGE Table 3's modification rate).

# %%
SAGE_EVAL, SAGE_REWRITES, SAGE_SCALE = {}, {}, {}
rows, COMPARISONS = [], []  # COMPARISONS: every paired comparison, in the workbook's one schema
for name, (tr, te, full) in SAGE_DATA.items():
    ev = sage.evaluate(model, {v.label: (v.prompt, SAGE_SUMMARIES[name, v.key]) for v in RUNS},
                       te, full, get_retriever(full, sage_retriever), dataset=name,
                       retriever=sage_retriever, autocast=eval_autocast, resamples=bootstrap, seed=seed)
    rows += ev["rows"]
    COMPARISONS += ev["comparisons"]
    SAGE_EVAL.update({(name, k): v for k, v in ev["scores"].items()})
    SAGE_REWRITES.update({(name, k): v for k, v in ev["rewrites"].items()})
    SAGE_SCALE.update({(name, k): v for k, v in ev["scales"].items()})
SAGE_RESULTS = pd.DataFrame(rows)
for _, r in SAGE_RESULTS.iterrows():
    record(f"sage.{r.dataset}.{r.model}.ndcg10", r["nDCG@10"])
    record(f"sage.{r.dataset}.{r.model}.delta_vs_raw", [r["ΔnDCG@10 vs raw"], r.lo, r.hi])
    record(f"sage.{r.dataset}.{r.model}.modified", r.modified)
save_table(SAGE_RESULTS.round(4), "08_sage_results", tables_dir,
           caption=(f"SAGE on the test queries ({sage_retriever}): nDCG@10, Δ vs the raw "
                    "query with a 95% paired-bootstrap interval, modification rate, format-"
                    "valid rate and generated tokens (SAGE Tables 1-2 columns); training scale "
                    f"({', '.join(SCALE_COLUMNS)}) from each run's log"))
SAGE_RESULTS.round(3)

# %% [markdown]
# Query by query: each trained rewriter (y) against the raw query (x), nDCG@10 of every
# test query. Points on the diagonal are queries the rewrite left as good as it was (often
# a copy); above it the rewrite helped.

# %%
head_08 = [r for r in COMPARISONS if r["kind"] == "trained" and r["baseline kind"] == "baseline"]
fig = plots.per_query_scatter(
    {f"{r['dataset']}: {r['method']}": (SAGE_EVAL[r["dataset"], "raw query"].to_dict(),
                                        SAGE_EVAL[r["dataset"], r["method"]].to_dict())
     for r in head_08}, metric="nDCG@10", baseline="raw query",
    intervals={f"{r['dataset']}: {r['method']}": fmt_interval(r) for r in head_08})
_ = plots.save_figure(fig, "08_per_query", figures_dir, profile=profile, setting=setting_sage,
                      caption="Per-query nDCG@10 of each trained SAGE rewriter (y) against the "
                              "raw query (x) on the test queries; title: n, wins / losses / ties "
                              "and the mean difference with its 95 % paired-bootstrap interval")
plt.show()

# %% [markdown]
# ### The rewards against each other (paper: SCS, CRS > Direct > unguided)
#
# Each pair on the same test queries, 95 % paired bootstrap; the rows join this notebook's
# comparison table (`08_comparisons`, the `qrlib.eval.compare` schema).

# %%
PAIRS = [("direct", "unguided"), ("scs", "direct"), ("crs", "direct"), ("scs", "unguided"),
         ("crs", "unguided")]
KEYS = [v.key for v in RUNS]
for name in sage_datasets:
    for a, b in PAIRS:
        if a in KEYS and b in KEYS:
            la, lb = VARIANTS[a].label, VARIANTS[b].label
            COMPARISONS.append(compare(
                SAGE_EVAL[name, la].to_dict(), SAGE_EVAL[name, lb].to_dict(),
                paper="sage", dataset=name, retriever=sage_retriever, metric="nDCG@10",
                method=la, kind="trained", baseline=lb, baseline_kind="trained",
                scale=SAGE_SCALE[name, la], resamples=bootstrap, seed=seed))
SAGE_VS = pd.DataFrame([c for c in COMPARISONS if c["baseline kind"] == "trained"])
for _, r in SAGE_VS.iterrows():
    print(describe(r))

# %% [markdown]
# ### Why CRS trains exactly as Direct here
#
# CRS (Eq. 2) shapes $\tilde r_i = r_i - b$ with $b$ the median of the group's rewards. GRPO
# then centres on the group mean and divides by the group's standard deviation
# (DeepSeekMath Eq. 3, TRL's `GRPOTrainer`):
#
# $$ A_i = \frac{\tilde r_i - \overline{\tilde r}}{\operatorname{std}(\tilde r) + \epsilon}
#        = \frac{(r_i - b) - (\bar r - b)}{\operatorname{std}(r) + \epsilon}
#        = \frac{r_i - \bar r}{\operatorname{std}(r) + \epsilon}, $$
#
# the Direct advantage, for **any** $b$ that is the same for every rollout of a group. The
# copy penalty (Eq. 3) is applied after the shaping in both, so it does not break the
# identity. CRS can only differ under a reading where $b$ does not cancel
# (`qrlib.methods.sage.crs`): advantages taken as the shaped reward itself, without the
# group-mean centring (REINFORCE with $b$ as its baseline, how Eq. 2 reads on its own), or a
# baseline per strategy (the median of the group's rollouts that used the same strategy).
# Below, each reading on the real groups of section 1 (the sampled rewrites of each test
# query with the five SAGE strategy prompts, their nDCG@10; the strategy is the prompt): how far its update weights are from
# Direct's.

# %%
from qrlib.methods.sage import crs as CRS

rows = []
for (name, kind), g in SCORED[SCORED.family == "SAGE strategies"].groupby(["dataset", "retriever"]):
    gaps = {reading: [] for reading in CRS.READINGS}
    flips = {reading: [] for reading in CRS.READINGS}
    for _, grp in g.groupby("qid"):
        r, st = grp.ndcg.tolist(), grp.prompt.tolist()  # one prompt per SAGE strategy
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
CRS_TABLE = pd.DataFrame(rows)
for _, r in CRS_TABLE[CRS_TABLE["CRS reading"] == "group"].iterrows():
    record(f"crs.{r.dataset}.{r.retriever}.max_gap_vs_direct", r["max |A_CRS - A_Direct|"])
save_table(CRS_TABLE.round(6), "08_crs_readings", tables_dir,
           caption="CRS (SAGE Eq. 2) against Direct on the sampled groups of section 1: the "
                   "GRPO update weights differ by 0 under the paper's group-median baseline, "
                   "and only under the readings where the baseline does not cancel")
CRS_TABLE.round(4)

# %% [markdown]
# ### Chosen strategies before and after training
#
# Share of test rewrites per strategy id (`none` = no valid id in the answer).

# %%
rows = []
SAGE_LABELS = {f"untrained ({v.prompt})" for v in RUNS if v.prompt.startswith("sage/")} | {
    v.label for v in RUNS if v.prompt.startswith("sage/")}
for (name, label), df in SAGE_REWRITES.items():
    if label in SAGE_LABELS:
        counts = pd.to_numeric(df.strategy, errors="coerce").fillna(0).astype(int).value_counts(normalize=True)
        rows.append({"dataset": name, "model": label,
                     **{("none" if s == 0 else f"s{s}"): counts.get(s, 0.0) for s in range(6)}})
STRAT_CHOICE = pd.DataFrame(rows)
save_table(STRAT_CHOICE.round(3), "08_sage_strategy_choice", tables_dir,
           caption="Strategy ids chosen in the greedy test rewrites, before and after training")
STRAT_CHOICE.round(2)

# %% [markdown]
# Every comparison of this notebook in the workbook's one schema (`08_comparisons`):

# %%
CMP = comparison_table(COMPARISONS)
save_table(CMP.round(4), "08_comparisons", tables_dir,
           caption="Every paired comparison of notebook 08 (SAGE, nDCG@10; mean difference with "
                   "a 95% paired bootstrap over the test queries; the qrlib.eval.compare schema, "
                   "with the training scale of the method)")
CMP[["paper", "dataset", "retriever", "method", "baseline", "diff", "lo", "hi",
     "RL steps"]].round(3)

# %% [markdown]
# ## What we found
#
# Built from `08_comparisons`, `08_best_of_n`, `08_sage_strategy_choice`, `08_sage_results`
# and `08_health` of this run by `qrlib.workbook.findings`:

# %%
from IPython.display import Markdown

from qrlib.workbook.findings import what_we_found

top = BON[BON.N == max(bon_ns)]
best_fam = top.loc[top.groupby(["dataset", "retriever"])["best-of-N nDCG@10"].idxmax()]
extra = [f"With {max(bon_ns)} samples per query and an oracle picking the best, the strongest "
         "family is " + "; ".join(f"{r.family} on {r.dataset}/{r.retriever} ({r['best-of-N nDCG@10']:.3f} "
                                  f"against {r['raw nDCG@10']:.3f} raw)" for _, r in best_fam.iterrows())
         + ": the headroom a rewriter could reach."]
trained_choice = STRAT_CHOICE[~STRAT_CHOICE.model.str.startswith("untrained")]
if len(trained_choice):
    share = trained_choice[[c for c in trained_choice.columns if c.startswith("s")]].max(axis=1)
    extra.append(f"Trained SAGE rewriters use their most frequent strategy for "
                 f"{share.min():.0%}-{share.max():.0%} of test queries.")
trained_res = SAGE_RESULTS[SAGE_RESULTS.model.isin(CMP[CMP.kind == "trained"].method)]
extra.append(f"They modify {trained_res.modified.min():.0%}-{trained_res.modified.max():.0%} of "
             "the queries.")
display(Markdown(what_we_found(CMP, notebook="08_sage", tables_dir=tables_dir, health=HEALTH,
                               extra=extra)))
