"""``python -m cnibench.cli``: the ``cnibench`` command (:func:`cnibench.cli.entry`)."""

from __future__ import annotations

from cnibench.cli import entry

if __name__ == "__main__":
    entry()
