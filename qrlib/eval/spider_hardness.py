"""Spider's hardness levels (easy / medium / hard / extra) of a parsed SQL query.

The rules of Spider's official evaluation (Yu et al. 2018, ``evaluation.py`` of
taoyds/spider: ``count_component1``, ``count_component2``, ``count_others``,
``Evaluator.eval_hardness``), applied to the parse tree that Spider's ``process_sql``
produces, which ``dev.json`` ships as each example's ``sql`` field. Reproduced rule for
rule, quirks included, so that per-level execution accuracy is Spider's: an aggregate is
"counted" in a WHERE/HAVING condition when its first field (the NOT flag) is set, and the
HAVING list is counted with its ``and``/``or`` tokens. On Spider dev the levels come out
as 248 / 446 / 174 / 166 (tested).

A parsed query is a dict with ``select``, ``from`` (``table_units``, ``conds``), ``where``,
``groupBy``, ``having``, ``orderBy``, ``limit``, ``intersect``, ``union``, ``except``;
conditions alternate ``cond_unit, "and"|"or", cond_unit, ...`` with
``cond_unit = (not, op_id, val_unit, val1, val2)``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qrlib.core.errors import QrlibError

LEVELS = ("easy", "medium", "hard", "extra")
WHERE_OPS = ("not", "between", "=", ">", "<", ">=", "<=", "!=", "in", "like", "is", "exists")
KEYS = ("select", "from", "where", "groupBy", "having", "orderBy", "limit", "intersect",
        "union", "except")


def _count_agg(units: Sequence[Any]) -> int:
    return sum(1 for u in units if u[0] != 0)  # AGG_OPS.index("none") == 0


def _conds(sql: Mapping[str, Any]) -> list[Any]:
    return sql["from"]["conds"][::2] + sql["where"][::2] + sql["having"][::2]


def nested(sql: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Sub-queries: in a condition's values, and the INTERSECT / EXCEPT / UNION operand."""
    out = [v for c in _conds(sql) for v in (c[3], c[4]) if isinstance(v, dict)]
    return out + [sql[k] for k in ("intersect", "except", "union") if sql[k] is not None]


def component1(sql: Mapping[str, Any]) -> int:
    """WHERE, GROUP BY, ORDER BY, LIMIT, each join, each OR and each LIKE."""
    n = sum(1 for k in ("where", "groupBy", "orderBy") if len(sql[k]) > 0)
    n += sql["limit"] is not None
    n += max(len(sql["from"]["table_units"]) - 1, 0)
    ao = sql["from"]["conds"][1::2] + sql["where"][1::2] + sql["having"][1::2]
    n += sum(1 for t in ao if t == "or")
    n += sum(1 for c in _conds(sql) if c[1] == WHERE_OPS.index("like"))
    return n


def others(sql: Mapping[str, Any]) -> int:
    """More than one aggregate, select column, WHERE condition or GROUP BY column."""
    agg = _count_agg(sql["select"][1]) + _count_agg(sql["where"][::2]) + _count_agg(sql["groupBy"])
    if len(sql["orderBy"]) > 0:
        agg += _count_agg([u[1] for u in sql["orderBy"][1] if u[1]]
                          + [u[2] for u in sql["orderBy"][1] if u[2]])
    agg += _count_agg(sql["having"])
    return (int(agg > 1) + int(len(sql["select"][1]) > 1) + int(len(sql["where"]) > 1)
            + int(len(sql["groupBy"]) > 1))


def hardness(sql: Mapping[str, Any]) -> str:
    """Spider's level of a parsed query (``Evaluator.eval_hardness``)."""
    if not isinstance(sql, Mapping) or any(k not in sql for k in KEYS):
        missing = [k for k in KEYS if not isinstance(sql, Mapping) or k not in sql]
        raise QrlibError(f"hardness: not a Spider parse tree (missing {', '.join(missing)}); "
                         "pass an example's 'sql' field from dev.json")
    c1, c2, ot = component1(sql), len(nested(sql)), others(sql)
    if c1 <= 1 and ot == 0 and c2 == 0:
        return "easy"
    if (ot <= 2 and c1 <= 1 and c2 == 0) or (c1 <= 2 and ot < 2 and c2 == 0):
        return "medium"
    if ((ot > 2 and c1 <= 2 and c2 == 0) or (2 < c1 <= 3 and ot <= 2 and c2 == 0)
            or (c1 <= 1 and ot == 0 and c2 <= 1)):
        return "hard"
    return "extra"
