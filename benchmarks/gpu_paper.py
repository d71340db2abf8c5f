"""Benchmark (not a test): issue 37 on one GPU in about 8 minutes — B Fig. 3 at paper scale,
positional vectors at paper scale, and the library's CUDA paths against the CPU.

    timeout 540 env PYTHONPATH=. python benchmarks/gpu_paper.py --device cuda --out $OUT

is the device tool's command (from the repository root; the package need not be installed).
Its CPU test, tests/test_gpu_bench.py, runs

    python benchmarks/gpu_paper.py --device cpu --tiny --out DIR --hide-modules datasets,scipy,gguf

Writes into --out: gpu-finetune-memory.csv, gpu-pv-throughput.csv, gpu-cuda-paths.csv,
gpu-env.json (GPU, CUDA, torch and transformers versions) and B_fig3_gpu.png. Each CSV is
rewritten after every row, so a run cut short keeps what it measured; every row has a status
(ok, oom, skipped: why, error: what; pass or fail for part 3), and out of memory never ends the
run. The parts run in the order 3, 2, 1 (cheapest first), each within its share of --budget-s.

Part 1, B Fig. 3: a randomly initialised Llama of LLaMA-7B's shape (TinyLlama-1.1B's where 7B
does not fit; the shape is in every row) trains through the library's fine-tune path:
`finetune.finetune_args` (the paper's AdamW recipe and the Trainer that `finetune` runs: fused
AdamW, bf16 autocast on CUDA), `pose.PoSECollator` (the position ids of PoSE and Full-length)
and `rope.apply_interpolation` (linear RoPE switch to Lt), with gradient checkpointing and
micro-batch 1 (the paper gives only the global batch, 64 over 8 GPUs). Rows: Full-length at
2k/4k/8k/16k, PoSE at 2k with positions up to 4k/8k/16k; peak torch.cuda.max_memory_allocated
over the timed steps and the median seconds per step after the warm-up steps. Precisions:
`mixed` = fp32 weights and AdamW states under bf16 autocast, 16 bytes per parameter (the
paper's ZeRO-3 fp16 recipe without its 8-way sharding); `bf16` = bf16 weights and AdamW
states, 8 bytes per parameter (what the `paper` profile runs: it loads its models in bf16).
The paper's numbers (8 × A100, ZeRO-3, so every static byte is divided by 8) are read from
data/papers/B_ppl_fig3_efficiency.csv (paper B v3 Fig. 3a/b; ../shared/papers/pose.md item 4).

Part 2: `decompose.positional_vectors` and `attention.mean_attention` on a TinyLlama-1.1B-shape
model at T = 2048 in bf16 beside a bare forward of the decoder (`model.base_model`): tokens/s,
the share of the GPU's dense bf16 peak (model FLOPs per token: 2 × decoder parameters plus
causal attention 2·L·d·T) and the hours 32K samples would take.

Part 3: the smoke profile's models (`variants.tiny_model`: RoPE, NoPE, ALiBi, window,
window-RoPE) on the device against the same calls on the CPU: placement, logits (sdpa, eager,
bf16), `positional_vectors`, `mean_attention`, every RoPE switch of `rope.METHODS` and every
`extend.EXTENSIONS` entry with its exact undo, `efficiency.step_cost`, and a 4-step PoSE
fine-tune through the Trainer, each against a stated tolerance. With --device cpu the device
side is a second CPU copy, which still runs every comparison.

posvec_lib.data imports `datasets` at the top (finetune and extend import data), and
posvec_lib.stats imports scipy.stats' normal quantile, but nothing here calls either; where they
are missing (the device machine) stand-in modules take their place while the library is imported
(transformers still finds them missing), named in gpu-env.json.
"""
import argparse, contextlib, copy, csv, gc, json, math, os, platform, statistics, sys, tempfile
import time, types, warnings
import importlib, importlib.machinery, importlib.metadata, importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")   # less fragmentation


def hide_modules(argv: list) -> list:
    "Make `import name` fail for the names after --hide-modules, as on a machine without them."
    names = argv[argv.index("--hide-modules") + 1] if "--hide-modules" in argv[:-1] else ""
    names = [n for n in names.split(",") if n]
    for n in names: sys.modules[n] = None
    return names


HIDDEN = hide_modules(sys.argv) if __name__ == "__main__" else []   # before transformers looks
import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback
from transformers.trainer_callback import PrinterCallback

SHAPES = {   # LLaMA-7B and TinyLlama-1.1B as their configs give them; `tiny` for the CPU test
    "7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=32, vocab_size=32000, rms_norm_eps=1e-6),
    "1.1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                 num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                 rms_norm_eps=1e-5),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=256, rms_norm_eps=1e-5),
}
BF16_PEAK_TFLOPS = {"H200": 989.4, "H100": 989.4, "A100": 312.0, "L40S": 362.1}   # dense, SXM
FT_COLUMNS = ["config", "shape", "params_b", "precision", "method", "train_length",
              "position_range", "batch", "grad_ckpt", "peak_gb", "static_gb", "s_per_step",
              "steps_timed", "warmup_steps", "tokens_per_step", "model_tflops_per_step",
              "achieved_tflops", "mfu", "init_s", "status", "note"]
