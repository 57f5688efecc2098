"""Judgements made after a step ran, the same whichever backend ran it: why a failed step
failed (``diagnosis``), whether a distributed step's ranks coordinated (``coordination``,
``metriccounts``) and what a step read outside its inputs (``reads``).

Pure functions of what a run recorded; they know the graph but no check, backend or store.
"""
