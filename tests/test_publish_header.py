"""The published copy of a notebook: one parameters cell with this run's values and their
explanations, and a header that states the run's cost (qrlib.workbook.publish)."""
from __future__ import annotations

import nbformat

from qrlib.workbook import publish


def _nb():
    nb = nbformat.v4.new_notebook()
    d = nbformat.v4.new_code_cell('profile = "dev"  # profile name\nseed = 0  # subsets\n'
                                  'model = "smollm2"  # the policy')
    d.metadata["tags"] = ["parameters"]
    inj = nbformat.v4.new_code_cell('# Parameters\nprofile = "cpu"\nmodel = "qwen"\n')
    inj.metadata["tags"] = ["injected-parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# title"), d, inj,
                nbformat.v4.new_code_cell("print(1)")]
    return nb


def test_published_copy_opens_on_the_runs_parameters_with_their_explanations(tmp_path):
    out = publish.strip_notebook(_nb(), root=tmp_path)
    code = [c.source for c in out.cells if c.cell_type == "code"]
    assert len(code) == 2 and 'profile = "dev"' not in code[0]
    assert 'profile = "cpu"  # profile name [profile]' in code[0]
    assert "seed = 0  # subsets" in code[0]  # a default the profile left alone, as it was
    assert 'model = "qwen"  # the policy [profile]' in code[0]


def test_header_states_this_run_the_run_from_scratch_and_peak_memory():
    e = {"wall_s": 971.7, "cold_wall_s": 2744.5, "cold_commit": "3a7a3eafd8aa",
         "peak_rss_mb": 12274, "reused_training": ["scifact-bm25-expand (finished, step 60)"],
         "commit": "abc", "dirty": False, "fingerprint": "f"}
    text = publish.header_cell("05_vanilla_rl", "cpu", e, "2026-11-27").source
    assert ("Cost: this run 16.2 min; from scratch 45.7 min (at 3a7a3eafd8); peak memory "
            "12.0 GB; it reused 1 finished training(s)") in text
    bare = publish.header_cell("01_x", "cpu", {"wall_s": 9.8, "commit": "abc"}, "d").source
    assert "this run 10 s; from scratch no run from scratch on record" in bare
