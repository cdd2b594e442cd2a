"""Widgets shared by the pages: the sidebar, error guard, metric cards, charts, progress."""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from engine.config import EngineConfig
from engine.errors import EngineError, IndexMissingError
from workbench.answer.safe_markdown import safe_markdown
from workbench.eval import golden
from workbench.eval.golden import GoldenSet
from workbench.ui import resources, state
from workbench.ui.i18n import switch, t
from workbench.workspace import Workspace

# Target bands for recall (DESIGN.md): poor < 0.5 <= acceptable < 0.7 <= good < 0.85 <= excellent.
BANDS = ((0.85, "excellent", "green"), (0.7, "good", "blue"), (0.5, "acceptable", "orange"))


def band(value: float) -> tuple[str, str]:
    """(label, colour) of a recall value's target band."""
    for lo, label, color in BANDS:
        if value >= lo:
            return label, color
    return "poor", "red"


def band_badge(value: float) -> str:
    label, color = band(value)
    return f":{color}-badge[{t(label)}]"  # excellent / good / acceptable / poor


@contextmanager
def guarded(what: str = "this page") -> Iterator[None]:
    """Show any error as a readable message with a hint instead of a traceback."""
    try:
        yield
    except IndexMissingError as exc:
        st.error(str(exc))
        st.caption(t("Build the index from the Overview page (Re-index) or with `wikirag index`."))
    except EngineError as exc:
        st.error(str(exc))
        st.caption(t("Fix what the message says, then rerun (press R)."))
    except ModuleNotFoundError as exc:
        st.info(
            t(
                "Part of {what} needs `{name}`, which isn't available yet in this checkout; "
                "the rest of the workbench works without it.",
                what=what,
                name=exc.name,
            )
        )
    except Exception as exc:
        st.error(t("{what} failed: {error}", what=what, error=f"{type(exc).__name__}: {exc}"))
        st.caption(t("If this persists, run the matching `wikirag` command to see more detail."))
        with st.expander(t("Technical details")):
            st.code("".join(traceback.format_exception_only(type(exc), exc)), language="text")


