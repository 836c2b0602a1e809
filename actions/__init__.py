"""Action modules: one file per place or theme. Every `Action` at a module's top level is loaded.

Copy ``_template.py`` (never loaded, because of the ``_``) to start a new one; see README.md.
"""
