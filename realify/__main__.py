"""``python -m realify``: see :mod:`realify.tools.cli`."""

from .tools.cli import main

raise SystemExit(main())
