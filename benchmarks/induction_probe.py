"""Probe (not a test, not the zoo): does the zoo's RoPE architecture learn to *copy* (induction, what passkey retrieval rests
on) within the base model's training budget, when copy windows (posvec_lib.retrieval.copy_window) are mixed into its
pre-training? Issue 13's passkey target (>= 90 % at C) cannot be met by a model that cannot copy.

    python benchmarks/induction_probe.py --profile cpu --copy 0.5 --recall 0.1 --every 100 --out benchmarks/induction-probe-cpu.csv
    python benchmarks/induction_probe.py --profile cpu --steps 2000 --lr-floor 0.1 --copy 0.5 --recall 0.1 --every 200 --out benchmarks/induction-probe-cpu.csv
    python benchmarks/induction_probe.py --profile cpu --induction-steps 3000 --induction-length 16 --copy 0.3 --recall 0.2 --every 100 --out benchmarks/induction-probe-cpu.csv

It trains one RoPE model of the zoo's size (train.build_model, train.training_args, the Trainer, the profile's batch, lr
and warmup) from scratch for `--steps` (default: the profile's train_steps, the base's budget) on
`retrieval.RecallWindows` with a `--copy` share of copy windows and a `--recall` share of key-value recall windows, the
windows built before training. Every `--every` steps it measures `retrieval.copy_accuracy` (greedy next-token accuracy
inside the second copy of 64 held-out copy windows) and the accuracy on the very same target tokens inside the first
copy, where nothing can be copied: their difference, `copy_gain` (with its paired standard error), is what copying adds.
A model that copies approaches accuracy 1 and a large gain; one that only knows the language has a gain near 0.
With `--induction-steps` N, the model first trains N steps on `retrieval.InductionWindows` (copies of random token ids,
`--induction-length` tokens, constant lr `--induction-lr`): train.induction_warmup, the zoo's `induction_steps` warm-up. At the end: passkey exact match at C with the
official and the code prompt (passkey.passkey_accuracy, 50 keys each), the recall format's own exact match
(retrieval.recall_accuracy, 100 windows) and the validation PPL at C (`validation_ppl` windows). One CSV row per
measurement step (`kind` = curve) and one for the end (`kind` = final); rows of a run are replaced when it is rerun.
"""
import argparse, csv, math, tempfile, time
from pathlib import Path
import torch
from transformers import Trainer, TrainerCallback
from posvec_lib.config import get_profile
from posvec_lib.device import sample_seed
from posvec_lib.data import profile_data, fixed_length_samples
from posvec_lib.train import build_model, training_args, induction_warmup
from posvec_lib.evaluate import token_nll
from posvec_lib.variants import zoo_variants
from posvec_lib.passkey import passkey_accuracy_if_fits
from posvec_lib.retrieval import RecallWindows, copy_accuracy, recall_accuracy