def core(module: str, command: str) -> ModuleType | None:
    """Import a core module a page depends on; say which command is missing if it isn't there."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            st.info(
                t(
                    "`{command}` isn't available yet: `{module}` is still being written. "
                    "This page fills in once it lands.",
                    command=command,
                    module=module,
                )
            )
            return None
        raise


def current_config(ws: Workspace) -> tuple[str, EngineConfig]:
    """The config chosen in the sidebar (falls back to the first option)."""
    options = resources.config_options(ws)
    label = state.config_choice()
    if label not in options:
        label = next(iter(options))
    return label, EngineConfig.from_yaml(options[label])


def sidebar(ws: Workspace) -> None:
    """KB path, config picker, index freshness and LLM status, on every page."""
    with st.sidebar:
        switch()
        st.markdown(f"**{t('Knowledge base')}** `{ws.name}`")
        st.caption(
            t(
                "KB `{kb}` · index `{index}` · golden set `{dataset}`",
                kb=ws.kb,
                index=ws.index,
                dataset=ws.dataset,
            )
        )
        options = resources.config_options(ws)
        st.selectbox(
            t("Config"),
            list(options),
            key=state.CONFIG_CHOICE,
            help=t("baseline = the accepted config; versions = earlier accepted baselines"),
        )
        _, cfg = current_config(ws)
        st.caption(
            t(
                "config `{hash}` · embedder `{embedder}`",
                hash=cfg.hash,
                embedder=cfg.embedding.provider,
            )
        )
        try:
            status = resources.index_status(ws, cfg)
        except Exception as exc:
            st.warning(t("Index status unavailable: {error}", error=exc))
        else:
            st.markdown(freshness_badge(status))
        st.markdown(llm_status(cfg))


def freshness_badge(status: Mapping[str, Any]) -> str:
    if not status.get("exists"):
        return t(":red-badge[no index] build it on the Overview page")
    if status.get("fresh"):
        return t(":green-badge[index fresh]")
    counts = {"new": t("{n} new"), "changed": t("{n} changed"), "deleted": t("{n} deleted")}
    parts = [counts[k].format(n=status[k]) for k in counts if status.get(k)]
    return t(":orange-badge[index stale]") + " " + ", ".join(parts)


def llm_status(cfg: EngineConfig) -> str:
    from workbench.answer.llm import llm_settings

    s = llm_settings(cfg.llm)
    if s is None:
        return t(":gray-badge[No LLM configured] :small[extractive answers]")
    return f":violet-badge[LLM] :small[`{s.model}`]"


def progress_callback(label: str) -> tuple[Callable[..., None], Any]:
    """A progress bar and a ``progress(done, total, what)`` callback that moves it."""
    bar = st.progress(0.0, text=label)

    def update(done: int, total: int, what: str = "") -> None:
        frac = min(1.0, done / total) if total else 1.0
        bar.progress(frac, text=f"{label} {done}/{total} {what}".strip())

    return update, bar


def metric_cards(means: Mapping[str, float], ks: Sequence[int] = (5, 10, 20)) -> None:
    """Cards per K: recall (with its target band), precision, hit rate, NDCG, tree NDCG,
    hierarchical recall (the tree-aware numbers beside the strict ones)."""
    for k in ks:
        cols = st.columns(6)
        for col, (name, label) in zip(
            cols,
            (
                ("recall", t("Recall")),
                ("precision", t("Precision")),
                ("hit", t("Hit rate")),
                ("ndcg", "NDCG"),
                ("hndcg", t("Tree NDCG")),
                ("hrecall", t("Hier. recall")),
            ),
            strict=True,
        ):
            if f"{name}@{k}" not in means:  # a run recorded before this measure existed
                col.metric(f"{label}@{k}", "—", help=t("not in this run; run the evaluation again"))
                continue
            value = float(means[f"{name}@{k}"])
            if name == "recall":
                text, color = band(value)
                col.metric(
                    f"{label}@{k}",
                    f"{value:.3f}",
                    delta=t(text),  # excellent / good / acceptable / poor
                    delta_color=color,
                    delta_arrow="off",
                    border=True,
                )
            else:
                col.metric(f"{label}@{k}", f"{value:.3f}", border=True)


def bar_chart(
    groups: Mapping[str, Mapping[str, float]],
    measures: Sequence[str] = ("recall@5", "mrr", "hit@5"),
    title: str = "",
) -> None:
    """Grouped bars: one group per slice, one bar per measure."""
    import plotly.express as px

    rows = [
        # An empty slice name (items without a category) gets a label, not a blank bar.
        {
            "slice": str(g) if str(g).strip() else t("(none)"),
            "measure": m,
            "value": float(vals.get(m, 0.0)),
        }
        for g, vals in groups.items()
        for m in measures
    ]
    if not rows:
        st.caption(t("{title}: no data", title=title))
        return
    fig = px.bar(
        pd.DataFrame(rows),
        x="slice",
        y="value",
        color="measure",
        barmode="group",
        title=title,
        range_y=[0, 1],
    )
    fig.update_layout(height=300, margin={"l": 10, "r": 10, "t": 40, "b": 10}, xaxis_title="")
    st.plotly_chart(fig, width="stretch")


def trajectory_chart(points: Sequence[Mapping[str, Any]]) -> None:
    """Recall@5 / MRR of the baseline after each experiment, rejected ones marked."""
    import plotly.graph_objects as go

    if not points:
        st.caption(
            t("No experiments yet: run one on the Experiments page to start the trajectory.")
        )
        return
    df = pd.DataFrame(points)
    fig = go.Figure()
    for m in ("recall@5", "mrr", "hit@5"):
        if m in df:
            fig.add_trace(go.Scatter(x=df["experiment"], y=df[m], mode="lines+markers", name=m))
    if "dataset_hash" in df:
        # the golden set changed between these experiments: scores before and after are
        # not on the same questions, so the line is not one trajectory
        prev = df["dataset_hash"].shift()
        for x in df["experiment"][(df["dataset_hash"] != prev) & prev.notna() & (prev != "")]:
            fig.add_vline(x=x - 0.5, line_dash="dot", line_color="#9a6700")
            fig.add_annotation(
                x=x - 0.5, y=1.02, yref="paper", text=t("golden set changed"), showarrow=False
            )
    rejected = df[df["decision"] == "rolled back"]
    if not rejected.empty and "recall@5" in df:
        fig.add_trace(
            go.Scatter(
                x=rejected["experiment"],
                y=rejected["recall@5"],
                mode="markers",
                marker={"symbol": "x", "size": 10, "color": "gray"},
                name=t("rolled back"),
                text=rejected.get("title"),
            )
        )
    fig.update_layout(
        height=320,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis_title=t("experiment"),
        yaxis_range=[0, 1.05],
        title=t("Score trajectory (tune split)"),
    )
    fig.update_xaxes(tickformat="d", dtick=1 if len(df) <= 30 else None)  # experiment numbers
    st.plotly_chart(fig, width="stretch")


def breadcrumb(parts: Sequence[str]) -> str:
    return " › ".join(str(p) for p in parts)


def open_chapter_button(node_id: str, key: str, label: str | None = None) -> None:
    """A button that selects ``node_id`` and switches to the Knowledge base page."""
    if st.button(label or t("Open in Knowledge base"), key=key):
        state.set_selected_node(node_id)
        st.switch_page("views/knowledge_base.py")


def empty_state(message: str, page: str | None = None, label: str | None = None) -> None:
    st.info(message)
    if page:
        st.page_link(page, label=label or t("Go there"), icon=":material/arrow_forward:")


SEP = " | "  # between node ids in one table cell (slugs never contain "|")
GOLDEN_COLUMNS = (
    "id",
    "query",
    "relevant",
    "difficulty",
    "category",
    "split",
    "unanswerable",
    "answer_contains",
    "notes",
)


def golden_frame(gs: GoldenSet) -> pd.DataFrame:
    """One editable row per golden item; list fields joined with `` | ``."""
    rows = [
        {
            "id": it.id,
            "query": it.query,
            "relevant": SEP.join(it.relevant),
            # Difficulty means nothing for a question the KB cannot answer: left blank.
            "difficulty": None if it.unanswerable else it.difficulty,
            "category": it.category,
            "split": it.split,
            "unanswerable": it.unanswerable,
            "answer_contains": SEP.join(it.answer_contains),
            "notes": it.notes,
        }
        for it in gs.items
    ]
    return pd.DataFrame(rows, columns=list(GOLDEN_COLUMNS))


def frame_golden(df: pd.DataFrame, base: GoldenSet) -> GoldenSet:
    """The edited table back as a GoldenSet (new rows get the next free id)."""
    items = []
    taken = [str(i) for i in df["id"].tolist() if isinstance(i, str) and i.strip()]
    for row in df.to_dict("records"):
        query = _text(row.get("query"))
        item_id = _text(row.get("id"))
        if not query and not item_id:
            continue  # a blank row the editor added
        if not item_id:
            item_id = golden.next_id(taken)
            taken.append(item_id)
        old = base.get(item_id)
        items.append(
            golden.GoldenItem(
                id=item_id,
                query=query,
                relevant=_split(row.get("relevant")),
                difficulty=_text(row.get("difficulty")) or "medium",
                category=_text(row.get("category")),
                answer_contains=_split(row.get("answer_contains")),
                notes=_text(row.get("notes")),
                split=_text(row.get("split")) or golden.default_split(item_id),
                unanswerable=_flag(row.get("unanswerable")),
                grades=old.grades if old is not None else {},
            )
        )
    return GoldenSet(base.name, tuple(items), base.path, base.sha256)


def _split(cell: Any) -> tuple[str, ...]:
    if not isinstance(cell, str):
        return ()
    parts = [p.strip() for p in cell.replace("\n", "|").split("|")]
    return tuple(dict.fromkeys(p for p in parts if p))


def _text(cell: Any) -> str:
    """A cell as stripped text; the editor's empty cells (None, NaN) become ""."""
    return cell.strip() if isinstance(cell, str) else ""


