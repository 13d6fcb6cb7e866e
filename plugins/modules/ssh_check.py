#!/usr/bin/python
# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: ssh_check
short_description: Prove non-interactive SSH from this node to every peer, in one call
version_added: 0.3.0
description:
  - C(mode=login) runs C(ssh -o BatchMode=yes -o StrictHostKeyChecking=yes <peer> true) to every one of
    O(peers), O(parallel) at a time, as the user the module runs as (use C(become_user)), and classifies
    each outcome from ssh's own messages (C(host_key_unknown), C(host_key_changed), C(auth_denied),
    C(refused), C(firewall_reject), C(timeout), C(unresolved), C(dropped), C(error)). A connection
    sshd dropped before the key exchange (C(MaxStartups), sshd_config(5)) is tried again, up to
    O(retries) times.
  - C(mode=known_hosts) only looks every peer up in O(known_hosts) with C(ssh-keygen -F) (hashed
    entries included) and returns those without an entry, and the modes of the SSH files beside it (RV(modes)),
    which sshd's C(StrictModes) and ssh itself check.
  - Peers are taken in the order given; give each node its peers rotated (C(ddp.cluster.mesh_plan)) so
    that every node receives about O(parallel) logins at a time, well under sshd's default
    C(MaxStartups 10:30:100).
  - Changes nothing on the host; C(changed) is always false.
options:
  mode:
    description: Log in to every peer, or look every peer up in known_hosts.
    type: str
    choices: [login, known_hosts]
    default: login
  name:
    description: This node's name, used as C(src) of each pair.
    type: str
    required: true
  peers:
    description: Every other node.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The peer's inventory name.
        type: str
        required: true
      host:
        description: The address or name to connect to (as in known_hosts).
        type: str
        required: true
  parallel:
    description: With O(mode=login), logins at a time (1-64).
    type: int
    default: 4
  timeout:
    description: With O(mode=login), ssh's C(ConnectTimeout) in seconds (1-300).
    type: int
    default: 10
  retries:
    description: With O(mode=login), extra attempts for a login sshd dropped before the key exchange (0-10).
    type: int
    default: 2
  known_hosts:
    description:
      - With O(mode=known_hosts), the file to look in. Default C(~/.ssh/known_hosts) of the user the module runs as.
      - C(~user/) at its start is that user's home folder on the node (as the shell expands it, from the passwd
        database), so that the caller needs no lookup of its own; a user the node does not have fails the module.
    type: path
author:
  - ddp.cluster maintainers (@ddp-cluster)
extends_documentation_fragment:
  - ddp.cluster.health.read_only
"""

EXAMPLES = r"""
- name: Prove SSH from this node to every other node as the cluster user
  ddp.cluster.ssh_check:
    name: "{{ inventory_hostname }}"
    peers: "{{ (ansible_play_hosts | ddp.cluster.mesh_plan(hostvars)).nodes[inventory_hostname] }}"
  become: true
  become_user: ddp
  register: ssh_pairs

- name: Which peers have no known_hosts entry
  ddp.cluster.ssh_check:
    mode: known_hosts
    name: "{{ inventory_hostname }}"
    peers: "{{ (ansible_play_hosts | ddp.cluster.mesh_plan(hostvars)).nodes[inventory_hostname] }}"
    known_hosts: ~ddp/.ssh/known_hosts
"""

RETURN = r"""
pairs:
  description:
    - One entry per peer, in the order given. C(verdict) C(ok) (login) or C(known) (known_hosts) proves the
      pair; C(attempts) counts ssh runs; C(elapsed_s) is seconds for this peer.
  returned: always
  type: list
  elements: dict
  sample: [{"src": "node0", "dst": "node1", "host": "10.89.0.3", "verdict": "ok", "message": "logged in",
            "attempts": 1, "elapsed_s": 0.21}]
failed_peers:
  description: Names of the peers whose verdict is not C(ok) / C(known).
  returned: always
  type: list
  elements: str
  sample: ["node2"]
modes:
  description:
    - With O(mode=known_hosts), the kind and octal mode of the folder that holds O(known_hosts) and of the files
      C(authorized_keys), C(id_ed25519) and C(known_hosts) in it, those that exist; kinds as
      C(ddp.cluster.cluster_problems) reads them (C(dir), C(authorized_keys), C(private_key), C(known_hosts)).
    - Empty with O(mode=login).
  returned: always
  type: dict
  sample: {"/home/ddp/.ssh": ["dir", "0700"], "/home/ddp/.ssh/id_ed25519": ["private_key", "0600"]}
