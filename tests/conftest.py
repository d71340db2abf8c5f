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
