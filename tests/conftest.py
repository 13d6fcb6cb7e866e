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
