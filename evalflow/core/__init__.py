"""The values every room shares: the records that flow between the stages (``records``).

Lives here: frozen, JSON-friendly dataclasses and nothing that acts.
May import nothing from evalflow but ``errors``.
"""
