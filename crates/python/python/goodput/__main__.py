"""``python -m goodput …``: the goodput command (the same as the installed ``goodput``)."""

import sys

from ._cli import main

raise SystemExit(main(["goodput", *sys.argv[1:]]))
