"""ddp_health.py (roles/node_health/files), the node command: run for real here, its exit codes, its Slurm calls,
and the module_utils list the role installs for it (vars/main.yml) against what it imports."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest
import yaml

from role_files import ROOT, load

ddp_health = load("node_health", "ddp_health.py")
PROGRAM = os.path.join(ROOT, "roles", "node_health", "files", "ddp_health.py")
MODULE_UTILS = os.path.join(ROOT, "plugins", "module_utils")
PREFIX = "ansible_collections.ddp.cluster.plugins.module_utils."


def run(tmp_path, settings, *args):
    path = tmp_path / "health.json"
    if settings is not None:
        path.write_text(settings if isinstance(settings, str) else json.dumps(settings))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "collections"))
    return subprocess.run([sys.executable, PROGRAM, "--config", str(path)] + list(args),
                          capture_output=True, text=True, env=env, timeout=120, check=False)


def test_this_machine_is_warn_exit_0(tmp_path):
    """No NVIDIA GPU and no RDMA device here: WARN (NO_GPU, NO_RDMA), keep the node."""
    proc = run(tmp_path, {})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("ddp-health: WARN on ") and first.endswith(": NO_GPU, NO_RDMA"), first
    report = json.loads(run(tmp_path, {}, "--json").stdout)
    assert report["verdict"] == "WARN" and report["exit_code"] == 0 and report["elapsed_s"] < 50
    assert report["checks"] == {"gpu": True, "roce": True}


def test_missing_settings_file_takes_the_defaults(tmp_path):
    assert run(tmp_path, None).returncode == 0


def test_an_error_is_fail_exit_1(tmp_path):
    proc = run(tmp_path, {"roce": {"gloo_socket_ifname": "nosuch0"}})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ddp-health: FAIL on ") and "[IFNAME_NOT_FOUND] error GLOO_SOCKET_IFNAME" in proc.stdout


@pytest.mark.parametrize("settings, text", [
    ("{not json", "is not JSON"),
    ({"deadline_s": 120}, "deadline_s must be a number of seconds in [1, 55], got 120"),
    ({"gpu": {"expected_gpu": 4}}, "gpu.expected_gpu is not an option"),
])
def test_bad_settings_are_unknown_exit_2(tmp_path, settings, text):
    proc = run(tmp_path, settings)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "UNKNOWN" in proc.stdout and "[HEALTH_CONFIG]" in proc.stdout and text in proc.stdout


class SlurmRunner(object):
    """The real CommandRunner for the checks; sinfo, squeue and scontrol answered as Slurm 22.05 does: a recorded
    sinfo output, two jobs running on the node, of which 4243 was submitted with --no-requeue."""

    SLURM = ("/usr/bin/sinfo", "/usr/bin/scontrol", "/usr/bin/squeue")

    def __init__(self, deadline_s, sinfo):
        self.real = ddp_health.CommandRunner(deadline_s)
        self.sinfo, self.calls = sinfo, []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return "/usr/bin/" + name if "/usr/bin/" + name in self.SLURM else self.real.get_bin_path(name)

    def run_command(self, args, environ_update=None, **kwargs):
        if args[0] in self.SLURM:
            self.calls.append(list(args))
            if args[0].endswith("sinfo"):
                return 0, self.sinfo, ""
            if args[0].endswith("squeue"):
                return 0, "4242\n4243\n", ""
            if args[1:] == ["requeue", "4243"]:
                return 1, "", "Requested operation is presently disabled for job 4243\n"
            return 0, "", ""
        return self.real.run_command(args, environ_update=environ_update)


@pytest.mark.parametrize("ifname, sinfo, exit_code, scontrol", [
    ("nosuch0", "ddp-node1|idle|none\n", 1,
     ["/usr/bin/scontrol", "update", "NodeName=ddp-node1", "State=DRAIN", "Reason=ddp-health:IFNAME_NOT_FOUND"]),
    (None, "ddp-node1|drained|ddp-health:IFNAME_NOT_FOUND\n", 0,
     ["/usr/bin/scontrol", "update", "NodeName=ddp-node1", "State=RESUME"]),
    (None, "ddp-node1|drained|ddp:PAIRWISE_NODE\n", 0, None),
])
def test_slurm_mode(tmp_path, capsys, ifname, sinfo, exit_code, scontrol):
    path = tmp_path / "health.json"
    path.write_text(json.dumps({"roce": {"gloo_socket_ifname": ifname}}))
    runners = []

    def factory(deadline_s):
        runners.append(SlurmRunner(deadline_s, sinfo))
        return runners[-1]
    env = {"SLURMD_NODENAME": "ddp-node1"}  # what slurmd sets for its HealthCheckProgram
    assert ddp_health.main(["--config", str(path), "--slurm"], runner_factory=factory, environ=env) == exit_code
    # The checks get 45 of the 50 s; sinfo and scontrol get what is left of the 50 s, however long the checks took.
    assert len(runners) == 2 and runners[0].real.remaining() < 45.01 and 45.01 < runners[1].real.remaining() <= 50
    calls = runners[0].calls + runners[1].calls
    assert calls[0] == ["/usr/bin/sinfo", "-h", "-N", "-n", "ddp-node1", "-o", "%N|%T|%E"]
    assert calls[1:2] == ([scontrol] if scontrol else [])
    out = capsys.readouterr().out
    action = "none" if scontrol is None else scontrol[3].split("=")[1].lower()
    assert "\n  slurm: %s (" % action in out, out
    if action == "drain":
        # The jobs running on the node drained are requeued (a drain alone leaves them there).
        assert calls[2:] == [["/usr/bin/squeue", "-h", "-t", "RUNNING", "-w", "ddp-node1", "-o", "%A"],
                             ["/usr/bin/scontrol", "requeue", "4242"], ["/usr/bin/scontrol", "requeue", "4243"]]
        assert "\n  slurm: requeued the jobs running here: 4242; not requeued: job 4243: Requested operation is " \
            "presently disabled for job 4243" in out, out
    else:
        assert len(calls) == 1 + bool(scontrol) and "requeued" not in out


def _imports(path):
    with open(path) as handle:
        tree = ast.parse(handle.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (node.module + ".").startswith(PREFIX):
            # "gpu.health" from ...module_utils.gpu.health import x, or ...module_utils.gpu import health
            base = node.module[len(PREFIX):]
            if base and os.path.isfile(_path(base)):
                found.add(base)
            else:
                found.update((base + "." if base else "") + alias.name for alias in node.names)
    return found


def _path(name):
    return os.path.join(MODULE_UTILS, *name.split(".")) + ".py"


def test_the_role_installs_every_module_util_the_program_imports():
    wanted, todo = set(), _imports(PROGRAM)
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo |= _imports(_path(name))
    with open(os.path.join(ROOT, "roles", "node_health", "vars", "main.yml")) as handle:
        installed = yaml.safe_load(handle)["__node_health_module_utils"]
    assert sorted(installed) == sorted(name.replace(".", "/") + ".py" for name in wanted)


def test_the_packed_library_unpacks_as_the_role_wants():
    """The role packs these files on the controller and unpacks them on a node with mode u=rwX,go=rX: its archive
    names members from plugins/module_utils only when a file lies directly in it (their common folder; the role
    checks arcroot too), and X would keep an execute bit, which the role's wanted 0644 would then see as a change
    on every run."""
    with open(os.path.join(ROOT, "roles", "node_health", "vars", "main.yml")) as handle:
        installed = yaml.safe_load(handle)["__node_health_module_utils"]
    assert [name for name in installed if "/" not in name]
    executable = [name for name in installed if os.stat(os.path.join(MODULE_UTILS, name)).st_mode & 0o111]
    assert executable == []


def test_a_crash_exits_2_never_1(tmp_path, capsys, monkeypatch):
    """Exit 1 means "remove the node": a bug of the program itself must not say that."""
    def boom(*_args, **_kwargs):
        raise RuntimeError("broken install")
    monkeypatch.setattr(ddp_health.node_check, "quick_check", boom)
    path = tmp_path / "health.json"
    path.write_text("{}")
    assert ddp_health.main(["--config", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["verdict"] == "UNKNOWN" and report["errors"] == ["HEALTH_CHECK_CRASHED"]
    assert "RuntimeError: broken install" in captured.err  # the traceback


def test_slurm_mode_says_why_a_failing_node_was_not_drained(tmp_path, capsys):
    path = tmp_path / "health.json"
    path.write_text(json.dumps({"roce": {"gloo_socket_ifname": "nosuch0"}}))
    code = ddp_health.main(["--config", str(path), "--slurm", "--node", "other-name"],
                           runner_factory=lambda deadline_s: SlurmRunner(deadline_s, "ddp-node1|idle|none\n"))
    assert code == 1
    assert "ddp-health: other-name FAILS but was not drained: other-name is not a node sinfo lists" in \
        capsys.readouterr().err


FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures")


def test_diagnose_reads_a_text_and_gives_the_verdict_and_exit_code(tmp_path):
    """``--diagnose`` runs the text readers (scontrol, a training log) instead of the node checks, one verdict."""
    scontrol = os.path.join(FIXTURES, "slurm", "scontrol_show_node_IDLE+DRAIN_gres-gpu-count-lower__awsome-distributed-ai-195.txt")
    proc = run(tmp_path, {}, "--diagnose", scontrol, "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["verdict"] == "FAIL" and report["errors"] == ["SLURM_GRES_MISMATCH"]
    assert report["inputs"] == [{"file": scontrol, "kind": "scontrol", "verdict": "FAIL"}]
    log = os.path.join(FIXTURES, "runtime", "torch_watchdog_timeout_ALLREDUCE_SeqNum1580_8ranks__LlamaFactory-7396.txt")
    proc = run(tmp_path, {}, "--diagnose", log, "--context", '{"world_size": 8}')
    assert proc.returncode == 1 and "[TORCH_NCCL_WATCHDOG_TIMEOUT] error" in proc.stdout, proc.stdout + proc.stderr


def test_diagnose_of_a_healthy_output_and_of_stdin(tmp_path, capsys):
    ibstat = os.path.join(FIXTURES, "rdma", "ibstat_2xConnectX3-mlx4_FDR56_all-Active__Heioy-Books.txt")
    assert ddp_health.main(["--config", str(tmp_path / "absent.json"), "--diagnose", ibstat]) == 0
    assert capsys.readouterr().out.startswith("ddp-health: PASS on ")
    args = ddp_health.parse_args(["--diagnose", "-", "--kind", "sinfo"])
    report = ddp_health.diagnose_files(args, "n1", 0.0, lambda: 0.0,
                                       stdin=__import__("io").StringIO("n1|down*|Not responding\n"))
    assert report["verdict"] == "FAIL" and report["errors"] == ["SLURM_NODE_NOT_RESPONDING"]
    bad = ddp_health.parse_args(["--diagnose", ibstat, "--context", "[1]"])
    assert ddp_health.diagnose_files(bad, "n1", 0.0, lambda: 0.0)["verdict"] == "UNKNOWN"


def _prom(path):
    """{(name, frozenset of label pairs): value} of an exposition file (the lines that are not comments)."""
    out = {}
    for line in path.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        series, value = line.rsplit(" ", 1)
        name, _sep, labels = series.partition("{")
        pairs = frozenset(tuple(item.split("=", 1)) for item in labels.rstrip("}").split(",") if item)
        out[(name, frozenset((k, v.strip('"')) for k, v in pairs))] = float(value)
    return out


def test_slurm_mode_writes_the_verdict_and_the_drain_as_metrics(tmp_path, capsys):
    """As HealthCheckProgram, a failing node is drained and its metrics say so: unhealthy, the code, drained by us;
    the files are whole (written beside and renamed) and 0644, and no temporary file is left."""
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    path = tmp_path / "health.json"
    path.write_text(json.dumps({"roce": {"gloo_socket_ifname": "nosuch0"}, "metrics": {"textfile_dir": str(textfile)}}))
    env = {"SLURMD_NODENAME": "ddp-node1"}
    assert ddp_health.main(["--config", str(path), "--slurm"], environ=env, wall_clock=lambda: 1700000000.5,
                           runner_factory=lambda s: SlurmRunner(s, "ddp-node1|idle|none\n")) == 1
    health = _prom(textfile / "ddp_health.prom")
    src = ("source", "ddp-health")
    assert health[("ddp_health_healthy", frozenset([src]))] == 0
    assert health[("ddp_health_verdict", frozenset([src, ("verdict", "FAIL")]))] == 1
    assert health[("ddp_health_verdict", frozenset([src, ("verdict", "PASS")]))] == 0
    assert health[("ddp_health_problem", frozenset([src, ("code", "IFNAME_NOT_FOUND"), ("severity", "error")]))] == 1
    assert health[("ddp_health_last_run_timestamp_seconds", frozenset([src]))] == 1700000000.5
    drain = _prom(textfile / "ddp_slurm_drain.prom")
    assert drain == {("ddp_health_slurm_drained", frozenset([("reason", "ddp-health:IFNAME_NOT_FOUND")])): 1}
    assert sorted(p.name for p in textfile.iterdir()) == ["ddp_health.prom", "ddp_slurm_drain.prom"]
    assert (textfile / "ddp_health.prom").stat().st_mode & 0o777 == 0o644
    capsys.readouterr()


def test_record_writes_the_health_stages_verdict_and_exits_0(tmp_path):
    """ddp-health --record (the health stage, per node): no check runs; the verdict and codes as given, tier-labelled."""
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    proc = run(tmp_path, {"metrics": {"textfile_dir": str(textfile)}}, "--record", "FAIL", "--errors", "BURNIN_SLOW",
               "--warnings", "NO_GPU,NO_RDMA", "--tier", "burnin", "--node", "ddp-node2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stage = _prom(textfile / "ddp_health_stage.prom")
    base = [("source", "health-stage"), ("tier", "burnin")]
    assert stage[("ddp_health_healthy", frozenset(base))] == 0
    assert stage[("ddp_health_problem", frozenset(base + [("code", "BURNIN_SLOW"), ("severity", "error")]))] == 1
    assert stage[("ddp_health_problem", frozenset(base + [("code", "NO_RDMA"), ("severity", "warning")]))] == 1
    assert not (textfile / "ddp_health.prom").exists()


def test_no_textfile_folder_writes_nothing_and_says_so(tmp_path):
    proc = run(tmp_path, {"metrics": {"textfile_dir": str(tmp_path / "missing")}})
    assert proc.returncode == 0 and "metrics not written" in proc.stderr and "is not a folder" in proc.stderr
    assert not (tmp_path / "missing").exists()


def test_a_planted_link_in_the_textfile_folder_is_replaced_not_followed(tmp_path):
    """The folder may belong to the exporter's user: the program, as root, never writes through a link there."""
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    target = tmp_path / "victim"
    target.write_text("keep")
    (textfile / "ddp_health.prom").symlink_to(target)
    assert run(tmp_path, {"metrics": {"textfile_dir": str(textfile)}}).returncode == 0
    assert target.read_text() == "keep" and not (textfile / "ddp_health.prom").is_symlink()
