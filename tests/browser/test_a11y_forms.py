"""Form fields as a screen reader names them: by their label's text alone.

A hint or an error inside a field's <label> was read as part of its name, and again when the
field was described ("Username 2–64 letters … Username is taken"). Each page's fields are checked
as Chromium computes them, on the page as it first shows and with the errors it shows after a
bad submission: no name holds a hint's or an error's text, and a field in error is aria-invalid
and described by its error.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.browser.conftest import login
from tests.conftest import make_project, make_user

CONTROLS = "input:not([type=hidden]), select, textarea"


def _name(control: Locator) -> str:
    # The first line of an aria snapshot is `- role "name"`, with the name as Chromium computed it.
    first = control.aria_snapshot().splitlines()[0]
    quoted = re.match(r'- [\w-]+ "((?:[^"\\]|\\.)*)"', first)
    return quoted[1].replace('\\"', '"') if quoted else ""


def assert_named_by_labels_alone(form: Locator) -> None:
    """No control of `form` has a hint's or an error's text in its name, and each control in
    error is invalid and described by that error."""
    notes = [text.strip() for text in form.locator(".field-hint").all_inner_texts() if text.strip()]
    controls = form.locator(CONTROLS)
    assert controls.count(), "the form has no fields"
    for control in controls.all():
        name = _name(control)
        for note in notes:
            assert note not in name, f"{name!r} holds {note!r}"
    errors = form.locator(".field-hint.error[id]")
    for error in errors.all():
        error_id = error.get_attribute("id")
        described = form.locator(f'[aria-describedby~="{error_id}"]')
        assert described.count(), f"nothing is described by #{error_id}"
        text = error.inner_text().strip()
        for element in described.all():
            expect(element).to_have_accessible_description(re.compile(re.escape(text)))
            # A group (fieldset) is described by its error; the choices in it are what is invalid.
            group = element.evaluate("e => e.tagName") == "FIELDSET"
            for invalid in element.locator(CONTROLS).all() if group else [element]:
                expect(invalid).to_have_attribute("aria-invalid", "true")


@pytest.mark.parametrize(
    ("path", "form"),
    [
        ("/admin/activity?category=nothing-of-the-kind", "form.report-filters"),
        ("/manage/projects/{id}/labels?outcome=nothing&kind=nothing&problem=x", "form.report-filters"),
        ("/manage/projects/{id}/reports?kind=nothing&status=nothing", "form.report-filters"),
        ("/manage/projects/{id}/problems?state=nothing", "form.report-filters"),
        ("/manage/projects/{id}/export/download?format=nothing&min_agreement=x&min_labeler_accuracy=x",
         'form[action$="/export/download"]'),
        ("/manage/projects/{id}/import", 'form[action$="/import"]'),
    ],
)
def test_filters_and_the_export_form_name_fields_by_their_labels(page: Page, session_factory, path: str, form: str) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "boss", "admin")
    login(page, "boss", "/admin/users")
    page.goto(path.format(id=project.id))
    shown = page.locator(form)
    expect(shown).to_be_visible()
    assert_named_by_labels_alone(shown)
    if "=" in path:
        expect(shown.locator(".field-hint.error").first).to_be_visible()


def test_the_new_user_form_names_its_fields_with_and_without_errors(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    login(page, "boss", "/admin/users")
    form = page.locator("#new-user form")
    assert_named_by_labels_alone(form)
    expect(form.get_by_role("textbox", name="Username", exact=True)).to_have_accessible_description(
        "2–64 letters (A–Z, without accents), digits and _ . -"
    )
    form.get_by_role("textbox", name="Username", exact=True).fill("not a name!")
    form.get_by_role("button", name="Create user").click()
    form = page.locator("#new-user form")
    username = form.get_by_role("textbox", name="Username", exact=True)
    expect(username).to_have_attribute("aria-invalid", "true")
    assert_named_by_labels_alone(form)


def test_the_new_project_and_its_settings_name_their_fields(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "mona", "manager")
    login(page, "mona", "/manage/projects")
    form = page.locator("#new-project form")
    assert_named_by_labels_alone(form)
    form.get_by_role("textbox", name="Name", exact=True).fill("algebra")  # taken
    form.get_by_role("button", name="Create project").click()
    form = page.locator("#new-project form")
    expect(form.get_by_role("textbox", name="Name", exact=True)).to_have_attribute("aria-invalid", "true")
    assert_named_by_labels_alone(form)

    page.goto(f"/manage/projects/{project.id}")
    delete = page.locator("#delete form")
    delete.get_by_role("textbox", name="Type the project's name to confirm").fill("not its name")
    delete.get_by_role("button", name="Delete project").click()
    delete = page.locator("#delete form")
    expect(delete.locator(".field-hint.error")).to_be_visible()
    assert_named_by_labels_alone(delete)
    assert_named_by_labels_alone(page.locator(f'form[action="/manage/projects/{project.id}/settings"]'))


def test_round_settings_name_their_fields(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "rosa", "researcher")
    login(page, "rosa", f"/research/projects/{project.id}")
    form = page.locator("form.settings-grid")
    assert_named_by_labels_alone(form)
    picks = form.get_by_role("textbox", name="Picks per round", exact=True)
    expect(picks).to_have_accessible_description("solutions queued by each round")
    picks.fill("many")
    form.locator("button[type=submit]").last.click()
    form = page.locator("form.settings-grid")
    expect(form.get_by_role("textbox", name="Picks per round", exact=True)).to_have_attribute("aria-invalid", "true")
    assert_named_by_labels_alone(form)
