"""A tester's round over the command lines: everyday mistakes, each run and classified.

python benchmarks/cli_tester_round.py [--out benchmarks/cli-tester-round.md] [--only ID,...]

Every case runs as a new user would type it (a subprocess, stdin not a terminal, cwd the clone) and
only ever at the `smoke` profile or with `--dry-run`, so that nothing trains. Outcomes:
clear (exit 2, one error line naming the mistake), handled (accepted, and right to be), unclear
(refused, but the line does not name the mistake or is not one line), silent (a mistake accepted
without a word), crash (a traceback or an unexpected exit), lost (hung past the time limit),
security (a file appeared that the command line should never have written).
"""
from __future__ import annotations
import argparse, os, re, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
TMP = Path(tempfile.mkdtemp(prefix="posvec-tester-"))
SENTINEL = TMP / "pwned"
(TMP / "empty-dir").mkdir()
(TMP / "empty.txt").write_text("")
(TMP / "notes.txt").write_text("a short note.\n")
(TMP / "bin.txt").write_bytes(bytes(range(256)) * 64)
(TMP / "not-a-tensor.pt").write_text("hello")
(TMP / "config.json").write_text("{}")
(TMP / "model-dir").mkdir()
(TMP / "model-dir" / "config.json").write_text('{"model_type": "nonsense"}')
LONG = "/tmp/" + "a" * 300
POSVEC = [PY, "-m", "posvec_lib.cli"]
TRAIN, FT, DIST = ([PY, "-m", f"posvec_lib.{m}"] for m in ("train", "finetune", "distributed"))
S = ["--profile", "smoke"]
DRY = ["--profile", "smoke", "--dry-run"]


def _ids():
    import torch
    torch.save(torch.randint(0, 100, (4, 32)), TMP / "ids.pt")

