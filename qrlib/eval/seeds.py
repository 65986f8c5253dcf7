"""How far a rerun with another seed moves a trained result.

Training here is not bit-reproducible: the same notebook run again at the same commit,
parameters and seed gives another cold start and another reward curve (vLLM sampling and
CPU kernels are not deterministic across runs), and another seed draws other training
questions and rollouts. So a headline row is trained more than once: a profile's **seed
replicas** are sibling profiles named ``<profile>-seed<N>`` (``params/cpu-seed1.yaml``,
``params/cpu-seed2.yaml``) that extend it with another global ``seed`` and train only its
headline rows; their tables land in ``tables/<profile>-seed<N>/``.

:func:`replica_dirs` finds them; :func:`spread` puts each row's difference at every seed
side by side (mean, range, and whether every seed's interval lies on the same side of 0);
:func:`claim_verdict` lets a scoreboard claim hold only when it holds at every seed that
ran. A replica counts only where it ran the same code as the base run: when both
profiles' ``manifest.json`` record the notebook's inputs and its source or qrlib modules
differ (a replica trained before a trainer change), :func:`replicas_for` leaves it out and
says why. Pure functions of the tables on disk.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from qrlib.eval.claims import Claim, verdict_of
from qrlib.eval.stats import verdict

__all__ = ["SEED_SUFFIX", "replica_dirs", "replicas_for", "spread", "claim_verdict", "ROW_KEY"]

SEED_SUFFIX = "-seed"
#: The columns that name one comparison row across runs of the same notebook.
ROW_KEY = ("paper", "dataset", "retriever", "metric", "method", "baseline")


def replica_dirs(tables_dir: str | Path) -> list[tuple[int, Path]]:
    """``[(seed, tables/<profile>-seed<seed>), ...]`` that exist beside ``tables_dir``, by seed."""
    tables_dir = Path(tables_dir)
    pat = re.compile(re.escape(tables_dir.name + SEED_SUFFIX) + r"(\d+)$")
    found = [(int(m.group(1)), p) for p in tables_dir.parent.glob(f"{tables_dir.name}"
                                                                    f"{SEED_SUFFIX}*")
             if p.is_dir() and (m := pat.match(p.name))]
    return sorted(found)


def _code(tables_dir: Path, table: str) -> tuple[Any, str] | None:
    """The source and module hashes the manifest records for the notebook that wrote
    ``table`` (``NN_...``), and its commit; None when there is no such record."""
    from qrlib.core.io import load_json

    try:
        manifest = load_json(tables_dir / "manifest.json")
    except (OSError, ValueError):
        return None
    entry = next((e for n, e in manifest.items() if n[:3] == table[:3]), None)
    inputs = (entry or {}).get("inputs") or {}
    if "modules" not in inputs:
        return None
    return (inputs.get("source"), inputs["modules"]), str(entry.get("commit", "?"))


def replicas_for(table: str, tables_dir: str | Path) -> tuple[list[tuple[int, Path]], list[str]]:
    """``(kept, left_out)``: the seed replicas that published ``table`` and ran the same
    code as the base run (same notebook source and qrlib modules, by the manifests), and a
    sentence for each one left out (``"seed 1 (ran other code, at commit abc)"``)."""
    tables_dir = Path(tables_dir)
    base = _code(tables_dir, table)
    kept, left = [], []
    for s, d in replica_dirs(tables_dir):
        if not (d / f"{table}.csv").exists():
            continue
        other = _code(d, table)
        if base is not None and other is not None and other[0] != base[0]:
            left.append(f"seed {s} (ran other code, at commit {other[1]})")
        else:
            kept.append((s, d))
    return kept, left


def _row(table: Any, key: dict[str, Any]) -> Any | None:
    sel = table
    for k, v in key.items():
        sel = sel[sel[k] == v]
    return sel.iloc[0] if len(sel) == 1 else None


def spread(rows: Any, table: str, tables_dir: str | Path, *, base_seed: int = 0) -> Any:
    """For each comparison row of ``rows`` (read from ``tables_dir/<table>.csv``, the base
    seed), its difference at every seed replica that has the same row and ran the same code
    (:func:`replicas_for`): ``seeds`` (how many runs), ``runs`` (``(seed, diff, lo, hi)``
    each), ``diff per seed`` (``seed: diff [lo, hi]``), ``diff mean``, ``diff min``, ``diff
    max`` and ``every seed`` (the verdict every run shares, or ``"differs"``)."""
    import pandas as pd

    from qrlib.core.io import read_table

    replicas = [(s, read_table(d / f"{table}.csv"))
                for s, d in replicas_for(table, tables_dir)[0]]
    out = []
    for _, r in rows.iterrows():
        key = {k: r[k] for k in ROW_KEY}
        runs = [(base_seed, r)] + [(s, x) for s, t in replicas
                                   if (x := _row(t, key)) is not None]
        diffs = [float(x["diff"]) for _, x in runs]
        verdicts = {verdict(x["lo"], x["hi"]) for _, x in runs}
        out.append({**key, "seeds": len(runs),
                    "runs": [(s, float(x["diff"]), float(x["lo"]), float(x["hi"]))
                             for s, x in runs],
                    "diff per seed": "; ".join(f"{s}: {float(x['diff']):+.3f} "
                                               f"[{float(x['lo']):+.3f}, {float(x['hi']):+.3f}]"
                                               for s, x in runs),
                    "diff mean": sum(diffs) / len(diffs), "diff min": min(diffs),
                    "diff max": max(diffs),
                    "every seed": verdicts.pop() if len(verdicts) == 1 else "differs"})
    return pd.DataFrame(out, columns=[*ROW_KEY, "seeds", "runs", "diff per seed", "diff mean",
                                      "diff min", "diff max", "every seed"])


def claim_verdict(c: Claim, tables_dir: str | Path) -> dict[str, Any]:
    """:func:`qrlib.eval.claims.verdict_of` on ``tables_dir`` and on every seed replica that
    published the claim's table with the same code (:func:`replicas_for`): **held** only when
    it holds at every one of them; ``seeds`` says how many runs were judged, ``left out``
    names the replicas that ran other code."""
    tables_dir = Path(tables_dir)
    v = dict(verdict_of(c, tables_dir))
    kept, left = replicas_for(c.table, tables_dir)
    others = [(s, verdict_of(c, d)) for s, d in kept]
    others = [(s, o) for s, o in others if o["verdict"] != "not run"]
    v["seeds"] = 1 + len(others) if v["verdict"] != "not run" else 0
    v["left out"] = left if v["verdict"] != "not run" else []
    if v["verdict"] == "not run" or not others:
        return v
    missed = [(s, o) for s, o in others if o["verdict"] != "held"]
    if v["verdict"] == "held" and missed:
        v.update(verdict="not held",
                 why=(f"held at the base seed, not at seed {', '.join(str(s) for s, _ in missed)}"
                      + "".join(f"; seed {s}: {o['ours']}" for s, o in missed)))
    elif v["verdict"] == "held":
        v["why"] = f"held at all {len(others) + 1} seeds"
    return v
