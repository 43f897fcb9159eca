"""What a run leaves behind: results.json, samples, manifest.json, and the printed table.

Lives here: the run folder's layout (``run_folder``) and every file written into it, lm-eval's results fields.
May import ``errors`` … ``dag`` (the rooms below it in docs/architecture.md); never ``insight`` or ``run``.
"""