# (id, what, argv, expect, names, env): expect 'refuse' (a mistake) or 'ok' (fine to accept);
# names: what the error line must name (case-insensitive), env: changes to the environment
CASES = [
    # commands and options
    ("cmd-typo", "a typo of a command", POSVEC + ["reprodce"], "refuse", "reprodce", {}),
    ("cmd-case", "a command in capitals", POSVEC + ["LIST"], "refuse", "LIST", {}),
    ("cmd-none", "no command at all", POSVEC, "refuse", "cmd", {}),
    ("opt-typo", "a typo of an option", POSVEC + ["list", "--profle", "smoke"], "refuse",
     "--profle", {}),
    ("opt-abbrev", "an abbreviated option", POSVEC + ["list", "--prof", "smoke"], "ok", "", {}),
    ("opt-short", "a short option that does not exist", POSVEC + ["list", "-p", "smoke"], "refuse",
     "-p", {}),
    ("extra-arg", "a stray positional word", POSVEC + ["list", "smoke"], "refuse", "smoke", {}),
    ("unicode-dash", "an en dash instead of --", POSVEC + ["list", "\u2013profile", "smoke"],
     "refuse", "\u2013profile", {}),
    # profiles
    ("prof-case", "a profile in capitals", POSVEC + ["list", "--profile", "SMOKE"], "refuse",
     "SMOKE", {}),
    ("prof-empty", "an empty profile", POSVEC + ["list", "--profile", ""], "refuse", "profile", {}),
    ("prof-typo", "a typo of a profile", POSVEC + ["list", "--profile", "smok"], "refuse", "smok",
     {}),
    ("prof-space", "a profile with a trailing space", POSVEC + ["list", "--profile", "smoke "],
     "refuse", "smoke ", {}),
    # --only
    ("only-blank", "--only of commas and spaces", POSVEC + ["reproduce", *DRY, "--only", " , "],
     "refuse", "--only", {}),
    ("only-trailing", "--only with a trailing comma", POSVEC + ["reproduce", *DRY, "--only",
                                                              "zoo,"], "ok", "", {}),
    ("only-case", "--only in capitals", POSVEC + ["reproduce", *DRY, "--only", "ZOO"], "refuse",
     "ZOO", {}),
    ("only-semicolon", "--only separated by ;", POSVEC + ["reproduce", *DRY, "--only",
                                                        "zoo;B_ppl"], "refuse", "zoo;B_ppl", {}),
    ("only-space", "--only separated by a space", POSVEC + ["reproduce", *DRY, "--only",
                                                          "zoo B_ppl"], "refuse", "zoo B_ppl", {}),
    ("only-dup", "--only naming an artifact twice", POSVEC + ["reproduce", *DRY, "--only",
                                                            "zoo,B_ppl,zoo"], "refuse", "zoo", {}),
    ("only-twice", "--only given twice", POSVEC + ["reproduce", *DRY, "--only", "zoo", "--only",
                                                  "B_ppl"], "refuse", "--only", {}),
    ("only-unicode", "--only with a zero-width space", POSVEC + ["reproduce", *DRY, "--only",
                                                               "zoo\u200b"], "refuse", "zoo", {}),
    ("force-trust", "--force with --trust-committed", POSVEC + ["reproduce", *DRY, "--force",
                                                              "--trust-committed"], "refuse",
     "--trust-committed", {}),
    # --set: form
    ("set-noeq", "--set without =", POSVEC + ["list", *S, "--set", "C"], "refuse", "C", {}),
    ("set-nokey", "--set =5", POSVEC + ["list", *S, "--set", "=5"], "refuse", "''", {}),
    ("set-empty", "--set with an empty string", POSVEC + ["list", *S, "--set", ""], "refuse",
     "--set", {}),
    ("set-novalue", "--set C= (no value)", POSVEC + ["list", *S, "--set", "C="], "refuse", "C=",
     {}),
    ("set-bare", "--set with nothing after it", POSVEC + ["list", *S, "--set"], "ok", "", {}),
    ("set-space", "--set 'C =64' with a space", POSVEC + ["list", *S, "--set", "C =64"], "ok", "",
     {}),
    ("set-case", "a knob in the wrong case", POSVEC + ["list", *S, "--set", "c=64"], "refuse", "c",
     {}),
    ("set-name", "--set name=... (not a knob)", POSVEC + ["list", *S, "--set", "name=x"], "refuse",
     "name", {}),
    ("set-dup-same", "the same knob twice, same value", POSVEC + ["list", *S, "--set", "C=64",
                                                                 "C=64"], "refuse", "C", {}),
    ("set-dup-repeat", "the same knob in two --set", POSVEC + ["list", *S, "--set", "seed=1",
                                                              "--set", "seed=2"], "refuse", "seed",
     {}),
    ("set-dash", "a knob with a dash for the underscore", POSVEC + ["list", *S, "--set",
                                                                   "eval-docs=3"], "refuse",
     "eval-docs", {}),
    # --set: numbers
    ("int-float", "a fraction for an integer", POSVEC + ["list", *S, "--set", "C=3.5"], "refuse",
     "C=3.5", {}),
    ("int-exp", "1e3 for an integer", POSVEC + ["list", *S, "--set", "C=1e3"], "refuse", "C", {}),
    ("int-neg", "a negative window", POSVEC + ["list", *S, "--set", "C=-64"], "refuse", "C=-64",
     {}),
    ("int-huge", "a window of 10^20", POSVEC + ["reproduce", *DRY, "--set",
                                                "C=100000000000000000000", "window=8"], "refuse",
     "C", {}),
    ("int-hex", "a hexadecimal integer", POSVEC + ["list", *S, "--set", "C=0x40"], "refuse", "C",
     {}),
    ("int-underscore", "an integer with _", POSVEC + ["list", *S, "--set", "C=64_0"], "refuse", "C",
     {}),
    ("int-fullwidth", "full-width digits", POSVEC + ["list", *S, "--set", "C=\uff16\uff14"], "ok",
     "", {}),
    ("int-words", "a number in words", POSVEC + ["list", *S, "--set", "C=sixty"], "refuse", "C",
     {}),
    ("int-bool", "true for an integer", POSVEC + ["list", *S, "--set", "seed=true"], "refuse",
     "seed", {}),
    ("seed-neg", "a negative seed", POSVEC + ["list", *S, "--set", "seed=-1"], "refuse", "seed",
     {}),
    ("lr-nan", "lr=nan", POSVEC + ["list", *S, "--set", "lr=nan"], "refuse", "lr", {}),
    ("lr-inf", "lr=inf", POSVEC + ["list", *S, "--set", "lr=inf"], "refuse", "lr", {}),
    ("lr-neg", "a negative learning rate", POSVEC + ["list", *S, "--set", "lr=-0.1"], "refuse",
     "lr", {}),
    ("lr-zero", "a zero learning rate", POSVEC + ["list", *S, "--set", "lr=0"], "refuse", "lr", {}),
    ("lr-comma", "a decimal comma", POSVEC + ["list", *S, "--set", "lr=0,001"], "refuse", "lr", {}),
    ("lr-percent", "a percentage", POSVEC + ["list", *S, "--set", "copy_share=50%"], "refuse",
     "copy_share", {}),
    ("share-over", "a share over 1", POSVEC + ["list", *S, "--set", "copy_share=1.5"], "refuse",
     "copy_share", {}),
    ("share-sum", "two shares summing over 1", POSVEC + ["list", *S, "--set", "copy_share=0.8",
                                                        "recall_share=0.3"], "refuse",
     "recall_share", {}),
    ("floor-one", "lr_floor=1", POSVEC + ["list", *S, "--set", "lr_floor=1"], "refuse", "lr_floor",
     {}),
    ("threads-zero", "threads=0", POSVEC + ["list", *S, "--set", "threads=0"], "refuse", "threads",
     {}),
    ("threads-huge", "threads=100000", POSVEC + ["list", *S, "--set", "threads=100000"], "refuse",
     "threads", {}),
    ("evaldocs-zero", "eval_docs=0", POSVEC + ["list", *S, "--set", "eval_docs=0"], "refuse",
     "eval_docs", {}),
    ("evaldocs-ten", "eval_docs one past the smoke corpus", POSVEC + ["reproduce", *DRY, "--set",
                                                                     "eval_docs=10"], "refuse",
     "eval_docs", {}),
    ("samples-3", "n_samples=3 (quarters need 4)", POSVEC + ["list", *S, "--set", "n_samples=3"],
     "refuse", "n_samples", {}),
    ("samples-huge", "n_samples=10^9", POSVEC + ["reproduce", *DRY, "--set",
                                                 "n_samples=1000000000"], "refuse", "n_samples",
     {}),
    ("steps-huge", "train_steps=10^8 (days of training)", POSVEC + ["reproduce", *S, "--only",
                                                                   "zoo", "--set",
                                                                   "train_steps=100000000"],
     "refuse", "train_steps", {}),
    ("pose-steps-huge", "pose_steps=10^8", POSVEC + ["reproduce", *S, "--only", "B_ppl", "--set",
                                                     "pose_steps=100000000"], "refuse",
     "pose_steps", {}),
    ("mc-float", "mc_iterations=1e12", POSVEC + ["list", *S, "--set", "mc_iterations=1e12"],
     "refuse", "mc_iterations", {}),
    ("window-over-c", "window larger than C", POSVEC + ["list", *S, "--set", "window=200"],
     "refuse", "window", {}),
    ("heads-odd", "heads that do not split d_model", POSVEC + ["list", *S, "--set", "n_heads=3"],
     "refuse", "n_heads", {}),
    ("extreme-5", "extreme_target=5", POSVEC + ["list", *S, "--set", "extreme_target=5"], "refuse",
     "extreme_target", {}),
    ("targets-one", "pose_targets=1", POSVEC + ["list", *S, "--set", "pose_targets=1"], "refuse",
     "pose_targets", {}),
    ("passkey-short", "pretrained_passkey_lengths=16", POSVEC + ["list", *S, "--set",
                                                                "pretrained_passkey_lengths=16"],
     "refuse", "pretrained_passkey_lengths", {}),
    # --set: names and lists
    ("zoo-empty", "an empty zoo", POSVEC + ["list", *S, "--set", "zoo="], "refuse", "zoo", {}),
    ("zoo-dup", "a zoo entry twice", POSVEC + ["list", *S, "--set", "zoo=rope,rope"], "refuse",
     "zoo", {}),
    ("zoo-case", "a zoo entry in capitals", POSVEC + ["list", *S, "--set", "zoo=ROPE"], "refuse",
     "zoo", {}),
    ("zoo-badjson", "a list in brackets without quotes", POSVEC + ["list", *S, "--set",
                                                                  "zoo=[rope]"], "refuse", "zoo",
     {}),
    ("zoo-mixed", "a JSON list with a number", POSVEC + ["list", *S, "--set", 'zoo=["rope", 1]'],
     "refuse", "zoo", {}),
    ("ext-x", "a list with a word in it", POSVEC + ["list", *S, "--set", "ext_factors=2,x"],
     "refuse", "ext_factors", {}),
    ("ext-frac", "a list with a fraction", POSVEC + ["list", *S, "--set", "ext_factors=[2.5]"],
     "refuse", "ext_factors", {}),
    ("device-gpu", "device=gpu", POSVEC + ["list", *S, "--set", "device=gpu"], "refuse", "device",
     {}),
    ("dtype-fp16", "dtype=fp16", POSVEC + ["list", *S, "--set", "dtype=fp16"], "refuse", "dtype",
     {}),
    ("interp-case", "pose_interpolation=YaRN", POSVEC + ["list", *S, "--set",
                                                         "pose_interpolation=YaRN"], "refuse",
     "pose_interpolation", {}),
    ("abl-emptyitem", "an empty name in a list", POSVEC + ["list", *S, "--set",
                                                          "ablation_models=rope,,alibi"], "refuse",
     "ablation_models", {}),
    ("pretrained-noeq", "pretrained=rope (no =)", POSVEC + ["list", *S, "--set", "pretrained=rope"],
     "refuse", "pretrained", {}),
    ("pretrained-badvar", "pretrained=foo=bar", POSVEC + ["list", *S, "--set",
                                                          "pretrained=foo=bar"], "refuse",
     "pretrained", {}),
    ("name-tab", "a tab in a corpus name", POSVEC + ["list", *S, "--set", "corpus=a\tb"], "refuse",
     "corpus", {}),
    ("name-blank", "a corpus of spaces", POSVEC + ["list", *S, "--set", "corpus=   "], "refuse",
     "corpus", {}),
    ("name-zwsp", "a zero-width space in a corpus name", POSVEC + ["list", *S, "--set",
                                                                  "corpus=stdlib\u200b"], "refuse",
     "corpus", {}),
    ("name-rtl", "a right-to-left override in a name", POSVEC + ["list", *S, "--set",
                                                                "tokenizer=bpe\u202e"], "refuse",
     "tokenizer", {}),
    ("name-emoji", "an emoji corpus name (a hub name offline)", POSVEC + ["reproduce", *S, "--only",
                                                                         "zoo", "--set",
                                                                         "corpus=\U0001f600"],
     "refuse", "corpus", {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}),
    # paths in knobs
    ("path-long", "a corpus path with a 300-byte name", POSVEC + ["list", *S, "--set",
                                                                 f"corpus={LONG}"], "refuse",
     "corpus", {}),
    ("path-verylong", "a 5000-byte corpus path", POSVEC + ["list", *S, "--set",
                                                          "corpus=/" + "ab/" * 1700], "refuse",
     "corpus", {}),
    ("path-missing", "a corpus path that does not exist", POSVEC + ["reproduce", *S, "--only",
                                                                   "zoo", "--set",
                                                                   "corpus=/nonexistent/c"],
     "refuse", "corpus", {}),
    ("path-tilde", "a ~ path that does not exist", POSVEC + ["reproduce", *S, "--only", "zoo",
                                                            "--set", "corpus=~/no-such-corpus"],
     "refuse", "corpus", {}),
    ("path-corpus-file", "a corpus that is a binary file", POSVEC + ["reproduce", *DRY, "--set",
                                                                    "corpus=/bin/ls"], "refuse",
     "corpus", {}),
    ("path-corpus-empty", "a corpus folder with no text", POSVEC + ["reproduce", *DRY, "--set",
                                                                   f"corpus={TMP}/empty-dir"],
     "refuse", "corpus", {}),
    ("path-evalcorpus-tiny", "an eval corpus of one short note",
     POSVEC + ["reproduce", *DRY, "--set", f"eval_corpus={TMP}/notes.txt"], "refuse",
     "eval_corpus", {}),
    ("path-base-file", "base_model that is a text file", POSVEC + ["reproduce", *DRY, "--set",
                                                                  "base_model=/etc/hostname"],
     "refuse", "base_model", {}),
    ("path-base-dir", "base_model a folder with a bad config", POSVEC + [
        "reproduce", *DRY, "--set", f"base_model={TMP}/model-dir"], "refuse", "base_model", {}),
    ("path-pretrained-missing", "pretrained_model that does not exist", POSVEC + [
        "reproduce", *DRY, "--set", "pretrained_model=/nonexistent/m"], "refuse",
     "pretrained_model", {}),
    ("hub-offline", "a hub tokenizer while offline", POSVEC + ["reproduce", *S, "--only", "zoo",
                                                              "--set", "tokenizer=org/tok"],
     "refuse", "tokenizer", {"HF_HUB_OFFLINE": "1"}),
    # reproduce combinations
    ("paper-nogpu-dry", "the paper profile's plan on a CPU", POSVEC + ["plan", "--profile",
                                                                      "paper"], "ok", "", {}),
    ("dry-yes", "--dry-run with --yes", POSVEC + ["reproduce", *DRY, "--yes", "--only", "zoo"],
     "ok", "", {}),
    ("steps-huge-dry", "a huge knob in a dry run (says it, runs nothing)",
     POSVEC + ["reproduce", *DRY, "--only", "zoo", "--set", "train_steps=100000000"], "ok", "",
     {}),
    # list, report, plan, compare
    ("list-json-twice", "--json twice", POSVEC + ["list", *S, "--json", "--json"], "ok", "", {}),
    ("report-badset", "report with a bad knob", POSVEC + ["report", *S, "--set", "C=abc"],
     "refuse", "C", {}),
    ("report-unknown", "report of an unknown profile", POSVEC + ["report", "--profile", "nope"],
     "refuse", "nope", {}),
    ("plan-neg", "plan with a negative count", POSVEC + ["plan", *S, "--set", "n_samples=-5"],
     "refuse", "n_samples", {}),
    ("plan-rule", "plan with windows over C", POSVEC + ["plan", *S, "--set", "C=16", "window=16",
                                                       "small_window=16"], "refuse",
     "small_window", {}),
    ("cmp-empty", "compare --against ''", POSVEC + ["compare", *S, "--against", ""], "refuse",
     "--against", {}),
    ("cmp-far", "compare --against HEAD~99999", POSVEC + ["compare", *S, "--against",
                                                         "HEAD~99999"], "refuse", "HEAD~99999",
     {}),
    ("cmp-path", "compare --against a tree path", POSVEC + ["compare", *S, "--against",
                                                           "HEAD:README.md"], "refuse",
     "HEAD:README.md", {}),
    ("cmp-newline", "compare --against with a newline", POSVEC + ["compare", *S, "--against",
                                                                 "HEAD\nx"], "refuse", "--against",
     {}),
    ("cmp-option", "compare --against an option (git option injection)",
     POSVEC + ["compare", *S, f"--against=--output={SENTINEL}"], "refuse", "--against", {}),
    ("cmp-shell", "compare --against with shell syntax", POSVEC + [
        "compare", *S, "--against", f"HEAD; touch {SENTINEL}"], "refuse", "HEAD;", {}),
    ("cmp-only", "compare --only an unknown artifact", POSVEC + ["compare", *S, "--only", "nope"],
     "refuse", "nope", {}),
    ("cmp-only-dup", "compare --only twice the same", POSVEC + ["compare", *S, "--only",
                                                               "zoo,zoo"], "refuse", "zoo", {}),
    ("cmp-noarg", "compare --against with no value", POSVEC + ["compare", *S, "--against"],
     "refuse", "--against", {}),
    # environment
    ("home-file", "POSVEC_HOME a file", POSVEC + ["list", *S], "refuse", "POSVEC_HOME",
     {"POSVEC_HOME": "/etc/hostname"}),
    ("home-missing", "POSVEC_HOME a missing folder", POSVEC + ["list", *S], "refuse",
     "POSVEC_HOME", {"POSVEC_HOME": "/nonexistent/home"}),
    ("home-empty", "POSVEC_HOME empty", POSVEC + ["list", *S], "ok", "", {"POSVEC_HOME": ""}),
    ("home-not-clone", "POSVEC_HOME an empty folder (not a clone)", POSVEC + ["reproduce", *S,
                                                                             "--only", "zoo"],
     "refuse", "POSVEC_HOME", {"POSVEC_HOME": str(TMP / "empty-dir")}),
    ("home-long", "POSVEC_HOME a 300-byte name", POSVEC + ["list", *S], "refuse", "POSVEC_HOME",
     {"POSVEC_HOME": LONG}),
    ("offline-typo", "HF_HUB_OFFLINE=yes (a spelling of true)", POSVEC + ["list", *S], "ok", "",
     {"HF_HUB_OFFLINE": "yes"}),
    # inspect
    ("insp-nomodel", "inspect without a model", POSVEC + ["inspect"], "refuse", "model", {}),
    ("insp-unknown", "inspect an unknown name offline", POSVEC + ["inspect", "no-such-model-xyz"],
     "refuse", "no-such-model-xyz", {"HF_HUB_OFFLINE": "1"}),
    ("insp-missing-path", "inspect a missing path", POSVEC + ["inspect", "/nonexistent/model"],
     "refuse", "/nonexistent/model", {}),
    ("insp-file", "inspect a text file", POSVEC + ["inspect", "/etc/hostname"], "refuse",
     "/etc/hostname", {}),
    ("insp-dir", "inspect a folder with no model", POSVEC + ["inspect", str(TMP / "empty-dir")],
     "refuse", "empty-dir", {}),
    ("insp-badconfig", "inspect a folder with a bad config", POSVEC + ["inspect",
                                                                      str(TMP / "model-dir")],
     "refuse", "model-dir", {}),
    ("insp-empty", "inspect ''", POSVEC + ["inspect", ""], "refuse", "model", {}),
    ("insp-samples0", "--samples 0", POSVEC + ["inspect", "tiny-local", "--samples", "0"],
     "refuse", "--samples", {}),
    ("insp-samples-neg", "--samples -3", POSVEC + ["inspect", "tiny-local", "--samples", "-3"],
     "refuse", "--samples", {}),
    ("insp-samples-float", "--samples 2.5", POSVEC + ["inspect", "tiny-local", "--samples", "2.5"],
     "refuse", "--samples", {}),
    ("insp-samples-huge", "--samples 10^12", POSVEC + ["inspect", "tiny-local", "--samples",
                                                       "1000000000000"], "refuse", "--samples",
     {}),
    ("insp-length0", "--length 0", POSVEC + ["inspect", "tiny-local", "--length", "0"], "refuse",
     "--length", {}),
    ("insp-length-over", "--length beyond the window", POSVEC + ["inspect", "tiny-local",
                                                                "--length", "100000"], "refuse",
     "--length", {}),
    ("insp-device", "--device cuda:7", POSVEC + ["inspect", "tiny-local", "--device", "cuda:7"],
     "refuse", "--device", {}),
    ("insp-device-tpu", "--device tpu", POSVEC + ["inspect", "tiny-local", "--device", "tpu"],
     "refuse", "--device", {}),
    ("insp-dtype", "--dtype fp8", POSVEC + ["inspect", "tiny-local", "--dtype", "fp8"], "refuse",
     "--dtype", {}),
    ("insp-layers-words", "--layers a,b", POSVEC + ["inspect", "tiny-local", "--layers", "a,b"],
     "refuse", "--layers", {}),
    ("insp-layers-over", "--layers 99", POSVEC + ["inspect", "tiny-local", "--layers", "99"],
     "refuse", "99", {}),
    ("insp-layers-neg", "--layers -1", POSVEC + ["inspect", "tiny-local", "--layers=-1"], "refuse",
     "-1", {}),
    ("insp-text-missing", "--text a missing file", POSVEC + ["inspect", "tiny-local", "--text",
                                                            "/nonexistent.txt"], "refuse",
     "--text", {}),
    ("insp-text-dir", "--text a folder", POSVEC + ["inspect", "tiny-local", "--text", str(TMP)],
     "refuse", "--text", {}),
    ("insp-text-empty", "--text an empty file", POSVEC + ["inspect", "tiny-local", "--text",
                                                         str(TMP / "empty.txt"), "--out",
                                                         str(TMP / "o1")], "refuse", "--text",
     {}),
    ("insp-text-short", "--text too short for the windows", POSVEC + [
        "inspect", "tiny-local", "--text", str(TMP / "notes.txt"), "--length", "32", "--out",
        str(TMP / "o2")], "refuse", "notes.txt", {}),
    ("insp-text-corpus", "--text and --corpus together", POSVEC + [
        "inspect", "tiny-local", "--text", "/etc/hostname", "--corpus", "stdlib"], "refuse",
     "--corpus", {}),
    ("insp-corpus-missing", "--corpus a missing path", POSVEC + [
        "inspect", "tiny-local", "--corpus", "/nonexistent/c", "--length", "32", "--out",
        str(TMP / "o3")], "refuse", "/nonexistent/c", {}),
    ("insp-out-file", "--out under a file", POSVEC + ["inspect", "tiny-local", "--out",
                                                     "/etc/hostname/x"], "refuse", "--out", {}),
    ("insp-out-long", "--out with a 300-byte name", POSVEC + ["inspect", "tiny-local", "--out",
                                                             LONG], "refuse", "--out", {}),
    ("insp-threads", "--threads -2", POSVEC + ["inspect", "tiny-local", "--threads", "-2"],
     "refuse", "--threads", {}),
    ("insp-threads-huge", "--threads 100000", POSVEC + ["inspect", "tiny-local", "--threads",
                                                       "100000"], "refuse", "--threads", {}),
    ("insp-batch0", "--batch-size 0", POSVEC + ["inspect", "tiny-local", "--batch-size", "0"],
     "refuse", "--batch-size", {}),
    ("insp-baseline-neg", "--baseline-seeds -1", POSVEC + ["inspect", "tiny-local",
                                                           "--baseline-seeds", "-1"], "refuse",
     "--baseline-seeds", {}),
    ("insp-att0", "--attention-samples 0", POSVEC + ["inspect", "tiny-local",
                                                     "--attention-samples", "0"], "refuse",
     "--attention-samples", {}),
    ("insp-seed-neg", "--seed -1", POSVEC + ["inspect", "tiny-local", "--seed", "-1"], "refuse",
     "--seed", {}),
    # python -m posvec_lib.train / .finetune / .distributed
    ("train-variant", "train an unknown variant", TRAIN + [*S, "--variant", "ropee"], "refuse",
     "ropee", {}),
    ("train-variant-dup", "train a variant twice", TRAIN + [*S, "--variant", "rope", "rope"],
     "refuse", "rope", {}),
    ("train-variant-none", "--variant with no names", TRAIN + [*S, "--variant"], "refuse",
     "--variant", {}),
    ("train-badset", "train with a negative knob", TRAIN + [*S, "--set", "train_steps=-1"],
     "refuse", "train_steps", {}),
    ("train-dupset", "train with a knob twice", TRAIN + [*S, "--set", "seed=1", "seed=2"],
     "refuse", "seed", {}),
    ("train-huge", "train for 10^8 steps", TRAIN + [*S, "--set", "train_steps=100000000"],
     "refuse", "train_steps", {}),
    ("train-profile", "train an unknown profile", TRAIN + ["--profile", "tiny"], "refuse", "tiny",
     {}),
    ("ft-target1", "finetune --target 1", FT + [*S, "--target", "1"], "refuse", "target", {}),
    ("ft-target-neg", "finetune --target -8", FT + [*S, "--target", "-8"], "refuse", "target", {}),
    ("ft-chunks0", "finetune --n-chunks 0", FT + [*S, "--method", "chunks", "--n-chunks", "0"],
     "refuse", "n_chunks", {}),
    ("ft-steps0", "finetune --steps 0", FT + [*S, "--steps", "0"], "refuse", "steps", {}),
    ("ft-method", "finetune --method posee", FT + [*S, "--method", "posee"], "refuse", "posee", {}),
    ("ft-deepspeed", "finetune --deepspeed a missing file", FT + [*S, "--deepspeed",
                                                                 "/nonexistent.json"], "refuse",
     "--deepspeed", {}),
    ("ft-base", "finetune an unknown base", FT + [*S, "--base", "nope_x"], "refuse", "nope_x", {}),
    ("ft-huge", "finetune for 10^8 steps by a knob", FT + [*S, "--set", "pose_steps=100000000"],
     "refuse", "pose_steps", {}),
    ("dist-noargs", "distributed without its options", DIST + ["positional"], "refuse", "--model",
     {}),
    ("dist-what", "distributed of an unknown measure", DIST + ["positionals", "--model", "x",
                                                              "--samples", "x", "--out", "y"],
     "refuse", "positionals", {}),
    ("dist-samples-missing", "--samples a missing file", DIST + [
        "positional", "--model", "x", "--samples", "/nonexistent.pt", "--out", str(TMP / "o.pt")],
     "refuse", "--samples", {}),
    ("dist-samples-text", "--samples a text file", DIST + [
        "positional", "--model", str(TMP / "model-dir"), "--samples", str(TMP / "not-a-tensor.pt"),
        "--out", str(TMP / "o.pt")], "refuse", "--samples", {}),
    ("dist-out-dir", "--out a folder", DIST + ["positional", "--model", "x", "--samples",
                                              str(TMP / "ids.pt"), "--out", str(TMP)], "refuse",
     "--out", {}),
    ("dist-out-missing", "--out in a missing folder", DIST + [
        "positional", "--model", "x", "--samples", str(TMP / "ids.pt"), "--out",
        "/nonexistent/o.pt"], "refuse", "--out", {}),
    ("dist-model-missing", "--model a missing folder", DIST + [
        "positional", "--model", "/nonexistent/m", "--samples", str(TMP / "ids.pt"), "--out",
        str(TMP / "o.pt")], "refuse", "/nonexistent/m", {"HF_HUB_OFFLINE": "1"}),
    ("dist-batch0", "--batch-size 0", DIST + ["positional", "--model", "x", "--samples",
                                              str(TMP / "ids.pt"), "--out", str(TMP / "o.pt"),
                                              "--batch-size", "0"], "refuse", "--batch-size", {}),
]