PV_COLUMNS = ["measure", "shape", "params_b", "dtype", "attn", "T", "batch", "samples_timed",
              "seconds", "tokens_per_s", "model_tflops_per_token", "frac_bf16_peak",
              "est_32k_samples_h", "time_vs_bare", "status", "note"]
CUDA_COLUMNS = ["call", "variant", "dtype", "attn", "compared", "max_abs_diff", "tolerance",
                "pass", "status", "note"]
PAPER_FIG3 = "B_ppl_fig3_efficiency"


# ---------------------------------------------------------------- helpers

LIBRARY = ("config", "variants", "pose", "rope", "trace", "decompose", "attention", "data",
           "train", "evaluate", "extend", "finetune", "efficiency")


def import_library(missing_ok=("datasets", "scipy", "scipy.stats")) -> list:
    "Import the posvec_lib modules used here, standing in for the missing `missing_ok` packages."
    saved, out = {}, []             # a stand-in lives for the import only: transformers looks later
    for n in missing_ok:
        try:
            importlib.import_module(n); continue
        except ImportError: pass
        saved[n] = sys.modules.get(n, ...)
        m = types.ModuleType(n)
        m.__spec__ = importlib.machinery.ModuleSpec(n, None)
        m.__path__ = []             # a package: its submodules' stand-ins can be imported below it
        def missing(*a, _n=n, **k): raise ImportError(f"{_n} is not installed (gpu_paper stand-in)")
        m.__getattr__ = lambda attr, f=missing: f
        sys.modules[n] = m; out.append(n)
    try:
        for mod in LIBRARY: importlib.import_module(f"posvec_lib.{mod}")
    finally:
        for n, old in saved.items():
            if old is ...: sys.modules.pop(n, None)
            else: sys.modules[n] = old
    return out


class Rows:
    "A CSV rewritten after every row."
    def __init__(self, path: Path, columns: list):
        self.path, self.columns, self.rows = path, columns, []
    def add(self, **row):
        extra = set(row) - set(self.columns)
        if extra: raise KeyError(f"unknown columns {sorted(extra)} for {self.path.name}")
        self.rows.append({c: row.get(c, "") for c in self.columns})
        with open(self.path, "w", newline="") as f:
            w = csv.DictWriter(f, self.columns); w.writeheader(); w.writerows(self.rows)
        print(self.path.name, {k: v for k, v in self.rows[-1].items() if v != ""}, flush=True)


def sync(dev: torch.device):
    if dev.type == "cuda": torch.cuda.synchronize(dev)


def free(dev: torch.device):
    "Collect garbage and hand the cached CUDA blocks back."
    gc.collect()
    if dev.type == "cuda": torch.cuda.empty_cache()


def is_oom(e: BaseException) -> bool:
    return isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower()


def short(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return f"{type(e).__name__}: {s[0][:160] if s else ''}".replace(",", ";")


def gb(n_bytes) -> float: return round(n_bytes / 1e9, 3)


def sig(x: float, digits: int = 4) -> float:
    "x to `digits` significant digits (tiny shapes give tiny numbers)."
    return float(f"{x:.{digits}g}")


def bf16_peak(dev: torch.device, override: float | None) -> float | None:
    "The device's dense bf16 peak in TFLOP/s (by GPU name), or None where unknown."
    if override: return override
    if dev.type != "cuda": return None
    name = torch.cuda.get_device_name(dev)
    return next((v for k, v in BF16_PEAK_TFLOPS.items() if k in name), None)


def environment(dev: torch.device, stand_ins: list, hidden: list) -> dict:
    "GPU, CUDA and library versions, and what stood in for missing packages."
    import transformers
    env = dict(python=platform.python_version(), torch=torch.__version__,
               transformers=transformers.__version__, cuda=torch.version.cuda, device=str(dev),
               cpu=platform.processor() or platform.machine(), cpu_threads=torch.get_num_threads(),
               stand_in_modules=stand_ins, hidden_modules=hidden,
               paper_numbers=f"data/papers/{PAPER_FIG3}.csv (paper B v3 Fig. 3a/b)")
    for m in ("accelerate", "pandas", "seaborn", "matplotlib", "numpy", "datasets", "scipy",
              "gguf"):
        try: env[m] = None if m in stand_ins + hidden else importlib.metadata.version(m)
        except importlib.metadata.PackageNotFoundError: env[m] = None
    try:
        env["cpu"] = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                          if l.startswith("model name"))
    except (OSError, StopIteration): pass
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        env.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 2**30, 1),
                   capability=f"{p.major}.{p.minor}", multiprocessors=p.multi_processor_count,
                   cudnn=torch.backends.cudnn.version(),
                   tf32_matmul=torch.backends.cuda.matmul.allow_tf32)
    return env


