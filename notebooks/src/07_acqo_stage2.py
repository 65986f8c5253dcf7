# ---
# jupyter:
#   qrlib:
#     reads: [06_acqo_stage1]  # earlier notebooks whose artifacts this one reads (qrlib.freshness)
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # reads 06's Stage I adapters from here, writes Stage II and evaluation
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for subsets, sampling and bootstrap
data_dir = None  # BEIR folders; None means ../shared/data or $QRLIB_DATA
model = "smollm2"  # policy (must be 06's)
retrievers = ["bm25"]  # Stage II runs, one per Stage I adapter of notebook 06
tau_rollouts = 4  # K rollouts per training question for tau(q), ACQO Eq. 7 (A.2: 8)
tau_temperature = 1.0  # sampling temperature of those rollouts
tau_thres = 1.6666666666666667  # keep questions whose tau(q) is at most this, ACQO Eq. 8 (A.2: 5/3)
tau_min = None  # also drop questions whose tau(q) is at most this (ours: Stage I rollouts that all fail give Stage II no reward spread); None: ACQO's Eq. 8 alone
train_steps = 2  # DAPO steps of Stage II per retriever
prompts_per_step = 1  # distinct questions per step
num_generations = 4  # rollouts per question (ACQO A.2: 8)
max_completion_length = 24  # token budget of one rollout
temperature = 1.0  # rollout sampling temperature
top_p = 1.0  # rollout nucleus sampling
learning_rate = 5e-5  # LoRA learning rate
lam = 1.0  # top-rank bonus weight lambda, ACQO Eq. 10
k_star = 0  # ranks 1..k* get the bonus, ACQO Eq. 10 (A.2: 0 for HotpotQA)
dynamic_sampling = 0  # DAPO dynamic sampling rounds (0: off)
test_datasets = ["2wikimultihopqa-mini", "hotpotqa-large"]  # evaluated on their test splits
n_test_queries = 10  # test questions per dataset; None means all
n_test_distractors = 200  # test corpus: judged paragraphs + this many others; None means the full corpus
eval_retrievers = ["bm25"]  # every decomposition is searched with each (cross-retriever, ACQO Fig. 5)
eval_k = 100  # retrieval depth of evaluation (R@100)
bootstrap = 2000  # paired-bootstrap resamples
untrained_prompts = ["acqo/decompose-fewshot", "acqo/no-decompose"]  # untrained rows
n_examples = 6  # example decompositions shown per model
gen_autocast = True  # bf16 autocast for the tau rollouts (sampling; about 4x faster on CPU)
eval_autocast = False  # bf16 autocast of the greedy test decoding (16-19 % of a trained adapter's outputs then differ from fp32: benchmarks/bench_eval_precision.py)
eval_batch_size = 8  # test questions decoded together (greedy)
rule_row = True  # add a model-free row: the question plus qrlib.methods.bandits.decompose.heuristic_split's sub-queries (headroom check)
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
stop = ['"}']  # a rollout ends when it closes the JSON answer (kept in the completion)
rollouts = "hf"  # generation engine of training rollouts and sampling/evaluation: hf (transformers generate) | vllm (in-process vLLM engine, qrlib.generation.engine)
dense_model = "minilm"  # encoder of the dense retriever: offline all-MiniLM-L6-v2; a hub id (BAAI/bge-base-en-v1.5) on GPU

