import os, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
# No hub access anywhere in the tests.
for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"): os.environ[v] = "1"
os.environ.setdefault("POSVEC_HOME", str(ROOT))

@pytest.fixture(scope="session")
def root(): return ROOT

@pytest.fixture(scope="session")
def venv_bin():
    return Path(sys.executable).parent

@pytest.fixture(scope="module")
def one_thread():
    "Tiny models gain nothing from threads; on a busy machine extra threads only oversubscribe the cores."
    import torch
    n = torch.get_num_threads(); torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

# `slow`: what takes minutes; `make test-quick` (pytest -m "not slow") skips it, `make test` runs it.
# Whole files that launch processes (torchrun, a fresh venv, a second model family), and every test
# that runs the `posvec` command in a subprocess (the `venv_bin` fixture).
SLOW_FILES = {"test_packaging.py", "test_distributed.py", "test_finetune.py", "test_gemma3.py",
              "test_gpu_bench.py", "test_report_browser.py"}

def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes minutes; skipped by make test-quick")

def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SLOW_FILES or "venv_bin" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
