"""MkDocs hooks for the documentation site (``hooks:`` in mkdocs.yml).

mkdocs-click prints an option's default as ``repr(default)``, and under click 8.3 an option without a default
holds click's ``Sentinel.UNSET`` marker; the command-line reference shows no default there instead, as
``--help`` does.  The docstrings cross-reference with Sphinx roles (``:class:`Parser```), which
mkdocstrings leaves as text: the API reference shows the name alone, in code, ``~`` keeping its last part as
Sphinx does.
"""

from __future__ import annotations

import re
from typing import Any

UNSET_CELL = "<td><code>Sentinel.UNSET</code></td>"
ROLE = re.compile(r":(?:class|func|meth|data|mod|attr|exc|obj):<code>(~?)([^<]*)</code>")


def _role(match: re.Match[str]) -> str:
    name = match[2].rsplit(".", 1)[-1] if match[1] else match[2]
    return f"<code>{name}</code>"


def on_page_content(html: str, page: Any, **_: Any) -> str:
    """Pages without click's internal marker in a Default column and without raw Sphinx roles."""
    return ROLE.sub(_role, html.replace(UNSET_CELL, "<td></td>"))