# ---------------------------------------------------------------- models

def llama_config(shape: str, C: int) -> LlamaConfig:
    "A Llama config of `shape` and window C, attention through the library's registry."
    from posvec_lib.variants import Variant, apply_variant
    cfg = LlamaConfig(**SHAPES[shape], max_position_embeddings=C, bos_token_id=1, eos_token_id=2,
                      tie_word_embeddings=False, use_cache=False,
                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    return apply_variant(cfg, Variant("rope", "rope"), "posvec_sdpa")


def build(shape: str, C: int, dtype: torch.dtype, dev: torch.device, seed: int = 0):
    "A randomly initialised Llama of `shape` created on `dev` in `dtype`: (model, seconds)."
    torch.manual_seed(seed)
    sync(dev); t = time.perf_counter()
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)              # RoPE's inv_freq stays float32, as from_pretrained
    try:
        with torch.device(dev): model = LlamaForCausalLM(llama_config(shape, C))
    finally: torch.set_default_dtype(before)
    sync(dev)
    return model, time.perf_counter() - t


def n_params(model) -> int: return sum(p.numel() for p in model.parameters())


def layer_params(model) -> int:
    "Parameters of the decoder layers (no embedding, no LM head)."
    return sum(p.numel() for p in model.model.layers.parameters())


def random_docs(n: int, length: int, vocab: int, seed: int) -> list:
    "n documents of random token ids in 3..vocab−1: what the collators cut windows from."
    rng = np.random.default_rng(seed)
    return [{"input_ids": rng.integers(3, vocab, length, dtype=np.int64)} for _ in range(n)]


def recipe_trainer(model, P, collator, docs, steps: int, grad_ckpt: bool, out_dir: Path,
                   callbacks=()) -> Trainer:
    "A Trainer of the fine-tune recipe (`finetune_args`, as `finetune` builds it) saving nothing."
    from posvec_lib.finetune import finetune_args
    if not grad_ckpt: model.gradient_checkpointing_disable()
    args = finetune_args(P, out_dir, steps, seed=0, save_strategy="no", logging_steps=1,
                         gradient_checkpointing=grad_ckpt, dataloader_pin_memory=False)
    trainer = Trainer(model=model, args=args, train_dataset=docs, data_collator=collator,
                      callbacks=list(callbacks))
    trainer.remove_callback(PrinterCallback)
    return trainer


def release(trainer, model, dev):
    "Drop the optimizer state and the gradients a run left behind."
    if trainer is not None:
        trainer.accelerator.free_memory()
        trainer.optimizer = trainer.lr_scheduler = None
    for p in model.parameters(): p.grad = None
    free(dev)


# ---------------------------------------------------------------- part 1: B Fig. 3

class StepClock(TrainerCallback):
    "Seconds per optimizer step after `warmup` steps; CUDA peak memory reset when timing starts."
    def __init__(self, warmup: int, dev: torch.device):
        self.warmup, self.dev, self.times, self.t = warmup, dev, [], None
    def on_step_begin(self, args, state, control, **kw):
        sync(self.dev)
        if state.global_step == self.warmup and self.dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.dev)
        self.t = time.perf_counter()
    def on_step_end(self, args, state, control, **kw):
        sync(self.dev)
        if state.global_step > self.warmup: self.times.append(time.perf_counter() - self.t)


class LcCollator:
    "Training at Lc (Full-length at Lt = Lc): BOS and the first Lc − 1 tokens, positions 0..Lc−1."
    def __init__(self, C: int, bos: int): self.C, self.bos = C, bos
    def __call__(self, batch):
        x = torch.tensor(np.stack([np.concatenate([[self.bos], b["input_ids"][:self.C - 1]])
                                   for b in batch]))
        return dict(input_ids=x, labels=x.clone(), attention_mask=torch.ones_like(x))


def finetune_plan(C: int, factors) -> list:
    "(method, train length, position range) of B Fig. 3: PoSE first, then Full-length ascending."
    return [("pose", C, s * C) for s in factors if s > 1] + [("full-length", s * C, s * C)
                                                              for s in factors]


def part_finetune(a, dev, out: Path, deadline: float, peak_tflops):
    "B Fig. 3: peak memory and seconds per step of Full-length and PoSE, each config in turn."
    from posvec_lib.config import get_profile
    rows = Rows(out / "gpu-finetune-memory.csv", FT_COLUMNS)
    P = get_profile("paper", device=dev.type, pose_batch_size=a.batch, seed=0)
    plan = finetune_plan(a.C, a.factors)
    for shape, precision in (c.split(":") for c in a.configs.split(",")):
        base = dict(config=f"{shape}:{precision}", shape=shape, precision=precision,
                    batch=a.batch, grad_ckpt=a.grad_ckpt, warmup_steps=a.warmup)
        def skip_all(status, note=""):
            for m, T, Lt in plan:
                rows.add(**base, method=m, train_length=T, position_range=Lt, status=status,
                         note=note)
        if time.time() > deadline - 10: skip_all("skipped: time budget"); continue
        dtype = torch.float32 if precision == "mixed" else torch.bfloat16
        try: model, init_s = build(shape, a.C, dtype, dev)
        except Exception as e:
            status = "oom" if is_oom(e) else f"error: {short(e)}"
            e = None; free(dev)
            skip_all(status, "the model does not build"); continue
        base.update(params_b=sig(n_params(model) / 1e9), init_s=sig(init_s, 3))
        config_rows(a, dev, model, P, plan, base, deadline, peak_tflops, rows.add)
        del model; free(dev)
    return rows.rows


