"""Azure ML backend: export to CLI v2 YAML, import existing YAML, submit and sync.

No module here imports azure-ai-ml at import time; only validation and submission do.
"""
