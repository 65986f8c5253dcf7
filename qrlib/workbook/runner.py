"""The notebook runner: ``python -m qrlib run PROFILE`` executes a profile's notebooks.

The top layer of :mod:`qrlib.workbook`: it reads profiles (:mod:`.profiles`), records each
notebook's inputs and fingerprint (:mod:`.freshness`), stamps and publishes its outputs
(:mod:`.publish`) and, after a ``cpu`` run, regenerates RESULTS.md (:mod:`.results`).

``--stale`` (alias ``--resume``) runs only the notebooks that ``python -m qrlib status``
calls stale or never run (:mod:`qrlib.workbook.freshness`: source, profile section,
imported qrlib files, dataset folders read, declared upstream notebooks). One ``qrlib run``
at a time may use a run folder (``runs/<name>/run.lock`` holds the PID); the executed copy
of a notebook is ``INCOMPLETE-NN_name.ipynb`` until it has run to the end. Injected paths
are relative to ``notebooks/`` (the kernel's working directory), so executed notebooks
hold no absolute path of the machine that ran them.

The notebook folders and the repository root are read from :mod:`.profiles` at call time
(``profiles.NOTEBOOK_DIR``), so that pointing them elsewhere there moves the runner too.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil

from qrlib.core import readlog
from qrlib.core.io import atomic_write, load_json, save_json
from qrlib.core.lock import run_lock
from qrlib.core.errors import QrlibError
from qrlib.workbook import carry, extras, freshness, park, profiles, publish, results
from qrlib.workbook.carry import RUNNER_FILES, artifact_key
from qrlib.workbook.preload import preload_env
from qrlib.workbook.profiles import (data_roots, load_profile, long_notebooks, notebook_names,
                                     notebook_parameters, notebook_relpath, parameters_for,
                                     profile_files, profile_notebooks, profile_selection,
                                     run_paths)

@contextlib.contextmanager
def published_outputs_guard(name: str, folders: list[Path]) -> Any:
    """Keep a copy of notebook ``name``'s published outputs (``NN_*`` files in ``folders``)
    while it runs; ``guard.restore()`` puts them back exactly (files it added removed), so
    a notebook that fails half-way leaves no half-written tables or figures behind."""
    prefix = name.split("_", 1)[0] + "_"
    with tempfile.TemporaryDirectory(prefix="qrlib-outputs-") as tmp:
        saved: dict[Path, Path] = {}
        for i, folder in enumerate(folders):
            for f in sorted(Path(folder).glob(prefix + "*")):
                if f.is_file():
                    saved[f] = Path(tmp) / str(i) / f.name
                    saved[f].parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, saved[f])

        class Guard:
            def restore(self) -> int:
                """Restore the saved outputs; returns how many files were changed back."""
                n = 0
                for folder in folders:
                    for f in Path(folder).glob(prefix + "*"):
                        if f.is_file() and f not in saved:
                            f.unlink()
                            n += 1
                for f, copy_ in saved.items():
                    if not f.exists() or f.read_bytes() != copy_.read_bytes():
                        shutil.copy2(copy_, f)
                        n += 1
                return n

        yield Guard()



def build_notebooks(names: list[str] | None = None) -> list[Path]:
    """Convert the jupytext sources ``notebooks/src/NN_*.py`` into ``notebooks/NN_*.ipynb``.

    The ``.py`` files (percent format) are the sources under review; the ``.ipynb`` files
    are what JupyterLab opens and the runner executes. Outputs are never stored.
    """
    import jupytext  # deferred: heavy (markdown-it, nbformat), needed only to build

    out = []
    for name in names or notebook_names():
        nb = jupytext.read(profiles.NOTEBOOK_SRC_DIR / f"{name}.py")
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (qrlib)",
                                     "language": "python"}
        nb.metadata.pop("jupytext", None)
        for i, cell in enumerate(nb.cells):  # stable ids: rebuilding gives no spurious diff
            cell.id = f"c{i:03d}-" + hashlib.sha1(cell.source.encode()).hexdigest()[:8]
        target = profiles.NOTEBOOK_DIR / f"{name}.ipynb"
        atomic_write(target, jupytext.writes(nb, fmt="ipynb"))
        out.append(target)
    return out



# --------------------------------------------------------------------------- runner
class _PeakMemory:
    """Sample in a thread the RSS of this process and all its children (the kernel), or,
    with ``marker``, of the child processes whose ``QRLIB_READ_LOG`` is ``marker`` (one
    notebook's kernel and what it started, when notebooks run side by side)."""

    def __init__(self, interval: float = 0.5, marker: str | None = None) -> None:
        self.interval, self.marker = interval, marker
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _processes(self, me: psutil.Process) -> list[psutil.Process]:
        children = me.children(recursive=True)
        if self.marker is None:
            return [me, *children]
        mine = []
        for p in children:
            with contextlib.suppress(psutil.Error):
                if p.environ().get("QRLIB_READ_LOG") == self.marker:
                    mine.append(p)
        return mine

    def _loop(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for p in self._processes(me):
                with contextlib.suppress(psutil.Error):
                    total += p.memory_info().rss
            self.peak = max(self.peak, total)
            self._stop.wait(self.interval)

    def __enter__(self) -> "_PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def _failed_cell(exc: Exception) -> str:
    """Locate the failing cell in a papermill execution error, in one line."""
    name = getattr(exc, "ename", type(exc).__name__)
    value = " ".join(str(getattr(exc, "evalue", exc)).split())[:300]
    cell = getattr(exc, "exec_count", None)
    where = f"cell [{cell}]" if cell is not None else "a cell"
    return f"{where} raised {name}: {value}"


def stale_selection(profile_path: str | os.PathLike, root: Path) -> list[str]:
    """Notebooks to run for ``--stale``: every stale or never-run notebook, plus each fresh
    notebook whose artifacts a selected one reads but this machine's run folder lacks."""
    profile = load_profile(profile_path)
    status = {s.notebook: s for s in freshness.profile_status(profile_path, root)}
    chosen = {n for n, s in status.items() if s.state != "fresh"}
    done_dir = run_paths(profile["name"], root)["run_dir"] / "done"
    todo = sorted(chosen)
    while todo:
        for up in freshness.declared_reads(todo.pop(), root):
            if up not in chosen and not (done_dir / f"{up}.json").exists():
                chosen.add(up)
                todo.append(up)
    return [n for n in profile_notebooks(profile) if n in chosen]


def _dirty_inputs(profile_path: Path, inputs: Mapping[str, Any], root: Path) -> list[str]:
    """Uncommitted files among what a notebook depends on (its source, its qrlib modules,
    the profile files); [] outside a git work tree."""
    files = [*inputs["source"], *inputs["modules"]]
    chain = profile_files(profile_path)  # the profile and the files it extends
    return sorted(freshness.uncommitted(files + [os.path.relpath(p, root) for p in chain], root))


def resolve_profile(profile_path: str | os.PathLike, root: Path) -> Path:
    """A profile path as given, or ``params/<name>.yaml`` for a bare name."""
    p = Path(profile_path)
    if not p.exists() and (root / "params" / f"{p}.yaml").exists():
        return root / "params" / f"{p}.yaml"
    return p


def run_profile(profile_path: str | os.PathLike, *, only: list[str] | None = None,
                resume: bool = False, stale: bool = False, long: bool = False,
                allow_dirty: bool = False, park_at: str | None = None,
                root: Path | None = None, kernel: str = "python3",
                log_output: bool = False, jobs: int = 1,
                when_idle: bool = True) -> list[dict[str, Any]]:
    """Execute the notebooks in order with papermill, injecting the profile's parameters.

    Executed notebooks go to ``runs/<name>/notebooks/`` (named ``INCOMPLETE-NN_name.ipynb``,
    behind a first cell saying so, until the notebook has run to its end). After each
    notebook the runner checks its read log against its declared reads
    (:mod:`qrlib.workbook.freshness`), stamps its tables and figure captions with the commit
    and its fingerprint, and records its inputs, wall time and peak memory in
    ``tables/<name>/manifest.json``. ``stale`` (or ``resume``) runs only what
    ``qrlib status`` calls stale or never run. The profile's ``long`` set is skipped unless
    ``long`` or ``only`` asks for it. A published profile refuses to run a
    notebook whose inputs have uncommitted changes unless ``allow_dirty``. With ``park_at``
    (``HH:MM`` or ``+MIN``, :func:`qrlib.workbook.park.park_deadline`) the notebook still
    running then is stopped and parked, and no later notebook starts.

    ``jobs`` > 1 runs up to that many notebooks at once, each only after the notebooks it
    declares reading (``jupyter: qrlib: reads``) have finished in this run, and a second or
    later one only while a core is idle unless ``when_idle`` is False
    (:func:`_run_side_by_side`; `make test` runs the smoke notebooks so). Each notebook's
    peak memory is then that of its own kernel, and a read of an artifact a notebook
    running beside it writes is caught only where that notebook finished first;
    ``park_at`` needs ``jobs`` 1.
    """
    import papermill as pm  # deferred: heavy (nbclient, jupyter_client), needed only to run

    if not isinstance(jobs, int) or jobs < 1:
        raise QrlibError(f"jobs must be a whole number of notebooks at once, 1 or more; got {jobs!r}")
    if jobs > 1 and park_at:
        raise QrlibError("--park-at stops the one notebook running; it needs --jobs 1")
    root = Path(root or profiles.REPO_ROOT)
    profile_path = resolve_profile(profile_path, root)
    profile = load_profile(profile_path)
    names = profile_selection(profile, only)
    deadline = park.park_deadline(park_at) if park_at else None
    held = set() if (only or long) else set(long_notebooks(profile))
    paths = run_paths(profile["name"], root)
    run_dir = paths["run_dir"]
    published = profile["name"] in publish.PUBLISHED_PROFILES or os.environ.get("QRLIB_PUBLISH") == "1"
    with run_lock(run_dir), park.ParkTimer(deadline) as timer:
        for p in paths.values():
            p.mkdir(parents=True, exist_ok=True)
        if note := publish.bf16_note(publish.machine_info()):
            print(note, flush=True)
        save_json(profile, run_dir / "profile.json")
        carry.restore_missing(profile["name"], root)  # a fresh clone: the published runs
        pick = set(stale_selection(profile_path, root)) if (stale or resume) else set(names)
        run = _Run(profile, profile_path, root, paths, published, allow_dirty, park_at, timer,
                   carry.carried_notebooks(root) if carry.carry_enabled(profile["name"], root)
                   else [], pm, kernel, log_output)
        _atomic_papermill_saves(pm, run_dir / "notebooks")
        rows: list[dict[str, Any]] = []
        todo: list[str] = []
        for name in names:
            if name in held:
                print(f"[qrlib] {name}: in the profile's long set, skipped (run it with --long "
                      f"or --only {name.split('_', 1)[0]})", flush=True)
                rows.append({"notebook": name, "status": "skipped"})
            elif name not in pick:
                print(f"[qrlib] {name}: fresh, skipped", flush=True)
                rows.append({"notebook": name, "status": "skipped"})
            else:
                todo.append(name)
        failure = ""
        if jobs == 1:
            for name in todo:
                if timer.passed:
                    print(f"[qrlib] {name}: not started, the park time {park_at} has come",
                          flush=True)
                    rows.append({"notebook": name, "status": "skipped"})
                    continue
                job = run.start(run.check(name))
                run.execute(job)
                rows.append(run.finish(job))
                if job.error:
                    failure = job.error
                    break
        else:
            failure = _run_side_by_side(run, todo, jobs, rows, when_idle=when_idle)
        rows.sort(key=lambda r: names.index(r["notebook"]))  # profile order, skips included
        _print_summary(rows)
        if failure:
            raise QrlibError(failure)
        after_run(profile["name"], rows, root=root)  # timings; cpu: executed notebooks, RESULTS.md
    return rows


#: another notebook starts beside running ones only with this many cores idle, measured
#: over at least IDLE_WINDOW_S seconds since the last start or finish
IDLE_CORES_FOR_ANOTHER, IDLE_WINDOW_S = 0.75, 5.0


class _IdleCores:
    """Idle CPU, in cores, since :meth:`reset` (from ``psutil.cpu_times``; time waiting on
    the disk does not count, as processes starting up wait so and then want the core):
    whether another notebook would find a core to itself."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._since, self._at = psutil.cpu_times(), time.monotonic()

    def age(self) -> float:
        return time.monotonic() - self._at

    def another_fits(self) -> bool:
        """Whether :data:`IDLE_CORES_FOR_ANOTHER` cores were idle over the window since the
        last reset, once it is :data:`IDLE_WINDOW_S` long; a window that says no starts
        again, so the next answer is about the last few seconds."""
        if self.age() < IDLE_WINDOW_S:
            return False
        fits = self.cores() >= IDLE_CORES_FOR_ANOTHER
        if not fits:
            self.reset()
        return fits

    def cores(self) -> float:
        now = psutil.cpu_times()
        total = sum(now) - sum(self._since)
        idle = now.idle - self._since.idle
        return (psutil.cpu_count() or 1) * idle / total if total > 0 else 0.0


def _run_side_by_side(run: "_Run", todo: list[str], jobs: int,
                      rows: list[dict[str, Any]], *, when_idle: bool = True) -> str:
    """Execute ``todo`` with up to ``jobs`` kernels at once, each notebook once the notebooks
    of ``todo`` it declares reading have finished, and (``when_idle``) a second or later
    one only while the machine has a core idle (:data:`IDLE_CORES_FOR_ANOTHER`): beside a
    busy process, one notebook at a time, as without ``jobs``. The bookkeeping of a
    finished notebook (:meth:`_Run.finish`) stays in this thread. After a failure no
    notebook starts and the running ones finish; returns the first failure ("" when none)."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    jobs_of = {n: run.check(n) for n in todo}  # every refusal before any kernel starts
    ups = {n: [u for u in freshness.declared_reads(n, run.root) if u in jobs_of] for n in todo}
    waiting, done, running, failure = list(todo), set(), {}, ""
    idle = _IdleCores()
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="qrlib-notebook") as pool:
        while waiting or running:
            ready = [n for n in waiting if set(ups[n]) <= done] if not failure else []
            held_back = False
            for name in ready[:jobs - len(running)]:
                if running and when_idle and not idle.another_fits():
                    held_back = True
                    break
                waiting.remove(name)
                job = run.start(jobs_of[name], beside=True)
                running[pool.submit(run.execute, job)] = job
                idle.reset()
            if not running:
                break  # a failure, or what is left waits on a notebook that failed
            try:
                finished, _ = wait(running, timeout=IDLE_WINDOW_S if held_back else None,
                                   return_when=FIRST_COMPLETED)
            except KeyboardInterrupt:  # the kernels answer to this thread only: stop them
                park.stop_children(grace_s=5.0)
                raise
            for fut in finished:
                job = running.pop(fut)
                fut.result()  # run.execute catches the notebook's own failures
                rows.append(run.finish(job))
                idle.reset()
                if job.error:
                    failure = failure or job.error
                else:
                    done.add(job.name)
    return failure


@dataclasses.dataclass
class _Job:
    """One notebook of a run: what :meth:`_Run.check` and :meth:`_Run.start` set up and
    :meth:`_Run.execute` fills in."""
    name: str
    params: dict[str, Any]
    static: dict[str, Any]
    dirty: list[str]
    beside: bool = False
    log: Path = Path()
    watch: list[Path] = dataclasses.field(default_factory=list)
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    parked: Any = None
    out_nb: Path = Path()
    partial_nb: Path = Path()
    started: float = 0.0
    error: str = ""
    executed: Any = None
    row: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _Run:
    """What every notebook of one :func:`run_profile` shares."""
    profile: dict[str, Any]
    profile_path: Path
    root: Path
    paths: dict[str, Path]
    published: bool
    allow_dirty: bool
    park_at: str | None
    timer: Any
    carried: list[str]
    pm: Any
    kernel: str
    log_output: bool

    def check(self, name: str) -> _Job:
        """Its parameters and inputs; refuses a dirty published run or a missing extra."""
        declared = notebook_parameters(name)
        params = parameters_for(self.profile, name, declared, self.root)
        static = freshness.static_inputs(name, params, self.root)
        dirty = _dirty_inputs(self.profile_path, static, self.root)
        if dirty and self.published and not self.allow_dirty:
            raise QrlibError(
                f"{name}: refusing to publish into tables/{self.profile['name']} from a tree "
                f"with uncommitted changes to what it depends on ({', '.join(dirty[:5])}"
                f"{', ...' if len(dirty) > 5 else ''}); commit them or pass --allow-dirty")
        extras.require_extras(name, self.profile["name"], published=self.published)
        return _Job(name, params, static, dirty)

    def start(self, job: _Job, *, beside: bool = False) -> _Job:
        """Clear its old outputs and records, restore a parked run, say it starts."""
        name, run_dir, root = job.name, self.paths["run_dir"], self.root
        job.beside = beside
        (run_dir / "done" / f"{name}.json").unlink(missing_ok=True)
        job.out_nb = run_dir / "notebooks" / f"{name}.ipynb"
        job.partial_nb = job.out_nb.with_name(f"INCOMPLETE-{job.out_nb.name}")
        job.out_nb.parent.mkdir(parents=True, exist_ok=True)
        job.out_nb.unlink(missing_ok=True)  # an older complete copy no longer matches
        for tmp in job.out_nb.parent.glob(f".{job.partial_nb.name}.*.tmp"):  # a killed save's
            tmp.unlink(missing_ok=True)
        job.log = run_dir / "reads" / f"{name}.log"
        job.log.unlink(missing_ok=True)
        job.watch = [*data_roots(job.params.get("data_dir")), run_dir.resolve(),
                     (root / "params").resolve()]
        job.info = {**publish.commit_info(root), "dirty": bool(job.dirty)}  # the commit it starts at
        static_fp = freshness.fingerprint(job.static)
        job.parked = park.restore_parked(self.profile, name, root, now=static_fp)  # an earlier park
        park.started_record(run_dir, name, commit=job.info["commit"], dirty=job.info["dirty"],
                            static=static_fp)
        print(f"[qrlib] {name}: running with {json.dumps(job.params, default=str)}", flush=True)
        job.env = {"QRLIB_READ_LOG": str(job.log.resolve()),
                   "QRLIB_READ_WATCH": os.pathsep.join(map(str, job.watch)),
                   **preload_env(os.environ.get("LD_PRELOAD"))}
        if "LD_PRELOAD" in job.env:
            print(f"[qrlib] {name}: kernel LD_PRELOAD={job.env['LD_PRELOAD']}", flush=True)
        return job

    def execute(self, job: _Job) -> None:
        """Run it in a kernel of its own environment (``job.env``); a failed notebook puts
        its published files back and records why in ``job.error``."""
        name, paths = job.name, self.paths
        start = time.perf_counter()
        job.started = time.time()
        # the kernel's own memory when notebooks run side by side; else this process's too
        with _PeakMemory(marker=str(job.log.resolve()) if job.beside else None) as mem, \
                published_outputs_guard(name, [paths["tables_dir"], paths["figures_dir"]]) as guard:
            try:
                job.executed = self.pm.execute_notebook(
                    _with_incomplete_banner(profiles.NOTEBOOK_DIR / f"{name}.ipynb"),
                    str(job.partial_nb.resolve()), parameters=job.params, kernel_name=self.kernel,
                    progress_bar=False, log_output=self.log_output,
                    kernel_manager_class=_kernel_manager(job.env, profiles.NOTEBOOK_DIR))
            except self.pm.PapermillExecutionError as exc:
                job.error = _failed_cell(exc)
            except Exception as exc:  # noqa: BLE001 - kernel died (OOM, os._exit), timeout
                reason = " ".join(str(exc).split())[:200] or "no message"
                job.error = f"the kernel failed ({type(exc).__name__}: {reason})"
            if job.error:  # a failed notebook publishes nothing
                changed = guard.restore()
                if changed:
                    print(f"[qrlib] {name}: failed; {changed} published table/figure "
                          f"file(s) put back as they were", flush=True)
        job.row = {"notebook": name, "status": "failed" if job.error else "ok",
                   "wall_s": round(time.perf_counter() - start, 1),
                   "peak_rss_mb": round(mem.peak / 2**20),
                   "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}

    def finish(self, job: _Job) -> dict[str, Any]:
        """Check its reads, then record, stamp and carry it (or park it, where ``--park-at``
        stopped it); returns its row. A failure is left in ``job.error``, with the executed
        copy named."""
        name, root, paths = job.name, self.root, self.paths
        run_dir, row = paths["run_dir"], job.row
        if not job.error:
            try:
                reads = classify_reads(name, readlog.read_log(job.log), run_dir, job.watch, root)
            except QrlibError as exc:
                job.error, row["status"] = str(exc), "failed"
        if job.error and self.timer.fired:
            row["status"], job.error = "parked", ""
            _park_stopped(self.profile, name, root, self.park_at, row["peak_rss_mb"])
            return row
        _append_timing(run_dir / "timings.csv", row)
        if job.error:
            job.error = f"notebook {name} failed: {job.error} (executed copy: {job.partial_nb})"
            return row
        manifest = freshness.load_manifest(self.profile["name"], root)
        inputs = {**job.static, "data": freshness.data_inputs(reads["data"], root,
                                                              job.params.get("data_dir")),
                  "upstream": {u: (manifest.get(u) or {}).get("fingerprint")
                               for u in freshness.declared_reads(name, root)}}
        fp = freshness.fingerprint(inputs)
        row["fingerprint"] = fp
        outputs = publish.stamp_outputs(name, self.profile["name"], paths, since=job.started,
                                        info=job.info, fingerprint=fp, root=root)
        _save_complete(job.executed, job.out_nb, profiles.NOTEBOOK_DIR / f"{name}.ipynb")
        job.partial_nb.unlink(missing_ok=True)
        entry = {"fingerprint": fp, "commit": job.info["commit"], "dirty": job.info["dirty"],
                 "allow_dirty": bool(job.dirty and self.allow_dirty), "wall_s": row["wall_s"],
                 "peak_rss_mb": row["peak_rss_mb"], "finished": row["finished"],
                 "outputs": outputs, "inputs": inputs,
                 "reused_training": publish.reused_trainings(job.executed),
                 "reused_from": publish.reused_from(job.executed, list(job.static["modules"]),
                                                    job.info["commit"], root),
                 "ld_preload": job.env.get("LD_PRELOAD", ""),  # timings differ with it
                 "machine": publish.machine_info()}  # and with the CPU
        if job.parked:  # a resumed run: its peak is the highest of all its parts
            entry["parked"] = job.parked
            entry["peak_rss_mb"] = park.whole_peak(row["peak_rss_mb"], job.parked)
        entry.update(publish.cold_run(entry, manifest.get(name)))
        freshness.save_manifest_entry(self.profile["name"], name, entry, root)
        save_json({**row, "hash": fp}, run_dir / "done" / f"{name}.json")
        park.finish_parked(self.profile["name"], name, root)
        if name in self.carried:  # later notebooks read its runs: keep them for other clones
            try:
                dest = carry.pack(self.profile["name"], name, root, commit=job.info["commit"],
                                  fingerprint=fp)
                print(f"[qrlib] {name}: carried its runs in {dest.relative_to(root)}",
                      flush=True)
            except (QrlibError, OSError) as exc:
                print(f"[qrlib] {name}: its runs were not carried ({exc}); readers on "
                      f"another clone must run it again", flush=True)
        return row


def _kernel_manager(env: Mapping[str, str], cwd: Path) -> type:
    """A kernel manager class (for papermill's ``kernel_manager_class``) whose kernels start
    in ``cwd`` with ``env`` over this process's environment, at this process's priority
    (:func:`_share_priority`): the runner never changes its own environment or directory,
    so notebooks can run side by side."""
    from jupyter_client.manager import AsyncKernelManager

    extra, folder = dict(env), str(cwd)

    class QrlibKernelManager(AsyncKernelManager):
        async def start_kernel(self, **kw: Any) -> None:
            kw["env"] = {**(kw.get("env") or os.environ), **extra}
            kw.setdefault("cwd", folder)
            await super().start_kernel(**kw)
            _share_priority(getattr(self.provisioner, "pid", None))

    return QrlibKernelManager


def _share_priority(pid: int | None) -> None:
    """Give the kernel ``pid`` this process's niceness where it would otherwise lose it.

    jupyter_client starts each kernel in a session of its own, and Linux (with
    ``kernel.sched_autogroup_enabled``) shares the CPU between sessions before it looks at
    nice values inside one: a kernel of ``nice -n 10 qrlib run`` would take as much CPU as
    the process it was meant to yield to. Setting the kernel's autogroup to the same
    niceness restores what ``nice`` asked for; nothing happens at niceness 0, off Linux, or
    where the kernel has no autogroup file."""
    nice = os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else 0
    if pid is None or nice <= 0:
        return
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))


