"""Reward timing and the per-step log of an RL run, and the trainer's output kept quiet.

* :class:`TimedReward` -- wraps a TRL reward callable: times it, parse-checks every
  completion and keeps the per-batch aggregates (format-valid rate, modification rate,
  per-part rewards);
* :class:`StepLogger` -- a transformers ``TrainerCallback`` appending one row per step to
  ``log.csv`` (TRL's GRPO metrics plus those aggregates) and a few completions per step to
  ``samples.jsonl``;
* :class:`GenTimer` -- wall time of the trainer's generation calls, for the step breakdown;
* :func:`quiet_progress` and :func:`warnings_to` -- transformers' per-step printers removed,
  and Python warnings and library log messages sent to a file while training;
* :func:`trainer_callback_base` -- transformers' ``TrainerCallback`` (the base class of the
  callbacks here and in :mod:`qrlib.rl.checkpoints`).
"""
from __future__ import annotations

import contextlib
import csv
import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from qrlib.core.io import atomic_path, atomic_write
from qrlib.generation.parsing import completion_text, parse_completion
from qrlib.generation.policy import cut_at_stop
from qrlib.rl.health import echo_of
from qrlib.rl.release import memory_gib, release_free_heap
from qrlib.rl.rewards import same_query

#: Set by :func:`qrlib.session.start` to the notebook's run log: per-step lines go there.
RUN_LOG_VAR = "QRLIB_RUN_LOG"
from qrlib.rl.rows import fill_prefill

__all__ = ["TimedReward", "StepLogger", "copies_query", "is_truncated", "GenTimer", "quiet_progress",
           "warnings_to", "trainer_callback_base"]


# --------------------------------------------------------------------------- reward wrapper
def is_truncated(n_tokens: int, text: str, budget: int, stop: Sequence[str] = ()) -> bool:
    """Whether a rollout was cut off by the token budget: it used all ``budget`` tokens and
    does not end at a stop string. (TRL's own test, "the last token is not EOS", calls every
    rollout that ended at a vLLM stop string truncated, so its ``mask_truncated_completions``
    would drop all of them.)"""
    return n_tokens >= budget and not any(s and text.endswith(s) for s in stop)


class TimedReward:
    """Wrap a TRL reward callable: time it, parse-check every completion, and keep the
    per-batch aggregates that :class:`StepLogger` writes (per-part rewards come from the
    numeric fields of ``env.records`` added during the batch)."""

    def __init__(self, env: Callable[..., list[float]], fmt: str, prefill: str = "",
                 stop: Sequence[str] = (), budget: int | None = None,
                 examples: frozenset[str] = frozenset()) -> None:
        self.env = env
        self.examples = examples  # the prompt's own examples (qrlib.rl.health.echo_of)
        self.prefill = prefill
        # rollouts are cut after their first stop string, as vLLM cuts them: transformers
        # stops only after the token that completes it, which may carry more text
        self.stop = list(stop)
        self.budget = budget  # max_completion_length: a rollout that used it all was cut off
        self.last_truncated: list[bool] | None = None  # of the last batch, in its order
        self.fmt = fmt
        self.seconds = 0.0
        self.calls = 0
        self.batches: list[dict[str, float]] = []
        self.samples: list[dict[str, Any]] = []
        self.__name__ = getattr(env, "__name__", type(env).__name__)

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
        t0 = time.perf_counter()
        pre = [self.prefill] * len(completions)
        if "{" in self.prefill:  # row placeholders: fill them from this row's columns
            keys = [k for k in columns if isinstance(columns[k], list)
                    and len(columns[k]) == len(completions)]
            pre = [fill_prefill(self.prefill, {k: columns[k][i] for k in keys})
                   for i in range(len(completions))]
        gen = [completion_text(c) for c in completions]
        if self.stop:
            gen = [cut_at_stop(g, self.stop) for g in gen]
        ids = columns.get("completion_ids")
        self.last_truncated = None
        if self.budget and ids is not None and len(ids) == len(gen):
            self.last_truncated = [is_truncated(len(i), g, self.budget, self.stop)
                                   for i, g in zip(ids, gen)]
        texts = [p + g for p, g in zip(pre, gen)]
        if self.prefill:  # the env must parse what the model's answer really was
            completions = texts
        elif self.stop:
            completions = gen
        parsed = [parse_completion(t, self.fmt) for t in texts]
        loose = [p if p.ok else parse_completion(t, self.fmt, lenient=True)
                 for p, t in zip(parsed, texts)]
        n_before = len(getattr(self.env, "records", []) or [])
        rewards = list(self.env(prompts, completions, **columns))
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        new = (getattr(self.env, "records", []) or [])[n_before:]
        oks = [r["format_ok"] for r in new if isinstance(r, dict) and "format_ok" in r]
        if len(oks) != len(parsed):  # env without records: our own strict parse
            oks = [p.ok for p in parsed]
        agg: dict[str, float] = {
            "n": len(texts),
            "format_valid": sum(map(bool, oks)) / max(len(oks), 1),
            **({"truncated": sum(self.last_truncated) / max(len(self.last_truncated), 1)}
               if self.last_truncated is not None else {}),
            "reward_seconds": time.perf_counter() - t0,
        }
        parts: dict[str, list[float]] = {}
        for rec in new:
            items = rec.items() if isinstance(rec, dict) else vars(rec).items()
            for k, v in items:
                if not k.startswith(("part_", "ndcg@", "recall@")):
                    continue
                if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                    parts.setdefault(k.removeprefix("part_"), []).append(float(v))
        for k, vs in parts.items():
            agg[f"part/{k}"] = sum(vs) / len(vs)
        originals = columns.get("query") or [None] * len(texts)
        rw = [list(p.queries) if p.queries else None for p in loose]
        agg["modified"] = (sum(1 for r, o in zip(rw, originals) if r is not None and o is not None
                               and not copies_query(r, str(o)))
                           / max(sum(r is not None for r in rw), 1))
        n = max(len(texts), 1)
        agg["copy"] = sum(1 for r, o in zip(rw, originals) if r is not None and o is not None
                          and copies_query(r, str(o))) / n
        agg["echo"] = sum(echo_of(p, self.examples) for p in loose) / n
        agg["qids"] = ";".join(dict.fromkeys(str(q) for q in (columns.get("qid") or [])))
        self.batches.append(agg)
        for t, p, r, o in zip(texts, parsed, rewards, originals):  # every rollout
            self.samples.append({"query": o, "completion": t, "ok": p.ok, "reward": r})
        return rewards


