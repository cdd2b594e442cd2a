"""The Streamlit workbench: thin pages over the Streamlit-free core in workbench/ and engine/."""
