#!/usr/bin/python
# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_health
short_description: Measure all-reduce bandwidth across the nodes of the play and diagnose NCCL
version_added: 0.2.0
description:
  - "O(mode=torch) (default): runs the all-reduce script O(script) (standard library + torch; the
    C(pytorch_env) role installs it in the environment) with C(<python_env>/bin/torchrun --nnodes N
    --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id ID --rdzv-conf join_timeout=T)
    on this node. Ansible runs the module on every node of the play in parallel, so all nodes join one
    rendezvous; run it with C(strategy: free) or the default linear strategy and enough C(forks) for every node."
  - "With one process per node and O(node_rank) given (O(launcher=auto)), the script runs as that one process
    instead, with torchrun's variables set by the module (C(RANK) = C(GROUP_RANK) = O(node_rank),
    C(WORLD_SIZE) = O(nnodes), C(MASTER_ADDR) and C(MASTER_PORT) from O(rdzv_endpoint)): rank 0 hosts the c10d
    TCPStore at O(rdzv_endpoint) and waits O(join_timeout) for the other ranks. No torchrun agent runs, which
    saves one torch import per node (about 1.3 CPU-seconds per node on the local CPU nodes,
    C(benchmarks/allreduce_launch.sh))."
  - The script times C(torch.distributed.all_reduce) of float32 tensors over O(sizes) after O(warmup)
    calls, takes the slowest rank's mean time over O(iterations) calls, and reports
    algbw = bytes / time and busbw = algbw x 2(n-1)/n (the all-reduce factor of nccl-tests
    C(doc/PERFORMANCE.md)), in GB/s (10^9 bytes/s). Each size is also checked for wrong elements.
  - The backend is NCCL on GPU nodes and Gloo on CPU nodes (O(backend=auto)). With NCCL the module
    sets C(NCCL_DEBUG=INFO) and C(NCCL_DEBUG_SUBSYS=INIT,NET) (unless O(environment) sets them) and reads
    the network transport (C(NET/IB) or C(NET/Socket)), GPUDirect RDMA, the NCCL version and any
    C(NCCL WARN) lines from the output.
  - "O(mode=nccl-tests): runs an nccl-tests C(all_reduce_perf) binary given by O(nccl_tests_path), on this
    node or under O(mpirun) when given (then run the module on one node only), and parses its table."
  - Changes nothing on the host but a temporary directory (for the script's result file) it removes;
    C(changed) is always false.
options:
  mode:
    description: Run the torch all-reduce script O(script) under torchrun, or an nccl-tests binary.
    type: str
    choices: [torch, nccl-tests]
    default: torch
  python_env:
    description:
      - Python virtual environment (or conda prefix) with torch. C(<python_env>/bin/torchrun) is used,
        else C(<python_env>/bin/python -m torch.distributed.run).
    type: path
    default: /opt/ddp/venv
  launcher:
    description:
      - How O(mode=torch) starts the script. V(torchrun) under torchrun's agent and c10d rendezvous; V(direct) as
        one process per node without an agent (needs O(node_rank) and O(nproc_per_node=1)); V(auto) is V(direct)
        where both hold, else V(torchrun).
      - With V(direct), the node with O(node_rank=0) must be the host O(rdzv_endpoint) names (its address is
        bound on this node), since that process hosts the store; elsewhere it is C(NCCL_RUN_FAILED) and nothing runs.
    type: str
    choices: [auto, torchrun, direct]
    default: auto
  node_rank:
    description:
      - This node's rank among the O(nnodes) nodes (0 to O(nnodes) - 1, each node its own), for O(launcher=direct);
        0 on the node O(rdzv_endpoint) names. Not set, O(launcher=auto) uses torchrun, which ranks the nodes itself.
    type: int
  script:
    description:
      - The all-reduce script torchrun runs with O(mode=torch), an absolute path on the node. Not set,
        C(<python_env>/share/ddp-cluster/ddp_nccl_allreduce.py), where the C(pytorch_env) role installs it.
      - A missing file is C(NCCL_RUN_FAILED), and nothing runs.
      - The script imports C(ddp_dist.py) from its own folder, else from C(<python_env>/share/ddp-cluster)
        (where C(pytorch_env) installs it), so a copy elsewhere needs that environment, or C(ddp_dist.py) beside it.
    type: path
  rdzv_endpoint:
    description:
      - C(HOST:PORT) of the c10d rendezvous, the same on every node (the head node's fabric address and a
        free port). Required with O(mode=torch).
    type: str
  rdzv_id:
    description: Rendezvous id, the same on every node; use a new one per run when runs overlap.
    type: str
    default: ddp-nccl-health
  nnodes:
    description: Number of nodes that join, usually C({{ ansible_play_hosts | length }}).
    type: int
    default: 1
  nproc_per_node:
    description:
      - Processes per node (one per GPU with NCCL). With O(mode=nccl-tests) and no O(mpirun), the number
        of GPUs the single process drives (C(-g)).
    type: int
    default: 1
  sizes:
    description:
      - Message sizes in bytes. The default (1, 4 and 16 MiB) suits Gloo on CPU; on GPUs use 1 GiB and more
        (e.g. C([1073741824, 4294967296])), where busbw reaches its plateau.
      - With O(mode=nccl-tests) the smallest and largest become C(-b) and C(-e) with C(-f 2).
    type: list
    elements: int
    default: [1048576, 4194304, 16777216]
  iterations:
    description: Timed all-reduce calls per size.
    type: int
    default: 20
  warmup:
    description: Untimed all-reduce calls per size before timing.
    type: int
    default: 5
  backend:
    description: Process-group backend; C(auto) is NCCL when CUDA is available, else Gloo. O(mode=torch) only.
    type: str
    choices: [auto, nccl, gloo]
    default: auto
  timeout:
    description:
      - Seconds the whole run may take (coreutils C(timeout) sends SIGTERM, then SIGKILL 30 s later); the
        result is then C(NCCL_RENDEZVOUS_FAILED). Also the C(init_process_group) timeout of the script.
    type: int
    default: 300
  join_timeout:
    description:
      - Seconds torchrun waits for all O(nnodes) nodes to join the rendezvous; with O(launcher=direct), seconds rank 0's
        store waits for every other rank to connect, and each other rank for rank 0's store.
    type: int
    default: 120
  min_busbw_gbps:
    description:
      - Floor for the busbw (GB/s) of the largest size; below it C(NCCL_BUSBW_LOW) (error). Not set, no check with
        O(mode=torch) (the health stage passes the floor it derives), and with O(mode=nccl-tests) a floor from the
        hardware the run used (RV(busbw_floor)), across nodes 0.25 x the rate of this node's active RDMA ports its
        ranks use (from 16 MiB on), on one node of 8 SXM A100 / H100 / H200 OCI's 185 / 440 GB/s (from 1 GiB on);
        V(0) turns it off.
      - "Figures seen in public runs: 8xA100 NVLink 235 GB/s at 8 GiB, 2 nodes 8xH100 with 16x200G RoCE 464 GB/s,
        2 nodes with one 100GbE RoCE port about 22 GB/s; see C(docs/troubleshooting.md)."
    type: float
  expected_transport:
    description:
      - Network transport NCCL must use between nodes; another one is C(NCCL_TRANSPORT_UNEXPECTED) (error).
        C(IB) covers InfiniBand and RoCE (both use NCCL's IB verbs transport).
      - Not set, NET/Socket on a node with RDMA devices is C(NCCL_SOCKET_FALLBACK) (warning).
    type: str
    choices: [IB, Socket]
  environment:
    description:
      - Variables for the ranks (C(NCCL_*), C(TORCH_NCCL_*), C(GLOO_SOCKET_IFNAME) ...). They and the module's
        own environment are checked for names that have no effect (C(NCCL_ENV_UNKNOWN_VAR)) and for interface
        lists that match nothing (C(NCCL_ENV_IFNAME)).
    type: dict
    default: {}
  nccl_tests_path:
    description: Path of the nccl-tests C(all_reduce_perf) binary. Required with O(mode=nccl-tests).
    type: path
  nccl_tests_args:
    description: Extra arguments for the nccl-tests binary (e.g. C([-c, "1"])).
    type: list
    elements: str
    default: []
  mpirun:
    description: With O(mode=nccl-tests), run the binary under this C(mpirun), with O(mpirun_args) and C(-g 1).
    type: path
  mpirun_args:
    description: Arguments for O(mpirun) before the binary, e.g. C([-np, "16", -H, "node0:8,node1:8"]).
    type: list
    elements: str
    default: []
  sysfs_root:
    description: Root of sysfs, read for RDMA devices (C(class/infiniband)) and interfaces (C(class/net)).
    type: path
    default: /sys
author:
  - ddp.cluster maintainers (@ddp-cluster)
extends_documentation_fragment:
  - ddp.cluster.health
notes:
  - Every node of the run must run the module at the same time with the same O(rdzv_endpoint), O(rdzv_id),
    O(nnodes) and O(launcher) (and, with V(direct), each its own O(node_rank)); a node that does not join within
    O(join_timeout) fails every node's task with C(NCCL_RENDEZVOUS_FAILED).
  - Privilege is Ansible's C(become); the module has no user option.
attributes:
  check_mode:
    description:
      - Can run in check mode and return changed status prediction without modifying target.
    support: partial
    details:
      - Reports the command it would run and checks O(environment) and the interface lists, without
        running the test, so no bandwidth, transport or version is returned.
      - It does not look for torchrun or O(script) on the node, which the C(pytorch_env) role may install
        in the same run.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
"""

EXAMPLES = r"""
- name: Measure all-reduce across every node (one process per GPU)
  ddp.cluster.nccl_health:
    rdzv_endpoint: "{{ hostvars[groups['ddp_head'][0]].ddp_fabric_address }}:29510"
    rdzv_id: "nccl-health-{{ ansible_facts.date_time.epoch }}"
    nnodes: "{{ ansible_play_hosts | length }}"
    nproc_per_node: 4
    sizes: [1073741824, 4294967296]
    min_busbw_gbps: 21
    expected_transport: IB
  register: nccl

- name: Gloo on the CPU-only local cluster, report only, one process per node without torchrun's agent
  ddp.cluster.nccl_health:
    rdzv_endpoint: "ddp-node1:29510"
    nnodes: 3
    node_rank: "{{ ['ddp-node1', 'ddp-node2', 'ddp-node3'].index(inventory_hostname) }}"
    fail_on: never

- name: Run the all-reduce with a script kept outside the environment (a python_env not made by pytorch_env)
  ddp.cluster.nccl_health:
    python_env: /opt/conda/envs/train
    script: /srv/ddp/ddp_nccl_allreduce.py
    rdzv_endpoint: "{{ hostvars[groups['ddp_head'][0]].ddp_fabric_address }}:29510"
    nnodes: "{{ ansible_play_hosts | length }}"

- name: Run nccl-tests on one node over NVLink
  ddp.cluster.nccl_health:
    mode: nccl-tests
    nccl_tests_path: /opt/nccl-tests/build/all_reduce_perf
    nproc_per_node: 8
    sizes: [1073741824, 8589934592]
    min_busbw_gbps: 200
"""

RETURN = r"""
healthy:
  description: No problem of severity C(error).
  returned: always
  type: bool
  sample: true
problems:
  description: Problems found, errors first.
  returned: always
  type: list
  elements: dict
  sample: [{"code": "NCCL_SOCKET_FALLBACK", "severity": "warning", "subject": "node gpu1",
            "message": "NCCL used NET/Socket although RDMA device(s) mlx5_0 exist on this node",
            "fix": "unset NCCL_IB_DISABLE ..."}]
busbw:
  description: One entry per size; GB/s are 10^9 bytes/s, time in microseconds (out-of-place for nccl-tests).
  returned: always
  type: list
  elements: dict
  sample: [{"bytes": 16777216, "algbw_gbps": 1.37, "busbw_gbps": 1.37, "time_us": 12246.1}]
avg_busbw_gbps:
  description: Mean busbw over the sizes (nccl-tests' "Avg bus bandwidth"); null when the test did not run.
  returned: always
  type: float
  sample: 1.21
transport:
  description:
    - Network transport NCCL used (C(IB), C(Socket), another NET plugin), C(gloo) with the Gloo backend,
      or null when unknown (e.g. a single-node NCCL run uses only P2P/SHM).
  returned: always
  type: str
  sample: IB
nccl_version:
  description: NCCL version from the NCCL log, else as torch reports it (C(torch.cuda.nccl.version())); null on CPU.
  returned: always
  type: str
  sample: 2.18.3
nccl_versions:
  description: With O(mode=torch), host -> NCCL version as torch reports it on that host (null on CPU).
  returned: always
  type: dict
  sample: {"gpu1": "2.18.3", "gpu2": "2.18.3"}
world_size:
  description: Number of ranks that took part.
  returned: always
  type: int
  sample: 8
backend:
  description: C(nccl) or C(gloo); null when the test did not run.
  returned: always
  type: str
  sample: nccl
gdr:
  description: GPUDirect RDMA seen in the NCCL log (true), reported disabled (false), or unknown (null).
  returned: always
  type: bool
  sample: true
hosts:
  description: With O(mode=torch), host -> global ranks on it.
  returned: always
  type: dict
  sample: {"gpu1": [0, 1, 2, 3], "gpu2": [4, 5, 6, 7]}
launcher:
  description: With O(mode=torch), how the script was started (or would be in check mode), V(torchrun) or V(direct).
  returned: mode is torch
  type: str
  sample: direct
command:
  description: The command run (or that would run in check mode).
  returned: always
  type: list
  elements: str
  sample: ["/opt/ddp/venv/bin/torchrun", "--nnodes", "2", "..."]
output_tail:
  description: Last lines of the run's output (stdout and stderr together).
  returned: when the test ran
  type: list
  elements: str
  sample: ["NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>"]
nccl_tests:
  description: With O(mode=nccl-tests), the parsed header (version, test, params, hosts, column format).
  returned: mode is nccl-tests and the test ran
  type: dict
  sample: {"version": "2.18.3", "test": "all_reduce_perf", "columns": "wrong", "hosts": ["gpu1"], "params": {}}
busbw_floor:
  description: With O(mode=nccl-tests), the floor applied and where it came from (C(explicit), C(off), C(rdma),
    C(nvlink), C(unknown)).
  returned: mode is nccl-tests and the test ran
  type: dict
  sample: {"floor_gbps": 50.0, "source": "rdma", "why": "2 nodes, 8 ranks each: 0.25 x 1600 Gb/s ..."}
failure:
  description: With O(mode=nccl-tests) and a failed run, NCCL's own error text kept and classified (C(class) one of
    transport, process, cuda, system, internal, usage, unknown; C(evidence) the WARN lines that decided it).
  returned: mode is nccl-tests and the run failed
  type: dict
  sample: {"code": "NCCL_TRANSPORT_ERROR", "class": "transport", "nccl_error": null, "evidence": ["..."]}
"""

import json
import os
import shutil
import socket
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ddp.cluster.plugins.module_utils import diagnosis
from ansible_collections.ddp.cluster.plugins.module_utils.nccl import health as nh
from ansible_collections.ddp.cluster.plugins.module_utils.nccl.floors import nccl_tests_floor
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.health_io import read_ib_tree
from ansible_collections.ddp.cluster.plugins.module_utils.nccl.parsers import parse_nccl_tests
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.rdma_parsers import parse_sysfs_ib

ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_")
OUTPUT_TAIL_LINES = 40


def list_dir(path):
    """I/O edge: sorted names in a directory, [] when it does not exist."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def run_bounded(module, argv, env_update, cwd, timeout):
    """I/O edge: run argv under coreutils C(timeout), which sends SIGTERM (torchrun then stops its
    workers) and SIGKILL 30 s later. Returns (rc, output, timed_out); output is stdout then stderr."""
    timeout_bin = module.get_bin_path("timeout")
    if timeout_bin:
        argv = [timeout_bin, "--kill-after=30", str(timeout)] + list(argv)
    else:
        module.warn("coreutils timeout not found: the run is bounded only by join_timeout and the "
                    "script's init_process_group timeout")
    rc, out, err = module.run_command(argv, environ_update=env_update, cwd=cwd, errors="surrogate_or_replace")
    timed_out = bool(timeout_bin) and rc in (124, 137)
    return rc, "%s\n%s" % (out or "", err or ""), timed_out


def address_is_local(host):
    """I/O edge: whether ``host`` resolves to an address of this node (one that a socket can bind), as rank 0 of a
    direct launch must, since it hosts the store there. Unresolvable: False."""
    try:
        infos = socket.getaddrinfo(host, None, 0, socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return False
    for family, socktype, proto, _name, address in infos:
        sock = socket.socket(family, socktype, proto)
        try:
            sock.bind((address[0], 0) + tuple(address[2:]))
            return True
        except OSError:
            continue
        finally:
            sock.close()
    return False


def torchrun_prefix(python_env):
    """torchrun of the env, else its python -m torch.distributed.run; None when neither exists."""
    torchrun = os.path.join(python_env, "bin", "torchrun")
    if os.access(torchrun, os.X_OK):
        return [torchrun]
    python = os.path.join(python_env, "bin", "python")
    if os.access(python, os.X_OK):
        return [python, "-m", "torch.distributed.run"]
    return None


def build_env(params):
    """Variables added to the ranks' environment: O(environment), C locale, NCCL debug output for parsing."""
    env = {k: str(v) for k, v in params["environment"].items()}
    env["LC_ALL"] = "C"
    for name, value in (("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG_SUBSYS", "INIT,NET")):
        if name not in env and name not in os.environ:
            env[name] = value
    return env


def checked_env(params):
    """Variables to check: NCCL/TORCH_NCCL/GLOO ones of this process and O(environment)."""
    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}
    env.update({k: str(v) for k, v in params["environment"].items()})
    return env


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["torch", "nccl-tests"], default="torch"),
            python_env=dict(type="path", default="/opt/ddp/venv"),
            script=dict(type="path"),
            rdzv_endpoint=dict(type="str"),
            rdzv_id=dict(type="str", default="ddp-nccl-health"),
            launcher=dict(type="str", choices=list(nh.LAUNCHERS), default="auto"),
            node_rank=dict(type="int"),
            nnodes=dict(type="int", default=1),
            nproc_per_node=dict(type="int", default=1),
            sizes=dict(type="list", elements="int", default=list(nh.DEFAULT_SIZES)),
            iterations=dict(type="int", default=20),
            warmup=dict(type="int", default=5),
            backend=dict(type="str", choices=["auto", "nccl", "gloo"], default="auto"),
            timeout=dict(type="int", default=300),
            join_timeout=dict(type="int", default=120),
            min_busbw_gbps=dict(type="float"),
            expected_transport=dict(type="str", choices=["IB", "Socket"]),
            environment=dict(type="dict", default={}),
            nccl_tests_path=dict(type="path"),
            nccl_tests_args=dict(type="list", elements="str", default=[]),
            mpirun=dict(type="path"),
            mpirun_args=dict(type="list", elements="str", default=[]),
            sysfs_root=dict(type="path", default="/sys"),
            fail_on=dict(type="str", choices=list(diagnosis.FAIL_ON_CHOICES), default="error"),
        ),
        required_if=[("mode", "torch", ["rdzv_endpoint"]), ("mode", "nccl-tests", ["nccl_tests_path"])],
        supports_check_mode=True,
    )


