"""Probe (not a test, not the zoo): can a cpu-scale base model learn to retrieve a passkey inside its window when
key-value recall windows (posvec_lib.retrieval) are mixed into pre-training? Issue 13's target is >= 90 % at 1C.

    python benchmarks/retrieval_probe.py --profile cpu --share 0.25 --out benchmarks/retrieval-probe-cpu.csv

It trains one RoPE model of the zoo's size and recipe (train.build_model, train.training_args, the Trainer, the
profile's train_steps, batch, lr and warmup) from scratch on `data.RandomWindows` with a `share` of recall windows
(`retrieval.RecallWindows`), then measures what the zoo table reports for the base model:
- passkey exact match at C with the code prompt (passkey.passkey_accuracy, `code` variant, 50 trials) and the graded
  rank score (passkey.passkey_rank, chance 0.5);
- exact match on 100 held-out recall windows of the training format itself (retrieval.recall_accuracy), to tell
  "did not learn to retrieve" from "learned it, but not for the passkey prompt";
- validation PPL at C on the zoo's fixed held-out windows (seed 1234, `eval_samples` windows), to see what the added
  data costs the language model.
The same numbers for the cached cpu zoo's RoPE model (trained without recall windows) are measured beside it when it is
cached. Results go to a CSV, one row per model. The model is not cached: this is a probe.

Measured on this 2-core machine, 2026-12-02 (benchmarks/retrieval-probe-cpu.csv), 800 steps × 32 × 128 tokens each:
- share 0.25: passkey 0/50 at C, graded 0.457 (chance 0.5), val PPL 40.91 (zoo RoPE: 40.66), 922 s of training;
- share 0.50: passkey 0/50, graded 0.481, its own recall format 0/100, val PPL 42.01, 943 s.
So at the zoo's budget (3.3M tokens) the model learns no retrieval even from its own training format: the recall
windows cost 0.3-1.4 PPL and buy nothing yet. Training is also ~1.85x slower than the zoo's 501 s, which is the
per-item tokenization of recall windows (pre-tokenizing them is the obvious fix).
"""
import argparse, csv, math, tempfile, time
from pathlib import Path
import torch
from transformers import Trainer
from posvec_lib.config import get_profile
from posvec_lib.data import profile_data, fixed_length_samples
from posvec_lib.train import build_model, training_args, zoo_path, load_zoo_model
from posvec_lib.evaluate import token_nll
from posvec_lib.variants import zoo_variants
from posvec_lib.passkey import passkey_accuracy, passkey_rank
from posvec_lib.retrieval import RecallWindows, recall_accuracy
from posvec_lib.device import sample_seed
from posvec_lib.storage import entry_ok


def measure(P, data, model, label: str, share: float, steps: int, wall: float) -> dict:
    tok, C = data.tokenizer, P.C
    acc = passkey_accuracy(model, tok, C, 50, variant="code")
    rank = passkey_rank(model, tok, C, 50, n_candidates=P.passkey_candidates, variant="code")
    val = fixed_length_samples(data.validation, C, P.eval_samples, seed=sample_seed(P, "validation_ppl"))
    ppl = float(token_nll(model, val, batch_size=16).mean().exp())
    se = math.sqrt(max(acc["accuracy"] * (1 - acc["accuracy"]), 1e-12) / 50)
    rec = recall_accuracy(model, data.validation, tok, C, 100, seed=1)
    return dict(model=label, recall_share=share, steps=steps, tokens_seen=steps * C * P.batch_size, train_wall_s=round(wall, 1),
                passkey_code_1C=acc["accuracy"], passkey_code_1C_se=round(se, 3), passkey_graded_1C=round(rank["rank_score"], 3),
                recall_format_1C=round(rec["accuracy"], 3), recall_format_1C_se=round(rec["se"], 3), val_ppl_C=round(ppl, 2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu"); ap.add_argument("--share", type=float, default=0.25)
    ap.add_argument("--steps", type=int, default=None, help="default: the profile's train_steps")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if not 0 < a.share <= 1: ap.error(f"--share {a.share}: allowed 0 < share <= 1")
    P = get_profile(a.profile); data = profile_data(P); steps = a.steps or P.train_steps
    torch.set_num_threads(P.threads)
    rows = []
    if entry_ok(zoo_path(P, "rope")):
        import json
        man = json.loads((zoo_path(P, "rope") / "manifest.json").read_text())
        rows.append(measure(P, data, load_zoo_model(P, "rope", train=False), "zoo TL-RoPE (no recall windows)", 0.0,
                            man["steps"], man["wall_time_s"]))
        print(rows[-1], flush=True)
    model = build_model(P, zoo_variants(P)["rope"], len(data.tokenizer), seed=P.seed)
    ds = RecallWindows(data.train, data.tokenizer, P.C, steps * P.batch_size, share=a.share, seed=P.seed)
    with tempfile.TemporaryDirectory() as d:
        args = training_args(P, Path(d), steps, P.batch_size, P.lr, P.warmup_steps, P.seed, save_strategy="no", disable_tqdm=True)
        t0 = time.time(); Trainer(model=model, args=args, train_dataset=ds).train(); wall = time.time() - t0
    rows.append(measure(P, data, model.eval(), f"RoPE + {a.share:.0%} recall windows", a.share, steps, wall))
    print(rows[-1], flush=True)
    if a.out:                                  # appended: one row per model and share, over runs
        old = list(csv.DictReader(a.out.open())) if a.out.exists() else []
        keep = [r for r in old if r["model"] not in {x["model"] for x in rows}]
        with a.out.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[-1]), restval=""); w.writeheader(); w.writerows(keep + rows)


if __name__ == "__main__":
    main()
