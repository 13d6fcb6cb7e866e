#!/usr/bin/env bash
# Make a copy of a converged node into a machine of its own without any cluster state, as a node reinstalled from
# the site's OS image with its packages would be: new SSH host keys, no munge key, no Slurm configuration or state,
# no keys or known_hosts of the cluster user, no ddp.cluster files (/opt/ddp, /etc/ddp), no cluster firewall zone.
# Run inside the node by tests/integration/test_day2_cluster.py. With the argument keep-env, the training environment's
# stack folders (/opt/ddp/venv.d) stay, as in a site image that ships them: the run then installs no torch (for slow
# machines; make test runs it so, make day2-tests wipes them too).
set -euo pipefail
systemctl stop slurmd slurmctld munge 2>/dev/null || true
systemctl disable slurmctld 2>/dev/null || true
rm -f /etc/ssh/ssh_host_*
ssh-keygen -A
systemctl restart ssh
rm -f /etc/munge/munge.key /etc/slurm/slurm.conf /etc/slurm/gres.conf /etc/slurm/cgroup.conf
rm -rf /var/lib/slurm/slurmd /var/lib/slurm/slurmctld /var/log/slurm
rm -rf /home/ddp/.ssh /root/.ssh/known_hosts /etc/ddp
if [ "${1:-}" = keep-env ]; then
  find /opt/ddp -mindepth 1 -maxdepth 1 ! -name venv.d -exec rm -rf {} +
else
  rm -rf /opt/ddp
fi
rm -f /etc/firewalld/zones/ddp-cluster.xml /etc/firewalld/zones/ddp-cluster.xml.old
firewall-cmd --reload >/dev/null 2>&1 || true
