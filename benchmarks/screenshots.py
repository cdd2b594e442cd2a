"""The README's screenshots, from the bundled wiki in headless Chromium, in both languages.

``make screenshots`` (or ``python benchmarks/screenshots.py [--out docs/screenshots]``)
copies the wiki's index, golden set and experiment log to a temporary folder (so the
experiment it runs from the Tune page does not enter the real log), serves the workbench
on 127.0.0.1 and photographs every page, then the tuning loop: baseline vs
``fusion.bm25_weight=0.5``, a lost query opened, the candidate run as an experiment.
Needs /usr/bin/chromium, playwright and fonts-noto-cjk (for the Chinese pages).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from workbench.commands.ui_cmd import streamlit_argv

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
PAGES = ("", "knowledge_base", "golden_set", "evaluate", "compare", "experiments",
         "scorecard", "chat", "reports")  # fmt: skip
CANDIDATE = "baseline+fusion.bm25_weight=0.5"


def workspace(tmp: Path) -> dict[str, Path]:
    """A throwaway copy of the bundled wiki's workspace (the KB itself is only read)."""
    index = REPO / ".wikirag" / "wiki"
    if not (index / "manifest.json").is_file() and not any(index.glob("*")):
        subprocess.run(
            [sys.executable, "-m", "workbench.cli", "index", "--kb", str(REPO / "wiki")],
            check=True,
            cwd=REPO,
        )
    ws = {
        "kb": REPO / "wiki",
        "index": tmp / "index",
        "dataset": tmp / "datasets" / "wiki.yaml",
        "experiments": tmp / "experiments",
    }
    shutil.copytree(index, ws["index"])
    ws["dataset"].parent.mkdir(parents=True)
    shutil.copy(REPO / "datasets" / "wiki.yaml", ws["dataset"])
    shutil.copytree(REPO / "experiments", ws["experiments"])
    return ws


@contextlib.contextmanager
def serve(ws: dict[str, Path], lang: str) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app_args = argparse.Namespace(
        port=port, kb=ws["kb"], index=ws["index"], dataset=ws["dataset"],
        experiments=ws["experiments"], lang=lang,
    )  # fmt: skip
    cmd = streamlit_argv(app_args, server_options=("--server.fileWatcherType", "none"))
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "WIKIRAG_LLM_MODEL")}
    env.setdefault("HF_HUB_OFFLINE", "1")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r,
            ):
                if r.status == 200:
                    break
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def settle(page) -> None:  # type: ignore[no-untyped-def]
    """Wait for the script run to end and plotly charts to draw."""
    page.wait_for_timeout(400)
    page.locator('[data-testid="stStatusWidget"]').wait_for(state="detached", timeout=180_000)
    page.wait_for_function(
        "!document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=90_000
    )
    charts = page.locator('[data-testid="stPlotlyChart"]').count()
    if charts:
        page.wait_for_function(
            "n => document.querySelectorAll('.js-plotly-plot .main-svg').length >= n",
            arg=charts,
            timeout=90_000,
        )
    page.wait_for_timeout(600)


def tune_link(url: str, q: str | None = None) -> str:
    params = [("ref", "baseline"), ("cand", CANDIDATE)] + ([("q", q)] if q else [])
    return f"{url}/tune?{urllib.parse.urlencode(params)}"


def shoot(browser, url: str, lang: str, out: Path) -> None:  # type: ignore[no-untyped-def]
    prefix = "" if lang == "en" else f"{lang}-"
    # Streamlit scrolls inside its own container, so a tall window stands in for full_page.
    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    for path in PAGES:
        page.goto(f"{url}/{path}", wait_until="domcontentloaded", timeout=60_000)
        page.locator("h1").first.wait_for(timeout=60_000)
        settle(page)
        page.screenshot(path=str(out / f"{prefix}{path or 'overview'}.png"))
    page.set_viewport_size({"width": 1400, "height": 2600})
    page.goto(tune_link(url), wait_until="domcontentloaded", timeout=60_000)
    page.locator("h1").first.wait_for(timeout=60_000)
    page.get_by_role("heading", level=3).nth(1).wait_for(timeout=180_000)
    settle(page)
    # open the first query of the matrix (sorted by change: the one that moved most)
    grid = page.locator('[data-testid="stDataFrame"]').nth(1)
    heading = page.get_by_role("heading", level=4).first
    for _ in range(3):  # a click can land while the grid still redraws
        box = grid.bounding_box()
        if box:
            page.mouse.click(box["x"] + 60, box["y"] + 52)
        settle(page)
        if heading.count():
            break
    page.screenshot(path=str(out / f"{prefix}tune.png"))
    page.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "screenshots"))
    ap.add_argument("--lang", nargs="*", default=["en", "zh"])
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="wikirag-shots-") as tmp:
        ws = workspace(Path(tmp))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            for lang in args.lang:
                with serve(ws, lang) as url:
                    shoot(browser, url, lang, out)
            browser.close()
    print(f"screenshots in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
