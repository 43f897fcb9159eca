"""``evalflow view``: the web app over run folders, served by aiohttp on loopback or written as a
static bundle; both send the same JSON payloads to the same front end (``view/static/``).

Lives here: ``payloads``, ``comparing``, ``safe_paths``, ``server``, ``bundle``.
May import ``errors`` … ``frames`` (the rooms below it in docs/architecture.md); never ``run``.
"""
