"""Benchmark (not a test): how far the plain anchor ratio is biased by sampling noise on the cached cpu zoo, and what
the cross-fitted one (`decompose.anchor_ratio(..., replicate=)`, used by the checks since 2026-12-04) gives instead.

    python benchmarks/anchor_bias.py --profile cpu [--variants rope,window_rope,nope] [--layer 1]

For each zoo variant (trained here if not cached) the `n_samples` validation windows of A_formation / zoo are split in
eighths; it prints, at the chosen layer (1-based):
- the plain ratio on 1/8, 1/4, 1/2 and all of the samples: an unbiased estimate would not drift with n;
- the cross-fitted ratio of the two halves (mean of distances, as the checks use it) and the ratio of root-mean-square
  cross-fitted distances (no per-position square root, so no clamp at 0);
- the later positions' mean cross-fitted squared distance against the plain one (the share of the plain spread that
  is sampling noise), the share of later positions whose cross product is negative, and `root_bias`, how far the
  per-position square root can lift the ratio: a normal Monte Carlo of E sqrt(max(0, D²)) against sqrt(E D²) that
  takes all of the later D²'s spread over positions for noise, so an upper bound (for NoPE, whose later positions
  really differ, a loose one; there the RMS ratio also differs because the distances vary, not by bias).

Measured 2026-12-04 on the zoo of the cold run (cpu, n = 256, layer 1; 8.5 s for the three):
  rope         plain 1.23 / 1.21 / 1.38 / 1.52 (n = 32 / 64 / 128 / 256), cross-fitted 3.53, RMS cross-fitted 3.48;
               later D² 0.081 against 0.680 plain (88 % of the plain spread is noise), 36 % negative, root bias ≤ +4 %
  window_rope  plain 1.27 / 1.29 / 1.48 / 1.65, cross-fitted 4.16, RMS 4.20; later D² 0.103 against 1.018, 37 %
               negative, root bias ≤ +1 %
  nope         plain 2.51 / 2.97 / 3.49 / 3.86, cross-fitted 4.61, RMS 3.67; later D² 3.87 against 4.66, 3 % negative,
               root bias ≤ +11 %
"""
import argparse, functools
import numpy as np
import torch
from posvec_lib.config import get_profile
from posvec_lib.device import sample_seed
from posvec_lib.cmdline import parse_sets
from posvec_lib.data import profile_data, fixed_length_samples
from posvec_lib.train import load_zoo_model
from posvec_lib.decompose import positional_vectors, anchor_ratio, combine


def measure(P, name: str, layer: int, n_initial: int = 4) -> dict:
    data = profile_data(P)
    pv_in = fixed_length_samples(data.validation, P.C, P.n_samples, seed=sample_seed(P, "positional"))   # as zoo / A_formation
    model = load_zoo_model(P, name)
    e = [positional_vectors(model, x, batch_size=32, progress=False) for x in pv_in.tensor_split(8)]    # eighths
    h = [functools.reduce(combine, e[:4]), functools.reduce(combine, e[4:])]
    full = combine(*h)
    l = layer - 1
    dev = lambda x: x.p[l] - x.p[l, n_initial:].mean(0, keepdim=True)                               # [T, d]
    d2 = (dev(h[0]) * dev(h[1])).sum(-1)                                                           # [T] cross-fitted
    later = d2[n_initial:]
    m, s = float(later.mean()), float(later.std())
    x = np.random.default_rng(0).normal(m, s, 1_000_000)
    return dict(variant=name, layer=layer,
                plain_by_n={len(pv_in) * k // 8: round(float(anchor_ratio(functools.reduce(combine, e[:k]), n_initial)[l]), 3) for k in (1, 2, 4, 8)},
                cross_fitted=round(float(anchor_ratio(h[0], n_initial, replicate=h[1])[l]), 3),
                rms_cross_fitted=round(float((d2[1:n_initial].mean() / later.mean()).clamp(min=0).sqrt()), 3),
                later_d2_cross=round(m, 4), later_d2_plain=round(float((dev(full)[n_initial:] ** 2).sum(-1).mean()), 4),
                later_negative_share=round(float((later < 0).double().mean()), 3),
                root_bias=round(float(np.sqrt(max(m, 0)) / np.sqrt(np.clip(x, 0, None)).mean() - 1), 3))   # + : ratio too high


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--variants", default="rope,window_rope,nope")
    ap.add_argument("--layer", type=int, default=1)
    ap.add_argument("--set", nargs="*", default=[], metavar="KNOB=VALUE")
    a = ap.parse_args(argv)
    P = get_profile(a.profile, **parse_sets(a.set))
    torch.set_num_threads(P.threads)
    for v in a.variants.split(","): print(measure(P, v.strip(), a.layer), flush=True)


if __name__ == "__main__":
    main()
