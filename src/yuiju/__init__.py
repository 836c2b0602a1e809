"""yuiju: 悠酱 lives in a small town whose clock runs with the real one, and talks about her day.

This is the installed namespace. Its subpackages are links to the project's top-level source
folders (``yuiju.world`` is ``world/``, ``yuiju.config`` is ``yuiju_config.py``); see
docs/architecture.md.
"""