def _park_stopped(profile: dict[str, Any], name: str, root: Path, park_at: str | None,
                  peak_rss_mb: int) -> None:
    """After ``--park-at`` stopped ``name``: park its run (the caller holds the run lock)
    with the stopped part's peak memory, and print the commit that lands the park; a run
    with nothing to park says so."""
    try:
        dest = park.park_held(profile, name, root, peak_rss_mb)
    except QrlibError as exc:
        print(f"[qrlib] {name}: stopped at {park_at}; not parked: {exc}", flush=True)
        return
    rec = load_json(dest / carry.CARRY_FILE).get("parked") or {}
    rel = dest.relative_to(root)
    print(f"[qrlib] {name}: stopped at {park_at} and parked in {rel} "
          f"({rec.get('wall_s', 0) / 60:.0f} min so far: {park.progress(rec)}); land it with\n"
          f"  git add -A {rel} && git commit -m '{name} parked: {park.progress(rec)}' -- {rel}\n"
          f"then `python -m qrlib run {profile['name']} --only {name.split('_', 1)[0]}` "
          f"resumes it", flush=True)


def classify_reads(name: str, log: list[tuple[str, str]], run_dir: Path,
                   watch: list[Path], root: Path) -> dict[str, list[str]]:
    """Sort a notebook's read log into dataset folders, profile files and artifacts.

    A file under the run folder that an earlier notebook wrote (per its read log) is that
    notebook's artifact, and reading it is an error unless the source header declares it
    (``jupyter: qrlib: reads``). Returns ``{"data": [...], "artifacts": [...]}`` with
    repository-relative dataset folders and profile files.
    """
    run_dir = run_dir.resolve()
    producers: dict[str, str] = {}
    for other in sorted((run_dir / "reads").glob("*.log")):
        if other.stem < name:
            for mode, p in readlog.read_log(other):
                if mode == "w":
                    producers[p] = other.stem
    by_key = {artifact_key(Path(q).relative_to(run_dir)): n for q, n in producers.items()
              if Path(q).is_relative_to(run_dir)}
    own = {p for mode, p in log if mode == "w"}
    declared = set(freshness.declared_reads(name, root))
    data: set[str] = set()
    artifacts: set[str] = set()
    params_dir = (root / "params").resolve()
    for mode, p in log:
        path = Path(p)
        if mode != "r" or p in own:
            continue
        if path.is_relative_to(run_dir):
            rel = path.relative_to(run_dir)
            if rel.parts and rel.parts[0] in RUNNER_FILES:
                continue
            producer = producers.get(p) or by_key.get(artifact_key(rel))
            if producer is None or producer == name:
                continue  # left by an older run of this notebook, or not an artifact
            if producer not in declared:
                raise QrlibError(
                    f"{name} read {rel}, an artifact of {producer}, but its source header does "
                    f"not declare it; add {producer} to `jupyter: qrlib: reads` in "
                    f"notebooks/src/{name}.py")
            artifacts.add(str(rel))
        elif path.is_relative_to(params_dir):
            data.add(os.path.relpath(path, root))
        else:
            for w in watch:
                if path.is_relative_to(w) and w != run_dir and len(path.relative_to(w).parts) > 1:
                    data.add(path.relative_to(w).parts[0])  # a dataset folder, by name
                    break
    return {"data": sorted(data), "artifacts": sorted(artifacts)}


