import re, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from readme import render

def test_readme_is_rendered_from_index(root):
    assert (root / "README.md").read_text() == render(root), "README.md is stale: python tools/readme.py > README.md"

def test_readme_is_short(root):
    n = len((root / "README.md").read_text().splitlines())
    assert n <= 150, f"README.md has {n} lines; the rest belongs in the chapters, the report or benchmarks/"

def test_readme_results_match_the_committed_report(root):
    "The README's table, generated from the records, totals to REPORT.md's claim counts."
    report = (root / "figures" / "cpu" / "REPORT.md").read_text()
    m = re.search(r"Claims: \*\*(\d+) hold\*\*, \*\*(\d+) fail\*\*, \*\*(\d+) not measurable\*\*", report)
    assert m, "REPORT.md has no claim summary line"
    assert f"| all | {m[1]} | {m[2]} | {m[3]} |" in (root / "README.md").read_text()

def test_readme_holds_no_run_log(root):
    "What a run took or found on a date belongs in the records and benchmarks/, not in the README."
    text = (root / "README.md").read_text()
    logs = re.findall(r".*(?:\b20\d\d-\d\d-\d\d\b|\b[0-9a-f]{7,40}'s run\b|\bin (?:the|our) (?:last|latest) run\b).*", text)
    assert not logs, f"dated run paragraphs in README.md: {logs[:3]}"
