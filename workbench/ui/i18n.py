"""UI language: English source strings, translations from gettext catalogs (Babel reads them).

``t("Evaluate")`` returns the string in the current language. The language comes from the
sidebar switch, else ``wikirag ui --lang`` / ``WIKIRAG_LANG``, else the system locale
(a ``zh*`` locale picks Chinese), else English. Catalogs live in
``workbench/ui/locale/<lang>/LC_MESSAGES/messages.po`` (the format translators' tools
read); a test checks that every ``t("...")`` string in the UI has a Chinese entry.
"""

from __future__ import annotations

import functools
import locale
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import streamlit as st

from workbench.ui.resources import launch_args

LANGS = {"en": "English", "zh": "中文"}
DEFAULT = "en"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
SESSION_KEY = "ui_lang"

V = TypeVar("V")


def normalize(value: str | None) -> str | None:
    """``zh_CN.UTF-8`` / ``zh-Hans`` / ``ZH`` -> ``zh``; unknown or empty -> None."""
    if not value:
        return None
    code = value.strip().lower().replace("-", "_").split(".")[0].split("_")[0]
    return code if code in LANGS else None


def system_lang() -> str | None:
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        if lang := normalize(os.environ.get(var)):
            return lang
    try:
        return normalize(locale.getlocale()[0])
    except ValueError:
        return None


def default_lang(launch: str | None = None) -> str:
    """``--lang`` from the launch, else WIKIRAG_LANG, else the system locale, else English."""
    return (
        normalize(launch) or normalize(os.environ.get("WIKIRAG_LANG")) or system_lang() or DEFAULT
    )


@functools.cache
def catalog(lang: str) -> dict[str, str]:
    """msgid -> translation for ``lang`` (empty for English, the source language)."""
    path = LOCALE_DIR / lang / "LC_MESSAGES" / "messages.po"
    if lang == DEFAULT or not path.is_file():
        return {}
    from babel.messages.pofile import read_po

    with path.open("rb") as fh:
        cat = read_po(fh, locale=lang)
    return {str(m.id): str(m.string) for m in cat if m.id and m.string and not m.fuzzy}


def current() -> str:
    lang = st.session_state.get(SESSION_KEY)
    if lang in LANGS:
        return str(lang)

    lang = default_lang(launch_args().get("lang"))
    st.session_state[SESSION_KEY] = lang
    return lang


def t(msgid: str, /, **values: object) -> str:
    """``msgid`` in the current language, ``{name}`` fields filled from ``values``."""
    text = catalog(current()).get(msgid, msgid)
    return text.format(**values) if values else text


def labelled(labels: Mapping[V, str]) -> Callable[[V], str]:
    """A widget's ``format_func`` from labels translated in the script, before the widget.

    Streamlit's test harness also calls ``format_func`` outside the script run, where ``t()``
    cannot see the session's language. A value without a label shows as itself.
    """
    return lambda value: labels.get(value, str(value))


def switch() -> None:
    """The sidebar's language switch."""
    current()
    st.segmented_control(
        "Language / 语言",
        list(LANGS),
        key=SESSION_KEY,
        format_func=labelled(LANGS),
        label_visibility="collapsed",
    )