_ATOMIC_PREFIXES: set[str] = set()  # folders whose papermill saves are already atomic


def _atomic_papermill_saves(pm: Any, folder: Path) -> None:
    """Make papermill's saves of executed copies under ``folder`` atomic.

    Papermill rewrites the output notebook after every cell by truncating and writing it in
    place, so a kill during a save left an empty ``INCOMPLETE-`` copy. A handler registered
    for the folder's prefix (papermill picks the first registered scheme a path starts with)
    writes beside the file and renames: a kill keeps the previous save.
    """
    from papermill.iorw import LocalHandler

    class AtomicLocalHandler(LocalHandler):
        def write(self, buf: str, path: str) -> None:
            atomic_write(Path(self._cwd or ".") / path, buf)

    prefix = str(folder.resolve()) + os.sep
    if prefix not in _ATOMIC_PREFIXES:
        pm.iorw.papermill_io.register(prefix, AtomicLocalHandler())
        _ATOMIC_PREFIXES.add(prefix)


INCOMPLETE_CELL_ID = "qrlib-incomplete"
READLOG_CELL_ID = "qrlib-read-log"


def _with_incomplete_banner(path: Path) -> Any:
    """The notebook at ``path`` behind a first cell saying this copy is incomplete.

    Papermill saves the executed copy after every cell, so a copy left by a kill or a
    failure says so itself (and is named ``INCOMPLETE-...``); the runner drops the cell once
    the notebook has run to its end.
    """
    import nbformat  # deferred: heavy (jsonschema), needed only around a notebook run

    nb = nbformat.read(path, as_version=4)
    cell = nbformat.v4.new_markdown_cell(
        "**INCOMPLETE** — this executed copy was saved while the notebook ran; it stopped "
        "before the end (killed, interrupted or failed). Its results are not complete: run "
        "`python -m qrlib run` again.")
    cell.id = INCOMPLETE_CELL_ID
    cell.metadata["qrlib"] = "incomplete-banner"
    hook = nbformat.v4.new_code_cell("import qrlib.core.readlog\nqrlib.core.readlog.start()")
    hook.id = READLOG_CELL_ID
    hook.metadata["qrlib"] = "read-log"
    hook.metadata["tags"] = ["qrlib-read-log"]
    nb.cells[:0] = [cell, hook]
    nb.metadata["qrlib"] = {**nb.metadata.get("qrlib", {}), "complete": False}
    return nb


