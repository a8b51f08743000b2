"""The import page guesses a chosen or dropped file's format from its first line."""

from __future__ import annotations

import gzip
import json

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import login, screenshot
from tests.conftest import make_project, make_user
from tests.imports.conftest import import_bytes, jsonl, sample_records

FILES = {
    "prm800k": (jsonl(sample_records()), "PRM800K", '"question" and "label"'),
    "math": (
        b'\n{"problem": "What is $2+2$?", "answer": "4", "subject": "Algebra", "level": 1}\n',
        "MATH problems", '"problem" and "subject"',
    ),
    "solutions": (
        b'\xef\xbb\xbf{"problem": "What is $1+1$?", "steps": ["1+1=2", "# Answer\\n\\n2"]}\n',
        "Candidate solutions", '"steps"',
    ),
}


@pytest.fixture
def import_page(page: Page, session_factory) -> Page:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    # The problem the candidate solutions below belong to.
    import_bytes(session_factory, project, b'{"problem": "What is $1+1$?", "answer": "2"}\n', "math", filename="seed.jsonl")
    make_user(session_factory, "maria", "manager")
    login(page, "maria", f"/manage/projects/{project.id}/import")
    return page


@pytest.mark.parametrize("fmt", list(FILES))
def test_a_chosen_file_has_its_format_guessed_and_imported(import_page: Page, fmt: str) -> None:
    page = import_page
    data, name, why = FILES[fmt]
    other = next(label for key, (_, label, _) in FILES.items() if key != fmt)
    page.get_by_label(other).check()
    page.get_by_label("File").set_input_files({"name": f"{fmt}.jsonl", "mimeType": "application/x-ndjson", "buffer": data})
    guess = page.locator("#format-guess")
    expect(guess).to_have_text(f"Looks like {name}: the first line has {why}. Change it below if that is wrong.")
    expect(page.get_by_label(name)).to_be_checked()
    screenshot(page, f"import_guess_{fmt}.png")
    page.get_by_role("button", name="Upload and import").click()
    expect(page.get_by_text(f"Imported {fmt}.jsonl.")).to_be_visible()


def test_a_dropped_file_is_guessed_and_an_unknown_one_is_left_to_the_manager(import_page: Page) -> None:
    page = import_page
    line = json.dumps({"problem": "What is 2+2?", "text": "2+2=4\n\n# Answer\n\n4"})
    transfer = page.evaluate_handle(
        """(line) => {
          const transfer = new DataTransfer();
          transfer.items.add(new File([line + "\\n"], "dropped.jsonl", {type: "application/x-ndjson"}));
          return transfer;
        }""",
        line,
    )
    page.locator("form[data-import]").dispatch_event("drop", {"dataTransfer": transfer})
    expect(page.locator("#format-guess")).to_contain_text('Looks like Candidate solutions: the first line has "text"')
    expect(page.get_by_label("Candidate solutions")).to_be_checked()
    assert page.get_by_label("File").evaluate("input => input.files[0].name") == "dropped.jsonl"

    page.get_by_label("MATH problems").check()
    page.get_by_label("File").set_input_files({"name": "notes.txt", "mimeType": "text/plain", "buffer": b"not json at all\n"})
    expect(page.locator("#format-guess")).to_have_text("Could not tell the format: its first line is not JSON. Choose it below.")
    expect(page.get_by_label("MATH problems")).to_be_checked()
    # The server still judges the file as the manager chose.
    page.get_by_role("button", name="Upload and import").click()
    expect(page.get_by_role("alert")).to_contain_text("1 bad line in notes.txt: nothing was imported.")


@pytest.mark.parametrize(("data", "why"), [
    (b"", "the file is empty"),
    (b"\n  \n\n", "the file has only blank lines"),
    (b"\n" * (2 << 20) + b'{"problem": "2+2"}\n', "its first megabyte has only blank lines"),
    ('{"problem": "2+2"}\n'.encode("utf-16"), "the file is UTF-16 text, not UTF-8: save it as UTF-8"),
    (b'{"problem": "x\x00"}\n', "the file holds NUL bytes: it is not UTF-8 text"),
    (gzip.compress(b'{"problem": "2+2"}\n', mtime=0), "the file is gzip-compressed: decompress it (gunzip) and upload the .jsonl file"),
    (b"PK\x03\x04\x14\x00\x00\x00", "the file is a zip archive: upload the .jsonl file inside it"),
    (b"PAR1\x15\x04", "the file is a Parquet file: imports read JSONL, one JSON object a line"),
    (b'{"problem": "' + b"y" * (2 << 20) + b'"}\n', "its first line is longer than the megabyte this page reads"),
])
def test_a_file_whose_start_cannot_be_read_says_why_not_that_it_is_not_json(import_page: Page, data: bytes, why: str) -> None:
    page = import_page
    page.get_by_label("File").set_input_files({"name": "odd.jsonl", "mimeType": "application/x-ndjson", "buffer": data})
    # No format takes a file that is no UTF-8 text: choosing one would not help.
    unreadable = not why.startswith(("its first", "the first"))
    said = f"This file cannot be imported as it is: {why}." if unreadable else f"Could not tell the format: {why}. Choose it below."
    expect(page.locator("#format-guess")).to_have_text(said)
