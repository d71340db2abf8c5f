"""Hardening: determinism, interruption at any moment, bad input named, out-of-memory hints, half-written caches.

The batch tests run the smoke reproduction in scratch project roots that share the checkout's notebooks and
caches (data/cache) but have their own figures/ and runs/, so they never touch the checkout's results:
  * a clean run (A);
  * a run killed with SIGKILL inside its third artifact, then started again (B).
Nothing the killed run left may be trusted, the rerun skips what was finished, and every result file of B
equals A's byte for byte: two runs from the same caches give identical results. (Whether every notebook
succeeds is tests/test_reproduce.py's business; here a notebook that fails must fail in both runs, and the
artifacts that succeed are compared.)
"""
import json, os, re, shutil, signal, subprocess, time
from pathlib import Path
import pytest
import torch

OFFLINE = {v: "1" for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")}
# Files that record the run rather than its results: the runner's record, the notebook's wall times, the report
# (it shows wall times and finish times). Everything else under figures/<profile>/<artifact>/ must be reproducible.
NOT_RESULTS = {"run.json", "timing.json"}
# Outputs that are wall-clock measurements by nature (B Fig. 3b: seconds per training step, and the claim on
# time ratios). Notebooks mark them with volatile=True (result.json lists them); these are listed here too until
# B_ppl marks them itself.
KNOWN_VOLATILE: dict = {}   # artifacts mark wall-clock outputs themselves (Record(..., volatile=True))
DATE = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}")


def scratch_home(root: Path, d: Path) -> Path:
    "A project root with the checkout's notebooks, caches and papers' numbers (symlinked) and its own figures/ and runs/."
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(root / "settings.ini", d / "settings.ini")
    (d / "nbs").symlink_to(root / "nbs")
    (root / "data" / "cache").mkdir(parents=True, exist_ok=True)
    (d / "data").mkdir(); (d / "data" / "cache").symlink_to(root / "data" / "cache")
    (d / "data" / "papers").symlink_to(root / "data" / "papers")      # the papers' numbers, read by the notebooks
    return d


def env_for(home: Path) -> dict:
    return dict(os.environ, POSVEC_HOME=str(home), PYTHONUNBUFFERED="1", **OFFLINE)


def posvec(venv_bin, home, *args, timeout=1200):
    return subprocess.run([str(venv_bin / "posvec"), *args], cwd=home, env=env_for(home), capture_output=True, text=True,
                          timeout=timeout)


def artifact_names():
    from posvec_lib.reproduce import ARTIFACTS
    return list(ARTIFACTS)


def children(pid: int) -> list[int]:
    "Direct child processes of `pid` (Linux /proc)."
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit(): continue
        try: stat = (p / "stat").read_text()
        except OSError: continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid: out.append(int(p.name))
    return out


def alive(pid: int) -> bool:
    try: state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError: return False
    return state != "Z"


def wait_for(pred, timeout: float, what: str):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = pred()
        if v: return v
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def complete(f: Path) -> bool:
    "Is this figure/table/record file whole (not cut off half-way through writing)?"
    b = f.read_bytes()
    if f.suffix == ".png": return b.startswith(b"\x89PNG\r\n\x1a\n") and b.endswith(b"IEND\xaeB`\x82")
    if f.suffix == ".pdf": return b.startswith(b"%PDF") and b"%%EOF" in b[-64:]
    if f.suffix == ".json": json.loads(b); return True
    if f.suffix in (".csv", ".md"): return b.endswith(b"\n") and len(b) > 0
    return True


def result_files(d: Path) -> dict[str, Path]:
    "An artifact folder's result files: not its run records, not its executed notebook."
    # the executed notebook is a transcript (wall times, the kernel's interleaving of stdout and stderr);
    # the figures and tables it shows are compared here as files
    return {f.name: f for f in d.iterdir() if f.is_file() and not f.name.startswith(".") and f.name not in NOT_RESULTS
            and f.name != f"{d.name}.ipynb"}


