"""The consoles every command prints through."""

import os
import sys

from rich.console import Console

# Piped output (files, CI logs) gets wide tables rather than folded 80-column cells.
WIDTH = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 200
console = Console(width=WIDTH)
err = Console(stderr=True, width=WIDTH)
