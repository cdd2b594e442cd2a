"""The Markdown report: the same sections as the HTML one, as GitHub-flavoured Markdown.

Every piece of user text goes through ``md_cell`` (pipes, newlines and HTML defused).
"""

from __future__ import annotations

from workbench.eval.attribution import CAUSES
from workbench.eval.measures import shown
from workbench.eval.metrics import DEFAULT_FAMILIES
from workbench.export.report import KS, Report, pair_text
from workbench.tune.scorecard_markdown import md_cell, scorecard_markdown


def render_markdown(report: Report) -> str:
    r = report.run
    out = [
        f"# {md_cell(report.title)}",
        "",
        f"Run **{md_cell(r.get('name') or r['run_id'])}** (`{r['run_id']}`), config "
        f"`{r['config_hash']}`, dataset "
        f"{md_cell(r['dataset'])} (`{r['dataset_hash']}`), split {r['split']}, mode "
        f"{report.mode}, rerank {'on' if r['rerank'] else 'off'}, {r['queries']} queries.",
        *(f"\n> {md_cell(n)}" for n in report.notes),
        "",
        "## Metrics",
        "",
        " · ".join(f"**{m}** {report.means.get(m, 0):.3f}" for m in shown("headline"))
        + f" · **p50** {report.latency.get('p50', 0):.1f} ms"
        + f" · **p95** {report.latency.get('p95', 0):.1f} ms",
        "",
        "| measure | " + " | ".join(f"@{k}" for k in KS) + " |",
        "|---|" + "---:|" * len(KS),
    ]
    for m in DEFAULT_FAMILIES:
        out.append(
            f"| {m} | " + " | ".join(f"{report.means.get(f'{m}@{k}', 0):.3f}" for k in KS) + " |"
        )
    out += [
        "",
        f"MRR {report.means.get('mrr', 0):.3f}, MAP {report.means.get('map', 0):.3f}.",
        "",
        "## Results",
        "",
        "| id | query | difficulty | category | recall@5 | mrr | first relevant rank | cause |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for q in report.queries:
        out.append(
            f"| {md_cell(q['id'])} | {md_cell(q['query'])} | {md_cell(q['difficulty'])} | "
            f"{md_cell(q['category'])} | {q['recall@5']:.2f} | {q['mrr']:.2f} | "
            f"{q['first_relevant_rank'] or '-'} | {CAUSES.get(q['cause'], q['cause']) or '-'} |"
        )
    out += ["", "## Categories", ""]
    for by, groups in report.breakdowns.items():
        out += [
            f"### By {by}",
            "",
            "| group | n | recall@5 | mrr | hit@5 |",
            "|---|---:|---:|---:|---:|",
        ]
        for g, v in groups.items():
            out.append(
                f"| {md_cell(g)} | {v.get('n', 0)} | {v.get('recall@5', 0):.3f} | "
                f"{v.get('mrr', 0):.3f} | {v.get('hit@5', 0):.3f} |"
            )
        out.append("")
    out += ["## Failures", ""]
    if not report.failures:
        out.append("No query missed a relevant chapter in the top 5.")
    for f in report.failures:
        out.append(
            f"- **{md_cell(f['label'])}** ({len(f['queries'])}): "
            + "; ".join(f"{md_cell(q['id'])} {md_cell(q['query'])}" for q in f["queries"])
        )
    out += ["", "## Optimizations", ""]
    if not report.optimizations:
        out.append("No experiments yet (`wikirag experiment try` or `wikirag optimize`).")
    else:
        out += [
            "| # | date | tier | change | decision | tune recall@5 | tune mrr | holdout recall@5 |",
            "|---:|---|---|---|---|---|---|---|",
        ]
        for o in report.optimizations:
            out.append(
                f"| {o['number']} | {md_cell(o['date'])} | {md_cell(o['tier'])} | "
                f"{md_cell(o['title'])} | {md_cell(o['decision'])} | {pair_text(o['tune_recall@5'])} | "
                f"{pair_text(o['tune_mrr'])} | {pair_text(o['holdout_recall@5'])} |"
            )
        if report.trajectory:
            out += [
                "",
                "Trajectory (tune recall@5 after each experiment): "
                + " → ".join(f"{p.get('recall@5', 0):.3f}" for p in report.trajectory),
            ]
    if report.study:
        st = report.study
        by_number = {t["number"]: t for t in st.get("trials", [])}
        pick, best = by_number.get(st.get("pick")), by_number.get(st.get("best"))
        out += [
            "",
            f"Latest search `{st['study_id']}`: {len(by_number)} trials (seed {st['seed']}), "
            f"{st['k_folds']}-fold CV {st['measure']} on {st['queries']} tune queries: "
            f"baseline {st['baseline_score']:.4f}, best trial {st.get('best')} "
            f"{(best or {}).get('value') or 0:.4f}, picked trial {st.get('pick')} "
            f"{(pick or {}).get('value') or 0:.4f} "
            + (f"(experiment {st['experiment']})." if st.get("experiment") else "(not submitted)."),
        ]
    out += ["", "## Recommendations", ""]
    out += _md_recommendations(report)
    out += ["", "## Scorecard", ""]
    if report.scorecard:
        out.append(scorecard_markdown(report.scorecard, heading="###"))
    else:
        out.append("No scorecard in this report; run `wikirag scorecard`.")
    return "\n".join(out).rstrip() + "\n"


def _md_recommendations(report: Report) -> list[str]:
    if not report.recommendations:
        return ["No scorecard weaknesses to act on (run `wikirag scorecard`)."]
    out = []
    for n, r in enumerate(report.recommendations, 1):
        out.append(f"{n}. **{md_cell(r['dimension'])}** ({r['score']:.1f}): {md_cell(r['rule'])}")
        if r["command"]:
            out.append(f"   - `{r['command']}` — {md_cell(r['experiment']['why'])}")
        if r["action"]:
            out.append(f"   - {md_cell(r['action'])}")
    return out
