"""Training engine: config presets, reward wrapper, per-step log, tiny GRPO run + resume."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from qrlib.rl import train as T
from qrlib.rl.checkpoints import prepare_output
from qrlib.rl.trainer import grpo_args, live_groups, splice
from qrlib.core.errors import QrlibError


def test_presets_and_overrides():
    g = T.load_config({"algorithm": "dapo"}).resolved()
    assert (g["loss_type"], g["epsilon_high"], g["beta"]) == ("dapo", 0.28, 0.0)
    g = T.load_config({"algorithm": "grpo", "beta": 0.04, "epsilon": 0.1}).resolved()
    assert (g["loss_type"], g["beta"], g["epsilon"], g["epsilon_high"]) == ("grpo", 0.04, 0.1, None)
    with pytest.raises(QrlibError, match="unknown key 'lr'"):
        T.load_config({"lr": 1})
    with pytest.raises(QrlibError, match="algorithm"):
        T.load_config({"algorithm": "ppo"}).resolved()


class FakeEnv:
    """Reward = number of words of the parsed query; records like RewardEnv's."""

    def __init__(self):
        self.records = []

    def __call__(self, prompts, completions, **cols):
        from qrlib.generation.parsing import parse_completion

        out = []
        for c in completions:
            p = parse_completion(c, "deepretrieval-nothink")
            r = float(len(p.queries[0].split())) if p.ok else -1.0
            self.records.append({"format_ok": p.ok, "part_retrieval": max(r, 0.0), "reward": r,
                                 "call": 7})
            out.append(r)
        return out


def test_timed_reward_prefill_format_and_parts():
    w = T.TimedReward(FakeEnv(), "deepretrieval-nothink", prefill='<answer>{"query": "')
    r = w(["p"] * 3, ['a b"}</answer>', 'a b c"}</answer>', "oops"], qid=["1"] * 3,
          query=["a b", "x", "y"])
    assert r == [2.0, 3.0, -1.0]
    b = w.batches[-1]
    assert b["format_valid"] == pytest.approx(2 / 3)
    assert b["part/retrieval"] == pytest.approx(5 / 3)
    assert "part/call" not in b  # bookkeeping fields are not reward parts
    assert b["qids"] == "1"
    # "a b" copies its query; "a b c" (vs "x") and leniently recovered "oops" (vs "y") differ
    assert b["modified"] == pytest.approx(2 / 3)


def test_prompt_dataset_cycles_queries():
    class Tok:
        def apply_chat_template(self, msgs, tokenize, add_generation_prompt):
            return "|".join(m["content"] for m in msgs)

    ds = T.build_prompts({"a": "qa", "b": "qb"}, Tok(), {"system": "S", "user": "U {query}"},
                         repeat_to=5, prefill="<x>")
    assert len(ds) == 5 and set(ds["qid"]) == {"a", "b"}
    assert all(p.startswith("S|U q") and p.endswith("<x>") for p in ds["prompt"])


