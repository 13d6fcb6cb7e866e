"""Make ``ansible_collections.ddp.cluster`` importable from a plain clone.

The repository is the collection root; ``collections/ansible_collections/ddp/cluster``
is a committed symlink back to it, so putting ``collections/`` on ``sys.path`` gives
the same import paths that ansible-test and an installed collection use.
"""
from __future__ import annotations

import os
import sys

_COLLECTIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "collections")
if _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)


def pytest_configure(config):
    # make test deselects these (-m 'not reference_full'); make reference-tests runs them.
    config.addinivalue_line("markers", "reference_full: a reference-stack test that make test leaves out for time "
                                       "(make reference-tests runs it)")
    # make test runs these after the other cluster tests; make day2-tests runs them alone.
    config.addinivalue_line("markers", "day2: a day-2 test (grow, replace, shrink, rolling) that changes the cluster "
                                       "itself: run after the others (make day2-tests runs them alone)")


def pytest_collection_modifyitems(session, config, items):
    """The day-2 tests last, in their own order: they add, replace and remove a node, restart the Slurm daemons and
    switch the training environment, and the other cluster tests should not start on a cluster just changed."""
    items[:] = [i for i in items if i.get_closest_marker("day2") is None] + \
        [i for i in items if i.get_closest_marker("day2") is not None]


# `make test` sets DDP_FAIL_ON_SKIP=1: a suite that is meant to run there (the cluster tests on the
# Molecule nodes, the torch tests with torch in the venv) must not pass by skipping. Skips are listed
# (-rs) and any skip fails the session; run without the variable to allow skips on other machines.
_SKIPPED = []


def pytest_runtest_logreport(report):
    if report.skipped and os.environ.get("DDP_FAIL_ON_SKIP") == "1":
        _SKIPPED.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    if _SKIPPED and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    if _SKIPPED:
        terminalreporter.write_line(
            "DDP_FAIL_ON_SKIP=1: %d test(s) skipped that make test must run (see the skip reasons above): %s"
            % (len(_SKIPPED), ", ".join(_SKIPPED)), red=True)
