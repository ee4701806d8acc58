"""Graph rewrites: each module one rewrite of an FX graph, and :mod:`.pipeline` the one place
that says which rewrite runs at which stage, in which order, for which front end."""
