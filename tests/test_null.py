"""The untrained null (posvec_lib.null): decisions on known answers; untrained copies of a model."""
import numpy as np
import pytest
import torch
from scipy import stats

from posvec_lib.null import (null_seeds, untrained_copy, null_values, null_interval, beyond_null,
                             null_row, threshold_and_null, check_values)
from posvec_lib.variants import tiny_model

NULL = [8.1, 8.4, 8.9]                       # e.g. untrained anchor ratios over three init seeds


@pytest.mark.parametrize("trained, direction, want", [
    (30.0, ">", True), (30.0, "<", False),   # far above the null
    (2.0, ">", False), (2.0, "<", True),     # far below
    (8.6, ">", None), (8.6, "<", None),      # inside the noise: not measurable
])
def test_known_answers(trained, direction, want):
    assert beyond_null(trained, 0.2, NULL, direction) is want


def test_interval_is_the_t_prediction_interval():
    v, noise = np.array(NULL), 0.3
    n, sd = len(v), v.std(ddof=1)
    # the null's 95% prediction half-width and the trained 95% half-width, in quadrature
    half = np.hypot(stats.t.ppf(0.975, n - 1) * sd * np.sqrt(1 + 1 / n), noise)
    iv = null_interval(noise, v)
    assert iv["df"] == 2 and iv["n_seeds"] == 3
    np.testing.assert_allclose([iv["null_lo"], iv["null_hi"]], [v.mean() - half, v.mean() + half])
    assert beyond_null(v.mean() + 1.01 * half, noise, v) is True
    assert beyond_null(v.mean() + 0.99 * half, noise, v) is None


def test_trained_noise_widens_never_narrows():
    assert beyond_null(12.0, 0.0, NULL) is True and beyond_null(12.0, 3.0, NULL) is None
    widths = [null_interval(x, NULL)["null_hi"] for x in (0.0, 0.1, 1.0, 3.0)]
    assert widths == sorted(widths)


def test_false_decisions_at_five_percent_when_nothing_is_learned():
    g = np.random.default_rng(1)
    v = [beyond_null(g.normal(), 0.0, g.normal(size=3)) for _ in range(3000)]
    assert 0.035 < np.mean([x is not None for x in v]) < 0.065


@pytest.mark.parametrize("call, msg", [
    (lambda: beyond_null(1.0, 0.1, NULL, ">="), "unknown direction"),
    (lambda: beyond_null(float("nan"), 0.1, NULL), "not finite"),
    (lambda: null_interval(0.1, [1.0]), "≥ 2 finite"),
    (lambda: null_interval(float("inf"), NULL), "≥ 0"),
    (lambda: null_seeds(1), "≥ 2"),
])
def test_refusals(call, msg):
    with pytest.raises(ValueError, match=msg): call()


def test_untrained_copy_is_the_architecture_at_init():
    m = tiny_model("rope", window=4, attn="posvec_sdpa", seed=7)
    same, other = untrained_copy(m, 7), untrained_copy(m, 8)
    a, b, c = (list(x.state_dict().values()) for x in (m, same, other))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, c))
    assert other.config.posvec_window == 4 and not other.training


def test_null_values_stack_over_seeds():
    m = tiny_model("nope", attn="posvec_sdpa")
    x = torch.randint(3, 101, (4, 12)); x[:, 0] = 0
    first = lambda mdl, s: mdl(s).logits[0, 0, :2].detach()
    v = null_values(first, m, x, null_seeds(2))
    assert v.shape == (2, 2) and not np.allclose(v[0], v[1])
    d = null_values(lambda mdl, s: dict(a=1.0, b=[1, 2]), m, x, (0, 1))
    assert d["a"].shape == (2,) and d["b"].shape == (2, 2)
    r = null_row(4.2, 0.3, NULL, measure="anchor ratio", layer=1)
    assert r["beyond_null"] is False and r["measure"] == "anchor ratio"


def test_threshold_and_null_both_required():
    rows = [null_row(30.0, 0.2, NULL, variant="a"), null_row(4.2, 0.3, NULL, variant="b"),
            null_row(8.6, 0.2, NULL, variant="c"),
            null_row(1.0, 0.1, [0.1, 0.2, 0.15], variant="d")]
    assert threshold_and_null(rows, 2.0) == [True, False, None, False]
    assert threshold_and_null(rows, [2.0, 2.0, 2.0, 0.5]) == [True, False, None, True]
    v = check_values(rows)
    assert v["beyond_null"] == {"a": True, "b": False, "c": None, "d": True}
    assert v["n_null_seeds"] == 3
