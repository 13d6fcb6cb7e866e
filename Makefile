# ddp.cluster: two entry points.
#   make demo   build the local podman cluster and run site.yml on it (ends with the benchmark table)
#   make test   lint, sanity, unit tests, the Molecule scenario and the cluster tests on its nodes
# Both install what they need (Debian/Ubuntu packages as root, a venv in .venv).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
NODES ?= 3
export ANSIBLE_FORCE_COLOR ?= 0
# ddp.cluster is this checkout's (ansible.cfg: collections_path = ./collections): variables that beat ansible.cfg
# and could put another copy first (a ~/.ansible/collections one, say) are not passed on (tests/checkout_env.py).
unexport ANSIBLE_CONFIG ANSIBLE_COLLECTIONS_PATH ANSIBLE_COLLECTIONS_PATHS ANSIBLE_ROLES_PATH
export PATH := $(abspath $(BIN)):$(PATH)

APT_PACKAGES := podman runc debootstrap uidmap slirp4netns fuse-overlayfs iptables git iperf3 shellcheck

.PHONY: demo test prefetch deps venv cluster cluster-down site converge-bench reference-install-bench find-bad-node lint sanity unit controller-torch docs collection-checks changelog-check galaxy-importer cluster-up cluster-check cluster-tests cluster-tests-alone cluster-tests-late reference-tests day2-tests controller-tests ansible-versions gpu-stack-test clean

demo: venv cluster site

deps: .cache/deps.stamp
.cache/deps.stamp:
	@mkdir -p .cache
	@if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null || ! command -v runc >/dev/null \
	    || ! command -v shellcheck >/dev/null; then \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(APT_PACKAGES); fi
	@# crun refuses hosts with the hybrid cgroup v1 layout: podman uses runc for our nodes (--runtime runc).
	touch $@

venv: deps $(VENV)/.stamp
$(VENV)/.stamp: requirements.txt requirements-docs.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt -r requirements-docs.txt
	touch $@

# playbooks/local_cluster.yml runs on the controller alone (the implicit localhost): until it has made the nodes,
# inventory/local, which lists them, is empty by design, and ansible-playbook would warn "provided hosts list is
# empty" on every first run.
cluster: venv
	ANSIBLE_LOCALHOST_WARNING=False $(BIN)/ansible-playbook playbooks/local_cluster.yml -e local_cluster_nodes=$(NODES)

cluster-down: venv
	ANSIBLE_LOCALHOST_WARNING=False $(BIN)/ansible-playbook playbooks/local_cluster.yml -e local_cluster_state=absent

site: venv
	$(BIN)/ansible-playbook site.yml

# Converge cost against the node count (outside make test: 12 nodes take about an hour here):
#   make converge-bench NODES="3 6 12"   cold and no-change site.yml per N, changed=0 required
converge-bench: venv
	benchmarks/converge.sh $(NODES)

# The reference stack (2.6 GB of wheels) installed on N local nodes through the index vs through copies
# (outside make test, about 7 minutes at 3 nodes here):  make reference-install-bench NODES=3
reference-install-bench: venv
	benchmarks/reference_install.sh $(NODES)

# Time to find one bad node (a tc-capped port, a node that drops its peers) among N (outside make test):
#   make find-bad-node NODES="3 6"
find-bad-node: venv
	benchmarks/find_bad_node.sh $(NODES)

