

def test_span_collapses_a_range_whose_ends_read_the_same():
    from qrlib.eval.stats import span

    assert span([1.0, 1.0]) == "100%" and span([0.4, 0.6]) == "40%-60%"
    assert span([1.004, 0.996], ".2f") == "1.00" and span([1.0, 2.5], ".2f") == "1.00-2.50"
