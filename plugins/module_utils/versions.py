# -*- coding: utf-8 -*-
# Copyright: (c) 2024, ddp.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dotted numeric versions, the one helper every check and plan compares them with (pure, no I/O).

A version here is dotted non-negative integers as the tools print them: an NVIDIA driver (``530.30.02``, compared
field by field, missing trailing fields count as 0, so ``535`` == ``535.0.0``), NCCL (``2.18.1``), cuDNN, OFED. torch
versions with a local tag (``2.3.1+cu121``) are read only as far as their release series (``major_minor``).
"""
from __future__ import annotations

import re

# Dotted non-negative integers, the whole text: 530.30.02, 535, 2.18.1.
DOTTED_VERSION = re.compile(r"^\d+(\.\d+)*$")
_SERIES = re.compile(r"^\s*(\d+)\.(\d+)")


def version_tuple(version):
    """Return the numeric fields of a dotted version as a tuple of ints.

    ``"530.30.02"`` -> ``(530, 30, 2)``; ``535`` -> ``(535,)``.
    Raises ValueError when the text is not dotted non-negative integers.
    """
    text = str(version).strip()
    if not DOTTED_VERSION.match(text):
        raise ValueError("not a dotted numeric version: %r" % (version,))
    return tuple(int(part) for part in text.split("."))


def version_tuple_or_none(version):
    """``'535.104.05'`` -> ``(535, 104, 5)``; None when ``version`` is None or not a dotted number."""
    if version is None:
        return None
    try:
        return version_tuple(version)
    except ValueError:
        return None


def _padded(a, b):
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)), b + (0,) * (width - len(b))


def compare_versions(left, right):
    """Compare two dotted numeric versions; return -1, 0 or 1.

    Missing trailing fields count as 0, so ``"535"`` == ``"535.0.0"`` and
    ``"535"`` > ``"530.30.02"``. Raises ValueError on non-numeric input.
    """
    a, b = _padded(version_tuple(left), version_tuple(right))
    return (a > b) - (a < b)


def version_lt(found, required):
    """True when ``found`` is older than ``required`` (missing fields count as 0); None when either is not a version."""
    a, b = version_tuple_or_none(found), version_tuple_or_none(required)
    if a is None or b is None:
        return None
    a, b = _padded(a, b)
    return a < b


def major_minor(text):
    """The release series of a version as ``(major, minor)`` ints: ``'2.3.1+cu121'`` -> ``(2, 3)``; None when the
    text (None, empty, or not starting with ``<int>.<int>``) has none."""
    match = _SERIES.match(str(text or ""))
    return (int(match.group(1)), int(match.group(2))) if match else None
