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

import matplotlib.pyplot as plt
import pandas as pd

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.data import datasets as qdata
from qrlib.data import rows as qrows
from qrlib.eval import published
from qrlib.eval.compare import compare, comparison_table
from qrlib.eval.scale import SCALE_COLUMNS, fmt_scale, log_scale, scale_columns
from qrlib.generation import engine, policy, prompts
from qrlib.methods.deepretrieval import sql_task
from qrlib.rl.coldstart import rl_after_sft
from qrlib.rl.env import RewardEnv
from qrlib.generation.contract import DecodingContract
from qrlib.rl.train import load_config, train

# %% [markdown]
# ## 1. Questions, databases and the split

# %%
SPIDER = qdata.load_spider(data_dir)
LEVELS = sql_task.spider_levels(Path(SPIDER.meta["source"]) / "dev.json")
ALL_TRAIN = qrows.rows_from_spider(SPIDER, "train", test_fraction=test_fraction)
ALL_TEST = qrows.rows_from_spider(SPIDER, "test", test_fraction=test_fraction)
TRAIN_ROWS = sql_task.sample_questions(ALL_TRAIN, n_train_queries, seed=seed)
TEST_ROWS = sql_task.sample_questions(ALL_TEST, n_test_queries, seed=seed)
SPLIT = pd.DataFrame([{"part": part, "databases": len({r["db_id"] for r in rs}),
                       "questions": len(rs), "used": len(used),
                       **{lv: sum(LEVELS[r["qid"]] == lv for r in used) for lv in sql_task.LEVELS}}
                      for part, rs, used in (("train", ALL_TRAIN, TRAIN_ROWS),
                                             ("test", ALL_TEST, TEST_ROWS))])
save_table(SPLIT, "13_split", tables_dir,
           caption=f"Spider dev split by database (test_fraction={test_fraction}; no database in "
                   f"both); skipped for a missing database: {SPIDER.skipped}; hardness levels of "
                   "the questions used")
print("test databases:", sorted({r["db_id"] for r in ALL_TEST}))
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

# %%
RUNS = {"RL from scratch": dict(run="scratch", sft_steps=0, rows=TRAIN_ROWS, prompt=rl_prompt,
                                prefill=prefill),
        "RL after SFT": dict(run="coldstart", sft_steps=sft_steps, prompt=rl_prompt,
                             prefill=prefill, rows=sql_task.gold_targets(TRAIN_ROWS, rl_prompt)),
        "RL from scratch (think)": dict(run="think", sft_steps=0, rows=TRAIN_ROWS,
                                        prompt=think_prompt,
                                        prefill=prompts.get(think_prompt).meta["prefill"])}
unknown = sorted(set(rl_runs) - {v["run"] for v in RUNS.values()})
assert not unknown, f"unknown rl_runs {unknown}; accepted: scratch, coldstart, think"


def run_contract(spec):
    """The decoding contract of a run (prompt, prefill, stop, budget, parser): its rollouts
    and its test queries decode with it, and so does a zero-shot row with its prompt."""
    long = spec["run"] == "think"  # reasoning needs a longer budget
    return DecodingContract(prompt=spec["prompt"], prefill=spec["prefill"], stop=("</answer>",),
                            max_new_tokens=think_max_completion_length if long
                            else max_completion_length,
                            fmt=prompts.get(spec["prompt"]).meta["fmt"])


CONTRACTS = {spec["prompt"]: run_contract(spec) for spec in RUNS.values()
             if spec["sft_steps"] == 0}  # one per prompt: the scratch and think runs'
