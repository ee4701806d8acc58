"""The engine: a captured program becomes a real one.

:mod:`.dynamo_graph` runs dynamo's graph node by node, :mod:`.grad_semantics` keeps what autograd
would have done, :mod:`.custom_functions` carries custom autograd Functions and hooks through,
:mod:`.decompose` functionalizes the program and runs the pipeline (realify/passes/pipeline.py),
:mod:`.planarize` runs each complex op through its rule (realify/rules) and :mod:`.islands` runs
an op without one in eager where the caller allows it.
"""