def volatile(art: str, res: dict) -> set[str]:
    return set(res.get("volatile", [])) | set(KNOWN_VOLATILE.get(art, []))


def masked(res: dict, vol: set[str]) -> dict:
    "result.json with the values (and verdicts) of wall-clock claims masked."
    prefixes = [v[len("claim: "):] for v in vol if v.startswith("claim: ")]
    res = dict(res, claims=[dict(claim=c["claim"], masked=True) if any(c["claim"].startswith(p) for p in prefixes) else c
                            for c in res["claims"]])
    return res


# ---------------------------------------------------------------------------------------------------------------
# The batch: a clean run, a killed-and-resumed run, and their comparison

@pytest.fixture(scope="module")
def clean_run(root, venv_bin, tmp_path_factory):
    home = scratch_home(root, tmp_path_factory.mktemp("clean") / "home")
    t0 = time.time()
    r = posvec(venv_bin, home, "reproduce", "--profile", "smoke")
    assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr[-3000:]
    print(f"clean smoke run: {time.time() - t0:.0f}s")
    (home / "console.log").write_text(r.stdout + r.stderr)
    return home


def test_batch_console_is_quiet(clean_run):
    "No per-artifact noise from the kernel: no TCP-transport warning, no torch-profiler lines."
    out = (clean_run / "console.log").read_text()
    assert "Kernel is running over TCP" not in out and "USDT:" not in out and "profiler_start" not in out, out[-3000:]


def summary_of(home: Path) -> dict:
    return json.loads((home / "runs" / "smoke" / "summary.json").read_text())


@pytest.fixture(scope="module")
def killed_run(root, venv_bin, tmp_path_factory, clean_run):
    "SIGKILL the batch inside its third artifact; returns what it left (before anything else touches it)."
    home = scratch_home(root, tmp_path_factory.mktemp("killed") / "home")
    names = artifact_names(); third = names[2]
    log = home / "out.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(venv_bin / "posvec"), "reproduce", "--profile", "smoke", "--force"], cwd=home,
                                env=env_for(home), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: f"] {third}: running" in log.read_text() or proc.poll() is not None, 600, f"{third} to start")
        assert proc.poll() is None, log.read_text()[-3000:]
        kernels = wait_for(lambda: children(proc.pid), 60, f"the kernel of {third}")
        fig = home / "figures" / "smoke" / third
        t_kernel = time.time()   # kill when the notebook wrote its first output, or 3 s into the kernel's life
        wait_for(lambda: (fig.exists() and any(fig.iterdir())) or time.time() - t_kernel > 3, 60, "a moment inside the notebook")
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None: os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # The kernel runs in its own session; it must notice that its runner died and stop (and write nothing more).
    t0 = time.time()
    while any(alive(k) for k in kernels) and time.time() - t0 < 20: time.sleep(0.2)
    orphans = [k for k in kernels if alive(k)]
    for k in orphans: os.kill(k, signal.SIGKILL)
    listing = json.loads(posvec(venv_bin, home, "list", "--profile", "smoke", "--json").stdout)
    return dict(home=home, third=third, names=names, log=log.read_text(), orphans=orphans,
                status={a["artifact"]: a["status"] for a in listing["artifacts"]})


@pytest.fixture(scope="module")
def resumed_run(venv_bin, killed_run):
    r = posvec(venv_bin, killed_run["home"], "reproduce", "--profile", "smoke")
    return r


