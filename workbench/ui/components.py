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
from workbench import golden
from workbench.context import Workspace
from workbench.golden import GoldenSet
from workbench.ui import resources, state

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
    return f":{color}-badge[{label}]"


@contextmanager
def guarded(what: str = "this page") -> Iterator[None]:
    """Show any error as a readable message with a hint instead of a traceback."""
    try:
        yield
    except IndexMissingError as exc:
        st.error(str(exc))
        st.caption("Build the index from the Overview page (Re-index) or with `wikirag index`.")
    except EngineError as exc:
        st.error(str(exc))
        st.caption("Fix what the message says, then rerun (press R).")
    except ModuleNotFoundError as exc:
        st.info(
            f"Part of {what} needs `{exc.name}`, which isn't available yet in this checkout; "
            "the rest of the workbench works without it."
        )
    except Exception as exc:
        st.error(f"{what} failed: {type(exc).__name__}: {exc}")
        st.caption("If this persists, run the matching `wikirag` command to see more detail.")
        with st.expander("Technical details"):
            st.code("".join(traceback.format_exception_only(type(exc), exc)), language="text")


def core(module: str, command: str) -> ModuleType | None:
    """Import a core module a page depends on; say which command is missing if it isn't there."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            st.info(
                f"`{command}` isn't available yet: `{module}` is still being written. "
                "This page fills in once it lands."
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
        st.markdown(f"**Knowledge base** `{ws.kb}`")
        st.caption(f"index `{ws.index}` · golden set `{ws.dataset}`")
        options = resources.config_options(ws)
        st.selectbox(
            "Config",
            list(options),
            key=state.CONFIG_CHOICE,
            help="baseline = the accepted config; versions = earlier accepted baselines",
        )
        _, cfg = current_config(ws)
        st.caption(f"config `{cfg.hash}` · embedder `{cfg.embedding.provider}`")
        try:
            status = resources.index_status(ws, cfg)
        except Exception as exc:
            st.warning(f"Index status unavailable: {exc}")
        else:
            st.markdown(freshness_badge(status))
        st.markdown(llm_status(cfg))


def freshness_badge(status: Mapping[str, Any]) -> str:
    if not status.get("exists"):
        return ":red-badge[no index] build it on the Overview page"
    if status.get("fresh"):
        return ":green-badge[index fresh]"
    parts = [f"{status[k]} {k}" for k in ("new", "changed", "deleted") if status.get(k)]
    return ":orange-badge[index stale] " + ", ".join(parts)


def llm_status(cfg: EngineConfig) -> str:
    from workbench.llm import llm_settings

    s = llm_settings(cfg.llm)
    if s is None:
        return ":gray-badge[No LLM configured] extractive answers"
    return f":violet-badge[LLM] `{s.model}`"


def progress_callback(label: str) -> tuple[Callable[..., None], Any]:
    """A progress bar and a ``progress(done, total, what)`` callback that moves it."""
    bar = st.progress(0.0, text=label)

    def update(done: int, total: int, what: str = "") -> None:
        frac = min(1.0, done / total) if total else 1.0
        bar.progress(frac, text=f"{label} {done}/{total} {what}".strip())

    return update, bar


def metric_cards(means: Mapping[str, float], ks: Sequence[int] = (5, 10, 20)) -> None:
    """Cards per K: recall (with its target band), precision, hit rate, NDCG, h-recall."""
    for k in ks:
        cols = st.columns(5)
        for col, (name, label) in zip(
            cols,
            (
                ("recall", "Recall"),
                ("precision", "Precision"),
                ("hit", "Hit rate"),
                ("ndcg", "NDCG"),
                ("hrecall", "Hier. recall"),
            ),
            strict=True,
        ):
            value = float(means.get(f"{name}@{k}", 0.0))
            col.metric(f"{label}@{k}", f"{value:.3f}")
            if name == "recall":
                col.markdown(band_badge(value))


def bar_chart(
    groups: Mapping[str, Mapping[str, float]],
    measures: Sequence[str] = ("recall@5", "mrr", "hit@5"),
    title: str = "",
) -> None:
    """Grouped bars: one group per slice, one bar per measure."""
    import plotly.express as px

    rows = [
        {"slice": g, "measure": m, "value": float(vals.get(m, 0.0))}
        for g, vals in groups.items()
        for m in measures
    ]
    if not rows:
        st.caption(f"{title}: no data")
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
        st.caption("No experiments yet: run one on the Experiments page to start the trajectory.")
        return
    df = pd.DataFrame(points)
    fig = go.Figure()
    for m in ("recall@5", "mrr", "hit@5"):
        if m in df:
            fig.add_trace(go.Scatter(x=df["experiment"], y=df[m], mode="lines+markers", name=m))
    rejected = df[df["decision"] == "rolled back"]
    if not rejected.empty and "recall@5" in df:
        fig.add_trace(
            go.Scatter(
                x=rejected["experiment"],
                y=rejected["recall@5"],
                mode="markers",
                marker={"symbol": "x", "size": 10, "color": "gray"},
                name="rolled back",
                text=rejected.get("title"),
            )
        )
    fig.update_layout(
        height=320,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis_title="experiment",
        yaxis_range=[0, 1.05],
        title="Score trajectory (tune split)",
    )
    st.plotly_chart(fig, width="stretch")


def breadcrumb(parts: Sequence[str]) -> str:
    return " › ".join(str(p) for p in parts)


def open_chapter_button(node_id: str, key: str, label: str = "Open in Knowledge base") -> None:
    """A button that selects ``node_id`` and switches to the Knowledge base page."""
    if st.button(label, key=key):
        state.set_selected_node(node_id)
        st.switch_page("pages/knowledge_base.py")


def empty_state(message: str, page: str | None = None, label: str | None = None) -> None:
    st.info(message)
    if page:
        st.page_link(page, label=label or "Go there", icon=":material/arrow_forward:")


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
            "difficulty": it.difficulty,
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
