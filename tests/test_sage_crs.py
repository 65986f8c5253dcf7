"""SAGE's CRS under GRPO: identical to Direct for any group-constant baseline (issue 26 item 5)."""
from __future__ import annotations

import random

import pytest

from qrlib.core.errors import QrlibError
from qrlib.methods.sage import crs as C
from qrlib.methods.sage.rewards import sage_crs


def test_group_advantages_match_grpos_formula_by_hand():
    a = C.group_advantages([1.0, 0.0, 0.0, 1.0], eps=0.0)
    std = (1 / 3) ** 0.5 * (4 / 4) ** 0.5  # unbiased std of [1, 0, 0, 1] = sqrt(1/3)
    assert a == pytest.approx([0.5 / std, -0.5 / std, -0.5 / std, 0.5 / std])
    assert C.group_advantages([0.3, 0.3]) == [0.0, 0.0]
    assert C.group_advantages([0.2, 0.6], scale=False) == pytest.approx([-0.2, 0.2])


def test_crs_trains_exactly_as_direct_under_grpo():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(2, 16)
        r = [rng.random() for _ in range(n)]
        direct = C.group_advantages(r)
        assert C.crs_advantages(r) == pytest.approx(direct, abs=1e-9)
        assert C.group_advantages(sage_crs(r)) == pytest.approx(direct, abs=1e-9)  # the registered shaping
        c = rng.uniform(-3, 3)  # any group-constant baseline, e.g. a batch median
        assert C.group_advantages([x - c for x in r]) == pytest.approx(direct, abs=1e-9)


def test_the_readings_under_which_crs_differs():
    r, s = [0.9, 0.7, 0.2, 0.1], [1, 1, 2, 2]
    direct = C.group_advantages(r)
    assert C.crs_advantages(r, reading="no-centring") == pytest.approx([0.45, 0.25, -0.25, -0.35])
    per = C.crs_advantages(r, s, reading="per-strategy")
    assert per != pytest.approx(direct)          # strategy 2's good rollout now counts as good
    assert per[2] > 0 > direct[2]
    with pytest.raises(QrlibError, match="one strategy per reward"):
        C.crs_shaped(r, [1], reading="per-strategy")
    with pytest.raises(QrlibError, match="must be one of"):
        C.crs_shaped(r, reading="batch")