def _save_complete(nb: Any, path: Path, source: Path) -> None:
    """Write the executed notebook without the incomplete banner, atomically."""
    import nbformat  # deferred, as in _with_incomplete_banner

    pm_meta = nb.metadata.get("papermill", {})
    if "input_path" in pm_meta:  # papermill recorded the bannered notebook object itself
        pm_meta["input_path"], pm_meta["output_path"] = notebook_relpath(source), notebook_relpath(path)
    nb.cells = [c for c in nb.cells if c.get("id") not in (INCOMPLETE_CELL_ID, READLOG_CELL_ID)
                and c.get("metadata", {}).get("qrlib") not in ("incomplete-banner", "read-log")]
    nb.metadata["qrlib"] = {**nb.metadata.get("qrlib", {}), "complete": True}
    atomic_write(path, nbformat.writes(nb))


def _append_timing(path: Path, row: Mapping[str, Any]) -> None:
    import pandas as pd  # deferred: heavy, needed once per notebook run

    cols = ["notebook", "status", "wall_s", "peak_rss_mb", "hash", "finished"]
    new = pd.DataFrame([{c: row.get(c) for c in cols}])
    if path.exists():
        new = pd.concat([pd.read_csv(path), new], ignore_index=True)
    atomic_write(path, new.to_csv(index=False))


