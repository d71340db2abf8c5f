"Each measure of posvec_lib.ablate against an independent direct computation on tiny random models (seconds)."
import math
import numpy as np
import pytest
import torch
from transformers import LlamaForCausalLM
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from posvec_lib.config import get_profile
from posvec_lib.variants import model_config, Variant, tiny_model
from posvec_lib.trace import run_with_cache
from posvec_lib.decompose import positional_vectors, PositionalVectors, pca
from posvec_lib.attention import mean_attention, uniform_attention, sink_excess, decay_ratio
from posvec_lib.evaluate import token_nll
from posvec_lib.ablate import (REMOVALS, InputVectors, attention_input_vectors, ablate, ablation_effect, ablation_table, position_sets, vector_similarity, distinct_positions, receptive_field, reach_bound, shifted_samples, positional_logits, toy_attention, rope_rotate)

V, T, N = 101, 16, 12


pytestmark = pytest.mark.usefixtures("one_thread")   # conftest: tiny models run on one thread


def tiny(position="rope", window=None, seed=0, layers=None):
    if layers is None: return tiny_model(position, window, V, seed=seed)
    torch.manual_seed(seed)
    return LlamaForCausalLM(model_config(get_profile("smoke", n_layers=layers), Variant("t", position, window), V, "posvec_eager")).eval()


@pytest.fixture(scope="module", params=["nope", "rope"])
def model(request): return tiny(request.param)


@pytest.fixture(scope="module")
def X():
    g = torch.Generator().manual_seed(1)
    x = torch.randint(3, V, (N, T), generator=g); x[:, 0] = 0     # BOS at position 0
    return x


@torch.no_grad()
def logits(m, x): return m(x, attention_mask=torch.ones_like(x)).logits


def n_hooks(m):
    return sum(len(mod._forward_hooks) + len(mod._forward_pre_hooks) for mod in m.modules())


@torch.no_grad()
def manual_layer0(m, x, q_in, k_in, v_in, v_zero=None):
    "Output of decoder layer 0 computed by hand from given q/k/v inputs (the residual is the embedding)."
    layer, at = m.model.layers[0], m.model.layers[0].self_attn
    h = m.model.embed_tokens(x)
    B, L, _ = h.shape; hd = at.head_dim
    heads = lambda y: y.view(B, L, -1, hd).transpose(1, 2)
    q, k, v = heads(at.q_proj(q_in)), heads(at.k_proj(k_in)), heads(at.v_proj(v_in)).clone()
    if v_zero is not None: v[:, :, v_zero] = 0
    cos, sin = m.model.rotary_emb(h, torch.arange(L)[None])
    q, k = apply_rotary_pos_emb(q, k, cos, sin)
    s = (q @ k.transpose(-1, -2)) * hd ** -0.5
    s = s.masked_fill(~torch.tril(torch.ones(L, L, dtype=torch.bool)), float("-inf"))
    o = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, L, -1)
    r = h + at.o_proj(o)
    return r + layer.mlp(layer.post_attention_layernorm(r))


def layer0_out(m, x): return run_with_cache(m, x, ["resid_post.0"])[1]["resid_post.0"]


# ---- reference vectors -------------------------------------------------------------------------------

def test_input_vectors_are_shifted_residual_means(model, X):
    ref, pv = attention_input_vectors(model, X), positional_vectors(model, X, progress=False)
    _, cache = run_with_cache(model, X)
    direct = [model.model.embed_tokens(X)] + [cache[f"resid_post.{l}"] for l in range(len(model.model.layers) - 1)]
    for l, h in enumerate(direct): torch.testing.assert_close(ref.p[l], h.double().mean(0), atol=1e-6, rtol=0)
    torch.testing.assert_close(ref.p[1:], pv.p[:-1], atol=1e-6, rtol=0)
    post = attention_input_vectors(model, X, "post_norm")
    for l, h in enumerate(direct):
        torch.testing.assert_close(post.p[l], model.model.layers[l].input_layernorm(h).double().mean(0), atol=1e-6, rtol=0)


