"""The benchmark suite behind ``python -m realify bench`` and ``python -m realify demo``.

- :mod:`realify.bench.workloads`: the complex-valued models and their sizes (importable by tests);
- :mod:`realify.bench.runner`: runs workloads under each mode, times them, checks them against eager;
- :mod:`realify.bench.report`: the table, JSON and plot.
"""

from .runner import DEFAULT_MODES, MODES, Case, Row, run, select
from .workloads import WORKLOADS, Workload

__all__ = ["DEFAULT_MODES", "MODES", "WORKLOADS", "Case", "Row", "Workload", "run", "select"]
