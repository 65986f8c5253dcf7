"""Best-of-N expectation (SAGE Sec. 3.1): checked against brute force over all draws."""
from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from qrlib.methods.sage.bestofn import best_of_n_curve, best_share, expected_max
from qrlib.core.errors import QrlibError


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_expected_max_equals_the_mean_over_every_draw(n):
    v = [0.1, 0.7, 0.7, 0.0, 0.35]
    brute = np.mean([max(c) for c in combinations(v, n)])
    assert expected_max(v, n) == pytest.approx(brute, abs=1e-12)


def test_best_of_one_is_the_pool_mean_and_best_of_all_is_the_max():
    v = [0.2, 0.9, 0.4, 0.4]
    assert expected_max(v, 1) == pytest.approx(np.mean(v))
    assert expected_max(v, len(v)) == pytest.approx(0.9)


def test_curve_is_monotone_and_averages_over_queries():
    pools = {"a": [0.0, 1.0, 0.0, 0.0], "b": [0.5, 0.5, 0.5, 0.5]}
    c = best_of_n_curve(pools, [1, 2, 4])
    assert c[1] == pytest.approx((0.25 + 0.5) / 2)
    assert c[2] == pytest.approx((0.5 + 0.5) / 2)  # P(the 1.0 is among 2 of 4) = 1/2
    assert c[4] == pytest.approx((1.0 + 0.5) / 2)
    assert c[1] <= c[2] <= c[4]


def test_n_larger_than_the_pool_is_a_one_line_error():
    with pytest.raises(QrlibError, match="N=5, pool 4"):
        expected_max([0, 1, 2, 3], 5)
    with pytest.raises(QrlibError, match="no queries"):
        best_of_n_curve({}, [1])


def test_best_share_splits_ties_and_sums_to_one():
    assert best_share([0.2, 0.9, 0.1], ["s1", "s2", "s3"]) == {"s2": 1.0}
    sh = best_share([0.9, 0.9, 0.1, 0.9], ["s1", "s2", "s3", "s1"])
    assert sh == pytest.approx({"s1": 2 / 3, "s2": 1 / 3})
    with pytest.raises(QrlibError):
        best_share([0.1], [])
