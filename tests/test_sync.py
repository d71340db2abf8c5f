"Notebooks are the source: the exported library and the clean notebooks must match what is committed."
import filecmp, shutil, subprocess
from pathlib import Path

def _copy_repo(root: Path, dst: Path):
    for name in ("nbs", "posvec_lib"): shutil.copytree(root / name, dst / name, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    for name in ("settings.ini", "setup.py", "README.md"): shutil.copy(root / name, dst / name)

def _diff(a: Path, b: Path, pattern: str):
    out = []
    for f in sorted(a.rglob(pattern)):
        g = b / f.relative_to(a)
        if not g.exists() or not filecmp.cmp(f, g, shallow=False): out.append(str(f.relative_to(a)))
    out += [str(g.relative_to(b)) for g in b.rglob(pattern) if not (a / g.relative_to(b)).exists()]
    return out

def test_library_matches_notebooks(root, venv_bin, tmp_path):
    _copy_repo(root, tmp_path)
    subprocess.run([str(venv_bin / "nbdev_export")], cwd=tmp_path, check=True, capture_output=True)
    assert _diff(root / "posvec_lib", tmp_path / "posvec_lib", "*.py") == [], "run nbdev_export and commit posvec_lib/"

def test_notebooks_are_clean(root, venv_bin, tmp_path):
    _copy_repo(root, tmp_path)
    subprocess.run([str(venv_bin / "nbdev_clean")], cwd=tmp_path, check=True, capture_output=True)
    assert _diff(root / "nbs", tmp_path / "nbs", "*.ipynb") == [], "run nbdev_clean and commit nbs/"

def test_parameters_tag_survives_clean(root):
    import json
    for nb in (root / "nbs" / "experiments").glob("*.ipynb"):
        cells = json.loads(nb.read_text())["cells"]
        tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{nb.name}: exactly one cell must be tagged 'parameters'"
        src = "".join(tagged[0]["source"])
        assert "profile" in src and "overrides" in src, nb.name