elapsed_s:
  description: Seconds the whole check took.
  returned: always
  type: float
  sample: 0.8
"""

import os
import pwd
import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.netprobe import classify_ssh


def login(module, me, peer, timeout, retries):
    """I/O edge: ssh to one peer; retried while sshd drops the connection before the key exchange."""
    start = time.time()
    attempts = 0
    while True:
        attempts += 1
        rc, _out, err = module.run_command(
            ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=%d" % timeout,
             "-o", "ControlMaster=no", "-o", "ControlPath=none", peer["host"], "true"])
        verdict = classify_ssh(rc, err)
        if verdict["verdict"] != "dropped" or attempts > retries:
            break
        time.sleep(0.5 * attempts)
    return dict(src=me, dst=peer["name"], host=peer["host"], attempts=attempts,
                elapsed_s=round(time.time() - start, 3), **verdict)


def known(module, me, peer, path):
    """I/O edge: ``ssh-keygen -F`` one peer in ``path``."""
    start = time.time()
    rc, _out, _err = module.run_command(["ssh-keygen", "-F", peer["host"], "-f", path])
    verdict = ({"verdict": "known", "message": "in %s" % path} if rc == 0 else
               {"verdict": "missing", "message": "no known_hosts entry: non-interactive ssh fails with "
                                                 "'Host key verification failed.'"})
    return dict(src=me, dst=peer["name"], host=peer["host"], attempts=1, elapsed_s=round(time.time() - start, 3),
                **verdict)


# The files beside known_hosts whose modes sshd (StrictModes) or ssh check, with the kind crossnode.py judges.
SSH_FILES = (("", "dir"), ("authorized_keys", "authorized_keys"), ("id_ed25519", "private_key"),
             ("known_hosts", "known_hosts"))


def ssh_modes(folder):
    """I/O edge: ``{path: [kind, "0700"]}`` of the SSH folder and its files that exist."""
    out = {}
    for name, kind in SSH_FILES:
        path = os.path.join(folder, name) if name else folder
        try:
            out[path] = [kind, "%04o" % (os.stat(path).st_mode & 0o7777)]
        except OSError:
            continue
    return out


def run_all(jobs, parallel):
    """Run ``jobs`` (callables) ``parallel`` at a time, keeping their order in the result."""
    results = [None] * len(jobs)
    queue = list(enumerate(jobs))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                index, job = queue.pop(0)
            results[index] = job()

    threads = [threading.Thread(target=worker) for _slot in range(max(1, min(parallel, len(jobs))))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["login", "known_hosts"], default="login"),
            name=dict(type="str", required=True),
            peers=dict(type="list", elements="dict", required=True, options=dict(
                name=dict(type="str", required=True),
                host=dict(type="str", required=True))),
            parallel=dict(type="int", default=4),
            timeout=dict(type="int", default=10),
            retries=dict(type="int", default=2),
            known_hosts=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    for key, low, high in (("parallel", 1, 64), ("timeout", 1, 300), ("retries", 0, 10)):
        if not low <= p[key] <= high:
            module.fail_json(msg="%s must be %d-%d, got %d" % (key, low, high, p[key]))
    start = time.time()
    if p["mode"] == "known_hosts":
        path = p["known_hosts"] or os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".ssh", "known_hosts")
        if path.startswith("~"):  # type path expands ~user; what is left is a user the passwd database lacks
            module.fail_json(msg="known_hosts %s: the node has no user %s, so it has no such home folder"
                             % (path, path[1:].split("/", 1)[0] or "(none named)"))
        pairs = [known(module, p["name"], peer, path) for peer in p["peers"]]
        good = "known"
        modes = ssh_modes(os.path.dirname(path))
    else:
        modes = {}
        pairs = run_all([(lambda peer=peer: login(module, p["name"], peer, p["timeout"], p["retries"]))
                         for peer in p["peers"]], p["parallel"])
        good = "ok"
    module.exit_json(changed=False, pairs=pairs, modes=modes, elapsed_s=round(time.time() - start, 3),
                     failed_peers=[x["dst"] for x in pairs if x["verdict"] != good])


if __name__ == "__main__":
    main()
