"""roles/pytorch_env with a wheelhouse: the wheelhouse step writes the lock file on the controller and the node's pip
installs from it with --require-hashes (wheelhouse.yml, then pip.yml, as main.yml runs them), the wheels served by the
controller's package index (pytorch_env_wheelhouse_transport: http, files/ddp_wheelhouse_index.py) or copied (copy).
A second run finds every requirement installed and runs no pip install, starts no index (changed=0).

Runs on this machine over the local connection: the "upstream index" is a folder of two wheels made here (ddpfake-a
needs ddpfake-b), given to `pip download` with --no-index --find-links; the node's environment is a venv in the
test's folder; the wheelhouse index listens on 127.0.0.1 (pytorch_env_wheelhouse_bind). The collection is the
checkout's (tests/checkout_env.py).
"""
from __future__ import annotations

import base64
import glob
import hashlib
import json
import os
import subprocess
import sys
import zipfile

import re

import pytest

from checkout_env import checkout_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.path.dirname(sys.executable)
PLAYBOOK = """
- hosts: localhost
  gather_facts: true
  gather_subset: [min]
  tasks:
    - name: Set what main.yml works out
      ansible.builtin.set_fact:
        __pytorch_env_requirements: [ddpfake-a==1.0]
        __pytorch_env_pip_requirements: [ddpfake-a==1.0]
        __pytorch_env_pip_args: [--no-index, "--find-links={{ index }}"]
        __pytorch_env_bin: "{{ venv }}/bin"
    - ansible.builtin.include_role:
        name: ddp.cluster.pytorch_env
        tasks_from: wheelhouse.yml
    - ansible.builtin.include_role:
        name: ddp.cluster.pytorch_env
        tasks_from: pip.yml
    - name: Keep the pip command that ran
      ansible.builtin.copy:
        content: >-
          {{ {'cmd': __pytorch_env_pip.cmd | default(none),
              'index_dir': __pytorch_env_index_dir.path | default(none)} | to_json }}
        dest: "{{ out }}"
        mode: "0644"
      changed_when: false
"""


