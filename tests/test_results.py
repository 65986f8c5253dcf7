"""RESULTS.md is generated from the tables; every number in it is sourced; the README's
time for `make reproduce` is the measured one; executed notebooks publish small."""
from __future__ import annotations

import base64
import io
import re
import subprocess
import sys

import nbformat
import pandas as pd
import pytest

from qrlib.workbook import publish, results, runner
from qrlib.workbook import REPO_ROOT, save_table

PROFILE = "cpu"


@pytest.fixture(scope="module")
def rendered():
    return results.render(PROFILE)


def test_committed_results_md_is_what_the_generator_writes(rendered):
    text, _ = rendered
    committed = (REPO_ROOT / "RESULTS.md").read_text(encoding="utf-8")
    assert committed == text, ("RESULTS.md differs from `python -m qrlib results --profile cpu`; "
                               "regenerate it instead of editing it")


def test_every_number_in_results_md_is_found_in_the_tables_it_cites(rendered):
    text, doc = rendered
    committed = (REPO_ROOT / "RESULTS.md").read_text(encoding="utf-8")
    assert results.audit(committed, doc) == []
    assert len(results.numbers_in(committed)) > 100   # the audit looked at real content
    assert "Not available in this run" not in committed


def test_audit_catches_a_typed_number(rendered):
    text, doc = rendered
    typed = text.replace("## Fusion of sub-query lists",
                         "A typed claim: bm25s is 14.2x faster on NFCorpus.\n\n## Fusion of sub-query lists")
    bad = results.audit(typed, doc)
    assert len(bad) == 1 and "'14.2'" in bad[0]
    # (a real value moved to the wrong cell is caught by the exact-equality test above)


@pytest.mark.parametrize("snippet, expected", [
    ("nDCG@10 0.32 and top-10 overlap 0.94", ["0.32", "0.94"]),
    ("Table 4, Eq. 1-2, issue 10, notebooks 06-07, Qwen2.5-Coder-0.5B", []),
    ("07's adapters and 12's single query; 0.5's", ["0.5"]),
    ("`02_speed.md` 13.6x; 81 % of groups", ["13.6", "81 %"]),
    ("−0.16 → −0.14; 1,380 s", ["0.16", "0.14", "1,380"]),
])
def test_number_scanner_skips_names_and_references(snippet, expected):
    assert [n.text for n in results.numbers_in(snippet)] == expected


def test_readme_states_the_fresh_notebooks_time_and_names_the_stale_ones():
    """The README's time is the sum of the fresh notebooks' own wall times (each from its
    own run), its peak memory theirs, and every other notebook is named as stale."""
    from qrlib.core.io import read_table
    from qrlib.workbook.freshness import profile_status

    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- qrlib:timing -->\n(.*?)\n<!-- /qrlib:timing -->", readme, re.S)
    assert block, "README has no timing block"
    text = block.group(1)
    from qrlib.workbook.profiles import load_profile, long_notebooks

    status = {s.notebook: s.state for s in profile_status(REPO_ROOT / "params" / f"{PROFILE}.yaml")}
    long = long_notebooks(load_profile(REPO_ROOT / "params" / f"{PROFILE}.yaml"))
    fresh = [n for n, st in status.items() if st == "fresh" and n not in long]  # make reproduce's
    t = read_table(REPO_ROOT / "tables" / PROFILE / "run_timings.csv")
    t = t[t["notebook"].isin(fresh)]
    assert len(t) == len(fresh)  # every fresh notebook has its own timing row
    m = re.search(r"the \*\*(\d+) fresh notebooks?\*\* of `make reproduce` took \*\*([\d.]+) min\*\*", text)
    assert m, text
    assert int(m.group(1)) == len(fresh)
    assert abs(float(m.group(2)) - t["wall_s"].sum() / 60) < 0.051
    peak = re.search(r"peak memory \*\*([\d.]+) GB\*\*", text)
    assert peak and abs(float(peak.group(1)) - (t["peak_rss_mb"].max() if len(t) else 0) / 1024) < 0.051
    if long:  # the long set's own sentence: its fresh notebooks' time, apart
        lt = read_table(REPO_ROOT / "tables" / PROFILE / "run_timings.csv")
        lt = lt[lt["notebook"].isin([n for n in long if status[n] == "fresh"])]
        m = re.search(r"its (\d+) fresh notebooks? took \*\*([\d.]+) min\*\* more", text)
        assert m and int(m.group(1)) == len(lt), text
        assert abs(float(m.group(2)) - lt["wall_s"].sum() / 60) < 0.051
    stale = [n for n, st in status.items() if st != "fresh"]
    tail = text.split("not counted:", 1)[1] if "not counted:" in text else ""
    for n in status:  # the stale ones, and only they, are named after "not counted:"
        assert (n in tail) == (n in stale), n
    assert "30-40 min" not in readme and "about an hour" not in readme


