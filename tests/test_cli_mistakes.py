"One test per class of command-line mistake: exit 2 and one line naming the knob, before any work."
import io, os
from pathlib import Path
import pytest
from posvec_lib.cli import main as posvec

LONG = "/tmp/" + "a" * 300
SMOKE = ["--profile", "smoke"]

# (class of mistake, argv of `posvec`, what the one error line must contain)
CASES = [
    ("duplicate knob in one --set", ["list", *SMOKE, "--set", "eval_docs=3", "eval_docs=4"],
     "knob eval_docs is given twice ('eval_docs=3' and 'eval_docs=4'); allowed: each knob once"),
    ("duplicate knob over two --set", ["list", *SMOKE, "--set", "seed=1", "--set", "seed=2"],
     "knob seed is given twice"),
    ("unknown knob", ["list", *SMOKE, "--set", "eval_doc=3"],
     "unknown knob(s) ['eval_doc'] (did you mean eval_docs?)"),
    ("unknown profile", ["list", "--profile", "smok"],
     "unknown profile 'smok' (did you mean smoke?)"),
    ("wrong type", ["list", *SMOKE, "--set", "C=3.5"], "knob C=3.5 is not allowed"),
    ("out of range", ["list", *SMOKE, "--set", "lr=-0.1"], "knob lr=-0.1 is not allowed"),
    ("not a number", ["list", *SMOKE, "--set", "lr=nan"], "knob lr='nan' is not allowed"),
    ("path too long", ["list", *SMOKE, "--set", f"corpus={LONG}"],
     "longer than a file name may be (255 bytes)"),
    ("control character in a name", ["list", *SMOKE, "--set", "corpus=a\tb"],
     "control or invisible character"),
    ("missing path", ["reproduce", *SMOKE, "--only", "zoo", "--set", "corpus=/nonexistent/c"],
     "corpus='/nonexistent/c': corpus path does not exist"),
    ("combination of knobs", ["list", *SMOKE, "--set", "copy_share=0.8", "recall_share=0.3"],
     "must be ≤ 1"),
    ("duplicate artifact", ["reproduce", *SMOKE, "--dry-run", "--only", "zoo,zoo"],
     "--only names ['zoo'] twice"),
    ("option-like commit", ["compare", *SMOKE, "--against=--output=/tmp/x"],
     "--against '--output=/tmp/x' is not a commit name"),
    ("knob that cannot take effect", ["reproduce", *SMOKE, "--dry-run", "--set",
                                      "eval_docs=100000"],
     "eval_docs=100000 asks for more documents than the test split"),
    ("hours of work without a terminal", ["reproduce", *SMOKE, "--only", "pose_coverage", "--set",
                                          "mc_iterations=1000000000"],
     "most of it mc_iterations=1000000000; not started: pass --yes"),
]


@pytest.mark.parametrize("what,argv,says", CASES, ids=[c[0] for c in CASES])
def test_mistake_one_line(what, argv, says, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))           # not a terminal
    before = set(os.listdir(os.environ["POSVEC_HOME"]))
    rc = posvec(argv)
    err = capsys.readouterr().err
    errs = [l for l in err.splitlines() if l.startswith("posvec: error: ")]
    assert rc == 2 and len(errs) == 1 and says in errs[0], (rc, err)
    assert set(os.listdir(os.environ["POSVEC_HOME"])) == before      # nothing written


def test_argparse_mistakes_exit_2(capsys):
    for argv in (["reprodce"], ["list", "--profle", "smoke"], ["compare", "--against"]):
        with pytest.raises(SystemExit) as e: posvec(argv)
        assert e.value.code == 2


def test_oserror_from_a_path_is_one_line(capsys):
    from posvec_lib.cmdline import run_command
    rc = run_command("posvec", lambda: open(LONG))
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "File name too long" in err


def test_dry_run_says_the_hours(capsys):
    rc = posvec(["reproduce", *SMOKE, "--dry-run", "--only", "pose_coverage", "--set",
                 "mc_iterations=1000000000"])
    out = capsys.readouterr().out
    assert rc == 0 and "most of it mc_iterations; a run asks first (--yes goes on)" in out


def test_inspect_help_states_the_noise_minimum(capsys):
    with pytest.raises(SystemExit): posvec(["inspect", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "the ± need ≥ 8 (8 parts)" in out and "their ± need ≥ 4" in out


@pytest.mark.parametrize("module,argv,says", [
    ("train", [*SMOKE, "--variant", "ropee"], "ropee"),
    ("train", [*SMOKE, "--set", "seed=1", "seed=2"], "knob seed is given twice"),
    ("train", [*SMOKE, "--set", "train_steps=100000000"], "not started: pass --yes"),
    ("finetune", [*SMOKE, "--target", "1"], "target s=1"),
    ("finetune", [*SMOKE, "--deepspeed", "/nonexistent.json"], "--deepspeed"),
    ("distributed", ["positional", "--model", "x", "--samples", "/nonexistent.pt", "--out",
                     "o.pt"], "--samples '/nonexistent.pt': no such file"),
])
def test_module_command_lines(module, argv, says, capsys, monkeypatch):
    import importlib
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    rc = importlib.import_module(f"posvec_lib.{module}").main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and says in err, (rc, err)
