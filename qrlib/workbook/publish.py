"""Publish the executed notebooks of a profile, small enough to commit and browse.

``python -m qrlib run params/cpu.yaml`` ends by calling
:func:`qrlib.workbook.runner.after_run`, which, for the profiles in
:data:`PUBLISHED_PROFILES` (the README's ``cpu`` profile):

* copies every notebook that ran to ``notebooks/executed/<profile>/NN_name.ipynb`` with its
  outputs, stripped of what makes notebooks heavy (PDF/SVG twins of figures, widget
  state, progress-bar spam, huge HTML) and with figures re-encoded as modest PNGs, behind
  a first cell naming the commit, the tree state, the fingerprint, the profile and the date;
* writes ``notebooks/executed/<profile>/README.md``, an index of what is there;
* writes ``tables/<profile>/run_timings.csv|md`` (wall time and peak memory of each
  notebook's last run, from ``tables/<profile>/manifest.json``), which README and RESULTS
  quote;
* regenerates ``RESULTS.md`` from ``tables/<profile>/`` (:mod:`qrlib.workbook.results`).

For every profile the timing table is written; notebooks are published only for the
listed profiles (or any profile with ``QRLIB_PUBLISH=1``), so ``make test`` leaves the
repository untouched. Data, indexes and weights are never copied: only notebook outputs.

This module stamps and publishes; it imports only :mod:`qrlib.workbook.freshness` (the
manifest), :mod:`qrlib.core` and :mod:`qrlib.errors`. nbformat, PIL and pandas are imported
inside the functions that need them (heavy, and not needed to stamp a table).
"""
from __future__ import annotations

import base64
import io
import os
import re
import time
from pathlib import Path
from typing import Any

from qrlib.core.io import REPO_ROOT, STAMP_PREFIX, atomic_write, save_table
from qrlib.core.errors import QrlibError
from qrlib.core.git import commit_info
from qrlib.workbook.freshness import (load_manifest, published_entries, training_drift,
                                     value_hash)
from qrlib.workbook.noise import RICH

PUBLISHED_PROFILES = ("cpu",)
RESULTS_PROFILE = "cpu"
MAX_PNG_WIDTH = 1000        # px; wider inline figures are downscaled
MAX_HTML_CHARS = 60_000     # larger HTML outputs keep only their text/plain twin
MAX_STREAM_LINES = 60       # longer stdout/stderr outputs keep head and tail
HEADER_ID = "qrlib-published-header"
DROP_MIME = ("application/pdf", "image/svg+xml", "application/vnd.jupyter.widget-view+json",
             "application/vnd.jupyter.widget-state+json", "application/javascript")


# --------------------------------------------------------------------------- git
# commit_info: qrlib.core.git (training summaries record it too)
# --------------------------------------------------------------------------- stamps
STAMP_MD = "`qrlib:"


def stamp_text(name: str, profile: str, info: dict[str, Any], fingerprint: str) -> str:
    """One line naming where a result came from: notebook, profile, commit, tree, fingerprint."""
    tree = "dirty tree, --allow-dirty" if info.get("dirty") else "clean tree"
    return (f"{name}, profile {profile}, commit {info.get('commit', 'unknown')} ({tree}), "
            f"fingerprint {fingerprint}")


def _stamp_file(path: Path, stamp: str) -> None:
    if path.suffix not in (".csv", ".md") and not path.name.endswith(".caption.txt"):
        return  # figures carry their stamp in the caption
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".csv":
        body = "".join(ln for ln in text.splitlines(keepends=True)
                       if not ln.startswith(STAMP_PREFIX))
        text = f"{STAMP_PREFIX} {stamp}\n{body}"
    elif path.suffix == ".md":
        body = "\n".join(ln for ln in text.rstrip("\n").split("\n")
                         if not ln.startswith(STAMP_MD)).rstrip("\n")
        text = f"{body}\n\n{STAMP_MD} {stamp}`\n"
    elif path.name.endswith(".caption.txt"):
        body = re.sub(r" \[qrlib: [^\]]*\]$", "", text.rstrip("\n"))
        text = f"{body} [qrlib: {stamp}]\n"
    atomic_write(path, text)


