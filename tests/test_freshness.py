"""Per-notebook freshness: the dependency rule on the real notebooks and the cpu profile."""
from __future__ import annotations

import copy

import pytest

from qrlib.workbook import freshness as F
from qrlib import workbook as wb
from qrlib.core.errors import QrlibError

CPU = wb.REPO_ROOT / "params" / "cpu.yaml"
# the workbook package (runner, freshness, publishing, RESULTS.md): no result input
WORKBOOK_FILES = sorted(str(p.relative_to(wb.REPO_ROOT))
                        for p in (wb.REPO_ROOT / "qrlib" / "workbook").glob("*.py"))


def _importers(module: str) -> set[str]:
    return {n for n in wb.notebook_names() if module in F.module_closure(F.source_path(n))}


def test_module_closure_follows_imports_transitively_and_package_data():
    closure = F.module_closure(F.source_path("09_bandit_selection"))
    assert "qrlib/methods/bandits/bandits.py" in closure
    assert "qrlib/methods/bandits/published.yaml" in closure          # package data of an import
    assert "qrlib/methods/bandits/prompts.py" in closure         # the prompts decompose renders
    assert not set(WORKBOOK_FILES) & set(closure)            # the runner is not a result input
    assert "qrlib/rl/train.py" not in closure


def test_editing_a_module_makes_exactly_its_importers_stale():
    # 04 imports the bandit paper's bandits module for its epsilon reading (its 'open readings'
    # table), so it is stale with 09 when bandits.py changes; nothing else imports it
    assert _importers("qrlib/methods/bandits/bandits.py") == {"04_reward_shaping",
                                                              "09_bandit_selection"}
    # 10 reads the training scale of each row through qrlib.eval.scale, which needs no trainer
    assert _importers("qrlib/rl/train.py") == {"05_vanilla_rl", "06_acqo_stage1", "07_acqo_stage2",
                                            "08_sage", "12_acqo_vanilla_rl",
                                            "13_deepretrieval_sql", "14_rlqr",
                                            "15_sage_ablation", "17_deepretrieval_evidence",
                                            "18_acqo_ablation"}
    assert "10_evaluation" in _importers("qrlib/eval/scale.py")
    assert {"qrlib/workbook/runner.py", "qrlib/workbook/publish.py"} <= set(WORKBOOK_FILES)
    imported = set().union(*(F.module_closure(F.source_path(n)) for n in wb.notebook_names()))
    assert not imported & set(WORKBOOK_FILES)        # no notebook imports the workbook


def test_a_papers_modules_reach_only_the_notebooks_that_use_them():
    # pipeline modules of one paper: only their importers
    assert _importers("qrlib/methods/acqo/curriculum.py") == {"06_acqo_stage1", "07_acqo_stage2",
                                                             "12_acqo_vanilla_rl",
                                                             "16_acqo_transfer",
                                                             "18_acqo_ablation"}
    assert _importers("qrlib/methods/acqo/transfer.py") == {"16_acqo_transfer",
                                                           "18_acqo_ablation"}
    assert _importers("qrlib/methods/acqo/ablation.py") == {"18_acqo_ablation"}
    assert _importers("qrlib/generation/reader.py") == {"16_acqo_transfer"}
    assert _importers("qrlib/methods/sage/bestofn.py") == {"08_sage"}
    assert _importers("qrlib/methods/sage/pipeline.py") == {"08_sage", "15_sage_ablation"}
    assert _importers("qrlib/methods/rlqr/synthesis.py") == {"14_rlqr"}
    assert _importers("qrlib/methods/deepretrieval/evidence.py") == {
        "11_deepretrieval_tasks", "16_acqo_transfer", "17_deepretrieval_evidence"}
    assert _importers("qrlib/methods/deepretrieval/evidence_rl.py") == {
        "17_deepretrieval_evidence"}
    assert _importers("qrlib/methods/deepretrieval/sql_task.py") == {"13_deepretrieval_sql"}
    # a paper's registrations reach the notebooks that resolve names (rewrite, env, train),
    # not one that only reads published numbers (02) or splits queries (03)
    rewards = _importers("qrlib/methods/acqo/rewards.py")
    assert {"04_reward_shaping", "05_vanilla_rl", "06_acqo_stage1", "08_sage"} <= rewards
    assert not rewards & {"01_data_analysis", "02_index_build", "03_rank_score_fusion"}
    assert _importers("qrlib/methods/registry.py") == rewards
    # published numbers: each paper's file and the references are inputs of their readers
    readers = _importers("qrlib/eval/published/__init__.py")
    assert {"02_index_build", "09_bandit_selection"} <= readers
    assert _importers("qrlib/eval/published/references.yaml") == readers
    assert readers <= _importers("qrlib/methods/sage/published.yaml")
    assert _importers("qrlib/methods/bandits/prompts.py") >= {"03_rank_score_fusion",
                                                             "09_bandit_selection"}
    closure = F.module_closure(F.source_path("01_data_analysis"))
    assert not [m for m in closure if m.startswith("qrlib/methods/")]


def _fresh_manifest(profile):
    """A manifest as if every notebook had just run at the working tree."""
    manifest = {}
    for n in wb.notebook_names():
        params = wb.parameters_for(profile, n, wb.notebook_parameters(n))
        inputs = {**F.static_inputs(n, params), "data": {},
                  "upstream": {u: manifest[u]["fingerprint"] for u in F.declared_reads(n)}}
        manifest[n] = {"inputs": inputs, "fingerprint": F.fingerprint(inputs), "commit": "x"}
    return manifest


