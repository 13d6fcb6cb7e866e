# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which of the given environment folders a running process still uses; run by ddp.cluster.pytorch_env as root.

    ddp_env_users.py DIR [DIR...]     # prints {"DIR": [pid, ...], ...} as JSON; exit 0

A process uses a folder when a file under it is mapped into the process (/proc/PID/maps: the interpreter's shared
libraries, torch's .so files), its command line names a path under it (/proc/PID/cmdline), or its environment has
VIRTUAL_ENV set to it (/proc/PID/environ: ddp-env sets it for every job it starts, to the resolved folder). The role
removes an old stack's folder only when this lists no process for it. A process that ends while it is read is
skipped; one whose files cannot be read (another user's, without root or CAP_SYS_PTRACE) counts as a user of every
folder, so nothing is removed on a guess. This script's own process (whose command line names the folders) is not a
user.
"""
from __future__ import annotations

import json
import os
import sys


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


def users(dirs, proc_root="/proc"):
    """{dir: [pid, ...]} for each folder of ``dirs`` (absolute, without a trailing slash), pids sorted.

    :param proc_root: where the process table is (a test gives its own tree).
    """
    dirs = [d.rstrip("/") for d in dirs]
    found = {d: [] for d in dirs}
    me = str(os.getpid())
    for name in sorted(os.listdir(proc_root), key=lambda n: (len(n), n)):
        if not name.isdigit() or name == me:
            continue
        base = os.path.join(proc_root, name)
        try:
            maps = _read(os.path.join(base, "maps"))
            cmdline = _read(os.path.join(base, "cmdline")).split(b"\0")
            environ = _read(os.path.join(base, "environ")).split(b"\0")
        except FileNotFoundError:
            continue  # the process ended meanwhile
        except OSError:
            for d in dirs:
                found[d].append(int(name))
            continue
        for d in dirs:
            prefix = d.encode() + b"/"
            if prefix in maps or any(arg.startswith(prefix) or arg == d.encode() for arg in cmdline) \
                    or b"VIRTUAL_ENV=" + d.encode() in environ:
                found[d].append(int(name))
    return found


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or any(not os.path.isabs(d) for d in argv):
        sys.stderr.write("usage: ddp_env_users.py DIR [DIR...] (absolute paths)\n")
        return 2
    print(json.dumps(users(argv), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