def config_rows(a, dev, model, P, plan, base, deadline, peak_tflops, emit):
    "One model's rows; after an out-of-memory the longer Full-length rows are skipped."
    from posvec_lib.pose import PoSECollator
    from posvec_lib.rope import apply_interpolation
    C, N = a.C, n_params(model)
    L, d = model.config.num_hidden_layers, model.config.hidden_size
    oom_at, last, first_oom = None, None, False          # last: (wall seconds, length) of a row
    for i, (method, T, Lt) in enumerate(plan):
        row = dict(base, method=method, train_length=T, position_range=Lt,
                   tokens_per_step=a.batch * T,
                   static_gb=gb(torch.cuda.memory_allocated(dev)) if dev.type == "cuda" else "")
        if first_oom:
            emit(**row, status="skipped: out of memory at the first row"); continue
        if method == "full-length" and oom_at:
            emit(**row, status=f"skipped: out of memory at {oom_at} already"); continue
        guess = last[0] * (T / last[1]) ** 1.3 if last else 0
        if time.time() + guess > deadline:
            emit(**row, status="skipped: time budget"); continue
        steps = a.warmup + a.steps
        length = max(5 * C, Lt) if method == "full-length" else 5 * C     # as `finetune` cuts them
        docs = random_docs(steps * a.batch, length, model.config.vocab_size, seed=T + Lt)
        if Lt == C: collator, switch = LcCollator(C, 1), contextlib.nullcontext()
        else:
            collator = PoSECollator(C, Lt, method, seed=[0, Lt], bos=1)
            switch = apply_interpolation(model, "linear", Lt / C, C)
        clock, trainer, t0 = StepClock(a.warmup, dev), None, time.time()
        try:
            with switch, tempfile.TemporaryDirectory() as tmp:
                trainer = recipe_trainer(model, P, collator, docs, steps, a.grad_ckpt, Path(tmp),
                                         [clock])
                trainer.train()
            s = statistics.median(clock.times)
            flops = a.batch * T * (6 * N + 6 * L * d * T)           # posvec plan's FLOPs of a step
            notes = ["cpu: peak memory not measured; no autocast" if dev.type == "cpu" else "",
                     "bf16 weights and AdamW states" if base["precision"] == "bf16" else "",
                     "training at Lc (no RoPE switch)" if Lt == C else ""]
            peak = gb(torch.cuda.max_memory_allocated(dev)) if dev.type == "cuda" else ""
            row.update(peak_gb=peak, s_per_step=sig(s), steps_timed=len(clock.times),
                       model_tflops_per_step=sig(flops / 1e12),
                       achieved_tflops=sig(flops / s / 1e12),
                       mfu=sig(flops / s / 1e12 / peak_tflops, 3) if peak_tflops else "",
                       status="ok", note="; ".join(n for n in notes if n))
        except Exception as e:
            if is_oom(e):
                row.update(status="oom", note=short(e)[:120])
                if method == "full-length": oom_at = T
                first_oom = i == 0
            else: row.update(status=f"error: {short(e)}")
            e = None
        release(trainer, model, dev); trainer = None
        last = (time.time() - t0, T)
        emit(**row)


# ---------------------------------------------------------------- part 2: positional vectors

def timed(fn, dev) -> float:
    sync(dev); t = time.perf_counter(); fn(); sync(dev)
    return time.perf_counter() - t


