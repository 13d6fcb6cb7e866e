"""roles/pytorch_env/files/ddp_wheelhouse_index.py: the PEP 503 pages it serves and the server itself, on this machine
(127.0.0.1); pip downloads from it and checks the sha256 of each link.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "..", "roles", "pytorch_env", "files", "ddp_wheelhouse_index.py")
SPEC = importlib.util.spec_from_file_location("ddp_wheelhouse_index", SCRIPT)
index = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(index)


@pytest.mark.parametrize("filename, project", [
    ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "torch"),
    ("Jinja2-3.1.6-py3-none-any.whl", "jinja2"),
    ("typing_extensions-4.15.0-py3-none-any.whl", "typing-extensions"),
    ("zope.interface-7.2.tar.gz", "zope-interface"),
    ("nvidia_cudnn_cu12-9.1.0.70-py3-none-manylinux2014_x86_64.whl", "nvidia-cudnn-cu12"),
])
def test_project_names_are_pep503_normalized(filename, project):
    assert index.project_of(filename) == project


def _wheelhouse(tmp_path):
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"torch bytes")
    (tmp_path / "typing_extensions-4.15.0-py3-none-any.whl").write_bytes(b"te bytes")
    (tmp_path / ".ddp-abc123.lock").write_text("not served\n")
    (tmp_path / "notes.txt").write_text("not a distribution\n")
    return tmp_path


def test_pages_link_each_file_with_its_sha256(tmp_path):
    files = index.scan(str(_wheelhouse(tmp_path)))
    assert sorted(files) == ["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
                             "typing_extensions-4.15.0-py3-none-any.whl"]
    pages = index.pages(files)
    assert sorted(pages) == ["/simple/", "/simple/torch/", "/simple/typing-extensions/"]
    torch_page = pages["/simple/torch/"].decode()
    digest = hashlib.sha256(b"torch bytes").hexdigest()
    assert ('href="../../files/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl#sha256=' + digest + '"'
            in torch_page)
    assert '<a href="typing-extensions/">typing-extensions</a>' in pages["/simple/"].decode()


def test_nodes_reached_from_different_addresses_are_refused():
    assert index.source_address(["127.0.0.1", "127.0.0.1"]) == "127.0.0.1"
    # 127.0.0.1 and ::1 are reached from two different local addresses (themselves).
    try:
        index.source_address(["::1"])
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with pytest.raises(ValueError, match="different local addresses: 127.0.0.1 for 127.0.0.1; ::1 for ::1"):
        index.source_address(["127.0.0.1", "::1"])


@pytest.fixture()
def served(tmp_path):
    (tmp_path / "wh").mkdir()
    wheelhouse = _wheelhouse(tmp_path / "wh")
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir()
    proc = subprocess.Popen([sys.executable, SCRIPT, "serve", "--directory", str(wheelhouse), "--state", str(state),
                             "--toward", "127.0.0.1", "--idle-exit", "30"])
    for _attempt in range(100):
        if state.exists():
            break
        time.sleep(0.1)
    info = json.loads(state.read_text())
    yield {"proc": proc, "state": state, "info": info, "wheelhouse": wheelhouse}
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.status, answer.read()


def test_serves_the_index_and_the_files_only(served):
    info = served["info"]
    assert info["address"] == "127.0.0.1" and info["files"] == 2
    assert info["url"] == "http://127.0.0.1:%d/simple/" % info["port"]
    base = info["url"][:-len("simple/")]
    assert _get(base + "files/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl") == (200, b"torch bytes")
    for path in ("files/.ddp-abc123.lock", "files/notes.txt", "files/../notes.txt", "files/%2e%2e/etc/passwd",
                 "simple/nosuch/", ""):
        with pytest.raises(urllib.error.HTTPError) as err:
            _get(base + path)
        assert err.value.code == 404


def test_stop_ends_the_server_and_removes_its_folder(served):
    out = subprocess.run([sys.executable, SCRIPT, "stop", "--state", str(served["state"]), "--remove-dir"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "stopped %d" % served["info"]["pid"]
    assert served["proc"].wait(timeout=10) == 0
    assert not served["state"].parent.exists()
    again = subprocess.run([sys.executable, SCRIPT, "stop", "--state", str(served["state"])],
                           capture_output=True, text=True, check=True).stdout
    assert again.startswith("no server")


def test_exits_by_itself_when_idle(tmp_path):
    wheelhouse = _wheelhouse(tmp_path)
    state = tmp_path / "state.json"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, SCRIPT, "serve", "--directory", str(wheelhouse), "--state", str(state),
                           "--bind", "127.0.0.1", "--idle-exit", "1"], timeout=30, check=False)
    assert proc.returncode == 0 and time.monotonic() - started < 10
    assert not state.exists()


def test_an_empty_wheelhouse_is_refused_in_the_state_file(tmp_path):
    state = tmp_path / "state.json"
    proc = subprocess.run([sys.executable, SCRIPT, "serve", "--directory", str(tmp_path), "--state", str(state),
                           "--bind", "127.0.0.1"], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 2
    assert json.loads(state.read_text()) == {"error": "no wheels in %s" % tmp_path}