# why a case that is unclear or silent stays so (filled from the last round)
STAYS = {
    "path-evalcorpus-tiny": "the error line names eval_corpus and both reasons; above it the "
                            "datasets library draws its 'Generating train split' progress bar the "
                            "first time it reads a local corpus (the check counts its documents); "
                            "the Python warning about a small corpus that stood there is silenced",
    "insp-text-short": "whether a text yields windows of --length tokens is known only once the "
                       "model's tokenizer has read it, so the refusal (naming --text, --length and "
                       "--samples) comes after the model's loading lines; nothing is measured or "
                       "written",
}


def run_case(case, timeout=180):
    cid, what, argv, expect, names, env = case
    e = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    e.pop("POSVEC_HOME", None)
    e.update(env)
    before = set(os.listdir(ROOT))
    t0 = time.time()
    try:
        r = subprocess.run(argv, cwd=ROOT, env=e, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=timeout, errors="replace")
        rc, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as x:
        rc, out, err = None, "", (x.stderr or b"").decode(errors="replace") if isinstance(
            x.stderr, bytes) else (x.stderr or "")
    wall = time.time() - t0
    wrote = sorted(set(os.listdir(ROOT)) - before)
    lines = [l for l in err.splitlines() if l.strip()]
    errs = [l for l in lines if re.match(r"^(posvec|python -m posvec_lib\.\w+|usage|\S+\.py)"
                                         r"[^:]*: error: ", l)]
    notes = [l for l in lines if not l.startswith(("usage:", " ")) and l not in errs
             and ": note:" not in l and "Warning" not in l]
    line = errs[-1] if errs else (lines[-1] if lines else "")
    if rc is None: outcome = "lost"
    elif SENTINEL.exists(): outcome = "security"
    elif "Traceback (most recent call last)" in err or rc not in (0, 1, 2): outcome = "crash"
    elif rc == 2 and errs and names.lower() in errs[-1].lower() and not notes: outcome = "clear"
    elif rc == 2: outcome = "unclear"
    elif expect == "refuse": outcome = "silent"
    elif rc == 0: outcome = "handled"
    else: outcome = "unclear"
    if SENTINEL.exists(): SENTINEL.unlink()
    shown = line if outcome != "handled" else (out.strip().splitlines() or [""])[-1]
    if wrote: shown += f" [wrote {wrote} in the clone]"
    return dict(id=cid, what=what, expect=expect, rc=rc, outcome=outcome, wall=wall,
                line=shown[:300], wrote=wrote)