def part_pv(a, dev, out: Path, deadline: float, peak_tflops):
    "positional_vectors and mean_attention beside a bare decoder forward: tokens/s, share of peak."
    from posvec_lib.decompose import positional_vectors
    from posvec_lib.attention import mean_attention
    rows = Rows(out / "gpu-pv-throughput.csv", PV_COLUMNS)
    T, B = a.pv_T, a.pv_batch
    dtype = torch.bfloat16 if dev.type == "cuda" or a.cpu_bf16 else torch.float32
    base = dict(shape=a.pv_shape, dtype=str(dtype).replace("torch.", ""), T=T)
    try: model, _ = build(a.pv_shape, T, dtype, dev)
    except Exception as e:
        rows.add(measure="all", **base, status="oom" if is_oom(e) else f"error: {short(e)}")
        return rows.rows
    model.eval()
    L, d = model.config.num_hidden_layers, model.config.hidden_size
    per_token = 2 * layer_params(model) + 2 * L * d * T      # decoder FLOPs per token, causal
    base.update(params_b=sig(n_params(model) / 1e9), model_tflops_per_token=sig(per_token / 1e12))
    gen = torch.Generator().manual_seed(0)
    def samples(n): return torch.randint(3, model.config.vocab_size, (n, T), generator=gen)
    def bare(x):
        with torch.no_grad():
            for s in range(0, len(x), B):
                y = x[s:s + B].to(dev)
                model.base_model(input_ids=y, attention_mask=torch.ones_like(y))
    measures = [
        ("bare forward", "posvec_sdpa", B, a.pv_samples, bare),
        ("positional_vectors", "posvec_sdpa", B, a.pv_samples,
         lambda x: positional_vectors(model, x, batch_size=B, progress=False)),
        ("mean_attention", "posvec_eager", a.attn_batch, a.attn_samples,
         lambda x: mean_attention(model, x, batch_size=a.attn_batch, progress=False))]
    ref = None
    for name, attn, bs, n, fn in measures:
        row = dict(base, measure=name, attn=attn, batch=bs, samples_timed=n)
        if time.time() > deadline:
            rows.add(**row, status="skipped: time budget"); continue
        try:
            fn(samples(bs))                                   # warm-up: kernels, allocator
            x = samples(n)
            sec = timed(lambda: fn(x), dev)
            tps = n * T / sec
            frac = sig(tps * per_token / 1e12 / peak_tflops, 3) if peak_tflops else ""
            row.update(seconds=sig(sec), tokens_per_s=sig(tps), frac_bf16_peak=frac,
                       est_32k_samples_h=sig(32768 * T / tps / 3600, 3), status="ok")
            if name == "bare forward": ref = sec / n
            elif ref: row["time_vs_bare"] = sig(sec / n / ref, 3)
            if name == "mean_attention":
                row["note"] = "eager [B; H; T; T] weights and a float64 sum per layer; vs sdpa"
        except Exception as e:
            row.update(status="oom" if is_oom(e) else f"error: {short(e)}"); e = None
        free(dev)
        rows.add(**row)
    del model; free(dev)
    return rows.rows


# ---------------------------------------------------------------- part 3: the CUDA paths

def max_diff(a, b) -> float:
    "Largest absolute difference of two tensors (on the CPU, in float64)."
    return float((a.detach().cpu().double() - b.detach().cpu().double()).abs().max())


