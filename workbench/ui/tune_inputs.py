"""The Tune page's inputs: the reference, 1-3 candidates (a typed change, a catalog
suggestion, a logged experiment or optimizer trial, a saved run) and the deep link
``?ref=baseline&cand=baseline%2Bfusion.k%3D30&q=q012`` that fills them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st
import yaml

from engine.config import all_keys
from workbench.tune.catalog import CATALOG
from workbench.tune.compare import parse_config_spec
from workbench.tune.experiment_store import ExperimentStore
from workbench.ui import resources, state, tuning_widgets
from workbench.ui.i18n import labelled, t
from workbench.workspace import Workspace

SOURCES = ("change", "catalog", "experiment", "run")
CHANGE, CATALOG_PICK, EXPERIMENT, RUN = SOURCES


def override_text(changes: Mapping[str, Any]) -> str:
    """``{"fusion.k": 30}`` -> ``fusion.k=30`` (values as YAML, what parse_override reads)."""
    return ",".join(
        f"{k}={yaml.safe_dump(v, default_flow_style=True).strip().removesuffix('...').strip()}"
        for k, v in changes.items()
    )


def spec_of(ref: str, changes: Mapping[str, Any] | str) -> str:
    text = override_text(changes) if isinstance(changes, Mapping) else changes.strip()
    return f"{ref}+{text}" if text else ref


def _options(ws: Workspace) -> dict[str, dict[str, dict[str, Any]]]:
    """Per source other than a typed change: option label -> the overrides it stands for."""
    catalog = {f"{s.name}: {override_text(c)}": dict(c) for s in CATALOG for c in s.candidates}
    experiments = {}
    for r in reversed(ExperimentStore(ws.experiments).load_records()):
        changes = {k: v[1] for k, v in (r.get("changes") or {}).items()}
        if changes:
            name = f"#{r.get('number')} {r.get('tier', '')} · {override_text(changes)}"
            experiments[name] = changes
    runs = {}
    for path in resources.run_paths(ws)[:30]:
        rec = resources.run_record(path)
        runs[path.stem] = {"__run__": rec.config}
    return {CATALOG_PICK: catalog, EXPERIMENT: experiments, RUN: runs}


def apply_link() -> None:
    """Fill the widgets from the URL once per new link (a later edit by hand wins)."""
    qp = st.query_params
    ref, cands = qp.get("ref"), qp.get_all("cand")
    link = (ref, tuple(cands), qp.get("q"))
    if not (ref or cands) or not state.changed(state.TUNE_LINK, link):
        return
    if ref:
        st.session_state[state.TUNE_REF] = ref
    cands = cands[:3]
    if cands:
        st.session_state[state.TUNE_N] = len(cands)
    for i, spec in enumerate(cands):
        _, plus, rest = spec.partition("+")
        st.session_state[state.item_key(state.TUNE_SOURCE, i)] = CHANGE
        st.session_state[state.item_key(state.TUNE_EDIT, i)] = rest if plus else ""
    if q := qp.get("q"):
        st.session_state[state.TUNE_QUERY] = q
    st.session_state[state.TUNE_RUN + "_auto"] = bool(cands)


def link_params(specs: list[str], qid: str | None = None) -> dict[str, Any]:
    """The query parameters that reopen this comparison (and query) on the Tune page."""
    out: dict[str, Any] = {"ref": specs[0], "cand": specs[1:]}
    if qid:
        out["q"] = qid
    return out


def pick_specs(ws: Workspace) -> list[str]:
    """The reference and the candidates as config specs (reference first)."""
    bases = tuning_widgets.config_specs(ws)
    if st.session_state.get(state.TUNE_REF) not in bases:
        st.session_state[state.TUNE_REF] = bases[0]
    top = st.columns([2, 1, 1])
    ref = top[0].selectbox(
        t("Reference"),
        bases,
        key=state.TUNE_REF,
        help=t("What the candidates are measured against: the accepted baseline by default."),
    )
    n = top[1].radio(t("Candidates"), [1, 2, 3], horizontal=True, key=state.TUNE_N)
    top[2].selectbox(t("Split"), ["all", "tune", "holdout"], key=state.TUNE_SPLIT)
    options = _options(ws)
    source_labels = {
        CHANGE: t("a change (key=value)"),
        CATALOG_PICK: t("a catalog suggestion"),
        EXPERIMENT: t("a logged experiment or trial"),
        RUN: t("a saved run"),
    }
    specs = [ref]
    for i in range(int(n)):
        a, b = st.columns([1, 3])
        source = a.selectbox(
            t("Candidate {n}", n=i + 1),
            list(SOURCES),
            key=state.item_key(state.TUNE_SOURCE, i),
            format_func=labelled(source_labels),
        )
        if source == CHANGE:
            edit = b.text_input(
                t("Change {n}", n=i + 1),
                key=state.item_key(state.TUNE_EDIT, i),
                placeholder="fusion.bm25_weight=0.5, fusion.k=30",
                help=t("Known keys: ") + ", ".join(all_keys()),
            )
            if edit.strip():
                specs.append(spec_of(ref, edit))
            continue
        choices = options[source]
        if not choices:
            b.caption(t("Nothing of that kind yet."))
            continue
        pick = b.selectbox(
            t("Change {n}", n=i + 1), list(choices), key=state.item_key(state.TUNE_PICK, i)
        )
        changes = choices[pick]
        if "__run__" in changes:  # a saved run: its config as changes of the reference
            _, ref_cfg = parse_config_spec(ref, ws)
            changes = {k: new for k, (_, new) in ref_cfg.diff(changes["__run__"]).items()}
        specs.append(spec_of(ref, changes))
    return specs


# Where each kind of next step (workbench.tune.next_steps.KINDS) is run in the UI.
STEP_PAGES = {
    "experiment": ("views/tune.py", ":material/tune:"),
    "sweep": ("views/compare.py", ":material/compare_arrows:"),
    "optimize": ("views/experiments.py", ":material/science:"),
    "grow_golden_set": ("views/golden_set.py", ":material/fact_check:"),
}


def next_step_link(step: Any) -> None:
    """A next step as a link to the page that runs it: an experiment opens the Tune page with
    the change filled in and compared (``?ref=baseline&cand=baseline+key=value``)."""
    page, icon = STEP_PAGES.get(step.kind, ("views/experiments.py", ":material/science:"))
    params = None
    if step.kind == "experiment" and step.args.get("overrides"):
        params = link_params(["baseline", spec_of("baseline", step.args["overrides"])])
    label = step.message.render(t)
    st.page_link(page, label=label[:1].upper() + label[1:], icon=icon, query_params=params)