def table(rows) -> str:
    counts = {k: sum(r["outcome"] == k for r in rows)
              for k in ("clear", "handled", "unclear", "silent", "crash", "lost", "security")}
    md = ["# CLI tester round", "",
          f"{len(rows)} everyday mistakes, run by `python benchmarks/cli_tester_round.py` "
          "(stdin not a terminal, cwd the clone, `smoke` profile or `--dry-run`). Outcomes: "
          + ", ".join(f"{k} {v}" for k, v in counts.items()) + ".", "",
          "| case | mistake | exit | outcome | what the user sees (last line) |",
          "|---|---|---|---|---|"]
    esc = lambda s: s.replace("|", "\\|").replace("\n", " ")
    for r in rows:
        md.append(f"| {r['id']} | {esc(r['what'])} | {r['rc']} | {r['outcome']} | "
                  f"`{esc(r['line'])}` |")
    left = [r for r in rows if r["outcome"] in ("unclear", "silent", "crash", "lost", "security")]
    if left:
        md += ["", "## Cases that stay", ""]
        md += [f"* {r['id']} ({r['outcome']}): {STAYS.get(r['id'], 'not yet looked at')}"
               for r in left]
    return "\n".join(md) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "cli-tester-round.md"))
    ap.add_argument("--only", default=None, help="comma-separated case ids")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    _ids()
    cases = [c for c in CASES if a.only is None or c[0] in a.only.split(",")]
    def one(c):
        r = run_case(c)
        print(f"{r['outcome']:<8} {r['rc']!s:>4} {r['wall']:5.1f}s {r['id']:<22} "
              f"{r['line'][:150]}", flush=True)
        return r
    with ThreadPoolExecutor(a.jobs) as ex: rows = list(ex.map(one, cases))
    if a.only is None: Path(a.out).write_text(table(rows))
    return 0


if __name__ == "__main__": sys.exit(main())
