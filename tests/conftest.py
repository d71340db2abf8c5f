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
