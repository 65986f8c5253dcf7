"""Spider's hardness levels, rule for rule (qrlib.eval.spider_hardness)."""
from __future__ import annotations

import collections
import copy
import json

import pytest

from qrlib.core.errors import QrlibError
from qrlib.eval.spider_hardness import hardness

EMPTY = {"select": [False, [[0, [0, [0, 1, False], None]]]],
         "from": {"table_units": [["table_unit", 0]], "conds": []}, "where": [], "groupBy": [],
         "having": [], "orderBy": [], "limit": None, "intersect": None, "union": None,
         "except": None}


def test_spider_dev_has_the_official_level_counts(shared_data):
    """Spider's evaluation script reports 248 easy, 446 medium, 174 hard, 166 extra on dev."""
    dev = json.loads((shared_data / "spider-dev" / "dev.json").read_text())
    counts = collections.Counter(hardness(e["sql"]) for e in dev)
    assert counts == {"easy": 248, "medium": 446, "hard": 174, "extra": 166}


def test_levels_by_hand():
    assert hardness(EMPTY) == "easy"
    two_cols = copy.deepcopy(EMPTY)
    two_cols["select"][1].append([0, [0, [0, 2, False], None]])
    assert hardness(two_cols) == "medium"               # one "other" (two select columns)
    nested = copy.deepcopy(EMPTY)
    nested["union"] = copy.deepcopy(EMPTY)
    assert hardness(nested) == "hard"                    # one nested query, nothing else
    nested["limit"] = 1
    nested["orderBy"] = ["asc", [[0, [0, 1, False], None]]]
    assert hardness(nested) == "extra"


def test_not_a_parse_tree_is_a_one_line_error():
    with pytest.raises(QrlibError, match="missing limit"):
        hardness({k: v for k, v in EMPTY.items() if k != "limit"})
    with pytest.raises(QrlibError, match="not a Spider parse tree"):
        hardness("SELECT 1")
