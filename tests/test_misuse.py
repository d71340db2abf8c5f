"""Library misuse is refused with a clear message (not NaN, a silent no-op or a raw IndexError/AttributeError); seconds."""
import re

import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaForCausalLM

from posvec_lib.attention import mean_attention
from posvec_lib.config import get_profile
from posvec_lib.decompose import positional_vectors
from posvec_lib.evaluate import ppl_by_position
from posvec_lib.extend import EXTENSIONS, IDENTITY_SETTINGS, extend
from posvec_lib.tuning import ppl_of
from posvec_lib.pose import SAMPLERS, pose_sample_chunks
from posvec_lib.trace import active_extensions, as_token_batch, run_with_cache, run_with_hooks
from posvec_lib.variants import Variant, apply_variant, model_config, tiny_model

V, T = 101, 12
SHAPE = re.escape("must be integer token ids of shape [batch, T] or [T]")


pytestmark = pytest.mark.usefixtures("one_thread")   # conftest: tiny models run on one thread


@pytest.fixture(scope="module")
def model():
    return tiny_model("rope", vocab_size=V)


@pytest.fixture(scope="module")
def x():
    return torch.randint(3, V, (3, T), generator=torch.Generator().manual_seed(1))


def tiny_gpt2():
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, bos_token_id=0, eos_token_id=0))


def test_zero_samples_refused(model, x):
    "Case 1: 0 samples gave NaN positional vectors (and a KeyError in mean_attention)."
    for f in (positional_vectors, mean_attention):
        with pytest.raises(ValueError, match=re.escape("at least 1 sample is needed (shape [N, T], N ≥ 1)")):
            f(model, x[:0], progress=False)


def test_token_id_inputs_checked(model, x):
    "Case 2: 1-D ids, numpy arrays and lists are accepted; floats, 0-d, empty T and ≥3-D are refused with the shape."
    assert as_token_batch(x) is x                                          # valid input passes untouched
    entry = {"positional_vectors": lambda ids: positional_vectors(model, ids, progress=False).p,
             "mean_attention": lambda ids: mean_attention(model, ids, progress=False),
             "run_with_cache": lambda ids: run_with_cache(model, ids)[0].logits,
             "run_with_hooks": lambda ids: run_with_hooks(model, ids, {}).logits,
             "ppl_by_position": lambda ids: torch.as_tensor(ppl_by_position(model, ids, bucket=4)["per_position_nll"]),
             "ppl_of": lambda ids: torch.tensor(ppl_of(model, ids))}
    for name, f in entry.items():
        ref1, ref = f(x[:1]), f(x)
        assert torch.equal(f(x[0]), ref1), name                             # one sequence [T] = a batch of 1
        assert torch.equal(f(x.numpy()), ref) and torch.equal(f(x.tolist()), ref), name
        with pytest.raises(TypeError, match=SHAPE + re.escape("; got a tensor of shape (3, 12), dtype float32")):
            f(x.float())
        with pytest.raises(ValueError, match=SHAPE + re.escape("; got a tensor of shape (1, 3, 12), dtype int64 (3-D)")):
            f(x[None])
        with pytest.raises(ValueError, match=SHAPE + re.escape("; got a tensor of shape (), dtype int64 (0-D)")):
            f(x[0, 0])
        with pytest.raises(ValueError, match=SHAPE + re.escape(" with T ≥ 1; got a tensor of shape (3, 0)")):
            f(x[:, :0])
    with pytest.raises(TypeError, match="not a rectangular array of ints"):
        as_token_batch([[1, 2], [3]])


def test_extension_needs_a_supported_model():
    "Case 3: attention_scaling on a GPT-2 returned an active change that changed nothing; every method now checks."
    g = tiny_gpt2()
    settings = {"attention_scaling": dict(lam=3), "initial_scaling": dict(s=2), "window_extension": dict(r=2),
                "dynamic_ntk": dict(factor=2), "replacement": dict(pv=torch.zeros(2, 16, 32), layer=0, r=2)}
    assert set(settings) == set(EXTENSIONS) - {"direct"}
    for method, kw in settings.items():
        for setting in (kw, {**kw, **IDENTITY_SETTINGS[method]}):         # refused also at the identity setting
            with pytest.raises(TypeError, match=re.escape(f"extension {method!r} cannot be applied to GPT2LMHeadModel")
                               + ".*" + re.escape("supported: Llama-family causal LMs (LlamaForCausalLM, MistralForCausalLM")):
                extend(g, method, **setting)
    assert active_extensions(g) == () and not hasattr(g.config, "posvec_logit_scale")
    extend(g, "direct").restore()                                          # direct extrapolation needs nothing
    plain = LlamaForCausalLM(model_config(get_profile("smoke"), Variant("r", "rope"), V)); plain.set_attn_implementation("sdpa")
    with pytest.raises(ValueError, match=r"cannot be applied to LlamaForCausalLM with attention 'sdpa'.*posvec_sdpa"):
        extend(plain, "attention_scaling", lam=3)


