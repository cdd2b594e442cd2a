"""The Markdown report: the same sections as the HTML one, as GitHub-flavoured Markdown.

Every piece of user text goes through ``md_cell`` (pipes, newlines and HTML defused). The
report's own words are messages rendered with ``translate`` (English without one: what
`wikirag report` writes; the Reports page passes its translator).
"""

from __future__ import annotations

from workbench.eval.attribution import CAUSES
from workbench.eval.measures import shown
from workbench.eval.messages import Message, Translate
from workbench.eval.metrics import DEFAULT_FAMILIES
from workbench.export.report import KS, SECTIONS, Report, pair_text
from workbench.tune.catalog import tier_message, title_message
from workbench.tune.scorecard_markdown import md_cell, scorecard_markdown

BY = {"difficulty": "By difficulty", "category": "By category", "language": "By language"}


def _tr(translate: Translate | None, text: str) -> str:
    """A word of the report's own (a header, a cause, a difficulty) in the reader's language."""
    return translate(text) if translate and isinstance(text, str) and text else text


def render_markdown(report: Report, translate: Translate | None = None) -> str:
    tr = translate
    r = report.run
    titles = {sid: m.render(tr) for sid, m in SECTIONS}
    meta = Message(
        "Run **{name}** (`{run_id}`), config `{config}`, dataset {dataset} (`{dataset_hash}`), "
        "split {split}, mode {mode}, rerank {rerank}, {n} queries.",
        {
            "name": md_cell(r.get("name") or r["run_id"]),
            "run_id": r["run_id"],
            "config": r["config_hash"],
            "dataset": md_cell(r["dataset"]),
            "dataset_hash": r["dataset_hash"],
            "split": r["split"],
            "mode": report.mode,
            "rerank": Message("on") if r["rerank"] else Message("off"),
            "n": r["queries"],
        },
    )
    out = [
        f"# {md_cell(report.title_text(tr))}",
        "",
        meta.render(tr),
        *(f"\n> {md_cell(n)}" for n in report.note_texts(tr)),
        "",
        f"## {titles['metrics']}",
        "",
        " · ".join(f"**{m}** {report.means.get(m, 0):.3f}" for m in shown("headline"))
        + f" · **p50** {report.latency.get('p50', 0):.1f} ms"
        + f" · **p95** {report.latency.get('p95', 0):.1f} ms",
        "",
        f"| {_tr(tr, 'measure')} | " + " | ".join(f"@{k}" for k in KS) + " |",
        "|---|" + "---:|" * len(KS),
    ]
    for m in DEFAULT_FAMILIES:
        out.append(
            f"| {m} | " + " | ".join(f"{report.means.get(f'{m}@{k}', 0):.3f}" for k in KS) + " |"
        )
    head = ("id", "query", "difficulty", "category", "recall@5", "mrr", "first relevant rank")
    out += [
        "",
        f"MRR {report.means.get('mrr', 0):.3f}, MAP {report.means.get('map', 0):.3f}.",
        "",
        f"## {titles['results']}",
        "",
        "| " + " | ".join(_tr(tr, h) for h in (*head, "cause")) + " |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for q in report.queries:
        cause = CAUSES.get(q["cause"], q["cause"])
        out.append(
            f"| {md_cell(q['id'])} | {md_cell(q['query'])} | {md_cell(_tr(tr, q['difficulty']))} | "
            f"{md_cell(q['category'])} | {q['recall@5']:.2f} | {q['mrr']:.2f} | "
            f"{q['first_relevant_rank'] or '-'} | {_tr(tr, cause) if cause else '-'} |"
        )
    out += ["", f"## {titles['categories']}", ""]
    for by, groups in report.breakdowns.items():
        by_title = _tr(tr, BY[by]) if by in BY else Message("By {by}", {"by": by}).render(tr)
        out += [
            f"### {by_title}",
            "",
            f"| {_tr(tr, 'group')} | n | recall@5 | mrr | hit@5 |",
            "|---|---:|---:|---:|---:|",
        ]
        for g, v in groups.items():
            group = _tr(tr, g) if by == "difficulty" else g
            out.append(
                f"| {md_cell(group)} | {v.get('n', 0)} | {v.get('recall@5', 0):.3f} | "
                f"{v.get('mrr', 0):.3f} | {v.get('hit@5', 0):.3f} |"
            )
        out.append("")
    out += [f"## {titles['failures']}", ""]
    if not report.failures:
        out.append(Message("No query missed a relevant chapter in the top 5.").render(tr))
    for f in report.failures:
        out.append(
            f"- **{md_cell(_tr(tr, f['label']))}** ({len(f['queries'])}): "
            + "; ".join(f"{md_cell(q['id'])} {md_cell(q['query'])}" for q in f["queries"])
        )
    out += ["", f"## {titles['optimizations']}", ""]
    out += _md_optimizations(report, tr)
    out += ["", f"## {titles['recommendations']}", ""]
    out += _md_recommendations(report, tr)
    out += ["", f"## {titles['scorecard']}", ""]
    if report.scorecard:
        out.append(scorecard_markdown(report.scorecard, heading="###", translate=tr))
    else:
        out.append(Message("No scorecard in this report; run `wikirag scorecard`.").render(tr))
    return "\n".join(out).rstrip() + "\n"


def _md_optimizations(report: Report, tr: Translate | None) -> list[str]:
    out = []
    if not report.optimizations:
        out.append(
            Message("No experiments yet (`wikirag experiment try` or `wikirag optimize`).").render(
                tr
            )
        )
    else:
        head = ("date", "tier", "change", "decision", "tune recall@5", "tune mrr")
        out += [
            "| # | " + " | ".join(_tr(tr, h) for h in (*head, "holdout recall@5")) + " |",
            "|---:|---|---|---|---|---|---|---|",
        ]
        for o in report.optimizations:
            tier = tier_message(str(o["tier"])).render(tr)
            title = title_message(str(o["title"])).render(tr)
            out.append(
                f"| {o['number']} | {md_cell(o['date'])} | {md_cell(tier)} | "
                f"{md_cell(title)} | {md_cell(_tr(tr, str(o['decision'])))} | "
                f"{pair_text(o['tune_recall@5'])} | "
                f"{pair_text(o['tune_mrr'])} | {pair_text(o['holdout_recall@5'])} |"
            )
        if report.trajectory:
            out += [
                "",
                Message(
                    "Trajectory (tune recall@5 after each experiment): {points}",
                    {
                        "points": " → ".join(
                            f"{p.get('recall@5', 0):.3f}" for p in report.trajectory
                        )
                    },
                ).render(tr),
            ]
    if report.study:
        out += ["", _study_line(report.study, tr)]
    return out


def _study_line(st: dict, tr: Translate | None) -> str:
    by_number = {t["number"]: t for t in st.get("trials", [])}
    pick, best = by_number.get(st.get("pick")), by_number.get(st.get("best"))
    submitted = (
        Message("(experiment {n}).", {"n": st["experiment"]})
        if st.get("experiment")
        else Message("(not submitted).")
    )
    return Message(
        "Latest search `{id}`: {n} trials (seed {seed}), {k}-fold CV {measure} on {queries} "
        "tune queries: baseline {base}, best trial {best} {best_cv}, picked trial {pick} "
        "{pick_cv} {submitted}",
        {
            "id": st["study_id"],
            "n": len(by_number),
            "seed": st["seed"],
            "k": st["k_folds"],
            "measure": st["measure"],
            "queries": st["queries"],
            "base": f"{st['baseline_score']:.4f}",
            "best": st.get("best"),
            "best_cv": f"{(best or {}).get('value') or 0:.4f}",
            "pick": st.get("pick"),
            "pick_cv": f"{(pick or {}).get('value') or 0:.4f}",
            "submitted": submitted,
        },
    ).render(tr)


def _md_recommendations(report: Report, tr: Translate | None) -> list[str]:
    if not report.recommendations:
        return [Message("No scorecard weaknesses to act on (run `wikirag scorecard`).").render(tr)]
    out = []
    for n, r in enumerate(report.recommendations, 1):
        out.append(f"{n}. **{md_cell(r['dimension'])}** ({r['score']:.1f}): {md_cell(r['rule'])}")
        if r["command"]:
            out.append(f"   - `{r['command']}` — {md_cell(r['experiment']['why'])}")
        if r["action"]:
            out.append(f"   - {md_cell(r['action'])}")
    return out
