"""Typed getters and setters over ``st.session_state``: every key the app uses is named here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import streamlit as st

from workbench.eval.golden import GoldenSet
from workbench.ui import i18n

if TYPE_CHECKING:
    from workbench.tune.experiment_log import ExperimentResult

CONFIG_CHOICE = "config_choice"  # the sidebar selectbox's key
SELECTED_NODE = "selected_node"
GOLDEN_DRAFT = "golden_draft"
GOLDEN_EDITOR_VERSION = "golden_editor_version"
GOLDEN_WORKING = "golden_working"
GOLDEN_DIRTY = "golden_dirty"
GOLDEN_CONFLICT = "golden_conflict"
GOLDEN_POOL = "golden_pool"
RATER = "rater_name"  # the sidebar's rater name when no OIDC login is configured
RATE_REF = "rate_ref"
RATE_CAND = "rate_cand"
RATE_K = "rate_k"
RATE_BUILD = "rate_build"
RATE_OPEN = "rate_open"  # "N unjudged in top 10 → rating queue"
RATE_RUNS = "rate_runs"  # label -> RunRecord of the configs whose top k is being judged
RATE_GRADE = "rate_grade"  # prefix of the grade buttons' keys
EVAL_RUN = "eval_run_shown"  # the Evaluate page's run picker
EVAL_DRILL = "eval_drill"  # the query the Evaluate page opens
EVAL_FAIL_CAUSE = "eval_fail_cause"
EVAL_FAIL_SLICE = "eval_fail_slice"
EVAL_FAIL_VALUE = "eval_fail_value"
EVAL_FAIL_TABLE = "eval_fail_table"
RUNS_DIFF_PICK = "runs_diff_pick"
RUNS_DIFF_MEASURE = "runs_diff_measure"
RUNS_DIFF_OUTCOME = "runs_diff_outcome"
RUNS_DIFF_TABLE = "runs_diff_table"
RUNS_DIFF_QUERY = "runs_diff_query"
SWEEP_EXPERIMENT_POINT = "sw_experiment_point"
CHAT_CONVERSATION = "chat_conversation"  # id of the kept conversation being continued
CHAT_HISTORY_PICK = "chat_history_pick"
CHAT_REPLAY_CONFIG = "chat_replay_config"
CHAT_REPLAY = "chat_replay"
GOLDEN_TARGET = "golden_target"  # the query being labelled
GOLDEN_TABLE_EDIT = "golden_table_edit"  # the toggle: the table as an editor, else clickable
GOLDEN_TABLE_PICK = "golden_table_pick"  # the clickable table: a click picks the query
KB_DOC = "kb_doc"  # the Knowledge base tree's document
KB_DEPTH = "kb_depth"
SEARCH_RESPONSE = "search_response"
CHAT_TURNS = "chat_turns"
CHAT_DRAFT = "chat_draft"
EXPERIMENT_RESULT = "experiment_result"
OPTIMIZE_RESULTS = "optimize_results"
SCORECARD = "scorecard"
COMPARE_RESULT = "compare_result"
SWEEP_RESULT = "sweep_result"
FLASH = "flash"

# Widget keys: what a page's widgets are called in st.session_state, and what tests set by key.
# Kept conversations (the Chat page's history panel)
CHAT_HISTORY_OPEN = "chat_history_open"
CHAT_HISTORY_MD = "chat_history_md"
CHAT_HISTORY_JSON = "chat_history_json"
CHAT_HISTORY_DELETE = "chat_history_delete"
CHAT_REPLAY_RUN = "chat_replay_run"
# Runs per query (Compare page)
RUNS_DIFF_MODE = "runs_diff_mode"
# views/chat.py
CHAT_MODE = "chat_mode"
CHAT_TOP_K = "chat_top_k"
CHAT_CLEAR = "chat_clear"
CHAT_DRAFT_QUERY = "chat_draft_query"
CHAT_DRAFT_ID = "chat_draft_id"
CHAT_DRAFT_UNANSWERABLE = "chat_draft_unanswerable"
CHAT_DRAFT_RELEVANT = "chat_draft_relevant"
CHAT_DRAFT_DIFFICULTY = "chat_draft_difficulty"
CHAT_DRAFT_CATEGORY = "chat_draft_cat"
CHAT_DRAFT_NOTES = "chat_draft_notes"
CHAT_DRAFT_DISCARD = "chat_draft_discard"
CHAT_INPUT = "chat_input"
CHAT_DRAFT_FORM = "chat_draft_form"
# views/compare.py
COMPARE_N = "cmp_n"
COMPARE_SPLIT = "cmp_split"
COMPARE_RUN = "cmp_run"
SWEEP_KNOB_1 = "sw_k1"
SWEEP_VALUES_1 = "sw_v1"
SWEEP_KNOB_2 = "sw_k2"
SWEEP_VALUES_2 = "sw_v2"
SWEEP_SPLIT = "sw_split"
SWEEP_MEASURE = "sw_m"
SWEEP_RUN = "sw_run"
SWEEP_EXPERIMENT = "sw_experiment"
# views/tune.py (the tuning loop)
TUNE_REF = "tune_ref"
TUNE_N = "tune_n"
TUNE_SPLIT = "tune_split"
TUNE_RUN = "tune_run"
TUNE_MEASURE = "tune_measure"
TUNE_OUTCOME = "tune_outcome"
TUNE_SLICE = "tune_slice"
TUNE_SLICE_VALUE = "tune_slice_value"
TUNE_MATRIX = "tune_matrix"
TUNE_QUERY = "tune_query"
TUNE_RESULT = "tune_result"
TUNE_EXPERIMENTS = "tune_experiments"  # spec -> ExperimentResult run from the page
TUNE_LINK = "tune_link"  # the deep link last applied (for changed())
# views/evaluate.py
EVAL_FORM = "eval_form"
EVAL_MODES = "eval_modes"
EVAL_SPLIT = "eval_split"
EVAL_RERANK = "eval_rerank"
EVAL_ALLOW_INVALID = "eval_allow_invalid"
EVAL_MODE_SHOWN = "eval_mode_shown"
# views/experiments.py
EXPERIMENT_RULE = "exp_rule"
EXPERIMENT_SUGGEST = "exp_suggest"
EXPERIMENT_KNOB = "exp_key"
EXPERIMENT_TITLE = "exp_title"
EXPERIMENT_NOTES = "exp_notes"
EXPERIMENT_RUN = "exp_run"
EXPERIMENT_RESTORE_VERSION = "exp_restore_v"
EXPERIMENT_RESTORE = "exp_restore"
OPTIMIZE_TRIALS = "opt_trials"
OPTIMIZE_TIMEOUT = "opt_timeout"
OPTIMIZE_SEED = "opt_seed"
OPTIMIZE_FOLDS = "opt_folds"
OPTIMIZE_SEARCH = "opt_search"
OPTIMIZE_YES = "opt_yes"  # search although the golden set is too small for it
OPTIMIZE_BUDGET = "opt_budget"
OPTIMIZE_TIERS = "opt_tiers"
OPTIMIZE_RUN = "opt_run"
# views/golden_set.py
GOLDEN_NEW_FORM = "golden_new"
GOLDEN_SAVE = "golden_save"
GOLDEN_RELOAD = "golden_reload"
GOLDEN_OVERWRITE = "golden_overwrite"
GOLDEN_NEW_QUERY = "golden_new_query"
GOLDEN_TREE_FILTER = "golden_tree_filter"
GOLDEN_TREE_PICK = "golden_tree_pick"
GOLDEN_ADD_TREE = "golden_add_tree"
GOLDEN_DRAFT_TREE = "golden_draft_tree"
GOLDEN_REMAP = "golden_remap"
GOLDEN_POOL_RUN = "golden_pool_run"
GOLDEN_POOL_TABLE = "golden_pool_table"
GOLDEN_POOL_ADD = "golden_pool_add"
# views/knowledge_base.py
KB_FILTER = "kb_filter"
KB_SEARCH_FORM = "kb_search_form"
KB_TREE = "kb_tree"
KB_QUERY = "kb_query"
KB_MODE = "kb_mode"
KB_TOP_K = "kb_top_k"
KB_EXPAND = "kb_expand"
KB_RERANK = "kb_rerank"
KB_FILTER_CATEGORY = "kb_f_cat"
KB_FILTER_PRIORITY = "kb_f_pri"
KB_FILTER_TYPE = "kb_f_type"
KB_FILTER_KEYWORDS = "kb_f_kw"
# views/overview.py
OVERVIEW_REINDEX = "overview_reindex"
OVERVIEW_BASELINE = "overview_baseline"
# views/reports.py
REPORT_RUN = "rep_run"
REPORT_MODE = "rep_mode"
REPORT_VIEW = "rep_view"
# views/scorecard.py
SCORECARD_RECOMPUTE = "sc_recompute"

# Prefixes of per-item widget keys (one widget per row, chapter or knob): see item_key().
GOLDEN_EDITOR = "golden_editor"  # + the editor's version: a new version resets the table
GOLDEN_REMOVE = "golden_remove"  # + the relevant id's position
GOLDEN_ADD_HIT = "golden_add_hit"  # + the search hit's position
GOLDEN_DRIFT = "golden_drift"  # + item id + stale node id
KB_NODE = "kb_node"  # + the chapter shown
KB_NAV = "kb_nav"  # + the node id navigated to
KB_TREE_PICK = "kb_tree_pick"  # the tree table's last picked row (for changed())
KB_OPEN = "kb_open"  # + the result's position (+ the child's position)
COMPARE_BASE = "cmp_base"  # + the config's position
COMPARE_EDIT = "cmp_edit"  # + the config's position
TUNE_SOURCE = "tune_source"  # + the candidate's position
TUNE_EDIT = "tune_edit"  # + the candidate's position
TUNE_PICK = "tune_pick"  # + the candidate's position (catalog, run or experiment picked)
TUNE_EXPERIMENT = "tune_experiment"  # + the candidate's position
EXPERIMENT_LOG_TABLE = "exp_log_table"
EXPERIMENT_VALUE = "exp_value"  # + the knob, e.g. exp_value_fusion.k
REPORT_DOWNLOAD = "rep_dl"  # + the format's label
SCORECARD_FIX = "sc_fix"  # + the suggestion's position
CHAT_OPEN = "chat_open"  # + turn + citation number
CHAT_BAD = "chat_bad"  # + turn


def item_key(prefix: str, *parts: object) -> str:
    """The key of one widget among many alike: ``item_key(KB_OPEN, 2, 0) == "kb_open_2_0"``."""
    return "_".join([prefix, *(str(p) for p in parts)])


def _get(key: str, default: Any = None) -> Any:
    return st.session_state.get(key, default)


def config_choice() -> str | None:
    return _get(CONFIG_CHOICE)


def selected_node() -> str | None:
    """The chapter the Knowledge base page shows: from ``?node=`` or the last click."""
    qp = st.query_params.get("node")
    # A link (?node=...) wins when it is new, even after the user clicked elsewhere before.
    if qp and (_get(SELECTED_NODE) is None or changed("node_query_param", qp)):
        st.session_state[SELECTED_NODE] = qp
    return _get(SELECTED_NODE)


def set_selected_node(node_id: str | None) -> None:
    st.session_state[SELECTED_NODE] = node_id


def changed(key: str, value: Any) -> bool:
    """True the first time ``value`` is seen under ``key`` (a widget's new selection)."""
    seen = f"_seen_{key}"
    if st.session_state.get(seen) == value:
        return False
    st.session_state[seen] = value
    return True


def golden_draft() -> GoldenSet | None:
    """The golden set as the user is editing it (kept across reruns and save conflicts)."""
    return _get(GOLDEN_DRAFT)


def set_golden_draft(gs: GoldenSet | None, *, dirty: bool) -> None:
    """Replace the draft and reset the table editor so it shows the new rows."""
    st.session_state[GOLDEN_DRAFT] = gs
    st.session_state[GOLDEN_WORKING] = None
    st.session_state[GOLDEN_DIRTY] = dirty
    st.session_state[GOLDEN_EDITOR_VERSION] = golden_editor_version() + 1


def golden_dirty() -> bool:
    """Whether the draft holds edits that are not saved yet."""
    return bool(_get(GOLDEN_DIRTY, False))


def keep_golden_working(gs: GoldenSet) -> None:
    """Remember the editor's current rows (the editor forgets them when the page is left)."""
    st.session_state[GOLDEN_WORKING] = gs
    st.session_state[GOLDEN_DIRTY] = True


def golden_working() -> GoldenSet | None:
    """The editor's latest rows (None until the table was edited since the last draft)."""
    return _get(GOLDEN_WORKING)


def restore_golden_working() -> None:
    """Coming back to the page: make the remembered rows the draft the editor starts from."""
    working = _get(GOLDEN_WORKING)
    editor = golden_editor_key()
    if working is not None and editor not in st.session_state:
        set_golden_draft(working, dirty=True)


def golden_editor_key() -> str:
    """The golden-set table editor's key (a new version makes Streamlit draw a fresh editor).

    The language is part of it: the table's headers are translated, and an editor whose
    columns changed under the same key would apply its edits to the wrong columns; a new key
    makes ``restore_golden_working`` carry the edits over instead."""

    return item_key(f"{GOLDEN_EDITOR}-{i18n.current()}", golden_editor_version())


def golden_editor_version() -> int:
    return int(_get(GOLDEN_EDITOR_VERSION, 0))


def golden_conflict() -> str | None:
    return _get(GOLDEN_CONFLICT)


def set_golden_conflict(message: str | None) -> None:
    st.session_state[GOLDEN_CONFLICT] = message


def golden_pool() -> list[dict[str, Any]] | None:
    return _get(GOLDEN_POOL)


def set_golden_pool(rows: list[dict[str, Any]] | None) -> None:
    st.session_state[GOLDEN_POOL] = rows


def show_run(run_id: str) -> None:
    """Make the Evaluate page's run picker show ``run_id`` (call before it is drawn)."""
    st.session_state[EVAL_RUN] = run_id


def search_response() -> Any:
    return _get(SEARCH_RESPONSE)


def set_search_response(resp: Any) -> None:
    st.session_state[SEARCH_RESPONSE] = resp


def chat_turns() -> list[dict[str, Any]]:
    """[{"question": str, "answer": ChatAnswer, "config": label}] oldest first."""
    if CHAT_TURNS not in st.session_state:
        st.session_state[CHAT_TURNS] = []
    return st.session_state[CHAT_TURNS]


def add_chat_turn(turn: dict[str, Any]) -> None:
    st.session_state[CHAT_TURNS] = [*chat_turns(), turn]


def clear_chat() -> None:
    """A new conversation: the next question starts a new kept conversation."""
    st.session_state[CHAT_TURNS] = []
    st.session_state[CHAT_DRAFT] = None
    st.session_state[CHAT_CONVERSATION] = None


def chat_conversation() -> str | None:
    return _get(CHAT_CONVERSATION)


def set_chat_conversation(conversation_id: str | None) -> None:
    st.session_state[CHAT_CONVERSATION] = conversation_id


def chat_draft() -> dict[str, Any] | None:
    """A golden-set entry drafted from a bad answer, waiting to be reviewed and saved."""
    return _get(CHAT_DRAFT)


def set_chat_draft(draft: dict[str, Any] | None) -> None:
    st.session_state[CHAT_DRAFT] = draft


def experiment_result() -> ExperimentResult | None:
    return _get(EXPERIMENT_RESULT)


def set_experiment_result(result: ExperimentResult | None) -> None:
    st.session_state[EXPERIMENT_RESULT] = result


def optimize_results() -> list[ExperimentResult] | None:
    return _get(OPTIMIZE_RESULTS)


def set_optimize_results(results: list[ExperimentResult] | None) -> None:
    st.session_state[OPTIMIZE_RESULTS] = results


def scorecard() -> Any:
    return _get(SCORECARD)


def set_scorecard(card: Any) -> None:
    st.session_state[SCORECARD] = card


def compare_result() -> Any:
    return _get(COMPARE_RESULT)


def set_compare_result(result: Any) -> None:
    st.session_state[COMPARE_RESULT] = result


def sweep_result() -> Any:
    return _get(SWEEP_RESULT)


def set_sweep_result(result: Any) -> None:
    st.session_state[SWEEP_RESULT] = result


def tune_result() -> Any:
    return _get(TUNE_RESULT)


def set_tune_result(result: Any) -> None:
    st.session_state[TUNE_RESULT] = result
    st.session_state[TUNE_EXPERIMENTS] = {}


def tune_experiments() -> dict[str, Any]:
    """Experiments run from the Tune page, by candidate spec (shown in place)."""
    return dict(_get(TUNE_EXPERIMENTS) or {})


def add_tune_experiment(spec: str, result: Any) -> None:
    st.session_state[TUNE_EXPERIMENTS] = {**tune_experiments(), spec: result}


def flash(message: str | None = None) -> str | None:
    """Set a one-shot success message (with an argument) or pop it (without)."""
    if message is not None:
        st.session_state[FLASH] = message
        return message
    return st.session_state.pop(FLASH, None)


def rater_name() -> str:
    return str(_get(RATER) or "").strip()


def rating_runs() -> dict[str, Any] | None:
    return _get(RATE_RUNS)


def set_rating_runs(runs: dict[str, Any] | None) -> None:
    st.session_state[RATE_RUNS] = runs
