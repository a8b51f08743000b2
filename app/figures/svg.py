"""Allow-list sanitiser for the SVG that Asymptote (through dvisvgm) writes.

The drawing code comes from imported problems, and Asymptote labels are LaTeX, so the SVG is
treated as untrusted. nh3 and bleach clean HTML: they drop or mangle SVG's namespaced,
case-sensitive elements (linearGradient, clipPath) and attributes (xlink:href). Instead the file
is parsed with defusedxml (no entity expansion, no external DTDs) and rebuilt from scratch with
only the drawing elements and presentation attributes dvisvgm uses: no scripts, no event
handlers, no foreignObject, no styles, and links only to fragments of the same file.
"""

from __future__ import annotations

import re
from xml.etree.ElementTree import Element
from xml.sax.saxutils import escape, quoteattr

from defusedxml import ElementTree

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"

ELEMENTS = frozenset({
    "svg", "g", "defs", "path", "use", "rect", "circle", "ellipse", "line", "polyline", "polygon",
    "text", "tspan", "clipPath", "linearGradient", "radialGradient", "stop", "pattern", "symbol",
    "title", "desc",
})
ATTRIBUTES = frozenset({
    "id", "d", "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "rx", "ry", "dx", "dy",
    "width", "height", "viewBox", "points", "transform", "preserveAspectRatio", "version",
    "fill", "fill-opacity", "fill-rule", "stroke", "stroke-width", "stroke-opacity",
    "stroke-linecap", "stroke-linejoin", "stroke-miterlimit", "stroke-dasharray",
    "stroke-dashoffset", "opacity", "clip-path", "clip-rule", "font-family", "font-size",
    "font-weight", "font-style", "text-anchor", "offset", "stop-color", "stop-opacity",
    "gradientUnits", "gradientTransform", "patternUnits", "patternTransform", "clipPathUnits",
    "spreadMethod", "fx", "fy", "fr",
})
# Paint and clip references must stay inside the file: url(#id) only.
URL_ATTRIBUTES = frozenset({"fill", "stroke", "clip-path"})
LOCAL_URL = re.compile(r"url\(#[\w.:-]+\)")
LOCAL_REF = re.compile(r"#[\w.:-]+")
LENGTH = re.compile(r"([0-9]*\.?[0-9]+)(pt|px|mm|cm|in|)")


class UnsafeSvg(ValueError):
    """The input is not an SVG document we can clean."""


def sanitize_svg(data: bytes | str, *, scale: float = 1.0) -> str:
    """Clean SVG text; `scale` multiplies the drawing's width and height (its viewBox stays)."""
    try:
        root = ElementTree.fromstring(data)
    except (ElementTree.ParseError, ValueError) as error:
        raise UnsafeSvg(f"not well-formed XML: {error}") from None
    if _local_name(root.tag) != "svg" or _namespace(root.tag) != SVG_NS:
        raise UnsafeSvg("the document is not an SVG image")
    parts: list[str] = []
    _write(root, parts, top=True, scale=scale)
    return "".join(parts)


def _write(element: Element, parts: list[str], *, top: bool = False, scale: float = 1.0) -> None:
    name = _local_name(element.tag)
    attributes = _clean_attributes(element)
    if top:
        attributes = {"xmlns": SVG_NS, "xmlns:xlink": XLINK_NS, **_scaled(attributes, scale)}
    parts.append(f"<{name}")
    parts.extend(f" {key}={quoteattr(value)}" for key, value in attributes.items())
    parts.append(">")
    if element.text and name in ("text", "tspan", "title", "desc"):
        parts.append(escape(element.text))
    for child in element:
        if _namespace(child.tag) == SVG_NS and _local_name(child.tag) in ELEMENTS:
            _write(child, parts)
        if child.tail and name in ("text", "tspan"):
            parts.append(escape(child.tail))
    parts.append(f"</{name}>")


def _clean_attributes(element: Element) -> dict[str, str]:
    kept: dict[str, str] = {}
    for key, value in element.attrib.items():
        namespace = _namespace(key)
        name = _local_name(key)
        if name == "href" and namespace in ("", XLINK_NS):
            if LOCAL_REF.fullmatch(value.strip()):
                kept["xlink:href"] = value.strip()
        elif namespace == "" and name in ATTRIBUTES:
            if name in URL_ATTRIBUTES and "url(" in value and not LOCAL_URL.fullmatch(value.strip()):
                continue
            kept[name] = value
    return kept


def _scaled(attributes: dict[str, str], scale: float) -> dict[str, str]:
    for name in ("width", "height"):
        match = LENGTH.fullmatch(attributes.get(name, ""))
        if match:
            attributes[name] = f"{float(match.group(1)) * scale:.3f}{match.group(2)}"
    return attributes


def _namespace(tag: str) -> str:
    return tag[1:].split("}", 1)[0] if tag.startswith("{") else ""


def _local_name(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]