def test_killed_run_leaves_nothing_trusted(killed_run):
    home, third, names, st = killed_run["home"], killed_run["third"], killed_run["names"], killed_run["status"]
    assert not killed_run["orphans"], f"kernels {killed_run['orphans']} outlived their killed runner"
    assert st[names[0]] == st[names[1]] == "done", (st, killed_run["log"][-2000:])
    assert st[third] != "done" and all(st[n] == "missing" for n in names[3:]), st
    from posvec_lib.reproduce import ARTIFACTS
    from posvec_lib.digest import inputs_hash
    from posvec_lib.config import get_profile
    P = get_profile("smoke")
    for d in (home / "figures" / "smoke").iterdir():
        if not d.is_dir() or d.name.startswith("."): continue      # .<artifact>.partial: the killed run's unfinished files
        if (d / "result.json").exists():        # a completion marker only with the runner's ok record of the current inputs
            run = json.loads((d / "run.json").read_text())
            assert run["status"] == "ok" and run["inputs"] == inputs_hash(ARTIFACTS[d.name], P), d
        for f in d.iterdir():
            if not f.name.startswith("."): assert complete(f), f"half-written {f}"
    assert not (home / "figures" / "smoke" / third / "result.json").exists()
    assert not (home / "figures" / "smoke" / third / "run.json").exists()


def test_rerun_completes_without_redoing_finished(clean_run, killed_run, resumed_run):
    names, third = killed_run["names"], killed_run["third"]
    out = resumed_run.stdout
    assert resumed_run.returncode in (0, 1), out[-3000:] + resumed_run.stderr[-3000:]
    for n in names[:2]: assert f"] {n}: up to date, skipped" in out, out
    assert f"] {third}: running" in out and f"] {third}: ok" in out, out
    s, clean = summary_of(killed_run["home"]), summary_of(clean_run)
    assert s["skipped"] == names[:2] and sorted(s["ok"] + s["failed"]) == sorted(names[2:])
    assert s["failed"] == clean["failed"], (s["failed"], clean["failed"])     # a broken notebook fails in both runs


def test_two_runs_give_identical_result_files(clean_run, killed_run, resumed_run):
    "Every result.json, table, figure (PNG and PDF) of the resumed run equals the clean run's byte for byte."
    assert resumed_run.returncode in (0, 1)
    a_root, b_root = clean_run / "figures" / "smoke", killed_run["home"] / "figures" / "smoke"
    compared, differ, failed = 0, [], summary_of(clean_run)["failed"]
    for art in killed_run["names"]:
        if art in failed: continue
        A, B = result_files(a_root / art), result_files(b_root / art)
        assert sorted(A) == sorted(B), (art, sorted(set(A) ^ set(B)))
        ra = json.loads(A["result.json"].read_text()); rb = json.loads(B["result.json"].read_text())
        vol = volatile(art, ra) | volatile(art, rb)
        for name in sorted(A):
            if name in vol: continue
            if name == "result.json" and any(v.startswith("claim: ") for v in vol):
                if masked(ra, vol) != masked(rb, vol): differ.append(f"{art}/{name}")
            elif A[name].read_bytes() != B[name].read_bytes(): differ.append(f"{art}/{name}")
            compared += 1
    assert not differ, f"differ between two runs from the same caches: {differ}"
    assert compared > 50, compared


def test_two_runs_give_the_same_headline(clean_run, killed_run, resumed_run):
    "The report's claim counts of two runs are identical (in CI the clean run is cold): no wall-clock verdict is counted."
    line = lambda h: next(l for l in (h / "figures" / "smoke" / "REPORT.md").read_text().splitlines() if l.startswith("Claims:"))
    assert line(clean_run) == line(killed_run["home"])


def test_result_json_holds_no_clock(clean_run):
    "Wall times and timestamps live in run.json / timing.json, never in result.json."
    from posvec_lib.record import is_timing
    bad = []
    def walk(o, path):
        if isinstance(o, dict):
            for k, v in o.items():
                if is_timing(str(k)): bad.append(f"{path}/{k}")
                walk(v, f"{path}/{k}")
        elif isinstance(o, list):
            for i, v in enumerate(o): walk(v, f"{path}[{i}]")
        elif isinstance(o, str) and DATE.search(o): bad.append(f"{path}: {o}")
    results = sorted((clean_run / "figures" / "smoke").glob("*/result.json"))
    assert len(results) >= len(artifact_names()) - len(summary_of(clean_run)["failed"])
    for f in results:
        res = json.loads(f.read_text())
        vol = volatile(f.parent.name, res)
        walk(masked(res, vol), f.parent.name)
        run = json.loads((f.parent / "run.json").read_text())
        assert run["wall_time_s"] > 0 and run["finished"] and "timings" in run, run
    assert not bad, bad


