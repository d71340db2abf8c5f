"""`posvec inspect` on one tiny random-init model per family of the adapter table (trace.ADAPTERS),
saved with save_pretrained: each runs or is refused before its weights are read, and sliding windows
are measured under their real masks."""
import json, textwrap
from pathlib import Path
import pytest
import torch

COMMON = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, max_position_embeddings=128, bos_token_id=0, eos_token_id=1,
              pad_token_id=2)
GQA, HEAD16 = dict(num_key_value_heads=2), dict(num_key_value_heads=2, head_dim=16)
HYBRID = ["sliding_attention", "full_attention"]
FAMILIES = {   # model_type: (config overrides, class, sliding window per layer, ablation measured)
    "llama": (GQA, "LlamaForCausalLM", [None, None], True),
    "mistral": (dict(GQA, sliding_window=32), "MistralForCausalLM", [32, 32], True),
    "qwen2": (dict(GQA, use_sliding_window=True, sliding_window=16, max_window_layers=1),
              "Qwen2ForCausalLM", [None, 16], True),
    "qwen3": (HEAD16, "Qwen3ForCausalLM", [None, None], True),
    "gemma": (dict(num_key_value_heads=1, head_dim=16), "GemmaForCausalLM", [None, None], True),
    "gemma2": (dict(HEAD16, sliding_window=16), "Gemma2ForCausalLM", [16, None], True),
    "gemma3_text": (dict(HEAD16, sliding_window=16, layer_types=HYBRID), "Gemma3ForCausalLM",
                    [16, None], True),
    "phi3": (GQA, "Phi3ForCausalLM", [None, None], False),
    "gpt2": (dict(n_embd=64, n_layer=2, n_head=4, n_positions=128, vocab_size=512, bos_token_id=0,
                  eos_token_id=1), "GPT2LMHeadModel", [None, None], False),
    "gpt_neox": (dict(rotary_pct=0.25), "GPTNeoXForCausalLM", [None, None], False),
}


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    "Paragraphs of Python source (no blank lines inside), enough for 8 windows of 64 tokens."
    src = Path(textwrap.__file__).read_text().replace("\n\n", "\n").splitlines()
    f = tmp_path_factory.mktemp("text") / "text.txt"
    f.write_text("\n\n".join("\n".join(src[i:i + 60]) for i in range(0, len(src) - 60, 60)))
    return f


def _folder(tmp_path, mt):
    "A tiny random-init model of family `mt` with the smoke tokenizer, written by save_pretrained."
    import shutil
    from transformers import AutoConfig, AutoModelForCausalLM
    from posvec_lib.pretrained import tiny_local_model
    kw, *_ = FAMILIES[mt]
    torch.manual_seed(0)
    cfg = AutoConfig.for_model(mt, **(kw if mt == "gpt2" else dict(COMMON, **kw)))
    d = tmp_path / mt
    AutoModelForCausalLM.from_config(cfg).save_pretrained(d)
    for f in ("tokenizer.json", "tokenizer_config.json"): shutil.copy(tiny_local_model() / f, d / f)
    return d


def _posvec(capsys, *args):
    from posvec_lib.cli import main
    capsys.readouterr()                         # what building the model printed is not the answer
    rc = main(["inspect", *args]); cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.mark.parametrize("mt", list(FAMILIES))
def test_inspect_family(mt, tmp_path, text_file, capsys, one_thread):
    "Each family: exit 0, --json; its class, windows, real masks and (fused q/k/v) no ablation."
    _, cls, windows, ablation = FAMILIES[mt]
    d, out = _folder(tmp_path, mt), tmp_path / "out"
    rc, so, se = _posvec(capsys, str(d), "--text", str(text_file), "--length", "64", "--samples",
                         "8", "--attention-samples", "4", "--baseline-seeds", "2", "--device",
                         "cpu", "--json", "--output-path", str(out))
    assert rc == 0, se[-3000:]
    s = json.loads(so)
    assert (s["model_class"], s["layers"], s["sliding_windows"]) == (cls, 2, windows)
    assert s["untrained"]["seeds"] == [0, 1] and s["device"] == "cpu"
    assert (s["basis_initial_ppl_ratio"] is not None) == ablation
    if not ablation: assert "fused" in s["ablation_refused"]
    md = (out / "inspect.md").read_text()
    assert f"context window 128 positions" in md
    if windows == [32, 32]: assert "sliding window 32 in every layer" in md
    from posvec_lib.pretrained import load_pretrained
    from posvec_lib.attention import mean_attention
    from posvec_lib.trace import attention_masks
    m, _ = load_pretrained(d)
    A = mean_attention(m, torch.randint(3, 512, (1, 64)), progress=False)         # [L, H, T, T]
    assert torch.equal(A[:, 0] > 0, attention_masks(m.config, 64))   # the mask the baseline assumes


