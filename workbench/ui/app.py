"""WikiRAG Workbench: `wikirag ui` runs this with `streamlit run`.

Where it looks: `-- --kb DIR --index DIR --dataset FILE --experiments DIR --config FILE`
after the script name, else the WIKIRAG_KB / WIKIRAG_INDEX / WIKIRAG_DATASET /
WIKIRAG_EXPERIMENTS / WIKIRAG_CONFIG env vars, else wiki, .wikirag/<kb>, datasets/<kb>.yaml.
"""

from __future__ import annotations

import streamlit as st

from workbench.ui import components, resources
from workbench.ui.i18n import t

st.set_page_config(page_title="WikiRAG Workbench", page_icon=":material/hub:", layout="wide")

# The screens live in views/, not pages/: Streamlit auto-discovers a pages/ folder and, on a
# deep link such as /evaluate, runs that file directly, bypassing this entrypoint (no
# navigation, no wide layout, no shared sidebar).
PAGES = [
    st.Page("views/overview.py", title=t("Overview"), icon=":material/dashboard:", default=True),
    st.Page("views/knowledge_base.py", title=t("Knowledge base"), icon=":material/account_tree:"),
    st.Page("views/golden_set.py", title=t("Golden set"), icon=":material/fact_check:"),
    st.Page("views/evaluate.py", title=t("Evaluate"), icon=":material/speed:"),
    st.Page("views/tune.py", title=t("Tune"), icon=":material/tune:"),
    st.Page("views/compare.py", title=t("Compare & sweep"), icon=":material/compare_arrows:"),
    st.Page("views/experiments.py", title=t("Experiments"), icon=":material/science:"),
    st.Page("views/scorecard.py", title=t("Scorecard"), icon=":material/grade:"),
    st.Page("views/chat.py", title=t("Chat"), icon=":material/forum:"),
    st.Page("views/reports.py", title=t("Reports"), icon=":material/description:"),
]

page = st.navigation(PAGES)
try:
    ws = resources.workspace()
except Exception as exc:  # e.g. the KB folder does not exist
    st.title("WikiRAG Workbench")
    st.error(str(exc))
    st.caption(t("Start it with `wikirag ui --kb DIR` pointing at a folder of Markdown files."))
    st.stop()
with components.guarded(t("the sidebar")):
    components.sidebar(ws)
page.run()
