"""Gemma-3-270M offline (a Q4_K_M GGUF assembled from PyPI chunk packages): it loads as Gemma3ForCausalLM with its
sliding / full layer layout, completes text, and `posvec inspect` reports Gu et al.'s sink rate per layer type."""
import json, subprocess, sys
import pytest
import torch

NAME = "gemma3-270m"


@pytest.fixture(scope="module")
def gguf():
    from posvec_lib.pretrained import PRETRAINED, model_source
    try: return model_source(NAME)["path"]
    except ModuleNotFoundError: pytest.skip(f"Gemma-3-270M is not installed: {PRETRAINED[NAME].install}")


@pytest.fixture(scope="module")
def gemma(gguf):
    from posvec_lib.pretrained import load_pretrained
    n = torch.get_num_threads(); torch.set_num_threads(2)
    yield load_pretrained(NAME)
    torch.set_num_threads(n)


def test_assembled_once_into_the_cache(gguf):
    from posvec_lib.pretrained import PRETRAINED, assembled_file
    from posvec_lib.storage import seal_check
    assert gguf.name == PRETRAINED[NAME].file and gguf.parent.name == "gemma3-270m-1.0.0"
    assert "site-packages" not in str(gguf) and seal_check(gguf) is True and gguf.stat().st_size > 250e6
    assert assembled_file(PRETRAINED[NAME]) == gguf


def test_loads_with_its_window_layout(gemma):
    "The config's own layer types (not assumed): five sliding-window layers of 512, then one full, three times."
    from posvec_lib.trace import layer_windows
    model, tok = gemma
    cfg = model.config
    assert type(model).__name__ == "Gemma3ForCausalLM" and next(model.parameters()).dtype == torch.float32
    assert (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (18, 4, 1)
    assert cfg.sliding_window == 512 and cfg.max_position_embeddings == 32768
    assert list(cfg.layer_types) == (["sliding_attention"] * 5 + ["full_attention"]) * 3
    assert layer_windows(cfg) == ([512] * 5 + [None]) * 3


def test_completes_sensibly(gemma):
    model, tok = gemma
    x = tok("The capital of France is Paris. The capital of Germany is", return_tensors="pt")
    with torch.no_grad(): out = model.generate(**x, max_new_tokens=3, do_sample=False)
    assert "Berlin" in tok.decode(out[0, x["input_ids"].shape[1]:])


def test_inspect_reports_the_sink_rate_by_layer_type(gguf, tmp_path):
    "`posvec inspect gemma3-270m`: the sink rate at ε = 0.3, its ε curve and the per-layer-type table, with the null."
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "posvec_lib.cli", "inspect", NAME, "--length", "64", "--samples", "4",
                        "--attention-samples", "2", "--threads", "2", "--out", str(out)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert (s["layers"], s["heads"], s["kv_heads"], s["model_class"]) == (18, 4, 1, "Gemma3ForCausalLM")
    sr = s["sink_rate"]
    assert (sr["eps"], sr["tokens"], sr["samples"]) == (0.3, 64, 4) and 0 <= sr["value"] <= 1
    assert len(sr["untrained"]) == 2 and len(sr["curve"]) == len(sr["curve_untrained"]) == 19
    types = {t["layer_type"]: t for t in s["by_layer_type"]}
    assert set(types) == {"sliding_attention", "full_attention"} and types["full_attention"]["layers"] == "6,12,18"
    assert {"sink_rate", "sink_rate_untrained", "sink_x_uniform_max_head_untrained"} <= set(types["full_attention"])
    md = (out / "inspect.md").read_text()
    assert "Sink rate (Gu et al. 2025" in md and "## By layer type" in md and "## Sink rate by threshold" in md
    assert {"sink_rate.csv", "by_layer_type.csv", "attention.png"} <= {p.name for p in out.iterdir()}
