"ARCHITECTURE.md's layers are the library's: every module is in one layer and imports only upward."
import ast, re
from pathlib import Path

# the known exceptions ARCHITECTURE.md names (issue 51 removes them)
EXCEPTIONS = {("train", "record"), ("finetune", "record"), ("pretrained", "record"), ("sweeps", "record")}

def layers(root: Path) -> dict[str, int]:
    "Module -> layer number, read from ARCHITECTURE.md's numbered list of layers."
    out = {}
    text = (root / "ARCHITECTURE.md").read_text().split("\n## ")[0]     # the layers, before any section
    for n, body in re.findall(r"^(\d)\. \*\*[^*]+\*\* — (.*?):", text, re.M | re.S):
        out |= {m: int(n) for m in re.findall(r"`(\w+)`", body)}
    return out

def relative_imports(f: Path) -> set[str]:
    "posvec_lib modules a module imports with `from .x import` / `from . import x`."
    out = set()
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            out |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
    return out

def test_every_module_has_a_layer(root):
    L = layers(root)
    mods = {f.stem for f in (root / "posvec_lib").glob("*.py") if not f.stem.startswith("_")}
    assert len(L) >= 30, f"ARCHITECTURE.md lists only {len(L)} modules"
    assert mods == set(L), f"not in ARCHITECTURE.md: {sorted(mods - set(L))}; gone: {sorted(set(L) - mods)}"

def test_imports_go_upward_only(root):
    L = layers(root)
    bad = [(f.stem, m) for f in sorted((root / "posvec_lib").glob("*.py")) if f.stem in L
           for m in sorted(relative_imports(f)) if m in L and L[m] > L[f.stem]]
    assert set(bad) <= EXCEPTIONS, f"imports from a lower layer to a higher one: {sorted(set(bad) - EXCEPTIONS)}"
