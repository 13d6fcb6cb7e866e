"""End state of molecule/rocky8_gpu: NVIDIA's repository, CUDA 12.6, cuDNN 9 and NCCL from it, locked."""


def test_repository_is_signed(host):
    repo = host.file("/etc/yum.repos.d/ddp-nvidia-cuda.repo")
    assert repo.exists
    assert "gpgcheck = 1" in repo.content_string
    assert "/rhel" in repo.content_string


def test_no_driver_was_installed(host):
    # nvidia_driver refused (KERNEL_DEVEL_UNAVAILABLE) before any change.
    assert not host.file("/etc/modprobe.d/ddp-blacklist-nouveau.conf").exists
    assert not host.package("kmod-nvidia-open-dkms").is_installed


def test_cuda_toolkit(host):
    assert host.package("cuda-toolkit-12-6").is_installed
    assert host.file("/usr/local/cuda").linked_to == "/usr/local/cuda-12.6"
    out = host.check_output("bash -lc 'nvcc --version'")
    assert "release 12.6" in out


def test_cudnn_and_nccl_locked(host):
    assert host.package("libcudnn9-cuda-12").version == "9.10.2.21"
    assert host.package("libnccl").version == "2.29.3"
    locks = host.check_output("dnf versionlock list")
    assert "libcudnn9-cuda-12" in locks
    assert "libnccl" in locks
