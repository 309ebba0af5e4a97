"""mkdocs hook: the CLI reference, generated from the typer app.

``docs/reference/cli.md`` holds the marker ``<!-- cea-cli -->``; this hook replaces it with typer's own
Markdown docs of ``cea.cli.app`` (what ``typer cea.cli utils docs`` prints: every command's usage, arguments
and options with their help and defaults), headings moved one level down under the page's title.

``cea.cli`` imports a command's module only when that command runs (so ``cea probe`` starts without torch);
``cea.cli._register()`` with no command imports them all, so every command is on the app here. Any error
fails the build (mkdocs-typer2's native engine cannot read typer 0.29's parameters, and its subprocess engine
drops a failing command silently).
"""

from __future__ import annotations

import re

MARKER = "<!-- cea-cli -->"


def cli_markdown() -> str:
    import typer
    from typer.cli import get_docs_for_click

    from cea.cli import _register, app

    _register()
    command = typer.main.get_command(app)
    ctx = typer.Context(command, info_name="cea")
    docs = get_docs_for_click(obj=command, ctx=ctx, name="cea", title="cea")
    return re.sub(r"^(#+) ", r"#\1 ", docs.strip(), flags=re.M) + "\n"


def on_page_markdown(markdown, page, config, files):
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_markdown())