# %% [markdown]
# # 07 · ACQO Stage II and the test: does the trained decomposer beat the raw question?
#
# *Paper:* [When Should I Search More: Adaptive Complex Query Optimization with Reinforcement Learning](https://arxiv.org/abs/2601.21208) (Wen, Deng, Wei, Chen, Qiao and Sun; arXiv:2601.21208, 2026).
#
# Stage II is ACQO's *convergence* stage (Sec. 3.4.3). It starts from the Stage I adapter of
# notebook 06 and changes two things:
#
# 1. **Data curriculum.** The Stage I model samples $K$ decompositions of every training
#    question; the mean Stage I reward is the question's *learning complexity*
#    $\tau(q) = \frac1K\sum_{k=1}^K G^{(I)}(\hat{\mathcal Q}^{(k)}_q)$ (Eq. 7), and only the
#    questions with $\tau(q) \le \tau_{thres}$ are kept (Eq. 8): the ones the model has not
#    mastered yet. With $\eta = 0.6$ two gold paragraphs at ranks 1 and 2 give
#    $0.6\cdot 2 + 0.36\cdot 1.89 = 1.88 > 5/3$, so a question is dropped once the model
#    reliably puts both gold paragraphs on top.
# 2. **Reward.** The fused list of *all* sub-queries is scored, with a bonus for the very
#    top ranks (Eq. 9-10): $G^{(II)}(\hat{\mathcal Q}) = S'(\mathcal R_k(\hat{\mathcal Q}))$,
#    where $\Phi'(r) = \Phi(r) + \lambda\,\mathbb 1[r \le k^*]$. A useless sub-query now
#    costs reward, because its list is fused in.
#
# Then every model is evaluated on the **test** questions, each searched against its own
# dataset's corpus with exact search, against the raw question, with 95% paired-bootstrap
# intervals over questions (ACQO Table 3's columns).
#
# ACQO's last baseline, RL on the same questions *without* decomposition at the same number
# of optimizer steps, is notebook 12: it needs neither 06's nor 07's adapters, only the
# per-question results this notebook publishes, so it can run in a session of its own.
#
# **What you will learn:** how the curriculum picks Stage II's questions, what Stage II
# changes in training, and whether the trained decomposer beats the raw question, an
# untrained decomposer and a rule split with no model, question by question.

# %%
import time

from qrlib import session

S = session.start("07_acqo_stage2", run_dir=run_dir, figures_dir=figures_dir, tables_dir=tables_dir,
                  cache_dir=cache_dir, seed=seed, torch_threads=torch_threads, rollouts=rollouts,
                  dense_model=dense_model)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.eval.compare import save_comparisons
from qrlib.data import rows as qrows
from qrlib.eval import published
from qrlib.eval.scale import SCALE_COLUMNS
from qrlib.generation import engine, policy
from qrlib.methods.acqo import stage2_eval as st2
from qrlib.methods.acqo import study
from qrlib.methods.acqo.artifacts import Stage1Record
from qrlib.methods.acqo.curriculum import SubqueryProbe, generate_decompositions, keep_for_stage2
from qrlib.rl.health import health_report
from qrlib.rl.train import load_config, train
from qrlib.eval.findings import what_we_found

S1 = Stage1Record.load(run_dir / "06_acqo_stage1")  # Stage I's runs and settings (06's record)
TRAIN_ROWS, PROMPT, PREFILL = S1.train_rows, S1.prompt, S1.prefill
for kind in retrievers:
    S1.summary(kind)  # one-line error when 06 did not train this retriever
print(f"profile={profile} model={model}; Stage I runs: {sorted(S1.summaries)}; "
      f"{len(TRAIN_ROWS)} training questions")

# %% [markdown]
# ## 1. The training corpus again, and tau(q) from K rollouts of the Stage I model
#
# The same pooled training questions and corpus as notebook 06 (the paragraph ids 06
# saved). For each retriever's Stage I adapter: $K$ sampled decompositions per
# training question, scored by the Stage I reward, averaged into $\tau(q)$ (Eq. 7); the
# questions with $\tau(q) \le \tau_{thres}$ are kept (Eq. 8).

# %%
CORPUS, QRELS = study.training_collection(S1, data_dir=data_dir)
print(f"training corpus: {len(CORPUS)} paragraphs, {len(QRELS)} training questions")
TAU, KEPT, TRAIN_RETR = {}, {}, {}
for kind in retrievers:
    TRAIN_RETR[kind] = study.train_retriever(kind, CORPUS, cache_dir=cache_dir)
    env = study.acqo_env(S1, TRAIN_RETR[kind], QRELS, "acqo_stage1")
    TAU[kind], n_rolls, secs = st2.sample_tau(model, S1.summary(kind)["adapter"], TRAIN_ROWS, env,
                                              n=tau_rollouts, temperature=tau_temperature,
                                              seed=seed, autocast=gen_autocast)
    KEPT[kind] = keep_for_stage2(TAU[kind], tau_thres, tau_min)
    print(f"{kind}: tau from {n_rolls} rollouts in {secs:.0f}s; kept "
          f"{len(KEPT[kind])}/{len(TAU[kind])} questions ({st2.tau_rule(tau_thres, tau_min)})")

