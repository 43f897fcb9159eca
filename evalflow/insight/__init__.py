"""Answers from finished runs: why a stage re-ran (explain), whether B beats A (compare), what old
samples score now (rescore), and one HTML page of it all (report).

Each module is a subcommand of ``python -m evalflow``; they read run folders (evalflow's, and
lm-eval's for compare/report/rescore) and never need the model.
"""
