"""Judging a candidate: qualification policies, the run gate, decisions, promotion,
registries, trace.

Imports nothing itself: importing one module here loads that module and what it uses.
"""