def test_cli_rejects_bad_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("max_step: 3\n")
    res = subprocess.run([sys.executable, "-m", "qrlib.rl.train", "--config", str(path)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "unknown key 'max_step'" in res.stderr


def test_sft_target_layouts():
    assert T.sft_target("a b", "deepretrieval-nothink") == '<answer>{"query": "a b"}</answer>'
    assert T.sft_target("a b", "plain") == "a b"


@pytest.mark.slow
def test_sft_warm_start_then_one_grpo_step(tmp_path):
    env = FakeEnv()
    cfg = T.load_config({"name": "sft", "run_dir": str(tmp_path), "model": "smollm2",
                         "fmt": "deepretrieval-nothink", "prefill": '<answer>{"query": "',
                         "prompt": {"user": "Query for: {query}"}, "max_steps": 1,
                         "num_generations": 2, "max_completion_length": 6, "sft_steps": 2,
                         "save_steps": 1})
    s = T.train(cfg, env=env, queries={"1": "vitamin d bone", "2": "aspirin heart"})
    assert s["steps"] == 1
    # SFT leaves gradient checkpointing off on the CPU, so RL's shared-prompt pass runs
    assert s["shared_prompt_passes"] >= 1
    assert (tmp_path / "rl" / "sft" / "adapter" / "adapter_config.json").exists()
    assert len(env.records) == 2


def test_open_engines_close_before_an_sft_cold_start_loads_the_policy(tmp_path, monkeypatch):
    """A cold start's sampling engine held its memory through the SFT (06 peaked at 17 GB):
    train() closes the process's engines before the policy loads, for SFT or vLLM rollouts."""
    calls = []

    class Stop(Exception):
        pass

    def load(*a, **k):
        calls.append("load")
        raise Stop

    monkeypatch.delenv("QRLIB_ROLLOUTS", raising=False)
    monkeypatch.setattr(T.engine, "close_engines", lambda: calls.append("close"))
    monkeypatch.setattr(T, "load_policy", load)
    cfg = {"name": "order", "run_dir": str(tmp_path), "model": "smollm2",
           "fmt": "deepretrieval-nothink", "prompt": {"user": "Query for: {query}"},
           "max_steps": 1, "num_generations": 2, "use_vllm": False}
    for sft_steps, expected in ((2, ["close", "load"]), (0, ["load"])):
        calls.clear()
        with pytest.raises(Stop):
            T.train({**cfg, "sft_steps": sft_steps}, env=FakeEnv(), queries={"1": "a b"})
        assert calls == expected


# --------------------------------------------------------------------------- engine (issue 8/9)
def test_default_prompt_is_registered_and_formats_known():
    from qrlib.generation import prompts

    cfg = T.TrainConfig()
    assert cfg.prompt in prompts.REGISTRY
    assert cfg.completion_format == "deepretrieval"
    assert T.load_config({"prompt": "acqo/decompose"}).completion_format == "acqo"
    assert T.load_config({"prompt": "acqo/decompose", "fmt": "plain"}).completion_format == "plain"


class Tok:
    def apply_chat_template(self, msgs, tokenize, add_generation_prompt):
        return "|".join(m["content"] for m in msgs)


def test_rows_with_any_fields_reach_the_prompt_and_keep_their_columns():
    rows = [{"qid": "a", "question": "q1", "context": "", "db_path": "x.db", "gold_sql": "S"},
            {"qid": "b", "question": "q2", "context": "c", "db_path": "y.db", "gold_sql": "T"}]
    ds = T.build_prompts(rows, Tok(), "acqo/decompose", repeat_to=3)
    assert len(ds) == 3 and set(ds.column_names) >= {"prompt", "qid", "db_path", "gold_sql"}
    by_qid = {r["qid"]: r for r in ds.to_list()}
    assert "q2" in by_qid["b"]["prompt"] and by_qid["b"]["db_path"] == "y.db"


def test_missing_template_field_or_reward_column_is_one_line():
    from qrlib.data.rows import check_rows

    with pytest.raises(QrlibError, match=r"prompt field\(s\) \['context'\]"):
        T.build_prompts([{"qid": "a", "question": "q"}], Tok(), "acqo/decompose")
    with pytest.raises(QrlibError, match=r"reward column\(s\) \['gold_sql'\]"):
        check_rows([{"qid": "a", "db_path": "x"}], columns=("db_path", "gold_sql"))
    with pytest.raises(QrlibError, match="unknown prompt"):
        T.build_prompts([{"qid": "a", "query": "q"}], Tok(), "no/such-prompt")
    with pytest.raises(QrlibError, match="rows 'nope' unknown"):
        T.load_rows(T.load_config({"rows": "nope"}))


def test_spider_rows_split_by_database():
    from qrlib.data import rows as R
    from qrlib.data.datasets import load_spider

    sp = load_spider()
    tr, te = R.rows_from_spider(sp, "train"), R.rows_from_spider(sp, "test")
    assert tr and te and not ({r["db_id"] for r in tr} & {r["db_id"] for r in te})
    assert len(tr) + len(te) == sp.meta["n_usable"]
    assert {"schema", "db_path", "gold_sql", "question"} <= set(tr[0])
    assert "CREATE TABLE" in tr[0]["schema"]


def _fake_checkpoint(d, step, complete=True, marker=False):
    import zipfile

    ck = d / f"checkpoint-{step}"
    ck.mkdir(parents=True)
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    from safetensors.torch import save_file
    import torch

    save_file({"w": torch.zeros(2)}, str(ck / "adapter_model.safetensors"))
    for name in ("optimizer.pt", "scheduler.pt"):
        with zipfile.ZipFile(ck / name, "w") as z:
            z.writestr("data", "x")
    if not complete:  # a kill while writing: the optimizer archive is cut short
        (ck / "optimizer.pt").write_bytes((ck / "optimizer.pt").read_bytes()[:10])
    if marker:
        (ck / T.COMPLETE_MARKER).write_text(str(step))
    return ck


def test_last_checkpoint_skips_and_quarantines_incomplete(tmp_path, capsys):
    _fake_checkpoint(tmp_path, 2)
    _fake_checkpoint(tmp_path, 4, complete=False)
    assert T.last_checkpoint(tmp_path).endswith("checkpoint-2")
    assert "skipping checkpoint-4" in capsys.readouterr().out
    T.last_checkpoint(tmp_path, quarantine=True)
    assert not (tmp_path / "checkpoint-4").exists()
    assert any(p.name.startswith("incomplete-checkpoint-4") for p in tmp_path.iterdir())
    # a truncated weights file is incomplete too, unless our marker says it finished
    ck = _fake_checkpoint(tmp_path, 6)
    (ck / "adapter_model.safetensors").write_bytes(b"\x10\x00")
    assert T.last_checkpoint(tmp_path).endswith("checkpoint-2")
    (ck / T.COMPLETE_MARKER).write_text("6")
    assert T.last_checkpoint(tmp_path).endswith("checkpoint-6")


def test_splice_keeps_groups_and_pads():
    import torch

    g = 2
    a = {"prompt_ids": torch.tensor([[0, 1], [0, 2], [3, 4], [3, 5]]),
         "prompt_mask": torch.ones(4, 2, dtype=torch.long),
         "completion_ids": torch.tensor([[7], [8], [9], [9]]),
         "completion_mask": torch.ones(4, 1, dtype=torch.long),
         "advantages": torch.tensor([0.0, 0.0, 1.0, -1.0]),
         "num_items_in_batch": torch.tensor(4)}
    b = {"prompt_ids": torch.tensor([[6, 6, 6], [6, 6, 6]]),
         "prompt_mask": torch.ones(2, 3, dtype=torch.long),
         "completion_ids": torch.tensor([[1, 2], [3, 4]]),
         "completion_mask": torch.ones(2, 2, dtype=torch.long),
         "advantages": torch.tensor([0.5, -0.5]), "num_items_in_batch": torch.tensor(4)}
    assert live_groups(a["advantages"], g) == [1]
    out = splice([a, b], [(0, 1), (1, 0)], g)
    assert out["prompt_ids"].tolist() == [[0, 3, 4], [0, 3, 5], [6, 6, 6], [6, 6, 6]]
    assert out["prompt_mask"].tolist()[0] == [0, 1, 1]            # left padding
    assert out["completion_mask"].tolist()[0] == [1, 0]           # right padding
    assert out["advantages"].tolist() == [1.0, -1.0, 0.5, -0.5]
    assert int(out["num_items_in_batch"]) == 2 + 4


def _cli(cfg_path, *extra, timeout=900):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "qrlib.rl.train", "--config", str(cfg_path),
                           *extra], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.slow
def test_cli_trains_acqo_decompose_on_2wiki_then_never_overruns(tmp_path):
    """The trainer's command line end to end: train, a finished run left alone, a resume past
    a half-written checkpoint, and the per-step log (also the CLI's resume test)."""
    cfg = {"name": "acqo", "run_dir": str(tmp_path), "model": "smollm2",
           "dataset": "2wikimultihopqa-mini", "split": "train", "n_queries": 6,
           "n_distractors": 40, "retriever": "bm25", "prompt": "acqo/decompose",
           "prefill": '{"query": "', "reward": "acqo_stage1", "algorithm": "dapo",
           "reward_params": {"lenient": True}, "max_steps": 2, "num_generations": 2,
           "max_completion_length": 8, "save_steps": 1, "dynamic_sampling": 1,
           "temperature": 1.5}
    path = tmp_path / "acqo.yaml"
    path.write_text(json.dumps(cfg))
    first = _cli(path)
    assert first.returncode == 0, first.stderr[-2000:]
    out = tmp_path / "rl" / "acqo"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["dynamic_sampling"]["steps"] == 2
    saved = json.loads((out / "config.json").read_text())
    assert saved["prompt"] == "acqo/decompose" and saved["rows_fingerprint"]
    n_samples = len((out / "samples.jsonl").read_text().splitlines())
    assert n_samples > 0
    adapter = out / "adapter" / "adapter_model.safetensors"
    mtime = adapter.stat().st_mtime_ns
    # rerunning a finished training trains nothing (more queries than steps x prompts)
    again = _cli(path)
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert adapter.stat().st_mtime_ns == mtime
    # a kill while writing checkpoint-3 leaves it incomplete: the next run resumes from 2
    (out / "summary.json").unlink()
    bad = out / "checkpoint-3"
    bad.mkdir()
    (bad / "trainer_state.json").write_text('{"global_st')
    third = _cli(path, "--set", "max_steps=3")
    assert third.returncode == 0, third.stderr[-2000:]
    assert "resuming from checkpoint-2" in third.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["resumed_from"].endswith("checkpoint-2")
    assert summary["shared_prompt_passes"] >= 1  # the group's prompt ran once (sharedprefix)
    with open(out / "log.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["step"]) for r in rows] == [1, 2, 3]
    for col in ("reward", "reward_std", "frac_reward_zero_std", "format_valid",
                "completion_length", "step_seconds"):  # (no kl: DAPO's beta is 0)
        assert rows[-1][col] != "", col
    assert float(rows[-1]["completion_length"]) <= 8
    # memory per step: a 135M policy in fp32 holds more than half a GiB, the peak >= now
    rss, peak = float(rows[-1]["rss_gib"]), float(rows[-1]["peak_rss_gib"])
    assert 0.5 < rss <= peak + 0.01
    # the RL default schedule is constant: every step trains at the configured rate
    assert {float(r["learning_rate"]) for r in rows} == {T.TrainConfig().learning_rate}
    steps = [json.loads(line)["step"] for line in (out / "samples.jsonl").read_text().splitlines()]
    assert steps == sorted(steps) and set(steps) == {1, 2, 3}
    # (another dataset cut is another run, moved aside and never resumed: the same
    # prepare_output path, tested in process by test_run_folder_with_other_rows_is_moved_aside_not_resumed)


def test_config_with_spider_rows_gives_sql_rows_and_an_execution_reward(tmp_path):
    """What the trainer builds for ``rows: spider`` (the command line's path; notebook 13
    passes its rows itself, and its smoke run takes the RL step on them): rows with schema,
    database and gold SQL that the reward's columns accept, and the execution reward."""
    from qrlib.rl.rows import build_env, load_rows

    cfg = T.load_config({"name": "sql", "run_dir": str(tmp_path), "model": "smollm2",
                         "rows": "spider", "split": "train", "n_queries": 4,
                         "prompt": "deepretrieval/sql-nothink",
                         "prefill": '<answer>{"query": "SELECT', "reward": "deepretrieval_sql",
                         "reward_params": {"lenient": True}, "algorithm": "dapo"})
    rows, ds = load_rows(cfg)
    assert ds is None and len(rows) == 4 and all(r["schema"] and r["gold_sql"] for r in rows)
    env = build_env(cfg, ds)
    assert env.missing_columns(list(rows[0])) == []
    cols = {c: [r[c] for r in rows] for c in rows[0]}
    answer = '<answer>{{"query": {}}}</answer>'.format
    assert env(completions=[answer(json.dumps(r["gold_sql"])) for r in rows], **cols) == [1.0] * 4
    assert env(completions=[answer('"SELECT 1"')] * 4, **cols) == [0.0] * 4
    assert env(completions=[answer('"DROP TABLE t"')] * 4, **cols) == [0.0] * 4  # read-only
    assert env(completions=["no answer"] * 4, **cols) == [-1.0] * 4  # format penalty


def test_run_folder_with_other_rows_is_moved_aside_not_resumed(tmp_path, capsys):
    """Notebook 05 passes its own env and queries: a different query cut must still count
    as another run (it used to be resumed, reusing an adapter trained on other queries)."""
    cfg = T.load_config({"name": "r", "run_dir": str(tmp_path)})
    base = json.loads(json.dumps(__import__("dataclasses").asdict(cfg), default=str))
    prepare_output(cfg, {**base, "rows_fingerprint": "aaa", "env": "E"})
    (cfg.output_dir / "config.json").write_text(json.dumps({**base, "rows_fingerprint": "aaa",
                                                            "env": "E"}))
    (cfg.output_dir / "checkpoint-1").mkdir()
    prepare_output(cfg, {**base, "rows_fingerprint": "aaa", "env": "E", "max_steps": 99})
    assert (cfg.output_dir / "checkpoint-1").exists()  # only the step budget changed: resume
    prepare_output(cfg, {**base, "rows_fingerprint": "bbb", "env": "E"})
    assert not (cfg.output_dir / "checkpoint-1").exists()
    assert "rows_fingerprint" in capsys.readouterr().out
    assert any(p.name.startswith("r.stale-") for p in tmp_path.joinpath("rl").iterdir())


def test_second_trainer_on_the_same_run_is_refused(tmp_path):
    from qrlib.workbook import run_lock

    cfg = T.load_config({"name": "busy", "run_dir": str(tmp_path)})
    with run_lock(tmp_path / "rl" / ".locks" / "busy", what="qrlib.rl.train"):
        with pytest.raises(QrlibError, match=r"in use by PID \d+ \(`qrlib.rl.train`"):
            T.train(cfg, env=FakeEnv(), queries={"1": "a"})


def test_config_types_are_checked_in_one_line():
    with pytest.raises(QrlibError, match=r"learning_rate must be float like its default 1e-05, "
                                         r"got '5e-5' \(YAML reads 5e-5 as text"):
        T.load_config({"learning_rate": "5e-5"})
    with pytest.raises(QrlibError, match="max_steps must be int"):
        T.load_config({"max_steps": 2.5})
    assert T.load_config({"learning_rate": 1}).learning_rate == 1


def test_grpo_args_carry_the_schedule_and_sampling_knobs(tmp_path):
    cfg = T.load_config({"run_dir": str(tmp_path), "top_k": 20, "min_p": 0.05,
                         "mask_truncated_completions": True})
    args = grpo_args(cfg, batch=8, cuda=False, dtype="float32")
    assert getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type) == "constant"
    assert args.top_k == 20 and args.min_p == 0.05
    # TRL's own mask stays off: qrlib masks with its truncation test, which keeps rollouts
    # that ended at a stop string (QrlibGRPOTrainer.qrlib_mask_truncated, set by train())
    assert not args.mask_truncated_completions
    linear = grpo_args(T.load_config({"run_dir": str(tmp_path), "lr_scheduler_type": "linear"}),
                        batch=8, cuda=False, dtype="float32")
    assert getattr(linear.lr_scheduler_type, "value", linear.lr_scheduler_type) == "linear"


@pytest.mark.slow
def test_vllm_rollouts_on_the_cpu_push_weights_every_step(tmp_path):
    """TRL colocate rollouts through the in-process CPU engine (issue 23): the run trains,
    its summary says vLLM generated, and the policy was pushed before every step after the
    first (TRL syncs when the step counter moved)."""
    cfg = {"name": "vl", "run_dir": str(tmp_path), "model": "smollm2", "dataset": "scifact",
           "split": "train", "n_queries": 2, "n_distractors": 20, "retriever": "bm25",
           "fmt": "deepretrieval-nothink", "prefill": '<answer>{"query": "',
           "prompt": {"user": "Search query for: {query}"}, "max_steps": 3,
           "num_generations": 4, "max_completion_length": 12, "save_steps": 10,
           "use_vllm": True, "stop": ['"}'], "learning_rate": 1.0e-3,
           "reward_params": {"k": 10, "lenient": True}}
    path = tmp_path / "cfg.yaml"
    path.write_text(json.dumps(cfg))
    env = {k: v for k, v in os.environ.items() if k != "QRLIB_ROLLOUTS"}
    env["HF_HUB_OFFLINE"] = "1"
    res = subprocess.run([sys.executable, "-m", "qrlib.rl.train", "--config", str(path)],
                         capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads((tmp_path / "rl" / "vl" / "summary.json").read_text())
    assert summary["rollouts_backend"] == "vllm" and summary["steps"] == 3
    assert summary["weight_pushes"] >= 2
    with open(tmp_path / "rl" / "vl" / "log.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 and all(float(r["completion_length"]) <= 12 for r in rows)
    # stop strings end rollouts at the closing quote-brace
    samples = [json.loads(x) for x in (tmp_path / "rl" / "vl" / "samples.jsonl").read_text()
               .splitlines()]
    assert samples and all(s["completion"].count('"}') <= 1 for s in samples)


def test_vllm_asked_where_it_does_not_import_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    monkeypatch.delenv("QRLIB_ROLLOUTS", raising=False)
    cfg = T.load_config({"run_dir": str(tmp_path), "use_vllm": True})
    with pytest.raises(QrlibError, match="QRLIB_ROLLOUTS=hf"):
        grpo_args(cfg, batch=8, cuda=False, dtype="float32")
    monkeypatch.setenv("QRLIB_ROLLOUTS", "hf")
    assert not grpo_args(cfg, batch=8, cuda=False, dtype="float32").use_vllm


def test_row_prefill_fills_columns_json_escaped_and_reaches_the_reward():
    assert T.fill_prefill('{"query": "{question}%%', {"question": 'say "hi"'}) == \
        '{"query": "say \\"hi\\"%%'
    assert T.fill_prefill('{"query": "', {"question": "x"}) == '{"query": "'
    assert T.fill_prefill("{nope} {question}", {"question": "q"}) == "{nope} q"

    class Env:
        records: list = []

        def __call__(self, prompts, completions, **cols):
            self.seen = completions
            return [0.0] * len(completions)

    env = Env()
    r = T.TimedReward(env, "acqo", '{"query": "{question}%%')
    r(["p", "p"], ['b"}', '"}'], question=["a", "c"], qid=["1", "2"])
    assert env.seen == ['{"query": "a%%b"}', '{"query": "c%%"}']


# --------------------------------------------------------------------------- GPU path (issue 43)
def test_micro_batches_divide_the_step_and_default_by_device():
    from qrlib.rl.config import CUDA_MICRO_BATCH, micro_batch

    cfg = T.load_config({"prompts_per_step": 32, "num_generations": 8})
    # the CPU bounds the completion tokens of one pass (CPU_MICRO_TOKENS): 1024 // 48 = 21
    assert micro_batch(cfg, cuda=False) == (16, 16)
    assert micro_batch(T.load_config({"prompts_per_step": 2, "num_generations": 8,
                                      "max_completion_length": 64}), cuda=False) == (16, 1)
    assert micro_batch(T.load_config({"prompts_per_step": 2, "num_generations": 8,
                                      "max_completion_length": 128}), cuda=False) == (8, 2)
    assert micro_batch(T.load_config({"prompts_per_step": 2, "num_generations": 8,
                                      "max_completion_length": 384}), cuda=False) == (2, 8)
    assert micro_batch(T.load_config({"prompts_per_step": 1, "num_generations": 3,
                                      "max_completion_length": 4096}), cuda=False) == (1, 3)
    assert micro_batch(cfg, cuda=True) == (CUDA_MICRO_BATCH, 256 // CUDA_MICRO_BATCH)
    assert micro_batch(T.load_config({"prompts_per_step": 3, "num_generations": 8}),
                       cuda=True) == (12, 2)  # the largest divisor of 24 up to 16
    assert micro_batch(T.load_config({"prompts_per_step": 2, "num_generations": 8,
                                      "micro_batch_size": 4}), cuda=False) == (4, 4)
    with pytest.raises(QrlibError, match="must divide the step's batch of 16"):
        micro_batch(T.load_config({"prompts_per_step": 2, "num_generations": 8,
                                   "micro_batch_size": 5}), cuda=False)


def test_grpo_args_accumulate_micro_batches_and_size_the_context(tmp_path):
    from qrlib.rl.trainer import context_length

    cfg = T.load_config({"run_dir": str(tmp_path), "prompts_per_step": 2,
                         "num_generations": 4, "micro_batch_size": 2, "stop": ['"}'],
                         "max_completion_length": 512})
    a = grpo_args(cfg, 8, False, "float32")
    assert (a.per_device_train_batch_size, a.gradient_accumulation_steps) == (2, 4)
    assert a.steps_per_generation == 4 and a.generation_batch_size == 8  # one generation/step
    assert a.generation_kwargs == {"stop_strings": ['"}']}  # the HF path gets the stops too
    assert context_length(cfg, 1700) == 2304  # 1,700 + 512 rounded up to 256
    assert context_length(cfg, None) == 2048
    assert context_length(T.load_config({"vllm_max_model_length": 4096}), 9999) == 4096


class StopEnv(FakeEnv):
    def __init__(self):
        super().__init__()
        self.completions = []

    def __call__(self, prompts, completions, **cols):
        self.completions += list(completions)
        return super().__call__(prompts, completions, **cols)


@pytest.mark.slow
def test_hf_rollouts_end_at_stop_strings_in_micro_batches(tmp_path, monkeypatch):
    """TRL's HF path with stop strings (the tokenizer reaches generate) and a step of two
    groups trained in four micro-batches with gradient accumulation, each micro-batch
    within one group (TRL's row shuffle would mix the groups: all eight micro-batches
    pure by chance with probability (3/7)^8)."""
    monkeypatch.setenv("QRLIB_ROLLOUTS", "hf")
    env = StopEnv()
    cfg = T.load_config({"name": "stops", "run_dir": str(tmp_path), "model": "smollm2",
                         "fmt": "deepretrieval-nothink", "prefill": '<answer>{"query": "',
                         "prompt": {"user": "Query for: {query}"}, "max_steps": 2,
                         "num_generations": 4, "prompts_per_step": 2, "micro_batch_size": 2,
                         "max_completion_length": 24, "temperature": 1.0, "stop": [" "],
                         "save_steps": 5})
    s = T.train(cfg, env=env, queries={"1": "vitamin d bone", "2": "aspirin heart"})
    assert s["steps"] == 2 and len(env.completions) == 16
    assert s["prompts_per_pass"] == 1.0 and s["shared_prompt_passes"] >= 8
    from qrlib.generation.contract import DecodingContract

    # the adapter carries the run's decoding contract for its test decoding
    assert DecodingContract.load(s["adapter"]) == DecodingContract.of(cfg)
    # the reward sees prefill + completion; every completion ends at its first space
    # (kept), or has none and ran to the budget
    prefill = '<answer>{"query": "'
    gen = [c[len(prefill):] for c in env.completions]
    assert all(c.startswith(prefill) for c in env.completions)
    for c in gen:
        assert " " not in c[:-1], repr(c)
    assert sum(c.endswith(" ") for c in gen) >= 4


# --------------------------------------------------------------------------- truncation (issue 41)
def test_truncated_means_budget_used_and_no_stop():
    from qrlib.rl.steplog import is_truncated

    assert is_truncated(8, "abc", 8) and not is_truncated(7, "abc", 8)
    assert not is_truncated(8, 'q"}', 8, ['"}'])  # ended at its stop string on the last token
    assert is_truncated(9, 'q"} more', 8, ['"}'])
    w = T.TimedReward(FakeEnv(), "deepretrieval-nothink", prefill='<answer>{"query": "',
                      stop=['"}'], budget=4)
    w(["p"] * 3, ['a"}</answer>', "a b c d", 'a b"}'], qid=["1"] * 3, query=["x"] * 3,
      completion_ids=[[1, 2], [1, 2, 3, 4], [1, 2, 3, 4]])
    assert w.last_truncated == [False, True, False]
    assert w.batches[-1]["truncated"] == pytest.approx(1 / 3)


class LenEnv:
    """Reward = characters of the completion (spread within every group)."""

    def __call__(self, prompts, completions, **cols):
        return [float(len(c)) for c in completions]


@pytest.mark.slow
def test_masked_truncated_rollouts_give_no_update(tmp_path, monkeypatch):
    """Every rollout of a 3-token budget is cut off: with the mask on nothing is learned
    (KL stays 0), with it off the policy moves."""
    monkeypatch.setenv("QRLIB_ROLLOUTS", "hf")
    kl = {}
    for mask in (True, False):
        cfg = T.load_config({"name": f"mask-{mask}", "run_dir": str(tmp_path),
                             "model": "smollm2", "fmt": "plain",
                             "prompt": {"user": "Rewrite: {query}"}, "max_steps": 2,
                             "num_generations": 4, "max_completion_length": 3,
                             "learning_rate": 1e-3, "temperature": 1.0, "save_steps": 5,
                             "mask_truncated_completions": mask})
        T.train(cfg, env=LenEnv(), queries={"1": "vitamin d bone", "2": "aspirin heart"})
        with open(tmp_path / "rl" / f"mask-{mask}" / "log.csv") as fh:
            rows = list(csv.DictReader(fh))
        assert all(float(r["truncated"]) == 1.0 for r in rows)
        kl[mask] = float(rows[-1]["kl"])
    assert kl[True] == 0.0 and kl[False] > 0.0, kl
