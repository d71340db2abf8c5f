from readme import render

def test_readme_is_rendered_from_index(root):
    assert (root / "README.md").read_text() == render(root), "README.md is stale: python tests/readme.py > README.md"
