"""The chapters as their readers meet them: executed, outputs committed, and kept from going stale.

`python tools/chapters.py run [NB ...]` executes chapters (nbs/*.ipynb) as `nbdev_test` does and
writes their outputs into them (stderr left out); `nbdev_clean` then tidies them as usual.
`python tools/chapters.py check [NB ...]` executes them again and fails when a cell raises or its
outputs differ from the committed ones beyond float rounding (numbers compared to 1 %, timings and
addresses masked, figures by count; a cell tagged `volatile` is executed but not compared).
"""
from __future__ import annotations
import argparse, json, math, os, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP_FLAGS = {"gpu"}    # settings.ini's tst_flags the CPU cannot run; `slow` cells run (`make test`)
VOLATILE = "volatile"   # a cell tag: outputs kept for the reader, not compared
REL_TOL, ABS_TOL = 1e-2, 1e-6
_NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_MASKS = [(re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"), "<datetime>"),  # log stamps
          (re.compile(r"0x[0-9a-fA-F]+"), "0x…"),                       # object addresses
          (re.compile(r"\d+(?:\.\d+)?\s?(?:s|ms|sec|seconds|it/s|s/it)\b"), "<time>"),
          (re.compile(r"\d{2}:\d{2}:\d{2}"), "<clock>")]


def chapters(names: list[str] | None = None) -> list[Path]:
    "The chapters: nbs/*.ipynb (nbdev's `recursive = False`), or the ones named."
    nbs = ROOT / "nbs"
    if not names: return sorted(nbs.glob("*.ipynb"))
    out = [Path(n) if Path(n).exists() else nbs / n for n in names]
    bad = [str(p) for p in out if not p.exists() or p.suffix != ".ipynb"]
    if bad: raise SystemExit(f"not a chapter: {bad}; allowed: {[p.name for p in chapters()]}")
    return [p.resolve() for p in out]


def execute(path: Path) -> tuple[list | None, str]:
    "Run a chapter as nbdev_test does: (each cell's outputs, in file order; '' or the error)."
    from fastcore.xtras import working_directory
    from nbdev.process import NBProcessor
    from execnb.shell import CaptureShell
    os.environ["IN_TEST"] = "1"
    nb = NBProcessor(path).nb                   # cells in file order, directives parsed
    def no_eval(cell):
        if cell.cell_type != "code" or "nbdev_export" + "(" in cell.source: return True
        direc = getattr(cell, "directives_", {}) or {}
        if direc.get("eval:", [""])[0].lower() == "false": return True
        return bool(SKIP_FLAGS & direc.keys())
    shell = CaptureShell(path)
    with working_directory(path.parent):
        try: shell.run_all(nb, exc_stop=True, preproc=no_eval)
        except Exception: return None, shell.prettytb(fname=path)
    return [json.loads(json.dumps(c.get("outputs", []))) if c.cell_type == "code" else None
            for c in nb.cells], ""


_LOG_LINE = re.compile(r"^\[\d{4}-\d{2}-\d{2} [^]]*\] \[(?:WARNING|INFO|DEBUG)\].*\n?", re.M)


def kept(outputs: list) -> list:
    "The outputs a reader keeps: everything but stderr and libraries' stamped log lines."
    out = []
    for o in outputs:
        if o.get("output_type") == "stream":
            if o.get("name") == "stderr": continue
            text = _LOG_LINE.sub("", "".join(o.get("text", "")))
            if not text: continue
            o = dict(o, text=text)
        out.append(o)
    return out


def write_outputs(path: Path, outs: list):
    "Put each code cell's outputs into the chapter file (sources untouched)."
    raw = json.loads(path.read_text())
    assert len(raw["cells"]) == len(outs), (path, len(raw["cells"]), len(outs))
    for c, o in zip(raw["cells"], outs):
        if c["cell_type"] == "code": c["outputs"] = kept(o or [])
    path.write_text(json.dumps(raw, indent=1, ensure_ascii=False) + "\n")


def _text(o: dict) -> tuple[str, str]:
    "(kind, text) of one output: figures by kind only, tables by their plain text."
    if o.get("output_type") == "stream": return "stream", "".join(o.get("text", ""))
    if o.get("output_type") == "error": return "error", o.get("ename", "")
    data = o.get("data", {})
    for mime in ("text/plain", "text/markdown", "text/html"):
        if mime in data and not any(m.startswith("image/") for m in data):
            t = data[mime]
            return "text", "".join(t) if isinstance(t, list) else t
    return "+".join(sorted(m for m in data if m.startswith("image/"))) or "other", ""


def _same_text(a: str, b: str) -> bool:
    "Equal once masked, numbers within REL_TOL / ABS_TOL."
    for rx, s in _MASKS: a, b = rx.sub(s, a), rx.sub(s, b)
    a, b = a.rstrip(), b.rstrip()
    if _NUM.sub("#", a) != _NUM.sub("#", b): return False
    return all(math.isclose(float(x), float(y), rel_tol=REL_TOL, abs_tol=ABS_TOL)
               for x, y in zip(_NUM.findall(a), _NUM.findall(b)))


def differences(path: Path, outs: list) -> list[str]:
    "Where a fresh execution's outputs differ from the committed ones, cell by cell."
    raw, diffs = json.loads(path.read_text()), []
    for i, (c, o) in enumerate(zip(raw["cells"], outs)):
        if c["cell_type"] != "code" or VOLATILE in c.get("metadata", {}).get("tags", []): continue
        old, new = [_text(x) for x in kept(c.get("outputs", []))], [_text(x) for x in kept(o or [])]
        same = len(old) == len(new) and all(k1 == k2 and _same_text(t1, t2)
                                            for (k1, t1), (k2, t2) in zip(old, new))
        if not same:
            src = "".join(c["source"]).strip().splitlines()
            diffs.append(f"{path.name} cell {i} ({src[0][:60] if src else ''}): committed "
                         f"{[t[:200] for _, t in old]} != now {[t[:200] for _, t in new]}")
    return diffs


def one(mode: str, path: Path) -> dict:
    "Execute one chapter; `run` writes its outputs, `check` compares them: {error, diffs}."
    outs, err = execute(path)
    if outs is None: return dict(error=err, diffs=[])
    if mode == "run": write_outputs(path, outs)
    return dict(error="", diffs=[] if mode == "run" else differences(path, outs))


def _in_process(mode: str, path: Path) -> dict:
    "`one` in a fresh interpreter (a chapter's state never reaches the next)."
    import subprocess, tempfile
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        p = subprocess.run([sys.executable, __file__, "_one", mode, str(path), str(out)],
                           capture_output=True, text=True)
        if not out.exists():
            return dict(error=f"exit {p.returncode}\n{p.stderr[-4000:]}", diffs=[])
        return json.loads(out.read_text())


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_one"]:                    # the worker: python chapters.py _one MODE NB OUT
        Path(argv[3]).write_text(json.dumps(one(argv[1], Path(argv[2]))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["run", "check"])
    ap.add_argument("notebooks", nargs="*", help="chapter files or names (default: all)")
    ap.add_argument("--n_workers", type=int, default=2)
    a = ap.parse_args(argv)
    paths, failed = chapters(a.notebooks), 0
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max(1, a.n_workers)) as ex:
        for path, r in zip(paths, ex.map(lambda p: _in_process(a.mode, p), paths)):
            if r["error"]: print(f"{path.name}: failed\n{r['error']}", file=sys.stderr)
            for d in r["diffs"]: print(f"stale outputs: {d}", file=sys.stderr)
            failed += bool(r["error"] or r["diffs"])
    if failed:
        print(f"{failed} of {len(paths)} chapters failed" + (
            "; re-run `python tools/chapters.py run` and commit the chapters"
            if a.mode == "check" else ""), file=sys.stderr)
        return 1
    print(f"{len(paths)} chapters {'executed' if a.mode == 'run' else 'match their outputs'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
