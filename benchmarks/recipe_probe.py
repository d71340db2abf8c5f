"""Probe (not a test, not an artifact): which fine-tune recipe keeps the base's abilities inside C and carries them
to the target, judged on the positive control (Full-length at 8C) before any PoSE claim is checked (issue 32).

    python benchmarks/recipe_probe.py --profile cpu --seed 1 --out benchmarks/recipe-probe-cpu.csv

It runs on a base trained with `--seed` (default 1; the artifacts use the profile's seed 0), so the recipe is not
tuned on the models the claims are decided on. For each recipe (a set of `pose_*` knobs, below) it fine-tunes
Full-length and PoSE to s·C with the library (`finetune.load_finetuned`, cached in data/cache/finetune), then
measures exact-match passkey retrieval with the code prompt (`passkey.passkey_accuracy`, the same keys for every
model) at f·C for f in `--factors`, the validation PPL at C, and the PPL of the first s·C tokens of held-out
documents. The Original and PI-only with each interpolation are measured once. One CSV row per (run, length);
a rerun replaces its own rows. `train_s` is the wall time of the run's training as its manifest recorded it.
"""
import argparse, csv, platform, time
from pathlib import Path
import torch
from posvec_lib.config import get_profile
from posvec_lib.device import sample_seed
from posvec_lib.data import profile_data, fixed_length_samples, long_documents
from posvec_lib.train import load_zoo_model
from posvec_lib.evaluate import token_nll
from posvec_lib.finetune import FinetuneSpec, load_finetuned, finetune_manifest, extended_model
from posvec_lib.passkey import passkey_accuracy

RECIPES = {   # name: the fine-tune knobs (the rest are the profile's), in the order the probe runs them
    "yarn-200-mix": dict(pose_steps=200, pose_interpolation="yarn_pose", pose_lr_floor=0.1,
                         pose_recall_share=0.1, pose_copy_share=0.5),
    "linear-200-mix": dict(pose_steps=200, pose_interpolation="linear", pose_lr_floor=0.1,
                           pose_recall_share=0.1, pose_copy_share=0.5),
    "cpu-v1": dict(pose_steps=40, pose_interpolation="linear", pose_lr_floor=0.0, pose_recall_share=0.0,
                   pose_copy_share=0.0),
    "yarn-200-plain": dict(pose_steps=200, pose_interpolation="yarn_pose", pose_lr_floor=0.1,
                           pose_recall_share=0.0, pose_copy_share=0.0),
    "yarn-100-mix": dict(pose_steps=100, pose_interpolation="yarn_pose", pose_lr_floor=0.1,
                         pose_recall_share=0.1, pose_copy_share=0.5),
    "yarn-600-mix": dict(pose_steps=600, pose_interpolation="yarn_pose", pose_lr_floor=0.1,
                         pose_recall_share=0.1, pose_copy_share=0.5),
    "yarn-200-mix-lr5e-5": dict(pose_steps=200, pose_interpolation="yarn_pose", pose_lr_floor=0.1,
                                pose_recall_share=0.1, pose_copy_share=0.5, pose_lr=5e-5),
    "yarn-200-mix-lr2e-5": dict(pose_steps=200, pose_interpolation="yarn_pose", pose_lr_floor=0.1,
                                pose_recall_share=0.1, pose_copy_share=0.5, pose_lr=2e-5),
    # the paper's shape: 1,000 steps at 2e-5, linear decay to 0 (YaRN and the mixture kept)
    "yarn-1000-mix-paper-lr": dict(pose_steps=1000, pose_interpolation="yarn_pose", pose_lr_floor=0.0,
                                   pose_recall_share=0.1, pose_copy_share=0.5, pose_lr=2e-5),
    # PoSE on as many tokens as Full-length's 200 steps at 8C (8 × 1,024 tokens a step)
    "yarn-1600-mix": dict(pose_steps=1600, pose_interpolation="yarn_pose", pose_lr_floor=0.1,
                          pose_recall_share=0.1, pose_copy_share=0.5),
}


