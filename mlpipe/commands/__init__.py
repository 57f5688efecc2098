"""The library entry of each command that does more than one thing: one call per command
(``submit``, ``compile``, ``promote``), returning one value the CLI renders.

Parses nothing and prints nothing: what must be shown while it works (warnings, the
submitted job, progress) goes to the hooks the caller hands it.
"""
