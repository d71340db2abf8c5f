"""Reliability: every bad input refused before work starts, no good result ever lost, damaged state detected and rebuilt,
one batch at a time.

Each numbered case of the reliability review has a test here (case 8, library misuse, is tests/test_misuse.py). The batch
tests run the cheapest artifact (`pose_coverage`: no model, seconds) in scratch project roots that share the checkout's
notebooks and caches but have their own figures/ and runs/ (see tests/test_hardening.py's `scratch_home`).
"""
import errno, json, os, shutil, subprocess, sys, time, warnings
from pathlib import Path
import pytest
from test_hardening import scratch_home, posvec, env_for, OFFLINE

FAST = "pose_coverage"


@pytest.fixture(scope="module")
def good_home(root, venv_bin, tmp_path_factory):
    "A scratch project holding one good result of the fast artifact."
    home = scratch_home(root, tmp_path_factory.mktemp("good") / "home")
    r = posvec(venv_bin, home, "reproduce", "--profile", "smoke", "--only", FAST)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return dict(home=home, out=r.stdout + r.stderr)


@pytest.fixture
def home(root, good_home, tmp_path):
    "A fresh copy of the good project (figures/ and runs/ copied, notebooks and caches shared)."
    h = scratch_home(root, tmp_path / "home")
    for d in ("figures", "runs"): shutil.copytree(good_home["home"] / d, h / d, symlinks=True)
    return h


def result_bytes(home: Path, res: str = "smoke") -> bytes:
    return (home / "figures" / res / FAST / "result.json").read_bytes()


# ---------------------------------------------------------------------------------------------------------------
# 1. --set values typed and ranged before anything runs; overrides never replace the profile's results; a failing rerun
#    leaves the previous result in place

@pytest.mark.parametrize("args,needle", [
    (["--set", "C=abc"], "knob C='abc' is not allowed: str is not an integer; allowed: an integer ≥ 8"),
    (["--set", "C=32.5"], "knob C=32.5 is not allowed: float is not an integer; allowed: an integer ≥ 8"),
    (["--set", "C=true"], "knob C='true' is not allowed: str is not an integer"),
    (["--set", "ext_factors=0"], "knob ext_factors=[0] is not allowed; allowed: a non-empty list of integers ≥ 2"),
    (["--set", "n_samples=0"], "knob n_samples=0 is not allowed; allowed: an integer ≥ 4"),
    (["--set", "dtype=float64"], "knob dtype='float64' is not allowed; allowed: 'float32', 'bfloat16' or 'float16'"),
    (["--set", "device=gpu"], "knob device='gpu' is not allowed; allowed: 'cpu', 'cuda' or 'auto'"),
    (["--set", "zoo=nope,xpos"], "a non-empty list of distinct zoo variants from ['nope', 'rope'"),
    (["--set", "pretrained=rope"], "allowed: a list of 'variant=hub-name-or-path' entries"),
    (["--set", "pretrained=rope=/no/such/model"], "pretrained[rope]='/no/such/model': model path does not exist"),
    (["--set", "n_layers=8"], "TL-Window-80 (window_small) needs n_layers × small_window < C, got 8 × 6 = 48 ≥ C=32"),
    (["--set", "C"], "--set wants knob=value, got 'C'"),
    (["--set", "contxt=3"], "unknown knob(s) ['contxt']; valid knobs:"),
    (["--only", ""], "--only '' names no artifact; allowed: comma-separated names from ['zoo'"),
    (["--only", "fig99"], "unknown artifact(s) ['fig99']"),
])
def test_bad_input_refused_before_anything_runs(home, venv_bin, args, needle):
    before = result_bytes(home)
    logs = sorted((home / "runs" / "smoke").iterdir())
    r = posvec(venv_bin, home, "reproduce", "--profile", "smoke", *args)
    assert r.returncode == 2 and r.stderr.startswith("posvec: error: ") and needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert result_bytes(home) == before and sorted((home / "runs" / "smoke").iterdir()) == logs   # nothing touched


def test_all_bad_values_named_at_once():
    from posvec_lib.cmdline import parse_sets as _parse_sets
    with pytest.raises(ValueError) as e: _parse_sets(["C=abc", "n_samples=0", "seed=1"])
    assert "knob C='abc'" in str(e.value) and "knob n_samples=0" in str(e.value)
    assert _parse_sets(["zoo=nope", "pretrained=rope=/x", "ext_factors=2,4"]) == dict(zoo=("nope",), pretrained=("rope=/x",),
                                                                                     ext_factors=(2, 4))


