"""The offline pretrained model (SmolLM2-135M GGUF from PyPI) and `posvec inspect` on a GGUF file, a registry name and local folders."""
import json, subprocess, sys
from pathlib import Path
import pytest
import torch

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _inspect(venv_bin, tmp_path, *args):
    out = tmp_path / "out"
    r = subprocess.run([str(venv_bin / "posvec"), "inspect", *args, "--out", str(out)], capture_output=True, text=True, cwd=tmp_path)
    return r, out


def test_registry_finds_the_offline_gguf():
    from posvec_lib.pretrained import model_source, PRETRAINED, package_file
    src = model_source("smollm2-135m")
    assert src["kind"] == "gguf" and src["path"].name == GGUF and src["path"].stat().st_size > 90e6
    e = PRETRAINED["smollm2-135m"]
    assert package_file(e.package, e.file, e.version) == src["path"]
    assert model_source(str(src["path"]))["path"] == src["path"]                       # the file itself
    with pytest.raises(ConnectionError, match="offline"): model_source("HuggingFaceTB/SmolLM2-135M")
    with pytest.raises(FileNotFoundError, match="does not exist"): model_source("./nope.gguf")


def test_inspect_gguf_file(venv_bin, tmp_path):
    "The real GGUF through the command, by file path: dequantized Llama, GQA, its window, sinks measured."
    from posvec_lib.pretrained import model_source
    path = model_source("smollm2-135m")["path"]
    r, out = _inspect(venv_bin, tmp_path, str(path), "--length", "48", "--samples", "4", "--attention-samples", "2", "--threads", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert (s["layers"], s["heads"], s["kv_heads"], s["window"]) == (30, 9, 3, 8192)
    assert s["strongest_sink"]["sink_x_uniform"] > 1 and 0 < s["strongest_sink"]["sink_share"] <= 1
    assert {"pca.png", "attention.png", "per_layer.csv", "sinks.csv", "ablation.csv", "inspect.md"} <= {p.name for p in out.iterdir()}


def test_load_by_registry_name_is_the_real_model():
    "load_pretrained by registry name: the 4-bit model dequantized to float32 predicts text (low PPL on stdlib code)."
    from posvec_lib.pretrained import load_pretrained, model_docs, uses_bos
    from posvec_lib.data import fixed_length_samples
    from posvec_lib.evaluate import token_nll
    torch.set_num_threads(2)
    model, tok = load_pretrained("smollm2-135m")
    assert type(model).__name__ == "LlamaForCausalLM" and next(model.parameters()).dtype == torch.float32
    assert model.config.num_key_value_heads == 3 and model.config.rope_parameters["rope_theta"] == 100000.0
    assert not uses_bos(tok)                                                           # SmolLM2 adds no BOS
    X = fixed_length_samples(model_docs(tok, max_files=60), 64, 4, seed=0, bos=False)
    ppl = float(token_nll(model, X, batch_size=4).mean().exp())
    assert ppl < 100, ppl             # 64-token windows of stdlib code: ~28 measured; uniform guessing over the 49,152-token vocabulary: 49,152


def test_inspect_tiny_local_and_a_folder(venv_bin, tmp_path):
    "The tiny stand-in by registry name, then the same model as a plain save_pretrained folder."
    from posvec_lib.pretrained import tiny_local_model
    r, out = _inspect(venv_bin, tmp_path, "tiny-local", "--length", "32", "--samples", "3", "--attention-samples", "2", "--layers", "0,1")
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((out / "summary.json").read_text())["layers"] == 2
    r, out = _inspect(venv_bin, tmp_path, str(tiny_local_model()), "--length", "32", "--samples", "3")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Strongest attention sink" in (out / "inspect.md").read_text()


@pytest.mark.parametrize("args, msg", [
    (["tiny-local", "--length", "5"], "--length 5 is too short"),
    (["tiny-local", "--samples", "1"], "--samples 1 is too few"),
    (["tiny-local", "--layers", "7"], "layers [7] out of range"),
    (["no/such-model"], "hub is offline"),
    (["./missing-folder"], "does not exist"),
    (["tiny-local", "--text", "missing.txt"], "does not exist"),
])
def test_inspect_refuses_bad_input(venv_bin, tmp_path, args, msg):
    r, out = _inspect(venv_bin, tmp_path, *args)
    assert r.returncode == 2 and msg in r.stderr, r.stderr[-2000:]
    assert not out.exists()                                                            # refused before anything is written


def _own_code_folder(tmp_path, model_type, weights=False):
    "A folder whose config asks for its own Python (auto_map); importing that code writes a marker file."
    d, marker = tmp_path / "own-code", tmp_path / "CODE-RAN"
    d.mkdir()
    (d / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                               "from transformers import LlamaConfig as EvilConfig, LlamaForCausalLM as EvilModel\n")
    if weights:
        from transformers import LlamaConfig, LlamaForCausalLM
        LlamaForCausalLM(LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                     num_attention_heads=4, num_key_value_heads=2)).save_pretrained(d)
    cfg = json.loads((d / "config.json").read_text()) if weights else {}
    cfg.update(model_type=model_type, auto_map={"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"})
    (d / "config.json").write_text(json.dumps(cfg))
    return d, marker


