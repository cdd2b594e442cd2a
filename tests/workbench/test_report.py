import csv
import io
import json
import re
from html.parser import HTMLParser

import pytest
from plotly.offline import get_plotlyjs

from engine.config import EngineConfig
from engine.pipeline import Ranked
from workbench.cli import main
from workbench.eval.attribution import Attribution
from workbench.eval.golden import GoldenItem
from workbench.eval.run_record import DatasetRef, QueryRecord, RunRecord, save_run
from workbench.export.formats import render_csv, render_json
from workbench.export.html_report import render_html
from workbench.export.markdown_report import render_markdown
from workbench.export.report import SECTIONS, build_report
from workbench.tune.scorecard import build_scorecard

XSS = "<script>alert(1)</script>"
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "wbr", "source", "area", "base"}


class StrictParser(HTMLParser):
    """Fails on unbalanced tags (html.parser itself never raises)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.ids, self.tags = [], [], set(), []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> (open: {self.stack[-3:]})")
            return
        self.stack.pop()


def _miss(node_id, cause):
    """An attribution entry as evaluate.attribute writes it (ranks unknown here)."""
    return Attribution(node_id, cause, None, None, None, None, None, None)


def _run():
    rows = [
        ("q1", XSS, "easy", "rag", 1.0, 1.0, ["d#a", "d#b"], ("d#a",), None),
        ("q2", "RAG 的切块策略有哪些？", "medium", "检索", 0.0, 0.0, ["d#x"], ("d#b",), "cut_at_k"),
        ("q3", "a | pipe", "hard", "rag", 0.5, 0.5, ["d#x", "d#c"], ("d#c", "d#z"), "lost_in_both"),
    ]
    results = []
    for qid, q, diff, cat, r5, mrr, ranked, rel, cause in rows:
        item = GoldenItem(qid, q, rel, diff, cat)
        rk = tuple(Ranked(n, 1.0 / (i + 1), i + 1, None, i + 1, None) for i, n in enumerate(ranked))
        m = {"recall@5": r5, "mrr": mrr, "hit@5": float(r5 > 0), "ndcg@10": r5}
        attr = (_miss(rel[-1], cause),) if cause else ()
        results.append(QueryRecord(item, "hybrid", rk, m, 12.0, attr, cause))
    return RunRecord.of(
        EngineConfig(),
        results,
        run_id="20261129-120000-abcdef",
        created="2026-11-29T12:00:00Z",
        dataset=DatasetRef("wiki", "", "h"),
        split="all",
        modes=("hybrid",),
        rerank=False,
        kb="wiki",
    )


LOG = [
    {
        "number": 1,
        "title": "fusion.k=30 <b>",
        "date": "2026-11-29 12:00",
        "tier": "Tier 1 (quick wins)",
        "decision": "accepted",
        "baseline": {"tune": {"recall@5": 0.5, "mrr": 0.4}, "holdout": {"recall@5": 0.4}},
        "result": {"tune": {"recall@5": 0.6, "mrr": 0.45}, "holdout": {"recall@5": 0.5}},
    },
    {
        "number": 2,
        "title": "fusion.k=10",
        "date": "2026-11-29 12:05",
        "tier": "Tier 1 (quick wins)",
        "decision": "rolled back",
        "baseline": {"tune": {"recall@5": 0.6, "mrr": 0.45}, "holdout": {}},
        "result": {"tune": {"recall@5": 0.55, "mrr": 0.4}, "holdout": {}},
    },
]


@pytest.fixture(scope="module")
def report():
    run = _run()
    card = build_scorecard(run, kb=None, gs=None, engine_stats={})
    return build_report(None, run, scorecard=card, log_records=LOG)


@pytest.fixture(scope="module")
def page(report):
    return render_html(report)


def test_html_parses_and_has_every_section(page):
    p = StrictParser()
    p.feed(page)
    p.close()
    assert p.errors == [] and p.stack == []
    assert {sid for sid, _ in SECTIONS} <= p.ids
    assert page.startswith("<!DOCTYPE html>")
    assert '<meta charset="utf-8">' in page


def test_html_is_self_contained(page):
    p = StrictParser()
    p.feed(page)
    for tag, attrs in p.tags:
        assert not (tag == "script" and "src" in attrs), attrs
        assert not (tag == "link" and re.match(r"https?:", attrs.get("href", ""))), attrs
    assert not re.search(r"<script[^>]+src=", page)
    assert not re.search(r"<link[^>]+href=[\"']?https?:", page)
    assert "@import" not in page and "fonts.googleapis" not in page
    assert page.count(get_plotlyjs()[:500]) == 1  # plotly.js inlined exactly once
    assert page.count('class="plotly-graph-div"') >= 3  # categories x3, failures, trajectory
    assert '"Noto Sans CJK SC"' in page and '"Microsoft YaHei"' in page


def test_user_text_is_escaped(page):
    assert XSS not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "fusion.k=30 &lt;b&gt;" in page
    assert "RAG 的切块策略有哪些？" in page


def test_results_rows_and_first_relevant_rank(report):
    rows = {r["id"]: r for r in report.queries}
    assert rows["q1"]["first_relevant_rank"] == 1
    assert rows["q2"]["first_relevant_rank"] is None
    assert rows["q3"]["first_relevant_rank"] == 2
    assert [f["cause"] for f in report.failures] == ["lost_in_both", "cut_at_k"]
    assert [p["decision"] for p in report.trajectory] == ["baseline", "accepted", "rolled back"]
    assert len(report.recommendations) == 3


def test_markdown_sections(report):
    md = render_markdown(report)
    for _, title in SECTIONS:
        assert f"\n## {title}\n" in md
    assert "a \\| pipe" in md
    # Markdown viewers render raw HTML, so '<' is escaped
    assert XSS not in md and "&lt;script>alert(1)&lt;/script>" in md
    assert "wikirag experiment try --set" in md


def test_csv_one_row_per_query(report):
    rows = list(csv.reader(io.StringIO(render_csv(report))))
    assert rows[0][:4] == ["id", "query", "difficulty", "category"]
    assert len(rows) == 1 + 3
    assert rows[1][1] == XSS  # CSV keeps the text as it is


def test_json_round_trips(report):
    data = json.loads(render_json(report))
    assert {"metrics", "results", "categories", "failures", "optimizations"} <= set(data)
    assert data["scorecard"]["grade"] == report.scorecard["grade"]


def test_cli_without_runs_says_what_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "wiki").mkdir()
    assert main(["report", "--format", "md"]) == 2
    assert "run `wikirag eval` first" in capsys.readouterr().err


def test_cli_writes_every_format_from_the_latest_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "wiki").mkdir()
    save_run(_run(), tmp_path / "experiments" / "wiki" / "runs")
    for fmt in ("md", "csv", "json", "trec-run", "trec-qrels"):
        out = tmp_path / f"r.{fmt}"
        assert main(["report", "--format", fmt, "--no-scorecard", "--out", str(out)]) == 0
        assert out.read_text(encoding="utf-8")
    assert (tmp_path / "r.trec-run").read_text().splitlines()[0].startswith("q1 Q0 d#a 1 ")
    assert "q3 0 d#z 2" in (tmp_path / "r.trec-qrels").read_text()


def test_a_report_in_chinese_carries_its_scorecard_in_chinese():
    # What the Reports page does in the Chinese UI: the scorecard's prose and its frame
    # (headings, columns) both go through the UI's translator.
    from dataclasses import replace

    from workbench.tune.scorecard_markdown import scorecard_markdown
    from workbench.ui import i18n

    zh = i18n.catalog("zh")

    def tr(key: str) -> str:
        return zh.get(key, key)

    run = _run()
    card = build_scorecard(run, kb=None, gs=None, engine_stats={})
    english = build_report(None, run, scorecard=card, log_records=LOG)
    chinese = replace(english, scorecard=card.to_dict(tr))
    md = render_markdown(chinese, translate=tr)
    section = scorecard_markdown(card.to_dict(tr), heading="###", translate=tr)
    assert section in md
    assert scorecard_markdown(english.scorecard, heading="###") not in md
    assert section != scorecard_markdown(english.scorecard, heading="###")
