"""Evidence bundles: building, sealing, verifying, comparing and exporting them.

Imports nothing itself: importing one module here loads that module and what it uses.
"""
