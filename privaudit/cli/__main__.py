"""``python -m privaudit.cli``: the command line."""

from privaudit.cli.commands import main

main()