def test_report_has_setup_findings_and_missing(root, clean_run, venv_bin, tmp_path):
    "The report of a finished run: summary, setup (profile, models with cache keys, corpus, commit, wall time), findings."
    home = scratch_home(root, tmp_path / "home")
    shutil.copytree(clean_run / "figures", home / "figures")
    shutil.rmtree(home / "figures" / "smoke" / "B_chunks")      # one registered artifact without a result
    r = posvec(venv_bin, home, "report", "--profile", "smoke")
    assert r.returncode == 0, r.stderr
    md = (home / "figures" / "smoke" / "REPORT.md").read_text()
    html = (home / "figures" / "smoke" / "REPORT.html").read_text()
    n_failed = len(summary_of(clean_run)["failed"])
    assert f"Artifacts without a current result ({1 + n_failed} of {len(artifact_names())})" in md and "**B_chunks** (missing)" in md
    assert "| profile | smoke (knob digest" in md and "| C | 32 |" in md and "| vocab_size | 512 |" in md
    assert "not a git checkout" in md and "s in total (sum of the artifacts' last runs)" in md
    assert re.search(r"\| rope \| TL-RoPE \| rope-[0-9a-f]{12} \| scratch \| 30 \| 7680 / 7680 \|", md), md[:4000]
    assert re.search(r"\| stdlib \| [0-9a-f]{16} \| 80 / \d+ / \d+ \|", md)
    assert "## Findings" in md and "B_chunks" in html and html.count("<h2 ") == len(artifact_names())


# ---------------------------------------------------------------------------------------------------------------
# Half-written cache entries are rebuilt, not trusted; out of memory names the knob

@pytest.fixture(scope="module")
def cache_home(tmp_path_factory):
    "An empty project root: every cache is built here, none of the checkout's is touched."
    d = tmp_path_factory.mktemp("cachehome")
    (d / "settings.ini").write_text("[DEFAULT]\n"); (d / "nbs").mkdir()
    return d


def test_half_written_zoo_entry_is_retrained(cache_home, monkeypatch):
    monkeypatch.setenv("POSVEC_HOME", str(cache_home))
    from posvec_lib.config import get_profile
    from posvec_lib.train import zoo_path, load_zoo_model
    P = get_profile("smoke")
    final = zoo_path(P, "rope")
    final.mkdir(parents=True); (final / "model.safetensors").write_bytes(b"cut off")      # killed before the manifest
    partial = final.with_name(final.name + ".partial")
    (partial / "checkpoint-20").mkdir(parents=True)                                       # killed while Trainer saved it
    (partial / "checkpoint-20" / "model.safetensors").write_bytes(b"cut off")
    tmp = final.with_name(final.name + ".tmp"); tmp.mkdir(); (tmp / "config.json").write_text("{")
    model = load_zoo_model(P, "rope")
    man = json.loads((final / "manifest.json").read_text())
    assert man["steps"] == P.train_steps and man["resumed"] is False         # trained from scratch, not from checkpoint-20
    assert (final / "model.safetensors").stat().st_size > 10_000 and not partial.exists() and not tmp.exists()
    assert model.config.vocab_size > 0


def test_half_written_finetune_entry_is_retrained(cache_home, monkeypatch):
    monkeypatch.setenv("POSVEC_HOME", str(cache_home))
    from posvec_lib.config import get_profile
    from posvec_lib.finetune import FinetuneSpec, finetune_path, load_finetuned
    P = get_profile("smoke")
    spec = FinetuneSpec("pose", 2)
    final = finetune_path(P, spec)
    final.mkdir(parents=True); (final / "config.json").write_text("{}")                    # no manifest: not finished
    load_finetuned(P, spec)
    man = json.loads((final / "manifest.json").read_text())
    assert man["steps"] == P.pose_steps and (final / "model.safetensors").stat().st_size > 10_000


