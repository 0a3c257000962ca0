"""A pytest plugin for tests of the suite itself (``-p suite_probe``): after collection, write
each test's id and marker names, in running order, as JSON lines to ``$SUITE_PROBE_OUT``."""

from __future__ import annotations

import json
import os

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    with open(os.environ["SUITE_PROBE_OUT"], "w") as out:
        for item in items:
            markers = sorted({mark.name for mark in item.iter_markers()})
            out.write(json.dumps({"id": item.nodeid, "markers": markers}) + "\n")