def test_apply_variant_needs_a_llama_family_config():
    "Case 4: apply_variant(GPT2Config(), v) gave AttributeError: rope_parameters."
    cfg = GPT2Config()
    with pytest.raises(TypeError, match=re.escape("cannot be applied to a GPT2Config (model_type 'gpt2')") + ".*"
                       + re.escape("supported: Llama-family configs (LlamaConfig, MistralConfig, Qwen2Config)")):
        apply_variant(cfg, Variant("r", "rope"))
    assert not hasattr(cfg, "posvec_variant")                              # refused before anything was set


def test_pose_windows_must_be_positive_integers():
    "Case 5: Lc=32.5 / Lc='32' gave raw TypeErrors (or, for bool / float Lt, a silently odd sample)."
    rng = np.random.default_rng(0)
    bad = [(32.5, 64, "original window Lc", "32.5 (float)"), ("32", 64, "original window Lc", "'32' (str)"),
           (True, 64, "original window Lc", "True (bool)"), (32, 64.0, "target window Lt", "64.0 (float)")]
    for name, sampler in SAMPLERS.items():
        for Lc, Lt, what, got in bad:
            with pytest.raises(TypeError, match=re.escape(f"{what} must be a positive integer (an int ≥ 1; not a bool, "
                                                          f"float or str), got {got}")):
                sampler(500, Lc, Lt, rng)
        sampler(500, np.int64(32), np.int64(64), rng)                      # numpy integers are integers
    for n in (2.0, True):
        with pytest.raises(TypeError, match=r"n_chunks must be a positive integer .*got " + re.escape(repr(n))):
            pose_sample_chunks(500, 32, 64, rng, n_chunks=n)


@pytest.mark.parametrize("call", ["token_nll", "positional_vectors", "mean_attention"])
@pytest.mark.parametrize("batch_size", [0, -2, 2.5, "8"])
def test_batch_size_checked(model, x, call, batch_size):
    "A batch size of 0 gave range()'s own message, a negative one torch.cat()'s."
    from posvec_lib.evaluate import token_nll
    f = dict(token_nll=token_nll, positional_vectors=positional_vectors, mean_attention=mean_attention)[call]
    with pytest.raises(ValueError, match=re.escape(f"batch_size={batch_size!r}; allowed: an integer ≥ 1")):
        f(model, x, batch_size=batch_size)


@pytest.mark.parametrize("shift,bad", [(V, "outside the model's vocabulary; allowed: 0..100"), (-V, "holds token id -")])
def test_token_ids_outside_the_vocabulary(model, x, shift, bad):
    "Ids outside the embedding table gave an IndexError deep in torch (and would give garbage on a GPU)."
    from posvec_lib.evaluate import token_nll
    for f in (token_nll, positional_vectors, mean_attention):
        with pytest.raises(ValueError, match=re.escape(bad)): f(model, x + shift)


@pytest.mark.parametrize("n_initial,needle", [(0, "n_initial=0; allowed: an integer ≥ 1"),
                                              (200, "n_initial=200 leaves no later positions"),
                                              (2.0, "n_initial=2.0; allowed: an integer ≥ 1")])
def test_position_sets_that_cannot_compare(n_initial, needle):
    "An empty initial set made the ablation ratio NaN; a later set past C made it compare nothing."
    from posvec_lib.ablate import position_sets
    with pytest.raises(ValueError, match=re.escape(needle)): position_sets(128, n_initial)
    assert position_sets(128, 126) == {"0-125": range(0, 126), "127-127": range(127, 128)}


@pytest.mark.parametrize("factor", ["8", None, True, float("nan"), 1])
def test_interpolation_factor_checked(model, factor):
    from posvec_lib.rope import apply_interpolation
    with pytest.raises(ValueError, match="factor must be a number"): apply_interpolation(model, "linear", factor)
    assert not active_extensions(model)


