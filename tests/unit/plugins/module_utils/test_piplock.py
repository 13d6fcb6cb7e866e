from __future__ import annotations

import copy
import json
import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.system import piplock

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "pip")


def _report():
    with open(os.path.join(FIXTURES, "report_requests-2.32.3__pip-26.3.json")) as handle:
        return json.load(handle)


def test_real_report_pins_every_wheel_sorted_by_name():
    result = piplock.hash_lock(_report())
    assert result["problems"] == []
    pins = [line for line in result["lock"].splitlines() if not line.startswith("#")]
    assert pins == [
        "certifi==2026.10.19.post1 --hash=sha256:1324c476b4811eff41a8bc2122cd0bbd4d9c7234c725446d99ab1612b3a7fdd2",
        "charset-normalizer==3.4.0 --hash=sha256:3710a9751938947e6327ea9f3ea6332a09bf0ba0c09cae9cb1f250bd1f1549bc",
        "idna==3.20 --hash=sha256:ab7ae7122974553370f0bdb919e1a960b2cd1bc1ef0276416d896db81c14582c",
        "requests==2.32.3 --hash=sha256:70761cfe03c773ceb22aa2f671b4757976145175cdfca038c02654d061d6dcc6",
        "urllib3==2.8.0 --hash=sha256:0cf3cae568d36aa9576b28dfb35f11328f1cb974ca7647d9475ebb86c75ac6e3",
    ]
    assert result["lock"].endswith("\n")


def test_local_version_label_and_legacy_hash_field():
    report = {"version": "1", "install": [{
        "metadata": {"name": "torch", "version": "2.1.0+cpu"},
        "download_info": {"url": "file:///w/torch-2.1.0%2Bcpu-cp311-cp311-linux_x86_64.whl",
                          "archive_info": {"hash": "sha256=" + "AB" * 32}}}]}
    result = piplock.hash_lock(report)
    assert result["problems"] == []
    assert "torch==2.1.0+cpu --hash=sha256:" + "ab" * 32 in result["lock"].splitlines()


def _item(report, name):
    return [i for i in report["install"] if i["metadata"]["name"] == name][0]


def _no_hash(report):
    _item(report, "idna")["download_info"]["archive_info"] = {}


def _from_index(report):
    _item(report, "idna")["download_info"]["url"] = "https://files.example.invalid/idna-3.20-py3-none-any.whl"


def _sdist(report):
    _item(report, "idna")["download_info"]["url"] = "file:///tmp/wh/idna-3.20.tar.gz"


def _twice(report):
    report["install"].append(copy.deepcopy(_item(report, "idna")))


def _no_version(report):
    del _item(report, "idna")["metadata"]["version"]


def _short_hash(report):
    _item(report, "idna")["download_info"]["archive_info"] = {"hashes": {"sha256": "abc"}}


BAD = [
    # (how the report is changed, a word the message must hold)
    (_no_hash, "no sha256"),
    (_short_hash, "no sha256"),
    (_from_index, "would not come from a wheel"),
    (_sdist, "would not come from a wheel"),
    (_twice, "twice"),
    (_no_version, "without a name or version"),
]


@pytest.mark.parametrize("change, word", BAD, ids=[row[0].__name__ for row in BAD])
def test_an_item_that_cannot_be_pinned_leaves_no_lock(change, word):
    report = _report()
    change(report)
    result = piplock.hash_lock(report)
    assert result["lock"] == ""
    assert [p["code"] for p in result["problems"]] == ["PYTORCH_ENV_LOCK"]
    problem = result["problems"][0]
    assert word in problem["message"] and problem["fix"]
    assert problem["variable"] == "pytorch_env_require_hashes"


@pytest.mark.parametrize("report", [None, {}, {"version": "2", "install": []}, {"version": "1"}, "text"])
def test_not_a_report(report):
    result = piplock.hash_lock(report)
    assert result["lock"] == "" and "format version 1" in result["problems"][0]["message"]


def test_empty_report():
    result = piplock.hash_lock({"version": "1", "install": []})
    assert result["lock"] == "" and "installs nothing" in result["problems"][0]["message"]