def test_results_cli_check_passes_on_the_committed_file():
    proc = subprocess.run([sys.executable, "-m", "qrlib", "results", "--profile", PROFILE, "--check"],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    bad = subprocess.run([sys.executable, "-m", "qrlib", "results", "--profile", "nope"],
                         capture_output=True, text=True, cwd=REPO_ROOT)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no tables" in bad.stderr


# ----------------------------------------------------------------------------- publish
def _png(width: int, height: int) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(width / 100, height / 100), dpi=100)
    rng = np.random.default_rng(0)
    for i in range(8):
        ax.plot(rng.normal(size=200).cumsum(), label=f"line {i}")
    ax.legend()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _executed_notebook():
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {"state": {"x": "y" * 1000}}
    code = nbformat.v4.new_code_cell("plot()")
    code.outputs = [
        nbformat.v4.new_output("stream", name="stderr",
                               text="".join(f"\rprogress {i}%" for i in range(101)) + "\n"),
        nbformat.v4.new_output("stream", name="stdout", text="".join(f"line {i}\n" for i in range(500))),
        nbformat.v4.new_output("display_data", data={
            "image/png": _png(2400, 1600), "application/pdf": "JVBERi0" * 5000,
            "text/plain": "<Figure>"}),
        nbformat.v4.new_output("display_data", data={
            "application/vnd.jupyter.widget-view+json": {"model_id": "abc"}, "text/plain": "bar"}),
    ]
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), code]
    return nb


def test_strip_notebook_shrinks_figures_and_drops_heavy_outputs():
    nb = _executed_notebook()
    before = len(nbformat.writes(nb))
    out = publish.strip_notebook(nb, max_png_width=800)
    after = len(nbformat.writes(out))
    assert after < before / 3
    outs = out.cells[1].outputs
    streams = [o for o in outs if o.output_type == "stream"]
    assert streams[0].text == "progress 100%\n"                 # progress bar: final state only
    assert "lines cut by qrlib.workbook.publish" in streams[1].text
    img = [o for o in outs if "image/png" in o.get("data", {})][0]
    assert "application/pdf" not in img.data
    from PIL import Image

    assert Image.open(io.BytesIO(base64.b64decode(img.data["image/png"]))).width == 800
    assert "text/plain" not in img.data                           # the repr beside the PNG
    assert [o.data["text/plain"] for o in outs if "data" in o and "text/plain" in o.data] == ["bar"]
    assert "widgets" not in out.metadata
    assert all("application/vnd.jupyter.widget-view+json" not in o.get("data", {}) for o in outs)


def _fake_run(root, profile):
    nbdir = root / "runs" / profile / "notebooks"
    nbdir.mkdir(parents=True)
    nbformat.write(_executed_notebook(), nbdir / "01_toy.ipynb")
    from qrlib.workbook.freshness import save_manifest_entry

    save_manifest_entry(profile, "01_toy", {"wall_s": 12.5, "peak_rss_mb": 300, "commit": "abc",
                                            "dirty": False, "fingerprint": "f00d",
                                            "finished": "2025-01-01T00:00:00"}, root)
    save_table(pd.DataFrame({"a": [1]}), "01_toy", root / "tables" / profile)