def test_half_written_tokenizer_is_ignored(cache_home, monkeypatch):
    monkeypatch.setenv("POSVEC_HOME", str(cache_home))
    from posvec_lib.paths import cache_dir
    from posvec_lib.data import load_corpus, train_bpe
    c = load_corpus("stdlib", max_files=20)
    t = train_bpe(c, 300)
    path = cache_dir("tokenizers") / f"bpe-{t.posvec_hash}.json"
    path.unlink()
    (path.parent / f".{path.name}.x1.tmp").write_text('{"version": "1.0", "trunc')      # what a kill mid-write leaves
    t2 = train_bpe(c, 300)
    assert json.loads(path.read_text())["model"]["type"] == "BPE" and len(t2) == len(t)


def test_oom_in_training_names_the_knob(cache_home, monkeypatch):
    "A GPU/CPU out-of-memory inside a training loop says which knob to lower and its value (simulated)."
    monkeypatch.setenv("POSVEC_HOME", str(cache_home))
    import transformers
    from posvec_lib.config import get_profile
    from posvec_lib.train import train_zoo_model, load_zoo_model
    from posvec_lib.finetune import FinetuneSpec, finetune
    P = get_profile("smoke")
    load_zoo_model(P, "rope")                                      # the base of the fine-tune, trained for real first
    def oom(self, *a, **k): raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
    monkeypatch.setattr(transformers.Trainer, "train", oom)
    with pytest.raises(torch.OutOfMemoryError, match=r"lower the knob batch_size \(now 8; e\.g\. `posvec reproduce --set batch_size=4`"):
        train_zoo_model(get_profile("smoke", seed=7), "nope")
    with pytest.raises(torch.OutOfMemoryError, match=r"lower the knob pose_batch_size \(now 2.*Tried to allocate 20\.00 GiB"):
        finetune(P, FinetuneSpec("randpos", 2))
    def cpu_oom(self, *a, **k): raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: not enough memory")
    monkeypatch.setattr(transformers.Trainer, "train", cpu_oom)
    with pytest.raises(torch.OutOfMemoryError, match=r"lower the knob batch_size \(now 8"):
        train_zoo_model(get_profile("smoke", seed=7), "nope")
    def bug(self, *a, **k): raise RuntimeError("shape mismatch")   # anything else passes through untouched
    monkeypatch.setattr(transformers.Trainer, "train", bug)
    with pytest.raises(RuntimeError, match="^shape mismatch$"):
        train_zoo_model(get_profile("smoke", seed=7), "nope")


def test_oom_hint_context():
    from posvec_lib.device import oom_hint
    def step(): raise torch.OutOfMemoryError("CUDA out of memory")
    with pytest.raises(torch.OutOfMemoryError) as e:
        with oom_hint("pose_batch_size", 64, "fine-tuning"): step()
    assert str(e.value).startswith("out of memory while fine-tuning: lower the knob pose_batch_size (now 64; "
                                   "e.g. `posvec reproduce --set pose_batch_size=32`")
    with pytest.raises(torch.OutOfMemoryError) as e2:                # nested hints: the innermost knob is kept
        with oom_hint("batch_size", 8):
            with oom_hint("pose_batch_size", 64): step()
    assert "pose_batch_size" in str(e2.value) and "knob batch_size" not in str(e2.value)


# ---------------------------------------------------------------------------------------------------------------
# Bad input: one line naming the value and what is allowed (profile/artifact/knob names: tests/test_reproduce.py)

