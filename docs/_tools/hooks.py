"""MkDocs hooks (mkdocs.yml, ``hooks:``).

The pages are also read on the repository's web view, where a link such as
``[realify/runtime/expm1.py](../realify/runtime/expm1.py)`` opens the source file. The site has
no copy of the sources, so such a link becomes its text when the file exists in the checkout;
a link to a file that does not exist is left alone, and the strict build reports it.

Two comments in a page take content from the repository root, so that the site and the root's
files cannot disagree:

- ``<!-- include ../CHANGELOG.md -->`` puts in the file (a path from the page, as a link's),
  and ``<!-- include ../README.md compat-table -->`` the part of it between its
  ``<!-- compat-table...`` and ``<!-- /compat-table -->`` lines (README's compatibility
  table, which ``.ci/compat_table.py`` writes). Relative links in the included text are made
  relative to the page; a missing file or part fails the build.
- ``<!-- pyproject extras -->`` puts in a table of pyproject.toml's extras
  (``[project.optional-dependencies]``) and the packages each installs, and
  ``<!-- pyproject requires -->`` the supported Python and torch (``requires-python`` and the
  torch entry of ``dependencies``).
"""

from __future__ import annotations

import os
import pathlib
import re
import tomllib

from mkdocs.exceptions import PluginError

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# [text](relative/target) where the target leaves docs/ (starts with ../)
_LINK = re.compile(r"\[([^\]]+)\]\(((?:\.\./)+[^)#\s]+)(#[^)\s]*)?\)")
# any [text](target): the targets of included text, rewritten relative to the including page
_ANY_LINK = re.compile(r"(\]\()([^)#\s]+)((?:#[^)\s]*)?\))")
_INCLUDE = re.compile(r"^<!-- include (\S+)(?: (\S+))? -->[ \t]*$", re.M)
_PYPROJECT = re.compile(r"^<!-- pyproject (extras|requires) -->[ \t]*$", re.M)
# the files the comments above read, watched by `mkdocs serve`
_SOURCES = ("README.md", "CHANGELOG.md", "pyproject.toml")


def _section(text: str, name: str, path: pathlib.Path) -> str:
    start = re.search(rf"^<!-- {re.escape(name)}\b.*-->[ \t]*$", text, re.M)
    end = re.search(rf"^<!-- /{re.escape(name)} -->[ \t]*$", text, re.M)
    if start is None or end is None or end.start() < start.end():
        raise PluginError(f"hooks.py: {path.relative_to(ROOT)} has no part marked <!-- {name} --> ... "
                          f"<!-- /{name} -->")
    return text[start.end():end.start()].strip("\n")


def _relinked(text: str, source_dir: pathlib.Path, page_dir: pathlib.Path) -> str:
    """``text`` from a file in ``source_dir``, its relative link targets rewritten for a page in
    ``page_dir``."""

    def replace(match: re.Match) -> str:
        target = match.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            return match.group(0)  # https:, mailto:, absolute
        moved = os.path.relpath(source_dir / target, page_dir).replace(os.sep, "/")
        return match.group(1) + moved + match.group(3)

    return _ANY_LINK.sub(replace, text)


def _include(match: re.Match, page_dir: pathlib.Path) -> str:
    path = (page_dir / match.group(1)).resolve()
    if not path.is_file():
        raise PluginError(f"hooks.py: cannot include {match.group(1)}: {path} does not exist")
    text = path.read_text(encoding="utf-8")
    if match.group(2):
        text = _section(text, match.group(2), path)
    return _relinked(text, path.parent, page_dir)


def _pyproject(match: re.Match) -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    if match.group(1) == "requires":
        torch = next((d for d in project["dependencies"] if re.match(r"torch\b", d)), "torch")
        return f"Python `{project['requires-python']}`, `{torch.replace(' ', '')}`"
    rows = ["| extra | installs |", "|---|---|"]
    for extra, packages in project.get("optional-dependencies", {}).items():
        rows.append(f"| `{extra}` | " + ", ".join(f"`{p}`" for p in packages) + " |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page, config, files) -> str:
    page_dir = (DOCS / page.file.src_path).parent
    markdown = _INCLUDE.sub(lambda m: _include(m, page_dir), markdown)
    markdown = _PYPROJECT.sub(_pyproject, markdown)

    def replace(match: re.Match) -> str:
        target = (page_dir / match.group(2)).resolve()
        inside_docs = DOCS in target.parents
        if not inside_docs and ROOT in target.parents and target.exists():
            return match.group(1)
        return match.group(0)

    return _LINK.sub(replace, markdown)


def on_serve(server, config, builder):
    for name in _SOURCES:
        server.watch(str(ROOT / name))
    return server
