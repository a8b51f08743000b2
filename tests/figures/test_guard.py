"""What a figure may not ask of Asymptote, refused before Asymptote runs: modules named by path,
text run as code, settings and file writes. MATH's own figures ask for none of it."""

from __future__ import annotations

import json

import pytest

from app.demo.service import MATH500
from app.figures.asy import asy_sources
from app.figures.guard import refusal

MODULE_PATHS = [
    'import "/srv/stepwise/secret.asy" as e;\nlabel(e.token, (0,0));',
    'import "/srv/stepwise/secret";',
    'include "/etc/passwd";',
    'include "../../etc/passwd";',
    'access "~/.asy/config" as c;',
    'from "/srv/x" access token;',
    "import 'sub/module' as m;",
    'access graph, "/etc/passwd";',
    # A comment between the keyword and its name is still the same statement to Asymptote.
    'import\n/* a comment */ "/etc/passwd" as e;',
    'include//\n"/etc/passwd";',
]


@pytest.mark.parametrize("source", MODULE_PATHS)
def test_a_module_named_by_path_is_refused(source: str) -> None:
    reason = refusal(source)
    assert reason is not None and reason.startswith("a figure imports only Asymptote's own modules, by name")


@pytest.mark.parametrize(("source", "name"), [
    # Text run as code hides its import from any reading of the source.
    ('eval("imp" + "ort \\"/etc/passwd\\" as e;", true);', "eval"),
    ("plain.eval(quote{draw(unitcircle);});", "eval"),
    ('type("int x; import \\"/srv/m.asy\\" as e; int", "y");', "type"),
    ('settings.user = "x"; usersetting();', "settings"),
    ('asy("svg", "/srv/m");', "asy"),
    # settings.tex = "sh" ran a file the figure had written.
    ('settings.tex = "sh";', "settings"),
    ('file f = output("evil.asy"); write(f, "x");', "output"),
    ('rename("figure.asy", "copy.asy");', "rename"),
    ('write(locatefile("/etc/shadow"));', "locatefile"),
    # A number does not join a refused name to it: 2eval is 2 times eval to Asymptote.
    ('real x = 2eval("1");', "eval"),
])
def test_names_that_run_text_or_touch_files_are_refused(source: str, name: str) -> None:
    assert (refusal(source) or "").startswith(f"a figure may not use `{name}`: it ")


@pytest.mark.parametrize("source", [
    "import graph;\nimport olympiad;\nimport TrigMacros;\ndraw(unitcircle);",
    'import "graph" as g;\nimport "olympiad.asy";\naccess three;\nfrom graph access xaxis;',
    # Words in labels and comments are no statements.
    'label("import \\"/etc/passwd\\"; eval settings", (0,0));',
    "// include \"/etc/passwd\";\n/* eval(\"x\") */ draw((0,0)--(1,1));",
    "label('it\\'s \"/etc/passwd\"', (0,0)); pair types = (1,2); real evaluate = 1;",
    # input() reads only the figure's own directory (-noglobalread), so it is left to that flag.
    'file f = input("data.txt");',
])
def test_figures_that_name_modules_and_draw_are_allowed(source: str) -> None:
    assert refusal(source) is None


def test_every_demo_figure_is_allowed() -> None:
    sources = [source for line in MATH500.read_text().splitlines()
               for source in asy_sources(json.loads(line)["problem"])]
    assert len(sources) == 42
    assert [refusal(source) for source in sources if refusal(source)] == []
