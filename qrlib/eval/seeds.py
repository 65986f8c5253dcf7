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
ran. Pure functions of the tables on disk.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from qrlib.eval.claims import Claim, verdict_of
from qrlib.eval.stats import verdict

__all__ = ["SEED_SUFFIX", "replica_dirs", "spread", "claim_verdict", "ROW_KEY"]

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


def _row(table: Any, key: dict[str, Any]) -> Any | None:
    sel = table
    for k, v in key.items():
        sel = sel[sel[k] == v]
    return sel.iloc[0] if len(sel) == 1 else None


def spread(rows: Any, table: str, tables_dir: str | Path, *, base_seed: int = 0) -> Any:
    """For each comparison row of ``rows`` (read from ``tables_dir/<table>.csv``, the base
    seed), its difference at every seed replica that has the same row: ``seeds`` (how many
    runs), ``runs`` (``(seed, diff, lo, hi)`` each), ``diff per seed`` (``seed: diff [lo, hi]``), ``diff mean``, ``diff min``, ``diff
    max`` and ``every seed`` (the verdict every run shares, or ``"differs"``)."""
    import pandas as pd

    from qrlib.core.io import read_table

    replicas = [(s, read_table(d / f"{table}.csv")) for s, d in replica_dirs(tables_dir)
                if (d / f"{table}.csv").exists()]
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
    published the claim's table: **held** only when it holds at every one of them; ``seeds``
    says how many runs were judged."""
    tables_dir = Path(tables_dir)
    v = dict(verdict_of(c, tables_dir))
    others = [(s, verdict_of(c, d)) for s, d in replica_dirs(tables_dir)
              if (d / f"{c.table}.csv").exists()]
    others = [(s, o) for s, o in others if o["verdict"] != "not run"]
    v["seeds"] = 1 + len(others) if v["verdict"] != "not run" else 0
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