# %% [markdown]
# The kept share, with a 95% bootstrap interval over training questions (the paper keeps
# about half, ACQO A.3), and the distribution of $\tau(q)$:

# %%
KEPT_TABLE = st2.kept_table(TAU, KEPT, bootstrap=bootstrap, seed=seed)
save_table(KEPT_TABLE, "07_tau_filter", tables_dir,
           caption=f"ACQO Eq. 7-8 curriculum filter: share of training questions with "
                   f"{st2.tau_rule(tau_thres, tau_min)} from {tau_rollouts} Stage I rollouts each")
plots.save_figure(st2.tau_histogram(TAU, tau_thres), "07_tau_hist", figures_dir,
                  caption="tau(q) of the training questions under each Stage I model "
                          "(ACQO Eq. 7) and the Eq. 8 threshold", profile=profile,
                  setting=f"{len(TRAIN_ROWS)} training questions, K={tau_rollouts}")
KEPT_TABLE

# %% [markdown]
# ## 2. Stage II training
#
# From the Stage I adapter, on the kept questions only, with the Stage II reward (DAPO
# again). If the filter keeps nothing (a Stage I model that masters every training
# question), Stage II trains on all questions and says so.

# %%
SUMMARIES, NAMES = {}, {}
for kind in retrievers:
    rows2 = st2.stage2_rows(TRAIN_ROWS, KEPT[kind], kind)
    cfg = load_config(dict(
        name=f"acqo-stage2-{kind}", run_dir=str(run_dir), model=model, prompt=PROMPT,
        prefill=PREFILL, reward="acqo_stage2", algorithm="dapo", max_steps=train_steps,
        prompts_per_step=prompts_per_step, num_generations=num_generations,
        max_completion_length=max_completion_length, temperature=temperature, top_p=top_p,
        learning_rate=learning_rate, init_adapter=S1.summary(kind)["adapter"],
        dynamic_sampling=dynamic_sampling, save_steps=max(1, train_steps // 4), seed=seed,
        retriever=kind, stop=list(stop)))
    env = SubqueryProbe(study.acqo_env(S1, TRAIN_RETR[kind], QRELS, "acqo_stage2", lam=lam,
                                       k_star=k_star), k=10)
    t0 = time.perf_counter()
    SUMMARIES[kind] = s = train(cfg, env=env, rows=rows2)
    s["wall_seconds"] = round(time.perf_counter() - t0, 1)
    s["n_train_questions"] = len(rows2)
    NAMES[kind] = cfg.name
    print(f"{kind}: Stage II trained {s['steps']} steps on {s['n_train_questions']} kept "
          f"questions in {s['train_seconds'] / 60:.1f} min")
_ = save_json({"summaries": SUMMARIES, "tau": TAU, "kept": KEPT}, out_dir / "stage2.json")

# %% [markdown]
# ### Training health
#
# Per step and run (`qrlib.rl.health`): the reward, the shares of rollouts that are
# well-formed and that hit the token budget, the share that copy the input query (*copy*)
# or repeat one of the prompt's own examples or placeholders (*echo*), and the share of
# groups whose rewards are all equal (no GRPO signal). A run has **collapsed** when its
# copy or echo share is above 0.9 over its last quarter of steps.

# %%
HEALTH, health_lines = health_report({**{f"Stage I {k}": S1.summary(k) for k in retrievers},
                                      **{f"Stage II {k}": s for k, s in SUMMARIES.items()}},
                                     "07_health", tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# ### Both stages on one axis
#
# Stage II's steps continue Stage I's. Left: reward (each stage's own reward, so the level
# jumps where the reward changes); middle: sub-queries per rollout; right: fused-list
# nDCG@10 on the training questions. The table below sums each stage up.

# %%
fig, CURVES, SCALES = st2.curriculum_figure(run_dir, NAMES)
plots.save_figure(fig, "07_curriculum_curves", figures_dir,
                  caption="ACQO curriculum: Stage I and Stage II training curves on one axis",
                  profile=profile, setting=f"{model}; from the logs: " + " | ".join(SCALES))
STAGE_TABLE = st2.stage_table(CURVES)
save_table(STAGE_TABLE, "07_stage_summary", tables_dir,
           caption="Per stage: steps, mean reward, sub-queries per rollout, training fused "
                   "nDCG@10, seconds per step and training minutes (ACQO Table 6b's role)")
STAGE_TABLE

# %% [markdown]
# ## 3. The test questions
#
# Each test set is searched against its own corpus (2Wiki: 8,651 paragraphs; HotpotQA-large:
# 9,171; in small profiles cut to the judged paragraphs plus `n_test_distractors`),
# exactly (BM25, or MiniLM with a flat FAISS index).

# %%
TEST = study.load_test_cuts(test_datasets, data_dir=data_dir, n_queries=n_test_queries,
                            n_distractors=n_test_distractors, seed=seed)
for name, ds in TEST.items():
    print(f"{name}: {len(ds.queries)} test questions, {len(ds.corpus)} paragraphs")
EVAL_RETR = study.eval_retrievers(TEST, eval_retrievers, cache_dir=cache_dir)

# %% [markdown]
# ## 4. Decompositions of every model
#
# Greedy decoding (ACQO validates with temperature 0.7; greedy keeps reruns identical on
# one machine; with `eval_autocast` the matmuls run in bf16), with the decoding contract
# of training: Stage I's prompt, prefill, stop strings, token budget and parser, read
# from each adapter (`decoding.json`) and, for the untrained rows, from Stage I's. Models: the untrained policy
# with each prompt in `untrained_prompts`, and per retriever the rejection-sampling cold
# start alone (when notebook 06 ran one), the Stage I adapter and the Stage I + II adapter
# (ACQO). Every model's decompositions are
# searched with every evaluation retriever, so the cross-retriever table (ACQO Fig. 5)
# costs no extra generation.

# %%
MODELS = st2.models_to_decode(S1, SUMMARIES, retrievers, untrained_prompts)  # label -> (adapter, contract)
DECOMP = {}  # (model label, dataset) -> list of dicts
engine.close_engines()  # the bf16 sampling engine of the tau rollouts is done: free its memory
for label, (adapter, contract) in MODELS.items():
    m, tok = policy.load_policy(model, adapter=adapter)
    for name in test_datasets:
        DECOMP[label, name] = generate_decompositions(
            m, tok, qrows.rows_from_dataset(TEST[name]), contract=contract, progress=False,
            autocast=eval_autocast, batch_size=eval_batch_size)
    del m
save_json({f"{k[0]} | {k[1]}": v for k, v in DECOMP.items()}, out_dir / "decompositions.json")
VALID = {k: study.validity(v) for k, v in DECOMP.items()}  # test validity

# %% [markdown]
# ## 5. Results with paired-bootstrap intervals (ACQO Table 3's columns)
#
# For each dataset × evaluation retriever × model: R@4, R@10, R@100, MAP@10, MRR@10 and
# nDCG@10 (ir-measures), the mean number of sub-queries, and nDCG@10 minus the raw
# question's on the same questions with a 95% paired-bootstrap interval. With `rule_row`
# a model-free row is added: the question fused (RSF) with up to two sub-queries of
# `qrlib.methods.bandits.decompose.heuristic_split` (comparison alternatives, entity spans, clauses; see
# notebook 03). It shows how much a plain rule already gains here, i.e. the headroom a
# trained decomposer has to reach before it is worth its generation cost. Each row's
# training scale is read from the logs of the runs behind it.

# %%
PER_Q, LAT = st2.score_rows(TEST, EVAL_RETR, DECOMP, list(MODELS), rule_row=rule_row, k=eval_k)
TRAINED_BY, KIND = st2.provenance(list(MODELS), S1, NAMES, run_dir=run_dir, model=model)
RESULTS = st2.results_table(PER_Q, TRAINED_BY, VALID, bootstrap=bootstrap, seed=seed)
save_table(RESULTS.round(4), "07_acqo_results", tables_dir,
           caption="ACQO on the test questions (ACQO Table 3 columns); ΔnDCG@10 vs the raw "
                   "question with a 95% paired-bootstrap interval [lo, hi] over questions; "
                   f"the training scale of each row ({', '.join(SCALE_COLUMNS)}) is read from "
                   "its runs' logs (qrlib.eval.scale)")
RESULTS.round(3)

# %% [markdown]
# Per-question nDCG@10 of every row, one column per model, as a published table: notebook
# 12 pairs its single-query RL baseline with these rows question by question (its training
# does not need 06's and 07's adapters, so it can run in another session).

# %%
PER_QUESTION = st2.per_question_table(PER_Q)
save_table(PER_QUESTION.round(6), "07_per_question_ndcg10", tables_dir,
           caption="nDCG@10 of every test question under every row of 07_acqo_results "
                   "(one column per row), read by notebook 12")
PER_QUESTION.shape

# %% [markdown]
# ### Every row against the raw question, and ACQO against every other row
#
# The workbook's one comparison schema (`qrlib.eval.compare`): each row below is a method
# minus a baseline in nDCG@10 on the same test questions, with the 95% paired bootstrap,
# the method's kind (model-free, untrained, warm start, trained) and its training scale.
# `RESULTS.md` reads this table by column.

# %%
COMPARISONS = st2.comparisons(PER_Q, KIND, TRAINED_BY, VALID, retrievers, bootstrap=bootstrap,
                              seed=seed)
save_comparisons(COMPARISONS, "07_comparisons", tables_dir,
                 caption="Every row minus the raw question, and ACQO (Stage I+II) minus every other "
                         "row, nDCG@10, 95% paired bootstrap over the test questions "
                         f"(qrlib.eval.compare schema) [profile: {profile}]")
COMPARISONS[["dataset", "retriever", "method", "baseline", "diff", "lo", "hi"]].round(3)

# %% [markdown]
# Question by question: ACQO (Stage I + II, searched with its training retriever) against
# the raw question, one point per test question. Points above the diagonal are questions
# the decomposition helped; on the diagonal at 1.0 sit the questions the raw question
# already answers perfectly, where a decomposition can only lose.

# %%
_ = plots.save_figure(st2.acqo_scatter(COMPARISONS, PER_Q), "07_per_query", figures_dir,
                      profile=profile,
                      setting=f"{model}, {n_test_queries or 'all'} test questions per dataset",
                      caption="Per-question nDCG@10 of ACQO (Stage I+II, its training retriever; y) "
                              "against the raw question (x); title: n, wins / losses / ties and "
                              "the mean difference with its 95 % paired-bootstrap interval")
plt.show()

# %% [markdown]
# ## 6. Easy and hard questions (ACQO Table 1's split)
#
# A test question is *easy* when the raw question's own nDCG@10 is at least the median of
# its test set (under the same retriever), *hard* otherwise. Decomposition should help most
# where the single question fails.

# %%
EASY_HARD = st2.easy_hard(PER_Q)
save_table(EASY_HARD.round(4), "07_easy_hard", tables_dir,
           caption="nDCG@10 on easy vs hard test questions (split at the median raw-question "
                   "nDCG@10 per dataset and retriever)")
EASY_HARD.round(3)

# %% [markdown]
# ## 7. Quality against the number of sub-queries (ACQO Fig. 1-2)
#
# Mean nDCG@10 of the test questions grouped by how many sub-queries the model wrote, with
# the 95 % bootstrap interval of each group's mean and its number of questions: a group of a
# handful of questions says little, whatever its mean.

# %%
BY_NSUB = st2.by_n_sub(PER_Q)
save_table(BY_NSUB.round(4), "07_by_n_subqueries", tables_dir,
           caption="nDCG@10 by number of sub-queries written (test questions), with the 95 % "
                   "bootstrap interval of each group's mean (lo, hi)")
_ = plots.save_figure(st2.by_n_sub_figure(BY_NSUB, test_datasets, eval_retrievers[0]),
                      "07_ndcg_by_n_subqueries", figures_dir,
                      caption="Test nDCG@10 against the number of sub-queries (ACQO Fig. 1-2); "
                              "bars: 95 % bootstrap interval of the group mean; n: questions",
                      profile=profile,
                      setting=f"{model}, {n_test_queries or 'all'} test questions per dataset")

# %% [markdown]
# ## 8. Latency and generated tokens (ACQO Table 6a, Table 8)
#
# Per query: generation (the model), retrieval (all sub-queries, one batched call) and
# fusion; and the mean number of generated tokens. Expect generation to dominate by orders
# of magnitude: on CPU a decomposition takes seconds, its retrieval milliseconds and its
# fusion well under one (notebook 03 timed it in microseconds). A decomposer that writes
# more sub-queries pays mostly in generated tokens, not in search.

# %%
LATENCY = pd.DataFrame(LAT).groupby(["model", "retriever"]).mean(numeric_only=True).reset_index()
save_table(LATENCY.round(4), "07_latency", tables_dir,
           caption="Per-query latency split (generation / retrieval / fusion) and generated "
                   "tokens, test questions, this machine")
LATENCY.round(3)

# %% [markdown]
# ## 9. Examples
#
# The same test questions decomposed by the untrained model and by ACQO.

# %%
pd.set_option("display.max_colwidth", 140)
st2.examples(DECOMP, list(MODELS), TEST[test_datasets[0]], test_datasets[0], n_examples)

# %% [markdown]
# ## 10. Next to the paper (ACQO Table 3, HotpotQA)
#
# The published numbers come from `qrlib/methods/acqo/published.yaml`. The settings differ: the
# paper searches the 5.2M-paragraph BEIR HotpotQA corpus with Qwen2.5-3B trained for
# 3 + 6 epochs on about half of its 90k training questions (App. A); here a 9k-paragraph
# corpus, a 0.5B (or smaller) model, the training scale of each row in its columns, and
# BM25 / MiniLM instead of BM25 / ANCE. Our corpus is much smaller, so absolute values are
# higher; compare the *direction* of each row against the raw question, not the level.

# %%
PAPER = published.table("acqo", "Table 3", wide=True, index="key", fraction=True)
VS_PAPER = st2.vs_paper(RESULTS, PAPER, PER_Q)
if not VS_PAPER.empty:
    save_table(VS_PAPER.round(4), "07_vs_paper_table3", tables_dir,
               caption="HotpotQA test, ours vs ACQO Table 3 (paper: 5.2M-paragraph corpus, "
                       "Qwen2.5-3B, ANCE; ours: 9k-paragraph pooled corpus, smaller model, "
                       "MiniLM); fractions")
    display(VS_PAPER)
else:
    display(Markdown(st2.no_paper_row(profile, test_datasets, retrievers)))

# %% [markdown]
# ## What we found
#
# Built from `07_comparisons`, `07_acqo_results`, `07_tau_filter` and `07_health` of this
# run by `qrlib.eval.findings`:

# %%
display(Markdown(what_we_found(COMPARISONS[COMPARISONS.method.str.startswith("ACQO")],
                               notebook="07_acqo_stage2", tables_dir=tables_dir, health=HEALTH,
                               extra=st2.extra_sentences(RESULTS, KEPT_TABLE), subject="ACQO")))

# %% [markdown]
# The last cell stores the numbers the tests read (the tau filter, every row's nDCG@10 and
# its difference from the raw question); it prints nothing.

# %%
for key, value in st2.records(KEPT_TABLE, RESULTS).items():
    record(key, value)
