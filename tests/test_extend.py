"""Reversibility and identity of the training-free extensions (posvec_lib.extend) on tiny random models; a few seconds."""
import math

import pytest
import torch
from transformers import LlamaForCausalLM

from posvec_lib.config import get_profile
from posvec_lib.decompose import positional_vectors
from posvec_lib.extend import (EXTENSIONS, attention_scaling, dynamic_ntk, extend, initial_scaling,
                               interpolate_positions, positional_vector_replacement,
                               replacement_shift, window_extension)
from posvec_lib.beyond import effective_ratio, beyond_similarity, interval_means
from posvec_lib.tuning import ppl_search, search_grid
from posvec_lib.probes import repetition_lengths
from posvec_lib.trace import active_extensions, run_with_cache
from posvec_lib.variants import Variant, model_config, tiny_model

P = get_profile("smoke")
C = P.C


def tiny(position="nope", window=None, alibi=False, seed=0):
    return tiny_model(position, window, 101, "posvec_sdpa", seed, max_positions=C)


def logits(m, x):
    with torch.no_grad():
        return m(x, attention_mask=torch.ones_like(x)).logits


@pytest.fixture(scope="module")
def x():
    torch.manual_seed(1)
    return torch.randint(3, 101, (1, 2 * C + 8))


@pytest.fixture(scope="module")
def models():
    return {"nope": tiny("nope"), "rope": tiny("rope"), "window": tiny("nope", 8), "window_rope": tiny("rope", 8),
            "alibi": tiny("alibi")}


@pytest.fixture(scope="module")
def pv(models):
    torch.manual_seed(2)
    return positional_vectors(models["nope"], torch.randint(3, 101, (8, 3 * C)), progress=False)


def snapshot(m):
    return m.config.to_dict(), {k: v.clone() for k, v in m.state_dict().items()}, m.model.rotary_emb


def assert_restored(m, snap, L0, x):
    cfg, sd, rot = snap
    assert m.config.to_dict() == cfg
    assert all(torch.equal(v, sd[k]) for k, v in m.state_dict().items())
    assert m.model.rotary_emb is rot
    assert active_extensions(m) == ()
    assert all(not mod._forward_hooks and not mod._forward_pre_hooks for mod in m.modules())
    assert torch.equal(logits(m, x), L0)


def cases(pv):
    return [("nope", "attention_scaling", dict(lam=1), dict(lam=1.4)),
            ("window", "attention_scaling", dict(lam=1), dict(lam=1.4)),       # composes with any variant
            ("nope", "initial_scaling", dict(s=1, n_initial=4), dict(s=2.5, n_initial=4)),
            ("alibi", "initial_scaling", dict(s=1), dict(s=2.5)),
            ("rope", "dynamic_ntk", dict(factor=1), dict(factor=3)),
            ("window_rope", "dynamic_ntk", dict(factor=1), dict(factor=2)),
            ("nope", "replacement", dict(pv=pv, layer=1, r=1, alpha=1), dict(pv=pv, layer=1, r=3, alpha=1.3)),
            ("window", "window_extension", dict(r=1, lam=1), dict(r=2, lam=1.1)),
            ("window_rope", "window_extension", dict(r=1, lam=1), dict(r=3, lam=1.0))]


@pytest.mark.parametrize("i", range(9))
def test_identity_at_factor_one_and_exact_restore(models, pv, x, i):
    name, method, ident, other = cases(pv)[i]
    m = models[name]
    L0, snap = logits(m, x), snapshot(m)
    with extend(m, method, **ident) as mm:
        assert mm is m and torch.equal(logits(m, x), L0)
    assert_restored(m, snap, L0, x)
    with extend(m, method, **other):
        assert not torch.allclose(logits(m, x), L0, atol=1e-5)
    assert_restored(m, snap, L0, x)
    with pytest.raises(ZeroDivisionError):
        with extend(m, method, **other): 1 / 0
    assert_restored(m, snap, L0, x)
    sw = extend(m, method, **other); sw.restore(); sw.restore()          # explicit restore is idempotent
    assert_restored(m, snap, L0, x)


def test_methods_compose_and_restore_in_reverse(models, pv, x):
    m = models["window"]
    L0, snap = logits(m, x), snapshot(m)
    with window_extension(m, 2, 1.2), attention_scaling(m, 1.5), initial_scaling(m, 2.0):
        assert math.isclose(m.config.posvec_logit_scale, 1.8) and m.config.posvec_window == 16
        assert len(active_extensions(m)) == 3
        Lc = logits(m, x)
    assert_restored(m, snap, L0, x)
    with window_extension(m, 2, 1.2), attention_scaling(m, 1.5), initial_scaling(m, 2.0):
        assert torch.equal(logits(m, x), Lc)                                 # deterministic re-application
    a, b = attention_scaling(m, 2.0), attention_scaling(m, 3.0)
    with pytest.raises(RuntimeError, match="reverse order"): a.restore()
    b.restore(); a.restore()
    assert_restored(m, snap, L0, x)
    n = models["nope"]; L0n, snapn = logits(n, x), snapshot(n)
    with attention_scaling(n, 1.3), positional_vector_replacement(n, pv, 0, 3, 1.1):
        pass
    assert_restored(n, snapn, L0n, x)