# ---- hooks --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("removal", REMOVALS)
def test_hooks_leave_model_unchanged(model, X, removal):
    ref, base, h0 = attention_input_vectors(model, X), logits(model, X), n_hooks(model)
    with ablate(model, removal, range(5), ref):
        assert n_hooks(model) > h0
        assert not torch.allclose(logits(model, X), base, atol=1e-5) or removal == "semantic_vector"
    assert n_hooks(model) == h0 and torch.equal(logits(model, X), base)
    with pytest.raises(RuntimeError, match="boom"):
        with ablate(model, removal, range(5), ref, targets=("q", "k", "v")): raise RuntimeError("boom")
    assert n_hooks(model) == h0 and torch.equal(logits(model, X), base)


@pytest.mark.parametrize("where", ["pre_norm", "post_norm"])
@pytest.mark.parametrize("removal", ["positional_vector", "positional_basis"])
def test_zero_component_changes_nothing(model, X, where, removal):
    ref = attention_input_vectors(model, X, where)
    zero = InputVectors(torch.zeros_like(ref.p), 1, ref.total_var, where)
    base = logits(model, X)
    with ablate(model, removal, None, zero, targets=("q", "k", "v")):
        torch.testing.assert_close(logits(model, X), base, atol=1e-6, rtol=0)


def test_semantic_removal_at_bos_changes_nothing(model, X):
    "BOS is the same token in every sample, so its semantic vector is exactly zero."
    ref, base = attention_input_vectors(model, X), logits(model, X)
    with ablate(model, "semantic_vector", [0], ref): torch.testing.assert_close(logits(model, X), base, atol=1e-5, rtol=0)


def test_bad_arguments_are_named(model, X):
    ref = attention_input_vectors(model, X)
    for kw, msg in [(dict(removal="position"), "allowed"), (dict(removal="value", targets=("o",)), "targets"),
                    (dict(removal="positional_basis", positions=[T]), "positions must lie"),
                    (dict(removal="positional_basis", layers=[9]), "layers must lie"),
                    (dict(removal="positional_vector", ref=None), "needs the reference")]:
        args = dict(model=model, positions=[0], ref=ref) | kw
        with pytest.raises(ValueError, match=msg):
            with ablate(**args): pass
    with pytest.raises(ValueError, match="allowed"): attention_input_vectors(model, X, "inside")


# ---- the ablation equals the direct computation ----------------------------------------------------------

