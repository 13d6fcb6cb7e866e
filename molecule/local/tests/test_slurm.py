"""Slurm on the Molecule nodes (ddp_scheduler: slurm): daemons, one munge key, one slurm.conf, jobs as the cluster user."""
from __future__ import annotations

import json
import re

import testinfra

from nodes import TESTINFRA_HOSTS

testinfra_hosts = TESTINFRA_HOSTS  # nodes.py: both nodes over SSH
CONTROLLER = "ddp-mol1"
NODES = ("ddp-mol1", "ddp-mol2")

# A user's own training script: init_process_group from torchrun's environment, one line per rank.
HELLO = """import os, socket
import torch.distributed as dist
dist.init_process_group("gloo")
print("HELLO rank=%d world_size=%d local_rank=%s host=%s"
      % (dist.get_rank(), dist.get_world_size(), os.environ["LOCAL_RANK"], socket.gethostname()), flush=True)
dist.barrier()
dist.destroy_process_group()
"""


def node(name):
    return testinfra.get_host("podman://" + name)


def test_daemons_active(host):
    assert host.service("munge").is_running and host.service("munge").is_enabled
    assert host.service("slurmd").is_running and host.service("slurmd").is_enabled
    ctld = host.service("slurmctld")
    if host.check_output("hostname") == CONTROLLER:
        assert ctld.is_running and ctld.is_enabled
    else:
        assert not ctld.is_running


def test_ids_are_the_clusters(host):
    assert host.user("slurm").uid == 64030 and host.group("slurm").gid == 64030
    assert host.user("munge").uid == 950 and host.group("munge").gid == 950
    assert host.user("ddp").uid == 2000 and host.group("ddp").gid == 2000


def test_one_munge_key_mode_0400(host):
    key = host.file("/etc/munge/munge.key")
    assert key.user == "munge" and key.group == "munge" and key.mode == 0o400
    assert host.run("sha256sum /etc/munge/munge.key").stdout.split()[0] == \
        node(CONTROLLER).run("sha256sum /etc/munge/munge.key").stdout.split()[0]


def test_munge_credential_from_the_controller_decodes_here(host):
    cred = node(CONTROLLER).check_output("munge -n")
    assert host.run("echo %s | unmunge", cred).rc == 0


def test_same_slurm_conf_everywhere(host):
    mine = host.file("/etc/slurm/slurm.conf")
    assert mine.mode == 0o644
    assert mine.sha256sum == node(CONTROLLER).file("/etc/slurm/slurm.conf").sha256sum
    text = mine.content_string
    for name in NODES:
        assert re.search(r"^NodeName=%s CPUs=\d+ .*RealMemory=\d+" % name, text, re.M), name
    # Containers cannot delegate cgroups to slurmd: the documented fallback.
    assert "ProctrackType=proctrack/linuxproc" in text and "TaskPlugin=task/none" in text
    assert "PropagateResourceLimitsExcept=MEMLOCK" in text
    assert "SlurmctldHost=%s" % CONTROLLER in text


def test_every_node_idle(host):
    out = host.check_output("sinfo -h -N -o '%N %T'")
    states = dict(line.split() for line in out.splitlines())
    assert states == {n: "idle" for n in NODES}


def test_firewall_has_the_slurm_ports(host):
    zone = host.check_output("firewall-cmd --info-zone=ddp-cluster")
    assert "6818/tcp" in zone and "62000-63999/tcp" in zone
    assert ("6817/tcp" in zone) == (host.check_output("hostname") == CONTROLLER)


def test_srun_on_both_nodes_as_the_cluster_user(host):
    out = host.run("sudo -u ddp srun -N2 --time=1 hostname -s")
    assert out.rc == 0, out.stderr
    assert sorted(out.stdout.split()) == list(NODES)


def test_shipped_job_script_runs_a_users_torchrun_script(host):
    if host.check_output("hostname") != CONTROLLER:
        return
    for name in NODES:
        node(name).run("install -d -o ddp -g ddp /home/ddp/jobs && cat > /home/ddp/jobs/hello.py <<'EOF'\n%sEOF\n"
                       "chown ddp:ddp /home/ddp/jobs/hello.py" % HELLO)
    host.run("rm -f /home/ddp/jobs/hello.out")
    job = host.run("cd /home/ddp/jobs && sudo -u ddp sbatch --wait --parsable -N 2 --time=5 -o /home/ddp/jobs/hello.out "
                   "/opt/ddp/bin/ddp-torchrun.sbatch /home/ddp/jobs/hello.py")
    log = host.file("/home/ddp/jobs/hello.out").content_string
    assert job.rc == 0, job.stderr + log
    lines = [line for line in log.splitlines() if line.startswith("HELLO")]
    # WORLD_SIZE = nodes x processes per node (1 on these CPU nodes).
    assert len(lines) == 2, log
    assert all("world_size=2" in line for line in lines), log
    assert sorted(re.search(r"rank=(\d)", line).group(1) for line in lines) == ["0", "1"]
    assert sorted(re.search(r"host=(\S+)", line).group(1) for line in lines) == list(NODES)
    assert "rendezvous" in log and "c10d, id %s" % job.stdout.strip() in log


def test_benchmark_ran_through_slurm(host):
    files = [f for f in host.check_output("ls -1 /var/lib/ddp/bench/").split() if f.endswith(".json")]
    results = [json.loads(host.file("/var/lib/ddp/bench/" + f).content_string) for f in files]
    slurm_runs = [r for r in results if (r.get("scheduler") or {}).get("name") == "slurm"]
    assert slurm_runs, "no benchmark result from a Slurm job on this node"
    two_nodes = [r for r in slurm_runs if r["nnodes"] == 2]
    assert two_nodes and two_nodes[-1]["scheduler"]["job_id"].isdigit()
    assert two_nodes[-1]["world_size"] == 2


def test_training_script_and_shared_checkpoint_folder(host):
    assert host.file("/opt/ddp/bin/ddp_train.py").mode == 0o755
    conf = host.file("/etc/ddp/slurm-job.conf").content_string
    for line in ("DDP_SHARED_DIR=/srv/ddp-shared", "DDP_HANG_TIMEOUT=600", "DDP_MAX_REQUEUE=3", "DDP_ELASTIC=''"):
        assert line in conf.splitlines(), conf
    folder = host.file("/srv/ddp-shared/checkpoints")
    assert folder.is_directory and folder.mode == 0o1777 and folder.user == "root"
    # One storage on every node (the podman volume create.yml mounts): what this node writes, the other reads.
    name = host.check_output("hostname")
    other = [n for n in NODES if n != name][0]
    host.run_expect([0], "echo %s > /srv/ddp-shared/.molecule-shared-%s" % (name, name))
    try:
        assert node(other).file("/srv/ddp-shared/.molecule-shared-%s" % name).content_string.strip() == name
    finally:
        host.run("rm -f /srv/ddp-shared/.molecule-shared-%s" % name)
