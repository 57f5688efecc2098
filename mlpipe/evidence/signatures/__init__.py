"""Keys, signatures and trust: DSSE envelopes, Key Vault, model signing, the trust policy,
the signature rows.

Imports nothing itself: importing one module here loads that module and what it uses.
"""
