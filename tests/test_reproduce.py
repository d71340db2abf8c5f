"End to end: the smoke reproduction through the real CLI, resuming, and the failure modes."
import json, os, subprocess, sys
from pathlib import Path
import pytest

def posvec(venv_bin, *args, cwd):
    return subprocess.run([str(venv_bin / "posvec"), *args], cwd=cwd, capture_output=True, text=True)

@pytest.fixture(scope="module")
def smoke_run(root, venv_bin):
    r = posvec(venv_bin, "reproduce", "--profile", "smoke", "--force", cwd=root)
    return r

def test_smoke_reproduction_succeeds(smoke_run, root):
    assert smoke_run.returncode == 0, smoke_run.stdout[-3000:] + smoke_run.stderr[-3000:]
    from posvec_lib.reproduce import ARTIFACTS
    for name in ARTIFACTS:
        d = root / "figures" / "smoke" / name
        res = json.loads((d / "result.json").read_text())
        assert res["artifact"] == name and res["profile"] == "smoke"
        assert json.loads((d / "run.json").read_text())["status"] == "ok"
        for f in res["figures"]: assert (d / f).stat().st_size > 1000 and (d / f.replace(".png", ".pdf")).exists()
        for t in res["tables"]: assert (d / t).exists() and (d / t.replace(".csv", ".md")).exists()
        assert all(c["verdict"] in ("holds", "fails", "not measurable") for c in res["claims"])
    assert (root / "figures" / "smoke" / "REPORT.md").exists()

def test_second_run_skips_finished(smoke_run, root, venv_bin):
    r = posvec(venv_bin, "reproduce", "--profile", "smoke", cwd=root)
    assert r.returncode == 0 and "up to date, skipped" in r.stdout and "running" not in r.stdout, r.stdout

def test_committed_result_is_recomputed_and_compared(smoke_run, root, venv_bin):
    "A current result this machine did not compute (a fresh clone's figures) is rerun, and the batch says how it agrees."
    (root / "runs" / "smoke" / "pose_coverage.computed.json").unlink()
    dry = posvec(venv_bin, "reproduce", "--profile", "smoke", "--only", "pose_coverage,B_ppl", "--dry-run", cwd=root)
    assert dry.returncode == 0 and "run  pose_coverage" in dry.stdout and "not computed on this machine" in dry.stdout, dry.stdout
    assert "skip B_ppl" in dry.stdout and "1 of 2 would run" in dry.stdout, dry.stdout
    trusted = posvec(venv_bin, "reproduce", "--profile", "smoke", "--only", "pose_coverage", "--trust-committed", cwd=root)
    assert trusted.returncode == 0 and "--trust-committed), skipped" in trusted.stdout, trusted.stdout
    r = posvec(venv_bin, "reproduce", "--profile", "smoke", "--only", "pose_coverage", cwd=root)
    assert r.returncode == 0 and "pose_coverage: running (current result committed" in r.stdout, r.stdout
    assert "identical to the result it replaced" in r.stdout, r.stdout      # seeded: the same numbers and verdicts
    table = (root / "runs" / "smoke" / "agreement.md").read_text()
    assert "| pose_coverage | identical |" in table, table
    assert (root / "runs" / "smoke" / "pose_coverage.computed.json").exists()

def test_list_json(smoke_run, root, venv_bin):
    r = posvec(venv_bin, "list", "--profile", "smoke", "--json", cwd=root)
    L = json.loads(r.stdout)
    assert {a["status"] for a in L["artifacts"]} == {"done"}
    assert "A Table 1" not in L["missing"] and all(isinstance(v, list) for v in L["items"].values())

@pytest.mark.parametrize("args,needle", [
    (("reproduce", "--profile", "tiny"), "unknown profile 'tiny'; allowed profiles: ['cpu', 'paper', 'smoke']"),
    (("reproduce", "--profile", "smoke", "--only", "fig99"), "unknown artifact(s) ['fig99']; allowed:"),
    (("reproduce", "--profile", "smoke", "--set", "contxt=3"), "unknown knob(s) ['contxt']"),
])
def test_bad_input_is_named(root, venv_bin, args, needle):
    r = posvec(venv_bin, *args, cwd=root)
    assert r.returncode == 2 and needle in r.stderr, r.stderr

