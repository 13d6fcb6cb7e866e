"""Every filter the collection registers has its documentation beside it (plugins/filter/<name>.yml: ansible-doc
reads it), named after the filter, with examples and a described return value."""
from __future__ import annotations

import importlib
import os
import pathlib

import pytest
import yaml

FILTER_DIR = pathlib.Path(__file__).resolve().parents[4] / "plugins" / "filter"
FILTERS = sorted(
    name
    for path in FILTER_DIR.glob("*.py")
    for name in importlib.import_module("ansible_collections.ddp.cluster.plugins.filter." + path.stem)
    .FilterModule().filters()
)


def test_the_filters_are_found():
    assert {"local_cluster_addresses", "gpu_stack_plan", "benchmark_failure_line"} <= set(FILTERS)


@pytest.mark.parametrize("name", FILTERS)
def test_every_filter_has_sidecar_docs(name):
    with open(os.path.join(FILTER_DIR, name + ".yml")) as handle:
        doc = yaml.safe_load(handle)
    assert doc["DOCUMENTATION"]["name"] == name
    assert doc["EXAMPLES"] and doc["RETURN"]["_value"]["description"]
