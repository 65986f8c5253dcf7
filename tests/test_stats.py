

def test_span_collapses_a_range_whose_ends_read_the_same():
    from qrlib.eval.stats import span

    assert span([1.0, 1.0]) == "100%" and span([0.4, 0.6]) == "40%-60%"
    assert span([1.004, 0.996], ".2f") == "1.00" and span([1.0, 2.5], ".2f") == "1.00-2.50"


def test_mean_interval_brackets_the_mean_and_shrinks_with_n():
    from qrlib.eval.stats import mean_interval

    lo, hi = mean_interval([0.0, 1.0] * 5, n=2000)
    assert lo < 0.5 < hi and hi - lo > 0.3
    lo2, hi2 = mean_interval([0.0, 1.0] * 500, n=2000)
    assert lo2 < 0.5 < hi2 and hi2 - lo2 < 0.1
    assert mean_interval([0.3, 0.3, 0.3]) == (0.3, 0.3)
