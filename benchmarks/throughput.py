"""Benchmark (not a test): zoo training throughput on this CPU, in tokens per second, for the settings issue 13 asks about.

    python benchmarks/throughput.py --profile cpu --steps 12 --out benchmarks/throughput-cpu.csv [--set n_layers=8 d_model=128 ...]

One training step is what `train.train_zoo_model` runs through the Trainer: forward, backward, gradient clipping and an
AdamW step of a randomly initialised zoo model of the profile's size on real BOS-prefixed windows of the training split.
Each setting starts from the same seeded weights and batches; two warm-up steps are left out of the timing (they hold
torch.compile's compilation). Settings: the recipe as it is (fp32, sdpa through our attention registry, the profile's
threads), bf16 autocast, torch.compile, both, one thread, and other batch sizes at the same window. Beside the speed, the
loss after the timed steps is compared with the fp32 baseline's, so a faster setting that changes the numbers is visible.
It also prints the zoo's quality per minute of training from the manifests of the cached zoo (final validation PPL and
wall time), when the zoo of that profile is cached.

Measured on this 2-core AMD EPYC (AVX2, no AVX-512 BF16), benchmarks/throughput-cpu.csv (8 timed steps, batch 32 × 128):
- 2026-12-01, `--steps 8 --only bf16,1-thread,double-batch` (the old 4-layer, width-192 geometry): fp32 4038 tokens/s;
  bf16 autocast 273 tokens/s (15× slower without bf16 hardware; loss unchanged to 1e-4); 1 thread 2382 (0.59×);
  batch 64 4532 (1.12×).
- 2026-12-02, `--steps 8 --only compile,double-batch` (same geometry): fp32 5022 tokens/s (run-to-run spread of the fp32
  baseline on this machine: 4038–5240), torch.compile 5698 (1.13×, loss identical to 4 decimals) after about three
  minutes of compilation per model (backward included), batch 64 4423 (0.88×). Seven zoo models of 5–13 minutes each
  would spend about as long compiling as compile saves, so the zoo trains in eager fp32.
- 2026-12-02, geometries for issue 13's receptive field (the same `run` with `--set n_layers=… d_model=… d_ff=…`,
  fp32, rope / window): 4 × 192 (d_ff 512) 5240 / 4954; 6 × 160 (448) 5419 / 5412; 8 × 128 (384) 4131 / 4336;
  8 × 160 (448) 3414 / 3542 tokens/s. The `cpu` profile takes 6 × 160: as fast as the old 4 × 192 and deep enough for
  L·W = 4.5 C with W = 96 (8 layers would cost 25 % more per token).
- 2026-12-04, on another machine of the same 2-core kind, an Intel Xeon with AVX-512 BF16 and AMX
  (`--steps 8 --only fp32,bf16`, the cpu geometry 6 × 160): fp32 8004 tokens/s (1.48× the AMD machine's 5419), bf16
  autocast 10504 (1.31× fp32, mean timed loss +0.0004). The zoo stays in fp32: bf16 changes the numbers, and on the
  AMD machine it was 15× slower. The cold `make reproduce` of that day trained the RoPE base in 913 s (2000 steps,
  8.97k tokens/s inside the Trainer) against 1561 s on the AMD machine.
"""
import argparse, contextlib, csv, json, time
from pathlib import Path
import torch
from posvec_lib.config import get_profile
from posvec_lib.paths import cache_dir
from posvec_lib.cmdline import parse_sets
from posvec_lib.data import profile_data, fixed_length_samples
from posvec_lib.train import build_model
from posvec_lib.variants import zoo_variants


def batches(P, data, n_steps: int, batch: int):
    "The same real training windows for every setting."
    x = fixed_length_samples(data.train, P.C, n_steps * batch, seed=7)
    return [x[i * batch:(i + 1) * batch] for i in range(n_steps)]


SETTING_NAMES = ("fp32", "bf16", "compile", "bf16+compile", "1-thread", "half-batch", "double-batch")


