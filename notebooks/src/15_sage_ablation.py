# ---
# jupyter:
#   qrlib:
#     reads: [08_sage]  # earlier notebooks whose artifacts this one reads (qrlib.freshness)
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # adapters and logs; notebook 08's SAGE-SCS run is read from here
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for subsets, training and the bootstrap
data_dir = None  # BEIR folders; None means ../shared/data or $QRLIB_DATA
model = "smollm2"  # policy: smollm2 | qwen2.5-coder-0.5b | hub id
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
rollouts = "hf"  # generation engine: hf | vllm (qrlib.generation.engine)
bootstrap = 10000  # paired-bootstrap resamples
dense_model = "minilm"  # offline all-MiniLM-L6-v2; a hub id such as BAAI/bge-base-en-v1.5 on GPU
sage_datasets = ["nfcorpus"]  # train split for RL, test split for evaluation (as in notebook 08)
sage_retriever = "dense"  # SAGE targets dense retrieval
ablation = ["conservative", "proactive"]  # Table 3's rows without a copy penalty
ablation_p = [0.02]  # a proactive SCS run per copy penalty p (Table 3: 0.02)
copy_penalty = 0.05  # p of notebook 08's SAGE-SCS run, the last row (read from 08, not retrained)
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
stop = []  # stop strings of vLLM rollouts (kept in the completion)
eval_autocast = False  # bf16 autocast of the greedy test rewriting (False keeps fp32 outputs)

# %% [markdown]
# # 15 · SAGE's exploration ablation (SAGE Table 3)
#
# *Paper:* [SAGE: Strategy-Adaptive Generation Engine for Query Rewriting](https://arxiv.org/abs/2506.19783) (Wang, Gong, Zhang and Wang; arXiv:2506.19783, 2025).
#
# A rewriter rewarded by retrieval quality has an easy way out: give the query back
# unchanged. It never scores below the raw query, so a policy that finds no better rewrite
# soon learns to copy, and then stops exploring. SAGE (Sec. 4.3, Table 3) trains SAGE-SCS
# three ways to show what forced exploration buys:
#
# * the **conservative** prompt allows the way out ("return the query unchanged if it cannot
#   be improved"; `sage/guided-conservative`), no penalty;
# * the **proactive** prompt forbids it ("always write a new query"; `sage/guided`), no penalty;
# * the proactive prompt **plus the copy penalty** of Eq. 3, with $p$ subtracted from the
#   shaped reward of a rollout whose rewrite equals the query:
#
# $$ \tilde r_i = \mathrm{SCS}(r_i) - p\cdot\mathbb 1[\hat q_i = q]. $$
#
# The reward is SCS (Eq. 1, notebook 08) in every row; only the prompt and $p$ change. The
# paper reports nDCG@10 and the **modification rate** (share of test rewrites that differ
# from the query), which forced exploration raises from about half to nearly all rewrites
# (`qrlib/methods/sage/published.yaml`, shown in section 3). Notebook 08's SAGE-SCS run (proactive,
# $p$ = `copy_penalty`) is the last row: it is read from 08's run folder, not retrained.

# %%
import time
from pathlib import Path

from qrlib import session

S = session.start("15_sage_ablation", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  torch_threads=torch_threads, rollouts=rollouts)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import pandas as pd

from qrlib import plots
from qrlib.core.errors import QrlibError
from qrlib.core.io import load_json, save_json, save_table
from qrlib.eval import published
from qrlib.eval.compare import comparison_table
from qrlib.eval import curves
from qrlib.eval.scale import SCALE_COLUMNS
from qrlib.methods.sage import pipeline as sage
from qrlib.retrieval import retrievers as retrieval

print(f"profile={profile} policy={model}")

# %% [markdown]
# ## 1. Data, and notebook 08's SAGE-SCS run
#
# The same cut as notebook 08 when the parameters agree (`sage.sage_data`: seeded train and
# test subsets, one corpus for both). 08 saved its run summaries in
# `run_dir/08_sage/sage_summaries.json`; the SCS run's adapter and log come from there.

