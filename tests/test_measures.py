"""Measures that can fail: the in-window share and the ablation position sets on known answers."""
import math

import numpy as np
import pytest
import torch

from posvec_lib.decompose import PositionalVectors
from posvec_lib.beyond import (in_window_share, share_interval, group_vectors, pooled,
                               relative_similarity, SHARE_IN_DISTRIBUTION)
from posvec_lib.null import untrained_copy
from posvec_lib.variants import tiny_model

C, T, D = 48, 144, 48


def _truth(seed=0):
    "A smooth in-window positional curve [C, D] (Fourier features of t/C, embedded at random)."
    g = torch.Generator().manual_seed(seed)
    f = torch.arange(1, 7, dtype=torch.float64) * math.pi / (2 * C)
    t = torch.arange(C, dtype=torch.float64)[:, None]
    return torch.cat([torch.cos(t * f), torch.sin(t * f)], -1) @ torch.randn(12, D, generator=g,
                                                                            dtype=torch.float64)


def _beyond(truth, kind, g):
    "True vectors at t ∈ [C, T): in-window ones at random positions, then moved by `kind`."
    src = truth[torch.randint(4, C, (T - C,), generator=g)]
    u = truth[4:].mean(0)
    spread = float((truth[4:] - u).norm(dim=-1).mean())
    Q = torch.linalg.qr(torch.randn(D, D, generator=g, dtype=torch.float64)).Q
    return dict(drawn=src, shifted=src + spread * Q[0], rotated=u + (src - u) @ Q,
                rescaled=u + 1.5 * (src - u), shrunk=u + 0.5 * (src - u))[kind]


def _sets(kind, noise, seed=0, n_groups=None):
    "(replicate, reference): one truth, independent noise; as groups when `n_groups` is given."
    g = torch.Generator().manual_seed(seed + 1)
    truth = _truth(seed)
    p = torch.cat([truth, _beyond(truth, kind, g)])[None]                    # [1, T, D]
    draw = lambda s: p + s * torch.randn(p.shape, generator=g, dtype=torch.float64)
    if n_groups is None: return draw(noise), draw(noise)
    one = lambda: PositionalVectors(draw(noise * n_groups ** 0.5), 1, torch.ones(1))
    grp = lambda: [one() for _ in range(n_groups)]
    return grp(), grp()


@pytest.mark.parametrize("noise", [0.02, 0.1, 0.4])
def test_drawn_from_the_window_reads_in_at_any_noise(noise):
    shares = [in_window_share(*_sets("drawn", noise, seed), C) for seed in range(5)]
    assert 0.85 <= np.mean(shares) <= 1.0 and min(shares) >= SHARE_IN_DISTRIBUTION


@pytest.mark.parametrize("kind", ["shifted", "rotated", "rescaled", "shrunk"])
def test_moved_sets_read_out(kind):
    assert in_window_share(*_sets(kind, 0.05), C) <= 0.1


def test_the_cosine_measure_cannot_see_a_rescaled_set():
    rep, ref = _sets("rescaled", 0.05)
    assert relative_similarity(rep, ref, C)["simi_rel"] > 0.95
    assert in_window_share(rep, ref, C) == 0.0


def test_bounded():
    for kind in ("drawn", "rescaled"):
        for seed in range(3):
            assert 0.0 <= in_window_share(*_sets(kind, 0.3, seed), C) <= 1.0


@pytest.mark.parametrize("kind, want", [("drawn", True), ("rescaled", False), ("rotated", False)])
def test_interval_and_verdict(kind, want):
    r = share_interval(*_sets(kind, 0.1, n_groups=16), C, n_resamples=199)
    assert r["in_distribution"] is want and r["lo"] <= r["share"] <= r["hi"]
    half = max(r["share"] - r["lo"], r["hi"] - r["share"])
    assert r["n_groups"] == [16, 16] and r["noise"] == pytest.approx(half)


def test_false_out_rate_on_drawn_sets_is_small():
    v = [share_interval(*_sets("drawn", 0.1, seed, n_groups=8), C, n_resamples=99)
         ["in_distribution"] for seed in range(20)]
    assert sum(x is False for x in v) == 0 and sum(x is True for x in v) >= 18


def test_untrained_window_model_reads_in_by_construction():
    "Reach 2·(8 − 1) + 1 = 15 ≤ C = 32: from t ≥ C its vectors are the stationary in-window ones."
    m = untrained_copy(tiny_model("nope", window=8, attn="posvec_sdpa", seed=0), 10_000)
    gen = lambda s: torch.Generator().manual_seed(s)
    xs = [torch.randint(3, 101, (32, 96), generator=gen(s)) for s in (1, 2)]
    r = share_interval(*(group_vectors(m, x, disk=False) for x in xs), 32, n_resamples=199)
    assert r["in_distribution"] is True, r


def test_groups_pool_to_the_whole_set():
    m = tiny_model("nope", attn="posvec_sdpa", seed=0)
    x = torch.randint(3, 101, (6, 40), generator=torch.Generator().manual_seed(0))
    from posvec_lib.decompose import positional_vectors
    torch.testing.assert_close(pooled(group_vectors(m, x, 3, disk=False)).p,
                               positional_vectors(m, x, progress=False).p)


@pytest.mark.parametrize("call, msg", [
    (lambda: in_window_share(torch.zeros(1, 40, 4), torch.zeros(1, 40, 4), 48), "beyond C=48"),
    (lambda: in_window_share(torch.zeros(1, 60, 4), torch.zeros(1, 60, 4), 48, start=47),
     "start < C"),
])
def test_refusals(call, msg):
    with pytest.raises(ValueError, match=msg): call()


def test_scored_tokens_lie_beyond_the_local_context_of_both_sets():
    "A window model with reach 2·(4 − 1) + 1 = 7 ≤ C/4: no removal at either set reaches a scored token."
    from posvec_lib.ablate import (position_sets, scored_positions, attention_input_vectors, ablate,
                                   removal_asymmetry)
    from posvec_lib.evaluate import token_nll
    m = tiny_model("nope", window=4, attn="posvec_sdpa", seed=0)
    X = torch.randint(3, 101, (8, 32), generator=torch.Generator().manual_seed(0))
    sets, ref = position_sets(32), attention_input_vectors(m, X)
    sc = scored_positions(32, sets)
    assert sc == range(17, 32) and list(sets) == ["0-4", "6-8"]
    base = token_nll(m, X)
    for removal in ("value", "positional_vector"):
        for pos in sets.values():
            with ablate(m, removal, pos, ref): x = token_nll(m, X)
            torch.testing.assert_close(x[:, sc.start - 1:], base[:, sc.start - 1:])
        with ablate(m, removal, sets["6-8"], ref):                     # over all tokens it is built in
            assert not torch.allclose(token_nll(m, X), base)
    a = removal_asymmetry(m, "value", sets, ref, X, scored=sc, n_resamples=99)
    assert abs(a["asymmetry"]) < 1e-6 and a["n_samples"] == 8
