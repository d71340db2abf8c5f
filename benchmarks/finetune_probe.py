"""Probe (not a test, not an artifact): does a PoSE / Full-length / RandPos fine-tune of the zoo's RoPE base keep the base's
passkey retrieval, and carry it beyond C, as a function of its number of steps? The cpu base retrieves 20 of 20 code
passkeys at C; the B notebooks' 40-step fine-tunes (lr 2e-4, linear schedule to 0, linear interpolation s = 8) retrieve
none, not even at C. Issue 13 asks for fine-tunes at the paper's 1000 steps; this measures what they would change.

    python benchmarks/finetune_probe.py --profile cpu --method pose --steps 40 200 1000 --out benchmarks/finetune-probe-cpu.csv

For each method and step count it fine-tunes with the library (`finetune.load_finetuned` on a `FinetuneSpec` with
`steps`; cached in data/cache/finetune like the notebooks' runs, the same recipe: the profile's pose_lr, pose_batch_size,
linear schedule, 10 warm-up steps), then measures greedy exact-match passkey retrieval with the code prompt
(`passkey.passkey_accuracy`, `--trials` keys, the same keys for every model) and the graded rank score among
`passkey_candidates` answers (`passkey.passkey_rank`, chance 0.5) at lengths f·C for f in `--factors`, and the
validation PPL at C. One CSV row per (method, steps, length); a rerun replaces its own rows.
"""
import argparse, csv, math, time
from pathlib import Path
import torch
from posvec_lib.config import get_profile
from posvec_lib.device import sample_seed
from posvec_lib.data import profile_data, fixed_length_samples
from posvec_lib.train import load_zoo_model
from posvec_lib.evaluate import token_nll
from posvec_lib.finetune import FinetuneSpec, FT_METHODS, load_finetuned, finetune_manifest
from posvec_lib.passkey import passkey_accuracy, passkey_rank


def measure(model, P, data, factors, trials) -> list[dict]:
    "Passkey exact match and rank score at each length f·C, and the validation PPL at C."
    tok, rows = data.tokenizer, []
    val = fixed_length_samples(data.validation, P.C, P.eval_samples, seed=sample_seed(P, "validation_ppl"))
    ppl = float(token_nll(model, val, batch_size=16).mean().exp())
    for f in factors:
        kw = dict(seed=P.seed, variant="code")          # the keys and prompts of B_passkey and the zoo table
        a = passkey_accuracy(model, tok, f * P.C, trials, **kw)
        g = passkey_rank(model, tok, f * P.C, trials, n_candidates=P.passkey_candidates, **kw)
        rows.append(dict(length=f * P.C, factor=f, passkey_code=a["accuracy"], passkey_code_se=round(a["stderr"], 4),
                         rank_score=round(g["rank_score"], 4), rank_score_se=round(g["rank_score_se"], 4), val_ppl_C=round(ppl, 3)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--method", nargs="+", default=["pose"], choices=[m for m in FT_METHODS if m != "chunks"])
    ap.add_argument("--steps", nargs="+", type=int, default=[40, 200, 1000])
    ap.add_argument("--target", type=int, default=None, help="s (Lt = s·C); default: the profile's first PoSE target")
    ap.add_argument("--factors", nargs="+", type=int, default=[1, 2, 4, 8])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    bad = [s for s in a.steps if s < 1] + [f for f in a.factors if f < 1]
    if bad or a.trials < 1: ap.error(f"--steps, --factors and --trials must be ≥ 1, got {bad or a.trials}")
    P = get_profile(a.profile); data = profile_data(P); s = a.target or P.pose_targets[0]
    torch.set_num_threads(P.threads)
    rows = []
    base = load_zoo_model(P, "rope").eval()
    rows += [dict(run="Original (no fine-tune)", method="none", steps=0, train_s=0.0, **r) for r in measure(base, P, data, a.factors, a.trials)]
    for method in a.method:
        for n in a.steps:
            spec = FinetuneSpec(method, s, "linear", steps=n)
            t0 = time.time(); model = load_finetuned(P, spec).eval(); secs = time.time() - t0
            secs = finetune_manifest(P, spec).get("wall_time_s", secs)
            rows += [dict(run=f"{method}-{s}C, {n} steps", method=method, steps=n, train_s=round(secs, 1), **r)
                     for r in measure(model, P, data, a.factors, a.trials)]
            print(rows[-len(a.factors):], flush=True)
    for r in rows: r.update(profile=P.name, lr=P.pose_lr, batch=P.pose_batch_size, target=s, trials=a.trials)
    if a.out:                                  # a rerun replaces its own rows
        old = list(csv.DictReader(a.out.open())) if a.out.exists() else []
        runs = {r["run"] for r in rows}
        keep = [r for r in old if r["run"] not in runs]
        fields = list(dict.fromkeys(k for r in keep + rows for k in r))
        with a.out.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, restval=""); w.writeheader(); w.writerows(keep + rows)


if __name__ == "__main__":
    main()