def test_positional_vector_removal_everywhere_equals_h_minus_p(model, X):
    "Removing p at every position from q, k and v of layer 0 = attention reading norm(h − p), residual h unchanged."
    ref = attention_input_vectors(model, X)
    h = model.model.embed_tokens(X)
    x = model.model.layers[0].input_layernorm(h - ref.p[0].float())
    with ablate(model, "positional_vector", None, ref, layers=[0], targets=("q", "k", "v")): got = layer0_out(model, X)
    torch.testing.assert_close(got, manual_layer0(model, X, x, x, x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("removal", ["positional_vector", "positional_basis", "semantic_vector"])
def test_kv_removal_at_positions_equals_direct(model, X, removal):
    "Keys and values read the edited state at the chosen positions only; queries read the original."
    ref = attention_input_vectors(model, X)
    S = [1, 2, 5]
    h = model.model.embed_tokens(X).detach()
    p, u = ref.p[0].float(), ref.u[0].float()
    e = h.clone()
    if removal == "positional_vector": e[:, S] = h[:, S] - p[S]
    if removal == "positional_basis": e[:, S] = h[:, S] - (p[S] - u)
    if removal == "semantic_vector": e[:, S] = p[S]
    norm = model.model.layers[0].input_layernorm
    with ablate(model, removal, S, ref, layers=[0]): got = layer0_out(model, X)
    torch.testing.assert_close(got, manual_layer0(model, X, norm(h), norm(e), norm(e)), atol=1e-5, rtol=1e-5)


def test_post_norm_removal_equals_direct(model, X):
    ref = attention_input_vectors(model, X, "post_norm")
    S = [0, 3]
    x = model.model.layers[0].input_layernorm(model.model.embed_tokens(X)).detach()
    e = x.clone(); e[:, S] = x[:, S] - ref.p[0, S].float()
    with ablate(model, "positional_vector", S, ref, layers=[0]): got = layer0_out(model, X)
    torch.testing.assert_close(got, manual_layer0(model, X, x, e, e), atol=1e-5, rtol=1e-5)


def test_value_removal_equals_direct(model, X):
    S = [0, 4, 7]
    x = model.model.layers[0].input_layernorm(model.model.embed_tokens(X))
    with ablate(model, "value", S, layers=[0]): got = layer0_out(model, X)
    torch.testing.assert_close(got, manual_layer0(model, X, x, x, x, v_zero=S), atol=1e-5, rtol=1e-5)


def test_semantic_removal_everywhere_makes_attention_sample_independent(model, X):
    "With every q, k, v reading p[t] alone, layer 0's attention output is the same for every text."
    ref, out = attention_input_vectors(model, X), {}
    hk = model.model.layers[0].self_attn.register_forward_hook(lambda m, a, o: out.__setitem__("a", o[0]))
    try:
        with ablate(model, "semantic_vector", None, ref, layers=[0], targets=("q", "k", "v")): layer0_out(model, X)
    finally: hk.remove()
    a = out["a"]
    torch.testing.assert_close(a, a[:1].expand_as(a), atol=1e-5, rtol=0)


def test_removing_positional_vector_zeroes_the_bos_key(X):
    "BOS: h = p exactly, so without its positional vector its key is k_proj(norm(0)) = 0 in every layer."
    m = tiny("nope")
    ref, keys = attention_input_vectors(m, X), {}
    hs = [l.self_attn.k_proj.register_forward_hook(lambda mod, a, o, i=i: keys.__setitem__(i, o))
          for i, l in enumerate(m.model.layers)]
    try:
        with ablate(m, "positional_vector", None, ref, targets=("q", "k")): logits(m, X)
    finally:
        for h in hs: h.remove()
    for k in keys.values():
        assert k[:, 0].abs().max() < 1e-5 and k[:, 1:].abs().max() > 1e-2


# ---- measures -------------------------------------------------------------------------------------------

def test_ablation_effect_and_table(model, X):
    ref, pv0 = attention_input_vectors(model, X), positional_vectors(model, X, progress=False)
    e = ablation_effect(model, None, None, ref, pv0, X, X)
    assert e["simi"] == pytest.approx(1.0) and e["simi_centred"] == pytest.approx(1.0)
    assert e["ppl"] == pytest.approx(float(token_nll(model, X).mean().exp()), rel=1e-6)
    e2 = ablation_effect(model, "positional_basis", range(5), ref, pv0, X, X)
    with ablate(model, "positional_basis", range(5), ref):
        pv = positional_vectors(model, X, progress=False); ppl = float(token_nll(model, X).mean().exp())
    cos = np.mean([[np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b) for a, b in zip(pv.p[l].numpy(), pv0.p[l].numpy())]
                   for l in range(pv.p.shape[0])])
    assert e2["simi"] == pytest.approx(cos, abs=1e-9) and e2["ppl"] == pytest.approx(ppl, rel=1e-6)
    tab = ablation_table(model, position_sets(T), ref, pv0, X, X)
    assert list(tab.removal) == ["original"] + [r for r in REMOVALS for _ in range(2)]
    assert tab.ppl_ratio.iloc[0] == 1 and {"simi_L1", "simi_L2"} <= set(tab.columns)


def test_position_sets():
    assert position_sets(2048) == {"0-4": range(0, 5), "32-256": range(32, 257)}
    assert position_sets(128) == {"0-4": range(0, 5), "16-32": range(16, 33)}
    s = position_sets(32)
    assert set(s["0-4"]).isdisjoint(list(s.values())[1]) and max(list(s.values())[1]) < 32


def test_vector_similarity_direct():
    a, b = torch.randn(2, 5, 3).double(), torch.randn(2, 5, 3).double()
    A, B = PositionalVectors(a, 1, torch.ones(2)), PositionalVectors(b, 1, torch.ones(2))
    direct = (a * b).sum(-1) / a.norm(dim=-1) / b.norm(dim=-1)
    torch.testing.assert_close(vector_similarity(A, B), direct)
    am, bm = a - a.mean(1, keepdim=True), b - b.mean(1, keepdim=True)
    torch.testing.assert_close(vector_similarity(A, B, centred=True), (am * bm).sum(-1) / am.norm(dim=-1) / bm.norm(dim=-1))


def test_sink_and_decay_direct(X):
    U = uniform_attention(T)
    torch.testing.assert_close(U[0, 0].sum(-1), torch.ones(T, dtype=torch.float64))
    assert sink_excess(U).item() == pytest.approx(1.0) and decay_ratio(U).item() == pytest.approx(1.0)
    A = mean_attention(tiny("nope"), X, progress=False)                   # [L, H, T, T]
    direct = np.mean([A[0, 0, t, 0].item() * (t + 1) for t in range(4, T)])
    assert sink_excess(A)[0, 0].item() == pytest.approx(direct, rel=1e-9)
    def by_dist(a, d): return np.mean([a[i, i - d].item() for i in range(d + 1, T)])   # key 0 excluded
    def r(a): return np.mean([by_dist(a, d) for d in range(1, 5)]) / np.mean([by_dist(a, d) for d in range(T // 2, T - 1)])
    assert decay_ratio(A)[0, 1].item() == pytest.approx(r(A[0, 1]) / r(U[0, 0]), rel=1e-9)


def test_distinct_positions_in_a_window_model():
    "Beyond l·(W−1) a position cannot see BOS, so it cannot be distinct; the count never exceeds that bound."
    W, L, Tw = 4, 3, 40
    m = tiny("nope", window=W, layers=L)
    g = torch.Generator().manual_seed(2)
    x = torch.randint(3, V, (64, Tw), generator=g); x[:, 0] = 0
    ts = L * W + 4
    pv = positional_vectors(m, x, progress=False)
    sh = positional_vectors(m, shifted_samples(x, ts), progress=False)
    d = distinct_positions(pv, sh, tail_start=ts, k=1.5, window=W)
    tail = pv.p[:, ts:].mean(1)
    r = torch.stack([torch.stack([((sh.p[l, t] - pv.p[l, t + ts]) if t < ts else (pv.p[l, t] - tail[l])).norm()
                                  / tail[l].norm() for t in range(Tw)]) for l in range(L)])
    torch.testing.assert_close(d["distance"], r)
    for l in range(L):
        assert 1 <= d["count"][l] <= reach_bound(l + 1, W), (l, d["count"])   # layer l+1 sees BOS from t ≤ (l+1)(W−1)
        assert d["distance"][l, reach_bound(l + 1, W):ts].max() < 1e-5          # beyond it: the same text, the same state
    assert receptive_field(2, 512) == 1024


def test_pca_direct():
    x = torch.randn(30, 6).double() + torch.linspace(0, 3, 30)[:, None].double()
    Z, ev = pca(x, 2)
    xc = (x - x.mean(0)).numpy(); _, s, vt = np.linalg.svd(xc, full_matrices=False)
    np.testing.assert_allclose(np.abs(Z.numpy()), np.abs(xc @ vt[:2].T), atol=1e-9)
    np.testing.assert_allclose(ev.numpy(), s[:2] ** 2 / (s ** 2).sum(), atol=1e-12)
    assert (torch.arange(30.).double() - 14.5) @ Z[:, 0] > 0                 # sign: rises with position


def test_positional_logits_direct(X):
    m = tiny("nope")
    pv = positional_vectors(m, X, progress=False)
    h = pv.p[-1].float()
    direct = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + m.config.rms_norm_eps) * m.model.norm.weight) @ m.lm_head.weight.T
    torch.testing.assert_close(positional_logits(m, pv).float(), direct.detach(), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("rope", [False, True])
def test_toy_attention_loop(rope):
    o = toy_attention(10, 6, rope=rope, n_trials=2, seed=3).numpy()
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 10, 6, generator=g, dtype=torch.float64) for _ in range(3))
    if rope:
        # RoPE by hand: pairs (i, i + d/2) rotated by t·θ^(-2i/d)
        def rot(x):
            y = x.clone()
            for t in range(10):
                for i in range(3):
                    a = t * 10000.0 ** (-2 * i / 6); c, s = math.cos(a), math.sin(a)
                    y[:, t, i], y[:, t, i + 3] = x[:, t, i] * c - x[:, t, i + 3] * s, x[:, t, i + 3] * c + x[:, t, i] * s
            return y
        q, k = rot(q), rot(k)
        torch.testing.assert_close(rope_rotate(torch.randn(2, 10, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)), q)
    q, k, v = q.numpy(), k.numpy(), v.numpy()
    for n in range(2):
        for t in range(10):
            s = np.array([q[n, t] @ k[n, j] for j in range(t + 1)]) / math.sqrt(6)
            w = np.exp(s - s.max()); w /= w.sum()
            np.testing.assert_allclose(o[n, t], w @ v[n, : t + 1], atol=1e-12)


@pytest.mark.parametrize("rope", [False, True])
def test_toy_attention_shared_qk(rope):
    "The same q, k at every position: NoPE attends uniformly; RoPE weights depend on the distance only."
    o = toy_attention(8, 4, rope=rope, n_trials=1, seed=4, shared_qk=True).numpy()[0]
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, n, 4, generator=g, dtype=torch.float64) for n in (1, 1, 8))
    if not rope:
        np.testing.assert_allclose(o, np.cumsum(v[0].numpy(), 0) / np.arange(1, 9)[:, None], atol=1e-12)
    else:
        Q, K = rope_rotate(q.expand(1, 8, 4))[0].numpy(), rope_rotate(k.expand(1, 8, 4))[0].numpy()
        s = lambda i, j: Q[i] @ K[j] / 2.0
        assert s(5, 2) == pytest.approx(s(7, 4)) and s(3, 3) == pytest.approx(s(0, 0))
        for t in range(8):
            w = np.exp([s(t, j) for j in range(t + 1)]); w /= w.sum()
            np.testing.assert_allclose(o[t], w @ v[0, : t + 1].numpy(), atol=1e-12)


