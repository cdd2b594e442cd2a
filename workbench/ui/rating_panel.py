"""The Golden set page's rating panel: compare configs, then judge what their top k shows.

The queue is the chapters any of the compared configs ranks in its top k that no one has
graded, query by query; each grade is appended to the judgments file at once, so the
figures above the queue (nDCG@10 rescored from the current judgments, and the unjudged
share) move as one rates. ``queue_link`` is the deep link other pages use ("N unjudged in
top 10 → rating queue"): ``golden_set?queue=unjudged&ref=<config>&cand=<config>``.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from engine.config import EngineConfig
from workbench.eval import judgments as J
from workbench.eval.golden import GoldenSet
from workbench.eval.run_record import UNJUDGED_K
from workbench.eval.snippets import snippet
from workbench.eval.unjudged import WARN_SHARE, rating_queue, rescored
from workbench.ui import components as ui
from workbench.ui import resources, state
from workbench.ui.i18n import t
from workbench.ui.snippets import escape_markdown, snippet_markdown
from workbench.workspace import Workspace

PAGE = "views/golden_set.py"
# (grade stored, button label, keyboard shortcut): Streamlit shortcuts are letters/digits.
ANSWERS: tuple[tuple[int | str, str, str], ...] = (
    (0, "0 not relevant", "0"),
    (1, "1 related", "1"),
    (2, "2 relevant", "2"),
    (3, "3 perfect", "3"),
    (J.LATER, "judge later (L)", "l"),
    (J.UNSURE, "can't tell (U)", "u"),
)


def queue_params(ref: str, cand: str) -> dict[str, str]:
    """The query parameters that open this page's rating queue for two configs."""
    return {"queue": "unjudged", "ref": ref, "cand": cand}


def queue_link(ref: str, cand: str) -> str:
    """A relative URL of the rating queue (for pages that link to it)."""
    from urllib.parse import urlencode

    return "golden_set?" + urlencode(queue_params(ref, cand))


def rater() -> str:
    """Who is rating: the signed-in user (Streamlit OIDC login), else the sidebar's name."""
    try:
        if st.user.is_logged_in:
            return str(st.user.get("email") or st.user.get("name") or "")
    except (AttributeError, KeyError):  # no [auth] section: st.user has no login state
        pass
    return state.rater_name()


def rater_input() -> None:
    """The sidebar field that names the rater when no login is configured."""
    try:
        logged_in = bool(st.user.is_logged_in)
    except (AttributeError, KeyError):
        logged_in = False
    if not logged_in:
        with st.sidebar:
            st.text_input(t("Your name (for ratings)"), key=state.RATER)


def _index(options: list[str], wanted: str | None, fallback: int) -> int:
    return options.index(wanted) if wanted in options else min(fallback, len(options) - 1)


def _evaluate(ws: Workspace, gs: GoldenSet, options: dict[str, str], labels: list[str]) -> None:
    runs: dict[str, Any] = {}
    with ui.progress_bar(t("Ranking")) as progress:
        for label in dict.fromkeys(labels):
            cfg = EngineConfig.from_yaml(options[label])
            ev = resources.evaluator(ws, cfg)
            runs[label] = ev.run(gs, cfg, modes=(cfg.search.mode,), progress=progress)
    state.set_rating_runs(runs)


def render(ws: Workspace, gs: GoldenSet, kb: Any) -> None:
    """The panel: config pickers, figures per config, the queue's current chapter."""
    st.subheader(t("Rate in place"))
    options = resources.config_options(ws)
    labels = list(options)
    qp = st.query_params
    deep = qp.get("queue") == "unjudged"
    a, b, c = st.columns([2, 2, 1])
    ref = a.selectbox(
        t("Reference config"), labels, index=_index(labels, qp.get("ref"), 0), key=state.RATE_REF
    )
    cand = b.selectbox(
        t("Candidate config"), labels, index=_index(labels, qp.get("cand"), 1), key=state.RATE_CAND
    )
    k = int(c.number_input(t("Top k of each"), 1, 50, UNJUDGED_K, key=state.RATE_K))
    runs = state.rating_runs()
    if st.button(t("Compare"), key=state.RATE_BUILD) or (
        deep and (runs is None or set(runs) != {ref, cand})
    ):
        _evaluate(ws, gs, options, [ref, cand])
        runs = state.rating_runs()
    if not runs:
        st.caption(t("Compare two configs to rate the chapters their top k shows."))
        return
    judged = J.read(J.path_for(ws.dataset))
    who = rater()
    queue = rating_queue(list(runs.items()), gs, k=k, judgments=judged, rater=who or None)
    cols = st.columns(len(runs))
    for col, (label, run) in zip(cols, runs.items(), strict=True):
        now = rescored(run, gs)
        mode = now.modes[0]
        share = now.unjudged_share(mode, gs)
        col.metric(t("{config}: nDCG@10", config=label), f"{now.means(mode).get('ndcg@10', 0):.3f}")
        col.metric(t("{config}: unjudged in top 10", config=label), f"{share:.1%}")
        if share > WARN_SHARE:
            col.caption(t("Above 5%: a comparison on a half-judged set is not evidence yet."))
    label = t("{n} unjudged in top {k} → rating queue", n=len(queue), k=k)
    if not deep:
        # This page itself: set the deep link's parameters (a page link to the page one is
        # on does not navigate); other pages use st.page_link(PAGE, query_params=...).
        if st.button(label, key=state.RATE_OPEN):
            st.query_params.update(queue_params(ref, cand))
            st.rerun()
        return
    st.markdown(f"**{label}**")
    if not queue:
        st.success(t("Every chapter in the top {k} has a grade.", k=k))
        return
    if not who:
        st.warning(t("Set your name in the sidebar to rate (ratings keep the rater)."))
        return
    _card(ws, kb, queue[0], who, len(queue))


def _card(ws: Workspace, kb: Any, entry: Any, who: str, left: int) -> None:
    node = kb.get(entry.node_id)
    st.markdown(
        t(
            "**{qid}** · {query} · {left} left",
            qid=entry.item_id,
            query=escape_markdown(entry.query),
            left=left,
        )
    )
    with st.container(border=True):
        if node is None:
            st.caption(entry.node_id)
        else:
            st.markdown(f"**{escape_markdown(ui.breadcrumb(node.breadcrumb))}**")
            st.caption(f"`{entry.node_id}` · {t('best rank')} {entry.best_rank}")
            st.markdown(snippet_markdown(snippet(node.content, entry.query)))
    cols = st.columns(len(ANSWERS))
    for col, (grade, label, key) in zip(cols, ANSWERS, strict=True):
        if col.button(t(label), key=state.item_key(state.RATE_GRADE, key), shortcut=key):
            j = J.judgment(entry.item_id, entry.node_id, grade, who)
            J.append(J.path_for(ws.dataset), [j])
            st.rerun()