def validate(module):
    params = module.params
    for name in ("nnodes", "nproc_per_node", "iterations", "timeout", "join_timeout"):
        if params[name] < 1:
            module.fail_json(msg="%s must be >= 1, got %d" % (name, params[name]))
    if params["warmup"] < 0:
        module.fail_json(msg="warmup must be >= 0, got %d" % params["warmup"])
    if not params["sizes"] or min(params["sizes"]) < 4:
        module.fail_json(msg="sizes must list byte counts >= 4, got %s" % params["sizes"])
    if params["script"] is not None and not os.path.isabs(params["script"]):
        module.fail_json(msg="script must be an absolute path on the node, got %r" % params["script"])
    if params["mode"] == "torch":
        host, _sep, port = params["rdzv_endpoint"].rpartition(":")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            module.fail_json(msg="rdzv_endpoint must be HOST:PORT, got %r" % params["rdzv_endpoint"])
    if params["node_rank"] is not None and not 0 <= params["node_rank"] < params["nnodes"]:
        module.fail_json(msg="node_rank must be 0 to nnodes - 1 (%d), got %d" % (params["nnodes"] - 1, params["node_rank"]))
    if params["launcher"] == "direct" and (params["node_rank"] is None or params["nproc_per_node"] != 1):
        module.fail_json(msg="launcher direct runs one process per node: it needs node_rank and nproc_per_node 1 "
                             "(got node_rank %s, nproc_per_node %d); use launcher torchrun or auto"
                         % (params["node_rank"], params["nproc_per_node"]))