def test_overrides_write_their_own_results(home, venv_bin):
    from posvec_lib.config import get_profile
    before = result_bytes(home)
    r = posvec(venv_bin, home, "reproduce", "--profile", "smoke", "--only", FAST, "--set", "mc_iterations=200", "pose_targets=2,3")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]     # a tuple knob reaches the notebook as a list, not a string
    res_name = get_profile("smoke", mc_iterations=200, pose_targets=(2, 3)).results_name
    assert res_name.startswith("smoke+") and f"results in figures/{res_name}/" in r.stdout
    res = json.loads(result_bytes(home, res_name))
    assert res["knobs"]["mc_iterations"] == 200 and res["knobs"]["pose_targets"] == [2, 3]
    assert result_bytes(home) == before                                                   # the profile's own result untouched
    listing = posvec(venv_bin, home, "list", "--profile", "smoke", "--set", "mc_iterations=200", "pose_targets=2,3", "--json")
    st = {a["artifact"]: a["status"] for a in json.loads(listing.stdout)["artifacts"]}
    assert st[FAST] == "done" and json.loads(listing.stdout)["results"] == res_name


def test_failing_rerun_keeps_the_previous_result(home, venv_bin, root):
    "The notebook is made to fail after it has started writing: the last good result stays, byte for byte."
    (home / "nbs").unlink(); (home / "nbs" / "experiments").mkdir(parents=True)
    for f in (root / "nbs" / "experiments").glob("*.ipynb"): shutil.copy(f, home / "nbs" / "experiments" / f.name)
    nb_path = home / "nbs" / "experiments" / f"{FAST}.ipynb"
    nb = json.loads(nb_path.read_text())
    last = max(i for i, c in enumerate(nb["cells"]) if "rec.save()" in "".join(c["source"]))
    nb["cells"].insert(last, dict(cell_type="code", metadata={}, outputs=[], execution_count=None,
                                  source="raise RuntimeError('injected failure after the figures were written')"))
    nb_path.write_text(json.dumps(nb))
    before = result_bytes(home)
    r = posvec(venv_bin, home, "reproduce", "--profile", "smoke", "--only", FAST)
    assert r.returncode == 1 and "injected failure" in r.stdout and "the previous result in" in r.stdout, r.stdout[-3000:]
    assert result_bytes(home) == before
    assert not list((home / "figures" / "smoke").glob(".*.partial")), "the failed run's files were left behind"
    a = {s["artifact"]: s for s in json.loads(posvec(venv_bin, home, "list", "--profile", "smoke", "--json").stdout)["artifacts"]}[FAST]
    assert a["status"] == "stale" and "the previous result is kept" in a["last_attempt"] and "injected" in a["error"]["message"]


# ---------------------------------------------------------------------------------------------------------------
# 2. Damaged result.json / run.json: named, treated as missing, never as done, and no command fails on them

@pytest.mark.parametrize("which", ["result.json", "run.json"])
def test_damaged_record_is_named_and_rerun(home, venv_bin, which):
    f = home / "figures" / "smoke" / FAST / which
    f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2])            # cut off, as by a crash or a bad merge
    L = posvec(venv_bin, home, "list", "--profile", "smoke")
    assert L.returncode == 0 and "damaged" in L.stdout and f"{f} is damaged: not valid JSON" in L.stdout, L.stdout + L.stderr
    rep = posvec(venv_bin, home, "report", "--profile", "smoke")
    assert rep.returncode == 0, rep.stderr
    md = (home / "figures" / "smoke" / "REPORT.md").read_text()
    assert f"**{FAST}** (damaged)" in md and f"{FAST}: {f} is damaged" in md
    r = posvec(venv_bin, home, "reproduce", "--profile", "smoke", "--only", FAST)
    assert r.returncode == 0 and "treated as missing" in r.stdout and f"{FAST}: ok" in r.stdout, r.stdout[-2000:]
    json.loads(f.read_text())


def test_result_without_run_record_is_not_done(home, venv_bin):
    "A notebook run by hand writes result.json but no run record: shown in the report, not taken as done, rerun by the batch."
    (home / "figures" / "smoke" / FAST / "run.json").unlink()
    a = {s["artifact"]: s for s in json.loads(posvec(venv_bin, home, "list", "--profile", "smoke", "--json").stdout)["artifacts"]}[FAST]
    assert a["status"] == "unrecorded" and "written outside the runner" in a["problem"]


@pytest.mark.parametrize("claims", [None, [{"claim": "x"}], [{"claim": "x", "verdict": "maybe"}]])
def test_result_with_bad_claims_is_damaged(home, venv_bin, claims):
    f = home / "figures" / "smoke" / FAST / "result.json"
    f.write_text(json.dumps(dict(json.loads(f.read_text()), claims=claims)))
    a = {s["artifact"]: s for s in json.loads(posvec(venv_bin, home, "list", "--profile", "smoke", "--json").stdout)["artifacts"]}[FAST]
    assert a["status"] == "damaged" and f"{f} is damaged" in a["problem"]
    assert posvec(venv_bin, home, "report", "--profile", "smoke").returncode == 0


