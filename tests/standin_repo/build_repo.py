"""Build the STAND-IN package repositories for the Molecule ``gpu_stack`` scenario.

Usage: python3 build_repo.py OUT --kernel-release "$(uname -r)" [--arch amd64] [--force]

Writes two flat apt repositories under OUT, signed with a throwaway GPG key made in a temporary
GNUPGHOME (Release with MD5Sum/SHA256 of Packages and Packages.gz, InRelease clearsigned,
Release.gpg detached, the public key ASCII-armored as ddp-standin.asc in each repository, and its
fingerprint, as ``gpg --show-keys --with-colons`` reports it, in ddp-standin.fpr beside it: the scenario
pins it in nvidia_repo_key_fingerprint, as a site pins NVIDIA's):

- OUT/nvidia/debian12/x86_64/  laid out like NVIDIA's CUDA repository
  (``deb [signed-by=...] <url>/debian12/x86_64/ /``), holding packages with NVIDIA's names and versions:
  the driver (open and proprietary flavours, two branches), nvidia-persistenced, two CUDA toolkits,
  cuDNN 8 and 9, NCCL builds for several CUDA versions.
- OUT/kernel/  one ``linux-headers-<release>`` for the kernel the containers share with the host:
  no archive has headers for it, so this stands for the distribution's headers package.

Every package's Description starts with "TEST STAND-IN for ddp.cluster Molecule". None holds an NVIDIA
binary: the programs are small shell scripts (nvcc prints the layout of the real ``nvcc --version``,
nvidia-persistenced sleeps), the headers are text with version defines, the rest is documentation.

Needs only the Python 3 standard library, dpkg-deb and gpg. OUT is rebuilt only when its inputs
(this file, the kernel release, the architecture) change; the directory itself is kept, so a
container that bind-mounts it sees the new content.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

DESCRIPTION_PREFIX = "TEST STAND-IN for ddp.cluster Molecule"
MAINTAINER = "ddp.cluster tests <ddp-cluster-tests@example.invalid>"
KEY_FILE = "ddp-standin.asc"
FPR_FILE = "ddp-standin.fpr"
KEY_UID = "ddp.cluster TEST STAND-IN repository (throwaway) <ddp-cluster-tests@example.invalid>"
# Release "Date:" (fixed, so the same inputs give the same Release file; apt refuses only future dates).
RELEASE_DATE = "Mon, 01 Sep 2025 00:00:00 UTC"
SOURCE_DATE_EPOCH = "1756684800"
STAMP = ".ddp-standin-inputs"
FORMAT_VERSION = "1"

DRIVER_VERSIONS = ["580.95.05-1", "590.44.01-1"]
# CUDA toolkit: package version -> the nvcc --version lines of that release.
CUDA_TOOLKITS = {
    "12.6": {
        "version": "12.6.3-1",
        "nvcc": "12.6.85",
        "copyright": "2005-2024",
        "built": "Tue_Oct_29_23:50:19_PDT_2024",
        "build": "cuda_12.6.r12.6/compiler.35059454_0",
    },
    "12.8": {
        "version": "12.8.1-1",
        "nvcc": "12.8.93",
        "copyright": "2005-2025",
        "built": "Fri_Feb_21_20:23:50_PST_2025",
        "build": "cuda_12.8.r12.8/compiler.35583870_0",
    },
}
CUDNN9_VERSIONS = ["9.10.2.21-1", "9.20.0.48-1"]
CUDNN8_VERSIONS = ["8.9.2.26-1+cuda12.1"]
NCCL_VERSIONS = ["2.29.3-1+cuda12.6", "2.29.3-1+cuda13.0", "2.30.7-1+cuda13.0", "2.18.3-1+cuda12.1"]

SERVICE = """[Unit]
Description=NVIDIA Persistence Daemon (TEST STAND-IN for ddp.cluster Molecule)

[Service]
Type=simple
ExecStart=/usr/bin/nvidia-persistenced

