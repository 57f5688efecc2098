"""The local backend: runs a compiled pipeline on this machine, reusing results by content,
and launches distributed steps the way Azure ML does."""
