#!/usr/bin/env bash
# `ansible-test sanity` and the unit tests on the ansible-core versions of tests/ansible_versions.txt (the oldest
# the collection claims and the newest on PyPI), besides the .venv's own (`make sanity`, `make unit`).
#
#   tests/ansible_versions.sh [ANSIBLE_CORE_VERSION ...]     default: every line of tests/ansible_versions.txt
#
# Each version gets its own venv, made once and kept outside the clone, keyed by the versions it holds:
# ~/.cache/ddp-cluster/ansible-core-<core>-ansible-<ansible>-py<python>/ (pip from PyPI the first time, about
# 100 MB; nothing the next time). Its Python is the first of the line's that is on this machine (on PATH as
# python3.X, or a pyenv version); none there is an error that names them. Per version, one after the other:
# the unit tests (tests/unit, DDP_FAIL_ON_SKIP=1, with that venv's ansible-playbook), then tests/sanity.sh with
# that venv's ansible-test. The output goes to .cache/ansible-<core>.log; a failed version's log is printed.
# Every version is run even when one fails; the exit status is 1 when any failed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
list=tests/ansible_versions.txt
cache=${XDG_CACHE_HOME:-$HOME/.cache}/ddp-cluster
mkdir -p "$cache" .cache

# What the unit tests need besides ansible-core and ansible: pytest and matplotlib (the scaling plot's tests) as
# requirements.txt pins them, and the parser of Ansible's docs markup that the role READMEs' generator uses
# (docs/site/role_readmes.py; antsibull-docs of requirements-docs.txt brings it to .venv). A venv made before a
# line was added here gets it at the next run (the stamp holds this list).
unit_reqs=("$(grep -E '^pytest[<>=! ]' requirements.txt)" "$(grep -E '^matplotlib[<>=! ]' requirements.txt)"
           "antsibull-docs-parser>=1.0.0,<2.0.0")

find_python() {  # "3.11,3.12" -> the path of the first of them on this machine
  local v p
  for v in ${1//,/ }; do
    for p in "$(command -v "python$v" 2>/dev/null || true)" \
             "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/"$v".*/bin/"python$v" \
             /usr/bin/"python$v" /usr/local/bin/"python$v"; do
      # a pyenv shim answers to every name but fails where that version is not selected: run it to know
      if [ -n "$p" ] && [ -x "$p" ] && "$p" -c 'import venv' >/dev/null 2>&1; then
        echo "$p"
        return 0
      fi
    done
  done
  return 1
}

make_venv() {  # core ansible python -> the venv's folder, made under a lock if it is not there yet
  local core=$1 ansible=$2 python=$3 pyver venv
  pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  venv="$cache/ansible-core-$core-ansible-$ansible-py$pyver"
  (
    flock 9
    if [ ! -f "$venv/.stamp" ]; then
      rm -rf "$venv"
      "$python" -m venv "$venv" && "$venv/bin/python" -m pip install -q --disable-pip-version-check \
        "ansible-core==$core" "ansible==$ansible" >&2 && echo "ansible-core==$core ansible==$ansible" >"$venv/.stamp"
    fi
    if [ -f "$venv/.stamp" ] && [ "$(tail -n +2 "$venv/.stamp")" != "$(printf '%s\n' "${unit_reqs[@]}")" ]; then
      "$venv/bin/python" -m pip install -q --disable-pip-version-check "ansible-core==$core" "${unit_reqs[@]}" >&2 &&
        { echo "ansible-core==$core ansible==$ansible"; printf '%s\n' "${unit_reqs[@]}"; } >"$venv/.stamp.new" &&
        mv "$venv/.stamp.new" "$venv/.stamp"
    fi
  ) 9>"$venv.lock" && [ -f "$venv/.stamp" ] && [ "$(tail -n +2 "$venv/.stamp")" = "$(printf '%s\n' "${unit_reqs[@]}")" ] &&
    echo "$venv"
}

# Called where errexit does not apply (an `if`): every step's status is checked here.
run_version() {  # core ansible pythons -> 0 when the unit tests and sanity pass on it
  local core=$1 ansible=$2 pythons=$3 python venv rc=0
  if ! python=$(find_python "$pythons"); then
    echo "ansible-core $core supports Python $pythons on the controller and none of them is on this machine" \
         "(python3.X on PATH or a pyenv version): install one (pyenv install ${pythons%%,*})"
    return 1
  fi
  venv=$(make_venv "$core" "$ansible" "$python") || { echo "pip could not make the venv of ansible-core $core"; return 1; }
  echo "ansible-core $core (ansible $ansible, $("$venv/bin/python" -V)): $venv"
  echo "-- unit tests"
  DDP_FAIL_ON_SKIP=1 "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider tests/unit || rc=1
  echo "-- ansible-test sanity"
  PYTHON="$venv/bin/python" SANITY_WORKDIR="${TMPDIR:-/tmp}/ddp-cluster-sanity-$core" tests/sanity.sh || rc=1
  return "$rc"
}

declare -A ANSIBLE PYTHONS
order=()
while read -r core ansible pythons _; do
  [[ -z "$core" || "$core" == \#* ]] && continue
  ANSIBLE[$core]=$ansible
  PYTHONS[$core]=$pythons
  order+=("$core")
done <"$list"
[ "$#" -eq 0 ] || order=("$@")

failed=()
for core in "${order[@]}"; do
  if [ -z "${ANSIBLE[$core]:-}" ]; then
    echo "ansible_versions.sh: ansible-core $core is not a line of $list (there: ${!ANSIBLE[*]})" >&2
    exit 2
  fi
  log=.cache/ansible-$core.log
  start=$(date +%s)
  if run_version "$core" "${ANSIBLE[$core]}" "${PYTHONS[$core]}" >"$log" 2>&1; then
    printf 'ansible-core %-8s passed: unit tests and sanity (%ds, %s)\n' "$core" "$(($(date +%s) - start))" "$log"
  else
    cat "$log"
    printf 'ansible-core %-8s FAILED (%ds, %s)\n' "$core" "$(($(date +%s) - start))" "$log"
    failed+=("$core")
  fi
done
[ "${#failed[@]}" -eq 0 ] || { echo "ansible_versions.sh: failed on ansible-core ${failed[*]}" >&2; exit 1; }