def test_after_run_publishes_the_cpu_profile_with_a_header_and_an_index(tmp_path, capsys):
    _fake_run(tmp_path, "cpu")
    runner.after_run("cpu", [{"notebook": "01_toy", "status": "ok"}], root=tmp_path)
    out = tmp_path / "notebooks" / "executed" / "cpu" / "01_toy.ipynb"
    nb = nbformat.read(out, as_version=4)
    head = nb.cells[0].source
    assert "`cpu` profile" in head.replace("**", "") and "params/cpu.yaml" in head
    assert nb.metadata["qrlib"]["profile"] == "cpu" and nb.metadata["qrlib"]["wall_s"] == 12.5
    assert "commit abc (clean tree), fingerprint f00d" in head
    assert out.stat().st_size < 200_000
    assert "01_toy" in (out.parent / "README.md").read_text()
    timings = pd.read_csv(tmp_path / "tables" / "cpu" / "run_timings.csv")
    assert list(timings["notebook"]) == ["01_toy"]
    # RESULTS.md is written even from a partial set of tables (sections say what is missing)
    assert "Not available in this run" in (tmp_path / "RESULTS.md").read_text()
    # publishing twice keeps one header
    runner.after_run("cpu", [{"notebook": "01_toy", "status": "ok"}], root=tmp_path)
    nb = nbformat.read(out, as_version=4)
    assert sum(c.get("id") == publish.HEADER_ID for c in nb.cells) == 1


def test_after_run_leaves_other_profiles_unpublished(tmp_path):
    _fake_run(tmp_path, "smoke")
    runner.after_run("smoke", [{"notebook": "01_toy", "status": "ok"}], root=tmp_path)
    assert not (tmp_path / "notebooks" / "executed").exists()
    assert not (tmp_path / "RESULTS.md").exists()
    assert (tmp_path / "tables" / "smoke" / "run_timings.csv").exists()


def test_publishing_failure_never_fails_the_run(tmp_path, capsys):
    runner.after_run("cpu", [{"notebook": "01_x", "status": "ok"}], root=tmp_path)
    assert "publishing the cpu run failed" in capsys.readouterr().out


# ----------------------------------------------------------------------------- record
def test_recorder_round_trips_key_numbers(tmp_path, capsys):
    import numpy as np

    from qrlib.core.errors import QrlibError
    from qrlib.eval.record import Recorder, read_records

    rec = Recorder(tmp_path, "01_toy")
    assert rec("ndcg", np.float64(0.5)) == 0.5
    rec("n", np.int64(3))
    rec("missing", float("nan"))
    rec("table", {"a": np.array([1, 2])})
    assert "[record] ndcg = 0.5" in capsys.readouterr().out
    assert read_records(tmp_path, "01_toy") == {"ndcg": 0.5, "n": 3, "missing": None,
                                                "table": {"a": [1, 2]}}
    assert read_records(tmp_path) == {"01_toy": read_records(tmp_path, "01_toy")}
    Recorder(tmp_path, "01_toy")                      # a new run starts afresh
    assert not (tmp_path / "records" / "01_toy.json").exists()
    with pytest.raises(QrlibError, match="no records of notebook 02_x"):
        read_records(tmp_path, "02_x")
    with pytest.raises(QrlibError, match="not JSON"):
        Recorder(tmp_path, "01_toy")("bad", object())


def test_each_results_section_names_its_commits_and_flags_staleness():
    """Under every section heading built from notebook tables: one line naming the
    notebooks and commits its tables came from, starting with a stale flag exactly when
    one of those notebooks is not fresh at HEAD."""
    from qrlib.workbook.freshness import load_manifest, profile_status

    status = {s.notebook: s for s in profile_status(REPO_ROOT / "params" / f"{PROFILE}.yaml")}
    manifest = load_manifest(PROFILE)
    text = (REPO_ROOT / "RESULTS.md").read_text(encoding="utf-8")
    checked = 0
    for sec in re.split(r"(?m)^(?=## )", text)[1:]:
        lines = sec.split("\n")
        if len(lines) < 3 or not lines[2].startswith(">"):
            continue
        line = lines[2]
        named = re.findall(r"`(\d{2}_\w+)` at `(\w+)`", line)
        assert named, line
        for nb, commit in named:
            entry = manifest.get(nb) or status[nb].entry
            assert commit == entry.get("commit"), (nb, commit)
        stale = [nb for nb, _ in named if status[nb].state != "fresh"]
        assert line.startswith("> **Stale section**") == bool(stale), line
        checked += 1
    assert checked >= 5


