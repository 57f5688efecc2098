"""Evidence for people: the text, Markdown and HTML views of a bundle, the model card and
the evidence tiers.

Imports nothing itself: importing one module here loads that module and what it uses.
"""