def finish(module, problems, facts, command, output=None):
    params = module.params
    facts = dict(facts)
    facts.setdefault("nccl_versions", {})
    facts.setdefault("gdr", None)
    facts.setdefault("hosts", {})
    extra = {"command": command}
    if output is not None:
        extra["output_tail"] = output.splitlines()[-OUTPUT_TAIL_LINES:]
    result = diagnosis.result(problems, **facts)
    result.update(extra)
    if diagnosis.should_fail(problems, params["fail_on"]):
        module.fail_json(msg=diagnosis.summary(result["problems"]), changed=False, **result)
    module.exit_json(changed=False, **result)


def nccl_tests_command(params):
    sizes = params["sizes"]
    args = ["-b", str(min(sizes)), "-e", str(max(sizes)), "-f", "2", "-n", str(params["iterations"]),
            "-w", str(params["warmup"]), "-g", "1" if params["mpirun"] else str(params["nproc_per_node"])]
    argv = [params["nccl_tests_path"]] + args + list(params["nccl_tests_args"])
    if params["mpirun"]:
        argv = [params["mpirun"]] + list(params["mpirun_args"]) + argv
    return argv


def main():
    module = build_module()
    validate(module)
    params = module.params
    subject = "node %s" % socket.gethostname()
    sysfs = params["sysfs_root"]
    rdma_devices = list_dir(os.path.join(sysfs, "class", "infiniband"))
    interfaces = list_dir(os.path.join(sysfs, "class", "net"))
    env_to_check = checked_env(params)
    common = dict(min_busbw_gbps=params["min_busbw_gbps"], expected_transport=params["expected_transport"],
                  rdma_devices=rdma_devices, env=env_to_check, interfaces=interfaces or None)

    if params["mode"] == "nccl-tests":
        command = nccl_tests_command(params)
        if module.check_mode:
            problems = nh.check_nccl_env(env_to_check, None, subject) + (
                nh.check_socket_ifname(env_to_check, interfaces, subject) if interfaces else [])
            finish(module, problems, nh._empty_facts(), command)
        if not os.access(params["nccl_tests_path"], os.X_OK):
            problems = [diagnosis.problem(
                "NCCL_RUN_FAILED", "error", subject, "nccl-tests binary %s is missing or not executable"
                % params["nccl_tests_path"], "build nccl-tests (make MPI=1 for mpirun) or fix nccl_tests_path")]
            finish(module, problems, nh._empty_facts(), command)
        rc, output, timed_out = run_bounded(module, command, build_env(params), None, params["timeout"])
        if timed_out:
            rc = "timeout after %ds" % params["timeout"]
        ports = parse_sysfs_ib(read_ib_tree(sysfs))
        roce = {"devices": [{"name": d, "ports": [p for p in ports if p["device"] == d]}
                            for d in sorted(set(p["device"] for p in ports))]}
        floor = nccl_tests_floor(parse_nccl_tests(output or ""), roce, params["min_busbw_gbps"])
        common["min_busbw_gbps"] = floor["floor_gbps"]
        problems, facts = nh.diagnose_nccl_tests(rc, output, subject, **common)
        facts["busbw_floor"] = floor
        finish(module, problems, facts, command, output)

    launcher = nh.choose_launcher(params["launcher"], params["nproc_per_node"], params["node_rank"])
    python = os.path.join(params["python_env"], "bin", "python")
    if launcher == "direct":
        prefix = [python] if os.access(python, os.X_OK) else None
    else:
        prefix = torchrun_prefix(params["python_env"])
    script = params["script"] or nh.default_script(params["python_env"])

    def torch_command(output_path):
        script_args = nh.script_argv(params["sizes"], params["iterations"], params["warmup"], params["backend"],
                                     params["timeout"], output_path)
        if launcher == "direct":
            return nh.direct_argv(python, script, script_args, params["join_timeout"])
        return nh.torchrun_argv(prefix or [os.path.join(params["python_env"], "bin", "torchrun")], params["nnodes"],
                                params["nproc_per_node"], params["rdzv_endpoint"], params["rdzv_id"],
                                params["join_timeout"], script, script_args)

    command = torch_command(os.path.join("<tmpdir>", "result.json"))
    launched = {"launcher": launcher}
    if module.check_mode:
        problems = nh.check_nccl_env(env_to_check, None, subject) + (
            nh.check_socket_ifname(env_to_check, interfaces, subject) if interfaces else [])
        finish(module, problems, dict(nh._empty_facts(), **launched), command)
    problems = []
    if prefix is None:
        problems.append(diagnosis.problem(
            "NCCL_RUN_FAILED", "error", subject,
            "no %s in %s" % ("python" if launcher == "direct" else "torchrun or python", params["python_env"]),
            "install the PyTorch environment (pytorch_env role) or point python_env at it"))
    if not os.path.isfile(script):
        problems.append(diagnosis.problem(
            "NCCL_RUN_FAILED", "error", subject, "the all-reduce script %s does not exist (or is not a file)" % script,
            "install the PyTorch environment (pytorch_env role) or set script"))
    env_update = build_env(params)
    if launcher == "direct":
        env_update.update(nh.direct_env(params["node_rank"], params["nnodes"], params["rdzv_endpoint"]))
        if params["node_rank"] == 0 and not address_is_local(env_update["MASTER_ADDR"]):
            problems.append(diagnosis.problem(
                "NCCL_RUN_FAILED", "error", subject,
                "node_rank 0 hosts the store at %s, but %s is not an address of this node"
                % (params["rdzv_endpoint"], env_update["MASTER_ADDR"]),
                "give node_rank 0 to the node rdzv_endpoint names (the head), or use launcher torchrun"))
    if problems:
        finish(module, problems, dict(nh._empty_facts(), **launched), command)

    tmpdir = tempfile.mkdtemp(prefix="ddp-nccl-health-")
    try:
        output_path = os.path.join(tmpdir, "result.json")
        command = torch_command(output_path)
        rc, output, timed_out = run_bounded(module, command, env_update, tmpdir, params["timeout"])
        data = None
        if rc == 0 and not timed_out:
            try:
                with open(output_path) as handle:
                    data = json.load(handle)
            except (IOError, OSError, ValueError):
                data = None
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    problems, facts = nh.diagnose_torch_run(rc, output, data, subject, params["rdzv_endpoint"],
                                            timed_out=timed_out, launcher=launcher, **common)
    finish(module, problems, dict(facts, **launched), command, output)


if __name__ == "__main__":
    main()
