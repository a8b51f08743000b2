"""Labeling guidelines: Markdown that a manager writes and labelers read, before their first task
and whenever they ask, as PRM800K's labelers had their instructions.

markdown-it-py (CommonMark, with GitHub's tables and strikethrough) renders them with raw HTML
off, so markup in the text shows as text, and its link check refuses javascript:, vbscript:,
file: and data: targets (data: images aside). An image is shown as a link to it, named by its
alt text: the pages' Content-Security-Policy would block another site's picture, and with the
image rule off `![a](b)` read as "!" and a link. Math is left to KaTeX in
the browser: `$…$`, `$$…$$` and amsmath environments come out as `.math` elements holding their
LaTeX as escaped text.
"""

from __future__ import annotations

from collections.abc import Iterator
from hashlib import sha256

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token
from markupsafe import Markup
from mdit_py_plugins.amsmath import amsmath_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin

GUIDELINES_MAX_LENGTH = 50_000


def _new_tab(self, tokens, idx, options, env) -> str:
    # A labeler who follows a link in the guidelines keeps the task they are on.
    tokens[idx].attrSet("target", "_blank")
    tokens[idx].attrSet("rel", "noopener noreferrer")
    return self.renderToken(tokens, idx, options, env)


def _without_links(tokens: list[Token]) -> Iterator[Token]:
    # An image's description may hold links and images of its own; inside the link it becomes,
    # only their text can stay (a link inside a link is not HTML).
    for token in tokens:
        if token.type == "image":
            yield from _without_links(token.children or [])
        elif token.type not in ("link_open", "link_close"):
            yield token


def _image_as_link(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    description = list(_without_links(token.children or []))
    # Rendered by the rules above, so that a formula in it reaches KaTeX.
    shown = f"{self.renderInline(description, options, env)} (image)" \
        if any(t.content.strip() for t in description) else "image"
    depth = sum({"link_open": 1, "link_close": -1}.get(t.type, 0) for t in tokens[:idx])
    if depth > 0:
        return shown
    href = escapeHtml(token.attrGet("src") or "")
    return f'<a class="guidelines-image" href="{href}" target="_blank" rel="noopener noreferrer">{shown}</a>'


# The guidelines sit under a title of their own: the dialog's <h2> on the labeling page, the
# page's <h1> on theirs. A Markdown "#" is an <h3>, and each level one deeper, so that their
# headings nest under that title in both places instead of being a second page title.
_HEADING_SHIFT = 2


def _nested_heading(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    token.tag = f"h{min(int(token.tag[1:]) + _HEADING_SHIFT, 6)}"
    return self.renderToken(tokens, idx, options, env)


def _math(tag: str, display: bool):
    # One shape for every kind of formula the plugins find (their own markup puts a <div> inside
    # a <p> for inline $$…$$): the source as text, and whether KaTeX draws it as a display.
    mode = "block" if display else "inline"

    def render(self, tokens, idx, options, env) -> str:
        return f'<{tag} class="math" data-display="{mode}">{escapeHtml(tokens[idx].content)}</{tag}>'

    return render


# Pandoc's rule for $: no space inside the delimiters and no digit after the closing one, so that
# "between $3 and $5" stays text.
_MARKDOWN = (
    MarkdownIt("commonmark", {"html": False})
    .enable(["table", "strikethrough"])
    .use(dollarmath_plugin, allow_space=False, allow_digits=False, double_inline=True)
    .use(amsmath_plugin)
)
_MARKDOWN.add_render_rule("link_open", _new_tab)
_MARKDOWN.add_render_rule("heading_open", _nested_heading)
_MARKDOWN.add_render_rule("heading_close", _nested_heading)
_MARKDOWN.add_render_rule("image", _image_as_link)
_MARKDOWN.add_render_rule("math_inline", _math("span", display=False))
_MARKDOWN.add_render_rule("math_inline_double", _math("span", display=True))
for _block in ("math_block", "math_block_label", "amsmath"):
    _MARKDOWN.add_render_rule(_block, _math("div", display=True))


def render_guidelines(text: str) -> Markup:
    return Markup(_MARKDOWN.render(text))


def guidelines_version(text: str) -> str:
    """Changes whenever the text does, so the labeling page can show guidelines again once a
    manager has edited them."""
    return sha256(text.encode()).hexdigest()[:16]