def test_restored_switch_refuses_to_be_used_again(model, x):
    "A switch used in a `with` block after restore() silently ran the original model."
    from posvec_lib.rope import apply_interpolation
    sw = apply_interpolation(model, "linear", 2.0)
    with sw: assert active_extensions(model)
    with pytest.raises(RuntimeError, match="was restored and does not apply itself again"):
        with sw: pass
    assert not active_extensions(model) and sw.restore() is model


def test_sliding_window_ppl_checks_the_vocabulary(model):
    from posvec_lib.evaluate import sliding_window_ppl
    with pytest.raises(ValueError, match=re.escape("outside the model's vocabulary; allowed: 0..100")):
        sliding_window_ppl(model, [[500] * 40], 16, 8, 1, progress=False)
    with pytest.raises(ValueError, match="holds token id 1000"):
        sliding_window_ppl(model, [[5] * 40], 16, 8, 1000, progress=False)


@pytest.mark.parametrize("n_initial", [0, -2, 100, 2.0])
def test_anchor_ratio_initial_count_checked(model, x, n_initial):
    "n_initial of 0 or beyond T gave NaN, a negative one meaningless numbers."
    from posvec_lib.decompose import anchor_ratio
    pv = positional_vectors(model, x, progress=False)
    with pytest.raises(ValueError, match=re.escape(f"n_initial={n_initial!r}; allowed: an integer from 2 to {T - 2}")):
        anchor_ratio(pv, n_initial)


def test_position_ids_of_another_shape_refused(model, x):
    from posvec_lib.evaluate import token_nll
    with pytest.raises(ValueError, match=re.escape("position_ids of shape (5,); allowed: the shape of ids")):
        token_nll(model, x, position_ids=torch.arange(5))


def test_position_sets_need_an_integer_window():
    from posvec_lib.ablate import position_sets
    with pytest.raises(ValueError, match=re.escape("C='32'; allowed: an integer ≥ 4")): position_sets("32")


def test_documents_with_broken_offsets_refused():
    from posvec_lib.data import TokenizedDocs
    for offsets in ([0, 300], [0, 10, 5, 200], [1, 200]):
        with pytest.raises(ValueError, match="offsets must rise from 0 to len"):
            TokenizedDocs(np.arange(200, dtype=np.int32), np.array(offsets), 0)


def test_sample_windows_beyond_memory_refused():
    from posvec_lib.data import TokenizedDocs, fixed_length_samples
    docs = TokenizedDocs(np.arange(200, dtype=np.int32), np.array([0, 200]), 0)
    with pytest.raises(ValueError, match="windows of 32 tokens needs ~"): fixed_length_samples(docs, 32, 10**11)


def test_unknown_extension_setting_lists_the_allowed_ones(model):
    with pytest.raises(ValueError, match=re.escape("unknown setting(s) ['wibble'] for 'dynamic_ntk'; allowed:")):
        extend(model, "dynamic_ntk", wibble=3)


def test_finetune_spec_chunk_count_checked():
    from posvec_lib.finetune import FinetuneSpec
    with pytest.raises(ValueError, match=re.escape("n_chunks=0; allowed: an integer ≥ 1")):
        FinetuneSpec("chunks", 8, n_chunks=0)


def test_non_finite_model_and_positions_named(x):
    "A model with NaN weights gave NaN positional vectors without a word; NaN positions NaN losses."
    from posvec_lib.evaluate import token_nll
    bad = tiny_model("rope", vocab_size=V)
    with torch.no_grad(): bad.model.layers[0].mlp.down_proj.weight.fill_(float("nan"))
    with pytest.raises(ValueError, match="hidden states are not finite"): positional_vectors(bad, x, progress=False)
    with pytest.raises(ValueError, match="position_ids of dtype torch.float32; allowed: integer positions"):
        token_nll(tiny_model("rope", vocab_size=V), x, position_ids=torch.full(x.shape, float("nan")))


def test_chunk_count_outside_chunks_refused():
    "coverage_probability ignored n_chunks for every method but 'chunks' and returned the same curve."
    from posvec_lib.pose import coverage_probability
    with pytest.raises(ValueError, match="n_chunks=0 applies to method 'chunks' only"):
        coverage_probability(8, 32, "pose", n_chunks=0, iterations=10)


def test_non_finite_logits_named(x):
    from posvec_lib.evaluate import token_nll
    bad = tiny_model("rope", vocab_size=V)
    with torch.no_grad(): bad.lm_head.weight.fill_(float("nan"))
    with pytest.raises(ValueError, match="logits are not finite"): token_nll(bad, x)
