"""`python -m rvvkit.cli ...`: the same as the `rvvkit` command."""
import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
