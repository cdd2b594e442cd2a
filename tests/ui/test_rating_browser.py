"""Rate in place, in a real Chromium: compare two configs, follow "N unjudged in top 10",
rate three chapters with the keyboard (one graded 3), see nDCG and the unjudged share move."""

from __future__ import annotations

import re
import shutil
import time

import pytest

from engine.config import EngineConfig
from tests.ui.conftest import FAST
from tests.ui.test_browser import CHROMIUM, SHOTS, _serve, browser  # noqa: F401 (fixture)
from workbench.eval import judgments as J

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium"),
]

TEXT = {
    "en": {
        "h1": "Golden set",
        "compare": "Compare",
        "link": r"(\d+) unjudged in top 10 → rating queue",
        "name": "Your name (for ratings)",
        "unjudged": "baseline: unjudged in top 10",
        "ndcg": "baseline: nDCG@10",
    },
    "zh": {
        "h1": "黄金集",
        "compare": "对比",
        "link": r"前 10 中有 (\d+) 个未评判 → 评分队列",
        "name": "你的名字（用于评分）",
        "unjudged": "baseline：前 10 中未评判",
        "ndcg": "baseline：nDCG@10",
    },
}


def _metric(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]', has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text()


def _settle(page) -> None:
    page.wait_for_timeout(400)
    page.locator('[data-testid="stStatusWidget"]').wait_for(state="detached", timeout=120_000)
    page.wait_for_timeout(400)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_rate_three_chapters_with_the_keyboard(ui_workspace, browser, tmp_path, monkeypatch, lang):  # noqa: F811
    root = tmp_path / "ws"
    shutil.copytree(ui_workspace["root"], root)
    ws = {k: root / v.relative_to(ui_workspace["root"]) for k, v in ui_workspace.items()}
    ws["root"] = root
    variant = root / "keyword.yaml"
    EngineConfig().with_overrides({**FAST, "search.mode": "keyword"}).save(variant)
    monkeypatch.setenv("WIKIRAG_CONFIG", str(variant))
    tx = TEXT[lang]
    judged = J.path_for(ws["dataset"])
    with _serve(ws, lang) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 2400})
        try:
            page.goto(f"{url}/golden_set", wait_until="domcontentloaded", timeout=60_000)
            page.locator("h1", has_text=tx["h1"]).first.wait_for(timeout=60_000)
            _settle(page)
            page.get_by_role("button", name=tx["compare"], exact=True).click()
            link = page.get_by_role("button", name=re.compile(tx["link"]))
            link.wait_for(timeout=180_000)
            n_before = int(re.search(tx["link"], link.inner_text()).group(1))  # type: ignore[union-attr]
            before = (_metric(page, tx["ndcg"]), _metric(page, tx["unjudged"]))
            link.click()
            page.wait_for_function(  # a page link is a client-side navigation: no load event
                "() => location.search.includes('queue=unjudged')", timeout=60_000
            )
            _settle(page)
            name = page.get_by_label(tx["name"])
            name.fill("ana")
            name.press("Enter")
            _settle(page)
            page.locator("h1").first.click()  # focus off the text box: keys go to shortcuts
            for n, key in enumerate(["3", "2", "0"], 1):
                page.keyboard.press(key)
                deadline = time.time() + 60
                while len(J.read(judged)) < n and time.time() < deadline:
                    page.wait_for_timeout(200)
                _settle(page)
            rows = J.read(judged)
            assert [(j.grade, j.rater) for j in rows] == [(3, "ana"), (2, "ana"), (0, "ana")]
            assert len({(j.query_id, j.node_id) for j in rows}) == 3
            after = (_metric(page, tx["ndcg"]), _metric(page, tx["unjudged"]))
            assert after[1] != before[1]  # three fewer unjudged slots
            assert float(after[1].rstrip("%")) < float(before[1].rstrip("%"))
            assert after[0] != before[0]  # a chapter graded 3 (and one 2) changes nDCG
            link_now = page.get_by_text(re.compile(tx["link"]))
            n_after = int(re.search(tx["link"], link_now.inner_text()).group(1))  # type: ignore[union-attr]
            assert n_after == n_before - 3
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"rating-queue-{lang}.png"), full_page=True)
            assert page.locator('[data-testid="stException"]').count() == 0
        finally:
            page.close()
