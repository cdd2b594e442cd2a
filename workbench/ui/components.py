"""The frame every page shares: the sidebar, the error guard, progress, empty states, links.

Widgets of one kind live beside it: ``charts`` (bands, metric cards, bar and trajectory
charts), ``golden_table`` (the golden set as an editable table), ``tuning_widgets`` (config
pickers, comparisons, decisions) and ``chat_turns`` (a chat turn with its citations).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import streamlit as st

from engine.config import EngineConfig
from engine.errors import ConfigError, EngineError, IndexMissingError
from workbench.answer.llm import llm_settings
from workbench.eval.golden import GoldenSet
from workbench.ui import resources, state
from workbench.ui.i18n import switch, t
from workbench.workspace import Workspace


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
    except Exception as exc:
        st.error(t("{what} failed: {error}", what=what, error=f"{type(exc).__name__}: {exc}"))
        st.caption(t("If this persists, run the matching `wikirag` command to see more detail."))
        with st.expander(t("Technical details")):
            st.code("".join(traceback.format_exception_only(type(exc), exc)), language="text")


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
    try:
        s = llm_settings(cfg.llm)
    except ConfigError:  # a key not approved for the config's host: the Chat page says how
        return t(":orange-badge[LLM key not approved] :small[see the Chat page]")
    if s is None:
        return t(":gray-badge[No LLM configured] :small[extractive answers]")
    return f":violet-badge[LLM] :small[`{s.model}`]"


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[..., None]]:
    """A progress bar and the ``progress(done, total, what)`` callback that moves it; the
    bar is removed when the block ends, also when the work in it fails (the error is then
    shown without a bar frozen part way beside it)."""
    bar = st.progress(0.0, text=label)

    def update(done: int, total: int, what: str = "") -> None:
        frac = min(1.0, done / total) if total else 1.0
        bar.progress(frac, text=f"{label} {done}/{total} {what}".strip())

    try:
        yield update
    finally:
        bar.empty()


def warn(message: str) -> None:
    """``st.warning`` as a ``notify(message)`` callback (``st.warning`` returns its element)."""
    st.warning(message)


def sentence(text: str) -> str:
    """``text`` with its first letter upper-case (the core's messages start lower-case so
    they can be embedded; ``str.capitalize`` would lower-case "MRR")."""
    return text[:1].upper() + text[1:]


def breadcrumb(parts: Sequence[str]) -> str:
    return " › ".join(str(p) for p in parts)


def open_chapter_button(node_id: str, key: str, label: str | None = None) -> None:
    """A button that selects ``node_id`` and switches to the Knowledge base page."""
    if st.button(label or t("Open in Knowledge base"), key=key):
        state.set_selected_node(node_id)
        st.switch_page("views/knowledge_base.py")


def tune_link() -> None:
    """The link every tuning page shows to the loop's one place."""
    st.page_link(
        "views/tune.py",
        label=t("Try a change and see which queries move: the Tune page"),
        icon=":material/tune:",
    )


def empty_state(message: str, page: str | None = None, label: str | None = None) -> None:
    st.info(message)
    if page:
        st.page_link(page, label=label or t("Go there"), icon=":material/arrow_forward:")


def golden_set_or_stop(ws: Workspace, why: str, label: str | None = None) -> GoldenSet:
    """The workspace's golden set; without one, ``why`` and a link to the Golden set page
    (``label``), and the page stops there."""
    gs = resources.golden_set(ws)
    if gs is None:
        empty_state(why, "views/golden_set.py", label or t("Create the golden set"))
        st.stop()
    return gs


def clickable_table(
    data: Any, ids: Sequence[str], key: str, seen: str | None = None, **options: Any
) -> str | None:
    """``st.dataframe`` of ``data`` (rows in ``ids`` order) where one row can be clicked: the
    id of the row just clicked, or None when no row is newly clicked, so a rerun does not pick
    it again (``state.changed`` under ``seen``, default ``key``)."""
    options.setdefault("placeholder", "")  # a missing value reads blank, not "None"
    # A click on any cell selects its row too (the row checkbox alone was easy to miss).
    table = st.dataframe(
        data,
        hide_index=True,
        on_select="rerun",
        selection_mode=["single-row", "single-cell"],
        key=key,
        **options,
    )
    picked = _picked_row(table.selection if table is not None else None)
    if picked is not None and picked < len(ids) and state.changed(seen or key, ids[picked]):
        return ids[picked]
    return None


def _picked_row(selection: Any) -> int | None:
    """The row of a selection: a selected row, else the row of a selected cell."""
    if not selection:
        return None
    rows = list(selection.get("rows") or [])
    if rows:
        return int(rows[0])
    cells = list(selection.get("cells") or [])
    return int(cells[0][0]) if cells else None


def fitted_height(rows: int, most: int) -> int:
    """Pixels that show a table of ``rows`` rows whole, but at most ``most``."""
    return min(38 + 35 * rows, most)


def query_picker(
    ids: Sequence[str], key: str, label_of: Callable[[str], str], picked: str | None = None
) -> str:
    """A "Query" select box over ``ids`` whose choice is kept under ``key``: ``picked`` (a row
    just clicked) becomes the choice, and a kept choice no longer listed falls back to the
    first id."""
    if picked is not None:
        st.session_state[key] = picked
    if st.session_state.get(key) not in ids:
        st.session_state[key] = ids[0]
    qid: str = st.selectbox(t("Query"), ids, key=key, format_func=label_of)
    return qid
