"""Where a cold `make reproduce` spends its time, from what the last runs recorded (issue 32).

    python benchmarks/cold_budget.py --profile cpu --cpu "AMD EPYC" > benchmarks/cold-budget-cpu.md

A cold run trains every zoo entry and fine-tune the artifacts read, then evaluates. This sums, from
the records alone (nothing is run): the training seconds each cached zoo and fine-tune manifest
wrote (`wall_time_s`), and each artifact's `run.json` wall time from its last run, which read those
caches (so it is the artifact's evaluation alone). The fine-tunes are grouped by what they serve,
so each line is the time a cut of that group saves. `--install-s` is the measured install (about
2 min from the local package index); `--cpu` names the machine the records were made on (they do
not say), since machines of one kind differ. The tokenizer and the corpus's tokens (about a
minute) are not counted.
"""
import argparse, json, re
from posvec_lib.config import get_profile
from posvec_lib.paths import figures_dir, cache_dir

# (label, pattern on the run name): the first that matches names a fine-tune's group
GROUPS = [
    ("B analysis rows: PoSE, Full-length at s1 C, documents only", r"-(pose|full-length)-docs-"),
    ("B analysis row: PoSE at s1 C on equal tokens", r"-pose-.*-\d+steps"),
    ("B Table 6: Full-length Linear and NTK", r"full-length-(linear|ntk)-"),
    ("B positive control: Full-length YaRN at s1 C", r"full-length-yarn_pose-"),
    ("B Table 4: documents-only content runs (3 contents x seeds)", r"chunks2-(same-|zero-)?docs"),
    ("B Table 4/5 and rebuttal u0 runs: chunks on the mixture (x seeds)", r"-chunks"),
    ("B Table 6 / Fig. 4: PoSE Linear and NTK (RoPE and Window-RoPE bases)", r"pose-(linear|ntk)-"),
    ("B PoSE and RandPos at s1 C (x seeds), PoSE at s2 C, PoSE on Window-RoPE", r""),
]


def records(P) -> dict:
    "Each artifact's result inputs and run wall time, from figures/<profile>/."
    out = {}
    for run in sorted(figures_dir(P, create=False).glob("*/run.json")):
        res, r = json.loads((run.parent / "result.json").read_text()), json.loads(run.read_text())
        out[run.parent.name] = dict(wall=r["wall_time_s"], inputs=res.get("inputs", {}),
                                    started=r["started"])
    return out


def manifest_seconds(kind: str, P, cache: str) -> float:
    "The training seconds a cached run's manifest recorded (NaN when the cache is missing)."
    f = cache_dir(kind, P.name) / cache / "manifest.json"
    if not f.is_file(): return float("nan")
    return json.loads(f.read_text()).get("wall_time_s", float("nan"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--install-s", type=float, default=120.0)
    ap.add_argument("--budget-min", type=float, default=90.0)
    ap.add_argument("--cpu", required=True, help="the CPU the records were made on: 'AMD EPYC'")
    a = ap.parse_args()
    P = get_profile(a.profile)
    R = records(P)
    zoo, ft = {}, {}
    for art in R.values():
        for name, z in art["inputs"].get("zoo", {}).items(): zoo[name] = z["cache"]
        for name, f in art["inputs"].get("finetuned", {}).items(): ft[name] = f["cache"]
    rows = [("install", "", a.install_s)]
    for name, cache in sorted(zoo.items(), key=lambda kv: kv[0] != "rope"):
        rows.append(("train zoo", name, manifest_seconds("zoo", P, cache)))
    by_group = {}
    for name, cache in ft.items():
        label = next(lbl for lbl, pat in GROUPS if re.search(pat, name))
        by_group.setdefault(label, []).append(manifest_seconds("finetune", P, cache))
    for label, _ in GROUPS:
        if label in by_group:
            n, secs = len(by_group[label]), sum(by_group[label])
            rows.append(("fine-tune", f"{label}: {n} runs", secs))
    for name, art in sorted(R.items(), key=lambda kv: -kv[1]["wall"]):
        rows.append(("evaluate", f"{name} (last run {art['started'][:16]})", art["wall"]))
    total = sum(s for *_, s in rows)
    print(f"# Cold `make reproduce --profile {P.name}`: time by part, from the records\n")
    print(f"`python benchmarks/cold_budget.py --profile {P.name} --cpu \"{a.cpu}\"` "
          "(training: the caches' manifests; evaluation: figures' run.json, read from the caches). "
          f"Recorded on: {a.cpu}, 2 cores.\n")
    print("| part | what | seconds | minutes |\n|---|---|---|---|")
    for part, what, s in rows: print(f"| {part} | {what} | {s:.0f} | {s / 60:.1f} |")
    sums = {}
    for part, _, s in rows: sums[part] = sums.get(part, 0) + s
    for part, s in sums.items(): print(f"| **{part}, all** | | {s:.0f} | {s / 60:.1f} |")
    print(f"| **cold, all** | | {total:.0f} | **{total / 60:.1f}** |\n")
    print(f"Over the {a.budget_min:.0f}-minute budget by {(total / 60 - a.budget_min):.1f} min.")


if __name__ == "__main__":
    main()
