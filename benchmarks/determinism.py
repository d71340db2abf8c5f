"""Check (not a test): rerun artifacts from the same caches and compare with the committed results byte for byte.

    python benchmarks/determinism.py --profile cpu --only pose_coverage,A_formation,A_ablation

The artifacts run again with `posvec reproduce --force` in a scratch project root that shares this checkout's
notebooks and caches (data/cache) but has its own figures/ and runs/; then every result.json, CSV, Markdown table,
PNG and PDF is compared with figures/<profile>/<artifact>/. Outputs an artifact marks volatile (wall-clock
measurements, listed in its result.json) are left out. The committed results must be current (`posvec list`).
Exit code 0 when everything is identical.
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--only", required=True, help="comma-separated artifact names")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="posvec-det-") as d:
        home = Path(d)
        shutil.copy(ROOT / "settings.ini", home / "settings.ini")
        (home / "nbs").symlink_to(ROOT / "nbs")
        (home / "data").mkdir(); (home / "data" / "cache").symlink_to(ROOT / "data" / "cache")
        env = dict(os.environ, POSVEC_HOME=str(home), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        t0 = time.time()
        r = subprocess.run([str(Path(sys.executable).parent / "posvec"), "reproduce", "--profile", a.profile, "--only", a.only,
                            "--force"], cwd=home, env=env, capture_output=True, text=True)
        print(f"rerun of {a.only} at profile {a.profile}: exit {r.returncode} in {time.time() - t0:.0f}s")
        if r.returncode != 0:
            print(r.stdout[-3000:], r.stderr[-3000:]); return 2
        bad = 0
        for art in a.only.split(","):
            ref, new = ROOT / "figures" / a.profile / art, home / "figures" / a.profile / art
            vol = set(json.loads((ref / "result.json").read_text()).get("volatile", []))
            files = sorted(p.name for p in ref.iterdir() if p.suffix in (".json", ".csv", ".md", ".png", ".pdf")
                           and p.name not in ("run.json", "timing.json") and p.name not in vol)
            diff = [f for f in files if not (new / f).exists() or (new / f).read_bytes() != (ref / f).read_bytes()]
            extra = sorted(p.name for p in new.iterdir() if not p.name.startswith(".") and not (ref / p.name).exists())
            print(f"{art}: {len(files) - len(diff)}/{len(files)} files identical" + (f"; differ: {diff}" if diff else "")
                  + (f"; only in the rerun: {extra}" if extra else ""))
            bad += len(diff) + len(extra)
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
