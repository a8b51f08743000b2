"""Figures from [asy] code: found in statements, drawn by Asymptote when it is installed (cached
by content), and a clear 404 otherwise, so that the page shows the source instead."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.cli import cli
from app.config import Settings, get_settings
from app.db import session_scope
from app.figures import service
from app.figures.asy import asy_sources, figure_key
from app.models import Problem
from tests.conftest import api_headers, make_project, make_user

ASY = "draw((0,0)--(1,0)--(0,1)--cycle);\nlabel(\"$A$\", (0,0), SW);"
STATEMENT = f"In the triangle\n[asy]{ASY}[/asy]\nwhat is $x$?\n[asy]\ndraw(unitcircle);\n[/asy]"
HAS_ASY = shutil.which("asy") is not None


def test_sources_are_found_in_order() -> None:
    assert asy_sources(STATEMENT) == [ASY, "\ndraw(unitcircle);\n"]
    assert asy_sources("no figure, [asy] unclosed") == []
    assert figure_key(ASY) == figure_key(ASY) != figure_key(ASY + " ")


def _problem(factory: sessionmaker[Session], statement: str = STATEMENT) -> int:
    project = make_project(factory)
    with session_scope(factory) as session:
        problem = Problem(project_id=project.id, statement=statement, answer="1", content_hash="h")
        session.add(problem)
        session.flush()
        return problem.id


@pytest.fixture
def figure_settings(settings: Settings, tmp_path: Path) -> Settings:
    return settings.model_copy(update={"figures_dir": tmp_path / "figures"})


@pytest.fixture
def figure_client(app, figure_settings: Settings):  # type: ignore[no-untyped-def]
    app.state.settings = figure_settings
    with TestClient(app) as client:
        yield client


@pytest.mark.parametrize("backend", ["sqlite"])
def test_without_asymptote_the_figure_is_a_clear_404(figure_client, figure_settings, session_factory) -> None:  # type: ignore[no-untyped-def]
    figure_client.app.state.settings = figure_settings.model_copy(update={"asymptote": "off"})
    make_user(session_factory, "lena", "labeler")
    problem_id = _problem(session_factory)
    headers = api_headers(figure_client, "lena")

    response = figure_client.get(f"/api/v1/problems/{problem_id}/figures/0", headers=headers)
    assert response.status_code == 404
    assert "Asymptote is off or not installed" in response.json()["detail"]
    assert figure_client.get(f"/api/v1/problems/{problem_id}/figures/2", headers=headers).status_code == 404
    assert figure_client.get(f"/api/v1/problems/{problem_id + 1}/figures/0", headers=headers).status_code == 404
    assert figure_client.get(f"/api/v1/problems/{problem_id}/figures/-1", headers=headers).status_code == 422
    assert figure_client.get(f"/api/v1/problems/{problem_id}/figures/0").status_code == 401
    # Nothing is remembered: installing Asymptote later draws the figure.
    assert not figure_settings.figures_dir.exists()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_missing_executable_counts_as_not_installed(settings: Settings) -> None:
    assert service.asymptote_path(settings.model_copy(update={"asymptote": "/nonexistent/asy"})) is None
    assert service.asymptote_path(settings.model_copy(update={"asymptote": "OFF"})) is None


def test_pages_ask_for_drawings_where_asymptote_draws_or_the_cache_holds_some(settings: Settings, tmp_path: Path) -> None:
    off = settings.model_copy(update={"asymptote": "off", "figures_dir": tmp_path / "figures"})
    assert not service.figures_shown(off)  # no directory yet
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "abc.failed").write_text("syntax error")
    assert not service.figures_shown(off)
    # Drawn by a worker or `stepwise figures` into the shared cache: this server serves them.
    (tmp_path / "figures" / "def.svg").write_text("<svg/>")
    assert service.figures_shown(off)


@pytest.mark.skipif(not HAS_ASY, reason="Asymptote (Debian package asymptote) is not installed")
@pytest.mark.parametrize("backend", ["sqlite"])
def test_asymptote_draws_a_clean_cached_svg(figure_client, figure_settings, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "lena", "labeler")
    problem_id = _problem(session_factory)
    headers = api_headers(figure_client, "lena")

    response = figure_client.get(f"/api/v1/problems/{problem_id}/figures/0", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/svg+xml"
    assert "default-src 'none'" in response.headers["content-security-policy"]
    # Its own caching, not the API's no-store: a drawing changes only with its code.
    assert response.headers.get_list("cache-control") == ["private, max-age=86400"]
    assert response.text.startswith("<svg xmlns=\"http://www.w3.org/2000/svg\"")
    assert "<path" in response.text and "<script" not in response.text
    cached = figure_settings.figures_dir / f"{figure_key(ASY)}.svg"
    assert cached.read_text() == response.text


@pytest.mark.skipif(not HAS_ASY, reason="Asymptote (Debian package asymptote) is not installed")
@pytest.mark.parametrize("backend", ["sqlite"])
def test_broken_code_fails_once_and_is_remembered(settings: Settings, tmp_path: Path) -> None:
    figure_settings = settings.model_copy(update={"figures_dir": tmp_path})
    figure = service.draw(figure_settings, "draw((0,0)--;")
    assert figure.svg is None and figure.error == "Asymptote failed: line 1: syntax error"
    assert (tmp_path / f"{figure_key('draw((0,0)--;')}.failed").read_text() == figure.error


@pytest.mark.skipif(not HAS_ASY, reason="Asymptote (Debian package asymptote) is not installed")
@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_figure_that_runs_forever_is_stopped(settings: Settings, tmp_path: Path) -> None:
    figure_settings = settings.model_copy(update={"figures_dir": tmp_path, "asymptote_timeout_s": 1.0})
    figure = service.draw(figure_settings, "while(true) {}")
    assert figure.svg is None and figure.error == "Asymptote took longer than 1 s"


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, database_url: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("STEPWISE_FIGURES_DIR", str(tmp_path / "figures"))
    get_settings.cache_clear()
    yield tmp_path / "figures"
    get_settings.cache_clear()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_figures_command_says_when_asymptote_is_off(cli_env, session_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _problem(session_factory)
    monkeypatch.setenv("STEPWISE_ASYMPTOTE", "off")
    result = CliRunner().invoke(cli, ["figures"])
    assert result.exit_code == 1
    assert "Asymptote is off or not installed" in result.output
    assert not cli_env.exists()


@pytest.mark.skipif(not HAS_ASY, reason="Asymptote (Debian package asymptote) is not installed")
@pytest.mark.parametrize("backend", ["sqlite"])
def test_figures_command_fills_the_cache(cli_env, session_factory) -> None:  # type: ignore[no-untyped-def]
    _problem(session_factory)
    result = CliRunner().invoke(cli, ["figures"])
    assert result.exit_code == 0, result.output
    assert result.output == "2 figures drawn or already cached, 0 could not be drawn\n"
    assert sorted(p.name for p in cli_env.iterdir()) == sorted(f"{figure_key(s)}.svg" for s in asy_sources(STATEMENT))


@pytest.mark.skipif(not HAS_ASY or shutil.which("prlimit") is None, reason="needs Asymptote and util-linux's prlimit")
@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_figure_that_writes_without_end_is_stopped(settings: Settings, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(service, "MAX_FILE_BYTES", 100_000)
    figure = service.draw(settings.model_copy(update={"figures_dir": tmp_path}), 'while(true) write("xxxxxxxx");')
    assert figure.svg is None and figure.error is not None and figure.error.startswith("Asymptote failed")


def test_a_figure_that_cannot_be_stored_leaves_no_temporary_file(settings: Settings, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def full_disk(source: str, target: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(service.os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        service._store(settings.model_copy(update={"figures_dir": tmp_path}), "key", service.Figure("<svg/>", None))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not HAS_ASY, reason="Asymptote (Debian package asymptote) is not installed")
@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_figure_reads_no_file_outside_its_own_directory(settings: Settings, tmp_path: Path) -> None:
    # Imported by a manager, drawn for every labeler: it could show any file the server may read.
    secret = tmp_path / "secret.txt"
    secret.write_text("DATABASE_URL=postgresql://stepwise:hunter2@db/stepwise\n")
    source = f'file f = input("{secret}"); string s = f; label(s, (0,0));'
    figure = service.draw(settings.model_copy(update={"figures_dir": tmp_path / "figures"}), source)
    assert figure.svg is None and "Read from other directories disabled" in (figure.error or "")


@pytest.mark.skipif(not HAS_ASY, reason="Asymptote (Debian package asymptote) is not installed")
@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_figure_imports_no_file_of_the_server(settings: Settings, tmp_path: Path) -> None:
    # -noglobalread stops input() but not import: the module's value was drawn for every labeler,
    # and an include of /etc/passwd echoed its first line in the error.
    module = tmp_path / "secret.asy"
    module.write_text('string token = "hunter2";\n')
    figure_settings = settings.model_copy(update={"figures_dir": tmp_path / "figures"})
    for source in (f'import "{module}" as e;\nlabel(e.token, (0,0));', f'include "{module}";\nlabel(token, (0,0));',
                   f'eval("import \\"{module}\\" as e; label(e.token, (0,0));", true);', 'include "/etc/passwd";'):
        figure = service.draw(figure_settings, source)
        assert figure.svg is None and figure.error is not None
        assert figure.error.startswith("a figure ") and "hunter2" not in figure.error and "root:" not in figure.error
    # Refused before Asymptote ran: nothing drawn, nothing cached.
    assert not figure_settings.figures_dir.exists()


@pytest.mark.skipif(not HAS_ASY, reason="Asymptote (Debian package asymptote) is not installed")
@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_label_reads_no_file_through_tex_or_postscript(settings: Settings, tmp_path: Path) -> None:
    # Labels are LaTeX, and dvisvgm ran their PostScript: either drew a file's text as glyphs.
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET\n")
    figure_settings = settings.model_copy(update={"figures_dir": tmp_path / "figures"})
    read = "/Times-Roman findfont 12 scalefont setfont 0 0 moveto"
    for special in ("ps:", "!"):
        source = f'draw((0,0)--(1,1));\nlabel("\\special{{{special} {read} ({secret}) (r) file 20 string readstring pop show}}", (0,0));'
        svg = service.draw(figure_settings, source).svg or ""
        # The line and nothing else: the file's text came out as one more path a letter.
        assert svg.count("<path") == 1
    included = service.draw(figure_settings, f'label(graphic("{secret}"), (0,0));')
    assert included.svg is None and included.error is not None
    assert str(tmp_path) not in included.error and "…" in included.error


@pytest.mark.skipif(not HAS_ASY, reason="Asymptote (Debian package asymptote) is not installed")
@pytest.mark.parametrize("backend", ["sqlite"])
def test_turned_and_coloured_labels_are_drawn_without_postscript(settings: Settings, tmp_path: Path) -> None:
    # Asymptote turns and colours labels with PostScript specials, which dvisvgm no longer runs.
    source = 'label(rotate(90)*"up", (0,0), blue);\nlabel(scale(.85)*"small", (1,1), red);\nlabel("$g$", (2,0), gray(0.5));'
    svg = service.draw(settings.model_copy(update={"figures_dir": tmp_path}), source).svg or ""
    assert 'transform="matrix(0 -1 1 0 ' in svg and 'transform="matrix(.85 0 0 .85 ' in svg
    assert 'fill="#00f"' in svg and 'fill="#f00"' in svg and 'fill="#808080"' in svg


def test_an_error_names_no_file_of_the_server() -> None:
    output = "/usr/share/asymptote/plain.asy: 12.3: runtime: could not load module '/srv/stepwise/.env'\n"
    assert service._first_error(output) == "…: 12.3: runtime: could not load module '…'"
    located = f"figure.asy: {service.PREAMBLE.count(chr(10)) + 2}.1: no matching variable 'x' in /srv/data/x.asy"
    assert service._first_error(located) == "line 2: no matching variable 'x' in …"
    assert service._first_error("error: cannot open ~/secrets and ../config/app.ini") == "error: cannot open … and …"


def test_a_figure_is_drawn_without_the_servers_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://stepwise:hunter2@db/stepwise")
    monkeypatch.setenv("STEPWISE_METRICS_TOKEN", "scrape-me")
    monkeypatch.setenv("TEXMFHOME", "/opt/texmf")
    given = service._figure_environment("/tmp/work")
    assert given["HOME"] == "/tmp/work" and given["TEXMFHOME"] == "/opt/texmf" and "PATH" in given
    # TeX Live's default (openin_any = a) let a label \input any file.
    assert given["openin_any"] == given["openout_any"] == "p" and given["shell_escape"] == "f"
    assert "hunter2" not in str(given) and "scrape-me" not in str(given)


def _extent(svg: str) -> float:
    """The drawing's larger side, in PostScript points (the view box is left unscaled)."""
    return max(float(n) for n in svg.split('viewBox="', 1)[1].split('"', 1)[0].split()[2:])