def test_unsupported_family_refused_before_weights(tmp_path, capsys):
    "No adapter: one line naming class, measure and supported types; the (garbage) weights unread."
    from transformers import BertConfig
    d = tmp_path / "bert"; d.mkdir()
    BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=64, is_decoder=True).save_pretrained(d)
    (d / "pytorch_model.bin").write_bytes(b"not a pickle")
    rc, _, se = _posvec(capsys, str(d), "--length", "32", "--samples", "4")
    assert rc == 2 and "BertLMHeadModel does not support positional_vectors" in se, se
    assert "supported model types: llama" in se
    assert "pickle" not in se.lower()


def test_window_too_small_for_a_sink(tmp_path, text_file, capsys, one_thread):
    "Window 4 ≤ skip: no measured query sees token 0, so the sink is 'n/a' (null), not a crash."
    import shutil
    from transformers import AutoConfig, AutoModelForCausalLM
    from posvec_lib.pretrained import tiny_local_model
    d, cfg = tmp_path / "w4", AutoConfig.for_model("mistral", **COMMON, **GQA, sliding_window=4)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(d)
    for f in ("tokenizer.json", "tokenizer_config.json"): shutil.copy(tiny_local_model() / f, d / f)
    rc, so, se = _posvec(capsys, str(d), "--text", str(text_file), "--length", "32", "--samples",
                         "4", "--baseline-seeds", "0", "--json", "--out", str(tmp_path / "out"))
    assert rc == 0, se[-3000:]
    s = json.loads(so)
    assert s["strongest_sink"]["sink_x_uniform"] is None and s["sliding_windows"] == [4, 4]
    assert "puts n/a of its attention" in (tmp_path / "out" / "inspect.md").read_text()


def test_inspect_refuses_sizes_and_kinds_before_loading(tmp_path, text_file, capsys):
    "Sizes the machine cannot hold and a folder given as --text are refused before the model loads."
    rc, so, se = _posvec(capsys, "tiny-local", "--samples", "100000000", "--length", "32")
    assert rc == 2 and "(token ids alone) needs ~" in se and "this machine has" in se, se
    rc, so, se = _posvec(capsys, "tiny-local", "--text", str(tmp_path))
    assert rc == 2 and "is a folder; give a text file" in se, se


def test_pickled_weights_with_code_are_refused_in_one_line(tmp_path, capsys):
    "A pytorch_model.bin whose pickle would run code: torch refuses it, and posvec says so in one line."
    import pickle
    d = _folder(tmp_path, "llama"); (d / "model.safetensors").unlink()
    class Evil:
        def __reduce__(self): return (open, (str(tmp_path / "PWNED"), "w"))
    (d / "pytorch_model.bin").write_bytes(pickle.dumps(Evil()))
    rc, so, se = _posvec(capsys, str(d), "--length", "32", "--samples", "4", "--baseline-seeds", "0")
    assert rc == 2 and "a pickle that torch refuses to load safely" in se and se.count("\n") == 1, se
    assert not (tmp_path / "PWNED").exists()


def test_inspect_names_a_missing_tokenizer_and_an_unwritable_output(tmp_path, capsys):
    d = _folder(tmp_path, "llama")
    for f in ("tokenizer.json", "tokenizer_config.json"): (d / f).unlink()
    rc, so, se = _posvec(capsys, str(d), "--length", "32", "--samples", "4", "--baseline-seeds", "0")
    assert rc == 2 and "no tokenizer posvec can load" in se and "Loading weights" not in se, se
    blocker = tmp_path / "file"; blocker.write_text("")
    rc, so, se = _posvec(capsys, "tiny-local", "--out", str(blocker / "sub"))
    assert rc == 2 and "is a file where a folder belongs" in se, se