def test_A_ablation_takes_a_hub_style_model_folder(tmp_path, root):
    """The paper path of A Table 6 / the rebuttal's mainstream models: a name in `ablation_models` that is not a zoo
    variant is loaded as a causal LM folder with its own tokenizer (here a tiny random RoPE Llama saved to disk, where
    `paper` names Llama-3-8B, Yi-9B, Qwen1.5-7B). The notebook runs on it through papermill, as the runner does."""
    import json, os, subprocess, sys
    from posvec_lib.data import profile_data
    P = get_profile("smoke")
    tok = profile_data(P).tokenizer
    folder = tmp_path / "models" / "tiny-rope-llm"
    torch.manual_seed(0)
    LlamaForCausalLM(model_config(P, Variant("r", "rope"), len(tok))).save_pretrained(folder)
    tok.save_pretrained(folder)
    home = tmp_path / "home"; home.mkdir()
    (home / "data").symlink_to(root / "data")                  # share the caches (tokenizer, smoke zoo); outputs stay here
    (home / "settings.ini").write_text("[DEFAULT]\n")
    env = dict(os.environ, POSVEC_HOME=str(home))
    params = ["-p", "profile", "smoke", "-y", json.dumps({"overrides": {"ablation_models": [str(folder)]}})]
    r = subprocess.run([sys.executable, "-m", "papermill", str(root / "nbs/experiments/A_ablation.ipynb"), str(tmp_path / "out.ipynb"),
                        *params, "--cwd", str(root / "nbs/experiments")], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    out = home / "figures" / get_profile("smoke", ablation_models=(str(folder),)).results_name   # an override: its own folder
    assert out.name.startswith("smoke+") and not (home / "figures" / "smoke" / "A_ablation").exists()
    res = json.loads((out / "A_ablation/result.json").read_text())
    assert "rebuttal_mainstream_attention_maps.png" in res["figures"]
    import pandas as pd
    t6 = pd.read_csv(out / "A_ablation/table6_ablations.csv")
    assert set(t6.model) == {str(folder)} and len(t6) == 1 + 2 * len(REMOVALS)
    assert {"paper_Llama-3-8B_ppl", "paper_Yi-9B_simi", "paper_Qwen1.5-7B_ppl_ratio"} <= set(t6.columns)
    assert any(c.get("id") == "A-later-flat" and str(folder) in c["values"]["measured"]
               for c in res["claims"])                      # decided with the Table 2 models
