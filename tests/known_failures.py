"""OpInfo entries (name or name.variant) that do not pass yet, per front end, with the reason.

The table tests mark these xfail(strict=True): an entry that starts passing fails the suite
until it is removed here, so this list always states exactly what does not work.
"""

EAGER: dict[str, str] = {}
DECOMPOSE: dict[str, str] = {}
COMPILE: dict[str, str] = {}
INDUCTOR: dict[str, str] = {}