def stamp_outputs(name: str, profile: str, paths: dict[str, Path], *, since: float,
                  info: dict[str, Any], fingerprint: str, root: Path) -> list[str]:
    """Stamp the tables (csv, md) and figure captions notebook ``name`` wrote, and delete
    the files of its own (``NN_*``) that this run did not rewrite (left by an older run).

    Returns the repository-relative paths of its outputs.
    """
    prefix = name.split("_", 1)[0] + "_"
    stamp = stamp_text(name, profile, info, fingerprint)
    out = []
    for folder in (paths["tables_dir"], paths["figures_dir"]):
        for f in sorted(Path(folder).glob(f"{prefix}*")):
            if not f.is_file():
                continue
            if f.stat().st_mtime < since - 1:
                f.unlink()
                print(f"[qrlib] removed {f.relative_to(root)}: {name} no longer writes it",
                      flush=True)
                continue
            _stamp_file(f, stamp)
            out.append(str(f.relative_to(root)))
    return out


# --------------------------------------------------------------------------- stripping

def _shrink_png(b64: str, max_width: int) -> str:
    """Downscale a base64 PNG to ``max_width`` and re-encode it with a 256-colour palette
    (plots lose nothing visible; files shrink several-fold)."""
    from PIL import Image

    raw = base64.b64decode(b64)
    img = Image.open(io.BytesIO(raw))
    img.load()
    if img.width > max_width:
        h = round(img.height * max_width / img.width)
        img = img.convert("RGBA").resize((max_width, h), Image.LANCZOS)
    if img.mode != "P":
        img = img.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    img.save(out, format="PNG", optimize=True)
    new = out.getvalue()
    return base64.b64encode(new if len(new) < len(raw) else raw).decode("ascii")


