"""Park a notebook run cut short, and resume it in another session or clone.

Some ``cpu`` notebooks train for longer than one working session has (08 and 15: three
SAGE trainings each, ~2.5 h from scratch). ``python -m qrlib park PROFILE --only NN``, run
after such a run was stopped, packs what it had written under the run folder (its own
folder, e.g. 08's best-of-N pools, and its training runs: the finished ones whole, each
unfinished one with its newest complete checkpoint) into
``artifacts/<profile>/<name>.parked/`` with ``carry.json``'s ``parked`` record: the commit
and the notebook's static fingerprint (source, parameters, qrlib files) the run started
at, and the wall time it had spent. Commit that folder; the next ``qrlib run`` of the
notebook at the same static fingerprint unpacks it, the trainer reuses the finished runs
and resumes the unfinished one from its checkpoint, and the manifest records the run from
scratch as the sum of its parts (``parked`` in the entry, ``cold_wall_s`` = parked wall time
+ the resuming run's; ``peak_rss_mb`` = the highest part's, where ``--park-at`` recorded the
stopped parts' peaks). At other inputs the parked runs are not restored (the notebook then
trains from scratch) and the folder says so until it is removed.

``qrlib run PROFILE --only NN --park-at HH:MM`` (or ``+MIN``) does the stop and the park in
one go: at that time the runner stops the notebook's kernel and everything it started
(:class:`ParkTimer`), puts back the published files the run had half rewritten, parks the
run under the run lock it already holds (:func:`park_held`) and starts no further notebook;
so a session with a fixed end lands its newest checkpoint instead of losing the training.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable

from qrlib.core.errors import QrlibError
from qrlib.core.io import load_json, save_json
from qrlib.core.lock import run_lock
from qrlib.workbook import carry, freshness, publish
from qrlib.workbook.profiles import (load_profile, notebook_parameters, parameters_for,
                                     profile_selection, run_paths)

__all__ = ["ParkTimer", "park", "park_deadline", "park_held", "parked_folder", "parked_note",
           "left_outputs", "restore_parked", "finish_parked", "progress", "started_record",
           "static_fingerprint", "stop_children"]


def _static_inputs(profile: dict[str, Any], name: str, root: Path) -> dict[str, Any]:
    params = parameters_for(profile, name, notebook_parameters(name), root)
    return freshness.static_inputs(name, params, root)


def static_fingerprint(profile: dict[str, Any], name: str, root: Path) -> str:
    """The fingerprint of what ``name`` depends on before it runs (source, parameters,
    qrlib files): what a parked run must match to be resumed."""
    return freshness.fingerprint(_static_inputs(profile, name, root))


def started_record(run_dir: Path, name: str, *, commit: str, dirty: bool, static: str) -> None:
    """What the runner writes as a notebook starts (``started/<name>.json``): the commit,
    the static fingerprint and the start time a later park reads."""
    save_json({"commit": commit, "dirty": dirty, "static_fingerprint": static,
               "started": time.time()}, run_dir / "started" / f"{name}.json")


def parked_folder(profile: str, name: str, root: Path) -> Path:
    return root / carry.ARTIFACTS / profile / (name + carry.PARKED)


# The marker qrlib.rl.coldstart.sft_adapter writes last beside a finished SFT cold start
# (``<run>-sft/sft_settings.json``): such a folder has no summary and no checkpoint. The
# name is spelled there too; moving it into a constant there would stale every notebook
# that imports qrlib.rl.coldstart, so that waits for the next regeneration.
SFT_MARKER = "sft_settings.json"


def _run_state(run: Path) -> dict[str, Any]:
    """A training run's progress: ``steps`` done (summary, or the SFT settings of a finished
    SFT cold start) or its newest complete ``checkpoint``; an unfinished run without one has
    nothing to resume from."""
    from qrlib.rl.checkpoints import last_checkpoint

    if (run / SFT_MARKER).exists():  # the SFT adapter that a cold-start RL run began from
        return {"finished": True, "steps": int(load_json(run / SFT_MARKER).get("sft_steps", 0))}
    try:
        return {"finished": True, "steps": int(load_json(run / "summary.json").get("steps", 0))}
    except (OSError, ValueError):
        ck = last_checkpoint(run)
        return {"finished": False, "checkpoint": Path(ck).name if ck else None,
                "steps": int(Path(ck).name.split("-", 1)[1]) if ck else 0}


def _start(run_dir: Path, name: str, profile: dict[str, Any], root: Path) -> dict[str, Any]:
    """The cut-short run's start: the runner's ``started`` record, or (a run begun by a
    runner without one) papermill's start time with this checkout's commit, which must
    then hold the notebook's inputs unchanged."""
    rec = run_dir / "started" / f"{name}.json"
    if rec.exists():
        return load_json(rec)
    nb = run_dir / "notebooks" / f"INCOMPLETE-{name}.ipynb"
    meta = json.loads(nb.read_text()).get("metadata", {}).get("papermill", {})
    if not meta.get("start_time"):
        raise QrlibError(f"{nb}: no papermill start_time and no started/{name}.json; "
                         f"cannot tell when the run began")
    from qrlib.core.git import commit_info

    static = _static_inputs(profile, name, root)
    dirty = freshness.uncommitted([*static["source"], *static["modules"]], root)
    if dirty:
        raise QrlibError(f"{name}: its inputs have uncommitted changes ({', '.join(sorted(dirty)[:3])}); "
                         f"park before changing what the run ran")
    return {"commit": commit_info(root)["commit"], "dirty": False,
            "static_fingerprint": freshness.fingerprint(static),
            "started": datetime.fromisoformat(meta["start_time"]).timestamp()}