def _flag(cell: Any) -> bool:
    return isinstance(cell, bool | np.bool_) and bool(cell)


def config_specs(ws: Workspace) -> list[str]:
    """Config names `workbench.tune.compare.parse_config_spec` understands, baseline first."""
    from workbench.tune.experiment_store import ExperimentStore

    versions = ExperimentStore(ws.experiments).accepted_versions()
    return ["baseline", "defaults", *[f"v{v['version']}" for v in reversed(versions)]]


def delta_colour(v: Any) -> str:
    """Gains green, losses red, ties uncoloured (for Styler.map over delta cells)."""
    if not isinstance(v, int | float) or abs(v) <= 1e-9:
        return ""
    return "color: #1a7f37" if v > 0 else "color: #cf222e"


def comparison(c: Any, compare: ModuleType) -> None:
    """A Comparison: metrics with deltas, paired statistics, wins/losses, changed queries."""
    measures = [*compare.TABLE_MEASURES, *compare.LATENCY]
    table = {"measure": measures}
    for i, lab in enumerate(c.labels):
        name = f"{i + 1}. {lab}"
        table[name] = [c.metrics[i].get(m, 0.0) for m in measures]
        if i:
            table[f"Δ {i + 1}"] = [c.delta(i, m) for m in measures]
    st.markdown(
        t(
            "**{dataset}** · split {split} · {n} queries",
            dataset=c.dataset,
            split=c.split,
            n=c.queries,
        )
    )
    st.dataframe(
        pd.DataFrame(table)
        .style.format(precision=3)
        .map(delta_colour, subset=[k for k in table if k.startswith("Δ")]),
        hide_index=True,
        width="stretch",
    )
    rows = []
    for i in range(1, len(c.labels)):
        for m, s in c.stats[i - 1].items():
            rows.append(
                {
                    "config": f"{i + 1}. {c.labels[i]}",
                    "measure": m,
                    "delta": s.delta,
                    "95% CI": f"[{s.ci_low:+.3f}, {s.ci_high:+.3f}]",
                    "p": s.p_value,
                    "significant": t("yes") if s.significant else t("no"),
                    "wins/losses/ties": f"{s.wins}/{s.losses}/{s.ties}",
                }
            )
    st.markdown(t("**Paired statistics** (vs config 1)"))
    st.dataframe(pd.DataFrame(rows).style.format(precision=3), hide_index=True, width="stretch")
    cols = st.columns(2)
    for col, fig in zip(cols, compare.comparison_figures(c), strict=False):
        fig.update_layout(height=340, margin={"l": 10, "r": 10, "t": 40, "b": 10})
        col.plotly_chart(fig, width="stretch")
    for i in range(1, len(c.labels)):
        changed = c.changed[i - 1]
        diff = ", ".join(f"`{k}`: {a!r} → {b!r}" for k, (a, b) in c.diffs[i - 1].items())
        with st.expander(
            t(
                "Queries that changed most: {label} vs {base} ({n})",
                label=c.labels[i],
                base=c.labels[0],
                n=len(changed),
            )
        ):
            st.caption(t("config changes: {diff}", diff=diff or t("none")))
            if changed:
                st.dataframe(
                    pd.DataFrame(
                        [
                            {
                                "id": q.id,
                                "query": q.query,
                                "Δ recall@5": q.delta_recall5,
                                "Δ mrr": q.delta_mrr,
                                "first relevant rank": f"{q.rank_before or '-'} → {q.rank_after or '-'}",
                            }
                            for q in changed
                        ]
                    ).style.format(precision=3),
                    hide_index=True,
                    width="stretch",
                )


