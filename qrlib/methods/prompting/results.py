"""RESULTS.md sections of the prompting baselines: the training-free rows (notebook 19).
Assembled by :mod:`qrlib.workbook.results` (entry-point group ``qrlib.results``)."""
from __future__ import annotations

from qrlib.workbook.resultsdoc import Doc, Section, comparisons_section


def _prompting(d: Doc) -> str:
    """The training-free rows every RL row is measured against (notebook 19)."""
    return comparisons_section(
        d, "19_comparisons", "Prompting baselines without training (notebook 19)",
        "The untrained policy used without RL (Xu et al., `arXiv:2510.17139`): SPQE's "
        "pseudo-document expansion in three readings (`spqe` q + d, `spqe-q2d` the query "
        "five times + d, `pseudo-doc` d alone) and the best of its rewriting prompts "
        "(chosen on training queries; `19_prompt_selection.md`), each against the raw query "
        "on the whole test split; a trained row is worth its training only where it beats "
        "these too.")


#: ``(order, title, function)``, in RESULTS.md's order (:mod:`qrlib.workbook.resultsdoc`).
SECTIONS: list[Section] = [(150, "prompting", _prompting)]
