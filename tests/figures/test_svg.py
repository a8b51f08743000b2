"""The SVG sanitiser keeps drawings and drops everything that could run or fetch."""

from __future__ import annotations

import pytest

from app.figures.svg import UnsafeSvg, sanitize_svg

HOSTILE = b"""<?xml version='1.0'?>
<svg xmlns='http://www.w3.org/2000/svg' xmlns:xlink='http://www.w3.org/1999/xlink'
     width='10pt' height='20pt' viewBox='0 0 10 20' onload='alert(1)'>
  <script>alert(2)</script>
  <defs><path id='g1' d='M0 0L1 1'/></defs>
  <use xlink:href='#g1' x='1' y='2'/>
  <use xlink:href='javascript:alert(3)'/>
  <use href='https://evil.example/sprite.svg#a'/>
  <a xlink:href='javascript:alert(4)'><rect width='5' height='5'/></a>
  <foreignObject><div xmlns='http://www.w3.org/1999/xhtml'>hi</div></foreignObject>
  <image xlink:href='https://evil.example/x.png'/>
  <style>@import url(https://evil.example/x.css);</style>
  <path d='M0 0' fill='url(https://evil.example/p#x)' stroke='url(#local)' style='fill:red' onclick='alert(5)'/>
  <text x='1' y='1'>a &lt;b&gt;<tspan>c</tspan> d</text>
</svg>"""


def test_hostile_svg_keeps_only_the_drawing() -> None:
    clean = sanitize_svg(HOSTILE)
    lowered = clean.lower()
    for banned in ("script", "onload", "onclick", "javascript", "evil.example", "foreignobject",
                   "<image", "<style", "style=", "<a ", "<div", "alert"):
        assert banned not in lowered, banned
    assert "<path id=\"g1\" d=\"M0 0L1 1\">" in clean
    assert "<use xlink:href=\"#g1\" x=\"1\" y=\"2\">" in clean
    assert 'stroke="url(#local)"' in clean
    assert "<text x=\"1\" y=\"1\">a &lt;b&gt;<tspan>c</tspan> d</text>" in clean


def test_scale_multiplies_the_size_and_keeps_the_view_box() -> None:
    clean = sanitize_svg(HOSTILE, scale=1.5)
    assert 'width="15.000pt"' in clean and 'height="30.000pt"' in clean
    assert 'viewBox="0 0 10 20"' in clean


def test_entities_are_refused() -> None:
    bomb = b"""<?xml version='1.0'?><!DOCTYPE svg [<!ENTITY a 'aaaaaaaaaa'><!ENTITY b '&a;&a;&a;'>]>
    <svg xmlns='http://www.w3.org/2000/svg'><text>&b;</text></svg>"""
    with pytest.raises(UnsafeSvg):
        sanitize_svg(bomb)


@pytest.mark.parametrize("data", [b"not xml", b"<html xmlns='http://www.w3.org/1999/xhtml'/>", b"<svg/>"])
def test_what_is_not_svg_is_refused(data: bytes) -> None:
    with pytest.raises(UnsafeSvg):
        sanitize_svg(data)
