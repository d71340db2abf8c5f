"""The claims registry: it ships with the package, every claim id a check or the map names is in
it, and a notebook that names ids names one in every counted check."""
import ast, json, re, subprocess, sys
from pathlib import Path
import pytest
from posvec_lib.claims import load_claims

def _is_check(n) -> bool:
    return (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "check"
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "rec")

def _checks(nb, args=False):
    "Every `rec.check(...)` of a notebook: (its first argument's text, its keywords[, its args])."
    out = []
    for c in json.loads(nb.read_text())["cells"]:
        src = "".join(c["source"])
        if c["cell_type"] != "code" or "rec.check" not in src: continue
        code = "\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!")))
        for n in ast.walk(ast.parse(code)):
            if _is_check(n):
                kw = {k.arg: k.value for k in n.keywords if k.arg}
                out.append((ast.unparse(n.args[0])[:80], kw, *([n.args] if args else [])))
    return out

def _experiments(root):
    return sorted((root / "nbs" / "experiments").glob("*.ipynb"))

def _named(kw) -> set:
    "The claim ids an `id=` expression can take (its literal strings shaped like ids)."
    return {s.value for s in ast.walk(kw.get("id", ast.Constant(""))) if isinstance(s, ast.Constant)
            and isinstance(s.value, str) and re.fullmatch(r"[AB]-[\w-]+", s.value)}

def test_every_named_id_is_registered(root):
    ids = set(load_claims().id)
    for nb in _experiments(root):
        for claim, kw in _checks(nb):                      # an id may be chosen by an expression
            assert _named(kw) <= ids, (nb.name, claim, sorted(_named(kw) - ids))

ROOT = Path(__file__).resolve().parents[1]

@pytest.mark.parametrize("nb", _experiments(ROOT), ids=lambda p: p.stem)
def test_counted_checks_name_a_claim(nb):
    "Every counted check of every experiment notebook names its claim id (sanity checks need none)."
    checks = _checks(nb)
    sanity = lambda kw: isinstance(kw.get("sanity"), ast.Constant) and kw["sanity"].value is True
    lacking = [c for c, kw in checks if "id" not in kw and not sanity(kw)]
    assert not lacking, f"{nb.stem}: checks without a claim id: {lacking}"

def test_installed_package_reads_its_own_copy(root, tmp_path):
    "The wheel ships data/claims.csv as posvec_lib/registry/claims.csv, read outside a clone."
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(pip + ["wheel", str(root), "--no-deps", "--no-build-isolation", "-q", "-w",
                          str(tmp_path / "dist")], check=True, capture_output=True, cwd=tmp_path)
    whl = next((tmp_path / "dist").glob("posvec-*.whl"))
    site = tmp_path / "site"
    subprocess.run(pip + ["install", "--no-deps", "-q", "--target", str(site), str(whl)],
                   check=True, capture_output=True)
    code = ("import posvec_lib.claims as c; p = c.registry_path(); print(p); "
            "print(len(c.load_claims()), c.claim('A-anchor-L1')['paper'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": str(site), "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-2000:]
    path, counts = out.stdout.splitlines()
    assert path == str(site / "posvec_lib" / "registry" / "claims.csv"), path
    assert counts == f"{len(load_claims())} A"
    assert (site / "posvec_lib" / "registry" / "claims.csv").read_bytes() == \
           (root / "data" / "claims.csv").read_bytes()

def _synthetic(rule: str, holds: bool) -> dict:
    "One unit's measurements that meet every clause of `rule` (holds) or fail its first one."
    from posvec_lib.claims import parse_rule
    m = {}
    def put(cond, ok):
        q, op, b = cond
        step = (1 if ok else -1) * (1 if op == ">=" else -1)
        v = (sum(b) / 2 if ok else b[1] + 1) if op == "in" else b[0] + step
        m[q] = (v, 1e-4)
    for i, c in enumerate(parse_rule(rule)):
        ok = holds or i > 0
        if len(c) == 1: put(c[0], ok)
        else: put(c[0], True); put(c[1], ok)              # premise met: the conclusion decides
    return {"u": m}

def test_every_rule_can_fail():
    "Each registry row decides holds on measurements that meet it and fails on its negative input."
    from posvec_lib.claims import apply_rule, decide_claim
    for r in load_claims().to_dict("records"):
        yes, no = _synthetic(r["rule"], True), _synthetic(r["rule"], False)
        assert apply_rule(r["rule"], yes)[0] is True, r["id"]
        assert apply_rule(r["rule"], no)[0] is False, r["id"]
        if r["negative"] == "sanity": continue
        miss = {m.strip(): "synthetic" for m in r["our_models"].split(";")}
        u = lambda d: {"nope/x": d["u"]}
        perm = r["negative"].split(":")[0].strip() == "permutation"
        draws = lambda d: [u(d)] * 20 if perm else u(d)
        good = decide_claim(r["id"], u(yes), negative=draws(no), missing=miss)
        assert (good["verdict"], good["null_verdict"]) == ("holds", "fails"), (r["id"], good)
        same = decide_claim(r["id"], u(yes), negative=draws(yes), missing=miss)
        assert same["verdict"] == "not measurable", (r["id"], same)   # holds on its negative too

def test_follows_names_a_deciding_claim():
    "A row that follows another names a row that itself follows nobody (one finding, one decider)."
    reg = load_claims().set_index("id")
    for id, f in reg.follows.items():
        if f != "-": assert reg.loc[f, "follows"] == "-", (id, f)

DECIDERS = {"decide", "decide_all", "decide_gap", "decide_accuracy", "decide_rows",
            "decide_interval", "threshold_and_null", "exceeds", "beyond_null"}

@pytest.mark.parametrize("nb", _experiments(ROOT), ids=lambda p: p.stem)
def test_the_registry_decides(nb):
    "A counted check passes measurements and its negative input; the notebook decides nothing."
    sanity = lambda kw: isinstance(kw.get("sanity"), ast.Constant) and kw["sanity"].value is True
    undecided = lambda a, kw: (len(a) > 1 and isinstance(a[1], ast.Constant) and a[1].value is None
                               and "reason" in kw)        # not measurable, and why
    bad = [c for c, kw, a in _checks(nb, args=True) if "id" in kw and not sanity(kw)
           and ("threshold" in kw or not ("measured" in kw or "follows" in kw or undecided(a, kw)))]
    assert not bad, f"{nb.stem}: checks decided in the notebook or with a threshold: {bad}"
    calls = set()
    for c in json.loads(nb.read_text())["cells"]:
        if c["cell_type"] != "code": continue
        code = "\n".join(l for l in "".join(c["source"]).splitlines()
                         if not l.lstrip().startswith(("%", "!")))
        calls |= {n.func.id if isinstance(n.func, ast.Name) else n.func.attr
                  for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call)
                  and isinstance(n.func, (ast.Name, ast.Attribute))}
    assert not calls & DECIDERS, f"{nb.stem} decides with {sorted(calls & DECIDERS)}"
