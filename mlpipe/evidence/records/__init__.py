"""What a run recorded, read back: plain-SQL reads, queries, views and summaries, and the
findings a reviewer sees first.

Imports nothing itself: importing one module here loads that module and what it uses.
"""
