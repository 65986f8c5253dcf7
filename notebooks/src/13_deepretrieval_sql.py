# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # adapters, logs and generated SQL of this notebook go here
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models); None means qrlib default
seed = 0  # seed for the question sample, sampling and bootstrap
data_dir = None  # data root holding spider-dev; None means ../shared/data or $QRLIB_DATA
model = "smollm2"  # policy; the paper's Table 3 uses Qwen2.5(-Coder)-3B/7B
test_fraction = 0.3  # share of databases held out for testing (qrlib.data.rows.spider_db_split)
n_train_queries = 8  # training questions drawn from the training databases (None: all)
n_test_queries = 8  # test questions (None: every question of the test databases)
zero_shot_prompts = ["deepretrieval/sql-think", "deepretrieval/sql-nothink"]  # zero-shot rows
rl_prompt = "deepretrieval/sql-nothink"  # the prompt RL and SFT train with
prefill = '<answer>{"query": "SELECT'  # start of the answer in training and evaluation (no-think)
rl_runs = ["scratch", "coldstart"]  # scratch | coldstart (after SFT) | think (scratch, with reasoning)
think_prompt = "deepretrieval/sql-think"  # the prompt of the "think" run (Fig. 4: with vs without reasoning)
reward_preset = "paper"  # deepretrieval_sql preset: paper (Table 8) | released (spider.py)
exec_bonus = 0.0  # App. F's +0.3 for SQL that runs (BIRD); 0 on Spider, as Table 8
train_steps = 2  # RL optimizer steps of each run
sft_steps = 2  # SFT steps on gold SQL before RL in the cold-start run (and the SFT row)
prompts_per_step = 1  # distinct questions per RL step
num_generations = 2  # rollouts per question
max_completion_length = 32  # token budget of one rollout
think_max_completion_length = 64  # token budget of one rollout with reasoning
temperature = 1.0  # rollout sampling temperature
top_p = 1.0  # rollout nucleus sampling
learning_rate = 1e-5  # LoRA learning rate (RL)
sft_learning_rate = 1e-4  # LoRA learning rate (SFT)
lora_r = 16  # LoRA rank
dynamic_sampling = 0  # DAPO dynamic sampling rounds (0: off)
eval_autocast = False  # bf16 autocast of greedy decoding (False keeps the fp32 model's outputs)
sql_timeout_s = 2.0  # wall-clock limit of one statement in the sandbox
bootstrap = 2000  # paired-bootstrap resamples
n_examples = 6  # example queries shown
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
rollouts = "hf"  # generation engine: hf | vllm (qrlib.generation.engine)

# %% [markdown]
# # 13 · DeepRetrieval's database search: SQL as the query (Table 3)
#
# *Paper:* [DeepRetrieval: Hacking Real Search Engines and Retrievers with Large Language Models via Reinforcement Learning](https://arxiv.org/abs/2503.00223) (Jiang, Lin, Cao, Tian, Kang, Wang, Sun and Han; arXiv:2503.00223, 2025).
#
# DeepRetrieval treats text-to-SQL as one more search task: the policy reads a question
# and a database schema and writes **one SQLite query**; the "retriever" is the database
# itself, and the reward asks whether the query returns the right rows (DeepRetrieval
# Sec. 3.3, Table 8):
#
# $$ r = \begin{cases} \mathbb 1\big[\mathrm{exec}(\hat s) = \mathrm{exec}(s^*)\big] & \text{well-formed answer} \\ -1 & \text{otherwise,} \end{cases} $$
#
# compared as Spider's execution accuracy compares results (order matters only when the
# gold query sorts). App. F adds $+0.3$ for SQL that runs without error on BIRD
# (`exec_bonus`); the released `spider.py` compares result *sets*, adds a format bonus of
# 0.1 to a match and charges −2 for a malformed answer (`reward_preset="released"`,
# `qrlib.methods.deepretrieval.rewards`).
#
# **The split.** Spider dev's databases (19 of 20 are in the offline copy; the 62
# questions on `wta_1` are skipped and counted) are divided by a hash of the database name,
# so **no database is in both** the training and the test questions. Every generated
# statement runs in a sandbox: a separate process, read-only, time-limited
# (`qrlib.data.sql`).
#
# **The rows** (Table 3's, on our test databases with our policy): zero-shot with and
# without reasoning; SFT on the gold SQL of the training databases; RL from scratch; RL
# after the SFT cold start. Each is compared with the zero-shot model without reasoning,
# question by question, with a 95 % paired bootstrap, and reported per Spider hardness
# level (`qrlib.eval.spider_hardness`, Spider's own rules).