def test_a_reused_training_without_a_run_from_scratch_is_a_stated_lower_bound(tmp_path):
    """A notebook that found its training done and has no earlier run that trained it gets an
    empty 'cold wall_s' (not its own shorter time), and the from-scratch total says it is a
    lower bound, naming it; a notebook with a cold record is counted at that record."""
    from qrlib.workbook.freshness import save_manifest_entry

    base = {"peak_rss_mb": 100, "dirty": False, "fingerprint": "f", "finished": "2025-01-01"}
    save_manifest_entry("cpu", "01_cold", {**base, "wall_s": 10.0, "commit": "a"}, tmp_path)
    save_manifest_entry("cpu", "02_warm", {**base, "wall_s": 5.0, "commit": "b",
                                           "reused_training": ["x (finished, step 60)"],
                                           "cold_wall_s": 50.0, "cold_commit": "c"}, tmp_path)
    save_manifest_entry("cpu", "03_unknown", {**base, "wall_s": 7.0, "commit": "d",
                                              "reused_training": ["y (finished, step 60)"]},
                        tmp_path)
    t = publish.timing_table("cpu", root=tmp_path)
    cold = dict(zip(t["notebook"], t["cold wall_s"]))
    assert cold["01_cold"] == 10.0 and cold["02_warm"] == 50.0 and pd.isna(cold["03_unknown"])
    assert results._cold_total(t) == 10.0 + 50.0 + 7.0
    assert results._no_cold_record(t) == ["03_unknown"]
    note = results._lower_bound_note(t)
    assert "lower bound" in note and "03_unknown" in note and "02_warm" not in note
    assert results._lower_bound_note(t[t["notebook"] != "03_unknown"]) == ""


def test_each_run_records_the_machine_its_time_was_taken_on(tmp_path):
    """The CPU model, cores and best vector extension from /proc/cpuinfo; the timing table
    and the README's sentence say which machines the counted runs ran on."""
    from qrlib.workbook.freshness import save_manifest_entry

    info = ("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx avx2 fma\n"
            "processor\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx avx2 fma\n")
    m = publish.machine_info(info)
    assert m["cpu"] == "AMD EPYC" and m["isa"] == "avx2"
    assert publish.machine_info(info.replace("avx2", "avx512f avx512_bf16 avx2"))["isa"] == "avx512_bf16"
    assert publish.machine_info("")["isa"].startswith("none of")
    assert "AMD EPYC" in publish.bf16_note(m) and "no native bf16" in publish.bf16_note(m)
    assert publish.bf16_note(publish.machine_info(info.replace("avx2", "amx_bf16 avx2"))) == ""
    assert publish.bf16_note(publish.machine_info("")) != ""
    base = {"peak_rss_mb": 100, "dirty": False, "fingerprint": "f", "finished": "2025-01-01"}
    save_manifest_entry("cpu", "01_a", {**base, "wall_s": 10.0, "commit": "a", "machine": m},
                        tmp_path)
    save_manifest_entry("cpu", "02_b", {**base, "wall_s": 5.0, "commit": "b"}, tmp_path)
    t = publish.timing_table("cpu", root=tmp_path)
    assert dict(zip(t["notebook"], t["machine"].fillna(""))) == {
        "01_a": f"AMD EPYC, {m['cores']} cores, avx2", "02_b": ""}
    note = results._machines_note(t)
    assert f"1 on AMD EPYC, {m['cores']} cores, avx2" in note and "1 not recorded" in note