def cpu_name() -> str:
    "The CPU model, for the timing columns."
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"): return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def measure(model, P, data, s, factors, trials) -> list[dict]:
    "Passkey exact match at each f·C, the validation PPL at C and the PPL of the first s·C tokens."
    val = fixed_length_samples(data.validation, P.C, P.eval_samples, seed=sample_seed(P, "validation_ppl"))
    ppl_c = float(token_nll(model, val, batch_size=16).mean().exp())
    n_long = min(P.eval_docs, int((data.validation.lengths >= s * P.C - 1).sum()))
    long = long_documents(data.validation, s * P.C, n_long)
    ppl_t = float(token_nll(model, long, batch_size=2).mean().exp())
    rows = []
    for f in factors:
        a = passkey_accuracy(model, data.tokenizer, f * P.C, trials, seed=P.seed, variant="code")
        rows.append(dict(length=f * P.C, factor=f, passkey_code=a["accuracy"], passkey_se=round(a["stderr"], 4),
                         val_ppl_C=round(ppl_c, 3), ppl_target=round(ppl_t, 3), target_docs=n_long))
    return rows


def save(rows: list[dict], out: Path):
    "Write `rows` to `out`, replacing earlier rows of the same runs."
    old = list(csv.DictReader(out.open())) if out.exists() else []
    runs = {r["run"] for r in rows}
    keep = [r for r in old if r["run"] not in runs]
    fields = list(dict.fromkeys(k for r in keep + rows for k in r))
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval=""); w.writeheader(); w.writerows(keep + rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--seed", type=int, default=1, help="the probe base's seed (the artifacts use the profile's)")
    ap.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    ap.add_argument("--methods", nargs="+", default=["full-length", "pose"], choices=["full-length", "pose", "randpos"])
    ap.add_argument("--factors", nargs="+", type=int, default=[1, 2, 4, 8])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if a.trials < 1 or min(a.factors) < 1: ap.error("--trials and --factors must be ≥ 1")
    P0 = get_profile(a.profile, seed=a.seed)
    torch.set_num_threads(P0.threads)
    data, s, cpu = profile_data(P0), P0.pose_targets[0], cpu_name()
    rows = []

    def add(run, recipe, method, interp, train_s, model, P):
        got = measure(model.eval(), P, data, s, a.factors, a.trials)
        for r in got:
            r.update(run=run, recipe=recipe, method=method, interpolation=interp, train_s=train_s, cpu=cpu,
                     base_seed=a.seed, target=s, trials=a.trials)
        rows.extend(got)
        if a.out: save(rows, a.out)                      # after every run: a long probe keeps what it measured
        print(run, [(r["factor"], r["passkey_code"]) for r in got], got[0]["val_ppl_C"], got[0]["ppl_target"],
              flush=True)

    add("Original", "-", "none", "none", 0.0, load_zoo_model(P0, "rope"), P0)
    for how in sorted({RECIPES[r].get("pose_interpolation", "linear") for r in a.recipes}):
        add(f"PI-only {how}", "-", "pi-only", how, 0.0, extended_model(P0, "rope", how, s), P0)
    for name in a.recipes:
        P = get_profile(a.profile, seed=a.seed, **RECIPES[name])
        for method in a.methods:
            spec = FinetuneSpec(method, s, P.pose_interpolation)
            t0 = time.time(); model = load_finetuned(P, spec); secs = time.time() - t0
            secs = round(finetune_manifest(P, spec).get("wall_time_s", secs), 1)
            add(f"{method} {name}", name, method, P.pose_interpolation, secs, model, P)
            for r in rows[-len(a.factors):]:
                r.update({k: getattr(P, k) for k in ("pose_steps", "pose_lr", "pose_lr_floor", "pose_warmup",
                                                     "pose_recall_share", "pose_copy_share", "pose_batch_size")})
            if a.out: save(rows, a.out)


if __name__ == "__main__":
    main()
