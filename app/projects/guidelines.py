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
from markdown_it.rules_core import StateCore
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
# page's <h1> on theirs, so their headings start at <h3>. Levels are relative to what the author
# wrote, not shifted by a fixed amount: guidelines that start at "##", or go from "#" to "###",
# would leave a gap in the outline (an <h4> under the <h2>, an <h5> under an <h3>) that a screen
# reader's list of headings reads as a missing section. A heading sits one level below the
# nearest earlier heading of a higher Markdown level, so the highest level used is an <h3> and
# each step down is one level, however many the author skipped. HTML has nothing below <h6>:
# deeper headings stay <h6>.
_TOP_HEADING = 3


def _nest_headings(state: StateCore) -> None:
    written: list[int] = []  # the Markdown levels of the headings the next one may sit under
    shown = ""
    for token in state.tokens:
        if token.type == "heading_open":
            level = int(token.tag[1:])
            while written and written[-1] >= level:
                written.pop()
            shown = f"h{min(_TOP_HEADING + len(written), 6)}"
            written.append(level)
            token.tag = shown
        elif token.type == "heading_close":
            token.tag = shown


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
_MARKDOWN.core.ruler.push("nest_headings", _nest_headings)
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
