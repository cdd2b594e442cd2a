"""The tuning loop in Chromium on the bundled wiki, in English and Chinese: baseline vs a
change, the matrix named by config, a lost query opened by a click on its row, both ranked
lists with the gold chapter and the stage that lost it, the candidate run as an experiment,
its verdict in place and its entry in the log."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest

from tests.ui.conftest import REPO
from tests.ui.test_browser import CHROMIUM, SHOTS, _serve

CANDIDATE = "fusion.bm25_weight=0.5"
# language -> the words the flow reads and clicks
WORDS = {
    "en": {
        "h1": "Tune",
        "run": "Run the comparison",
        "headline": "Headline",
        "show": "Show",
        "lost": "lost (",
        "gold": "Gold:",
        "lost_at": "lost:",
        "experiment": "Run as experiment",
        "verdict": ("Rolled back", "Accepted"),
        "log": "in the log",
        "log_h1": "Experiments",
    },
    "zh": {
        "h1": "调优",
        "run": "运行对比",
        "headline": "总体变化",
        "show": "显示",
        "lost": "负 (",
        "gold": "标准答案：",
        "lost_at": "丢失：",
        "experiment": "作为实验运行",
        "verdict": ("已回滚", "已接受"),
        "log": "日志中的实验",
        "log_h1": "实验",
    },
}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
    ),
]


@pytest.fixture(scope="module")
def wiki_workspace(tmp_path_factory) -> dict[str, Path]:
    """The bundled wiki indexed once into a temporary folder, with a fresh experiment log."""
    from engine.config import EngineConfig
    from engine.indexer import build_index
    from engine.tree import parse_kb

    root = tmp_path_factory.mktemp("wikiws")
    ws = {
        "root": root,
        "kb": REPO / "wiki",
        "index": root / "index",
        "dataset": root / "datasets" / "wiki.yaml",
        "experiments": root / "experiments",
    }
    (root / "experiments" / "wiki").mkdir(parents=True)
    ws["dataset"].parent.mkdir()
    shutil.copy(REPO / "datasets" / "wiki.yaml", ws["dataset"])
    # The wiki's baseline with the hash embedder: the loop is the same, the index builds in
    # seconds instead of a minute of neural embedding (the suite has a time budget).
    cfg = EngineConfig.load(REPO / "experiments" / "wiki" / "baseline.yaml").with_overrides(
        {"embedding.provider": "hash"}
    )
    cfg.save(root / "experiments" / "wiki" / "baseline.yaml")
    build_index(parse_kb(REPO / "wiki"), cfg, str(ws["index"]))
    return ws


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
        )
        yield b
        b.close()


from playwright.sync_api import TimeoutError as PlaywrightTimeout  # noqa: E402


def _settle(page) -> None:  # type: ignore[no-untyped-def]
    page.wait_for_timeout(400)
    page.locator('[data-testid="stStatusWidget"]').wait_for(state="detached", timeout=180_000)
    page.wait_for_timeout(400)


def _body(page) -> str:  # type: ignore[no-untyped-def]
    return str(page.inner_text("body"))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_tuning_loop_in_chromium(wiki_workspace, browser, lang: str) -> None:
    w = WORDS[lang]
    with _serve(wiki_workspace, lang) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 2400})
        try:
            page.goto(f"{url}/tune", wait_until="domcontentloaded", timeout=60_000)
            page.locator("h1", has_text=w["h1"]).first.wait_for(timeout=60_000)
            _settle(page)
            box = page.get_by_placeholder("fusion.bm25_weight=0.5, fusion.k=30")
            box.fill(CANDIDATE)
            box.press("Enter")
            _settle(page)
            page.get_by_role("button", name=w["run"], exact=True).click()
            page.get_by_role("heading", name=w["headline"]).wait_for(timeout=180_000)
            _settle(page)
            spec = f"baseline+{CANDIDATE}"
            assert spec in _body(page)
            # the matrix's columns are the configs' names (the grid draws on a canvas: read
            # the names from the column headers glide-data-grid keeps for accessibility)
            headers = (
                page.locator('[data-testid="stDataFrame"]').nth(1).locator('[role="columnheader"]')
            )
            headers.filter(has_text=spec).first.wait_for(state="attached", timeout=60_000)
            # only the lost queries, then a click on the first (the one that lost most)
            page.get_by_role("combobox", name=w["show"]).click()
            page.get_by_role("option", name=w["lost"]).first.click()
            _settle(page)
            grid = page.locator('[data-testid="stDataFrame"]').nth(1)
            grid.scroll_into_view_if_needed()
            b = grid.bounding_box()
            assert b is not None
            heading = page.get_by_role("heading", level=4).first
            for _ in range(3):  # the first click can land while the grid still redraws
                page.wait_for_timeout(1000)
                page.mouse.click(b["x"] + 60, b["y"] + 52)  # a cell of the first row
                _settle(page)
                with contextlib.suppress(PlaywrightTimeout):
                    heading.wait_for(timeout=10_000)
                    break
            heading.wait_for(timeout=10_000)
            assert "q" in heading.inner_text()
            body = _body(page)
            assert body.count(w["gold"]) >= 2, "each config's column names the gold chapters"
            assert w["lost_at"] in body, "the stage that lost a gold chapter"
            assert "&q=" in page.url or "?q=" in page.url, page.url
            page.screenshot(path=str(SHOTS / f"{lang}-tune-loop.png"))
            page.get_by_role("button", name=w["experiment"]).first.click()
            page.get_by_role("link", name=w["log"]).last.wait_for(timeout=180_000)
            _settle(page)
            body = _body(page)
            assert any(v in body for v in w["verdict"]), body[-2000:]
            link = page.get_by_role("link", name=w["log"]).last
            link.click()
            page.locator("h1", has_text=w["log_h1"]).first.wait_for(timeout=60_000)
            _settle(page)
            assert "experiment=" in page.url
            # the log page streams its entries after the status widget goes; wait for the
            # entry's text rather than reading the body once (a busy machine lagged here)
            page.wait_for_function(
                "s => document.body.innerText.includes(s)", arg=spec, timeout=60_000
            )
            assert spec in _body(page), "the experiment's entry is open in the log"
            assert page.locator('[data-testid="stException"]').count() == 0
        except Exception:
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"{lang}-tune-loop-failed.png"))
            raise
        finally:
            page.close()
