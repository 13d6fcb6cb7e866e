"""End state of the Molecule `gpu_stack` scenario: the GPU stack roles forced on a node without a GPU.

The packages come from the stand-in repository (tests/standin_repo/build_repo.py) served by the
ddp-gpu-repo container; it also holds newer versions (driver 590, CUDA 12.8, cuDNN 9.20, NCCL for other
CUDA builds) that the roles must not pick. The stack is torch 2.13.0 + CUDA 12.6 (converge.yml).
"""
from __future__ import annotations

import os

# The node over SSH with the ssh_config create.yml wrote (roles/local_cluster: the controller's key, known_hosts,
# host keys checked), as Ansible reaches it: one ssh command per check on a ControlMaster socket.
SSH_CONFIG = os.path.join(os.environ.get("MOLECULE_PROJECT_DIRECTORY", "."), ".cache", "local_cluster", "ssh", "ddp-gpu",
                          "config")
testinfra_hosts = ["ssh://ddp-gpu1?ssh_config=%s&controlpersist=120" % SSH_CONFIG]

REPO = "http://ddp-gpu-repo:8080/nvidia/debian12/x86_64/"
KEYRING = "/etc/apt/keyrings/ddp-nvidia-ddp-standin.asc"
DRIVER = "580.95.05-1"
CUDNN = "9.10.2.21-1"
NCCL = "2.29.3-1+cuda12.6"
STANDIN = "TEST STAND-IN for ddp.cluster Molecule"


def _installed(host, name):
    """Version of an installed package (held or not), or None."""
    cmd = host.run("dpkg-query -W -f '${db:Status-Abbrev} ${Version}' %s", name)
    # db:Status-Abbrev: desired state (i install, h hold, ...) then current state (i installed).
    if cmd.rc != 0 or cmd.stdout[1:2] != "i":
        return None
    return cmd.stdout.split()[-1]


def _holds(host):
    return set(host.check_output("apt-mark showhold").split())


def _lines(text):
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_nouveau_blacklist_file(host):
    conf = host.file("/etc/modprobe.d/ddp-blacklist-nouveau.conf")
    assert conf.exists and conf.is_file
    assert conf.user == "root" and conf.group == "root"
    assert conf.mode == 0o644
    assert _lines(conf.content_string) == ["blacklist nouveau", "options nouveau modeset=0"]


def test_initramfs_rebuilt_with_the_blacklist(host):
    # prepare.yml installed linux-image-cloud-amd64 (and built its initramfs) before the blacklist existed:
    # the file is in the image only if the driver role rebuilt it.
    images = host.check_output("ls -1 /boot/initrd.img-*").split()
    assert images, "no initramfs in /boot"
    for image in images:
        listing = host.check_output("lsinitramfs %s", image).split()
        assert "etc/modprobe.d/ddp-blacklist-nouveau.conf" in listing, image


def test_nvidia_apt_source_signed_by_its_key(host):
    source = host.file("/etc/apt/sources.list.d/ddp-nvidia.list")
    assert source.exists and source.mode == 0o644
    assert _lines(source.content_string) == ["deb [signed-by=%s] %s /" % (KEYRING, REPO)]
    key = host.file(KEYRING)
    assert key.exists and key.mode == 0o644 and key.user == "root"
    served = host.check_output(
        "python3 -c \"import urllib.request, sys; sys.stdout.write(urllib.request.urlopen('" + REPO
        + "ddp-standin.asc').read().decode())\"")
    assert key.content_string.strip() == served.strip()
    assert key.content_string.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")


def test_driver_branch_pinned(host):
    pref = host.file("/etc/apt/preferences.d/ddp-nvidia-driver")
    assert pref.exists and pref.mode == 0o644
    lines = _lines(pref.content_string)
    assert any(line.startswith("Package:") for line in lines)
    assert "Pin: version 580.*" in lines
    assert "Pin-Priority: 1001" in lines
    # The repository offers 590 too: the pin makes 580 the candidate, for each name family the globs cover.
    for name in ("nvidia-open", "cuda-drivers", "nvidia-kernel-dkms"):
        policy = host.check_output("apt-cache policy %s", name)
        assert "590.44.01-1" in policy, policy
        assert "Candidate: %s" % DRIVER in policy, policy