def part_cuda_paths(a, dev, out: Path, deadline: float):
    "The smoke profile's models, measures, RoPE switches, extensions, a PoSE fine-tune: dev vs CPU."
    from posvec_lib.variants import tiny_model, set_attention
    from posvec_lib.config import get_profile
    from posvec_lib.decompose import positional_vectors
    from posvec_lib.attention import mean_attention
    from posvec_lib.rope import apply_interpolation, METHODS
    from posvec_lib.extend import extend, EXTENSIONS
    from posvec_lib.efficiency import step_cost
    from posvec_lib.pose import PoSECollator
    rows = Rows(out / "gpu-cuda-paths.csv", CUDA_COLUMNS)
    cpu = torch.device("cpu")
    compared = f"{dev.type} vs cpu" if dev.type != "cpu" else "cpu copy vs cpu"
    S = get_profile("smoke"); C = S.C
    x = torch.randint(3, 101, (4, 2 * C), generator=torch.Generator().manual_seed(0))  # [4, 2C]

    def logits(m, ids=x):
        at = next(m.parameters()).device
        with torch.no_grad():
            ids = ids.to(at)
            return m(ids, attention_mask=torch.ones_like(ids)).logits.float().cpu()

    def check(call, variant, fn, tol, dtype="float32", attn="posvec_sdpa", what=compared):
        head = dict(call=call, variant=variant, dtype=dtype, attn=attn, compared=what,
                    tolerance=tol)
        if time.time() > deadline: rows.add(**head, status="skipped: time budget"); return
        try:
            diff, note = fn()
            ok = diff <= tol
            rows.add(**head, max_abs_diff=f"{diff:.3g}", **{"pass": ok},
                     status="pass" if ok else "fail", note=note)
        except Exception as e:
            rows.add(**head, **{"pass": False}, status=f"error: {short(e)}")

    kinds = {"rope": ("rope", None), "nope": ("nope", None), "alibi": ("alibi", None),
             "window": ("nope", S.window), "window_rope": ("rope", S.window)}
    pairs = {}                                            # variant -> (CPU model, device copy)
    for v, (pos, W) in kinds.items():
        m = tiny_model(pos, W, attn="posvec_sdpa", seed=0)
        pairs[v] = (m, copy.deepcopy(m).to(dev))

    def placement():
        m = pairs["rope"][1]
        off = [n for n, t in [*m.named_parameters(), *m.named_buffers()]
               if t.device.type != dev.type]
        return float(len(off)), f"{len(off)} tensors off {dev.type}" + (f": {off[:3]}" * bool(off))
    check("placement (parameters and buffers)", "rope", placement, 0, what=dev.type)
    for v, (mc, md) in pairs.items():
        check("logits", v, lambda: (max_diff(logits(md), logits(mc)), ""), 1e-4)
    for v in ("rope", "alibi", "window_rope"):
        def eager_vs_sdpa(md=pairs[v][1]):
            ref = logits(md); set_attention(md, "posvec_eager")
            try: e = logits(md)
            finally: set_attention(md, "posvec_sdpa")
            return max_diff(e, ref), f"eager vs sdpa, both on {dev.type}"
        check("logits eager vs sdpa", v, eager_vs_sdpa, 1e-4, attn="posvec_eager", what=dev.type)

    def bf16():
        md = copy.deepcopy(pairs["rope"][0]).to(dev, torch.bfloat16)
        ref = logits(pairs["rope"][0])
        return max_diff(logits(md), ref), f"logits scale {ref.abs().max():.2f}"
    check("logits bf16", "rope", bf16, 5e-2, dtype="bfloat16", what=f"{dev.type} bf16 vs cpu fp32")
    for v in ("rope", "nope", "window"):
        def pv(mc=pairs[v][0], md=pairs[v][1]):
            pc = positional_vectors(mc, x, 2, progress=False)
            pd = positional_vectors(md, x, 2, progress=False)
            ok = pd.p.dtype == torch.float64 and pd.p.device.type == "cpu"
            return (max_diff(pd.p, pc.p) + (0 if ok else math.inf),
                    f"p {tuple(pd.p.shape)} float64 on cpu: {ok}")
        check("positional_vectors", v, pv, 1e-4)
    for v in ("rope", "alibi"):
        def attn(mc=pairs[v][0], md=pairs[v][1]):
            ac = mean_attention(mc, x, 2, progress=False)
            ad = mean_attention(md, x, 2, progress=False)
            back = md.config._attn_implementation == "posvec_sdpa"
            return max_diff(ad, ac) + (0 if back else math.inf), f"sdpa again after: {back}"
        check("mean_attention", v, attn, 1e-5, attn="posvec_eager")

    mc, md = pairs["rope"]
    for method in METHODS[1:]:
        def switched(method=method):
            before = logits(md)
            with apply_interpolation(mc, method, 2.0, C), apply_interpolation(md, method, 2.0, C):
                on = md.model.rotary_emb.inv_freq.device.type == dev.type
                diff, changed = max_diff(logits(md), logits(mc)), max_diff(logits(md), before)
            undo = max_diff(logits(md), before)
            bad = not on or undo > 0 or changed == 0
            return diff + (math.inf if bad else 0), (f"inv_freq on {dev.type}: {on}; change while "
                                                     f"on {changed:.3g}; undo diff {undo:.3g}")
        check(f"rope switch {method} ×2 (+ undo)", "rope", switched, 1e-4)

    pv_ref = positional_vectors(mc, x, 2, progress=False)
    settings = {"direct": ("rope", {}), "attention_scaling": ("nope", dict(lam=1.5)),
                "initial_scaling": ("rope", dict(s=2.0)), "dynamic_ntk": ("rope", dict(factor=2.0)),
                "replacement": ("rope", dict(pv=pv_ref, layer=0, r=2.0)),
                "window_extension": ("window", dict(r=2.0))}
    for method in EXTENSIONS:
        if method not in settings:
            rows.add(call=f"extend {method}", compared=compared,
                     status="skipped: no setting in gpu_paper.py"); continue
        v, setting = settings[method]
        def extended(method=method, v=v, setting=setting):
            mc, md = pairs[v]
            before = logits(md)
            with extend(mc, method, **setting), extend(md, method, **setting):
                diff, changed = max_diff(logits(md), logits(mc)), max_diff(logits(md), before)
            undo = max_diff(logits(md), before)
            return (diff + (math.inf if undo else 0),
                    f"change while on {changed:.3g}; undo {undo:.3g}")
        check(f"extend {method} (+ undo)", v, extended, 1e-4)

    def stepped():
        batch = PoSECollator(C, 4 * C, "pose", seed=0, bos=0)(random_docs(2, 5 * C, 101, seed=1))
        r = step_cost(copy.deepcopy(pairs["rope"][1]), batch, steps=1)
        ok = r["peak_bytes"] > 0 and r["s_per_step"] > 0
        return (0.0 if ok else math.inf), (f"s/step {r['s_per_step']:.4f}; "
                                           f"peak {r['peak_bytes'] / 2**20:.1f} MiB")
    check("efficiency.step_cost", "rope", stepped, 0.0, what=dev.type)

    def pose_finetune():
        losses, params = {}, {}
        for side, d in (("cpu", cpu), ("dev", dev)):
            m = copy.deepcopy(pairs["rope"][0]).to(d); m.train()
            P = get_profile("smoke", device=d.type, dtype="float32", pose_batch_size=2)
            with apply_interpolation(m, "linear", 4.0, C), tempfile.TemporaryDirectory() as tmp:
                tr = recipe_trainer(m, P, PoSECollator(C, 4 * C, "pose", seed=0, bos=0),
                                    random_docs(8, 5 * C, 101, seed=2), 4, False, Path(tmp))
                tr.train()
            losses[side] = torch.tensor([h["loss"] for h in tr.state.log_history if "loss" in h])
            params[side] = torch.cat([p.detach().cpu().flatten() for p in m.parameters()])
            release(tr, m, d)
        w = max_diff(params["dev"], params["cpu"])
        return max_diff(losses["dev"], losses["cpu"]), (
            f"losses {[round(float(l), 4) for l in losses['dev']]}; weights max diff {w:.3g}")
    check("PoSE fine-tune, 4 Trainer steps (losses)", "rope", pose_finetune, 1e-3)
    del pairs; free(dev)
    return rows.rows


