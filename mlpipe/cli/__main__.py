"""``python -m mlpipe.cli``: the same as the ``mlpipe`` command."""
from mlpipe.cli import main

main()
