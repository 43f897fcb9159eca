"""The command line, and nothing else: ``python -m evalflow`` and each of its subcommands.

Lives here: ``main`` (the dispatch), ``words`` (the one grammar), one module per subcommand.
May import every room below it (docs/architecture.md); only ``__main__`` imports it.

:mod:`evalflow.commands.main` dispatches a subcommand to the module named after it (``side-env`` →
:mod:`evalflow.commands.side_env`), whose ``main(argv)`` reads its words with
:mod:`evalflow.commands.words`, calls the library and prints; anything else is the Hydra run.
Library code never imports this package: what a command computes lives in the library.
"""