def copies_query(queries: Sequence[str], original: str) -> bool:
    """Whether an output searches with nothing but the input query: it has queries and every
    one equals ``original`` (:func:`qrlib.rl.rewards.same_query`, SAGE Eq. 3's test). A
    multi-query output that keeps the question beside new sub-queries (ACQO's "question +
    sub-queries") is not a copy."""
    return bool(queries) and all(same_query(q, original) for q in queries)


# --------------------------------------------------------------------------- step log
def trainer_callback_base() -> type:
    """transformers' ``TrainerCallback`` (imported when the callback classes are defined)."""
    from transformers import TrainerCallback

    return TrainerCallback


class StepLogger(trainer_callback_base()):  # type: ignore[misc]
    """Append one CSV row per optimisation step: TRL's GRPO metrics (reward mean/std,
    per-function reward, frac_reward_zero_std, completion length, KL, entropy, clip
    ratios) plus format-valid rate, modification rate, per-part rewards and step time."""

    COLUMNS = ["step", "reward", "reward_std", "frac_reward_zero_std", "format_valid",
               "modified", "copy", "echo", "truncated", "completion_length", "kl", "entropy", "loss",
               "step_seconds", "reward_seconds", "generation_seconds", "rss_gib",
               "peak_rss_gib", "qids"]

    def __init__(self, path: str | os.PathLike, reward: TimedReward,
                 timer: dict[str, float] | None = None, *,
                 samples_path: str | os.PathLike | None = None, resumed_step: int = 0) -> None:
        self.path = Path(path)
        self.reward = reward
        self.timer = timer if timer is not None else {}
        self._seen = 0
        self._seen_samples = 0
        self._t0 = time.perf_counter()
        self.samples_path = Path(samples_path) if samples_path else None
        if self.samples_path is not None:
            self._trim_samples(resumed_step)

    def _trim_samples(self, keep_upto: int) -> None:
        """Drop sample rows of steps after ``keep_upto`` (a killed segment that the
        resumed run trains again), keep every earlier row."""
        p = self.samples_path
        if p is None or not p.exists():
            return
        kept = []
        for line in p.read_text(encoding="utf-8").splitlines():
            try:
                if int(json.loads(line).get("step", 0)) <= keep_upto:
                    kept.append(line)
            except (ValueError, AttributeError):
                continue

        atomic_write(p, "".join(k + "\n" for k in kept))

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self._t0 = time.perf_counter()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None,
               **kw: Any) -> None:
        if not logs or "reward" not in logs or not state.is_world_process_zero:
            return
        batches = self.reward.batches[self._seen:]
        self._seen = len(self.reward.batches)
        row: dict[str, Any] = {
            "step": state.global_step, "learning_rate": logs.get("learning_rate"),
            "reward": logs.get("reward"), "reward_std": logs.get("reward_std"),
            "frac_reward_zero_std": logs.get("frac_reward_zero_std"),
            "completion_length": logs.get("completions/mean_length"),
            "kl": logs.get("kl"), "entropy": logs.get("entropy"), "loss": logs.get("loss"),
            "step_seconds": round(time.perf_counter() - self._t0, 3),
            "generation_seconds": round(self.timer.pop("generation", 0.0), 3),
        }
        release_free_heap()  # the step's freed pages back to the system before measuring
        row.update(memory_gib())
        keys = sorted({k for b in batches for k in b} - {"qids"})
        for k in keys:
            vals = [b[k] for b in batches if k in b]
            row[k] = sum(vals) if k in ("reward_seconds", "n") else sum(vals) / len(vals)
        row["qids"] = ";".join(b["qids"] for b in batches if b.get("qids"))
        if "n" in row:
            row["rollouts"] = row.pop("n")
        line = (f"[qrlib.rl.train] step {row['step']}: reward {row.get('reward') or 0:.3f}"
                + (f", format-valid {row['format_valid']:.2f}" if "format_valid" in row else "")
                + f", {row['step_seconds']:.1f} s")
        if os.environ.get(RUN_LOG_VAR):  # a notebook session: its run log, not the cell
            logging.getLogger("qrlib.rl.train").info(line)
        else:
            print(line, flush=True)
        for k, v in logs.items():
            if k.startswith(("rewards/", "clip_ratio/")) and k not in row:
                row[k] = v
        self._write(row)
        new = self.reward.samples[self._seen_samples:]
        self._seen_samples = len(self.reward.samples)
        if self.samples_path is not None and new:
            with open(self.samples_path, "a", encoding="utf-8") as fh:
                for smp in new:
                    fh.write(json.dumps({"step": state.global_step, **smp},
                                        ensure_ascii=False, default=str) + "\n")

    def _write(self, row: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        old_rows: list[dict[str, Any]] = []
        if self.path.exists():
            with open(self.path, newline="") as fh:
                old_rows = [r for r in csv.DictReader(fh) if int(float(r["step"])) < row["step"]]
        cols = list(self.COLUMNS)
        for r in [*old_rows, row]:
            cols += [k for k in r if k not in cols]

        with atomic_path(self.path) as tmp, open(tmp, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            for r in [*old_rows, row]:
                w.writerow({c: r.get(c, "") for c in cols})


# --------------------------------------------------------------------------- trainer output
def quiet_progress(trainer: Any) -> None:
    """Drop transformers' per-step printers (HTML progress objects in notebooks, a log dict
    per step otherwise); :class:`StepLogger` prints one line per step instead."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)
    with contextlib.suppress(ImportError):
        from transformers.utils.notebook import NotebookProgressCallback

        trainer.remove_callback(NotebookProgressCallback)


class GenTimer:
    """Accumulate wall time of the trainer's generation calls (for the step breakdown)."""

    def __init__(self, trainer: Any, store: dict[str, float]) -> None:
        orig = trainer._generate
        self.store = store

        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return orig(*a, **kw)
            finally:
                store["generation"] = store.get("generation", 0.0) + time.perf_counter() - t0

        trainer._generate = timed


@contextlib.contextmanager
def warnings_to(path: Path) -> Any:
    """Send Python warnings and transformers/TRL log messages below ERROR to ``path``
    while training, so executed notebooks show the step log, not kilobytes of warnings."""
    import logging
    import warnings

    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    loggers = [logging.getLogger(n) for n in ("transformers", "trl", "peft", "accelerate")]
    saved = [(lg, lg.handlers[:], lg.propagate) for lg in loggers]
    with open(path, "a", encoding="utf-8") as fh, warnings.catch_warnings():
        def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                 line: Any = None) -> None:
            fh.write(warnings.formatwarning(message, category, filename, lineno, line))

        warnings.showwarning = show
        for lg in loggers:
            lg.handlers, lg.propagate = [handler], False
        try:
            yield path
        finally:
            for lg, handlers, propagate in saved:
                lg.handlers, lg.propagate = handlers, propagate
            handler.close()
