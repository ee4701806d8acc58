"""MkDocs hooks (mkdocs.yml, ``hooks:``).

The pages are also read on the repository's web view, where a link such as
``[realify/runtime/expm1.py](../realify/runtime/expm1.py)`` opens the source file. The site has
no copy of the sources, so such a link becomes its text when the file exists in the checkout;
a link to a file that does not exist is left alone, and the strict build reports it.
"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# [text](relative/target) where the target leaves docs/ (starts with ../)
_LINK = re.compile(r"\[([^\]]+)\]\(((?:\.\./)+[^)#\s]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page, config, files) -> str:
    page_dir = (DOCS / page.file.src_path).parent

    def replace(match: re.Match) -> str:
        target = (page_dir / match.group(2)).resolve()
        inside_docs = DOCS in target.parents
        if not inside_docs and ROOT in target.parents and target.exists():
            return match.group(1)
        return match.group(0)

    return _LINK.sub(replace, markdown)
