"""Where evaluation spends its time: each artifact's seconds beside the floor of its forward passes.

Runs the artifacts with every top-level forward pass logged (`efficiency.ForwardLog`, switched on by
POSVEC_FORWARD_LOG), then times bare batched forward passes (inference mode, SDPA attention) of the
same architectures at the same lengths and sums the floor: the seconds the logged evaluation tokens
need at that speed. Training steps inside an artifact (grad on) are reported apart.

    python benchmarks/eval_profile.py --profile cpu --cpu "AMD EPYC" [--only A_formation,zoo]
    python benchmarks/eval_profile.py --profile cpu --cpu "AMD EPYC" --from-logs DIR   # no reruns

Writes benchmarks/eval-profile-<profile>.csv and .md (one row per artifact; `--by-model` adds a CSV
of (artifact, model, length) rows). Run it alone on the machine: it measures time.
"""
from __future__ import annotations
import argparse, json, os, subprocess, sys, tempfile, time
from pathlib import Path
import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]

def run_artifacts(profile: str, only: list[str], logs: Path) -> dict:
    "Run each artifact (--force) with the forward log on; {artifact: wall seconds from run.json}."
    env = dict(os.environ, POSVEC_FORWARD_LOG=str(logs))
    walls = {}
    for a in only:
        cmd = [sys.executable, "-m", "posvec_lib.cli", "reproduce", "--profile", profile,
               "--only", a, "--force"]
        print(f"[{time.strftime('%H:%M:%S')}] {a}: running", flush=True)
        r = subprocess.run(cmd, cwd=ROOT, env=env)
        if r.returncode: raise SystemExit(f"{a} failed (exit {r.returncode}); see its log")
        run = json.loads((ROOT / "figures" / profile / a / "run.json").read_text())
        walls[a] = float(run["wall_time_s"])
    return walls

def seconds_per_token(config: dict, length: int, threads: int, reps: int = 3) -> float:
    "Median seconds per token of a bare batched forward pass of this architecture at `length`."
    from transformers import AutoConfig, AutoModelForCausalLM
    import posvec_lib.variants  # noqa: F401  (registers the zoo's position kinds and attention)
    torch.set_num_threads(threads)
    d = dict(config)
    attn = d.pop("_attn_implementation_internal", None) or d.pop("_attn_implementation", None)
    cfg = AutoConfig.for_model(d.pop("model_type"), **d)
    # eager (kept by measures that read attention weights) -> SDPA; the zoo's own paths stay
    cfg._attn_implementation = "sdpa" if attn in (None, "eager") else attn
    torch.manual_seed(0)
    m = AutoModelForCausalLM.from_config(cfg).eval()
    batch = max(1, min(16, 8192 // max(length, 1)))
    x = torch.randint(0, cfg.vocab_size, (batch, length))
    times = []
    with torch.inference_mode():
        m(x)                                                     # warm-up
        for _ in range(reps):
            t0 = time.perf_counter()
            m(x)
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2] / (batch * length)

def profile_table(logs: Path, walls: dict, threads: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    "(per artifact, per artifact x model x length) tables: wall, in forward, floor, ratios."
    rows, detail, speed = [], [], {}
    for a, wall in walls.items():
        log = json.loads((logs / f"{a}.json").read_text())
        df = pd.DataFrame(log["calls"], columns=["model", "batch", "length", "grad", "seconds"])
        df["tokens"] = df.batch * df.length
        ev = df[~df.grad.astype(bool)]
        g = ev.groupby(["model", "length"], as_index=False).agg(
            calls=("seconds", "size"), tokens=("tokens", "sum"), seconds=("seconds", "sum"))
        floors = []
        for r in g.itertuples():
            k = (r.model, r.length)
            if k not in speed:
                speed[k] = seconds_per_token(log["configs"][r.model], int(r.length), threads)
            floors.append(r.tokens * speed[k])
        g["floor_s"] = floors
        g.insert(0, "artifact", a)
        detail.append(g)
        floor = float(g.floor_s.sum())
        rows.append(dict(artifact=a, wall_s=round(wall, 1),
                         eval_forward_s=round(float(ev.seconds.sum()), 1),
                         train_forward_s=round(float(df[df.grad.astype(bool)].seconds.sum()), 1),
                         eval_tokens=int(ev.tokens.sum()), eval_calls=len(ev),
                         floor_s=round(floor, 1),
                         wall_over_floor=round(wall / floor, 1) if floor else float("nan"),
                         forward_over_floor=round(float(ev.seconds.sum()) / floor, 2)
                         if floor else float("nan")))
    return pd.DataFrame(rows), (pd.concat(detail) if detail else pd.DataFrame())

def markdown(df: pd.DataFrame) -> str:
    "A GitHub Markdown table."
    cell = lambda x: f"{x:.4g}" if isinstance(x, float) else str(x)
    rows = [list(df.columns), ["---"] * len(df.columns)] + [[cell(x) for x in r]
                                                           for r in df.itertuples(index=False)]
    return "\n".join("| " + " | ".join(map(str, r)) + " |" for r in rows)

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--only", default="", help="comma-separated artifacts (default: all)")
    ap.add_argument("--cpu", required=True, help="the machine's CPU, named in the output")
    ap.add_argument("--from-logs", default="", help="a folder of logs from an earlier run")
    ap.add_argument("--by-model", action="store_true")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from posvec_lib.config import get_profile
    from posvec_lib.reproduce import ARTIFACTS
    P = get_profile(a.profile)
    only = [x for x in a.only.split(",") if x] or list(ARTIFACTS)
    if a.from_logs:
        logs = Path(a.from_logs)
        walls = {x: float(json.loads((ROOT / "figures" / a.profile / x / "run.json")
                                     .read_text())["wall_time_s"]) for x in only}
    else:
        logs = Path(tempfile.mkdtemp(prefix="posvec-forward-"))
        walls = run_artifacts(a.profile, only, logs)
    t, d = profile_table(logs, walls, P.threads)
    out = ROOT / "benchmarks" / f"eval-profile-{a.profile}"
    t.to_csv(out.with_suffix(".csv"), index=False)
    if a.by_model: d.to_csv(out.parent / f"{out.name}-by-model.csv", index=False)
    head = (f"# Evaluation against its forward-pass floor, profile `{a.profile}`\n\n"
            f"`python benchmarks/eval_profile.py --profile {a.profile} --cpu \"{a.cpu}\"`; "
            f"{a.cpu}, {P.threads} threads, {time.strftime('%Y-%m-%d')}. wall: the artifact's "
            "run.json; eval forward: seconds inside top-level forward passes without grad; "
            "floor: the same tokens through bare batched SDPA forward passes of the same "
            "architectures at the same lengths.\n\n")
    out.with_suffix(".md").write_text(head + markdown(t) + "\n")
    print(t.to_string(index=False))
    print(f"logs: {logs}")

if __name__ == "__main__":
    main()
