from readme import render

def test_readme_is_rendered_from_index(root):
    assert (root / "README.md").read_text() == render(root), "README.md is stale: python tests/readme.py > README.md"

def test_readme_summary_matches_the_committed_report(root):
    "The README's cpu summary quotes figures/cpu/REPORT.md: the same claim counts and missing items."
    import re
    report = (root / "figures" / "cpu" / "REPORT.md").read_text()
    m = re.search(r"Claims: \*\*(\d+) hold\*\*, \*\*(\d+) fail\*\*, \*\*(\d+) not measurable\*\*", report)
    assert m, "REPORT.md has no claim summary line"
    readme = " ".join((root / "README.md").read_text().split())        # Markdown line breaks are spaces
    want = f"{m[1]} claim checks hold, {m[2]} fail, {m[3]} are not measurable"
    assert want in readme, f"README's cpu summary is stale; REPORT.md says: {want}"
    cov = re.search(r"Paper items covered: (\d+) of (\d+)", report)
    assert f"{cov[1]} of the papers' {cov[2]} items are covered" in readme
