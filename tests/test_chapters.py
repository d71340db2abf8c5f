"tools/chapters.py: chapters are committed executed, and a re-execution that disagrees fails."
import json, sys
from pathlib import Path
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import chapters  # noqa: E402

def _nb(path: Path, cells: list[dict]) -> Path:
    nb = dict(cells=[dict(cell_type="code", metadata=m, source=s, outputs=[], execution_count=None)
                     for s, m in cells],
              metadata=dict(kernelspec=dict(name="python3", language="python", display_name="P")),
              nbformat=4, nbformat_minor=5)
    path.write_text(json.dumps(nb))
    return path

def test_same_text_tolerates_rounding_not_changes():
    assert chapters._same_text("PPL 4.3211 at 2C", "PPL 4.3215 at 2C")
    assert not chapters._same_text("PPL 4.3 at 2C", "PPL 5.3 at 2C")
    assert not chapters._same_text("PPL 4.3 at 2C", "PPL 4.3 at 4C words")
    assert chapters._same_text("took 1.2s", "took 37.9 s")                  # timings masked
    assert chapters._same_text("<obj at 0x7f00aa>", "<obj at 0x7f11bb>")      # addresses masked

def test_run_then_check_and_a_stale_output_fails(tmp_path):
    nb = _nb(tmp_path / "99_demo.ipynb", [("print(2 + 2)", {}), ("import time; time.time()",
                                                                   {"tags": ["volatile"]})])
    assert chapters.one("run", nb) == dict(error="", diffs=[])
    cells = json.loads(nb.read_text())["cells"]
    assert "".join(cells[0]["outputs"][0]["text"]).strip() == "4"
    assert chapters.one("check", nb) == dict(error="", diffs=[])           # volatile: not compared
    raw = json.loads(nb.read_text())
    raw["cells"][0]["outputs"][0]["text"] = "5\n"                          # a stale committed output
    nb.write_text(json.dumps(raw))
    r = chapters.one("check", nb)
    assert len(r["diffs"]) == 1 and "cell 0" in r["diffs"][0]

def test_a_failing_cell_is_an_error(tmp_path):
    nb = _nb(tmp_path / "98_bad.ipynb", [("raise ValueError('broken on purpose')", {})])
    r = chapters.one("check", nb)
    assert "broken on purpose" in r["error"]

def test_unknown_chapter_is_refused():
    with pytest.raises(SystemExit, match="not a chapter"): chapters.chapters(["no_such.ipynb"])

def test_stderr_and_stamped_log_lines_are_not_kept():
    t = "[2026-12-08 00:26:02,273] [WARNING] [real_accelerator.py:213:f] CPU.\nresult 4\n"
    assert chapters.kept([dict(output_type="stream", name="stdout", text=t)])[0]["text"] == "result 4\n"
    assert chapters.kept([dict(output_type="stream", name="stderr", text="a warning\n")]) == []
