"""A manager in Chromium: create a project, import (a bad file, then a good one), watch progress,
export; and the admin's user page. Screenshots of every page land in tests/screenshots/."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import login, screenshot
from tests.conftest import PASSWORD, api_headers, make_project, make_user
from tests.imports.conftest import SAMPLE, import_bytes

PROBLEM = "What is $\\frac{1}{2} + \\frac{1}{3}$?"
STEPS = ["Use the common denominator $6$.", "So $\\frac{3}{6} + \\frac{2}{6} = \\frac{5}{6}$.", "# Answer\n\n$\\frac{5}{6}$"]


def _jsonl(*records: object) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _upload(page: Page, name: str, data: bytes, format_label: str) -> None:
    page.get_by_label("File").set_input_files({"name": name, "mimeType": "application/x-ndjson", "buffer": data})
    page.get_by_label(format_label).check()
    page.get_by_role("button", name="Upload and import").click()


def _stat(page: Page, name: str):  # type: ignore[no-untyped-def]
    # The whole name: the agreement card's "Solutions compared" must not match "Solutions".
    title = page.locator("dt", has_text=re.compile(f"^{re.escape(name)}$"))
    return page.locator("dl.stats > div").filter(has=title).locator("dd")


def test_manager_creates_imports_watches_and_exports(page: Page, client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "maria", "manager")
    lena = make_user(session_factory, "lena", "labeler")
    login(page, "maria", "/manage/projects")
    expect(page.get_by_role("heading", name="No projects yet")).to_be_visible()
    screenshot(page, "manage_projects_empty.png")

    page.get_by_label("Name").fill("Fractions pilot")
    page.get_by_label("Description").fill("Adding fractions, phase 2 style.")
    page.get_by_label("Full").check()
    page.get_by_label("Lease minutes").fill("20")
    page.get_by_role("button", name="Create project").click()
    expect(page.get_by_role("heading", name="Fractions pilot")).to_be_visible()
    project_url = page.url
    project_id = int(project_url.rstrip("/").rsplit("/", 1)[1])

    page.get_by_role("link", name="Import", exact=True).click()
    _upload(page, "problems.jsonl", _jsonl({"problem": PROBLEM, "answer": "\\frac{5}{6}", "subject": "Algebra", "level": 1}), "MATH problems")
    expect(page.get_by_text("Imported problems.jsonl.")).to_be_visible()

    good = {"problem": PROBLEM, "steps": STEPS, "answer": "\\frac{5}{6}"}
    bad = {"problem": PROBLEM, "steps": "one string, not a list"}
    _upload(page, "candidates.jsonl", _jsonl(good, bad), "Candidate solutions")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("nothing was imported")
    error_row = page.locator("table.line-errors tbody tr")
    expect(error_row).to_have_count(1)
    expect(error_row.locator("td").nth(1)).to_have_text("2")
    expect(error_row.locator("td").nth(2)).to_have_text("steps")
    expect(error_row.locator("td").nth(3)).to_contain_text("must be an array of strings")
    screenshot(page, "manage_import_errors.png")

    _upload(page, "candidates-fixed.jsonl", _jsonl(good, {**good, "steps": STEPS[:1] + ["So it is $\\frac{2}{5}$.", "# Answer\n\n$\\frac{2}{5}$"], "answer": "\\frac{2}{5}"}), "Candidate solutions")
    expect(page.get_by_text("Imported candidates-fixed.jsonl.")).to_be_visible()
    expect(_stat(page, "Solutions added")).to_have_text("2")
    screenshot(page, "manage_import_done.png")

    # A labeler labels one solution through the API meanwhile.
    headers = api_headers(client, "lena")
    task = client.post(f"/api/v1/projects/{project_id}/tasks/next", headers=headers).json()["task"]
    steps = task["solution"]["steps"]
    submitted = client.post(
        f"/api/v1/assignments/{task['assignment_id']}/submit",
        headers=headers,
        json={"idempotency_key": "lena-first-label", "ratings": [{"rating": 1}] * len(steps),
              "finish_reason": "solution", "total_time_ms": 42_000},
    )
    assert submitted.status_code == 200, submitted.text

    page.get_by_role("link", name="Overview").click()
    expect(_stat(page, "Solutions")).to_have_text("2")
    expect(_stat(page, "Done")).to_have_text("1")
    expect(_stat(page, "Not started")).to_have_text("1")
    expect(_stat(page, "Labels to go")).to_have_text("1")
    expect(_stat(page, "Labels")).to_have_text("1")
    expect(page.locator(".bar-chart title", has_text=f"{datetime.now(UTC).date().isoformat()}: 1 label")).to_have_count(1)
    expect(page.locator("#imports tbody tr")).to_have_count(2)
    screenshot(page, "manage_project.png")

    # Refused, the page comes back at the field that was wrong, not at its top with the
    # message below the screen.
    page.set_viewport_size({"width": 1280, "height": 700})
    page.get_by_label("Overlap").fill("")
    page.evaluate("() => document.querySelector('input[name=overlap]').removeAttribute('required')")
    page.get_by_role("button", name="Save settings").click()
    overlap = page.get_by_label("Overlap")
    expect(overlap).to_be_focused()
    expect(overlap).to_be_in_viewport()
    expect(page.locator("#overlap-error")).to_be_in_viewport()

    page.get_by_label("Overlap").fill("2")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_role("status").filter(has_text="Settings saved.")).to_have_count(1)
    # One labeler cannot give each solution its two labels: the overview says so.
    expect(page.get_by_role("status").filter(has_text="Overlap is 2, but only 1 active labeler may label here")).to_have_count(1)
    expect(_stat(page, "Done")).to_have_text("0")

    page.goto("/manage/projects")
    expect(page.locator("table.projects tbody tr")).to_have_count(1)
    screenshot(page, "manage_projects.png")

    page.goto(f"{project_url}/export")
    screenshot(page, "manage_export.png")
    page.get_by_label("TRL stepwise supervision JSONL").check()
    with page.expect_download() as info:
        page.get_by_role("button", name="Download").click()
    download = info.value
    assert download.suggested_filename.startswith("Fractions_pilot-trl-") and download.suggested_filename.endswith(".jsonl")
    records = [json.loads(line) for line in open(download.path(), encoding="utf-8")]
    assert len(records) == 1
    assert PROBLEM in records[0]["prompt"]
    assert records[0]["completions"] == steps
    assert records[0]["labels"] == [True] * len(steps)

    page.get_by_label("PRM800K JSONL").check()
    page.locator("input[name=labelers]").fill("nobody-here")
    page.get_by_role("button", name="Download").click()
    # A name with no label here is a typo until shown otherwise: an empty file would not say so.
    expect(page.locator("#labelers-error")).to_contain_text("No label in this project is by 'nobody-here'")
    page.locator("input[name=labelers]").fill("lena")
    with page.expect_download() as info:
        page.get_by_role("button", name="Download").click()
    (record,) = [json.loads(line) for line in open(info.value.path(), encoding="utf-8")]
    assert record["labeler"] == lena.labeler_uuid
    assert record["question"]["problem"] == PROBLEM and record["question"]["pre_generated_steps"] == steps
    assert [s["completions"][0]["rating"] for s in record["label"]["steps"]] == [1] * len(steps)
    assert record["label"]["finish_reason"] == "solution" and record["label"]["total_time"] == 42_000

    page.get_by_label("Generations").fill("1, two")
    page.get_by_role("button", name="Download").click()
    expect(page.locator("#generations-error")).to_contain_text("Item 2 ('two'): must be a whole number")
    screenshot(page, "manage_export_errors.png")


def test_admin_manages_users(browser: Browser, live_server: str, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    make_user(session_factory, "lena", "labeler")
    make_user(session_factory, "rhea", "researcher")
    # The longest name allowed wraps: it pushed every row's actions out of the card.
    make_user(session_factory, "x" * 64, "labeler")
    context = browser.new_context(base_url=live_server, viewport={"width": 1360, "height": 900})
    page = context.new_page()
    login(page, "boss", "/admin/users")
    page.locator("#new-user").get_by_label("Username").fill("max")
    page.locator("#new-user select[name=role]").select_option("manager")
    page.locator("#new-user input[name=password]").fill(PASSWORD)
    expect(page.locator("#new-user").get_by_label("They choose their own password at their first login")).to_be_checked()
    page.get_by_role("button", name="Create user", exact=True).click()
    max_row = page.locator("tr", has=page.locator("td.username", has_text="max"))
    expect(max_row.get_by_label("Role of max")).to_have_value("manager")
    expect(max_row.get_by_text("to choose a password")).to_be_visible()

    lena_row = page.locator("tr", has=page.locator("td.username", has_text="lena"))
    lena_row.get_by_role("button", name="Deactivate").click()
    page.get_by_role("dialog").get_by_role("button", name="Deactivate lena").click()
    expect(lena_row.locator(".badge")).to_have_text("deactivated")
    lena_row.get_by_label("Role of lena").select_option("researcher")
    lena_row.get_by_role("button", name="Change role of lena").click()
    expect(lena_row.get_by_label("Role of lena")).to_have_value("researcher")
    # Making someone an admin asks first; kept, the role stays as it was.
    max_row.get_by_label("Role of max").select_option("admin")
    max_row.get_by_role("button", name="Change role of max").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Make max an admin?")
    dialog.get_by_role("button", name="Cancel").click()
    page.reload()
    expect(max_row.get_by_label("Role of max")).to_have_value("manager")
    # The own row sends the admin to the account page, where the current password is asked.
    boss_row = page.locator("tr", has=page.locator("td.username", has_text="boss"))
    expect(boss_row.get_by_text("Set password")).to_have_count(0)
    expect(boss_row.get_by_role("link", name="Change your password")).to_have_attribute("href", "/account")
    assert page.locator("table.users").evaluate("e => e.parentElement.scrollWidth <= e.parentElement.clientWidth")
    screenshot(page, "admin_users.png")

    rhea_row = page.locator("tr", has=page.locator("td.username", has_text="rhea"))
    rhea_row.get_by_text("Set password").click()
    # Open, the field has the focus, and the row's actions stay in the table.
    expect(rhea_row.get_by_label("New password for rhea")).to_be_focused()
    assert page.locator("table.users").evaluate("e => e.parentElement.scrollWidth <= e.parentElement.clientWidth")
    screenshot(page, "admin_users_set_password.png")
    page.keyboard.type("a-new-password-1")
    rhea_row.get_by_role("button", name="Set the password of rhea", exact=True).click()
    expect(page.get_by_text("New password set for rhea")).to_be_visible()

    page.locator("#new-user").get_by_label("Username").fill("x")
    page.locator("#new-user input[name=password]").fill("short")
    page.evaluate("document.querySelectorAll('form').forEach(f => f.noValidate = true)")
    page.get_by_role("button", name="Create user", exact=True).click()
    expect(page.locator("#username-error")).to_contain_text("2-64 letters")
    expect(page.locator("#password-error")).to_contain_text("at least 8 characters")
    screenshot(page, "admin_users_errors.png")
    context.close()

    # max logs in with the password the admin chose, and must choose their own before anything else.
    first = browser.new_context(base_url=live_server, viewport={"width": 390, "height": 844})
    page = first.new_page()
    page.goto("/login?next=/manage/projects")
    page.get_by_label("Username").fill("max")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/account?next=%2Fmanage%2Fprojects#password")
    expect(page.get_by_role("heading", name="Choose your own password")).to_be_visible()
    expect(page.locator("nav[aria-label=Main]")).to_have_count(0)
    expect(page.locator("#tokens")).to_have_count(0)
    screenshot(page, "account_first_password_narrow.png")
    page.get_by_label("Current password").fill(PASSWORD)
    page.locator("input[name=new_password]").fill("max's own password")
    page.get_by_label("New password again").fill("max's own password")
    page.get_by_role("button", name="Choose this password").click()
    page.wait_for_url("**/manage/projects")
    expect(page.get_by_role("heading", name="Projects", level=1)).to_be_visible()
    expect(page.locator("nav[aria-label=Main]")).to_have_count(1)
    first.close()


def test_the_imported_files_table_fits_its_card(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # A long file name used to widen the table past its half-width card and hide "Added".
    project = make_project(session_factory, "fits")
    import_bytes(session_factory, project, b'{"problem": "What is 1+1?", "answer": "2"}\n', "math",
                 filename="a-problem-file-with-a-rather-long-name-from-some-pipeline-2026-11-27.jsonl")
    make_user(session_factory, "maria", "manager")
    page.set_viewport_size({"width": 1280, "height": 900})
    login(page, "maria", f"/manage/projects/{project.id}")
    table = page.locator("table.imports")
    box = table.locator("xpath=..").bounding_box()
    added = table.locator("td.added").first.bounding_box()
    assert box is not None and added is not None
    assert added["x"] + added["width"] <= box["x"] + box["width"] + 1
    expect(table.locator("td.added").first).to_have_text("1 problem")


def test_a_file_that_added_several_kinds_fits_the_card(page: Page, session_factory) -> None:  # type: ignore[no-untyped-def]
    # "8 problems, 8 solutions, 9 labels" on one line pushed the column out of the card.
    project = make_project(session_factory, "fits")
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    make_user(session_factory, "maria", "manager")
    page.set_viewport_size({"width": 1360, "height": 900})
    login(page, "maria", f"/manage/projects/{project.id}")
    table = page.locator("table.imports")
    sizes = table.evaluate("t => ({table: t.scrollWidth, box: t.parentElement.clientWidth})")
    assert sizes["table"] <= sizes["box"], sizes
    expect(table.locator("td.added").first).to_have_text("8 problems, 8 solutions, 9 labels")
