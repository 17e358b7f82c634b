"""`python -m rooftui.sweeps` is `sweep`."""

from rooftui.sweeps.cli import main

main()