# Shell programs shipped to the nodes (ddp-env, ddp-torchrun.sbatch) are linted like the Python ones.
SHIPPED_SHELL := $(shell grep -rlE '^.!.*[/ ](ba)?sh( |$$)' roles/*/files)

# Dead code: vulture over the collection's Python and the programs it ships (names frameworks use:
# tests/vulture_allowlist.py).
lint: venv
	$(BIN)/yamllint -s .
	shellcheck $(SHIPPED_SHELL)
	$(BIN)/vulture --min-confidence 60 plugins roles/*/files tools benchmarks tests/vulture_allowlist.py
	$(BIN)/ansible-lint --profile production

sanity: venv
	tests/sanity.sh

unit: venv
	DDP_FAIL_ON_SKIP=1 $(PY) -m pytest -q -rs tests/unit

# The docs site (antsibull-docs + Sphinx, warnings are errors): artifacts/docs/html/index.html.
docs: venv
	docs/site/build.sh

# The collection as Galaxy and its users see it, without containers: the changelog rule and CHANGELOG.md,
# role READMEs generated from argument_specs, galaxy-importer on the built tarball, and the tarball
# installed with its declared dependencies only (role and every module run from there).
collection-checks: changelog-check galaxy-importer
	$(PY) docs/site/role_readmes.py --check
	$(PY) -m pytest -q tests/collection

changelog-check: venv
	$(PY) tests/changelog_check.py

# galaxy-importer pins its own ansible-lint/attrs: it lives in its own venv under ~/.cache, made once per version.
galaxy-importer: venv
	tests/collection/galaxy_importer.sh

# The torch tests of tests/integration (the DDP script, the all-reduce module) run in the controller's
# venv with the same CPU torch the nodes got, from the wheelhouse the Molecule converge filled.
controller-torch: venv
	@if ! $(PY) -c 'import torch' 2>/dev/null; then \
	  $(PY) -m pip install -q --no-index --find-links .cache/wheelhouse torch \
	  || { echo "controller-torch: no torch wheel for $$($(PY) -V) in .cache/wheelhouse (made for the nodes' Python);" \
	            "install torch into $(VENV) by hand" >&2; exit 1; }; fi

# The tests of tests/integration that need neither a node nor torch: the real ansible-playbook against absent
# nodes (refused on the controller before any contact) and the collection tarball as users install it. make test
# runs them beside the late cluster tests (tests/make_test.sh); cluster-tests runs the rest.
CONTROLLER_TESTS := $(addprefix tests/integration/,test_validate_refusals.py test_validate_classes.py \
                                                   test_preflight_refusals.py test_collection_tarball.py)

controller-tests: venv
	DDP_FAIL_ON_SKIP=1 $(PY) -m pytest -q -rs -p no:cacheprovider --durations=5 $(CONTROLLER_TESTS)

# ansible-test sanity and the unit tests on the oldest ansible-core the collection claims and on the newest on
# PyPI (tests/ansible_versions.txt), each in its own venv made once under ~/.cache/ddp-cluster (the Python each
# needs: tests/ansible_versions.sh). About 7 minutes here with the venvs made, 5 once they are; make test runs it
# beside the late cluster tests (tests/make_test.sh).
ansible-versions: venv
	tests/ansible_versions.sh

# The Molecule scenario's first steps (destroy, syntax, create, converge): make test runs them in the background
# during the static checks (tests/make_test.sh), then cluster-tests with MOLECULE_CONVERGED=1.
cluster-up: venv
	export MOLECULE_PROJECT_DIRECTORY=$(CURDIR); \
	$(BIN)/molecule destroy -s local && $(BIN)/molecule syntax -s local && $(BIN)/molecule converge -s local

# The rest of the Molecule scenario on the converged nodes (idempotence, side effect, verify), nodes left running.
# make test runs it in the background after cluster-up, during the static checks (tests/make_test.sh).
cluster-check: venv
	export MOLECULE_PROJECT_DIRECTORY=$(CURDIR); \
	$(BIN)/molecule idempotence -s local && $(BIN)/molecule side-effect -s local && $(BIN)/molecule verify -s local

# The cluster tests on the Molecule nodes (after cluster-up unless MOLECULE_CONVERGED=1 says it ran, and cluster-check
# unless MOLECULE_CHECKED=1 says it ran), then the nodes are destroyed (destroy checks that no container or network is
# left), whatever the tests said; CLUSTER_KEEP=1 leaves them running for a later cluster-tests. The 25 slowest tests
# are listed. The tests marked reference_full run with make reference-tests, not here. The day-2 tests run here, their
# extra node made from a copy of a converged one that keeps its training environment's stack folders
# (BLANK_KEEPS_ENV=1: no torch install on it; the converge installed the stack on blank nodes already); make
# day2-tests wipes it whole. make test runs them in two parts: all but LATE_TESTS alone, then LATE_TESTS (the node-loss
# tests, which mostly wait on Slurm's timers, and the day-2 tests, which mostly wait on one ansible-playbook) with the
# checks that need no Molecule node beside them (tests/make_test.sh).
DAY2_TESTS := tests/integration/test_day2_cluster.py tests/integration/test_day2_rolling.py
LATE_TESTS := tests/integration/test_training_survives_a_node.py $(DAY2_TESTS)
CLUSTER_TESTS ?= -m 'not reference_full' $(addprefix --ignore=,$(CONTROLLER_TESTS)) tests/integration
BLANK_KEEPS_ENV ?= 1
cluster-tests: venv
	export MOLECULE_PROJECT_DIRECTORY=$(CURDIR); \
	$(if $(filter 1,$(CLUSTER_KEEP)),,trap '$(BIN)/molecule destroy -s local' EXIT;) \
	{ [ "$(MOLECULE_CONVERGED)" = 1 ] || $(MAKE) --no-print-directory cluster-up; } \
	  && { [ "$(MOLECULE_CHECKED)" = 1 ] || $(MAKE) --no-print-directory cluster-check; } \
	  && $(MAKE) --no-print-directory controller-torch \
	  && DDP_FAIL_ON_SKIP=1 DDP_IT_BLANK_KEEPS_ENV=$(BLANK_KEEPS_ENV) $(PY) -m pytest -q -rs --durations=25 $(CLUSTER_TESTS)

# make test's cluster tests in two parts (tests/make_test.sh), on the nodes cluster-up and cluster-check made and
# checked: all but LATE_TESTS, alone, the nodes left running; then LATE_TESTS, and the nodes destroyed.
cluster-tests-alone: venv
	$(MAKE) --no-print-directory cluster-tests CLUSTER_KEEP=1 \
	  CLUSTER_TESTS="-m 'not reference_full' $(addprefix --ignore=,$(CONTROLLER_TESTS) $(LATE_TESTS)) tests/integration"

cluster-tests-late: venv
	$(MAKE) --no-print-directory cluster-tests CLUSTER_TESTS="-m 'not reference_full' $(LATE_TESTS)"

# The reference stack's tests in full, on the Molecule nodes as in cluster-tests: also Horovod under mpirun across
# both nodes, and a node that cannot start under mpirun or without its environment, which make test leaves out for
# time (about 3 of its minutes); make test keeps the install, horovodrun --gloo beside torchrun, and a node
# horovodrun cannot reach. About 25 minutes here.
reference-tests: venv
	$(MAKE) --no-print-directory cluster-tests MOLECULE_CONVERGED= CLUSTER_TESTS=tests/integration/test_reference_stack.py

# The day-2 tests alone (README "Day 2": grow, replace, shrink, rolling maintenance, an environment switched under a
# running job) on fresh Molecule nodes plus a node they add, as in cluster-tests, that node wiped whole (its torch
# stack installed by the grow and replace runs). make test runs them too, the node keeping its stack folders.
day2-tests: venv
	$(MAKE) --no-print-directory cluster-tests MOLECULE_CONVERGED= CLUSTER_TESTS="$(DAY2_TESTS)" BLANK_KEEPS_ENV=0

# The GPU stack roles forced on one node without a GPU, against stand-in packages with NVIDIA's names and
# versions that the scenario builds and serves itself (molecule/gpu_stack). The scenario ends with destroy;
# the trap destroys (and checks) again should it stop half-way.
gpu-stack-test: venv
	export MOLECULE_PROJECT_DIRECTORY=$(CURDIR); \
	trap '$(BIN)/molecule destroy -s gpu_stack' EXIT; \
	$(BIN)/molecule test -s gpu_stack

# The phases in this order, the prefetch in the background during the static checks, and each phase's time
# (tests/make_test.sh).
test: venv
	tests/make_test.sh

# What the container tests need and a new machine is slow to make, cached outside the clone (seconds when
# cached): the node image, and the reference wheelhouse with its Horovod build (tools/reference_wheelhouse.sh).
prefetch: venv
	$(BIN)/ansible-playbook playbooks/local_cluster.yml -e local_cluster_state=image
	tools/reference_wheelhouse.sh

clean: cluster-down
	rm -rf .cache/local_cluster .cache/standin_repo artifacts
