"""mkdocs hook: the docstrings' Sphinx roles (``:func:`cea.fit```, ``:mod:`cea.knn.head```) shown as plain code.

The docstrings are read by ``help()`` and by this site alike; mkdocstrings renders their Markdown, where a role is
left as ``:func:`` before the code. This drops the role, keeping the code.
"""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:py:)?(?:mod|func|class|meth|attr|data|obj|exc|const):(<code>)")


def on_page_content(html, page, config, files):
    return ROLE.sub(r"\1", html)
