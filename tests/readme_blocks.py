"""The code blocks of one README section, for tests that run the README's commands as written.

pytest puts tests/ on sys.path (tests/conftest.py), so any test can ``from readme_blocks import section_blocks``.
"""
from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
OWN_JOB_SECTION = "Your own training jobs (Slurm)"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


def section_blocks(title, path=README):
    """``[(language, text)]`` of the fenced code blocks under the ``## <title>`` heading, in order, up to the next
    heading (``##`` or ``###``: a subsection's blocks are its own).

    :raises ValueError: no such section.
    """
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    start = text.find("\n## %s\n" % title)
    if start < 0:
        raise ValueError("README has no section '## %s'" % title)
    following = re.compile(r"^#{2,3} ", re.M).search(text, start + 2)
    body = text[start:following.start() if following else len(text)]
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(body)]


def own_job():
    """The own-job section's blocks: ``{"script": train.py's text, "controller": [commands], "head": [commands]}``.

    The section holds, in this order: the Python block of ``train.py`` (first line ``# train.py: ...``), the shell
    block run from the clone (copy the script to every node, log in to the head), the shell block run on the head
    node (submit, look at the queue). Commands are the blocks' lines without comments at line end.

    :raises ValueError: the section does not have that shape.
    """
    blocks = section_blocks(OWN_JOB_SECTION)
    python = [b for lang, b in blocks if lang == "python"]
    shell = [b for lang, b in blocks if lang == "sh"]
    if len(python) != 1 or not python[0].startswith("# train.py") or len(shell) != 2:
        raise ValueError("the own-job section needs one python block (# train.py) and two sh blocks, got %s"
                         % [lang for lang, _b in blocks])

    def commands(block):
        return [re.sub(r"\s+#\s.*$", "", line).strip() for line in block.splitlines()
                if line.strip() and not line.lstrip().startswith("#")]

    return {"script": python[0], "controller": commands(shell[0]), "head": commands(shell[1])}
