"""``python -m realify``: see :mod:`realify.cli`."""

from .cli import main

raise SystemExit(main())
