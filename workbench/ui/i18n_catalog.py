"""Write a translation catalog (PO) from a dict: ``python -m workbench.ui.i18n_catalog``
merges new entries into ``locale/<lang>/LC_MESSAGES/messages.po`` keeping existing ones."""

from __future__ import annotations

import io
from collections.abc import Mapping

from engine.atomic import atomic_write_bytes
from workbench.ui.i18n import LOCALE_DIR


def write_catalog(lang: str, entries: Mapping[str, str]) -> int:
    """Merge ``entries`` (msgid -> translation) into the catalog, replacing the translation of
    an msgid already there; returns its size."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import read_po, write_po

    path = LOCALE_DIR / lang / "LC_MESSAGES" / "messages.po"
    if path.is_file():
        with path.open("rb") as fh:
            cat = read_po(fh, locale=lang)
    else:
        cat = Catalog(locale=lang, project="WikiRAG Workbench", charset="utf-8")
    for msgid, msgstr in entries.items():
        if (old := cat.get(msgid)) is not None:
            old.string = msgstr  # Catalog.add keeps an existing entry's old translation
        else:
            cat.add(msgid, msgstr)
    buf = io.BytesIO()
    write_po(buf, cat, width=100, sort_output=True, omit_header=False)
    path.parent.mkdir(parents=True, exist_ok=True)

    atomic_write_bytes(path, buf.getvalue())
    return len(cat)