def test_failing_notebook_is_reported_and_others_run(root, tmp_path, monkeypatch):
    "A notebook that raises is reported with its cell; the batch goes on and the exit code says so."
    import posvec_lib.reproduce as R
    exp = tmp_path / "nbs" / "experiments"; exp.mkdir(parents=True)
    (tmp_path / "settings.ini").write_text("[DEFAULT]\n")
    (tmp_path / "data").mkdir(); (tmp_path / "data" / "papers").symlink_to(root / "data" / "papers")   # pose_coverage reads the paper's numbers
    src = json.loads((root / "nbs" / "experiments" / "pose_coverage.ipynb").read_text())
    params = next(i for i, c in enumerate(src["cells"]) if "parameters" in c["metadata"].get("tags", []))
    bad = dict(src); bad["cells"] = src["cells"][:params + 1] + [{"cell_type": "code", "metadata": {}, "source": "raise ValueError('broken on purpose')", "outputs": [], "execution_count": None, "id": "boom"}]
    (exp / "broken.ipynb").write_text(json.dumps(bad))
    (exp / "pose_coverage.ipynb").write_text(json.dumps(src))
    monkeypatch.setenv("POSVEC_HOME", str(tmp_path))
    monkeypatch.setattr(R, "ARTIFACTS", {"broken": R.Artifact("broken", ("A Fig. 1",), "fails"),
                                         "pose_coverage": R.ARTIFACTS["pose_coverage"]})
    from posvec_lib.page import write_reports
    s = R.reproduce("smoke", report=write_reports)
    assert s["failed"] == ["broken"] and s["ok"] == ["pose_coverage"]
    run = json.loads((tmp_path / "runs" / "smoke" / "broken.failed.json").read_text())       # the failure is kept under runs/
    assert run["status"] == "failed" and run["error"]["type"] == "ValueError"
    executed = json.loads(Path(run["error"]["executed_notebook"]).read_text())["cells"]
    assert "broken on purpose" in run["error"]["cell_source"]                                # the failing cell is named
    assert "broken on purpose" in "".join(executed[run["error"]["cell_index"]]["source"])
    assert not (tmp_path / "figures" / "smoke" / "broken" / "result.json").exists()
    assert not (tmp_path / "figures" / "smoke" / "broken" / "broken.ipynb").exists()
    kept = tmp_path / "figures" / "smoke" / "pose_coverage" / "pose_coverage.ipynb"   # the executed notebook, beside its result
    text, nb = kept.read_text(), json.loads(kept.read_text())
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    assert any("image/png" in o.get("data", {}) for o in outputs), "no figure in the executed notebook"
    assert not any("application/pdf" in o.get("data", {}) for o in outputs)
    for folder in (str(tmp_path), str(Path.home()), sys.prefix, str(root)):
        assert folder not in text, f"{folder} in the executed notebook"
    assert all(set(c["metadata"]) <= {"tags"} for c in nb["cells"]) and "papermill" not in nb["metadata"]
    assert json.loads((tmp_path / "figures" / "smoke" / "pose_coverage" / "run.json").read_text())["notebook"] == kept.name
    print(f"pose_coverage.ipynb (smoke): {kept.stat().st_size} bytes")
    from posvec_lib.cli import main
    assert main(["reproduce", "--profile", "smoke"]) == 1      # pose_coverage skipped, broken fails again
    (exp / "pose_coverage.ipynb").write_text(json.dumps(bad))   # a failing rerun keeps the last good notebook
    assert R.reproduce("smoke", only="pose_coverage", force=True)["failed"] == ["pose_coverage"]
    assert kept.read_text() == text

def test_experiments_link_their_executed_notebooks(root):
    "Under its title, each experiment notebook links the executed copies the runner keeps."
    for nb in sorted((root / "nbs" / "experiments").glob("*.ipynb")):
        line = "".join(json.loads(nb.read_text())["cells"][1]["source"])
        assert line.startswith(f"Executed: [cpu](../../figures/cpu/{nb.stem}/{nb.stem}.ipynb)"), nb.name

def test_too_few_long_documents():
    from posvec_lib.config import get_profile
    from posvec_lib.data import profile_data, long_documents
    d = profile_data(get_profile("smoke"))
    with pytest.raises(ValueError, match=r"need 3 document\(s\) of at least 99999 tokens but only 0 of \d+ qualify"):
        long_documents(d.test, 100000, 3)

def test_hub_names_refused_offline():
    from posvec_lib.data import load_corpus
    from posvec_lib.pretrained import load_checkpoint
    with pytest.raises(ConnectionError, match="offline"): load_corpus("emozilla/pg19-test")
    with pytest.raises(ConnectionError, match="offline"): load_checkpoint("TinyLlama/TinyLlama_v1.1")
    with pytest.raises(FileNotFoundError, match="does not exist"): load_checkpoint("./no/such/model")

def test_paper_profile_refuses_cpu():
    import torch
    from posvec_lib.config import get_profile
    from posvec_lib.device import resolve_device
    if torch.cuda.is_available(): pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="no GPU"): resolve_device(get_profile("paper"))