def park(profile_path: str | os.PathLike, only: list[str], root: Path) -> Path:
    """Pack the training runs of one cut-short notebook run (see the module docstring);
    one-line errors when a run still holds the run folder, when the notebook finished or
    never started here, or when it had no training run yet. Returns the folder."""
    profile = load_profile(profile_path)
    names = profile_selection(profile, only)
    if len(names) != 1:
        raise QrlibError(f"park takes one notebook (--only NN), got {len(names)}")
    run_dir = run_paths(profile["name"], root)["run_dir"].resolve()
    with run_lock(run_dir, what="qrlib park"):
        return park_held(profile, names[0], root)


def park_held(profile: dict[str, Any], name: str, root: Path,
              peak_rss_mb: int | None = None) -> Path:
    """:func:`park`'s body, for a caller that holds the run folder's lock already (the
    runner's ``--park-at``, which passes the stopped part's ``peak_rss_mb``: the record keeps
    the highest of all parts, so the resumed run can report the notebook's peak)."""
    run_dir = run_paths(profile["name"], root)["run_dir"].resolve()
    if not (run_dir / "notebooks" / f"INCOMPLETE-{name}.ipynb").exists():
        raise QrlibError(f"{name}: no cut-short run in {run_dir / 'notebooks'} (INCOMPLETE-"
                         f"{name}.ipynb); park parks a run that was stopped before its end")
    start = _start(run_dir, name, profile, root)
    keys = carry.owned_keys(name, run_dir)
    runs = {k[-1]: run_dir.joinpath(*k) for k in keys if k[0] == "rl"}
    states = {r: _run_state(p) for r, p in runs.items()}
    states = {r: s for r, s in states.items() if s["finished"] or s["checkpoint"]}
    kept = [run_dir.joinpath(*k) for k in keys if k[0] != "rl" or k[-1] in states]
    files = [f for p in kept for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file()]
    if not states and not any(k[0] != "rl" for k in keys):
        raise QrlibError(f"{name}: wrote nothing a resumed run could use (no training "
                         f"reached a checkpoint); nothing to park")
    last = max(f.stat().st_mtime for f in files)
    before = run_dir / "parked" / f"{name}.json"  # this run itself resumed a park
    earlier = load_json(before) if before.exists() else {"wall_s": 0.0, "parts": 0}
    record = {"commit": start["commit"], "static_fingerprint": start["static_fingerprint"],
              "wall_s": round(earlier["wall_s"] + max(0.0, last - start["started"]), 1),
              "parts": earlier["parts"] + 1, "runs": states,
              "machines": [*earlier.get("machines", []), publish.machine_info()],
              "parked_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    peak = whole_peak(peak_rss_mb, earlier)
    if peak is not None:
        record["peak_rss_mb"] = peak
    return carry.pack(profile["name"], name, root, commit=start["commit"],
                      fingerprint=start["static_fingerprint"], parked=record)


def whole_peak(part_peak_mb: int | None, parked: dict[str, Any] | None) -> int | None:
    """The peak memory of a run split across parts: the highest of this part's and the
    parked parts' (``parked["peak_rss_mb"]``, absent where ``qrlib park`` parked by hand or
    a park predates the field); None when neither is known."""
    peaks = [p for p in (part_peak_mb, (parked or {}).get("peak_rss_mb")) if p is not None]
    return max(peaks) if peaks else None


_CLOCK = re.compile(r"(?:([01]?\d|2[0-3]):([0-5]\d)|\+(\d{1,4}(?:\.\d+)?))")


def park_deadline(text: str, now: datetime | None = None) -> datetime:
    """``HH:MM`` (the next time the clock shows it: today, or tomorrow when it is past) or
    ``+MIN`` (minutes from ``now``, above 0) as a datetime; a one-line error otherwise."""
    now = now or datetime.now()
    m = _CLOCK.fullmatch(text.strip())
    if m is None or (m.group(3) is not None and float(m.group(3)) <= 0):
        raise QrlibError(f"--park-at {text!r}: give a clock time HH:MM (e.g. 09:50) or minutes "
                         f"from now +MIN (e.g. +120)")
    if m.group(3) is not None:
        return now + timedelta(minutes=float(m.group(3)))
    at = now.replace(hour=int(m.group(1)), minute=int(m.group(2)), second=0, microsecond=0)
    return at if at > now else at + timedelta(days=1)


def stop_children(grace_s: float = 15.0) -> int:
    """Stop every process this one started (the notebook's kernel and what it spawned:
    vLLM's engine, a tokenizer pool): SIGTERM, then SIGKILL after ``grace_s``. Returns how
    many there were."""
    import psutil

    kids = psutil.Process().children(recursive=True)
    for k in kids:
        try:
            k.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(kids, timeout=grace_s)
    for k in alive:
        try:
            k.kill()
        except psutil.NoSuchProcess:
            pass
    return len(kids)


class ParkTimer:
    """Within ``with ParkTimer(deadline):``, stop this process's children at ``deadline``
    (:func:`stop_children`) and set :attr:`fired`; ``deadline=None`` never fires."""

    def __init__(self, deadline: datetime | None, *, grace_s: float = 15.0) -> None:
        self.deadline, self.grace_s, self.fired = deadline, grace_s, False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def passed(self) -> bool:
        """Whether the timer fired or its deadline has come (a notebook not yet started
        then is not started)."""
        return self.fired or (self.deadline is not None and datetime.now() >= self.deadline)

    def _wait(self) -> None:
        assert self.deadline is not None
        if not self._done.wait(max(0.0, (self.deadline - datetime.now()).total_seconds())):
            self.fired = True
            stop_children(self.grace_s)

    def __enter__(self) -> "ParkTimer":
        if self.deadline is not None:
            self._thread = threading.Thread(target=self._wait, name="qrlib-park-at", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()


def progress(record: dict[str, Any]) -> str:
    return ", ".join(f"{r} {'finished' if s['finished'] else 'at'} step {s['steps']}"
                     for r, s in record["runs"].items()) or "no training reached a checkpoint yet"


def parked_note(profile: str, name: str, root: Path, *, fresh: bool = False) -> str:
    """For ``qrlib status``: what of ``name`` is parked (empty when nothing is); for a
    ``fresh`` notebook, that its park is left over and may go (README, "Sizes")."""
    folder = parked_folder(profile, name, root)
    if not (folder / carry.CARRY_FILE).exists():
        return ""
    if fresh:
        return (f"  [{folder.relative_to(root)} is left over (the notebook is fresh and nothing "
                f"reads it); remove it with `git rm -r` in a push with room]")
    rec = load_json(folder / carry.CARRY_FILE).get("parked") or {}
    return (f"  [parked at {rec.get('commit')}, {rec.get('wall_s', 0) / 60:.0f} min so far: "
            f"{progress(rec)}; `qrlib run` resumes it at the same inputs]")


def left_outputs(profile: str, name: str, root: Path) -> dict[str, list[str]]:
    """Published tables and figures of ``name`` that a stopped run wrote before its end
    (unstamped, half a run; the runner puts them back only when the notebook fails):
    ``{"changed": [...], "new": [...]}`` from ``git status``."""
    import subprocess

    prefix = name.split("_", 1)[0] + "_"
    try:
        out = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "-uall", "--",
                              f"tables/{profile}/{prefix}*", f"figures/{profile}/{prefix}*"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"changed": [], "new": []}
    rows = [(ln[:2], ln[3:]) for ln in out.splitlines() if len(ln) > 3]
    return {"changed": sorted(p for st, p in rows if st != "??"),
            "new": sorted(p for st, p in rows if st == "??")}


def restore_parked(profile: dict[str, Any], name: str, root: Path, *, now: str | None = None,
                   say: Callable[[str], None] = print) -> dict[str, Any] | None:
    """Before ``name`` runs: unpack its parked runs when their static fingerprint is the
    notebook's now (``now``, when the caller has it already); returns their ``parked``
    record (None when nothing is parked or the inputs changed since)."""
    folder = parked_folder(profile["name"], name, root)
    if not (folder / carry.CARRY_FILE).exists():
        return None
    record = load_json(folder / carry.CARRY_FILE).get("parked") or {}
    now = now or static_fingerprint(profile, name, root)
    if record.get("static_fingerprint") != now:
        say(f"[qrlib] {name}: parked runs in {folder.relative_to(root)} ran other inputs "
            f"({record.get('static_fingerprint')}, now {now}); not restored, training from scratch")
        return None
    carry.restore(profile["name"], name, root, folder=folder.name)
    run_dir = run_paths(profile["name"], root)["run_dir"]
    save_json(record, run_dir / "parked" / f"{name}.json")
    say(f"[qrlib] {name}: resuming its run parked at {record['commit']} "
        f"({record['wall_s'] / 60:.1f} min so far): {progress(record)}")
    return record


def finish_parked(profile: str, name: str, root: Path) -> None:
    """After ``name`` ran to its end: drop its parked folder and record."""
    shutil.rmtree(parked_folder(profile, name, root), ignore_errors=True)
    (run_paths(profile, root)["run_dir"] / "parked" / f"{name}.json").unlink(missing_ok=True)