# %%
import gc
from pathlib import Path

from qrlib import session

S = session.start("13_deepretrieval_sql", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  torch_threads=torch_threads, rollouts=rollouts)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import pandas as pd

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.data import datasets as qdata
from qrlib.data import rows as qrows
from qrlib.eval import published
from qrlib.eval.compare import comparison_table, save_comparisons
from qrlib.eval.scale import SCALE_COLUMNS
from qrlib.generation import engine, policy, prompts
from qrlib.methods.deepretrieval import sql_report as Q
from qrlib.methods.deepretrieval import sql_task
from qrlib.rl.coldstart import rl_after_sft
from qrlib.rl.train import train

# %% [markdown]
# ## 1. Questions, databases and the split
#
# Spider dev's questions are loaded with the database each one asks about; the split puts
# every database wholly on one side, and a seeded sample of questions is drawn from each
# side. The table counts databases and questions per side and the Spider hardness levels
# (easy, medium, hard, extra) of the questions actually used.

# %%
SPIDER = qdata.load_spider(data_dir)
LEVELS = sql_task.spider_levels(Path(SPIDER.meta["source"]) / "dev.json")
ALL_TRAIN = qrows.rows_from_spider(SPIDER, "train", test_fraction=test_fraction)
ALL_TEST = qrows.rows_from_spider(SPIDER, "test", test_fraction=test_fraction)
TRAIN_ROWS = sql_task.sample_questions(ALL_TRAIN, n_train_queries, seed=seed)
TEST_ROWS = sql_task.sample_questions(ALL_TEST, n_test_queries, seed=seed)
SPLIT = Q.split_table(ALL_TRAIN, ALL_TEST, TRAIN_ROWS, TEST_ROWS, LEVELS)
save_table(SPLIT, "13_split", tables_dir,
           caption=f"Spider dev split by database (test_fraction={test_fraction}; no database in "
                   f"both); skipped for a missing database: {SPIDER.skipped}; hardness levels of "
                   "the questions used")
print("test databases: " + ", ".join(sorted({r["db_id"] for r in ALL_TEST})))
SPLIT

# %% [markdown]
# The prompt (the schema is the database's `CREATE TABLE` statements):

# %%
print(prompts.render(prompts.get(rl_prompt), schema=TEST_ROWS[0]["schema"][:400] + " ...",
                     question=TEST_ROWS[0]["question"])[-1]["content"])

# %% [markdown]
# ## 2. Training: RL from scratch, and RL after an SFT cold start on gold SQL
#
# Both runs use the same questions, reward, sampling and step budget (DAPO: token-level
# loss, clip $[0.2, 0.28]$, no KL). The cold-start run first fine-tunes on the gold SQL of
# its training questions (`sft_steps`); that SFT-only adapter is also evaluated as the
# "SFT on gold" row.
#
# The cold start runs as two steps (`qrlib.rl.coldstart.rl_after_sft`): the SFT with
# gradient checkpointing, whose full-schema prompts otherwise need more than this machine's
# 23 GiB at batch 4, then the GRPO run from the SFT adapter, without checkpointing, like the
# run from scratch.
#
# Each finished run gives its memory back before the next one starts (`train` drops the
# traceback a library keeps of the trainer's frames and returns the freed heap to the system;
# `qrlib.rl.release`), so the three runs share one process.
#
# Each run's decoding contract (prompt, prefill, stop at `</answer>`, token budget, parser)
# is fixed here and saved beside its adapter; the zero-shot rows of section 3 decode with
# the contract of the run trained with their prompt. A run prints its steps, seconds and
# rollouts when it ends.

