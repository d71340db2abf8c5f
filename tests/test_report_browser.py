"""REPORT.html renders in a real headless browser: title, the counts and the claims table on the first screen (1400×900),
no sideways scrolling at 1,400 px, one section per artifact, every image loaded, no errors; the page is at most 3 MB.

Debian's chromium (/usr/bin/chromium, installed by `make browser`, which `make test` runs) driven by playwright from the
dev extras. A missing browser FAILS the test with how to install it; POSVEC_SKIP_BROWSER=1 skips it instead.
The pages are served from localhost beside the artifact folders whose figures they reference, the way people view
them; negative controls show that the checker can fail.
"""
import functools, http.server, json, os, re, shutil, tempfile, threading
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
PROFILE = "cpu"
COMMITTED = ROOT / "figures" / PROFILE
VIEWPORT = {"width": 1400, "height": 900}
MAX_BYTES = 3_000_000
# As the machine notes say: without the background-networking flags Chromium keeps dialling out of a closed network.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
INSTALL = ("install Debian's chromium: `make browser` (runs `apt-get install -y chromium` as root), and the dev extras "
           "(`pip install -e '.[dev]'`, for playwright); or set POSVEC_SKIP_BROWSER=1 to skip this test")


def _need(what: str):
    "Fail (not skip) when the browser stack is missing, unless the user asked to skip."
    if os.environ.get("POSVEC_SKIP_BROWSER") == "1": pytest.skip(f"POSVEC_SKIP_BROWSER=1 ({what})")
    pytest.fail(f"{what}: {INSTALL}", pytrace=False)


def _chromium_path() -> str:
    for c in [os.environ.get("POSVEC_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")]:
        if c and os.access(c, os.X_OK): return c
    _need("no chromium found (looked at $POSVEC_CHROMIUM, /usr/bin/chromium, chromium and chromium-browser on PATH)")


@pytest.fixture(scope="module")
def browser():
    exe = _chromium_path()
    try: from playwright.sync_api import sync_playwright
    except ImportError: _need("the python package playwright is not installed")
    with tempfile.TemporaryDirectory(prefix="posvec-chromium-") as profile_dir, sync_playwright() as p:
        # a persistent context on a fresh, empty --user-data-dir (Playwright's own browser download is not used)
        ctx = p.chromium.launch_persistent_context(profile_dir, executable_path=exe, headless=True, args=CHROMIUM_ARGS,
                                                   viewport=VIEWPORT)
        try: yield ctx
        finally: ctx.close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    "A localhost http.server over a scratch folder: returns (folder, base url)."
    d = tmp_path_factory.mktemp("site")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(d)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try: yield d, f"http://127.0.0.1:{srv.server_address[1]}"
    finally: srv.shutdown(); srv.server_close()


def _serve(site, name: str, html: str, beside: Path) -> str:
    "Serve `html` in a folder of its own, beside links to the artifact folders of `beside` (whose figures it references)."
    d, base = site
    folder = d / Path(name).stem; folder.mkdir()
    for a in beside.iterdir():
        if a.is_dir(): (folder / a.name).symlink_to(a)
    (folder / name).write_text(html, encoding="utf-8")
    return f"{base}/{folder.name}/{name}"


