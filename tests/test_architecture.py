"ARCHITECTURE.md's layers are the library's: chapters numbered in import order, layers by number range."
import ast, json, re
from pathlib import Path

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
    assert not bad, f"imports of a chapter not read yet: {bad}"

def test_no_private_name_crosses_modules(root):
    bad = [(f.stem, n.module, a.name) for f in modules(root) for n in ast.walk(ast.parse(f.read_text()))
           if isinstance(n, ast.ImportFrom) and (n.level == 1 or (n.module or "").startswith("posvec_lib"))
           for a in n.names if a.name.startswith("_")]
    assert not bad, f"private names imported from another module: {bad}"

MUTATORS = {"append", "add", "update", "setdefault", "clear", "pop", "extend", "insert", "remove"}

def written_globals(f: Path) -> set[str]:
    "Module-level containers (or `global` names) that a function of the module changes."
    tree = ast.parse(f.read_text())
    containers = {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                  for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                  if isinstance(t, ast.Name) and isinstance(n.value, (ast.Dict, ast.List, ast.Set, ast.Call))}
    out = set()
    for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        for n in ast.walk(fn):
            if isinstance(n, ast.Global): out |= set(n.names)
            elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in MUTATORS
                  and isinstance(n.func.value, ast.Name) and n.func.value.id in containers):
                out.add(n.func.value.id)
            elif isinstance(n, (ast.Assign, ast.AugAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    if (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                            and t.value.id in containers): out.add(t.value.id)
    return out

# state about objects, not about a run: a memo of loaded data, a live model's switched-on extensions
NOT_RECORDS = {"data": {"_PD_CACHE"}, "trace": {"_ACTIVE"}}

def test_model_code_writes_no_module_global(root):
    "What a run read is returned or passed explicitly (`profile.inputs`), never kept in a module."
    L = layers(root)
    bad = {f.stem: sorted(w) for f in modules(root)
           if L.get(f.stem) == 2 and (w := written_globals(f) - NOT_RECORDS.get(f.stem, set()))}
    assert not bad, f"model-layer modules writing module globals: {bad}"