# ---------------------------------------------------------------- figure

def paper_fig3():
    "Paper B Fig. 3a/b as the project stores it (data/papers/B_ppl_fig3_efficiency.csv)."
    import pandas as pd
    try:
        from posvec_lib.data import paper_numbers
        return paper_numbers(PAPER_FIG3)
    except Exception:                                   # a copy of the tree that is not a clone
        return pd.read_csv(ROOT / "data" / "papers" / f"{PAPER_FIG3}.csv")


def figure(ft_rows: list, path: Path, C: int, env: dict) -> Path:
    "B Fig. 3 beside the paper's: peak memory, memory above PoSE, PoSE / Full time, by Lt / Lc."
    import pandas as pd
    import matplotlib; matplotlib.use("Agg")
    import matplotlib.pyplot as plt, seaborn as sns
    sns.set_theme()
    ok = pd.DataFrame(ft_rows, columns=FT_COLUMNS).query("status == 'ok'").copy()
    for c in ("peak_gb", "s_per_step", "position_range"):
        ok[c] = pd.to_numeric(ok[c], errors="coerce")
    ok["s"] = ok.position_range / C
    paper = paper_fig3()
    paper["s"] = paper.Lt_k * 1024 / 2048                   # the paper's Lc = 2048 (LLaMA-7B)
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.8))
    colors, marks = {"full-length": "#1f77b4", "pose": "#d62728"}, ["o", "s", "^", "D"]
    for i, (cfg, g) in enumerate(ok.groupby("config", sort=False)):
        for method, h in g.groupby("method"):
            h = h.sort_values("s")
            ax[0].plot(h.s, h.peak_gb, marker=marks[i % 4], color=colors[method],
                       label=f"ours {cfg} {method}")
        full, pose = (g[g.method == m].set_index("s") for m in ("full-length", "pose"))
        both = full.index.intersection(pose.index)
        ax[1].plot(both, full.loc[both, "peak_gb"] - pose.loc[both, "peak_gb"],
                   marker=marks[i % 4], color=f"C{i + 2}", label=f"ours {cfg}")
        ax[2].plot(both, pose.loc[both, "s_per_step"] / full.loc[both, "s_per_step"],
                   marker=marks[i % 4], color=f"C{i + 2}", label=f"ours {cfg}")
    pf, pp = (paper[paper.method == m].set_index("s") for m in ("full-length", "pose"))
    for method, h in (("full-length", pf), ("pose", pp)):
        ax[0].plot(h.index, h.memory_GB, ls="--", marker="x", color=colors[method],
                   label=f"paper {method} (per GPU, 8× A100 ZeRO-3)")
    ax[1].plot(pf.index, pf.memory_GB - pp.memory_GB, ls="--", marker="x", color="k", label="paper")
    ax[2].plot(pf.index, pp.time_h / pf.time_h, ls="--", marker="x", color="k",
               label="paper (hours of 1000 steps)")
    x = f"Lt / Lc (Lc = {C}; the paper's 4k / 8k / 16k are 2 / 4 / 8)"
    ax[0].set(xlabel=x, ylabel="peak memory (GB)", title="(a) peak memory per GPU")
    ax[1].set(xlabel=x, ylabel="Full-length − PoSE (GB)", title="(b) memory above PoSE, same Lt")
    ax[2].set(xlabel=x, ylabel="PoSE / Full-length, time per step",
              title="(c) time ratio (paper: 0.28 at 16k)")
    for a_ in ax: a_.set_xscale("log", base=2); a_.legend(fontsize=7)
    who = env.get("gpu") or env.get("cpu", "cpu")
    fig.suptitle(f"B Fig. 3 on one device ({who}; torch {env['torch']}, transformers "
                 f"{env['transformers']}) beside the paper's 8× A100 ZeRO-3; micro-batch 1, "
                 "gradient checkpointing")
    fig.tight_layout(); fig.savefig(path, dpi=120); plt.close(fig)
    return path


# ---------------------------------------------------------------- main