def check_page(ctx, url: str, artifacts: list[str], n_images: int | None = None) -> dict:
    """Open `url` and return what it showed plus every problem found (an empty `problems` list = the page is fine).
    `n_images`: how many images the page must have (None: at least one)."""
    page = ctx.new_page()
    console, errors, failed = [], [], []
    def on_console(m):   # the browser's own request for /favicon.ico (the report declares none) is not the page's error
        if m.type == "error" and not (m.location or {}).get("url", "").endswith("/favicon.ico"):
            console.append(f"{m.text} ({(m.location or {}).get('url', '')[:80]})")
    page.on("console", on_console)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: failed.append(f"{r.url[:80]}: {r.failure}"))
    page.on("response", lambda r: failed.append(f"{r.url[:80]}: HTTP {r.status}") if r.status >= 400 else None)
    try:
        resp = page.goto(url, wait_until="load", timeout=20_000)
        first = page.evaluate("""() => {
            const t = document.querySelector('table#claims'), s = document.querySelector('p.summary');
            const rows = t ? [...t.querySelectorAll('tbody tr')] : [];
            const seen = e => { const r = e.getBoundingClientRect(); return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight; };
            return {summary_seen: !!s && seen(s), header_seen: !!t && seen(t.querySelector('thead')),
                    rows: rows.length, rows_seen: rows.filter(seen).length,
                    links: rows.filter(r => r.querySelector('td a[href^="#"]')).length,
                    verdicts: rows.map(r => r.querySelector('td.verdict').textContent.trim().split(' (')[0])};
        }""")
        # lazy figures below the first screen: load them all, then check each one
        page.evaluate("""() => Promise.all([...document.images].map(i => { i.loading = 'eager';
            return i.complete ? null : new Promise(ok => { i.onload = i.onerror = ok; }); }))""")
        info = page.evaluate("""() => ({
            width: document.documentElement.scrollWidth,
            title: document.title,
            h1: (document.querySelector('h1') || {}).textContent || '',
            summary: ((document.querySelector('p.summary') || {}).textContent || '').replace(/\\s+/g, ' ').trim(),
            h2: [...document.querySelectorAll('h2')].map(h => h.id),
            imgs: [...document.images].map(i => ({alt: i.alt, complete: i.complete, w: i.naturalWidth, h: i.naturalHeight,
                                                  shown: i.getBoundingClientRect().width})),
        })""")
        page.wait_for_timeout(100)    # let late console messages arrive
    finally: page.close()
    problems = []
    if resp is None or resp.status != 200: problems.append(f"page status {resp and resp.status}")
    if not info["h1"].startswith("Reproduction report") or PROFILE not in info["h1"]: problems.append(f"h1 is {info['h1']!r}")
    if not re.fullmatch(r"Claims: \d+ hold, \d+ fail, \d+ not measurable at this scale; \d+ checks not counted .*", info["summary"]):
        problems.append(f"summary paragraph is {info['summary'][:120]!r}")
    if not (first["summary_seen"] and first["header_seen"] and first["rows_seen"] >= 1):
        problems.append(f"first screen lacks the counts or the claims table: {first}")
    if first["links"] != first["rows"]: problems.append(f"claims rows without a link to their artifact: {first}")
    if set(first["verdicts"]) - {"holds", "fails", "not measurable"}: problems.append(f"claims verdicts {set(first['verdicts'])}")
    if info["width"] > VIEWPORT["width"]: problems.append(f"page is {info['width']} px wide, more than {VIEWPORT['width']}")
    if info["h2"] != artifacts: problems.append(f"h2 sections {info['h2']} != artifacts {artifacts}")
    bad = [i for i in info["imgs"] if not (i["complete"] and i["w"] > 0 and i["h"] > 0 and i["shown"] > 0)]
    if bad: problems.append(f"images not loaded: {bad}")
    if n_images is None and not info["imgs"]: problems.append("no images")
    if n_images is not None and len(info["imgs"]) != n_images: problems.append(f"{len(info['imgs'])} images, expected {n_images}")
    problems += [f"console error: {m}" for m in console] + [f"page error: {e}" for e in errors] + [f"request: {f}" for f in failed]
    return dict(info=info, first=first, console=console, errors=errors, failed=failed, problems=problems)


def _expected(figs: Path) -> tuple[list[str], int]:
    "The artifacts (one h2 each, in order) and the number of figures the report of `figs` must embed."
    from posvec_lib.reproduce import ARTIFACTS
    n = 0
    for a in ARTIFACTS:
        r = figs / a / "result.json"
        if r.exists(): n += len(json.loads(r.read_text())["figures"])
    return list(ARTIFACTS), n


