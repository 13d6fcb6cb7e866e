#!/usr/bin/env bash
# galaxy-importer (the checks Galaxy runs when a collection is uploaded) on the tarball built from this
# clone, without network or containers (settings and what runs: tests/collection/galaxy-importer.cfg).
# galaxy-importer pins versions (attrs, flake8 ...) that the project's venv must not get, so it has its
# own venv, made once per version under ~/.cache/ddp-cluster/galaxy-importer-<version>/.
# galaxy-importer points ANSIBLE_COLLECTIONS_PATH of its ansible-lint at the unpacked tarball alone; the
# declared dependencies (tests/collection/deps.py, and nothing else) are installed where ansible-core also
# looks, the importer venv's own site-packages/ansible_collections, replaced on every run.
# Every WARNING or ERROR line it prints fails this script.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=${GALAXY_IMPORTER_VERSION:-0.4.44}
python=${PYTHON:-$root/.venv/bin/python}
bin=$(dirname "$python")
venv=${XDG_CACHE_HOME:-$HOME/.cache}/ddp-cluster/galaxy-importer-$version

if [ ! -f "$venv/.stamp" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "galaxy-importer==$version"
  touch "$venv/.stamp"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-galaxy-importer.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/dist" "$work/deps" "$work/home"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export HOME="$work/home" ANSIBLE_LOCAL_TEMP="$work/tmp"
unset ANSIBLE_CONFIG
(cd "$work" && "$bin/ansible-galaxy" collection build "$root" --output-path "$work/dist" >/dev/null)
"$python" "$here/deps.py" "$work/deps" >/dev/null
rm -rf "$site/ansible_collections"
(cd "$work" && ANSIBLE_COLLECTIONS_PATH="$site" ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false "$bin/ansible-galaxy" collection install --offline \
  -p "$site" "$work"/deps/*.tar.gz >/dev/null)

tarball=$(ls "$work"/dist/ddp-cluster-*.tar.gz)
rc=0
(cd "$work" && PATH="$venv/bin:$PATH" GALAXY_IMPORTER_CONFIG="$here/galaxy-importer.cfg" \
  "$venv/bin/python" -m galaxy_importer.main "$tarball") > "$work/importer.log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ] || grep -qE '^(WARNING|ERROR)' "$work/importer.log"; then
  cat "$work/importer.log"
  echo "galaxy-importer $version: $(grep -cE '^(WARNING|ERROR)' "$work/importer.log") warning(s)/error(s), exit $rc" >&2
  exit 1
fi
echo "galaxy-importer $version: $(basename "$tarball") imported without warnings"