class CopyCurve(TrainerCallback):
    "copy_accuracy on held-out copy windows every `every` steps."
    def __init__(self, model, docs, length, every, n=64):
        self.model, self.docs, self.length, self.every, self.n, self.rows, self.t0 = model, docs, length, every, n, [], time.time()
    def on_step_end(self, args, state, control, **kw):
        if state.global_step % self.every == 0 or state.global_step == state.max_steps:
            r = copy_accuracy(self.model, self.docs, self.length, self.n, seed=1)
            loss = next((h["loss"] for h in reversed(state.log_history) if "loss" in h), float("nan"))
            self.rows.append(dict(step=state.global_step, copy_accuracy=round(r["accuracy"], 4), copy_accuracy_se=round(r["se"], 4),
                                  first_copy_accuracy=round(r["first"], 4), copy_gain=round(r["gain"], 4), copy_gain_se=round(r["gain_se"], 4),
                                  train_loss=loss, elapsed_s=round(time.time() - self.t0, 1)))
            print(self.rows[-1], flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--copy", type=float, default=0.5, help="share of copy windows")
    ap.add_argument("--recall", type=float, default=0.1, help="share of key-value recall windows")
    ap.add_argument("--steps", type=int, default=None, help="default: the profile's train_steps")
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--lr-floor", type=float, default=0.0,
                    help="cosine schedule down to this fraction of the peak lr (the profile's lr_floor knob; default 0: cosine to 0)")
    ap.add_argument("--induction-steps", type=int, default=0, help="steps of induction warm-up on random-token copies first")
    ap.add_argument("--induction-length", type=int, default=32)
    ap.add_argument("--induction-lr", type=float, default=3e-3)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if not 0 <= a.lr_floor < 1: ap.error(f"--lr-floor {a.lr_floor}: allowed: a fraction of the peak lr, 0 ≤ floor < 1")
    if not (0 <= a.copy and 0 <= a.recall and a.copy + a.recall <= 1):
        ap.error(f"--copy {a.copy} --recall {a.recall}: allowed: shares ≥ 0 with copy + recall ≤ 1")
    P = get_profile(a.profile, lr_floor=a.lr_floor)          # training_args ends the cosine at the floor (0: at 0)
    data = profile_data(P); steps = a.steps or P.train_steps; C = P.C
    torch.set_num_threads(P.threads)
    ds = RecallWindows(data.train, data.tokenizer, C, steps * P.batch_size, share=a.recall, seed=P.seed, copy_share=a.copy)
    t0 = time.time(); items = [ds[i] for i in range(len(ds))]; prep = time.time() - t0
    model = build_model(P, zoo_variants(P)["rope"], len(data.tokenizer), seed=P.seed)
    warm = {}
    if a.induction_steps:
        Q = get_profile(a.profile, induction_steps=a.induction_steps, induction_length=a.induction_length, induction_lr=a.induction_lr)
        secs = induction_warmup(Q, model, P.seed)                       # the zoo's own warm-up
        r = copy_accuracy(model, data.validation, C, 64, seed=1)
        warm = dict(induction_steps=a.induction_steps, induction_s=round(secs, 1),
                    copy_gain_after_induction=round(r["gain"], 4), copy_gain_after_induction_se=round(r["gain_se"], 4))
        print(warm, flush=True)
    curve = CopyCurve(model, data.validation, C, a.every)
    with tempfile.TemporaryDirectory() as d:
        args = training_args(P, Path(d), steps, P.batch_size, P.lr, P.warmup_steps, P.seed, save_strategy="no", disable_tqdm=True,
                             logging_steps=min(50, a.every))
        t0 = time.time(); Trainer(model=model, args=args, train_dataset=items, callbacks=[curve]).train(); wall = time.time() - t0
    model.eval()
    tok = data.tokenizer
    # NaN where a prompt does not fit in C (smoke)
    off = passkey_accuracy_if_fits(model, tok, C, 50, variant="official")
    code = passkey_accuracy_if_fits(model, tok, C, 50, variant="code")
    try: rec = recall_accuracy(model, data.validation, tok, C, 100, seed=1)
    except ValueError: rec = dict(accuracy=float("nan"))
    val = fixed_length_samples(data.validation, C, P.eval_samples, seed=sample_seed(P, "validation_ppl"))
    ppl = float(token_nll(model, val, batch_size=16).mean().exp())
    run = f"RoPE, {a.copy:.0%} copy + {a.recall:.0%} recall windows, {steps} steps"
    if a.lr_floor: run += f", cosine to {a.lr_floor:g}× lr"
    if a.induction_steps: run = f"RoPE, {a.induction_steps} induction steps ({a.induction_length} tokens), then " + run[6:]
    se = lambda p, n: round(math.sqrt(max(p * (1 - p), 1e-12) / n), 3)
    rows = [dict(run=run, kind="curve", **r) for r in curve.rows]
    rows.append(dict(run=run, kind="final", **{k: v for k, v in curve.rows[-1].items() if k not in ("train_loss", "elapsed_s")},
                     elapsed_s=round(wall, 1), prep_s=round(prep, 1),
                     tokens_seen=steps * C * P.batch_size, passkey_official_1C=off, passkey_official_1C_se=se(off, 50),
                     passkey_code_1C=code, passkey_code_1C_se=se(code, 50), recall_format_1C=round(rec["accuracy"], 3),
                     val_ppl_C=round(ppl, 2), **warm))
    print(rows[-1], flush=True)
    if a.out:                                  # one block of rows per run; a rerun replaces its own rows
        old = list(csv.DictReader(a.out.open())) if a.out.exists() else []
        keep = [r for r in old if r["run"] != run]
        fields = list(dict.fromkeys(k for r in keep + rows for k in r))
        with a.out.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, restval=""); w.writeheader(); w.writerows(keep + rows)


if __name__ == "__main__":
    main()