@pytest.fixture(scope="module")
def fresh_report(tmp_path_factory):
    "REPORT.html written by the current code from the committed cpu results, in a scratch POSVEC_HOME."
    if not (COMMITTED / "zoo" / "result.json").exists(): pytest.fail(f"no committed results in {COMMITTED}", pytrace=False)
    home = tmp_path_factory.mktemp("home")
    shutil.copytree(COMMITTED, home / "figures" / PROFILE, ignore=shutil.ignore_patterns("*.pdf", "REPORT.*"))
    (home / "nbs").mkdir(); (home / "nbs" / "experiments").symlink_to(ROOT / "nbs" / "experiments")  # status() hashes them
    from posvec_lib.page import write_reports
    before = {f: f.read_bytes() for f in COMMITTED.glob("REPORT.*")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POSVEC_HOME", str(home))
        page = write_reports(PROFILE).with_suffix(".html")
    assert page == home / "figures" / PROFILE / "REPORT.html" and page.exists(), page
    assert {f: f.read_bytes() for f in COMMITTED.glob("REPORT.*")} == before, "write_reports touched the committed report"
    return page


def test_fresh_report_renders(browser, site, fresh_report):
    artifacts, n = _expected(fresh_report.parent)
    assert n > 0
    r = check_page(browser, _serve(site, "fresh.html", fresh_report.read_text(encoding="utf-8"), fresh_report.parent), artifacts, n)
    assert r["problems"] == [], r["problems"]


def test_committed_report_renders(browser, site):
    page = COMMITTED / "REPORT.html"
    if not page.exists(): pytest.skip(f"{page.relative_to(ROOT)} is not committed")
    artifacts, _ = _expected(COMMITTED)   # the images it embeds need not match results re-run since it was written
    r = check_page(browser, _serve(site, "committed.html", page.read_text(encoding="utf-8"), COMMITTED), artifacts)
    assert r["problems"] == [], (f"{page.relative_to(ROOT)} (regenerate it with posvec_lib.page.write_reports"
                                 f"({PROFILE!r}) if it is only out of date)", r["problems"])


CONTROLS = {   # injected into a copy of the fresh page: what the checker must then report
    "broken_img": ("<img alt='broken.png' src='data:image/png;base64,AAAA'>", "images not loaded"),
    "console_error": ("<script>console.error('x')</script>", "console error: x"),
    "page_error": ("<script>throw new Error('boom')</script>", "page error: "),
    "missing_resource": ("<img alt='gone.png' src='gone.png'>", "request: "),
    "too_wide": ("<div style='width:2000px'>a wide box outside a scrolling one</div>", "page is 2"),
    "lazy_figure_missing": ("<img alt='gone.png' src='zoo/gone.png' loading=lazy>", "request: "),
}


@pytest.mark.parametrize("control", list(CONTROLS))
def test_checker_catches_broken_pages(browser, site, fresh_report, control):
    snippet, expect = CONTROLS[control]
    artifacts, n = _expected(fresh_report.parent)
    html = fresh_report.read_text(encoding="utf-8")
    assert html.count("</body>") == 1
    r = check_page(browser, _serve(site, f"control_{control}.html", html.replace("</body>", snippet + "</body>"), fresh_report.parent), artifacts, n)
    assert any(p.startswith(expect) for p in r["problems"]), (control, r["problems"])


def test_checker_catches_a_missing_section(browser, site, fresh_report):
    "A page that lost an artifact's h2 (and so one section) is reported."
    artifacts, n = _expected(fresh_report.parent)
    html = fresh_report.read_text(encoding="utf-8")
    i = html.index('<h2 id="B_chunks">') if '<h2 id="B_chunks">' in html else html.rindex("<h2 ")
    html = html[:i] + html[i:].replace("<h2 ", "<h4 ", 1)
    r = check_page(browser, _serve(site, "control_missing_h2.html", html, fresh_report.parent), artifacts, n)
    assert any(p.startswith("h2 sections") for p in r["problems"]), r["problems"]


def test_checker_catches_claims_below_the_first_screen(browser, site, fresh_report):
    "A page whose claims table starts below 900 px is reported."
    artifacts, n = _expected(fresh_report.parent)
    html = fresh_report.read_text(encoding="utf-8").replace("<p class=summary>", "<div style='height:1000px'></div><p class=summary>", 1)
    r = check_page(browser, _serve(site, "control_pushed_down.html", html, fresh_report.parent), artifacts, n)
    assert any(p.startswith("first screen lacks") for p in r["problems"]), r["problems"]


@pytest.mark.parametrize("which", ["fresh", "committed"])
def test_report_is_small(which, tmp_path_factory, request):
    "REPORT.html is at most 3 MB: figures are referenced beside it, never embedded."
    page = request.getfixturevalue("fresh_report") if which == "fresh" else COMMITTED / "REPORT.html"
    if not page.exists(): pytest.skip(f"{page} is not committed")
    html = page.read_text(encoding="utf-8")
    assert page.stat().st_size <= MAX_BYTES, f"{page} is {page.stat().st_size / 1e6:.1f} MB (regenerate it if it is stale)"
    assert "data:image" not in html, "a figure is embedded"
