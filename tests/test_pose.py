"""Property-based invariants of the PoSE samplers (posvec_lib.pose); runs in a few seconds."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

from posvec_lib.pose import (pose_sample, pose_sample_chunks, randpos_sample, full_length_sample, coverage_probability,
                             covered_distances, chunk_lengths, skip_offsets, CONTENTS, ANCHORS, OFFSETS)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BOS = 10_000  # a token id that never occurs in the texts below


@st.composite
def windows(draw, max_Lc=48):
    "(Lc, Lt, extra text length, seed) with 1 ≤ Lc < Lt."
    Lc = draw(st.integers(1, max_Lc))
    Lt = draw(st.integers(Lc + 1, 10 * Lc + 4))
    return Lc, Lt, draw(st.integers(0, 6 * Lc)), draw(st.integers(0, 2**32 - 1))


def runs(s):
    "Number of maximal runs that are contiguous both in the text (ids = source indices) and in positions."
    both = (np.diff(s.input_ids) == 1) & (np.diff(s.position_ids) == 1)
    return 1 + int((~both).sum())


def check_common(s, Lc, Lt, n_max):
    ids, pos = s.input_ids, s.position_ids
    assert len(ids) == len(pos) == Lc
    assert pos.dtype == np.int64 and ids.dtype == np.int64
    assert (np.diff(pos) > 0).all(), "position ids strictly increasing"
    assert pos.min() >= 0 and pos.max() <= Lt - 1, "positions in 0..Lt-1"
    assert (np.diff(ids[1:]) > 0).all(), "chunks are disjoint and in text order"
    assert runs(s) <= n_max, "each chunk is contiguous in the text and in positions"


@FAST
@given(windows())
def test_pose_sample_invariants(w):
    Lc, Lt, extra, seed = w
    text = np.arange(Lc + extra)                      # ids = source indices
    s = pose_sample(text, Lc, Lt, np.random.default_rng(seed), bos=BOS)
    check_common(s._replace(input_ids=np.concatenate([[-1], s.input_ids[1:]])), Lc, Lt, 2)
    assert s.input_ids[0] == BOS and s.position_ids[0] == 0, "BOS first, at position 0 (u_0 = 0)"
    assert (s.input_ids[1:] < 5 * Lc - 1).all(), "text cut to 5·Lc tokens (BOS included)"
    s2 = pose_sample(text, Lc, Lt, np.random.default_rng(seed), bos=BOS)
    assert all((a == b).all() for a, b in zip(s, s2)), "deterministic for a fixed seed"


@FAST
@given(windows(), st.integers(1, 8), st.sampled_from(CONTENTS), st.sampled_from(ANCHORS), st.sampled_from(OFFSETS))
def test_pose_sample_chunks_invariants(w, n, content, anchor, offsets):
    Lc, Lt, extra, seed = w
    n = min(n, Lc)
    text = np.arange(max(Lt, Lc + extra))
    s = pose_sample_chunks(text, Lc, Lt, np.random.default_rng(seed), n, content, anchor, offsets)
    check_common(s, Lc, Lt, n)
    assert s.input_ids[0] == 0, "chunk 0 starts at the first token (BOS)"
    if anchor == "start": assert s.position_ids[0] == 0
    else: assert s.position_ids[-1] == Lt - 1, "anchor 'end': last chunk ends at Lt-1"
    if content == "zero": assert (s.input_ids == np.arange(Lc)).all()
    if content == "same" and anchor == "start": assert (s.input_ids == s.position_ids).all()
    s2 = pose_sample_chunks(text, Lc, Lt, np.random.default_rng(seed), n, content, anchor, offsets)
    assert all((a == b).all() for a, b in zip(s, s2))


@FAST
@given(windows())
def test_n1_is_original_and_baselines(w):
    Lc, Lt, extra, seed = w
    rng = np.random.default_rng(seed)
    s = pose_sample_chunks(Lc + extra, Lc, Lt, rng, n_chunks=1)
    assert (s.input_ids == np.arange(Lc)).all() and (s.position_ids == np.arange(Lc)).all()
    r = randpos_sample(Lc + extra, Lc, Lt, rng)
    check_common(r, Lc, Lt, Lc)
    assert (r.input_ids == np.arange(Lc)).all()
    f = full_length_sample(Lt + extra, Lc, Lt)
    assert (f.position_ids == np.arange(Lt)).all() and (f.input_ids == np.arange(Lt)).all()


@FAST
@given(st.integers(1, 64), st.integers(1, 64), st.integers(0, 2**32 - 1))
def test_chunk_lengths(Lc, n, seed):
    n = min(n, Lc)
    l = chunk_lengths(Lc, n, np.random.default_rng(seed))
    assert len(l) == n and l.sum() == Lc and (l >= 1).all()


@FAST
@given(windows(), st.integers(1, 8), st.sampled_from(ANCHORS), st.sampled_from(OFFSETS))
def test_skip_offsets(w, n, anchor, offsets):
    Lc, Lt, _, seed = w
    n = min(n, Lc)
    u = skip_offsets(Lc, Lt, n, np.random.default_rng(seed), anchor, offsets)
    assert len(u) == n and (np.diff(u) >= 0).all() and u.min() >= 0 and u.max() <= Lt - Lc


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=12, unique=True))
def test_covered_distances_brute_force(p):
    p = np.sort(p)
    d = np.subtract.outer(p, p)
    assert set(np.nonzero(covered_distances(p[None], 41)[0])[0]) == set(d[d >= 0].tolist())


@pytest.mark.parametrize("call, msg", [
    (lambda r: pose_sample(100, 16, 16, r), "Lt=16"),
    (lambda r: pose_sample(100, 16, 8, r), "allowed: Lt ≥ 17"),
    (lambda r: pose_sample(10, 16, 64, r), "text has 10 tokens"),
    (lambda r: pose_sample_chunks(100, 16, 64, r, n_chunks=17), "n_chunks=17"),
    (lambda r: pose_sample_chunks(100, 16, 64, r, n_chunks=0), "allowed: 1..Lc=16"),
    (lambda r: pose_sample_chunks(40, 16, 64, r, content="same"), "needs at least 64"),
    (lambda r: pose_sample_chunks(100, 16, 64, r, content="rand"), "unknown content 'rand'"),
    (lambda r: pose_sample_chunks(100, 16, 64, r, anchor="mid"), "unknown anchor 'mid'"),
    (lambda r: randpos_sample(8, 16, 64, r), "text has 8 tokens"),
    (lambda r: full_length_sample(50, 16, 64, r), "needs at least 64"),
    (lambda r: coverage_probability(16, 64, "foo", rng=r), "unknown method 'foo'"),
])
def test_errors_name_value_and_range(call, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        call(np.random.default_rng(0))


def test_coverage_two_chunks_flat_near_one_over_s_minus_1():
    c = coverage_probability(16, 128, "pose", iterations=3000, rng=np.random.default_rng(0))
    assert (c[:8] == 1).all()
    assert abs(c[16:113].mean() - 15 / 113) < 0.02