RUNS = {k: v for k, v in RUNS.items() if v["run"] in rl_runs}
SUMMARIES = {}
for label, spec in RUNS.items():
    env = RewardEnv(None, {}, reward="deepretrieval_sql",
                    fmt=prompts.get(spec["prompt"]).meta["fmt"],
                    think_prefilled=spec["prefill"].endswith("<think>"),
                    preset=None if reward_preset == "paper" else reward_preset,
                    sql_timeout_s=sql_timeout_s,
                    **({"exec_bonus": exec_bonus} if exec_bonus else {}))
    c = run_contract(spec)
    cfg = load_config(dict(
        name=f"sql-{spec['run']}", run_dir=str(run_dir), model=model, prompt=c.prompt,
        prefill=c.prefill, reward="deepretrieval_sql", algorithm="dapo",
        max_steps=train_steps, sft_steps=spec["sft_steps"], sft_learning_rate=sft_learning_rate,
        prompts_per_step=prompts_per_step, num_generations=num_generations,
        max_completion_length=c.max_new_tokens, temperature=temperature, top_p=top_p,
        learning_rate=learning_rate, lora_r=lora_r, lora_alpha=2 * lora_r,
        dynamic_sampling=dynamic_sampling, stop=list(c.stop),
        save_steps=max(1, train_steps // 4), seed=seed))
    fit = rl_after_sft if spec["sft_steps"] else train  # SFT checkpointed, then GRPO
    SUMMARIES[label] = s = fit(cfg, env=env, rows=spec["rows"])
    print(label, {k: s[k] for k in ("steps", "train_seconds", "rollouts")})
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
fig, axes = plt.subplots(1, 3, figsize=(14, 3.4))
for i, (label, log) in enumerate(LOGS.items()):
    for ax, col in zip(axes, ("reward", "format_valid", "completion_length")):
        ax.plot(log.step, log[col].rolling(8, min_periods=1).mean(), color=f"C{i}", label=label)
axes[0].set(xlabel="training step", ylabel="reward (rolling mean of 8)")
axes[1].set(xlabel="training step", ylabel="format-valid rollouts", ylim=(-0.05, 1.05))
axes[2].set(xlabel="training step", ylabel="completion tokens (reasoning + SQL)")
for ax in axes:
    plots.legend_outside(ax, where="below")
fig.tight_layout()
_ = plots.save_figure(fig, "13_sql_curves", figures_dir, profile=profile,
                  caption="SQL RL runs: reward and format validity per step",
                  setting=f"{model}; from the logs: "
                          + "; ".join(f"{k} {fmt_scale(log_scale(lg))}" for k, lg in LOGS.items()))

# %% [markdown]
# ## 3. The test: every row on the same test questions
#
# Greedy decoding with the decoding contract of training (prompt, prefill, stop strings,
# budget, parser); the statement is parsed as the reward parses it and run in the sandbox.
# Execution accuracy is the share of questions whose result equals the gold query's.

# %%
# every row decodes with a training run's contract: a trained adapter with its own
# (`decoding.json`), a zero-shot row with the contract of the run trained with its prompt
MODELS = {f"zero-shot ({p.split('-')[-1]})": (None, CONTRACTS[p]) for p in zero_shot_prompts}
if "RL after SFT" in SUMMARIES:
    a = SUMMARIES["RL after SFT"].get("sft_adapter")
    MODELS["SFT on gold (nothink)"] = (a, a)
for label, s in SUMMARIES.items():
    MODELS[label] = (s["adapter"], s["adapter"])
GEN, SCORES = {}, {}
for label, (adapter, contract) in MODELS.items():
    if label.startswith("SFT") and adapter is None:
        continue  # sft_steps == 0
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
# bootstrap over the test questions; the `qrlib.eval.compare` schema).

# %%
SFT_SCALE = dict(sft_steps=sft_steps, sft_queries=len(TRAIN_ROWS))
SCALE = {label: scale_columns(model, [log], test_queries=len(TEST_ROWS),
                              test_valid=GEN[label].format_ok.mean(),
                              **(SFT_SCALE if RUNS[label]["sft_steps"] else {}))
         for label, log in LOGS.items()}
SCALE["SFT on gold (nothink)"] = scale_columns(
    model, test_queries=len(TEST_ROWS), test_valid=GEN["SFT on gold (nothink)"].format_ok.mean(),
    **SFT_SCALE)
for label in GEN:  # untrained rows: no training, their own test validity
    SCALE.setdefault(label, scale_columns(model, test_queries=len(TEST_ROWS),
                                          test_valid=GEN[label].format_ok.mean()))
rows = []
for label, sc in SCORES.items():
    acc = sql_task.accuracy_by_level(sc, LEVELS)
    rows.append({"model": label, "execution accuracy": acc["all"],
                 **{lv: acc.get(lv, float("nan")) for lv in sql_task.LEVELS},
                 "ran": sc.executed.mean(), "well-formed": GEN[label].format_ok.mean(),
                 "gen tokens": GEN[label].gen_tokens.mean(),
                 "think words": GEN[label].think_words.mean(),
                 **SCALE[label]})
TABLE3 = pd.DataFrame(rows)
save_table(TABLE3.round(4), "13_sql_results", tables_dir,
           caption=f"SQL database search on Spider dev's test databases ({len(TEST_ROWS)} "
                   "questions): execution accuracy overall and per Spider hardness level; "
                   f"training scale ({', '.join(SCALE_COLUMNS)}) from the runs' logs")
BASE = "zero-shot (nothink)"
cmp_rows = []
for label, sc in SCORES.items():
    if label == BASE or BASE not in SCORES:
        continue
    trained = label.startswith(("RL", "SFT"))
    cmp_rows.append(compare(
        dict(zip(sc.qid, sc.exec_match.astype(float))),
        dict(zip(SCORES[BASE].qid, SCORES[BASE].exec_match.astype(float))),
        paper="deepretrieval", dataset="spider-dev (test databases)", retriever="sqlite",
        metric="execution accuracy", method=label,
        kind="trained" if label.startswith("RL") else "warm start" if trained else "untrained",
        baseline=BASE, baseline_kind="untrained",
        scale=SCALE[label],
        resamples=bootstrap, seed=seed))
COMPARISONS = comparison_table(cmp_rows)
save_table(COMPARISONS.round(4), "13_comparisons", tables_dir,
           caption="Each row minus the zero-shot model without reasoning, execution accuracy, "
                   "95% paired bootstrap over the test questions (qrlib.eval.compare schema)")
for _, r in TABLE3.iterrows():
    record(f"sql.{r.model}.exec_acc", r["execution accuracy"])
for _, r in COMPARISONS.iterrows():
    record(f"sql.{r.method} minus {r.baseline}", [r["diff"], r.lo, r.hi])
TABLE3.round(3)

# %% [markdown]
# The paper's Table 3 (execution accuracy in %, Spider dev and BIRD dev, 3B-7B policies;
# from `qrlib/methods/deepretrieval/published.yaml`):

# %%
published.table("deepretrieval", "Table 3")

# %% [markdown]
# ## 5. Examples

# %%
ex = []
for label in ("zero-shot (nothink)", "RL after SFT"):
    if label in GEN:
        g = GEN[label].set_index("qid")
        s = SCORES[label].set_index("qid")
        for r in TEST_ROWS[:n_examples]:
            ex.append({"model": label, "question": r["question"], "generated": g.loc[r["qid"], "sql"],
                       "match": bool(s.loc[r["qid"], "exec_match"]), "gold": r["gold_sql"]})
pd.set_option("display.max_colwidth", 120)
pd.DataFrame(ex)

# %% [markdown]
# ## What we found
#
# Built from `13_comparisons`, `13_sql_results` and `13_health` of this run by
# `qrlib.workbook.findings` (the baseline here is the zero-shot model without reasoning):

# %%
from IPython.display import Markdown

from qrlib.workbook.findings import what_we_found

best = TABLE3.loc[TABLE3["execution accuracy"].idxmax()]
extra = [f"The highest execution accuracy is {best['execution accuracy']:.3f} ({best.model}; "
         f"{best.ran:.0%} of its statements ran)."]
display(Markdown(what_we_found(COMPARISONS, notebook="13_deepretrieval_sql", tables_dir=tables_dir,
                               health=HEALTH, kinds=("trained", "warm start"),
                               baseline_kinds=("untrained",), extra=extra)))
