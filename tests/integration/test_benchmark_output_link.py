"""The benchmark's output folder on a running node: root never creates it, hands it over, or reads results through a
link the cluster user planted (issue 40, security item a).

- a link at the folder's path, planted by the cluster user (pointing at a folder of root's programs, as /opt/ddp/bin
  is, whose ddp-health-slurm Slurm runs as root), is refused with BENCHMARK_OUTPUT_UNSAFE and nothing there changes
  owner;
- a folder under a parent the cluster user can write is refused and nothing is created there;
- a folder under root's own folders is created, the cluster user's, and a second run changes nothing;
- a result file the cluster user replaced with a link to /etc/shadow is not read (the role reads results as the
  cluster user without following links) and nothing of it reaches the controller.

The role's own task files (roles/ddp_benchmark/tasks/output_dir.yml, fetch_result.yml) run against the head node, as
the benchmark runs them; the validate stage refuses such paths on the controller already (VALIDATE_PATH), which is
why they are run here directly. Nodes: DDP_IT_NODES (head first, default the Molecule nodes ddp-mol1,ddp-mol2),
inventory DDP_IT_INVENTORY (default molecule/local/inventory/nodes); the cluster user is ddp. Skipped when the nodes
are not running; everything the test made is removed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from checkout_env import checkout_env
from podman_nodes import running

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODES = os.environ.get("DDP_IT_NODES", "ddp-mol1,ddp-mol2").split(",")
HEAD = NODES[0]
INVENTORY = os.environ.get("DDP_IT_INVENTORY", os.path.join(ROOT, "molecule", "local", "inventory", "nodes"))
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
USER = "ddp"
GOOD = "/var/lib/ddp-it-bench/out"
# A folder of root's programs, as /opt/ddp/bin is (Slurm runs ddp-health-slurm from it as root): the link's target.
TARGET = "/var/lib/ddp-it-target"
PLAY = """
- hosts: %(head)s
  gather_facts: false
  become: true
  vars:
    ddp_benchmark_user: %(user)s
    __ddp_benchmark_head: %(head)s
    __ddp_benchmark_run_id: ddp-bench-it-0
    __ddp_benchmark_run_dir: %(run_dir)s
  tasks:
    - name: Create the output folder as the benchmark does
      ansible.builtin.import_role:
        name: ddp.cluster.ddp_benchmark
        tasks_from: output_dir.yml
      when: "'create' in step"
    - name: Fetch a result as the benchmark does
      ansible.builtin.import_role:
        name: ddp.cluster.ddp_benchmark
        tasks_from: fetch_result.yml
      when: "'fetch' in step"
"""


def _user_exists():
    return subprocess.run(["podman", "exec", HEAD, "id", USER], capture_output=True, check=False).returncode == 0


pytestmark = pytest.mark.skipif(not running(HEAD) or not _user_exists(),
                                reason="the head node %s is not running with the cluster user %s (make test starts the "
                                       "Molecule nodes)" % (HEAD, USER))


def node(*argv, user=None, check=True):
    cmd = ["podman", "exec"] + (["--user", user] if user else []) + [HEAD] + list(argv)
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def owner(path):
    return node("stat", "-c", "%U:%G %a %F", path).stdout.strip()


@pytest.fixture
def play(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "play.yml").write_text(PLAY % {"head": HEAD, "user": USER, "run_dir": str(tmp_path)})
    env = checkout_env(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", MOLECULE_PROJECT_DIRECTORY=ROOT)

    def run(step, output_dir):
        cmd = [PLAYBOOK_BIN, "-i", INVENTORY, str(tmp_path / "play.yml"), "-e",
               json.dumps({"step": step, "ddp_benchmark_output_dir": output_dir})]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
        return proc, proc.stdout + proc.stderr

    yield run
    home = node("sh", "-c", "getent passwd %s | cut -d: -f6" % USER).stdout.strip()
    node("rm", "-rf", "/var/lib/ddp-it-bench", TARGET, home + "/ddp-it-link", home + "/ddp-it-sub", check=False)


def test_a_planted_link_is_refused_and_nothing_changes_owner(play):
    home = node("sh", "-c", "getent passwd %s | cut -d: -f6" % USER).stdout.strip()
    node("install", "-d", "-o", "root", "-g", "root", "-m", "0755", TARGET)
    node("touch", TARGET + "/program")
    before = owner(TARGET), owner(TARGET + "/program")
    node("ln", "-s", TARGET, home + "/ddp-it-link", user=USER)
    proc, out = play("create", home + "/ddp-it-link")
    assert proc.returncode != 0
    assert "[BENCHMARK_OUTPUT_UNSAFE] ddp_benchmark_output_dir" in out, out[-3000:]
    assert "ddp-it-link is a link" in out, out[-3000:]
    assert (owner(TARGET), owner(TARGET + "/program")) == before and before[0].startswith("root:root"), before
    assert owner(home + "/ddp-it-link").endswith("symbolic link")


def test_a_parent_the_user_can_write_is_refused_and_nothing_is_created(play):
    home = node("sh", "-c", "getent passwd %s | cut -d: -f6" % USER).stdout.strip()
    proc, out = play("create", home + "/ddp-it-sub/bench")
    assert proc.returncode != 0
    assert "[BENCHMARK_OUTPUT_UNSAFE]" in out and "can be written by others than root" in out, out[-3000:]
    assert node("test", "-e", home + "/ddp-it-sub", check=False).returncode == 1


def test_a_folder_under_roots_folders_is_the_users_and_a_link_in_it_is_never_read(play):
    proc, out = play("create", GOOD)
    assert proc.returncode == 0, out[-3000:]
    assert owner(GOOD).startswith("%s:" % USER) and owner(GOOD).endswith("directory")
    assert owner(os.path.dirname(GOOD)) == "root:root 755 directory"
    # The cluster user replaces its result with a link to a file only root may read; the next run creates nothing
    # (the folder is there as it should be) and does not read the link.
    node("ln", "-s", "/etc/shadow", GOOD + "/ddp-bench-it-0.json", user=USER)
    proc, out = play("create,fetch", GOOD)
    assert proc.returncode != 0
    assert "changed:" not in out, out[-3000:]
    assert "root:" not in out, "a line of /etc/shadow reached the controller's output"
    assert "Too many levels of symbolic links" in out or "Permission denied" in out, out[-3000:]
