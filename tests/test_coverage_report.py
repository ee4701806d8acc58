"""The OpInfo coverage counts have one source: ``python -m realify coverage``'s report
(docs/coverage.md). README's coverage sentence is written from it, and no other document
copies a count by hand."""

import re
from pathlib import Path

from realify.tools import coverage
from realify.tools.coverage import OpStatus

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "docs" / "coverage.md"


def _survey() -> list[OpStatus]:
    return [
        OpStatus("abs", {"eager": "pass", "decompose": "pass", "compile": "pass", "export": "pass"}),
        OpStatus("geqrf", {"eager": "fail: MissingRuleError: no rule", "decompose": "fail: MissingRuleError: no rule",
                           "compile": "island", "export": "fail: MissingRuleError: no rule"}),
        OpStatus("item", {"eager": "pass", "decompose": "fail: NotImplementedError: x", "compile": "fail: y",
                          "export": "pass"}),
    ]


def test_a_report_reads_back_as_the_survey_it_was_written_from():
    statuses = _survey()
    version, read = coverage.parse(coverage.render(statuses, seconds=12, torch_version="9.9.9+cpu"))
    assert version == "9.9.9+cpu"
    assert read == statuses


def test_counts_add_up_per_front_end():
    counts = coverage.Counts.of(_survey())
    assert counts == coverage.Counts(total=3, passing={"eager": 2, "decompose": 1, "compile": 1, "export": 2},
                                     all_front_ends=1, islands=1)
    sentence = coverage.readme_counts(_survey(), "9.9.9+cpu")
    assert "On torch 9.9.9's 3 entries" in sentence
    assert "`decompose` 1/3" in sentence and "(1 more when ops" in sentence and "1 pass every front end" in sentence


def test_the_report_summary_is_what_its_rows_add_up_to():
    text = REPORT.read_text()
    version, statuses = coverage.parse(text)
    seconds = re.search(r"^torch \S+, (\d+) s$", text, re.M)
    assert coverage.render(statuses, seconds=float(seconds.group(1)) if seconds else None,
                           torch_version=version) == text, (
        "docs/coverage.md was edited by hand: regenerate it with `make coverage`")


def test_readme_counts_are_the_reports():
    version, statuses = coverage.parse(REPORT.read_text())
    readme = (ROOT / "README.md").read_text()
    assert coverage.with_readme_counts(readme, statuses, version) == readme, (
        "README's coverage counts differ from docs/coverage.md: run `make coverage` (it rewrites both)")


def test_no_document_copies_an_opinfo_count_by_hand():
    _version, statuses = coverage.parse(REPORT.read_text())
    total = len(statuses)
    readme = (ROOT / "README.md").read_text()
    start, end = readme.index(coverage.README_START), readme.index(coverage.README_END)
    elsewhere = {"README.md": readme[:start] + readme[end:]}
    elsewhere |= {f"docs/{p.name}": p.read_text() for p in (ROOT / "docs").glob("*.md") if p != REPORT}
    copied = re.compile(rf"\b\d+ ?/ ?{total}\b|\b\d+\s+of\s+(the\s+)?\d+\s+(OpInfo|ops)\b")
    hits = {name: [m.group(0) for m in copied.finditer(text)] for name, text in elsewhere.items()}
    assert not any(hits.values()), f"OpInfo counts copied by hand (link to docs/coverage.md instead): {hits}"


def test_readme_counts_come_only_from_a_full_survey(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as refused:
        coverage.main(["--out", str(tmp_path / "c.md"), "--readme", str(tmp_path / "README.md"), "--only", "abs"])
    assert refused.value.code == 2
    assert "--readme needs the full survey" in capsys.readouterr().err