@pytest.mark.skipif(not HAS_ASY, reason="Asymptote (Debian package asymptote) is not installed")
@pytest.mark.parametrize("backend", ["sqlite"])
def test_aops_helpers_draw_and_compute_as_their_names_say(settings: Settings, tmp_path: Path) -> None:
    # MATH's figures call olympiad's helpers without importing it (AoPS's renderer did), or
    # import it themselves; asy's assert fails the drawing where a helper computes wrong.
    checks = """
pair A = (0,0), B = (4,0), C = (0,3);
assert(abs(circumcenter(A, B, C) - (2, 1.5)) < 1e-9, "circumcenter");
assert(abs(circumradius(A, B, C) - 2.5) < 1e-9, "circumradius");
assert(abs(incenter(A, B, C) - (1, 1)) < 1e-9, "incenter");
assert(abs(inradius(A, B, C) - 1) < 1e-9, "inradius");
assert(abs(orthocenter(A, B, C) - A) < 1e-9, "orthocenter");
assert(abs(centroid(A, B, C) - (4/3, 1)) < 1e-9, "centroid");
assert(abs(foot((1,5), A, B) - (1, 0)) < 1e-9, "foot");
assert(abs(dot(bisectorpoint(A, B) - (2, 0), B - A)) < 1e-9, "perpendicular bisector");
pair m = bisectorpoint(B, A, C);
assert(abs(degrees(m - A) - 45) < 1e-9, "angle bisector");
draw(A--B--C--cycle); draw(rightanglemark(B, A, C)); draw(anglemark(A, B, C, 10, 12));
draw(circumcircle(A, B, C)); draw(incircle(A, B, C));
"""
    figure_settings = settings.model_copy(update={"figures_dir": tmp_path})
    for source in (checks, "import olympiad;\n" + checks):
        figure = service.draw(figure_settings, source)
        assert figure.error is None and figure.svg and "<path" in figure.svg
    graph = "import TrigMacros;\nsize(300);\ntrig_axes(-2*pi, 2*pi, -3, 3, pi/2, 1);\nrm_trig_labels(-4, 4, 2);"
    drawn = service.draw(figure_settings, graph)
    assert drawn.error is None and drawn.svg
    # A figure's own helper of the same name is the one it gets.
    own = "path rightanglemark(pair A, pair B, pair C, real s=8) { return A--B--C--cycle; }\ndraw(rightanglemark((0,0),(1,0),(1,1)));"
    assert service.draw(figure_settings, own).error is None


@pytest.mark.skipif(not HAS_ASY, reason="Asymptote (Debian package asymptote) is not installed")
@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_figure_without_a_size_is_drawn_legibly_and_one_with_its_own_keeps_it(settings: Settings, tmp_path: Path) -> None:
    figure_settings = settings.model_copy(update={"figures_dir": tmp_path})
    triangle = 'draw((0,0)--(2,0)--(2,4)--cycle); label("$T$", (0,0), SW);'
    # One PostScript point a unit drew this 2 points wide under a 10-point label.
    assert _extent(service.draw(figure_settings, triangle).svg or "") >= 150
    assert _extent(service.draw(figure_settings, "size(60);\n" + triangle).svg or "") < 80
    # 4 cm tall, and its label.
    assert 4 * 28.35 < _extent(service.draw(figure_settings, "unitsize(1cm);\n" + triangle).svg or "") < 150