def _stale(profile, manifest):
    out: dict[str, F.Status] = {}
    for n in wb.notebook_names():
        params = wb.parameters_for(profile, n, wb.notebook_parameters(n))
        out[n] = F.notebook_status(n, params, manifest, out)
    return {n: s.reasons for n, s in out.items() if s.state != "fresh"}


def test_a_profile_section_makes_its_notebook_and_declared_readers_stale():
    profile = wb.load_profile(CPU)
    manifest = _fresh_manifest(profile)
    assert _stale(profile, manifest) == {}
    changed = copy.deepcopy(profile)
    changed["notebooks"].setdefault("05_vanilla_rl", {})["train_steps"] = 999
    assert _stale(changed, manifest) == {
        "05_vanilla_rl": ["parameter train_steps changed"],
        "10_evaluation": ["reads 05_vanilla_rl, which is stale"],
        "20_trained_rows": ["reads 05_vanilla_rl, which is stale"]}
    # a global reaches every notebook that declares it
    changed = copy.deepcopy(profile)
    changed["globals"]["seed"] = 12345
    assert set(_stale(changed, manifest)) == {
        n for n in wb.notebook_names() if "seed" in wb.notebook_parameters(n)} | {"10_evaluation"}


def test_a_changed_module_is_named_in_the_reason(monkeypatch):
    profile = wb.load_profile(CPU)
    manifest = _fresh_manifest(profile)
    real = F.file_hash
    monkeypatch.setattr(F, "file_hash",
                        lambda p: "edited" if p.name == "bandits.py" else real(p))
    stale = _stale(profile, manifest)
    assert set(stale) == {"04_reward_shaping", "09_bandit_selection"}
    assert stale["09_bandit_selection"][0].startswith("qrlib/methods/bandits/bandits.py changed")


def test_declared_reads_must_name_earlier_notebooks(tmp_path):
    src = tmp_path / "notebooks" / "src"
    src.mkdir(parents=True)
    (src / "01_a.py").write_text("# %%\n")
    (src / "02_b.py").write_text("# ---\n# jupyter:\n#   qrlib:\n#     reads: [03_c]\n# ---\n")
    with pytest.raises(QrlibError, match="02_b: declares reading '03_c', which is not an earlier"):
        F.declared_reads("02_b", tmp_path)
    (src / "02_b.py").write_text("# ---\n# jupyter:\n#   qrlib:\n#     reads: 01_a\n# ---\n")
    with pytest.raises(QrlibError, match="must be a list of notebook names"):
        F.declared_reads("02_b", tmp_path)


def test_stamps_replace_older_stamps(tmp_path):
    from qrlib.core.io import read_table, save_table
    from qrlib.workbook.publish import _stamp_file

    import pandas as pd

    paths = save_table(pd.DataFrame({"a": [1, 2]}), "01_t", tmp_path, caption="cap")
    for fp in ("aaa", "bbb"):
        for p in paths.values():
            _stamp_file(p, f"01_t, profile cpu, commit c (clean tree), fingerprint {fp}")
    csv = paths["csv"].read_text()
    assert csv.count("# qrlib:") == 1 and "fingerprint bbb" in csv
    assert list(read_table(paths["csv"])["a"]) == [1, 2]
    md = paths["md"].read_text()
    assert md.count("`qrlib:") == 1 and "fingerprint bbb" in md and "cap" in md


def test_reasons_for_committed_documents_do_not_depend_on_git_state(monkeypatch):
    """RESULTS.md is committed: its text must be the same on a dirty and a clean clone
    (CI failed once because a file uncommitted at generation time was marked so)."""
    profile = wb.load_profile(CPU)
    manifest = _fresh_manifest(profile)
    real = F.file_hash
    monkeypatch.setattr(F, "file_hash",
                        lambda p: "edited" if p.name == "bandits.py" else real(p))
    monkeypatch.setattr(F, "uncommitted", lambda paths, root: set(paths))
    name = "09_bandit_selection"
    params = wb.parameters_for(profile, name, wb.notebook_parameters(name))
    noted = F.notebook_status(name, params, manifest, {})
    plain = F.notebook_status(name, params, manifest, {}, note_uncommitted=False)
    assert noted.reasons[0].endswith("changed (uncommitted)")
    assert plain.reasons[0] == "qrlib/methods/bandits/bandits.py changed"


def test_a_reused_training_from_older_code_makes_its_notebook_stale():
    profile = wb.load_profile(CPU)
    manifest = _fresh_manifest(profile)
    manifest["13_deepretrieval_sql"]["reused_from"] = {
        "sql-scratch": {"commit": "a6b3571252", "changed": ["qrlib/rl/trainer.py"]}}
    stale = _stale(profile, manifest)
    assert stale["13_deepretrieval_sql"] == [
        "reused training sql-scratch was trained at a6b3571252, before changes to "
        "qrlib/rl/trainer.py; move runs/<profile>/rl/sql-scratch aside to retrain"]
    assert stale["20_trained_rows"] == ["reads 13_deepretrieval_sql, which is stale"]