def _play(tmp, env, extra):
    return subprocess.run(
        [os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", "-e", json.dumps(extra),
         str(tmp / "play.yml")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)


def _status(stdout, task):
    """The first result word (ok, changed, skipping, fatal) printed after a task's header."""
    found = re.search(r"TASK \[[^\]]*%s[^\]]*\][^\n]*\n(?:[^\n]*\n)*?(ok|changed|skipping|fatal):" % re.escape(task), stdout)
    return found.group(1) if found else None


def _recap(proc):
    found = re.search(r"localhost\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", proc.stdout)
    assert found, proc.stdout + proc.stderr
    return {k: int(v) for k, v in zip(("ok", "changed", "unreachable", "failed"), found.groups())}


def _wheel(folder, name, version, requires=()):
    """A minimal pure-Python wheel (PEP 427) made here."""
    dist = "%s-%s.dist-info" % (name, version)
    files = {
        "%s/__init__.py" % name: "VERSION = %r\n" % version,
        "%s/METADATA" % dist: "Metadata-Version: 2.1\nName: %s\nVersion: %s\n%s" % (
            name.replace("_", "-"), version, "".join("Requires-Dist: %s\n" % r for r in requires)),
        "%s/WHEEL" % dist: "Wheel-Version: 1.0\nGenerator: ddp.cluster-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (path, digest, len(text.encode())))
    record.append("%s/RECORD,," % dist)
    files["%s/RECORD" % dist] = "\n".join(record) + "\n"
    path = os.path.join(folder, "%s-%s-py3-none-any.whl" % (name, version))
    with zipfile.ZipFile(path, "w") as archive:
        for name_in_zip, text in files.items():
            archive.writestr(name_in_zip, text)
    return path


def _sha256(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _setup(tmp_path_factory, name, **extra_vars):
    tmp = tmp_path_factory.mktemp(name)
    index = tmp / "index"
    index.mkdir()
    wheels = [_wheel(str(index), "ddpfake_a", "1.0", ["ddpfake-b>=2"]), _wheel(str(index), "ddpfake_b", "2.0")]
    subprocess.run([sys.executable, "-m", "venv", str(tmp / "venv")], check=True, capture_output=True)
    (tmp / "play.yml").write_text(PLAYBOOK)
    env = checkout_env(PATH="%s:%s" % (BIN, os.environ["PATH"]), ANSIBLE_LOCAL_TEMP=str(tmp / "ansible-tmp"),
                       ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", PIP_CONFIG_FILE=os.devnull)
    extra = {"index": str(index), "venv": str(tmp / "venv"), "pytorch_env_wheelhouse": str(tmp / "wheelhouse"),
             "pytorch_env_node_wheelhouse": str(tmp / "node-wheelhouse"), "ansible_python_interpreter": sys.executable,
             "out": str(tmp / "pip-input.json"), "pytorch_env_require_hashes": True}
    extra.update(extra_vars)
    return {"tmp": tmp, "wheels": wheels, "env": env, "extra": extra}


@pytest.fixture(scope="module")
def converged(tmp_path_factory):
    """http transport: first run installs, second run finds everything installed."""
    case = _setup(tmp_path_factory, "require_hashes", pytorch_env_wheelhouse_bind="127.0.0.1")
    case["proc"] = _play(case["tmp"], case["env"], case["extra"])
    case["first"] = json.loads((case["tmp"] / "pip-input.json").read_text())
    case["again"] = _play(case["tmp"], case["env"], case["extra"])
    return case


def test_the_controller_writes_a_lock_of_every_wheel_the_node_installs(converged):
    proc, tmp = converged["proc"], converged["tmp"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    locks = glob.glob(str(tmp / "wheelhouse" / ".ddp-*.lock"))
    assert len(locks) == 1
    with open(locks[0]) as handle:
        pins = [line for line in handle.read().splitlines() if not line.startswith("#")]
    a, b = converged["wheels"]
    assert pins == ["ddpfake-a==1.0 --hash=sha256:%s" % _sha256(a), "ddpfake-b==2.0 --hash=sha256:%s" % _sha256(b)]


def test_the_node_installs_the_lock_alone_from_the_served_index(converged):
    proc, tmp = converged["proc"], converged["tmp"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    node = str(tmp / "node-wheelhouse")
    lock = os.path.basename(glob.glob(str(tmp / "wheelhouse" / ".ddp-*.lock"))[0])
    cmd = converged["first"]["cmd"]
    assert cmd[:5] == [str(tmp / "venv" / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
    assert cmd[5] == "--index-url" and re.match(r"^http://127\.0\.0\.1:\d+/simple/$", cmd[6]), cmd
    assert cmd[7:] == ["--trusted-host", "127.0.0.1", "--only-binary", ":all:", "--require-hashes", "-r",
                       node + "/" + lock]
    assert os.listdir(node) == [lock], "only the lock file is copied with the http transport"
    show = subprocess.run([str(tmp / "venv" / "bin" / "python"), "-c", "import ddpfake_a, ddpfake_b; "
                           "print(ddpfake_a.VERSION, ddpfake_b.VERSION)"], capture_output=True, text=True, check=False)
    assert show.stdout.split() == ["1.0", "2.0"], show.stderr


def test_the_index_is_stopped_and_its_state_removed(converged):
    assert converged["proc"].returncode == 0
    state_dir = converged["first"]["index_dir"]
    assert state_dir and os.path.basename(state_dir).startswith("ddp-wheelhouse-index.")
    assert not os.path.exists(state_dir)
    assert "%s/state.json" % state_dir not in subprocess.run(
        ["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout


def test_a_second_run_installs_nothing_and_changes_nothing(converged):
    again = converged["again"]
    assert again.returncode == 0, again.stdout + again.stderr
    assert _recap(again)["changed"] == 0, again.stdout
    assert json.loads((converged["tmp"] / "pip-input.json").read_text())["cmd"] is None
    # pip.yml includes its install tasks (pip_install.yml) only when a node lacks a package: not even included here
    assert _status(again.stdout, "pip | Install what is missing") == "skipping", again.stdout
    for task in ("pip_install | Serve the wheelhouse", "pip_install | Install the packages with the environment's pip"):
        assert _status(again.stdout, task) is None, again.stdout
    assert _status(again.stdout, "wheelhouse_lock | Resolve the requirements from the wheelhouse alone") == "skipping"
    assert _status(converged["proc"].stdout, "pip_install | Serve the wheelhouse") == "ok"
    assert _status(converged["proc"].stdout, "wheelhouse_lock | Resolve the requirements from the wheelhouse alone") == "ok"


def test_copy_transport_copies_the_wheelhouse_and_installs_with_find_links(tmp_path_factory):
    case = _setup(tmp_path_factory, "copy", pytorch_env_wheelhouse_transport="copy")
    proc = _play(case["tmp"], case["env"], case["extra"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    node = str(case["tmp"] / "node-wheelhouse")
    lock = os.path.basename(glob.glob(str(case["tmp"] / "wheelhouse" / ".ddp-*.lock"))[0])
    cmd = json.loads((case["tmp"] / "pip-input.json").read_text())["cmd"]
    assert cmd[5:] == ["--no-index", "--find-links=" + node, "--only-binary", ":all:", "--require-hashes", "-r",
                       node + "/" + lock]
    assert "ddpfake_b-2.0-py3-none-any.whl" in os.listdir(node)


def test_an_index_that_cannot_listen_is_refused_with_the_variable(tmp_path_factory):
    case = _setup(tmp_path_factory, "no_address", pytorch_env_wheelhouse_bind="192.0.2.1")
    proc = _play(case["tmp"], case["env"], case["extra"])
    assert proc.returncode != 0
    assert "[PYTORCH_ENV_WHEELHOUSE_INDEX] pytorch_env_wheelhouse_bind" in proc.stdout, proc.stdout
    assert "cannot listen on 192.0.2.1" in proc.stdout


def test_a_wheel_changed_on_the_node_is_refused(tmp_path_factory):
    case = _setup(tmp_path_factory, "changed_wheel", pytorch_env_wheelhouse_transport="copy")
    assert _play(case["tmp"], case["env"], case["extra"]).returncode == 0
    tmp = case["tmp"]
    node = tmp / "node-wheelhouse"
    lock = glob.glob(str(node / ".ddp-*.lock"))[0]
    with zipfile.ZipFile(str(node / "ddpfake_b-2.0-py3-none-any.whl"), "a") as archive:
        archive.writestr("ddpfake_b/extra.py", "print('not what the controller read')\n")
    proc = subprocess.run(
        [str(tmp / "venv" / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
         "--force-reinstall", "--no-index", "--find-links=%s" % node, "--require-hashes", "-r", lock],
        capture_output=True, text=True, env=case["env"], check=False)
    assert proc.returncode != 0
    assert "DO NOT MATCH THE HASHES" in proc.stdout + proc.stderr