def _clean_stream(text: str, max_lines: int) -> str:
    """Keep only the final state of carriage-return-updated lines (progress bars) and cut
    long outputs to their head and tail."""
    lines = [ln.rsplit("\r", 1)[-1] for ln in text.split("\n")]
    lines = [ln for ln in lines if not re.fullmatch(r"\s*", ln)] if len(lines) > 1 else lines
    if len(lines) > max_lines:
        head, tail = lines[: max_lines * 2 // 3], lines[-(max_lines // 3):]
        cut = len(lines) - len(head) - len(tail)
        lines = head + [f"... [{cut} lines cut by qrlib.workbook.publish] ..."] + tail
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def relative_paths(text: str, root: Path) -> str:
    """``text`` with the machine's absolute repository path written relative to the
    repository (``/home/x/qrlib/runs/cpu`` -> ``runs/cpu``; its parent -> ``..``)."""
    root = Path(root).resolve()
    for abs_path, rel in ((str(root) + os.sep, ""), (str(root), "."),
                          (str(root.parent) + os.sep, ".." + os.sep)):
        text = text.replace(abs_path, rel)
    return text


_PARAM = re.compile(r"^(\w+) = (.*?)(  # .*)?$")


def merged_parameters(defaults: str, injected: str) -> str:
    """One parameters cell for a published copy: every parameter in the notebook's order
    with this run's value (the profile's where it set one, marked ``[profile]``) and the
    default cell's explanation, instead of a cell of defaults the run did not use followed
    by the injected values without explanation."""
    values = {}
    for line in injected.splitlines():
        m = _PARAM.match(line)
        if m:
            values[m.group(1)] = m.group(2)
    out = ["# This run's parameters: the profile's values ([profile]) over the notebook's "
           "defaults"]
    for line in defaults.splitlines():
        m = _PARAM.match(line)
        if not m:
            out.append(line)
            continue
        name, value, comment = m.group(1), m.group(2), (m.group(3) or "").strip()
        if name in values:
            note = (comment + " [profile]") if comment else "# [profile]"
            out.append(f"{name} = {values.pop(name)}  {note}")
        else:
            out.append(line)
    out += [f"{k} = {v}  # [profile]" for k, v in values.items()]
    return "\n".join(out)


def _merge_parameter_cells(nb: Any) -> None:
    cells = nb.cells
    tags = [c.metadata.get("tags", []) for c in cells]
    d = next((i for i, t in enumerate(tags) if "parameters" in t), None)
    j = next((i for i, t in enumerate(tags) if "injected-parameters" in t), None)
    if d is None or j is None:
        return
    cells[j].source = merged_parameters(cells[d].source, cells[j].source)
    cells[j].outputs = []
    del cells[d]


def drop_plain_fallback(data: dict[str, Any]) -> dict[str, Any]:
    """Drop ``text/plain`` from one output's mime bundle when a richer type is there
    (:data:`qrlib.workbook.noise.RICH`): the ``<Figure size ...>`` or
    ``<IPython.core.display.Markdown object>`` repr beside a PNG or rendered Markdown is never
    shown by JupyterLab or GitHub, but reads as noise in the JSON. Returns ``data``."""
    if "text/plain" in data and any(m in data for m in RICH):
        data.pop("text/plain")
    return data


def strip_notebook(nb: Any, *, max_png_width: int = MAX_PNG_WIDTH,
                   root: Path | None = None) -> Any:
    """A copy of ``nb`` (nbformat node) with heavy outputs removed or shrunk, absolute
    paths under ``root`` (default: the repository) written relative to it, and the default
    and injected parameter cells merged into one (:func:`merged_parameters`)."""
    import nbformat

    root = Path(root or REPO_ROOT)
    nb = nbformat.reads(relative_paths(nbformat.writes(nb), root), as_version=4)
    nb.metadata.pop("widgets", None)
    _merge_parameter_cells(nb)
    for cell in nb.cells:
        cell.metadata = {k: v for k, v in cell.metadata.items() if k in ("tags",)}
        if cell.cell_type != "code":
            continue
        outs = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                out["text"] = _clean_stream(out.get("text", ""), MAX_STREAM_LINES)
                if not out["text"].strip():
                    continue
            data = out.get("data")
            if data is not None:
                for mime in DROP_MIME:
                    data.pop(mime, None)
                if "text/html" in data and "text/plain" in data:
                    if len("".join(data["text/html"])) > MAX_HTML_CHARS:
                        data.pop("text/html")
                drop_plain_fallback(data)
                if "image/png" in data:
                    png = data["image/png"]
                    data["image/png"] = _shrink_png("".join(png) if isinstance(png, list) else png,
                                                    max_png_width)
                    out.setdefault("metadata", {}).pop("image/png", None)
                if not data:
                    continue
            outs.append(out)
        cell.outputs = outs
    return nb


def _minutes(seconds: Any) -> str:
    if not seconds:
        return "?"
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def cost_line(entry: dict[str, Any]) -> str:
    """This run's wall time, the last cold run's (one that trained everything itself) and
    the peak memory, from a manifest entry; names the trainings the run reused."""
    warm = _minutes(entry.get("wall_s"))
    cold = (f"{_minutes(entry['cold_wall_s'])} (at {str(entry.get('cold_commit'))[:10]})"
            if entry.get("cold_wall_s") else "no run from scratch on record at these parameters")
    peak = entry.get("peak_rss_mb")
    text = (f"this run {warm}; from scratch {cold}; peak memory "
            f"{peak / 1024:.1f} GB" if peak else f"this run {warm}; from scratch {cold}")
    reused = entry.get("reused_training") or []
    if reused:
        text += (f"; it reused {len(reused)} finished training(s) from runs/ "
                 f"({'; '.join(reused)}); `tables/<profile>/run_timings.md` lists them)")
    return text


def header_cell(name: str, profile: str, entry: dict[str, Any], executed: str) -> Any:
    import nbformat

    stamp = stamp_text(name, profile, entry, entry.get("fingerprint", "?"))
    text = (f"> **Executed copy, for reading.** `{name}` run with the **`{profile}`** profile "
            f"(`params/{profile}.yaml`) on {executed}: {stamp}.  \n"
            f"> Cost: {cost_line(entry)}.  \n"
            f"> Written by `python -m qrlib run params/{profile}.yaml` (qrlib.workbook.publish): "
            f"outputs only, figures downscaled, no data or weights. `python -m qrlib status "
            f"--profile {profile}` tells whether it is still fresh. Do not edit: the source is "
            f"`notebooks/src/{name}.py`; open `notebooks/{name}.ipynb` to run it yourself.")
    cell = nbformat.v4.new_markdown_cell(text)
    cell.id = HEADER_ID
    return cell


# --------------------------------------------------------------------------- publish
def publish_notebooks(profile: str, *, root: Path | None = None, names: list[str] | None = None,
                      dest: Path | None = None, max_png_width: int = MAX_PNG_WIDTH) -> list[Path]:
    """Copy ``runs/<profile>/notebooks/*.ipynb`` (or ``names``) to
    ``notebooks/executed/<profile>/``, stripped, behind a header cell with the stamp of the
    notebook's manifest entry (commit, tree, fingerprint); returns the paths."""
    import nbformat

    root = Path(root or REPO_ROOT)
    src_dir = root / "runs" / profile / "notebooks"
    dest = Path(dest or root / "notebooks" / "executed" / profile)
    if not src_dir.exists():
        raise QrlibError(f"no executed notebooks under {src_dir}; run `python -m qrlib run "
                         f"params/{profile}.yaml` first")
    paths = sorted(src_dir.glob("[0-9][0-9]_*.ipynb"))
    # an executed copy of a notebook since renamed or removed is left behind, not published
    sources = root / "notebooks" / "src"
    if sources.is_dir():
        paths = [p for p in paths if (sources / f"{p.stem}.py").exists()]
    if names is not None:
        paths = [p for p in paths if p.stem in set(names)]
    manifest = load_manifest(profile, root)
    out = []
    for p in paths:
        entry = manifest.get(p.stem) or {**commit_info(root), "fingerprint": "unknown"}
        nb = nbformat.read(p, as_version=4)
        executed = time.strftime("%Y-%m-%d", time.localtime(p.stat().st_mtime))
        nb = strip_notebook(nb, max_png_width=max_png_width, root=root)
        nb.cells = [c for c in nb.cells if c.get("id") != HEADER_ID]
        nb.cells.insert(0, header_cell(p.stem, profile, entry, executed))
        nb.metadata["qrlib"] = {"profile": profile, "commit": entry.get("commit"),
                                "dirty": entry.get("dirty"), "executed": executed,
                                "fingerprint": entry.get("fingerprint"),
                                "wall_s": entry.get("wall_s")}
        target = dest / p.name
        atomic_write(target, nbformat.writes(nb) + "\n")
        out.append(target)
    write_index(dest, profile)
    return out


def write_index(dest: Path, profile: str) -> Path:
    """``README.md`` of a published folder: one line per notebook with its stamp."""
    import nbformat

    lines = [f"# Executed notebooks of the `{profile}` profile", "",
             f"Written by `python -m qrlib run params/{profile}.yaml` (see "
             "`qrlib/workbook/publish.py`); outputs only, for reading on a repository page or "
             "in JupyterLab without running anything. The runnable notebooks are one folder up. Whether each is still what "
             f"the code at HEAD produces: `python -m qrlib status --profile {profile}`.", "",
             "| notebook | commit | fingerprint | executed | wall time |", "|---|---|---|---|---|"]
    for p in sorted(dest.glob("[0-9][0-9]_*.ipynb")):
        meta = nbformat.read(p, as_version=4).metadata.get("qrlib", {})
        wall = meta.get("wall_s")
        commit = str(meta.get("commit", "?")) + (" (dirty)" if meta.get("dirty") else "")
        lines.append(f"| [{p.stem}]({p.name}) | `{commit}` | `{meta.get('fingerprint') or '-'}` | "
                     f"{meta.get('executed', '?')} | " + (f"{wall:.0f} s" if wall else "") + " |")
    return atomic_write(dest / "README.md", "\n".join(lines) + "\n")


#: The trainer's own lines for a training found finished (:func:`qrlib.rl.train.reuse_note`,
#: with the commit it ran at since that note names it) or resumed from a checkpoint.
REUSE_LINE = re.compile(r"\[qrlib\.rl\.train\] (?:\S*/)?(?P<run>[^/\s]+) already trained to step "
                        r"(?P<step>\d+)(?: \(max_steps \d+\) on [^;\n]*? at commit "
                        r"(?P<commit>[0-9a-f]{7,40}(?: \+ changes)?))?"
                        r"|\[qrlib\.rl\.train\] resuming from checkpoint-(?P<resumed>\d+)")


def _output_text(nb: Any) -> str:
    """Every text output of an executed notebook, joined."""
    parts = []
    for cell in getattr(nb, "cells", None) or nb.get("cells", []):
        for out in cell.get("outputs", []):
            text = out.get("text", "")
            parts.append("".join(text) if isinstance(text, list) else str(text))
    return "\n".join(parts)


def reused_trainings(nb: Any) -> list[str]:
    """The trainings an executed notebook did not run itself, read from the trainer's own
    lines in its outputs: ``"acqo-stage1-bm25 (finished, step 100)"`` for a run found
    complete in the run folder, ``"resumed at step 40"`` for one continued from a
    checkpoint. Its wall time then understates a run from scratch."""
    found = [f"{m['run']} (finished, step {m['step']})" if m["run"]
             else f"resumed at step {m['resumed']}" for m in REUSE_LINE.finditer(_output_text(nb))]
    return list(dict.fromkeys(found))


def reused_from(nb: Any, modules: list[str], run_at: str, root: Path = REPO_ROOT
                ) -> dict[str, dict[str, Any]]:
    """For each finished training an executed notebook reused: the commit it was trained at
    and the notebook's training code changed since (:func:`~qrlib.workbook.freshness.
    training_drift`), which ``qrlib status`` turns into a stale reason; a line without a
    commit (written before the trainer named it) counts as ``"unknown"``."""
    return {m["run"]: {"commit": m["commit"] or "unknown",
                       "changed": training_drift(m["commit"], run_at, modules, root)
                       if m["commit"] else None}
            for m in REUSE_LINE.finditer(_output_text(nb)) if m["run"]}


def _params_key(entry: dict[str, Any]) -> str | None:
    params = (entry.get("inputs") or {}).get("params")
    return value_hash(params) if params is not None else None


def cold_run(entry: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
    """``cold_wall_s``/``cold_commit``/``cold_params`` for a manifest entry: its own wall
    time when it trained everything itself (or, resuming a parked run, that plus the parked
    parts' wall time), else the last such run's, carried over from
    ``previous`` (the entry it replaces) only while the notebook's parameters are the ones
    that run had (a run from scratch with fewer trainings says nothing of today's); empty
    when no such run is on record."""
    def own(e: dict[str, Any]) -> dict[str, Any]:  # a run that trained everything itself
        return {"cold_wall_s": e.get("wall_s"), "cold_commit": e.get("commit"),
                "cold_params": _params_key(e)}

    parked = entry.get("parked")  # a run from scratch split across sessions (qrlib park)
    if parked and set(entry.get("reused_from") or {}) <= set(parked.get("runs") or {}):
        return {**own(entry), "cold_wall_s": round(entry["wall_s"] + parked["wall_s"], 1),
                "cold_parts": parked["parts"] + 1}
    if not entry.get("reused_training"):
        return own(entry)
    previous = previous or {}
    if previous.get("wall_s") and not previous.get("reused_training"):
        rec = own(previous)
    else:
        rec = {k: previous[k] for k in ("cold_wall_s", "cold_commit", "cold_params")
               if previous.get(k)}
    if rec.get("cold_params") and rec["cold_params"] != _params_key(entry):
        return {}
    return rec


#: Vector extensions that set the speed of CPU inference here, fastest first.
ISA_LEVELS = ("amx_bf16", "avx512_bf16", "avx512f", "avx2", "avx")


def machine_info(cpuinfo: str | None = None) -> dict[str, Any]:
    """The machine a run took its wall time on: CPU model, cores and its best vector
    extension of :data:`ISA_LEVELS` (the machines lent here differ: 2-core AVX-512 BF16 and
    2-core AVX2 ones, and torch's and vLLM's CPU kernels run slower without AVX-512), read
    from ``/proc/cpuinfo``."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines()
                  if ln.startswith("model name")), "unknown CPU")
    flags = set(next((ln.split(":", 1)[1].split() for ln in cpuinfo.splitlines()
                      if ln.startswith("flags")), []))
    return {"cpu": model, "cores": os.cpu_count(),
            "isa": next((f for f in ISA_LEVELS if f in flags), "none of " + "/".join(ISA_LEVELS))}


def machine_label(machine: dict[str, Any] | None) -> str:
    """``"AMD EPYC, 2 cores, avx2"``; empty for a run recorded before machines were."""
    if not machine:
        return ""
    return f"{machine.get('cpu')}, {machine.get('cores')} cores, {machine.get('isa')}"


#: What :func:`machine_info` calls a CPU that multiplies bf16 matrices natively.
NATIVE_BF16 = ISA_LEVELS[:2]  # amx_bf16, avx512_bf16


def bf16_note(machine: dict[str, Any]) -> str:
    """A one-line warning for a CPU without native bf16 (empty on one with it): vLLM
    samples in bf16 on every CPU, so there rollouts and sampling run on emulated kernels,
    several times slower (README, "Rollouts")."""
    if machine.get("isa") in NATIVE_BF16:
        return ""
    return (f"[qrlib] note: this CPU ({machine_label(machine)}) has no native bf16 (AMX or "
            f"AVX512-BF16): vLLM's bf16 rollouts and sampling run emulated, several times "
            f"slower (README, 'Rollouts'); plan long trainings (08, 15) on a machine with it")


def timing_table(profile: str, *, root: Path | None = None) -> Any:
    """Wall time and peak memory of each notebook's last run, from the profile's manifest
    (each row from its own run, with its commit), saved as ``tables/<profile>/run_timings``;
    None when no notebook has run."""
    import pandas as pd

    root = Path(root or REPO_ROOT)
    manifest = published_entries(profile, root)
    if not manifest:
        return None
    t = pd.DataFrame([{"notebook": n, "wall_s": e.get("wall_s"), "peak_rss_mb": e.get("peak_rss_mb"),
                       "finished": e.get("finished"), "commit": e.get("commit"),
                       "fingerprint": e.get("fingerprint"),
                       "reused training": "; ".join(e.get("reused_training") or []),
                       # no run from scratch on record for a run that reused training: empty
                       "cold wall_s": e.get("cold_wall_s",
                                            None if e.get("reused_training") else e.get("wall_s")),
                       "cold commit": e.get("cold_commit",
                                            None if e.get("reused_training") else e.get("commit")),
                       "machine": machine_label(e.get("machine"))}
                      for n, e in sorted(manifest.items())])
    t["wall_min"] = t["wall_s"] / 60
    save_table(t, "run_timings", root / "tables" / profile, floatfmt=".1f",
               caption=f"Wall time and peak memory (process + kernel; a run resumed from a "
                       f"park: its highest part's, where the park recorded it) of the last "
                       f"run of each notebook, from tables/{profile}/manifest.json; a run that "
                       f"found a training already done in runs/ names it under 'reused "
                       f"training', and "
                       f"'cold wall_s' is the last run that trained everything itself with the "
                       f"same parameters (empty when none is on record); 'machine' is the "
                       f"CPU the last run took its time on (empty: not recorded then); "
                       f"`python -m qrlib status "
                       f"--profile {profile}` tells which are fresh [profile: {profile}]")
    return t