# %%
SAGE_DATA = {name: sage.sage_data(name, n_train_queries=n_train_queries,
                                  n_test_queries=n_test_queries, n_distractors=n_distractors,
                                  seed=seed, data_dir=data_dir) for name in sage_datasets}
SEARCHERS = {}
for name, (tr, te, full) in SAGE_DATA.items():
    kw = ({"cache_dir": cache_dir, "show_progress": False, "model": dense_model}
          if sage_retriever == "dense" else {})
    SEARCHERS[name] = retrieval.build_retriever(sage_retriever, full.corpus, **kw)
    print(f"{name}: train {len(tr.queries)}, test {len(te.queries)}, docs {len(full.corpus)}")

summaries_08 = run_dir / "08_sage" / "sage_summaries.json"
if not summaries_08.exists():
    raise QrlibError(f"{summaries_08} is missing: run notebook 08 first (with scs in sage_runs)")
SCS_08, runs = {}, load_json(summaries_08)
for name in sage_datasets:
    key = f"{name}:scs"
    if key not in runs:
        raise QrlibError(f"notebook 08 trained no SAGE-SCS run on {name} (it has: "
                         f"{', '.join(runs)}); add scs to its sage_runs")
    SCS_08[name] = runs[key]
    cfg = load_json(Path(runs[key]["adapter"]).parent / "config.json")
    print(f"{name}: 08's SCS run {runs[key]['steps']} steps, copy penalty "
          f"{cfg['reward_params'].get('p')}, retriever {cfg['retriever']}")

# %% [markdown]
# ## 2. Training the ablation rows
#
# One GRPO run per row, the same settings as 08's main runs: only the prompt and $p$ differ.