def test_wrong_model_kinds_raise(models, pv):
    with pytest.raises(ValueError, match="window-attention"): window_extension(models["nope"], 2)
    with pytest.raises(ValueError, match="RoPE model"): dynamic_ntk(models["nope"], 2)
    with pytest.raises(ValueError, match="allowed"): extend(models["nope"], "yarn")
    with pytest.raises(ValueError, match="layer"): positional_vector_replacement(models["nope"], pv, 7, 2)
    for bad in (0, -1, float("nan"), True):
        with pytest.raises(ValueError): attention_scaling(models["nope"], bad)
    assert active_extensions(models["nope"]) == ()
    assert set(EXTENSIONS) == {"direct", "attention_scaling", "initial_scaling", "dynamic_ntk", "replacement", "window_extension"}


def test_attention_scaling_equals_scaled_queries(models, x):
    m = models["nope"]
    q = tiny("nope"); q.load_state_dict(m.state_dict())
    for layer in q.model.layers: layer.self_attn.q_proj.weight.data *= 1.7
    with attention_scaling(m, 1.7):
        torch.testing.assert_close(logits(m, x), logits(q, x), rtol=1e-4, atol=1e-4)


def test_window_extension_equals_wider_window(models, x):
    m = models["window"]
    w = tiny("nope", 16); w.load_state_dict(m.state_dict())
    with window_extension(m, 2):
        torch.testing.assert_close(logits(m, x), logits(w, x), rtol=1e-5, atol=1e-5)


def test_dynamic_ntk_is_exact_per_length(models, x):
    m = models["rope"]
    short = logits(m, x[:, :C])
    with dynamic_ntk(m, 2):
        torch.testing.assert_close(logits(m, x[:, :C]), short)
        a = logits(m, x[:, :2 * C]); logits(m, x); b = logits(m, x[:, :2 * C])
        torch.testing.assert_close(a, b)


def test_replacement_shift_at_layer(models, pv, x):
    m = models["nope"]
    _, c0 = run_with_cache(m, x, ["resid_post.1"])
    with positional_vector_replacement(m, pv, 1, r=3, alpha=1.2):
        _, c1 = run_with_cache(m, x, ["resid_post.1"])
    shift = replacement_shift(pv.p[1], 3, 1.2)[: x.shape[1]]
    torch.testing.assert_close(c1["resid_post.1"], c0["resid_post.1"] + shift[None].float(), rtol=1e-5, atol=1e-5)
    assert torch.equal(c1["resid_post.1"][:, :4], c0["resid_post.1"][:, :4])
    assert torch.equal(replacement_shift(pv.p[1], 1, 1), torch.zeros_like(pv.p[1]))
    with pytest.raises(ValueError, match="longer than the reference"):
        with positional_vector_replacement(m, pv, 1, 3): logits(m, torch.randint(3, 101, (1, 4 * C)))
    assert active_extensions(m) == ()


def test_interpolation_and_effective_ratio():
    p = torch.arange(20, dtype=torch.float64).reshape(10, 2)
    assert torch.equal(interpolate_positions(p, torch.tensor([0., 3., 9.])), p[[0, 3, 9]])
    torch.testing.assert_close(interpolate_positions(p, torch.tensor([3.25])), (0.75 * p[3] + 0.25 * p[4])[None])
    Cs = 64
    def fourier(t, k=6):
        f = torch.arange(1, k + 1, dtype=torch.float64) * math.pi / (2 * Cs)
        return torch.cat([torch.cos(t[:, None] * f), torch.sin(t[:, None] * f)], -1)[None]
    orig = fourier(torch.arange(4 * Cs, dtype=torch.float64))
    for r in (2, 3, 4):
        ext = fourier(torch.arange(r * Cs, dtype=torch.float64) / r)
        assert abs(float(effective_ratio(ext, orig, Cs)[0]) - r) < 0.05 * r
        assert float(beyond_similarity(ext, orig, Cs)[0]) > 0.99


def test_ppl_search_and_small_helpers(models, x):
    df = ppl_search(models["nope"], x[:, :2 * C], "attention_scaling", search_grid(lam=[1.0, 1.2, 2.0]))
    assert list(df.columns) == ["lam", "ppl"] and df.ppl.is_monotonic_increasing and len(df) == 3
    assert repetition_lengths(2048) == (20, 50, 200) and repetition_lengths(32) == (4, 8, 16)
    assert interval_means(torch.arange(8.0), 4) == {"0–C": 1.5, "C–1.5C": 4.5, "1.5C–2C": 6.5}


def test_identity_settings_change_nothing(models, pv, x):
    from posvec_lib.extend import IDENTITY_SETTINGS
    for method, ident in IDENTITY_SETTINGS.items():
        m = models["rope" if method == "dynamic_ntk" else "window" if method == "window_extension" else "nope"]
        kw = dict(ident, pv=pv) if method == "replacement" else ident
        L0 = logits(m, x)
        with extend(m, method, **kw):
            assert active_extensions(m) == () and torch.equal(logits(m, x), L0)


def test_effective_ratio_ignores_the_in_window_identity():
    Cs = 64
    f = torch.arange(1, 7, dtype=torch.float64) * math.pi / (2 * Cs)
    feat = lambda t: torch.cat([torch.cos(t[:, None] * f), torch.sin(t[:, None] * f)], -1)[None]
    orig = feat(torch.arange(4 * Cs, dtype=torch.float64))
    stuck = feat(torch.arange(2 * Cs, dtype=torch.float64).clamp(max=Cs - 1))   # stops changing at C
    assert float(effective_ratio(stuck, orig, Cs)[0]) > 100                     # beyond-window fit: no interpolation
    with pytest.raises(ValueError, match="at least 2 positions"): effective_ratio(orig[:, :Cs], orig, Cs)