def config_value_widget(key: str, current: Any, widget_key: str) -> Any:
    """A widget for one config key, built from ``engine.config.field_spec``."""
    from engine.config import field_spec

    spec = field_spec(key)
    tp, choices = spec["type"], spec["choices"]
    lo, hi = spec["range"] or (None, None)
    label = t("New value for `{key}` (now {current})", key=key, current=repr(current))
    if choices:
        opts = list(choices)
        return st.selectbox(label, opts, index=opts.index(current), key=widget_key)
    if tp is bool:
        return st.toggle(label, value=not current, key=widget_key)
    if tp is int:
        return int(
            st.number_input(
                label,
                min_value=None if lo is None else int(lo),
                max_value=None if hi is None else int(hi),
                value=int(current),
                step=1,
                key=widget_key,
            )
        )
    if tp is float:
        return float(
            st.number_input(
                label,
                min_value=None if lo is None else float(lo),
                max_value=None if hi is None else float(hi),
                value=float(current),
                key=widget_key,
                format="%.4g",
            )
        )
    return st.text_input(label, value=str(current), key=widget_key)


def decision(result: Any) -> None:
    """An ExperimentResult: verdict, every criterion with its measured value, tune vs holdout."""
    d = result.decision
    if getattr(result, "no_effect", False):
        st.info(
            t(
                "No effect: {title} leaves every ranking identical, so it was not logged as an "
                "experiment.",
                title=result.title,
            )
        )
        return
    verdict = t("Accepted — new baseline") if d.accepted else t("Rolled back")
    # text and colour, not emoji alone (emoji render as boxes without an emoji font)
    (st.success if d.accepted else st.error)(
        t(
            "Experiment {n} · {title}: **{verdict}**",
            n=result.number,
            title=result.title,
            verdict=verdict,
        )
        + ("" if d.accepted else " — " + "; ".join(d.reasons))
    )
    st.caption(
        t(
            "Rule: **{name}** (primary {primary}, α = {alpha})",
            name=d.rule.name,
            primary=d.rule.primary,
            alpha=f"{d.rule.alpha:g}",
        )
    )
    result_col, passed = t("result"), t("pass")  # the styled column and value, translated
    st.dataframe(
        pd.DataFrame(
            [
                {
                    t("criterion"): c.name,
                    t("measured"): c.shown,
                    t("needs"): c.threshold,
                    result_col: passed if c.passed else t("FAIL"),
                    t("detail"): c.detail,
                }
                for c in d.criteria
            ]
        ).style.map(
            lambda v: "color: #1a7f37" if v == passed else "color: #cf222e; font-weight: 600",
            subset=[result_col],
        ),
        hide_index=True,
        width="stretch",
    )
    measures = ("recall@5", "mrr", "hit@5", "ndcg@10", "latency_p50")
    st.dataframe(
        pd.DataFrame(
            {
                t("measure"): measures,
                t("baseline (tune)"): [result.base_tune.get(m, 0.0) for m in measures],
                t("candidate (tune)"): [result.cand_tune.get(m, 0.0) for m in measures],
                t("baseline (holdout)"): [result.base_holdout.get(m, 0.0) for m in measures],
                t("candidate (holdout)"): [result.cand_holdout.get(m, 0.0) for m in measures],
            }
        ).style.format(precision=3),
        hide_index=True,
        width="stretch",
    )
    moves = result.extra.get("queries") or {}
    cols = st.columns(2)
    for col, kind, colour in zip(
        cols, ("improved", "regressed"), ("#1a7f37", "#cf222e"), strict=True
    ):
        rows = moves.get(kind) or []
        col.markdown(f"**{t(kind.capitalize())}** ({d.rule.primary}, tune) · {len(rows)}")
        if rows:
            col.dataframe(
                pd.DataFrame(rows)
                .style.map(lambda _v, c=colour: f"color: {c}", subset=["delta"])
                .format({"delta": "{:+.3f}"}),
                hide_index=True,
                width="stretch",
            )


