"""This sessiond's version: the one place it is written (pyproject.toml reads it from here).

A constant, not the installed distribution's metadata: reading that loads importlib.metadata
and its email parser, which a daemon would pay before its first answer.
"""

VERSION = "0.1.0"
