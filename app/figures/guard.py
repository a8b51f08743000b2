"""What an [asy] figure may not ask of Asymptote, found before Asymptote runs.

A figure comes from a manager's import and is drawn on the server for every labeler. Asymptote's
-safe and -noglobalread stop system() and input() from outside the figure's directory, but not
`import "/any/file"`, `include "/etc/passwd"` or `access "../x"`: those load any file the server
may read, draw it or echo it in an error. Text run as code (eval and the plain module's helpers
that pass their arguments to it) hides such an import from any reading of the source, and
`settings` names the programs Asymptote runs (settings.tex = "sh" ran a file the figure wrote).
So a figure names modules by name only, which finds nothing but its own directory's shipped
modules and Asymptote's own, and does not use those names at all. MATH's figures need none of it.
"""

from __future__ import annotations

import re

# Asymptote's lexemes, as far as telling code from comments and strings goes: a word inside a
# string or a comment is no import. Identifiers are ASCII only, so that a letter Asymptote does
# not take for one cannot join a refused name to a harmless one. A comment or string left open
# runs to the end: Asymptote then runs none of the file, and trying each later "/*" or '"' to
# the end again took time as the square of the figure's length.
_TOKEN = re.compile(
    r"""(?P<space>\s+)
      | (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
      | (?P<string>"(?:[^"\\]|\\.)*(?:"|\\?\Z)|'(?:[^'\\]|\\.)*(?:'|\\?\Z))
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)
      | (?P<other>.)""",
    re.VERBOSE | re.DOTALL,
)
# The statements whose strings name a module: import, include, access, and from … access.
_LOADS = frozenset({"import", "include", "access", "from"})
# A quoted name is a path to Asymptote: one with a directory in it reaches anywhere.
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.asy)?")

_RUNS_TEXT = "runs text as Asymptote code, which could import any file on the server"
_FILES = "writes or finds files on the server, and a module the figure wrote could be imported by name"
REFUSED_NAMES = {
    "eval": _RUNS_TEXT,
    "_eval": _RUNS_TEXT,
    # plain's and map's helpers that splice their arguments into eval, and slide's into include.
    "type": _RUNS_TEXT,
    "mapArray": _RUNS_TEXT,
    "mapTemplate": _RUNS_TEXT,
    "usersetting": _RUNS_TEXT,
    "asy": _RUNS_TEXT,
    "asyinclude": _RUNS_TEXT,
    "settings": "names the programs Asymptote runs on the server (TeX, Ghostscript) and their options",
    "output": _FILES,
    "xoutput": _FILES,
    "binoutput": _FILES,
    "rename": _FILES,
    "locatefile": _FILES,
}


def refusal(source: str) -> str | None:
    """Why the figure may not be drawn, or None when it may."""
    loading = False
    for token in _TOKEN.finditer(source):
        kind, text = token.lastgroup, token.group()
        if kind == "name":
            if text in REFUSED_NAMES:
                return f"a figure may not use `{text}`: it {REFUSED_NAMES[text]}"
            loading = loading or text in _LOADS
        elif kind == "string" and loading and not MODULE_NAME.fullmatch(text[1:-1]):
            return (f"a figure imports only Asymptote's own modules, by name (import graph;), "
                    f"not {_shortened(text)}")
        elif text == ";":
            loading = False
    return None


def _shortened(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "…"
