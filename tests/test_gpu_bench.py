"""benchmarks/gpu_paper.py on the CPU with tiny shapes: every part runs, every row has a status."""
import csv, json, os, subprocess, sys
from importlib import util
from pathlib import Path
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_paper.py"


def read(path: Path) -> list[dict]:
    with open(path, newline="") as f: return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def bench():
    "The script as a module (its columns and helpers)."
    spec = util.spec_from_file_location("gpu_paper", SCRIPT)
    mod = util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    "A tiny CPU run, packages the device may lack hidden before transformers: (folder, process)."
    out = tmp_path_factory.mktemp("gpu-bench")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(SCRIPT), "--device", "cpu", "--tiny", "--out", str(out),
           "--hide-modules", "datasets,scipy,gguf,deepspeed"]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    return out, r


def test_runs_without_errors(run):
    out, r = run
    assert r.returncode == 0, r.stderr[-3000:]
    env = json.loads((out / "gpu-env.json").read_text())
    assert env["stand_in_modules"] == ["datasets", "scipy", "scipy.stats"] and not env.get("part_errors")
    assert {"torch", "transformers", "cuda", "total_seconds", "paper_numbers"} <= set(env)
    assert (out / "B_fig3_gpu.png").stat().st_size > 10_000


def test_finetune_rows(run, bench):
    "Full-length at C, 2C, 4C, 8C and PoSE at C with positions to 2C, 4C, 8C, for each config."
    out, _ = run
    rows = read(out / "gpu-finetune-memory.csv")
    assert list(rows[0]) == bench.FT_COLUMNS
    assert all(r["status"] for r in rows)
    got = {(r["config"], r["method"], int(r["train_length"]), int(r["position_range"]))
           for r in rows}
    for cfg in ("tiny:mixed", "tiny:bf16"):
        assert {(cfg, "full-length", s * 32, s * 32) for s in (1, 2, 4, 8)} <= got
        assert {(cfg, "pose", 32, s * 32) for s in (2, 4, 8)} <= got
    assert len(rows) == 14 and all(r["status"] == "ok" for r in rows)
    assert all(float(r["s_per_step"]) > 0 and int(r["steps_timed"]) == 2 for r in rows)
    pose = [r for r in rows if r["method"] == "pose"]
    assert {int(r["tokens_per_step"]) for r in pose} == {32}      # PoSE trains on Lc tokens


def test_pv_rows(run, bench):
    out, _ = run
    rows = {r["measure"]: r for r in read(out / "gpu-pv-throughput.csv")}
    assert set(rows) == {"bare forward", "positional_vectors", "mean_attention"}
    assert all(r["status"] == "ok" and float(r["tokens_per_s"]) > 0 for r in rows.values())
    assert rows["positional_vectors"]["time_vs_bare"] and rows["mean_attention"]["time_vs_bare"]


def test_cuda_paths_compare_cpu_copies(run):
    "On the CPU the device side is a second CPU copy: every comparison runs and passes."
    out, _ = run
    rows = read(out / "gpu-cuda-paths.csv")
    calls = {r["call"] for r in rows}
    for c in ("logits", "logits bf16", "positional_vectors", "mean_attention", "efficiency.step_cost",
              "rope switch linear ×2 (+ undo)", "rope switch yarn_pose ×2 (+ undo)",
              "extend replacement (+ undo)", "extend dynamic_ntk (+ undo)",
              "PoSE fine-tune, 4 Trainer steps (losses)"):
        assert c in calls, c
    bad = [r for r in rows if r["status"] != "pass"]
    assert not bad and all(r["pass"] == "True" for r in rows), bad
    assert all(float(r["max_abs_diff"]) <= float(r["tolerance"]) for r in rows)
    assert {r["compared"] for r in rows if r["call"] == "logits"} == {"cpu copy vs cpu"}


def test_comparison_sees_a_difference(tmp_path, bench):
    "max_diff sees a perturbation above the tolerance; Rows refuses an unknown column."
    a = torch.zeros(3); b = a.clone(); b[1] = 2e-4
    assert bench.max_diff(a, b) == pytest.approx(2e-4) and bench.max_diff(a, b) > 1e-4
    rows = bench.Rows(tmp_path / "x.csv", bench.CUDA_COLUMNS)
    rows.add(call="logits", status="fail", **{"pass": False}, max_abs_diff="2e-4", tolerance=1e-4)
    assert read(tmp_path / "x.csv")[0]["status"] == "fail"
    with pytest.raises(KeyError): rows.add(call="x", nonsense=1)


def test_plan_rows(bench):
    "B Fig. 3's rows: PoSE at Lc for each Lt > Lc, then Full-length at every Lt."
    assert bench.finetune_plan(2048, [1, 2, 4, 8]) == [
        ("pose", 2048, 4096), ("pose", 2048, 8192), ("pose", 2048, 16384),
        ("full-length", 2048, 2048), ("full-length", 4096, 4096), ("full-length", 8192, 8192),
        ("full-length", 16384, 16384)]


def oom_rows(bench, limit: int) -> list[dict]:
    "config_rows on a tiny model that runs out of memory (as CUDA says) above `limit` tokens."
    import argparse, time
    from posvec_lib.config import get_profile
    torch.set_num_threads(1)
    a = argparse.Namespace(C=32, warmup=1, steps=1, batch=1, grad_ckpt=True)
    model, _ = bench.build("tiny", 32, torch.float32, torch.device("cpu"))
    def refuse(mod, args, kwargs):
        if kwargs["input_ids"].shape[1] > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    model.register_forward_pre_hook(refuse, with_kwargs=True)
    rows = []
    P = get_profile("paper", device="cpu", pose_batch_size=1, seed=0)
    bench.config_rows(a, torch.device("cpu"), model, P, bench.finetune_plan(32, [1, 2, 4, 8]),
                      dict(config="tiny:mixed", precision="mixed"), time.time() + 600, None,
                      lambda **r: rows.append(r))
    return rows


def test_out_of_memory_is_a_row(bench):
    "Out of memory at 4C is an 'oom' row, 8C skipped, the rest measured; at the first row all skip."
    rows = {(r["method"], r["train_length"], r["position_range"]): r["status"]
            for r in oom_rows(bench, 64)}
    assert rows[("pose", 32, 256)] == "ok" and rows[("full-length", 64, 64)] == "ok"
    assert rows[("full-length", 128, 128)] == "oom"
    assert rows[("full-length", 256, 256)].startswith("skipped: out of memory at 128")
    first = oom_rows(bench, 16)
    assert first[0]["status"] == "oom"
    assert all(r["status"] == "skipped: out of memory at the first row" for r in first[1:])