def link_citations(text: str, citations: Sequence[Mapping[str, Any]]) -> str:
    """Turn each ``[n]`` marker into a link to its chapter in the Knowledge base page (a
    relative link: it cannot leave the workbench)."""
    import re
    from urllib.parse import quote

    targets = {int(c["n"]): str(c["node_id"]) for c in citations}

    def link(m: re.Match[str]) -> str:
        n = int(m.group(1))
        if n not in targets:
            return m.group(0)
        return f"[\\[{n}\\]](knowledge_base?node={quote(targets[n], safe='')})"

    return re.sub(r"(?<!\\)\[(\d{1,2})\](?!\()", link, text)


def chat_turn(i: int, turn: Mapping[str, Any], kb: Any, show_notice: bool = True) -> bool:
    """One question and its answer with citations, sources and trace; True on "bad answer".

    ``show_notice``: False when the previous turn already showed the same notice (e.g. "No
    LLM configured"), so it appears once per conversation, not under every answer.
    """
    ans = turn["answer"]
    with st.chat_message("user"):
        st.markdown(turn["question"])
    with st.chat_message("assistant"):
        # Model output and chapter titles are untrusted: no remote images or off-wiki links.
        if ans.refusal:
            st.warning(safe_markdown(ans.answer))
        else:
            st.markdown(link_citations(safe_markdown(ans.answer), ans.citations))
        kind = ":violet-badge[LLM]" if ans.mode == "llm" else t(":gray-badge[extractive]")
        st.markdown(
            kind
            + " "
            + t(
                ":small[config {config} · {ms} ms · {rounds} retrieval round(s)]",
                config=turn.get("config", ""),
                ms=f"{ans.took_ms:.0f}",
                rounds=ans.rounds,
            )
        )
        if ans.notice and show_notice:
            st.info(ans.notice)
        for c in ans.citations:
            node = kb.nodes.get(c["node_id"])
            with st.expander(f"[{c['n']}] {breadcrumb(c['breadcrumb'])}"):
                st.caption(t("`{path}` line {line}", path=c["file_path"], line=c["line"]))
                # chapter text is untrusted too: no remote images or off-wiki links
                st.markdown(
                    safe_markdown(node.content) if node else t("_(chapter no longer in the KB)_")
                )
                open_chapter_button(c["node_id"], key=f"chat_open_{i}_{c['n']}")
        with st.expander(t("Retrieved chapters ({n}) and trace", n=len(ans.retrieved))):
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "n": r["n"],
                            "chapter": breadcrumb(r["breadcrumb"]),
                            "score": r["score"],
                            "file": f"{r.get('file_path')}:{r.get('line')}",
                        }
                        for r in ans.retrieved
                    ]
                ),
                hide_index=True,
                width="stretch",
            )
            st.dataframe(
                pd.DataFrame(ans.trace, columns=["step", "ms", "detail"]).style.format(
                    {"ms": "{:.1f}"}
                ),
                hide_index=True,
                width="stretch",
            )
        return st.button(
            t("Bad answer → golden-set entry"),
            icon=":material/thumb_down:",
            key=f"chat_bad_{i}",
            help=t("drafts an entry with the cited chapters pre-filled; review and save it"),
        )
