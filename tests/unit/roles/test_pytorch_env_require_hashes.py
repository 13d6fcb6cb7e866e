"""roles/pytorch_env with pytorch_env_require_hashes: the wheelhouse step writes the lock file on the controller and
the node's pip installs from it with --require-hashes (wheelhouse.yml, then pip.yml, as main.yml runs them).

Runs on this machine over the local connection, without a network: the "index" is a folder of two wheels made
here (ddpfake-a needs ddpfake-b), given to `pip download` with --no-index --find-links; the node's environment
is a venv in the test's folder. The collection is the checkout's (tests/checkout_env.py).
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

import pytest

from checkout_env import checkout_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.path.dirname(sys.executable)
PLAYBOOK = """
- hosts: localhost
  gather_facts: true
  gather_subset: [min]
  vars:
    pytorch_env_require_hashes: true
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
    - name: Keep what pip.yml was given
      ansible.builtin.copy:
        content: "{{ {'args': __pytorch_env_pip_args, 'requirements': __pytorch_env_pip_requirements} | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
"""


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


@pytest.fixture(scope="module")
def converged(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("require_hashes")
    index = tmp / "index"
    index.mkdir()
    wheels = [_wheel(str(index), "ddpfake_a", "1.0", ["ddpfake-b>=2"]), _wheel(str(index), "ddpfake_b", "2.0")]
    subprocess.run([sys.executable, "-m", "venv", str(tmp / "venv")], check=True, capture_output=True)
    (tmp / "play.yml").write_text(PLAYBOOK)
    env = checkout_env(PATH="%s:%s" % (BIN, os.environ["PATH"]), ANSIBLE_LOCAL_TEMP=str(tmp / "ansible-tmp"),
                       ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", PIP_CONFIG_FILE=os.devnull)
    extra = {"index": str(index), "venv": str(tmp / "venv"), "pytorch_env_wheelhouse": str(tmp / "wheelhouse"),
             "pytorch_env_node_wheelhouse": str(tmp / "node-wheelhouse"), "ansible_python_interpreter": sys.executable,
             "out": str(tmp / "pip-input.json")}
    proc = subprocess.run(
        [os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", "-e", json.dumps(extra),
         str(tmp / "play.yml")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    return {"tmp": tmp, "proc": proc, "wheels": wheels, "env": env}


def test_the_controller_writes_a_lock_of_every_wheel_the_node_installs(converged):
    proc, tmp = converged["proc"], converged["tmp"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    locks = glob.glob(str(tmp / "wheelhouse" / ".ddp-*.lock"))
    assert len(locks) == 1
    with open(locks[0]) as handle:
        pins = [line for line in handle.read().splitlines() if not line.startswith("#")]
    a, b = converged["wheels"]
    assert pins == ["ddpfake-a==1.0 --hash=sha256:%s" % _sha256(a), "ddpfake-b==2.0 --hash=sha256:%s" % _sha256(b)]


def test_the_node_installs_the_lock_alone_with_require_hashes(converged):
    proc, tmp = converged["proc"], converged["tmp"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    node = str(tmp / "node-wheelhouse")
    lock = os.path.basename(glob.glob(str(tmp / "wheelhouse" / ".ddp-*.lock"))[0])
    given = json.loads((tmp / "pip-input.json").read_text())
    assert given == {"args": ["--no-index", "--find-links=" + node, "--require-hashes", "-r", node + "/" + lock],
                     "requirements": []}
    show = subprocess.run([str(tmp / "venv" / "bin" / "python"), "-c", "import ddpfake_a, ddpfake_b; "
                           "print(ddpfake_a.VERSION, ddpfake_b.VERSION)"], capture_output=True, text=True, check=False)
    assert show.stdout.split() == ["1.0", "2.0"], show.stderr


def test_a_wheel_changed_on_the_node_is_refused(converged):
    tmp = converged["tmp"]
    node = tmp / "node-wheelhouse"
    lock = glob.glob(str(node / ".ddp-*.lock"))[0]
    with zipfile.ZipFile(str(node / "ddpfake_b-2.0-py3-none-any.whl"), "a") as archive:
        archive.writestr("ddpfake_b/extra.py", "print('not what the controller read')\n")
    proc = subprocess.run(
        [str(tmp / "venv" / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
         "--force-reinstall", "--no-index", "--find-links=%s" % node, "--require-hashes", "-r", lock],
        capture_output=True, text=True, env=converged["env"], check=False)
    assert proc.returncode != 0
    assert "DO NOT MATCH THE HASHES" in proc.stdout + proc.stderr
