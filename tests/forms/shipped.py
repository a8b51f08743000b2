"""What a browser posts from a page's form, so that a test submits the form as shipped."""

from __future__ import annotations

from html.parser import HTMLParser


class _FormFields(HTMLParser):
    """The fields of the form posting to `action`, with the values a browser would send: a
    radio or checkbox only when checked, a select its selected option (else its first)."""

    def __init__(self, action: str) -> None:
        super().__init__(convert_charrefs=True)
        self.action = action
        self.inside = False
        self.fields: dict[str, str] = {}
        self.textarea: str | None = None
        self.select: str | None = None
        self.options: list[tuple[str, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = a.get("action") == self.action
        elif not self.inside:
            return
        elif tag == "option" and self.select is not None:
            self.options.append((a.get("value", ""), "selected" in a))
        elif "name" not in a or "disabled" in a:
            return
        elif tag == "input":
            kind = a.get("type", "text")
            if kind in ("radio", "checkbox") and "checked" not in a:
                return
            if kind not in ("submit", "button", "file"):
                self.fields[a["name"]] = a.get("value", "on" if kind == "checkbox" else "")
        elif tag == "textarea":
            self.textarea = a["name"]
            self.fields[self.textarea] = ""
        elif tag == "select":
            self.select, self.options = a["name"], []

    def handle_data(self, data: str) -> None:
        if self.textarea is not None:
            self.fields[self.textarea] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "textarea":
            self.textarea = None
        elif tag == "select" and self.select is not None:
            chosen = [value for value, selected in self.options if selected] or [v for v, _ in self.options[:1]]
            if chosen:
                self.fields[self.select] = chosen[-1]
            self.select = None


def form_fields(page: str, action: str) -> dict[str, str]:
    """The name → value pairs a browser submits from the form on `page` posting to `action`."""
    parser = _FormFields(action)
    parser.feed(page)
    assert parser.fields, f"no form posting to {action} on the page"
    return parser.fields