def run(P, data, variant: str, steps: int, warmup: int, batch: int, bf16: bool, compile_: bool, threads: int) -> dict:
    torch.set_num_threads(threads)
    model = build_model(P, zoo_variants(P)[variant], len(data.tokenizer), seed=0)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=P.lr, betas=(0.9, 0.95), weight_decay=P.weight_decay)
    fwd = torch.compile(model) if compile_ else model
    xs = batches(P, data, warmup + steps, batch)
    cast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
    losses, t0 = [], None
    for i, x in enumerate(xs):
        if i == warmup: t0 = time.perf_counter()
        with cast():
            out = fwd(input_ids=x, labels=x, attention_mask=torch.ones_like(x))
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step(); opt.zero_grad(set_to_none=True)
        losses.append(out.loss.detach().item())
    dt = time.perf_counter() - t0
    return dict(variant=variant, n_layers=P.n_layers, d_model=P.d_model, d_ff=P.d_ff, batch=batch, C=P.C, bf16=bf16, compile=compile_, threads=threads, steps=steps,
                seconds=round(dt, 2), tokens_per_s=round(steps * batch * P.C / dt, 1), final_loss=round(losses[-1], 4),
                mean_timed_loss=round(sum(losses[warmup:]) / steps, 4))


def zoo_quality(P) -> list[dict]:
    "Final validation PPL and wall time of each cached zoo model of the profile (its manifest)."
    rows = []
    for m in sorted(cache_dir("zoo", P.name).glob("*/manifest.json")):
        man = json.loads(m.read_text())
        if man.get("profile") != P.name or not man.get("wall_time_s"): continue
        rows.append(dict(model=man["label"], steps=man["steps"], tokens=man["tokens_seen"], minutes=round(man["wall_time_s"] / 60, 2),
                         val_ppl=round(man["final_val_ppl"], 2)))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="cpu"); ap.add_argument("--variant", default="rope")
    ap.add_argument("--steps", type=int, default=12); ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", default=None, help="CSV of the rows (default: print only)")
    ap.add_argument("--only", default=None, help="comma-separated settings among: " + ", ".join(SETTING_NAMES))
    ap.add_argument("--set", nargs="*", default=[], metavar="KNOB=VALUE", help="knob overrides, e.g. another model geometry")
    a = ap.parse_args()
    P = get_profile(a.profile, **parse_sets(a.set)); data = profile_data(P)
    B, T = P.batch_size, P.threads
    settings = [dict(batch=B, bf16=False, compile_=False, threads=T),          # the recipe as it is
                dict(batch=B, bf16=True, compile_=False, threads=T),
                dict(batch=B, bf16=False, compile_=True, threads=T),
                dict(batch=B, bf16=True, compile_=True, threads=T),
                dict(batch=B, bf16=False, compile_=False, threads=1),
                dict(batch=B // 2, bf16=False, compile_=False, threads=T),
                dict(batch=2 * B, bf16=False, compile_=False, threads=T)]
    settings = dict(zip(SETTING_NAMES, settings))
    if a.only:
        bad = [n for n in a.only.split(",") if n not in settings]
        if bad: raise SystemExit(f"unknown setting(s) {bad}; allowed: {', '.join(SETTING_NAMES)}")
        settings = {n: settings[n] for n in ["fp32"] + [n for n in a.only.split(",") if n != "fp32"]}   # the baseline first
    rows = []
    for name, s in settings.items():
        try: r = run(P, data, a.variant, a.steps, a.warmup, **s)
        except Exception as e:                                           # e.g. torch.compile without a C compiler
            r = dict(variant=a.variant, batch=s["batch"], C=P.C, bf16=s["bf16"], compile=s["compile_"], threads=s["threads"],
                     error=f"{type(e).__name__}: {str(e)[:200]}")
        rows.append(r); print(r, flush=True)
    base = rows[0]
    print(f"\n{'batch':>5} {'bf16':>5} {'compile':>7} {'threads':>7} {'tokens/s':>9} {'speed-up':>8} {'loss Δ vs fp32':>14}")
    for r in rows:
        if "error" in r: print(f"{r['batch']:>5} {r['bf16']!s:>5} {r['compile']!s:>7} {r['threads']:>7}  failed: {r['error']}"); continue
        same = r["batch"] == base["batch"]
        d = f"{r['mean_timed_loss'] - base['mean_timed_loss']:+.4f}" if same else "(other batches)"
        print(f"{r['batch']:>5} {r['bf16']!s:>5} {r['compile']!s:>7} {r['threads']:>7} {r['tokens_per_s']:>9.0f} "
              f"{r['tokens_per_s'] / base['tokens_per_s']:>7.2f}x {d:>14}")
    q = zoo_quality(P)
    if q:
        print("\nzoo quality per minute of training (cached manifests):")
        for r in q: print(f"  {r['model']:<14} {r['steps']} steps, {r['tokens']:,} tokens, {r['minutes']} min, val PPL {r['val_ppl']}"
                          f" ({r['tokens'] / max(r['minutes'], 1e-9) / 60:,.0f} tokens/s)")
    if a.out:
        keys = sorted({k for r in rows for k in r})
        with open(a.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys); w.writeheader(); w.writerows(rows)
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