[Install]
WantedBy=multi-user.target
"""


class Package:
    """One binary package: control fields, files (path -> (text, mode)), symlinks, maintainer scripts."""

    def __init__(self, name, version, summary, depends=None, conflicts=None, section="non-free/libs"):
        self.name = name
        self.version = version
        self.summary = summary
        self.depends = depends or []
        self.conflicts = conflicts or []
        self.section = section
        self.files = {}
        self.links = {}
        self.scripts = {}

    def add(self, path, text, mode=0o644):
        self.files[path.lstrip("/")] = (text, mode)
        return self

    def link(self, path, target):
        self.links[path.lstrip("/")] = target
        return self

    def description(self):
        return (
            "%s: %s\n"
            " Stand-in with the name and version of a package of NVIDIA's CUDA repository (or of the\n"
            " distribution), built by tests/standin_repo/build_repo.py for the gpu_stack Molecule\n"
            " scenario of ddp.cluster. It holds no NVIDIA software.\n"
        ) % (DESCRIPTION_PREFIX, self.summary)


def _doc(pkg):
    pkg.add(
        "/usr/share/doc/%s/README.standin" % pkg.name,
        "%s %s: %s.\nNot NVIDIA software: a test fixture of ddp.cluster (molecule/gpu_stack).\n"
        % (pkg.name, pkg.version, DESCRIPTION_PREFIX),
    )
    return pkg


def _upstream(version):
    return version.split("-", 1)[0]


def driver_packages():
    pkgs = []
    for ver in DRIVER_VERSIONS:
        up = _upstream(ver)
        pkgs.append(Package("nvidia-open", ver, "NVIDIA driver metapackage, open kernel modules %s" % up,
                            depends=["nvidia-kernel-open-dkms (= %s)" % ver, "nvidia-persistenced (= %s)" % ver]))
        pkgs.append(Package("nvidia-kernel-open-dkms", ver, "NVIDIA open kernel module sources for DKMS %s" % up,
                            depends=["dkms"], conflicts=["nvidia-kernel-dkms"], section="non-free/kernel"))
        pkgs.append(Package("cuda-drivers", ver, "NVIDIA driver metapackage, proprietary kernel modules %s" % up,
                            depends=["nvidia-kernel-dkms (= %s)" % ver, "nvidia-persistenced (= %s)" % ver]))
        pkgs.append(Package("nvidia-kernel-dkms", ver, "NVIDIA proprietary kernel module sources for DKMS %s" % up,
                            depends=["dkms"], conflicts=["nvidia-kernel-open-dkms"], section="non-free/kernel"))
        persistenced = Package("nvidia-persistenced", ver, "NVIDIA persistence daemon %s" % up, section="non-free/utils")
        persistenced.add(
            "/usr/bin/nvidia-persistenced",
            "#!/bin/sh\n# %s: not NVIDIA's daemon.\n"
            "echo \"nvidia-persistenced %s: %s (not NVIDIA's daemon); sleeping\"\n"
            "exec sleep infinity\n" % (DESCRIPTION_PREFIX, up, DESCRIPTION_PREFIX),
            0o755,
        )
        persistenced.add("/lib/systemd/system/nvidia-persistenced.service", SERVICE)
        pkgs.append(persistenced)
    return pkgs


def cuda_packages():
    pkgs = []
    for cuda, data in sorted(CUDA_TOOLKITS.items()):
        major, minor = cuda.split(".")
        home = "/usr/local/cuda-%s" % cuda
        prio = str(int(major) * 10 + int(minor)) if int(minor) < 10 else major + minor
        pkg = Package("cuda-toolkit-%s-%s" % (major, minor), data["version"], "CUDA Toolkit %s meta-package" % cuda,
                      section="multiverse/devel")
        pkg.add(
            home + "/bin/nvcc",
            "#!/bin/sh\n# %s: prints the layout of the real `nvcc --version`, compiles nothing.\n"
            "cat <<'EOF'\n"
            "nvcc: NVIDIA (R) Cuda compiler driver\n"
            "Copyright (c) %s NVIDIA Corporation\n"
            "Built on %s\n"
            "Cuda compilation tools, release %s, V%s\n"
            "Build %s\n"
            "EOF\n" % (DESCRIPTION_PREFIX, data["copyright"], data["built"], cuda, data["nvcc"], data["build"]),
            0o755,
        )
        pkg.add(home + "/version.json", '{\n   "cuda" : {\n      "name" : "CUDA SDK",\n      "version" : "%s"\n   }\n}\n'
                % _upstream(data["version"]))
        # What NVIDIA's cuda-toolkit-X-Y-config-common does: /usr/local/cuda and /usr/local/cuda-X are alternatives.
        pkg.scripts["postinst"] = (
            "#!/bin/sh\nset -e\n"
            "if [ \"$1\" = configure ]; then\n"
            "    update-alternatives --install /usr/local/cuda cuda %s %s\n"
            "    update-alternatives --install /usr/local/cuda-%s cuda-%s %s %s\n"
            "fi\n" % (home, prio, major, major, home, prio)
        )
        pkg.scripts["prerm"] = (
            "#!/bin/sh\nset -e\n"
            "if [ \"$1\" = remove ] || [ \"$1\" = deconfigure ]; then\n"
            "    update-alternatives --remove cuda %s\n"
            "    update-alternatives --remove cuda-%s %s\n"
            "fi\n" % (home, major, home)
        )
        pkgs.append(pkg)
    return pkgs


def _cudnn_header(version, major):
    parts = _upstream(version).split(".")
    return ("/* %s: not NVIDIA's header. */\n#define CUDNN_MAJOR %s\n#define CUDNN_MINOR %s\n#define CUDNN_PATCHLEVEL %s\n"
            % (DESCRIPTION_PREFIX, parts[0], parts[1], parts[2]))


def cudnn_packages():
    pkgs = []
    for ver in CUDNN9_VERSIONS:
        up = _upstream(ver)
        pkgs.append(Package("libcudnn9-cuda-12", ver, "cuDNN %s runtime libraries for CUDA 12" % up))
        dev = Package("libcudnn9-dev-cuda-12", ver, "cuDNN %s development files for CUDA 12" % up,
                      depends=["libcudnn9-cuda-12 (= %s)" % ver], section="non-free/libdevel")
        dev.add("/usr/include/x86_64-linux-gnu/cudnn_version_v9.h", _cudnn_header(ver, 9))
        pkgs.append(dev)
    for ver in CUDNN8_VERSIONS:
        up = _upstream(ver)
        pkgs.append(Package("libcudnn8", ver, "cuDNN %s runtime libraries" % up))
        dev = Package("libcudnn8-dev", ver, "cuDNN %s development files" % up,
                      depends=["libcudnn8 (= %s)" % ver], section="non-free/libdevel")
        dev.add("/usr/include/x86_64-linux-gnu/cudnn_version_v8.h", _cudnn_header(ver, 8))
        pkgs.append(dev)
    return pkgs


def nccl_packages():
    pkgs = []
    for ver in NCCL_VERSIONS:
        up = _upstream(ver)
        cuda = ver.rsplit("+cuda", 1)[1]
        pkgs.append(Package("libnccl2", ver, "NCCL %s runtime library built for CUDA %s" % (up, cuda)))
        major, minor, patch = up.split(".")
        dev = Package("libnccl-dev", ver, "NCCL %s development files built for CUDA %s" % (up, cuda),
                      depends=["libnccl2 (= %s)" % ver], section="non-free/libdevel")
        dev.add("/usr/include/nccl.h",
                "/* %s: not NVIDIA's header (NCCL %s for CUDA %s). */\n#define NCCL_MAJOR %s\n#define NCCL_MINOR %s\n"
                "#define NCCL_PATCH %s\n#define NCCL_VERSION_CODE %d\n"
                % (DESCRIPTION_PREFIX, up, cuda, major, minor, patch,
                   int(major) * 10000 + int(minor) * 100 + int(patch)))
        pkgs.append(dev)
    return pkgs


def kernel_headers_package(release):
    name = "linux-headers-%s" % release
    if not re.match(r"^[a-z0-9][a-z0-9+.-]+$", name):
        raise SystemExit("build_repo: %r is not a valid Debian package name (kernel release %r)" % (name, release))
    match = re.match(r"^\d+(\.\d+)*", release)
    version = "%s-1~ddpstandin" % (match.group(0) if match else "0")
    src = "/usr/src/%s" % name
    pkg = Package(name, version, "stand-in for the distribution's header files for Linux %s" % release,
                  section="kernel")
    pkg.add(src + "/README.standin",
            "Header files of Linux %s are not here: the test containers share the host's kernel, whose\n"
            "headers no archive has. %s.\n" % (release, DESCRIPTION_PREFIX))
    pkg.link("/lib/modules/%s/build" % release, src)
    return pkg


def _run(argv, env=None, **kwargs):
    try:
        return subprocess.run(argv, env=env, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)
    except subprocess.CalledProcessError as exc:
        raise SystemExit("build_repo: %s failed (rc %s):\n%s%s" % (
            " ".join(argv), exc.returncode, exc.stdout.decode(errors="replace"), exc.stderr.decode(errors="replace")))


def build_deb(pkg, arch, workdir, outdir):
    root = os.path.join(workdir, "%s_%s" % (pkg.name, pkg.version))
    os.makedirs(os.path.join(root, "DEBIAN"))
    _doc(pkg)
    size = 0
    for path, (text, mode) in sorted(pkg.files.items()):
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(full, mode)
        size += len(text.encode())
    for path, target in sorted(pkg.links.items()):
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        os.symlink(target, full)
    fields = [
        ("Package", pkg.name),
        ("Version", pkg.version),
        ("Architecture", arch),
        ("Maintainer", MAINTAINER),
        ("Installed-Size", str(max(1, (size + 1023) // 1024 + len(pkg.files)))),
    ]
    if pkg.depends:
        fields.append(("Depends", ", ".join(pkg.depends)))
    if pkg.conflicts:
        fields.append(("Conflicts", ", ".join(pkg.conflicts)))
    fields += [("Section", pkg.section), ("Priority", "optional")]
    control = "".join("%s: %s\n" % f for f in fields) + "Description: " + pkg.description()
    with open(os.path.join(root, "DEBIAN", "control"), "w", encoding="utf-8") as fh:
        fh.write(control)
    for script, text in pkg.scripts.items():
        full = os.path.join(root, "DEBIAN", script)
        with open(full, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(full, 0o755)
    for dirpath, dirnames, _files in os.walk(root):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    os.chmod(root, 0o755)
    filename = "%s_%s_%s.deb" % (pkg.name, pkg.version.replace(":", "%3a"), arch)
    deb = os.path.join(outdir, filename)
    env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH)
    _run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z6", "--build", root, deb], env=env)
    with open(deb, "rb") as fh:
        data = fh.read()
    stanza = control.replace("Description:", "Filename: ./%s\nSize: %d\nMD5sum: %s\nSHA1: %s\nSHA256: %s\nDescription:" % (
        filename, len(data), hashlib.md5(data).hexdigest(), hashlib.sha1(data).hexdigest(),  # nosec - apt index fields
        hashlib.sha256(data).hexdigest()), 1)
    return stanza


def write_repo(repo_dir, packages, arch, label, workdir, gpg):
    os.makedirs(repo_dir, exist_ok=True)
    stanzas = [build_deb(pkg, arch, workdir, repo_dir) for pkg in packages]
    index = "\n".join(stanzas).encode()
    with open(os.path.join(repo_dir, "Packages"), "wb") as fh:
        fh.write(index)
    gz = gzip.compress(index, 9, mtime=0) if sys.version_info >= (3, 8) else gzip.compress(index, 9)
    with open(os.path.join(repo_dir, "Packages.gz"), "wb") as fh:
        fh.write(gz)
    release = [
        "Origin: ddp.cluster TEST STAND-IN",
        "Label: %s" % label,
        "Architectures: %s" % arch,
        "Date: %s" % RELEASE_DATE,
        "Description: %s repository (throwaway key, no NVIDIA software)" % DESCRIPTION_PREFIX,
    ]
    for field, algo in (("MD5Sum", hashlib.md5), ("SHA256", hashlib.sha256)):
        release.append("%s:" % field)
        for name, blob in (("Packages", index), ("Packages.gz", gz)):
            release.append(" %s %d %s" % (algo(blob).hexdigest(), len(blob), name))
    release_path = os.path.join(repo_dir, "Release")
    with open(release_path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(release) + "\n")
    gpg(["--clearsign", "--output", os.path.join(repo_dir, "InRelease"), release_path])
    gpg(["--armor", "--detach-sign", "--output", os.path.join(repo_dir, "Release.gpg"), release_path])


def primary_fingerprints(colons):
    """The fpr record that follows each pub record of ``gpg --with-colons`` output (gpg's doc/DETAILS)."""
    out, after_pub = [], False
    for line in colons.splitlines():
        fields = line.split(":")
        if fields[0] == "pub":
            after_pub = True
        elif fields[0] == "fpr" and after_pub:
            out.append(fields[9])
            after_pub = False
        elif fields[0] in ("sub", "uid"):
            after_pub = False
    return out


def inputs_digest(kernel_release, arch):
    with open(os.path.abspath(__file__), "rb") as fh:
        me = fh.read()
    return hashlib.sha256(b"\0".join([FORMAT_VERSION.encode(), me, kernel_release.encode(), arch.encode()])).hexdigest()


def expected_files(out):
    nvidia = os.path.join(out, "nvidia", "debian12", "x86_64")
    kernel = os.path.join(out, "kernel")
    return [os.path.join(d, f) for d in (nvidia, kernel) for f in ("InRelease", "Release", "Packages.gz", KEY_FILE, FPR_FILE)]


def build(out, kernel_release, arch):
    tmp = tempfile.mkdtemp(prefix="ddp-standin-")
    gnupghome = os.path.join(tmp, "gnupg")
    os.mkdir(gnupghome, 0o700)
    env = dict(os.environ, GNUPGHOME=gnupghome, LC_ALL="C")

    def gpg(args):
        return _run(["gpg", "--batch", "--yes", "--quiet", "--pinentry-mode", "loopback", "--passphrase", ""] + args, env=env)

    try:
        gpg(["--quick-generate-key", KEY_UID, "ed25519", "sign", "never"])
        key = gpg(["--armor", "--export"]).stdout
        key_file = os.path.join(tmp, KEY_FILE)
        with open(key_file, "wb") as fh:
            fh.write(key)
        fingerprints = primary_fingerprints(gpg(["--show-keys", "--with-colons", key_file]).stdout.decode())
        if len(fingerprints) != 1:
            raise SystemExit("build_repo: expected one primary key in the exported key, gpg shows %r" % (fingerprints,))
        # Empty OUT but keep the directory (a running repo container may bind-mount it).
        os.makedirs(out, exist_ok=True)
        for entry in os.listdir(out):
            path = os.path.join(out, entry)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        nvidia = os.path.join(out, "nvidia", "debian12", "x86_64")
        kernel = os.path.join(out, "kernel")
        packages = driver_packages() + cuda_packages() + cudnn_packages() + nccl_packages()
        write_repo(nvidia, packages, arch, "TEST STAND-IN of NVIDIA CUDA debian12/x86_64", os.path.join(tmp, "nvidia"), gpg)
        write_repo(kernel, [kernel_headers_package(kernel_release)], arch, "TEST STAND-IN of Debian kernel headers",
                   os.path.join(tmp, "kernel"), gpg)
        for repo in (nvidia, kernel):
            with open(os.path.join(repo, KEY_FILE), "wb") as fh:
                fh.write(key)
            with open(os.path.join(repo, FPR_FILE), "w", encoding="utf-8") as fh:
                fh.write(fingerprints[0] + "\n")
        return len(packages) + 1
    finally:
        subprocess.run(["gpgconf", "--kill", "all"], env=env, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("out", help="output directory (emptied and refilled when the inputs changed)")
    parser.add_argument("--kernel-release", required=True, help="uname -r of the kernel the test containers run on")
    parser.add_argument("--arch", default="amd64", help="Debian architecture of the packages (default amd64)")
    parser.add_argument("--force", action="store_true", help="rebuild even when the inputs did not change")
    args = parser.parse_args(argv)
    out = os.path.abspath(args.out)
    digest = inputs_digest(args.kernel_release, args.arch)
    stamp = os.path.join(out, STAMP)
    if not args.force and all(os.path.exists(p) for p in expected_files(out)):
        try:
            with open(stamp, encoding="utf-8") as fh:
                if fh.read().strip() == digest:
                    print("build_repo: %s is up to date" % out)
                    return 0
        except OSError:
            pass
    for tool in ("dpkg-deb", "gpg"):
        if shutil.which(tool) is None:
            raise SystemExit("build_repo: %s is needed (apt-get install %s)" % (tool, "dpkg" if tool == "dpkg-deb" else "gnupg"))
    count = build(out, args.kernel_release, args.arch)
    with open(stamp, "w", encoding="utf-8") as fh:
        fh.write(digest + "\n")
    print("build_repo: built %d packages into %s" % (count, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
