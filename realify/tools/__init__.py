"""Tooling: the command line (:mod:`.cli`), the rule-coverage report (:mod:`.coverage`) and the
OpInfo harness it and the tests share (:mod:`.opinfo`). Benchmarks live in realify/bench."""
