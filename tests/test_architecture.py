"ARCHITECTURE.md's layers are the library's: chapters numbered in import order, layers by number range."
import ast, json, re
from pathlib import Path

# imports still to remove (issue 51): the model layer recording what a run read, sweeps' Record subclass
EXCEPTIONS = {("train", "record"), ("finetune", "record"), ("pretrained", "record"), ("sweeps", "record")}
LAYER_WIDTH = 20            # chapters 00-19: layer 1, 20-39: layer 2, 40-59: layer 3, 60-79: layer 4

def layers(root: Path) -> dict[str, int]:
    "Module -> layer number, read from ARCHITECTURE.md's numbered list of layers."
    out = {}
    text = (root / "ARCHITECTURE.md").read_text().split("\n## ")[0]     # the layers, before any section
    for n, body in re.findall(r"^(\d)\. \*\*[^*]+\*\* \([^)]*\) — (.*?):", text, re.M | re.S):
        out |= {m: int(n) for m in re.findall(r"`(\w+)`", body)}
    return out

def chapters(root: Path) -> dict[str, int]:
    "Module -> the number of the chapter that exports it (`nbs/<number>_<name>.ipynb`)."
    out = {}
    for nb in sorted((root / "nbs").glob("[0-9]*.ipynb")):
        for c in json.loads(nb.read_text())["cells"]:
            s = c["source"] if isinstance(c["source"], str) else "".join(c["source"])
            if m := re.search(r"^#\|\s*default_exp\s+(\w+)", s, re.M):
                out[m.group(1)] = int(nb.stem.split("_")[0]); break
    return out

def imports(f: Path) -> set[str]:
    "posvec_lib modules a module imports anywhere in it (top level or inside a function)."
    out = set()
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            out |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("posvec_lib"):
            parts = node.module.split(".")
            out |= {parts[1]} if len(parts) > 1 else {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("posvec_lib.")}
    return out

def modules(root: Path) -> list[Path]:
    return [f for f in sorted((root / "posvec_lib").glob("*.py")) if not f.stem.startswith("_")]

def test_every_module_has_a_layer_and_a_chapter(root):
    L, C = layers(root), chapters(root)
    mods = {f.stem for f in modules(root)}
    assert len(L) >= 30, f"ARCHITECTURE.md lists only {len(L)} modules"
    assert mods == set(L), f"not in ARCHITECTURE.md: {sorted(mods - set(L))}; gone: {sorted(set(L) - mods)}"
    assert mods == set(C), f"no chapter: {sorted(mods - set(C))}"
    assert len(set(C.values())) == len(C), "two chapters share a number"

def test_chapter_numbers_show_the_layers(root):
    L, C = layers(root), chapters(root)
    bad = {m: (C[m], L[m]) for m in C if C[m] // LAYER_WIDTH + 1 != L[m]}
    assert not bad, f"chapter number outside its layer's range (number, layer): {bad}"

def test_a_chapter_imports_only_lower_numbered_chapters(root):
    C = chapters(root)
    bad = [(f.stem, m) for f in modules(root) for m in sorted(imports(f)) if m in C and C[m] >= C[f.stem]]
    assert set(bad) <= EXCEPTIONS, f"imports of a chapter not read yet: {sorted(set(bad) - EXCEPTIONS)}"
