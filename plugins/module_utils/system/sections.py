# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The parts of one shell read that prints several commands' outputs with a separator line between them (pure).

A role that reads several things on a node in one call (one module run instead of several) prints a fixed line
between the outputs, for example ``sysctl ...; echo '--- file'; cat FILE``. ``split_sections`` cuts that output back
into the commands' outputs. A separator counts only as a whole line (surrounding blanks ignored), in the order given,
so a command's output that merely contains its text is not cut.
"""
from __future__ import annotations


def split_sections(text, separators):
    """The outputs between the separator lines.

    :param text: the read's output (str, as ``stdout``) or its lines (list of str, as ``stdout_lines``).
    :param separators: the separator lines (list of non-empty str), in the order the read prints them.
    :returns: list of ``len(separators) + 1`` str: the lines before the first separator, between each separator and
        the next, and after the last, each part's lines joined with ``\\n``. A separator that is missing (a command that
        did not run) leaves its part empty; the lines after it then stay in the part before it, until the next
        separator that is there.
    :raises TypeError: when ``text`` is neither str nor a list, or ``separators`` is not a list of non-empty str.
    """
    if isinstance(text, str):
        lines = text.splitlines()
    elif isinstance(text, (list, tuple)):
        lines = [str(line) for line in text]
    else:
        raise TypeError("expects the output (str) or its lines (list), got %s" % type(text).__name__)
    if not isinstance(separators, (list, tuple)) or not all(isinstance(s, str) and s.strip() for s in separators):
        raise TypeError("separators must be a list of non-empty strings, got %r" % (separators,))
    wanted = [s.strip() for s in separators]
    parts = [[] for sep in wanted] + [[]]
    index = 0
    for line in lines:
        stripped = line.strip()
        if stripped in wanted[index:]:
            index = wanted.index(stripped, index) + 1
            continue
        parts[index].append(line)
    return ["\n".join(part) for part in parts]
