"The batch's progress line at smoke: plain lines into a pipe, one redrawn line on a terminal."
import os, re, subprocess, sys, time
import pytest

pytestmark = pytest.mark.slow   # runs the `posvec` command in a subprocess

ARGS = [sys.executable, "-m", "posvec_lib.cli", "reproduce", "--profile", "smoke",
        "--only", "pose_coverage", "--force"]          # the cheapest artifact at smoke (~20 s)
LINE = re.compile(r"\[1/1\] pose_coverage · [\d.]+ min in \(batch [\d.]+ min\) · "
                  r"left (\?|~[\d.]+ min) \(batch (\?|~[\d.]+ min)\) · (cell \d+/\d+|starting)")


def env():
    return dict(os.environ, POSVEC_HEARTBEAT_S="0.5", COLUMNS="250", OMP_NUM_THREADS="1")


def on_terminal(root) -> str:
    "The command's output as a terminal (a pseudo-terminal) shows it, bytes as written."
    main, sub = os.openpty()
    p = subprocess.Popen(ARGS, cwd=root, env=env(), stdin=subprocess.DEVNULL, stdout=sub,
                         stderr=sub)
    os.close(sub)
    out = b""
    while True:
        try: chunk = os.read(main, 4096)
        except OSError: break                           # EIO: the terminal closed
        if not chunk: break
        out += chunk
    os.close(main)
    assert p.wait(timeout=300) == 0, out.decode(errors="replace")[-3000:]
    return out.decode(errors="replace")


def newest_batch_log(root, since: float):
    logs = [f for f in (root / "runs" / "smoke").glob("reproduce-*.log")
            if f.stat().st_mtime >= since]
    return max(logs, key=lambda f: f.stat().st_mtime).read_text()


def test_progress_in_a_pipe_and_on_a_terminal(root):
    t0 = time.time()
    r = subprocess.run(ARGS, cwd=root, env=env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "\r" not in r.stdout and "\x1b[" not in r.stdout           # plain lines in a pipe
    beats = [ln for ln in r.stdout.splitlines() if LINE.search(ln)]
    assert len(beats) >= 2, r.stdout                                    # every 0.5 s
    assert any(re.search(r"cell \d+/\d+ · \S", ln) for ln in beats), beats   # a line of its log
    assert r.stdout.count("its log: ") == 1 and "runs/smoke/pose_coverage.log" in r.stdout
    assert sum(bool(LINE.search(ln)) for ln in newest_batch_log(root, t0).splitlines()) >= 2

    t1 = time.time()   # now pose_coverage has a recorded run: the terminal shows an estimate
    screen = on_terminal(root)
    drawn = screen.split("\r\x1b[K")
    beats = [d for d in drawn if LINE.match(d)]
    assert len(beats) >= 2, screen[-3000:]
    assert all("\n" not in d for d in beats), beats                  # redrawn in place
    assert any(re.search(r"left ~[\d.]+ min \(batch ~[\d.]+ min\)", d) for d in beats), beats
    # a log line clears the progress line first, and the estimate is reported beside the time
    assert re.search(r"\r\x1b\[K\[[\d:]+\] \[1/1\] pose_coverage: ok in \d+s \(estimated \d+s\)",
                     screen), screen[-2000:]
    log = newest_batch_log(root, t1)
    assert "\r" not in log and sum(bool(LINE.search(ln)) for ln in log.splitlines()) >= 2
