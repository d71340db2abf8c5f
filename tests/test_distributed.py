"""Measurement at scale (posvec_lib.distributed): positional vectors and mean attention folded by 2 CPU processes under
`accelerate launch` (gloo), against one process, to float64 rounding."""
import os, subprocess, sys
import pytest
import torch

from posvec_lib.config import get_profile, project_root
from posvec_lib.data import profile_data, fixed_length_samples
from posvec_lib.train import train_zoo_model, load_zoo_model
from posvec_lib.decompose import positional_vectors
from posvec_lib.attention import mean_attention


@pytest.fixture(scope="module")
def zoo_window(tmp_path_factory):
    "The smoke zoo's window model (the zoo's own attention kernel, not the stock one) and 13 samples: shards of 7 and 6."
    P = get_profile("smoke")
    path = train_zoo_model(P, "window")
    x = fixed_length_samples(profile_data(P).validation, P.C, 13, seed=5)
    f = tmp_path_factory.mktemp("dist") / "samples.pt"; torch.save(x, f)
    return P, path, x, f


def _run(launch, what, model, samples, out):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "POSVEC_HOME": str(project_root())}
    r = subprocess.run([*launch, "-m", "posvec_lib.distributed", what, "--model", str(model), "--samples", str(samples),
                        "--out", str(out), "--batch-size", "4"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return torch.load(out)


@pytest.mark.parametrize("what", ["positional", "attention"])
def test_two_processes_match_one(zoo_window, venv_bin, tmp_path, what):
    """Tolerance, fixed before the first run: 1e-10 relative (float64 sums in a different order); the same sample count;
    and the in-process library function gives the same numbers too."""
    P, path, x, f = zoo_window
    two = _run([str(venv_bin / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                "--mixed_precision", "no", "--dynamo_backend", "no"], what, path, f, tmp_path / "two.pt")
    one = _run([sys.executable], what, path, f, tmp_path / "one.pt")
    assert (one["world_size"], two["world_size"]) == (1, 2) and one["n_samples"] == two["n_samples"] == 13
    key = "p" if what == "positional" else "attention"
    torch.testing.assert_close(two[key], one[key], rtol=1e-10, atol=1e-12)
    if what == "positional": torch.testing.assert_close(two["total_var"], one["total_var"], rtol=1e-10, atol=1e-12)
    m = load_zoo_model(P, "window", attn="posvec_eager" if what == "attention" else "posvec_sdpa")
    ref = positional_vectors(m, x, 4, progress=False).p if what == "positional" else mean_attention(m, x, 4, progress=False)
    torch.testing.assert_close(one[key], ref, rtol=1e-10, atol=1e-12)
    assert two[key].abs().sum() > 0


def test_cli_refuses_bad_input(tmp_path):
    r = subprocess.run([sys.executable, "-m", "posvec_lib.distributed", "positional", "--model", "x", "--samples",
                        str(tmp_path / "none.pt"), "--out", str(tmp_path / "o.pt")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no such file" in r.stderr
    r = subprocess.run([sys.executable, "-m", "posvec_lib.distributed", "sinks", "--model", "x", "--samples", "s", "--out", "o"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "invalid choice: 'sinks'" in r.stderr
