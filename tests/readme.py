"README.md is rendered from nbs/index.ipynb: `python tests/readme.py > README.md`."
import json, sys
from pathlib import Path

def render(root: Path) -> str:
    cells = json.loads((root / "nbs" / "index.ipynb").read_text())["cells"]
    out = []
    for c in cells:
        src = "".join(c["source"]).strip()
        if c["cell_type"] == "markdown": out.append(src)
        elif c["cell_type"] == "code" and not src.startswith("#| hide"): out.append(f"```python\n{src}\n```")
    return "\n\n".join(out) + "\n"

if __name__ == "__main__":
    sys.stdout.write(render(Path(__file__).resolve().parents[1]))
