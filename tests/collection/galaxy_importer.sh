#!/usr/bin/env bash
# galaxy-importer (the checks Galaxy runs when a collection is uploaded) on the tarball built from this
# clone, without network or containers (settings and what runs: tests/collection/galaxy-importer.cfg).
# galaxy-importer pins versions (attrs, flake8 ...) that the project's venv must not get, so it has its
# own venv, made once per version under ~/.cache/ddp-cluster/galaxy-importer-<version>/.
# galaxy-importer points ANSIBLE_COLLECTIONS_PATH of its ansible-lint at the unpacked tarball alone; the
# declared dependencies (tests/collection/deps.py, and nothing else) are installed where ansible-core also
# looks, the importer venv's own site-packages/ansible_collections, replaced on every run.
# Every WARNING or ERROR line it prints fails this script.
# Its ansible-lint step is run here, not by galaxy-importer: galaxy-importer gives ansible-lint 180 s (a constant
# in galaxy_importer/loaders/collection.py), which the whole collection takes more than on 2 cores; the command,
# its environment and its reading of the output are galaxy-importer's own (every stdout line a warning, a stderr
# line starting with CRITICAL or ERROR an error), with a limit of ours (GALAXY_LINT_TIMEOUT, 900 s).
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

# galaxy-importer's ansible-lint step (run_ansible_lint = False in galaxy-importer.cfg): the tarball unpacked where
# galaxy-importer leaves it (<tmp>/ansible_collections/<namespace>/<name>), ansible-lint from its venv with its
# arguments.
lint_root="$work/lint/ansible_collections"
mkdir -p "$lint_root/ddp/cluster" "$work/lint-tmp"
tar -xzf "$tarball" -C "$lint_root/ddp/cluster"
lint_rc=0
(cd "$lint_root/ddp/cluster" && \
  timeout "${GALAXY_LINT_TIMEOUT:-900}" /usr/bin/env ANSIBLE_COLLECTIONS_PATH="$lint_root" \
    ANSIBLE_LOCAL_TEMP="$work/lint-tmp" XDG_CACHE_HOME="$work/lint-tmp" PATH="$venv/bin:$PATH" \
    ansible-lint --profile production --exclude tests/integration/ --exclude tests/unit/ --format=pep8 --nocolor \
    -x yaml,var-naming,avoid-dot-notation,import-task-no-when,single-entry-point,use-loop --offline) \
  > "$work/lint.out" 2> "$work/lint.err" || lint_rc=$?
{
  echo "Linting collection via ansible-lint $(NO_COLOR=1 "$venv/bin/ansible-lint" --nocolor --version 2>/dev/null | head -n 1) (outside galaxy-importer)"
  sed -e 's/^[[:space:]]*/WARNING: /' -e '/^WARNING: $/d' "$work/lint.out"
  grep -E '^(CRITICAL|ERROR)' "$work/lint.err" | sed 's/^/ERROR: /' || true
  if [ "$lint_rc" -eq 124 ]; then
    echo "ERROR: ansible-lint took longer than ${GALAXY_LINT_TIMEOUT:-900} s"
  elif [ "$lint_rc" -ne 0 ] && ! [ -s "$work/lint.out" ]; then
    echo "ERROR: ansible-lint exited with $lint_rc and reported nothing; the end of its stderr:"
    tail -n 30 "$work/lint.err"
  fi
} >> "$work/importer.log"
if [ "$rc" -ne 0 ] || grep -qE '^(WARNING|ERROR)' "$work/importer.log"; then
  cat "$work/importer.log"
  echo "galaxy-importer $version: $(grep -cE '^(WARNING|ERROR)' "$work/importer.log") warning(s)/error(s), exit $rc" >&2
  exit 1
fi
echo "galaxy-importer $version: $(basename "$tarball") imported without warnings"
