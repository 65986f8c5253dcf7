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
#
# What to look for: the modification rate should rise from the conservative row to the
# proactive rows and be highest with the penalty; whether nDCG@10 follows is the question
# the paper answers with a small loss at the highest rate.

# %%
from qrlib import session

S = session.start("15_sage_ablation", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  torch_threads=torch_threads, rollouts=rollouts)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

from IPython.display import Markdown

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.eval import curves, published
from qrlib.eval.compare import comparison_table, save_comparisons
from qrlib.methods.sage import pipeline as sage, study
from qrlib.rl.health import health_report
from qrlib.eval.findings import what_we_found

print(f"profile={profile} policy={model}")

# %% [markdown]
# ## 1. Data, and notebook 08's SAGE-SCS run
#
# The same cut as notebook 08 when the parameters agree (`sage.sage_data`: seeded train and
# test subsets, one corpus for both). 08 saved its run summaries in
# `run_dir/08_sage/sage_summaries.json`; the SCS run's adapter and log come from there. A
# missing file or run is a one-line error that says what to rerun in 08.

# %%
SAGE_DATA = study.load_data(sage_datasets, n_train_queries=n_train_queries,
                            n_test_queries=n_test_queries, n_distractors=n_distractors,
                            seed=seed, data_dir=data_dir)
RETR = study.Retrievers(cache_dir=cache_dir, dense_model=dense_model)  # one index per cut
SCS_08 = study.scs_runs_of_08(run_dir, sage_datasets)

# %% [markdown]
# ## 2. Training the ablation rows
#
# One GRPO run per row, the same settings as 08's main runs: only the prompt and $p$ differ.
# 08's SCS run joins each dataset's rows as the last one.

# %%
VARIANTS = sage.variants(copy_penalty, ablation_p, reasoning=reasoning)
RUNS = sage.pick([*ablation, *[f"proactive-p{float(p):g}" for p in ablation_p]], VARIANTS)
SUMMARIES = study.train_runs(
    RUNS, SAGE_DATA, RETR, retriever=sage_retriever, run_dir=run_dir, model=model,
    train_steps=train_steps, n_train_queries=n_train_queries, n_distractors=n_distractors,
    prompts_per_step=prompts_per_step, num_generations=num_generations,
    max_completion_length=max_completion_length, temperature=temperature,
    learning_rate=learning_rate, beta=beta, seed=seed, dynamic_sampling=dynamic_sampling,
    stop=stop, append={name: {"scs": s} for name, s in SCS_08.items()})
save_json(study.summaries_json(SUMMARIES), out_dir / "ablation_summaries.json")
ROWS = [*RUNS, VARIANTS["scs"]]
LABEL = study.ablation_labels(RUNS, copy_penalty)

# %% [markdown]
# ### Training health
#
# Per step and run (`qrlib.rl.health`): the reward, the shares of rollouts that are
# well-formed and that hit the token budget, the share that copy the input query (*copy*)
# or repeat one of the prompt's own examples or placeholders (*echo*), and the share of
# groups whose rewards are all equal (no GRPO signal). A run has **collapsed** when its
# copy or echo share is above 0.9 over its last quarter of steps. The conservative row is
# the one expected to drift towards copying.

# %%
HEALTH, health_lines = health_report(SUMMARIES, "15_health",
                                     tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# Shaped reward and response length per step for every row (the penalty lowers the reward
# of copying rollouts, so the penalised row's curve sits lower while it still copies).

# %%
CURVES = study.training_curves(SUMMARIES, LABEL, with_dataset=True)
fig = curves.reward_and_length(CURVES, reward="mean shaped reward")
_ = plots.save_figure(fig, "15_ablation_training_curves", figures_dir, profile=profile,
                      setting=study.training_setting(model, sage_datasets, sage_retriever,
                                                     CURVES, per_run=False),
                      caption=study.caption("15_ablation_training_curves"))

# %% [markdown]
# ## 3. Test evaluation: nDCG@10 and the modification rate
#
# Greedy rewrites of the test queries by every row's adapter (and by the untrained model
# with each prompt), searched with the training retriever; each row minus the raw query
# with a 95% paired bootstrap (`qrlib.eval.compare`). Every row decodes with its training's
# decoding contract (`sage.evaluate`).

# %%
EV = study.evaluate_runs(model, {LABEL[v.key]: v for v in ROWS}, SUMMARIES, SAGE_DATA, RETR,
                         retriever=sage_retriever, autocast=eval_autocast, resamples=bootstrap,
                         seed=seed)
ABLATION, CMP = EV.results, comparison_table(EV.comparisons)
save_table(ABLATION.round(4), "15_sage_ablation", tables_dir,
           caption=study.caption("15_sage_ablation", profile=profile))
save_comparisons(CMP, "15_comparisons", tables_dir,
                 caption=study.caption("15_comparisons", profile=profile))
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
STRATEGIES = study.strategy_choice(EV.rewrites)
save_table(STRATEGIES.round(3), "15_strategy_choice", tables_dir,
           caption=study.caption("15_strategy_choice", profile=profile))
STRATEGIES.round(2)

# %% [markdown]
# ## What we found
#
# Built from `15_comparisons`, `15_sage_ablation` and `15_health` of this run by
# `qrlib.eval.findings`:

# %%
extra = [study.ablation_sentence(ABLATION, [LABEL[v.key] for v in ROWS], PAPER_T3)]
display(Markdown(what_we_found(CMP, notebook="15_sage_ablation", tables_dir=tables_dir,
                               health=HEALTH, extra=extra)))

# %% [markdown]
# The numbers the tests read back (recorded quietly; nothing to read here).

# %%
for key, value in study.result_records(ABLATION).items():
    record(key, value)