def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg = ap.add_argument
    arg("--device", default="cuda", choices=["cuda", "cpu"])
    arg("--tiny", action="store_true", help="tiny shapes and lengths (the CPU test)")
    arg("--out", default="benchmarks", help="folder of the CSVs, gpu-env.json and the figure")
    arg("--parts", default="3,2,1", help="which parts, in this order")
    arg("--budget-s", type=float, default=480, help="wall-clock budget of the whole run")
    arg("--configs", default=None, help="part 1 shape:precision list (default 7b:mixed,1.1b:bf16,"
                                        "7b:bf16; with --tiny tiny:mixed,tiny:bf16)")
    arg("--C", type=int, default=None, help="Lc of part 1 (default 2048; tiny 32)")
    arg("--factors", default="1,2,4,8", help="Lt / Lc of Full-length (PoSE: those above 1)")
    arg("--batch", type=int, default=1, help="sequences per step (micro-batch)")
    arg("--no-grad-ckpt", dest="grad_ckpt", action="store_false")
    arg("--warmup", type=int, default=None, help="steps left out of the timing (2; tiny 1)")
    arg("--steps", type=int, default=None, help="timed steps (3; tiny 2)")
    arg("--pv-shape", default=None, help="part 2 shape (1.1b; tiny with --tiny)")
    arg("--pv-T", type=int, default=None, help="part 2 length (2048; tiny 64)")
    arg("--pv-batch", type=int, default=None, help="part 2 batch (16; tiny 4)")
    arg("--pv-samples", type=int, default=None, help="part 2 timed samples (256; tiny 8)")
    arg("--attn-batch", type=int, default=None, help="mean_attention batch (4; tiny 2)")
    arg("--attn-samples", type=int, default=None, help="mean_attention samples (16; tiny 4)")
    arg("--cpu-bf16", action="store_true", help="part 2 in bf16 on the CPU too")
    arg("--peak-tflops", type=float, default=None, help="the device's bf16 peak (default: by name)")
    arg("--hide-modules", default="", help="comma list: imports of these fail (the device case)")
    a = ap.parse_args(argv)
    t = a.tiny
    dflt = dict(C=32 if t else 2048, warmup=1 if t else 2, steps=2 if t else 3,
                pv_shape="tiny" if t else "1.1b", pv_T=64 if t else 2048, pv_batch=4 if t else 16,
                pv_samples=8 if t else 256, attn_batch=2 if t else 4, attn_samples=4 if t else 16,
                configs="tiny:mixed,tiny:bf16" if t else "7b:mixed,1.1b:bf16,7b:bf16")
    for k, v in dflt.items():
        if getattr(a, k) is None: setattr(a, k, v)
    a.factors = [int(f) for f in a.factors.split(",")]
    a.parts = [int(p) for p in a.parts.split(",")]
    return a


def main(argv=None) -> int:
    a = parse(argv)
    t_start = time.time()
    warnings.filterwarnings("ignore", category=FutureWarning)     # renamed Trainer arguments
    import transformers; transformers.logging.set_verbosity_error()
    hidden = HIDDEN
    try: stand_ins = import_library()
    except Exception as e:                                  # the library does not import here
        stand_ins = [f"import failed: {short(e)}"]
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device visible; use --device cpu", file=sys.stderr); return 2
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    env = environment(dev, stand_ins, hidden)
    peak = bf16_peak(dev, a.peak_tflops)
    env.update(bf16_peak_tflops=peak, args=vars(a))
    (out / "gpu-env.json").write_text(json.dumps(env, indent=1) + "\n")
    share = {3: 0.15, 2: 0.17, 1: 0.62}              # of the budget; what a part leaves passes on
    results, spent = {}, 0.0
    for part in a.parts:
        spent += share[part]
        deadline = t_start + a.budget_s * min(1.0, spent + (0.05 if part == a.parts[-1] else 0))
        t = time.time()
        try:
            if part == 1: results[1] = part_finetune(a, dev, out, deadline, peak)
            elif part == 2: results[2] = part_pv(a, dev, out, deadline, peak)
            elif part == 3: results[3] = part_cuda_paths(a, dev, out, deadline)
        except Exception as e:                         # e.g. an import that fails on this machine
            env.setdefault("part_errors", {})[part] = short(e)
            print(f"part {part}: {short(e)}", file=sys.stderr, flush=True)
        env.setdefault("part_seconds", {})[part] = round(time.time() - t, 1)
        free(dev)
    if results.get(1):
        try: env["figure"] = figure(results[1], out / "B_fig3_gpu.png", a.C, env).name
        except Exception as e: env.setdefault("part_errors", {})["figure"] = short(e)
    env["total_seconds"] = round(time.time() - t_start, 1)
    (out / "gpu-env.json").write_text(json.dumps(env, indent=1) + "\n")
    print(json.dumps({k: env[k] for k in ("total_seconds", "part_seconds", "part_errors")
                      if k in env}), flush=True)
    return 1 if env.get("part_errors") else 0


if __name__ == "__main__": sys.exit(main())
