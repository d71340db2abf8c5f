"""Formula checks for posvec_lib.rope (config-only: no model weights, runs in well under a second)."""
import math

import pytest
import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from posvec_lib.rope import (METHODS, interpolated_max_positions, interpolation_parameters, ntk_scaled_base,
                             yarn_gamma, yarn_mscale)


def _inv_freq(method, s, Lc, d=128, b=10000.0):
    cfg = LlamaConfig(hidden_size=2 * d, num_attention_heads=2, num_hidden_layers=1, vocab_size=8,
                      max_position_embeddings=interpolated_max_positions(method, s, Lc))
    cfg.rope_parameters = interpolation_parameters(method, s, Lc, b, d)
    return ROPE_INIT_FUNCTIONS[cfg.rope_parameters["rope_type"]](cfg)


def _default(d=128, b=10000.0):
    return 1.0 / b ** (torch.arange(0, d, 2, dtype=torch.float64) / d)


def test_registered():
    assert {"ntk_static", "yarn_pose", "linear", "yarn", "dynamic"} <= set(ROPE_INIT_FUNCTIONS)


def test_ntk_base_paper_digest():
    # s=8, d=128, base=10000 -> base' ~ 82,685; the lowest frequency is divided by exactly s
    assert ntk_scaled_base(10000, 8, 128) == pytest.approx(82685, abs=1)
    inv, att = _inv_freq("ntk", 8, 2048)
    ref = 1.0 / ntk_scaled_base(10000.0, 8, 128) ** (torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    torch.testing.assert_close(inv.double(), ref, rtol=1e-6, atol=0)
    assert inv[-1].item() == pytest.approx(_default()[-1].item() / 8, rel=1e-5)
    assert inv[0].item() == 1.0 and att == 1.0


def test_linear_divides_by_factor():
    inv, att = _inv_freq("linear", 4, 2048)
    torch.testing.assert_close(inv.double(), _default() / 4, rtol=1e-6, atol=0)
    assert att == 1.0


@pytest.mark.parametrize("s", [2, 8, 16])
def test_yarn_upstream_and_pose(s):
    # upstream: linear blend of frequencies; PoSE: linear blend of wavelengths; same gamma, same mscale
    theta, g = _default(), yarn_gamma(128, 10000.0, 2048).double()
    up, a_up = _inv_freq("yarn", s, 2048)
    pose, a_pose = _inv_freq("yarn_pose", s, 2048)
    torch.testing.assert_close(up.double(), g * theta + (1 - g) * theta / s, rtol=1e-5, atol=0)
    torch.testing.assert_close(pose.double(), theta / (g + (1 - g) * s), rtol=1e-5, atol=0)
    assert a_up == pytest.approx(0.1 * math.log(s) + 1) and a_pose == pytest.approx(yarn_mscale(s))
    ramp = (g > 0) & (g < 1)
    assert ramp.any() and (pose[ramp] < up[ramp]).all()
    torch.testing.assert_close(pose[~ramp], up[~ramp])


def test_yarn_gamma_end_points():
    # frequencies with more than beta_fast=32 rotations in Lc are kept, fewer than beta_slow=1 fully interpolated
    d, b, Lc = 128, 10000.0, 2048
    g = yarn_gamma(d, b, Lc)
    r = Lc * _default(d, b) / (2 * math.pi)
    assert (g[r > 32] == 1).all() and (g[r < 1] == 0).all()


def test_errors():
    with pytest.raises(ValueError, match="'xpos'.*allowed"):
        interpolation_parameters("xpos", 2, 2048, 1e4, 128)
    for m in METHODS[1:]:
        with pytest.raises(ValueError, match="factor must be a number > 1"):
            interpolation_parameters(m, 1, 2048, 1e4, 128)
    assert interpolation_parameters("none", 1, 2048, 1e4, 128)["rope_type"] == "default"
