"""Griffe extension (mkdocs.yml): docstrings name code with Sphinx roles (:func:`realify.export`),
which Markdown would print as written; each role becomes a code span of its target."""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:func|class|meth|data|mod|attr|exc|obj):`~?([^`]+)`")


class SphinxRolesAsCode(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(r"`\1`", obj.docstring.value)
