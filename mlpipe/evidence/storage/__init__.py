"""The evidence store's storage: where it lives, its tables and migrations, writing what
ran, artifact roots.

Imports nothing itself: importing one module here loads that module and what it uses.
"""
