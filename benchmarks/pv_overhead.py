"""Benchmark (not a test): positional-vector extraction vs a bare forward pass, and peak memory for N vs 8N samples.

    python benchmarks/pv_overhead.py --profile cpu --model nope --n 64

Targets (issue "Paper A, part 1"): overhead <= 1.15x a bare forward over the same batches; peak extra memory flat in N.
"""
import argparse, gc, time, tracemalloc
import torch
from posvec_lib.config import get_profile
from posvec_lib.data import profile_data, fixed_length_samples
from posvec_lib.train import load_zoo_model
from posvec_lib.decompose import positional_vectors

def bare(model, x, bs):
    "A bare forward pass of the causal LM (logits included), batch by batch."
    with torch.no_grad():
        for s in range(0, len(x), bs): model(x[s:s + bs], attention_mask=torch.ones_like(x[s:s + bs]))

def bare_decoder(model, x, bs):
    "A bare forward pass of the decoder only (no LM head): what the extraction itself must run."
    with torch.no_grad():
        for s in range(0, len(x), bs): model.base_model(input_ids=x[s:s + bs], attention_mask=torch.ones_like(x[s:s + bs]))

def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--profile", default="cpu"); ap.add_argument("--model", default="nope")
    ap.add_argument("--n", type=int, default=64); ap.add_argument("--batch", type=int, default=16); ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    P = get_profile(a.profile); torch.set_num_threads(P.threads)
    d = profile_data(P); m = load_zoo_model(P, a.model, train=False)
    x = fixed_length_samples(d.validation, P.C, 8 * a.n, seed=0)
    bare(m, x[:a.batch], a.batch); positional_vectors(m, x[:a.batch], a.batch, progress=False)   # warm-up
    tb, td, tp = [], [], []
    for _ in range(a.repeats):                      # interleaved, same batches
        t = time.perf_counter(); bare(m, x[:a.n], a.batch); tb.append(time.perf_counter() - t)
        t = time.perf_counter(); bare_decoder(m, x[:a.n], a.batch); td.append(time.perf_counter() - t)
        t = time.perf_counter(); positional_vectors(m, x[:a.n], a.batch, progress=False); tp.append(time.perf_counter() - t)
    print(f"bare forward {min(tb):.3f}s  bare decoder-only forward {min(td):.3f}s  positional vectors {min(tp):.3f}s")
    print(f"overhead vs bare forward {min(tp) / min(tb):.3f}x (target <= 1.15); vs decoder-only forward {min(tp) / min(td):.3f}x "
          f"(the cost of the float64 accumulation itself)")
    # Memory: the streaming accumulator holds sum and sum of squares [L, T, d] in float64 whatever N is;
    # a batch's activations are freed before the next. Report the accumulator size and the process's peak RSS.
    import resource
    from posvec_lib.decompose import StreamingMoments
    for n in (a.n, 8 * a.n):
        positional_vectors(m, x[:n], a.batch, progress=False)
        print(f"N={n:5d}: peak RSS of this process so far {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    L, d = m.config.num_hidden_layers, m.config.hidden_size
    print(f"accumulator: {2 * L * P.C * d * 8 / 2**20:.1f} MiB for any N")

if __name__ == "__main__":
    main()