def _print_summary(rows: list[dict[str, Any]]) -> None:
    print("\n[qrlib] notebook                      status    wall_s  peak_MB", flush=True)
    total = 0.0
    for r in rows:
        wall = float(r.get("wall_s") or 0)
        total += wall if r.get("status") == "ok" else 0
        print(f"[qrlib] {r['notebook']:<29} {r['status']:<8} {wall:8.1f} "
              f"{int(r.get('peak_rss_mb') or 0):8d}", flush=True)
    print(f"[qrlib] total wall time of executed notebooks: {total / 60:.1f} min", flush=True)


# --------------------------------------------------------------------------- after the run
def after_run(profile: str, rows: list[dict[str, Any]], *, root: Path | None = None) -> None:
    """Hook at the end of :func:`run_profile` (never fails the run): the timing table for
    every profile; for the published profiles the executed notebooks
    (:func:`qrlib.workbook.publish.publish_notebooks`); for the results profile RESULTS.md
    (:func:`qrlib.workbook.results.write_results`)."""
    root = Path(root or profiles.REPO_ROOT)
    try:
        publish.timing_table(profile, root=root)
        if profile in publish.PUBLISHED_PROFILES or os.environ.get("QRLIB_PUBLISH") == "1":
            ran = [r["notebook"] for r in rows if r.get("status") == "ok"]
            for p in publish.publish_notebooks(profile, root=root, names=ran):
                print(f"[qrlib] published {p.relative_to(root)}", flush=True)
        if profile == publish.RESULTS_PROFILE and (root / "tables" / profile).exists():
            path = results.write_results(profile, root=root)
            print(f"[qrlib] wrote {path.relative_to(root)}", flush=True)
    except Exception as exc:  # noqa: BLE001 - publishing must not lose an hour of results
        print(f"[qrlib] publishing the {profile} run failed ({type(exc).__name__}: {exc}); "
              f"the run itself is complete under runs/{profile}", flush=True)
