#!/usr/bin/env bash
# Run `ansible-test sanity` on this clone.
# ansible-test wants the collection under a path ending in ansible_collections/ddp/cluster, and
# bootstraps pip in its venvs with a get-pip script from ci-files.testing.ansible.com. Where that
# host cannot be reached, a cached script that uses the interpreter's own ensurepip (then pip with
# the system CA bundle) does the same job: ansible-test looks for it first.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$(command -v python3)}
ansible_test=${ANSIBLE_TEST:-$(dirname "$python")/ansible-test}
pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

pip_version=$("$python" - <<'PY'
from ansible_test._internal.python_requirements import get_venv_packages
from ansible_test._internal.host_configs import NativePythonConfig
import sys
print(get_venv_packages(NativePythonConfig(version="%d.%d" % sys.version_info[:2], path=sys.executable))["pip"])
PY
)
cache=~/.ansible/test/cache
mkdir -p "$cache"
bundle=/etc/ssl/certs/ca-certificates.crt
cat > "$cache/get_pip_${pip_version//./_}.py" <<PY
# Offline stand-in for get-pip.py (written by ddp.cluster tests/sanity.sh).
import subprocess
import sys
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
cert = ["--cert", "$bundle"] if __import__("os").path.exists("$bundle") else []
subprocess.check_call([sys.executable, "-m", "pip", "install"] + cert + args)
PY

# ansible-test needs a real folder (not a symlink), outside this git tree, under ansible_collections/ddp/cluster:
# a copy of the files git knows about.
work=${SANITY_WORKDIR:-${TMPDIR:-/tmp}/ddp-cluster-sanity}
rm -rf "$work"
mkdir -p "$work/ansible_collections/ddp/cluster"
(cd "$here" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | \
  tar -xf - -C "$work/ansible_collections/ddp/cluster"
cd "$work/ansible_collections/ddp/cluster"
exec "$ansible_test" sanity --python "$pyver" --requirements --color no "$@"