def test_inspect_refuses_a_folder_with_its_own_code(venv_bin, tmp_path):
    "`yes | posvec inspect FOLDER` on a config with auto_map: refused in one line, nothing prompted, the code never runs."
    d, marker = _own_code_folder(tmp_path, "posvec-own-code")
    r = subprocess.run([str(venv_bin / "posvec"), "inspect", str(d), "--out", str(tmp_path / "out")],
                       input="y\n" * 50, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "own Python code" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "[y/N]" not in r.stdout + r.stderr and not marker.exists()


def test_known_model_type_with_auto_map_loads_library_code(tmp_path):
    "A Llama config that also names its own code loads with transformers' Llama, without running that code."
    from posvec_lib.pretrained import load_checkpoint
    d, marker = _own_code_folder(tmp_path, "llama", weights=True)
    m = load_checkpoint(d)
    assert type(m).__name__ == "LlamaForCausalLM" and not marker.exists()


def _cut(src, dst, n):
    dst.write_bytes(src.read_bytes()[:n] if n else b""); return dst


@pytest.mark.parametrize("case, msg", [
    ("empty.gguf", "is empty (0 bytes)"), ("cut.gguf", "damaged GGUF file"), ("text.gguf", "not a GGUF file"),
    ("no-weights", "has a config.json but no weights"), ("bad-config", "is not valid JSON"),
    ("no-model-type", "has no model_type"), ("cut-safetensors", "is truncated"),
])
def test_damaged_model_inputs_fail_in_one_line(venv_bin, tmp_path, case, msg):
    "Damaged GGUF files and incomplete folders: exit 2 and one line naming the file and the fault, before loading."
    import shutil
    from posvec_lib.pretrained import model_source, tiny_local_model
    gg = model_source("smollm2-135m")["path"]
    if case.endswith(".gguf"):
        target = tmp_path / case
        if case == "text.gguf": target.write_text("not a model\n")
        else: _cut(gg, target, 0 if case == "empty.gguf" else 400_000)
        named = target
    else:
        target = tmp_path / case; shutil.copytree(tiny_local_model(), target)
        w, f = target / "model.safetensors", target / "config.json"
        if case == "no-weights": w.unlink()
        elif case == "bad-config": f.write_text('{"model_type": "llama",')
        elif case == "no-model-type": f.write_text("{}")
        else: _cut(w, w, w.stat().st_size // 2)
        named = w if case == "cut-safetensors" else (target if case == "no-weights" else f)
    r, out = _inspect(venv_bin, tmp_path, str(target))
    lines = [l for l in r.stderr.splitlines() if l.startswith("posvec: error:")]
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(lines) == 1, r.stderr[-2000:]
    assert msg in lines[0] and str(named) in lines[0], lines[0]
    assert not out.exists()


def test_unreachable_hub_name_fails_at_once(monkeypatch):
    "A hub name with the hub unreachable (not merely offline-flagged): one line with the way to get the model."
    import time
    from huggingface_hub import constants
    from posvec_lib.pretrained import check_model_files
    monkeypatch.setattr(constants, "ENDPOINT", "https://127.0.0.1:9")
    for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY"): monkeypatch.delenv(k, raising=False)
    t0 = time.time()
    with pytest.raises(ConnectionError, match="unreachable.*hf download no-such/model"):
        check_model_files(dict(kind="hub", path="no-such/model", entry=None))
    assert time.time() - t0 < 10