def test_open_driver_at_the_pinned_version(host):
    assert _installed(host, "nvidia-open") == DRIVER
    assert _installed(host, "nvidia-kernel-open-dkms") == DRIVER
    assert _installed(host, "nvidia-persistenced") == DRIVER
    # No GPU seen and branch 580 >= 560: the open flavour, not the proprietary one.
    assert _installed(host, "cuda-drivers") is None
    assert _installed(host, "nvidia-kernel-dkms") is None
    assert STANDIN in host.check_output("dpkg-query -W -f '${Description}' nvidia-open")


def test_driver_cudnn_nccl_held(host):
    holds = _holds(host)
    for name in ("nvidia-open", "nvidia-persistenced",
                 "libcudnn9-cuda-12", "libcudnn9-dev-cuda-12",
                 "libnccl2", "libnccl-dev"):
        assert name in holds, "%s is not held (holds: %s)" % (name, sorted(holds))


def test_real_dkms_and_kernel_headers(host):
    assert _installed(host, "dkms")
    assert STANDIN not in host.check_output("dpkg-query -W -f '${Description}' dkms")
    assert host.run("dkms --version").rc == 0
    uname_r = host.check_output("uname -r")
    assert _installed(host, "linux-headers-%s" % uname_r)


def test_headers_of_the_kernel_the_next_boot_starts(host):
    # The node's only kernel in /boot (the Debian cloud kernel of prepare.yml) is not the running one: the role
    # installs its real headers too, so DKMS builds the module for the kernel that boots next.
    kernels = host.check_output("ls /boot | sed -n 's/^vmlinuz-//p'").split()
    assert kernels
    newest = host.check_output("ls /boot | sed -n 's/^vmlinuz-//p' | sort -V | tail -n 1")
    assert _installed(host, "linux-headers-%s" % newest)
    assert STANDIN not in host.check_output("dpkg-query -W -f '${Description}' linux-headers-%s" % newest)


def test_persistenced_enabled(host):
    # The role starts the daemon only where the nvidia module is loaded (NVIDIA's daemon exits without it);
    # here no module can load, so it is enabled for the next boot and left stopped.
    service = host.service("nvidia-persistenced")
    assert service.is_enabled
    assert service.is_running == host.file("/sys/module/nvidia").exists


def test_reboot_required_recorded(host):
    # nvidia_driver_reboot is false: the role leaves Debian's marker instead of rebooting.
    assert host.file("/run/reboot-required").exists


def test_cuda_toolkit_12_6_is_the_default_cuda(host):
    assert _installed(host, "cuda-toolkit-12-6") == "12.6.3-1"
    assert _installed(host, "cuda-toolkit-12-8") is None
    assert host.check_output("readlink -f /usr/local/cuda") == "/usr/local/cuda-12.6"
    assert "Value: /usr/local/cuda-12.6" in host.check_output("update-alternatives --query cuda")


def test_nvcc_on_login_path_through_profile(host):
    profile = host.file("/etc/profile.d/ddp-cuda.sh")
    assert profile.exists and profile.mode == 0o644
    # Not on the PATH without the profile ...
    assert host.run("env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "
                    "bash --noprofile --norc -c 'command -v nvcc'").rc != 0
    # ... on it with the profile alone, and in a login shell.
    sourced = host.run("env -i PATH=/usr/bin:/bin bash --noprofile --norc -c '. /etc/profile.d/ddp-cuda.sh && nvcc --version'")
    assert sourced.rc == 0, sourced.stderr
    assert "release 12.6," in sourced.stdout
    login = host.run("bash -lc 'nvcc --version'")
    assert login.rc == 0, login.stderr
    assert "Cuda compilation tools, release 12.6, V12.6.85" in login.stdout


def test_cudnn_for_the_torch_build(host):
    assert _installed(host, "libcudnn9-cuda-12") == CUDNN
    assert _installed(host, "libcudnn9-dev-cuda-12") == CUDNN
    assert _installed(host, "libcudnn8") is None


def test_nccl_built_for_cuda_12_6(host):
    assert _installed(host, "libnccl2") == NCCL
    assert _installed(host, "libnccl-dev") == NCCL
