"""`python -m tools.cli`: the same as the `flightlog` command."""

from . import main

main()