# %%
VARIANTS = sage.variants(copy_penalty, ablation_p, reasoning=reasoning)
RUNS = sage.pick([*ablation, *[f"proactive-p{float(p):g}" for p in ablation_p]], VARIANTS)
TRAIN_KW = dict(model=model, retriever=sage_retriever, max_steps=train_steps,
                prompts_per_step=prompts_per_step, num_generations=num_generations,
                max_completion_length=max_completion_length, temperature=temperature,
                learning_rate=learning_rate, beta=beta, seed=seed,
                dynamic_sampling=dynamic_sampling, stop=list(stop),
                save_steps=max(1, train_steps // 4), n_queries=n_train_queries,
                n_distractors=n_distractors)
SUMMARIES = {}
for name, (tr, te, full) in SAGE_DATA.items():
    for v in RUNS:
        t0 = time.perf_counter()
        SUMMARIES[name, v.key] = s_ = sage.train_variant(
            v, SEARCHERS[name], full, tr.queries, name=f"sage-{name}-{sage_retriever}-{v.key}",
            run_dir=run_dir, dataset=name, **TRAIN_KW)
        print(f"{name} {v.key}: {s_['steps']} steps, {time.perf_counter() - t0:.0f}s")
    SUMMARIES[name, "scs"] = SCS_08[name]
save_json({f"{n}:{k}": v for (n, k), v in SUMMARIES.items()}, out_dir / "ablation_summaries.json")

LOGS = {k: pd.read_csv(s_["log"], dtype={"qids": str}) for k, s_ in SUMMARIES.items()}
ROWS = [*RUNS, VARIANTS["scs"]]
LABEL = {v.key: v.label for v in RUNS}
LABEL["scs"] = f"SCS, proactive prompt, p={copy_penalty:g} (notebook 08's SAGE-SCS)"

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

HEALTH, health_lines = health_report(SUMMARIES, "15_health",
                                     tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
print("\n".join(health_lines))

# %%
CURVES = {f"{LABEL[key]} ({name})": lg for (name, key), lg in LOGS.items()}
fig = curves.reward_and_length(CURVES, reward="mean shaped reward")
_ = plots.save_figure(fig, "15_ablation_training_curves", figures_dir, profile=profile,
                  setting=(f"{model}, {'/'.join(sage_datasets)} {sage_retriever}; from the logs: "
                           + curves.scale_setting(CURVES)),
                  caption="SAGE-SCS under three exploration settings: shaped reward and "
                          "response length per GRPO step (SAGE Table 3's runs)")

# %% [markdown]
# ## 3. Test evaluation: nDCG@10 and the modification rate
#
# Greedy rewrites of the test queries by every row's adapter (and by the untrained model
# with each prompt), searched with the training retriever; each row minus the raw query
# with a 95% paired bootstrap (`qrlib.eval.compare`).

# %%
rows, COMPARISONS, REWRITES = [], [], {}
for name, (tr, te, full) in SAGE_DATA.items():
    ev = sage.evaluate(model, {LABEL[v.key]: (v.prompt, SUMMARIES[name, v.key]) for v in ROWS},
                       te, full, SEARCHERS[name], dataset=name, retriever=sage_retriever,
                       autocast=eval_autocast, resamples=bootstrap, seed=seed)
    rows += ev["rows"]
    COMPARISONS += ev["comparisons"]
    REWRITES.update({(name, k): v for k, v in ev["rewrites"].items()})
ABLATION = pd.DataFrame(rows)
for _, r in ABLATION.iterrows():
    record(f"{r.dataset}.{r.model}.ndcg10", r["nDCG@10"])
    record(f"{r.dataset}.{r.model}.modified", r.modified)
save_table(ABLATION.round(4), "15_sage_ablation", tables_dir,
           caption=("Exploration ablation (SAGE Table 3): nDCG@10, Δ vs the raw query with a "
                    "95% paired-bootstrap interval, modification rate, format-valid rate; "
                    f"training scale ({', '.join(SCALE_COLUMNS)}) from each run's log "
                    f"[profile: {profile}]"))
CMP = comparison_table(COMPARISONS)
save_table(CMP.round(4), "15_comparisons", tables_dir,
           caption="Every row of the exploration ablation minus the raw query (nDCG@10, 95% "
                   "paired bootstrap over the test queries; qrlib.eval.compare schema) "
                   f"[profile: {profile}]")
ABLATION[["dataset", "model", "nDCG@10", "ΔnDCG@10 vs raw", "lo", "hi", "modified",
          "format ok", "RL steps"]].round(3)

# %% [markdown]
# The paper's Table 3 (HotpotQA, BGE-base, Qwen3-4B), next to ours: compare the *direction*
# (does forced exploration raise the modification rate, and what does it cost or buy in
# nDCG@10), not the level.

# %%
PAPER_T3 = published.table("sage", "Table 3")
PAPER_T3 = PAPER_T3[PAPER_T3.column == "modification rate"]
published.table("sage", "Table 3")

# %% [markdown]
# ### Chosen strategies
#
# Share of test rewrites per strategy id (`none`: no valid id in the answer).

# %%
rows = []
for (name, label), df in REWRITES.items():
    counts = pd.to_numeric(df.strategy, errors="coerce").fillna(0).astype(int).value_counts(normalize=True)
    rows.append({"dataset": name, "model": label,
                 **{("none" if s == 0 else f"s{s}"): counts.get(s, 0.0) for s in range(6)}})
STRATEGIES = pd.DataFrame(rows)
save_table(STRATEGIES.round(3), "15_strategy_choice", tables_dir,
           caption="Strategy ids chosen in the greedy test rewrites of every ablation row "
                   f"[profile: {profile}]")
STRATEGIES.round(2)

# %% [markdown]
# ## What we found
#
# Built from `15_comparisons`, `15_sage_ablation` and `15_health` of this run by
# `qrlib.workbook.findings`:

# %%
from IPython.display import Markdown

from qrlib.workbook.findings import what_we_found

trained_15 = ABLATION[ABLATION.model.isin([LABEL[v.key] for v in ROWS])]
extra = [f"The trained rows modify {trained_15.modified.min():.0%}-{trained_15.modified.max():.0%} "
         "of the test queries (SAGE Table 3: " + ", ".join(f"{r.row} {r.value:.1%}"
                                                          for _, r in PAPER_T3.iterrows()) + ")."]
display(Markdown(what_we_found(CMP, notebook="15_sage_ablation", tables_dir=tables_dir,
                               health=HEALTH, extra=extra)))