def test_runner_swaps_only_after_its_record(tmp_path, monkeypatch):
    "Under the runner, save() leaves the new result staged: a kill before run.json is written keeps the old result."
    from posvec_lib.config import get_profile
    from posvec_lib.record import Record
    good = tmp_path / "art"
    r = Record("art", get_profile("smoke"), folder=good); r.number("x", 1); r.save()
    monkeypatch.setenv("POSVEC_RUNNER_SWAPS", "1")
    r2 = Record("art", get_profile("smoke"), folder=good); r2.number("x", 2); staged = r2.save()
    assert json.loads((good / "result.json").read_text())["numbers"] == {"x": 1}
    assert json.loads(staged.read_text())["numbers"] == {"x": 2} and staged.parent.name == ".art.partial"


# ---------------------------------------------------------------------------------------------------------------
# 3. Damaged caches: named, discarded, rebuilt; disk full and read-only folders give one line naming the folder

@pytest.fixture
def empty_root(tmp_path, monkeypatch):
    "An empty project root: every cache is built here."
    (tmp_path / "settings.ini").write_text("[DEFAULT]\n"); (tmp_path / "nbs").mkdir()
    monkeypatch.setenv("POSVEC_HOME", str(tmp_path))
    return tmp_path


def cut(f: Path):
    b = f.read_bytes(); f.write_bytes(b[: len(b) // 2])


def test_damaged_tokenizer_and_tokens_are_rebuilt(empty_root, capsys):
    from posvec_lib.data import load_corpus, train_bpe, tokenize_split
    c = load_corpus("stdlib", max_files=20)
    tok = train_bpe(c, 300); ids = tokenize_split(c, tok, "train").ids.copy()
    [tf] = (empty_root / "data" / "cache" / "tokenizers").glob("*.json"); [nf] = (empty_root / "data" / "cache" / "tokens").glob("*.npz")
    cut(tf); cut(nf)
    with pytest.warns(UserWarning, match="damaged cache entry"):
        tok2 = train_bpe(c, 300)
    with pytest.warns(UserWarning, match="damaged cache entry"):
        ids2 = tokenize_split(c, tok2, "train").ids
    err = capsys.readouterr().err
    assert f"damaged cache entry {tf} (tokenizer" in err and f"damaged cache entry {nf} (token cache" in err, err
    assert (ids2 == ids).all() and tok2.get_vocab() == tok.get_vocab()
    from posvec_lib.storage import seal_check
    assert seal_check(tf) and seal_check(nf)


def test_damaged_zoo_checkpoint_is_retrained(empty_root, capsys):
    from posvec_lib.config import get_profile
    from posvec_lib.train import train_zoo_model, load_zoo_model
    P = get_profile("smoke", zoo=("nope",), train_steps=4, continual_steps=0)
    path = train_zoo_model(P, "nope")
    w = path / "model.safetensors"; cut(w)
    with pytest.warns(UserWarning, match="damaged cache entry"):
        load_zoo_model(P, "nope")
    assert f"damaged cache entry {path} (checksum mismatch" in capsys.readouterr().err
    from posvec_lib.storage import seal_check
    assert (path / "manifest.json").exists() and seal_check(path) is True                # retrained whole


def test_unsealed_damaged_entry_is_found_by_loading(empty_root, capsys):
    "An entry from before checksums (no checksums.json) is verified by reading it; a cut-off one is retrained."
    from posvec_lib.config import get_profile
    from posvec_lib.train import train_zoo_model
    P = get_profile("smoke", zoo=("nope",), train_steps=4, continual_steps=0)
    path = train_zoo_model(P, "nope")
    (path / "checksums.json").unlink(); cut(path / "model.safetensors")
    with pytest.warns(UserWarning, match="damaged cache entry"):
        train_zoo_model(P, "nope")
    assert "damaged cache entry" in capsys.readouterr().err and (path / "checksums.json").exists()


def test_disk_full_while_checkpointing_names_the_folder(empty_root, monkeypatch):
    import torch
    from posvec_lib.config import get_profile
    from posvec_lib.storage import DiskError
    from posvec_lib.train import train_zoo_model
    P = get_profile("smoke", zoo=("nope",), train_steps=12, continual_steps=0)
    real = torch.save
    def full(*a, **k): raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 256 vs 128")
    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(DiskError, match=r"cannot write to .*nope-[0-9a-f]+\.partial: the write failed half-way, most likely no space"):
        train_zoo_model(P, "nope")
    monkeypatch.setattr(torch, "save", real)
    assert (train_zoo_model(P, "nope") / "manifest.json").exists()                    # and it recovers


def test_read_only_figures_is_one_line(home, monkeypatch, capsys):
    import tempfile
    from posvec_lib import storage
    from posvec_lib.cli import main
    monkeypatch.setenv("POSVEC_HOME", str(home))
    for k, v in OFFLINE.items(): monkeypatch.setenv(k, v)
    real = tempfile.mkstemp
    def ro(*a, dir=None, **k):
        if dir and "figures" in str(dir): raise OSError(errno.EROFS, "Read-only file system")
        return real(*a, dir=dir, **k)
    monkeypatch.setattr(storage.tempfile, "mkstemp", ro)
    assert main(["reproduce", "--profile", "smoke", "--only", FAST, "--force"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot write to {home / 'figures' / 'smoke'}: the folder is on a read-only file system" in err, err


# ---------------------------------------------------------------------------------------------------------------
# 4. Small local corpora

def test_four_file_corpus_has_every_split(tmp_path, empty_root):
    from posvec_lib.data import load_corpus, train_bpe, tokenize_split
    d = tmp_path / "corpus"; d.mkdir()
    for i in range(4): (d / f"f{i}.txt").write_text(f"def f{i}(x):\n    return x + {i}\n" * 20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = load_corpus(str(d))
    assert all(len(c[s]) >= 1 for s in ("train", "validation", "test"))
    tok = train_bpe(c, 300)
    assert all(len(tokenize_split(c, tok, s)) >= 1 for s in ("train", "validation", "test"))


def test_empty_split_is_named():
    from datasets import Dataset, DatasetDict
    from posvec_lib.data import Corpus, tokenize_split
    empty = Dataset.from_dict({"path": [], "text": []})
    c = Corpus("tiny", DatasetDict(train=Dataset.from_dict({"path": ["a"], "text": ["x"]}), validation=empty, test=empty),
               dict(hash="0" * 16, files={"train": 1, "validation": 0, "test": 0}))
    with pytest.raises(ValueError, match="split 'test' of corpus 'tiny' has no documents"): tokenize_split(c, None, "test")


# ---------------------------------------------------------------------------------------------------------------
# 5. One batch per profile and clone

def test_second_batch_is_refused_or_waits(home, venv_bin, monkeypatch):
    from posvec_lib.config import get_profile
    from posvec_lib.reproduce import batch_lock
    monkeypatch.setenv("POSVEC_HOME", str(home))
    with batch_lock(get_profile("smoke")):
        r = posvec(venv_bin, home, "reproduce", "--profile", "smoke", "--only", FAST)
        assert r.returncode == 2 and f"another posvec batch of profile 'smoke' is running in this clone (pid {os.getpid()}" in r.stderr, r.stderr
        log = home / "wait.log"
        with open(log, "w") as fh:
            waiting = subprocess.Popen([str(venv_bin / "posvec"), "reproduce", "--profile", "smoke", "--only", FAST, "--wait"], cwd=home,
                                       env=env_for(home), stdout=fh, stderr=subprocess.STDOUT, text=True)
        t0 = time.time()
        while "posvec: waiting for the batch that holds" not in log.read_text():
            assert waiting.poll() is None and time.time() - t0 < 300, log.read_text()    # it must wait, not run
        time.sleep(1); assert waiting.poll() is None and "running" not in log.read_text()
    waiting.wait(timeout=600); out = log.read_text()
    assert waiting.returncode == 0 and "up to date, skipped" in out, out[-2000:]
    logs = [p.name for p in (home / "runs" / "smoke").glob("reproduce-*.log")]
    assert any(n.endswith(f"-{waiting.pid}.log") for n in logs), logs                # one log file per batch process


# ---------------------------------------------------------------------------------------------------------------
# 6. Wall-clock checks are not in the headline

def test_wall_clock_checks_not_counted(tmp_path, monkeypatch):
    from posvec_lib.config import get_profile
    from posvec_lib.record import Record
    from posvec_lib.reproduce import ARTIFACTS
    from posvec_lib.digest import inputs_hash
    from posvec_lib.report import report_data, summary_lines
    from posvec_lib.paths import figures_dir
    from posvec_lib.storage import write_json
    monkeypatch.setenv("POSVEC_HOME", str(tmp_path)); (tmp_path / "nbs" / "experiments").mkdir(parents=True)
    for a in ARTIFACTS: (tmp_path / "nbs" / "experiments" / f"{a}.ipynb").write_text("{}")
    P = get_profile("smoke")
    r = Record("B_ppl", P); r.check("a real claim", True); r.check("time per step is flat", False, volatile=True)
    r.check("the harness retrieves the key on a capable model", False, sanity=True); r.save()
    write_json(figures_dir(P, "B_ppl") / "run.json", dict(status="ok", inputs=inputs_hash(ARTIFACTS["B_ppl"], P), finished="x"))
    D = report_data(P)
    assert D["counts"] == {"holds": 1, "fails": 0, "not measurable": 0, "wall-clock": 1, "sanity": 1}
    assert "(1 wall-clock check not counted" in summary_lines(D)[0]
    assert "(1 sanity check not counted" in summary_lines(D)[0]


# ---------------------------------------------------------------------------------------------------------------
# 7. Smaller ones

def test_module_help(venv_bin, root):
    r = subprocess.run([str(venv_bin / "python"), "-m", "posvec_lib.cli", "--help"], capture_output=True, text=True, cwd=root)
    assert r.returncode == 0 and r.stdout.startswith("usage: posvec"), r.stdout + r.stderr


def test_help_is_fast(venv_bin, root):
    "`posvec --help` and `posvec list` import no torch (it took 5-9 s); `posvec inspect -h` lists inspect's flags."
    code = ("import sys, contextlib, io\nfrom posvec_lib.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit): main(['--help'])\n"
            "print('torch' in sys.modules)")
    r = subprocess.run([str(venv_bin / "python"), "-c", code], capture_output=True, text=True, cwd=root)
    assert r.stdout.strip() == "False", r.stdout + r.stderr
    r = subprocess.run([str(venv_bin / "posvec"), "inspect", "-h"], capture_output=True, text=True, cwd=root)
    assert r.returncode == 0 and "--baseline-seeds" in r.stdout, r.stderr


def test_outside_a_clone(venv_bin, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "POSVEC_HOME"} | dict(HOME=str(tmp_path / "h"), **OFFLINE)
    (tmp_path / "h").mkdir()
    for cmd in (["list"], ["report"], ["reproduce", "--profile", "smoke"]):
        r = subprocess.run([str(venv_bin / "posvec"), *cmd], capture_output=True, text=True, cwd=tmp_path, env=env)
        assert r.returncode == 2 and "works inside a clone of the posvec repository" in r.stderr, (cmd, r.stderr)
    assert not (tmp_path / "h" / ".cache").exists()


def test_missing_repro_extra_is_named(home, monkeypatch, capsys):
    import importlib.util
    from posvec_lib.cli import main
    monkeypatch.setenv("POSVEC_HOME", str(home))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "papermill" else real(n, *a))
    assert main(["reproduce", "--profile", "smoke", "--only", FAST]) == 2
    assert "install the 'repro' extra, e.g. pip install 'posvec[repro]'" in capsys.readouterr().err


def test_license_and_manifest(root):
    for line in (root / "MANIFEST.in").read_text().splitlines():
        if line.startswith("include "): assert (root / line.split()[1]).exists(), line
    assert "Apache License" in (root / "LICENSE").read_text() and "license = apache2" in (root / "settings.ini").read_text()


def test_no_kernel_warning_per_artifact(good_home):
    assert "Kernel is running over TCP" not in good_home["out"], good_home["out"][-2000:]


def test_chapters_export_only_themselves(root):
    "Running a library chapter top to bottom (JupyterLab) must not rewrite the other modules: its export cell names it."
    for nb in sorted((root / "nbs").glob("[0-9]*.ipynb")):
        cells = ["".join(c["source"]) for c in json.loads(nb.read_text())["cells"]]
        ex = [c for c in cells if "nbdev_export(" in c]
        assert ex and all(f'nbdev_export("{nb.name}")' in c and "#| eval: false" in c for c in ex), (nb.name, ex)


def test_damaged_positional_vector_cache_is_recomputed(empty_root, capsys):
    import torch
    from transformers import LlamaForCausalLM
    from posvec_lib.config import get_profile
    from posvec_lib.variants import tiny_model
    from posvec_lib import beyond
    m = tiny_model("rope", vocab_size=64, attn="posvec_sdpa")
    x = torch.randint(0, 64, (4, 16))
    a = beyond.cached_positional_vectors(m, x)
    [f] = (empty_root / "data" / "cache" / "posvec").glob("pv-*.pt")
    cut(f); beyond._PV_MEMO.clear()
    with pytest.warns(UserWarning, match="damaged cache entry"):
        b = beyond.cached_positional_vectors(m, x)
    assert f"damaged cache entry {f} (positional-vector cache" in capsys.readouterr().err
    assert torch.equal(a.p, b.p)


# ---------------------------------------------------------------------------------------------------------------
# 7. Records are validated by schema: paths confined to their folder, types checked, listed files present

@pytest.fixture
def cli(home, monkeypatch, capsys):
    "`posvec` in this process (no interpreter start per call), in the scratch project: (exit code, stdout, stderr)."
    from posvec_lib.cli import main
    monkeypatch.setenv("POSVEC_HOME", str(home))
    for k, v in OFFLINE.items(): monkeypatch.setenv(k, v)
    def run(*args):
        rc = main(list(args)); out, err = capsys.readouterr()
        return rc, out, err
    return run


def listing(cli) -> dict:
    rc, out, err = cli("list", "--profile", "smoke", "--json")
    assert rc == 0, err
    return {s["artifact"]: s for s in json.loads(out)["artifacts"]}


def edit_record(home, which: str, **changes) -> Path:
    f = home / "figures" / "smoke" / FAST / which
    f.write_text(json.dumps(dict(json.loads(f.read_text()), **changes)))
    return f


@pytest.mark.parametrize("key,name", [("figures", "/etc/hostname"), ("figures", "../../../../../../etc/hostname"),
                                      ("tables", "/etc/hostname"), ("figures", "outside.png")])
def test_record_cannot_pull_a_file_into_the_report(home, cli, key, name):
    "A result.json naming a file outside its folder (absolute, '..', a link) is damaged and nothing of it is read."
    import base64
    d = home / "figures" / "smoke" / FAST
    if name == "outside.png": (d / name).symlink_to("/etc/hostname")
    f = edit_record(home, "result.json", **{key: [name]})
    a = listing(cli)[FAST]
    assert a["status"] == "damaged" and f"{f} is damaged: '{key}' lists '{name}'" in a["problem"], a
    assert cli("report", "--profile", "smoke")[0] == 0
    html = (home / "figures" / "smoke" / "REPORT.html").read_text()
    secret = Path("/etc/hostname").read_bytes()
    assert base64.b64encode(secret).decode() not in html and secret.decode().strip() not in html.replace(FAST, "")
    assert "is damaged" in html


@pytest.mark.parametrize("which,changes,needle", [
    ("run.json", dict(finished=20261204), "'finished' is int '20261204', not str"),
    ("run.json", dict(wall_time_s="fast"), "'wall_time_s' is str 'fast', not int or float"),
    ("run.json", dict(status=1), "'status' is int '1', not str"),
    ("result.json", dict(numbers=[1, 2]), "'numbers' is list"),
    ("result.json", dict(claims=[{"claim": "x", "verdict": "holds"}]), "lacks ['values']"),
    ("result.json", dict(figures="fig.png"), "'figures' is str 'fig.png', not list"),
])
def test_record_that_parses_but_is_wrong_is_damaged(home, cli, venv_bin, which, changes, needle):
    "Wrong types are damage: list, report and the dry run name it and go on; the batch reruns the artifact."
    f = edit_record(home, which, **changes)
    a = listing(cli)[FAST]
    assert a["status"] == "damaged" and needle in a["problem"] and str(f) in a["problem"], a
    assert cli("report", "--profile", "smoke")[0] == 0
    rc, out, err = cli("reproduce", "--profile", "smoke", "--only", FAST, "--dry-run")
    assert rc == 0 and "treated as missing" in out, out + err


def test_failure_record_with_wrong_types_is_ignored(home, cli):
    "A damaged failure record under runs/ does not break list (it is no failure)."
    f = home / "runs" / "smoke" / f"{FAST}.failed.json"
    f.write_text(json.dumps(dict(status="failed", inputs="x", finished=5, error="boom")))
    assert listing(cli)[FAST]["status"] == "done"


def test_deleted_figure_is_damaged_and_rerun(home, cli, venv_bin):
    "A figure of a finished result deleted by hand: not 'done', the report goes on, the batch reruns it."
    d = home / "figures" / "smoke" / FAST
    fig = json.loads((d / "result.json").read_text())["figures"][0]
    (d / fig).unlink()
    a = listing(cli)[FAST]
    assert a["status"] == "damaged" and f"'figures' lists '{fig}', which is not in {d}" in a["problem"], a
    assert cli("report", "--profile", "smoke")[0] == 0
    r = posvec(venv_bin, home, "reproduce", "--profile", "smoke", "--only", FAST)
    assert r.returncode == 0 and (d / fig).exists(), r.stdout[-2000:]


@pytest.mark.parametrize("case", ["runs is a file", "figures is a file", "lock is a folder", "artifact is a file"])
def test_project_folder_of_the_wrong_kind_is_one_line(home, cli, case):
    "A file where a folder of the project belongs (or the reverse): one line naming the path, exit 2, no traceback."
    if case == "runs is a file": shutil.rmtree(home / "runs"); (home / "runs").write_text("")
    if case == "figures is a file": shutil.rmtree(home / "figures"); (home / "figures").write_text("")
    if case == "lock is a folder": (home / "runs" / ".smoke.lock").unlink(); (home / "runs" / ".smoke.lock").mkdir()
    if case == "artifact is a file":
        shutil.rmtree(home / "figures" / "smoke" / FAST); (home / "figures" / "smoke" / FAST).write_text("")
        assert listing(cli)[FAST]["status"] == "damaged"
    for args in (("list", "--profile", "smoke"), ("report", "--profile", "smoke"),
                 ("reproduce", "--profile", "smoke", "--only", "zoo", "--dry-run")):
        rc, out, err = cli(*args)
        assert rc in (0, 2), (args, out[-1000:], err[-2000:])
        if rc == 2: assert err.count("\n") == 1 and "stands where a" in err, (args, err)
    if case != "artifact is a file":    # the batch itself: refused in one line before any notebook runs
        rc, out, err = cli("reproduce", "--profile", "smoke", "--only", FAST)
        assert rc == 2 and err.count("\n") == 1 and "stands where a" in err, (out[-1000:], err)


# ---------------------------------------------------------------------------------------------------------------
# 8. The profile judged as a whole before work starts: memory, data, models; hours announced

@pytest.mark.parametrize("sets,needle", [
    (["C=100000"], "zoo training step needs ~"),
    (["C=100000"], "GiB and this machine has"),
    (["C=4096"], "its longest test document has"),
    (["pretrained_length=100000"], "pretrained_length=100000 is beyond tiny-local's window of 256 tokens"),
    (["pretrained_model=./no/such/model.gguf"], "pretrained_model: model path './no/such/model.gguf' does not exist"),
])
def test_profile_that_cannot_run_is_refused_before_anything_runs(home, cli, sets, needle):
    before = sorted(p.name for p in (home / "runs").iterdir())
    rc, out, err = cli("reproduce", "--profile", "smoke", "--only", FAST, "--set", *sets)
    assert rc == 2 and err.count("\n") == 1 and "cannot run on this machine, so nothing was run" in err, (out, err)
    assert needle in err, err
    assert sorted(p.name for p in (home / "runs").iterdir()) == before


def test_dry_run_counts_what_the_caches_lack(home, cli, monkeypatch, tmp_path):
    "A fresh clone's dry run adds the training an empty data/cache needs to the recorded wall times."
    (home / "data" / "cache").unlink(); (home / "data" / "cache").mkdir()
    rc, out, err = cli("reproduce", "--profile", "smoke", "--only", FAST, "--force", "--dry-run")
    assert rc == 0 and "the caches lack 7 of 7 zoo entries" in out and "min of training" in out, out + err


def test_hours_of_training_are_announced(home, cli):
    rc, out, err = cli("reproduce", "--profile", "smoke", "--only", FAST, "--dry-run", "--set", "train_steps=30000000")
    assert rc == 0 and "note: training alone is estimated at ~" in out, out + err


# ---------------------------------------------------------------------------------------------------------------
# 9. Cases of the second tester's round: links, pipes and nested types in records; owners; refusals in the dry run

def test_record_that_is_a_link_is_damaged(home, cli, tmp_path):
    "A result.json linked to a file outside its folder (or an artifact folder that is a link) is never read."
    d = home / "figures" / "smoke" / FAST
    outside = tmp_path / "outside"; shutil.copytree(d, outside)
    res = json.loads((outside / "result.json").read_text()); res["findings"] = ["OUTSIDE-MARKER"]
    (outside / "result.json").write_text(json.dumps(res))
    (d / "result.json").unlink(); (d / "result.json").symlink_to(outside / "result.json")
    assert "not a regular file" in listing(cli)[FAST]["problem"]
    shutil.rmtree(d); d.symlink_to(outside)
    assert "a link, not a folder of its own" in listing(cli)[FAST]["problem"]
    assert cli("report", "--profile", "smoke")[0] == 0
    assert "OUTSIDE-MARKER" not in (home / "figures" / "smoke" / "REPORT.md").read_text()


def test_record_that_is_a_pipe_does_not_hang(home, cli):
    f = home / "figures" / "smoke" / FAST / "result.json"
    f.unlink(); os.mkfifo(f)
    assert "not a regular file" in listing(cli)[FAST]["problem"]


@pytest.mark.parametrize("which,changes,needle", [
    ("result.json", dict(inputs={"zoo": [1, 2]}), "inputs['zoo'] is not a mapping"),
    ("result.json", dict(volatile=[5]), "'volatile' holds '5', not text"),
    ("result.json", dict(findings=[{"a": 1}]), "'findings' holds"),
    ("result.json", dict(artifact="B_chunks"), "it says artifact 'B_chunks', the folder is 'pose_coverage'"),
    ("result.json", dict(profile="paper"), "it says profile 'paper'"),
    ("run.json", dict(wall_time_s=float("nan")), "'wall_time_s' is nan"),
    ("run.json", dict(wall_time_s=-1e308), "not a time in seconds"),
])
def test_record_with_wrong_contents_is_damaged(home, cli, which, changes, needle):
    edit_record(home, which, **changes)
    a = listing(cli)[FAST]
    assert a["status"] == "damaged" and needle in a["problem"], a
    assert cli("report", "--profile", "smoke")[0] == 0


@pytest.mark.parametrize("error", [{"message": "boom"}, {"type": "E", "message": 5}, "boom"])
def test_failure_record_with_a_bad_error_is_ignored(home, cli, error):
    (home / "runs" / "smoke" / f"{FAST}.failed.json").write_text(json.dumps(
        dict(status="failed", inputs="x", finished="2099-01-01 00:00:00", error=error)))
    assert cli("report", "--profile", "smoke")[0] == 0


def test_table_markdown_of_the_wrong_kind_is_damaged(home, cli):
    d = home / "figures" / "smoke" / FAST
    t = json.loads((d / "result.json").read_text())["tables"][0]
    md = d / (t[:-4] + ".md"); md.unlink(); md.symlink_to("/etc/hostname")
    assert "leads outside" in listing(cli)[FAST]["problem"]
    md.unlink(); md.mkdir()
    assert "is not a regular file" in listing(cli)[FAST]["problem"]
    assert cli("report", "--profile", "smoke")[0] == 0


def test_unreadable_table_does_not_stop_the_report(home, cli):
    d = home / "figures" / "smoke" / FAST
    t = json.loads((d / "result.json").read_text())["tables"][0]
    (d / t).write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    assert cli("report", "--profile", "smoke")[0] == 0
    assert "is not a readable CSV table" in (home / "figures" / "smoke" / "REPORT.html").read_text()


def test_dry_run_that_would_be_refused_says_so(home, cli):
    rc, out, err = cli("reproduce", "--profile", "smoke", "--only", FAST, "--dry-run", "--set", "C=100000")
    assert rc == 2 and "the batch would be refused, so nothing would run" in out, out + err


def test_posvec_home_that_is_no_clone_is_named(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("POSVEC_HOME", str(tmp_path / "nowhere"))
    rc, out, err = cli("list", "--profile", "smoke")
    assert rc == 2 and "is not a folder, so not a clone of the posvec repository" in err, (out, err)


def test_figure_that_is_not_a_png_is_damaged(home, cli):
    d = home / "figures" / "smoke" / FAST
    fig = json.loads((d / "result.json").read_text())["figures"][0]
    (d / fig).write_text("not an image")
    assert "which is not a PNG image" in listing(cli)[FAST]["problem"]


@pytest.mark.parametrize("kind,needle", [
    ("auto_map", "asks for the folder's own Python code"),
    ("tokenizer_auto_map", "asks for the folder's own tokenizer code"),
    ("empty_gguf", "is empty (0 bytes)"),
])
def test_model_sources_judged_before_the_batch(home, cli, tmp_path, kind, needle):
    "A pretrained model the batch cannot use is refused at the start, as inspect refuses it, and its code never runs."
    from posvec_lib.pretrained import tiny_local_model
    if kind == "empty_gguf": src = tmp_path / "m.gguf"; src.write_bytes(b"")
    else:
        src = tmp_path / "m"; shutil.copytree(tiny_local_model(), src)
        f = src / ("config.json" if kind == "auto_map" else "tokenizer_config.json")
        cfg = json.loads(f.read_text()) if f.exists() else {}
        cfg["auto_map"] = {"AutoConfig": "evil.EvilConfig", "AutoTokenizer": ["evil.Tok", None]}
        if kind == "auto_map": cfg["model_type"] = "evil"
        f.write_text(json.dumps(cfg)); (src / "evil.py").write_text(f"open({str(tmp_path / 'PWNED')!r}, 'w')\n")
    rc, out, err = cli("reproduce", "--profile", "smoke", "--only", FAST, "--set", f"pretrained_model={src}")
    assert rc == 2 and "cannot run on this machine" in err and needle in err, err
    assert not (tmp_path / "PWNED").exists()


def test_passkey_beyond_memory_refused(home, cli):
    rc, out, err = cli("reproduce", "--profile", "smoke", "--only", FAST, "--set", "pretrained_passkey_lengths=100000000")
    assert rc == 2 and "a passkey prompt of 100000000 tokens needs ~" in err, err


def test_compare_outside_git_says_so(home, cli):
    rc, out, err = cli("compare", "--profile", "smoke")
    assert rc == 2 and "is not a git checkout" in err, err
    rc, out, err = cli("compare", "--profile", "smoke", "--only", "bogus")
    assert rc == 2 and "unknown artifact(s) ['bogus']" in err, err
