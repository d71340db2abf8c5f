"README.md is rendered from nbs/index.ipynb, its results table from the cpu records: `python tools/readme.py > README.md`."
import json, re, sys
from pathlib import Path

MARKER = re.compile(r"<!-- results table: .* -->")

def render(root: Path) -> str:
    from posvec_lib.report import results_table
    cells = json.loads((root / "nbs" / "index.ipynb").read_text())["cells"]
    out = []
    for c in cells:
        src = "".join(c["source"]).strip()
        if c["cell_type"] == "markdown": out.append(MARKER.sub(lambda m: results_table("cpu"), src))
        elif c["cell_type"] == "code" and not src.startswith("#| hide"): out.append(f"```python\n{src}\n```")
    return "\n\n".join(out) + "\n"

if __name__ == "__main__":
    sys.stdout.write(render(Path(__file__).resolve().parents[1]))