def test_paper_profile_without_gpu_is_refused_at_once(root, venv_bin, tmp_path):
    if torch.cuda.is_available(): pytest.skip("a GPU is present")
    home = scratch_home(root, tmp_path / "home")
    t0 = time.time()
    r = posvec(venv_bin, home, "reproduce", "--profile", "paper")
    assert r.returncode == 2 and time.time() - t0 < 60
    assert "profile 'paper' wants a GPU (device='cuda') but no GPU is visible, so nothing was run" in r.stderr, r.stderr
    assert "--allow-no-gpu" in r.stderr and "--profile cpu" in r.stderr
    assert not (home / "runs" / "paper").exists() and not (home / "figures" / "paper").exists()
    # the explicit flag passes the GPU check; offline, the paper's hub corpus is refused next, by name
    r = posvec(venv_bin, home, "reproduce", "--profile", "paper", "--allow-no-gpu")
    assert r.returncode == 2 and "corpus='togethercomputer/RedPajama-Data-1T-Sample' is a hub name but the hub is offline" in r.stderr, r.stderr
    assert not (home / "runs" / "paper").exists()


@pytest.mark.parametrize("sets,needle", [
    (['pretrained=["rope=./no/such/model"]'], "pretrained[rope]='./no/such/model': model path does not exist; allowed: an existing local path"),
    (['ablation_models=["./no/such/model"]'], "ablation_models='./no/such/model': model path does not exist"),
    (["base_model=TinyLlama/TinyLlama_v1.1"], "base_model='TinyLlama/TinyLlama_v1.1' is a hub name but the hub is offline"),
    (["corpus=emozilla/pg19-test"], "corpus='emozilla/pg19-test' is a hub name but the hub is offline (HF_HUB_OFFLINE"),
    (["corpus=./no/such/corpus"], "corpus='./no/such/corpus': corpus path does not exist; allowed: 'stdlib', 'stdlib-tests', an existing local path"),
    (['pretrained=["rope"]'], "knob pretrained=['rope'] is not allowed; allowed: a list of 'variant=hub-name-or-path' entries"),
    (["pose_targets=[1,4]"], "knob pose_targets=[1, 4] is not allowed; allowed: a non-empty list of integers t ≥ 2 (the PoSE target window Lt = t·C must be larger than the original window Lc = C)"),
    (['zoo=["nope","xpos"]'], "knob zoo=['nope', 'xpos'] is not allowed; allowed: a non-empty list of distinct zoo variants from ['nope'"),
])
def test_bad_knob_values_refused_before_running(tmp_path, monkeypatch, capsys, sets, needle):
    for k, v in OFFLINE.items(): monkeypatch.setenv(k, v)
    monkeypatch.setenv("POSVEC_HOME", str(tmp_path))
    (tmp_path / "nbs" / "experiments").mkdir(parents=True)
    from posvec_lib.cli import main
    assert main(["reproduce", "--profile", "smoke", "--set", *sets]) == 2
    err = capsys.readouterr().err
    assert err.startswith("posvec: error: ") and needle in err, err
    assert not (tmp_path / "runs").exists()


def test_window_and_chunk_messages():
    from posvec_lib.pose import check_windows, check_chunks, pose_sample_chunks
    from posvec_lib.finetune import FinetuneSpec
    import numpy as np
    with pytest.raises(ValueError, match=r"target window Lt=32 must be larger than the original window Lc=32"): check_windows(32, 32)
    with pytest.raises(ValueError, match=r"target window Lt=16 must be larger than the original window Lc=32"): check_windows(32, 16)
    with pytest.raises(ValueError, match=r"n_chunks=40 is out of range; allowed: 1\.\.Lc=32"): check_chunks(40, 32)
    with pytest.raises(ValueError, match=r"n_chunks=40 is out of range; allowed: 1\.\.Lc=32"):
        FinetuneSpec("chunks", n_chunks=40).sampler_kwargs(32)
    with pytest.raises(ValueError, match=r"n_chunks=40 is out of range"):
        pose_sample_chunks(np.arange(500), 32, 128, np.random.default_rng(0), n_chunks=40)
    with pytest.raises(ValueError, match="int ≥ 2"): FinetuneSpec(target=1)