# %%
RUNS = Q.run_specs(TRAIN_ROWS, rl_prompt=rl_prompt, prefill=prefill, sft_steps=sft_steps,
                   think_prompt=think_prompt)
unknown = sorted(set(rl_runs) - {v["run"] for v in RUNS.values()})
assert not unknown, f"unknown rl_runs {unknown}; accepted: scratch, coldstart, think"


def run_contract(spec):
    return Q.run_contract(spec, max_new_tokens=max_completion_length,
                          think_max_new_tokens=think_max_completion_length)


CONTRACTS = {spec["prompt"]: run_contract(spec) for spec in RUNS.values()
             if spec["sft_steps"] == 0}  # one per prompt: the scratch and think runs'
RUNS = {k: v for k, v in RUNS.items() if v["run"] in rl_runs}
SUMMARIES = {}
for label, spec in RUNS.items():
    env = Q.sql_env(spec, preset=reward_preset, exec_bonus=exec_bonus, timeout_s=sql_timeout_s)
    cfg = Q.sql_config(spec, run_contract(spec), max_steps=train_steps, lora_r=lora_r,
                       run_dir=str(run_dir), model=model, sft_learning_rate=sft_learning_rate,
                       prompts_per_step=prompts_per_step, num_generations=num_generations,
                       temperature=temperature, top_p=top_p, learning_rate=learning_rate,
                       dynamic_sampling=dynamic_sampling, seed=seed)
    fit = rl_after_sft if spec["sft_steps"] else train  # SFT checkpointed, then GRPO
    SUMMARIES[label] = s = fit(cfg, env=env, rows=spec["rows"])
    print(f"{label}: {s['steps']} RL steps, {s['rollouts']} rollouts, "
          f"{s['train_seconds'] / 60:.1f} min")
    del env
save_json(SUMMARIES, out_dir / "summaries.json")
LOGS = {k: pd.read_csv(s["log"], dtype={"qids": str}) for k, s in SUMMARIES.items()}

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

