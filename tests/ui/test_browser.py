"""Every page in a real headless Chromium against `streamlit run` on 127.0.0.1; screenshots."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ui.conftest import REPO
from workbench.commands.ui_cmd import streamlit_argv

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = REPO / "test-artifacts" / "screenshots"
# url path -> (h1, text the page must show once loaded)
PAGES = {
    "": ("Overview", "Documents"),
    "knowledge_base": ("Knowledge base", "Chapter tree"),
    "golden_set": ("Golden set", "Label relevant chapters"),
    "evaluate": ("Evaluate", "Run evaluation"),
    "compare": ("Compare & sweep", "Compare"),
    "experiments": ("Experiments", "One change"),
    "scorecard": ("Scorecard", "Scorecard"),
    "chat": ("Chat", "Chat"),
    "reports": ("Reports", "Reports"),
}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def filled_workspace(ui_workspace: dict[str, Path], tmp_path_factory) -> dict[str, Path]:
    """A copy of the UI workspace with one saved run and one experiment, as a user would have."""
    from workbench.eval import golden
    from workbench.eval.engines import evaluator
    from workbench.eval.run_record import save_run
    from workbench.tune.experiments import run_experiment
    from workbench.workspace import resolve

    root = tmp_path_factory.mktemp("browser") / "ws"
    shutil.copytree(ui_workspace["root"], root)
    ws = {k: root / v.relative_to(ui_workspace["root"]) for k, v in ui_workspace.items()}
    ws["root"] = root
    w = resolve(ws["kb"], ws["index"], dataset=ws["dataset"], experiments_root=ws["experiments"])
    cfg = w.load_config()
    ev = evaluator(w, cfg)
    save_run(ev.run(golden.load(ws["dataset"]), cfg, modes=["hybrid", "keyword"]), w.runs_dir)
    run_experiment(w, lambda c: evaluator(w, c), {"fusion.bm25_weight": 2.0})
    return ws


@contextlib.contextmanager
def _serve(ws: dict[str, Path], lang: str) -> Iterator[str]:
    port = _free_port()
    app_args = argparse.Namespace(
        port=port, kb=ws["kb"], index=ws["index"], dataset=ws["dataset"],
        experiments=ws["experiments"], lang=lang,
    )  # fmt: skip
    cmd = streamlit_argv(app_args, server_options=("--server.fileWatcherType", "none"))
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "WIKIRAG_LLM_MODEL")}
    proc = subprocess.Popen(
        cmd, cwd=ws["root"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"streamlit exited: {proc.stderr.read().decode()[-2000:]}")
                time.sleep(0.5)
        else:
            pytest.fail("streamlit did not become healthy within 60 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def server(filled_workspace: dict[str, Path]) -> Iterator[str]:
    with _serve(filled_workspace, "en") as url:
        yield url


@pytest.fixture(scope="module")
def server_zh(filled_workspace: dict[str, Path]) -> Iterator[str]:
    with _serve(filled_workspace, "zh") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield b
        b.close()


def _open(browser, url: str, h1: str):  # type: ignore[no-untyped-def]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1500})
    page.goto(url, wait_until="domcontentloaded", timeout=60_000)
    page.locator("h1", has_text=h1).first.wait_for(timeout=60_000)
    page.wait_for_timeout(300)
    page.locator('[data-testid="stStatusWidget"]').wait_for(state="detached", timeout=90_000)
    page.wait_for_timeout(500)
    return page


@pytest.mark.parametrize("path", list(PAGES))
def test_page_renders_in_chromium(server: str, browser, path: str) -> None:
    h1, key_text = PAGES[path]
    page = browser.new_page(viewport={"width": 1400, "height": 1500})
    try:
        page.goto(f"{server}/{path}", wait_until="domcontentloaded", timeout=60_000)
        page.locator("h1", has_text=h1).first.wait_for(timeout=60_000)
        page.wait_for_timeout(300)  # let the script run start before waiting for its end
        page.locator('[data-testid="stStatusWidget"]').wait_for(state="detached", timeout=90_000)
        page.wait_for_function(  # lazily loaded widgets show skeletons first
            "!document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=90_000
        )
        charts = page.locator('[data-testid="stPlotlyChart"]').count()
        if charts:  # plotly draws after the script run ends
            page.wait_for_function(
                "n => document.querySelectorAll('.js-plotly-plot .main-svg').length >= n",
                arg=charts,
                timeout=90_000,
            )
        page.wait_for_timeout(500)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{path or 'overview'}.png"), full_page=True)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert key_text in page.inner_text("body")
    finally:
        page.close()


def test_chat_answers_in_chromium(server: str, browser) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1500})
    try:
        page.goto(f"{server}/chat", wait_until="domcontentloaded", timeout=60_000)
        page.locator("h1", has_text="Chat").first.wait_for(timeout=60_000)
        box = page.locator('[data-testid="stChatInputTextArea"]')
        box.fill("父子块检索的数据结构是什么？")
        box.press("Enter")
        page.locator('[data-testid="stChatMessage"]').nth(1).wait_for(timeout=90_000)
        # Wait for the answer's citation itself: under load the status widget can detach
        # between reruns while the answer is still being drawn (seen on a loaded CI run).
        page.wait_for_function("() => document.body.innerText.includes('[1]')", timeout=90_000)
        page.locator('[data-testid="stStatusWidget"]').wait_for(state="detached", timeout=90_000)
        page.wait_for_timeout(500)
        page.screenshot(path=str(SHOTS / "chat-answer.png"), full_page=True)
        assert page.locator('[data-testid="stException"]').count() == 0
        body = page.inner_text("body")
        assert "extractive" in body and "[1]" in body
    finally:
        page.close()


# url path -> the Chinese h1
PAGES_ZH = {"": "概览", "evaluate": "评测", "experiments": "实验", "chat": "对话"}


@pytest.mark.parametrize("path", list(PAGES_ZH))
def test_chinese_ui_in_chromium(server_zh: str, browser, path: str) -> None:
    page = _open(browser, f"{server_zh}/{path}", PAGES_ZH[path])
    try:
        page.screenshot(path=str(SHOTS / f"zh-{path or 'overview'}.png"), full_page=True)
        assert page.locator('[data-testid="stException"]').count() == 0
        nav = page.inner_text('[data-testid="stSidebarNav"]')
        assert "知识库" in nav and "黄金集" in nav  # navigation in Chinese
    finally:
        page.close()


def test_evaluate_failure_drilldown_in_chromium(server: str, browser) -> None:
    page = _open(browser, f"{server}/evaluate", "Evaluate")
    try:
        body = page.inner_text("body")
        assert "Failures" in body and "Gold chapters" in body
        page.screenshot(path=str(SHOTS / "evaluate-failures.png"), full_page=True)
    finally:
        page.close()


def test_a_click_on_a_golden_set_row_picks_that_query_to_label_in_chromium(
    server: str, browser
) -> None:
    page = _open(browser, f"{server}/golden_set", "Golden set")
    try:
        picker = page.get_by_role("combobox", name="Query to label")
        assert picker.input_value().startswith("q001 · ")  # the first query before any click
        grid = page.locator('[data-testid="stDataFrame"]').first
        for _ in range(3):  # a click can land while the grid still redraws
            box = grid.bounding_box()
            assert box is not None
            page.mouse.click(box["x"] + 60, box["y"] + 35 + 35 * 2 + 17)  # the third row
            page.wait_for_timeout(300)
            page.locator('[data-testid="stStatusWidget"]').wait_for(state="detached")
            page.wait_for_timeout(300)
            if picker.input_value().startswith("q003 · "):
                break
        page.screenshot(path=str(SHOTS / "golden-set-click.png"), full_page=True)
        assert picker.input_value().startswith("q003 · ")
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        page.close()
