"""``python -m goodput``: the goodput command installed with this package."""

from ._engine import main

main()