HEALTH, health_lines = health_report(SUMMARIES, "13_health",
                                     tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# ### Training curves
#
# Reward per step (execution match plus format terms), the share of well-formed rollouts,
# and the completion length: with reasoning (the `think` run) it is the length of the
# reasoning plus the query, the quantity DeepRetrieval's Fig. 4 follows over training.

# %%
fig, setting_13 = Q.sql_curves(LOGS, model)
_ = plots.save_figure(fig, "13_sql_curves", figures_dir, profile=profile,
                      caption="SQL RL runs: reward and format validity per step", setting=setting_13)

# %% [markdown]
# ## 3. The test: every row on the same test questions
#
# Greedy decoding with the decoding contract of training (prompt, prefill, stop strings,
# budget, parser); the statement is parsed as the reward parses it and run in the sandbox.
# Execution accuracy is the share of questions whose result equals the gold query's,
# $\mathrm{EX} = \frac1n\sum_i \mathbb 1[\mathrm{exec}(\hat s_i) = \mathrm{exec}(s_i^*)]$.
# Each row prints its accuracy, its share of well-formed answers and its share of
# statements that ran; a small policy zero-shot writes many statements that do not run.

# %%
MODELS = Q.eval_models(CONTRACTS, zero_shot_prompts, SUMMARIES)  # label -> (adapter, contract)
GEN, SCORES = {}, {}
for label, (adapter, contract) in MODELS.items():
    m, tok = policy.load_policy(model, adapter=adapter)
    GEN[label] = g = sql_task.generate_sql(m, tok, TEST_ROWS, contract=contract,
                                           autocast=eval_autocast)
    del m
    gc.collect()
    SCORES[label] = sql_task.score_sql(TEST_ROWS, dict(zip(g.qid, g.sql)), timeout_s=sql_timeout_s)
    print(f"{label}: {SCORES[label].exec_match.mean():.3f} execution accuracy, "
          f"{g.format_ok.mean():.2f} well-formed, {SCORES[label].executed.mean():.2f} ran")
engine.close_engines()
_ = save_json({k: v.to_dict("records") for k, v in GEN.items()}, out_dir / "generated.json")

# %% [markdown]
# ## 4. Table 3 on our test databases
#
# Execution accuracy overall and per Spider hardness level, next to the training scale of
# each row, and each row against the zero-shot model without reasoning (95 % paired
# bootstrap over the test questions; the `qrlib.eval.compare` schema). Per question the
# difference is $d_i \in \{-1, 0, 1\}$, so the interval is wide unless many questions
# change; the wins, losses and ties columns show how many did.

# %%
SCALE = Q.row_scales(LOGS, RUNS, GEN, model=model, n_test=len(TEST_ROWS), sft_steps=sft_steps,
                     n_train=len(TRAIN_ROWS))
TABLE3 = Q.table3(SCORES, GEN, LEVELS, SCALE)
save_table(TABLE3.round(4), "13_sql_results", tables_dir,
           caption=f"SQL database search on Spider dev's test databases ({len(TEST_ROWS)} "
                   "questions): execution accuracy overall and per Spider hardness level; "
                   f"training scale ({', '.join(SCALE_COLUMNS)}) from the runs' logs")
COMPARISONS = comparison_table(Q.comparison_rows(SCORES, SCALE, base=Q.BASE,
                                                 resamples=bootstrap, seed=seed))
save_comparisons(COMPARISONS, "13_comparisons", tables_dir,
                 caption="Each row minus the zero-shot model without reasoning, execution accuracy, "
                         "95% paired bootstrap over the test questions (qrlib.eval.compare schema)")
for key, value in Q.result_records(TABLE3, COMPARISONS).items():
    record(key, value)
TABLE3.round(3)

# %% [markdown]
# ### Question by question
#
# Per question each row either matches the gold result or not, as does the zero-shot
# model: the bars count the questions both solve, only the row (wins), only the zero-shot
# model (losses) and neither; the difference above is (wins − losses) / n.

# %%
pairs, intervals = Q.outcome_pairs(SCORES, COMPARISONS)
if pairs:
    fig = plots.per_query_outcomes(pairs, metric="execution match",
                                   baseline=Q.BASE, intervals=intervals)
    _ = plots.save_figure(fig, "13_per_query", figures_dir, profile=profile, setting=setting_13,
                          caption="Per test question, execution match of each row against the "
                                  "zero-shot model without reasoning: solved by both, only the "
                                  "row, only the zero-shot model, neither; with n and the paired "
                                  "difference")

# %% [markdown]
# The paper's Table 3 (execution accuracy in %, Spider dev and BIRD dev, 3B-7B policies;
# from `qrlib/methods/deepretrieval/published.yaml`):

# %%
published.table("deepretrieval", "Table 3")

# %% [markdown]
# ## 5. Examples
#
# The first `n_examples` test questions with the SQL of the zero-shot model and of the
# cold-started RL model, whether its result matched the gold query's, and the gold SQL.

# %%
pd.set_option("display.max_colwidth", 120)
Q.examples(GEN, SCORES, TEST_ROWS, n_examples)

# %% [markdown]
# ## What we found
#
# Built from `13_comparisons`, `13_sql_results` and `13_health` of this run by
# `qrlib.eval.findings` (the baseline here is the zero-shot model without reasoning):

# %%
from IPython.display import Markdown

from qrlib.eval.findings import what_we_found

display(Markdown(what_we_found(COMPARISONS, notebook="13_deepretrieval_sql", tables_dir=tables_dir,
                               health=HEALTH, kinds=("trained", "warm start"),
                               baseline_kinds=("untrained",), extra=[Q.best_sentence(TABLE3)])))
