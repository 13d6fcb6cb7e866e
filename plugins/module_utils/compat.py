# -*- coding: utf-8 -*-
# Copyright: (c) 2024, ddp.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure functions over the ddp.cluster compatibility matrix.

No I/O here: the caller loads ``data/compat_matrix.yml`` (the filter plugin
``ddp.cluster.compat_resolve`` does) and passes the parsed dict in.

Vocabulary
    torch version   PEP 440 public version plus an optional local tag, as pip and
                    ``torch.__version__`` print it: ``2.1.0``, ``2.1.0+cu121``,
                    ``2.1.0+cpu``.
    CUDA build      ``major.minor`` string (``"12.1"``) or ``"cpu"``. The pip local
                    tag ``cu121`` is the same build written without the dot.
    driver version  NVIDIA Linux driver, dotted integers (``530.30.02``); compared
                    numerically field by field, missing fields count as 0.

Sources of the data rules (see the matrix file for per-row URLs):
    https://pytorch.org/get-started/previous-versions/
    https://github.com/pytorch/vision#installation
    https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html#cuda-driver
"""
from __future__ import annotations

import re

from ansible_collections.ddp.cluster.plugins.module_utils.versions import DOTTED_VERSION, compare_versions, version_tuple

__all__ = [
    "MatrixError",
    "PROBLEM_CODES",
    "compare_versions",
    "cuda_tag",
    "find_row",
    "load_matrix",
    "normalize_cuda",
    "parse_version",
    "resolve_stack",
    "validate_matrix",
    "version_tuple",
]

# Stable problem codes (documented in docs/troubleshooting).
PROBLEM_CODES = (
    "STACK_BAD_VERSION",
    "STACK_UNKNOWN_TORCH",
    "STACK_TORCHVISION_MISMATCH",
    "STACK_CUDA_BUILD_MISMATCH",
    "STACK_CUDA_UNSUPPORTED",
    "STACK_DRIVER_TOO_OLD",
)

VAR_TORCH = "ddp_torch_version"
VAR_TORCHVISION = "ddp_torchvision_version"
VAR_CUDA = "ddp_cuda_version"
VAR_DRIVER = "ddp_nvidia_driver_version"

_CU_TAG_RE = re.compile(r"^cu(\d{2,3})$")
_CUDA_RE = re.compile(r"^(\d+)\.(\d+)(\.\d+)*$")


class MatrixError(ValueError):
    """The compatibility matrix does not have the documented structure."""


# --------------------------------------------------------------------------- versions
def _series(version, fields=2):
    """``"0.17.0"`` -> ``"0.17"`` (the release series)."""
    return ".".join(str(version).split(".")[:fields])


def normalize_cuda(value):
    """Normalise a CUDA build given by a user or a local tag.

    Accepts ``"12.1"``, ``"12.1.1"`` (patch dropped), ``"cu121"``, ``12.1`` (a YAML
    float), ``"cpu"``. Returns ``"12.1"`` or ``"cpu"``; ``None``, ``""`` and
    ``"auto"`` return None (meaning: use the matrix default).
    Raises ValueError on anything else (for example a ROCm tag).
    """
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in ("", "auto"):
        return None
    if text == "cpu":
        return "cpu"
    match = _CU_TAG_RE.match(text)
    if match:
        digits = match.group(1)
        return "%d.%d" % (int(digits[:-1]), int(digits[-1]))
    match = _CUDA_RE.match(text)
    if match:
        return "%d.%d" % (int(match.group(1)), int(match.group(2)))
    raise ValueError("not a CUDA build (expected e.g. 12.1, cu121, cpu or auto): %r" % (value,))


def cuda_tag(cuda):
    """Return the pip local tag / index suffix for a CUDA build.

    ``"12.1"`` -> ``"cu121"``, ``"13.0"`` -> ``"cu130"``, ``"cpu"`` -> ``"cpu"``.
    Raises ValueError for input normalize_cuda rejects or for None/auto.
    """
    norm = normalize_cuda(cuda)
    if norm is None:
        raise ValueError("no CUDA build given")
    if norm == "cpu":
        return "cpu"
    major, minor = norm.split(".")
    return "cu%s%s" % (major, minor)


def parse_version(text):
    """Split a torch/torchvision version into (public version, CUDA build).

    ``"2.1.0+cu121"`` -> ``("2.1.0", "12.1")``; ``"2.1.0+cpu"`` -> ``("2.1.0", "cpu")``;
    ``"2.1.0"`` -> ``("2.1.0", None)`` (no local tag: the build is not stated).
    Raises ValueError when the public part is not dotted integers or the local tag
    is not a CUDA/cpu tag.
    """
    if text is None:
        raise ValueError("no version given")
    raw = str(text).strip()
    public, sep, local = raw.partition("+")
    if not DOTTED_VERSION.match(public):
        raise ValueError("not a release version: %r" % (text,))
    if not sep:
        return public, None
    if not local:
        raise ValueError("empty local version tag: %r" % (text,))
    if local.lower() != "cpu" and not _CU_TAG_RE.match(local.lower()):
        raise ValueError("local tag %r is not cuXYZ or cpu in %r" % (local, text))
    return public, normalize_cuda(local)


# --------------------------------------------------------------------------- matrix
_ROW_REQUIRED = ("torch", "torchvision", "cuda", "default_cuda", "cudnn", "nccl", "sources")


def _is_version_str(value):
    return isinstance(value, str) and bool(DOTTED_VERSION.match(value))


def validate_matrix(matrix):
    """Check the structure of a parsed compatibility matrix.

    Returns a list of human-readable error strings (empty when valid). Checks:
    top-level keys, every row's required keys and types, CUDA build lists, that
    default_cuda is one of the row's builds, that cudnn/nccl keys are builds of the
    row, unique torch versions, that default_torch names a row, the driver
    tables (cuda_drivers, minor_version_compat), numpy2_first_torch when present, and, when present, system_stacks
    (each cuda listed in cuda_drivers, quoted strings, non-empty sources).
    """
    errors = []
    if not isinstance(matrix, dict):
        return ["matrix is not a mapping"]
    rows = matrix.get("torch_releases")
    if not isinstance(rows, list) or not rows:
        errors.append("torch_releases must be a non-empty list")
        rows = []
    pattern = matrix.get("index_url_pattern")
    if not isinstance(pattern, str) or "{tag}" not in pattern:
        errors.append("index_url_pattern must be a string containing {tag}")
    if "numpy2_first_torch" in matrix and not _is_version_str(matrix["numpy2_first_torch"]):
        errors.append("numpy2_first_torch must be a quoted dotted version")
    seen = set()
    for idx, row in enumerate(rows):
        errors.extend(_row_errors(idx, row, seen))
    default = matrix.get("default_torch")
    if default not in seen:
        errors.append("default_torch %r is not a torch_releases row" % (default,))
    driver_errors, drivers = _driver_table_errors(matrix)
    errors.extend(driver_errors)
    errors.extend(_system_stack_errors(matrix.get("system_stacks"), drivers))
    return errors


def _row_errors(idx, row, seen):
    """Errors in the ``torch_releases`` row at ``idx``; its torch version is added to ``seen``.

    :returns: a list of error strings (empty when the row is valid).
    """
    errors = []
    where = "torch_releases[%d]" % idx
    if not isinstance(row, dict):
        return ["%s is not a mapping" % where]
    missing = [key for key in _ROW_REQUIRED if key not in row]
    if missing:
        return ["%s lacks %s" % (where, ", ".join(missing))]
    where = "torch %s" % row.get("torch")
    for key in ("torch", "torchvision"):
        if not _is_version_str(row[key]):
            errors.append("%s: %s must be a quoted dotted version, got %r" % (where, key, row[key]))
    audio = row.get("torchaudio")
    if audio is not None and not _is_version_str(audio):
        errors.append("%s: torchaudio must be a quoted version or null" % where)
    if row["torch"] in seen:
        errors.append("%s: listed twice" % where)
    seen.add(row["torch"])
    builds = row["cuda"]
    if not isinstance(builds, list) or not builds:
        errors.append("%s: cuda must be a non-empty list" % where)
        builds = []
    for build in builds:
        try:
            if not isinstance(build, str) or normalize_cuda(build) != build:
                raise ValueError(build)
        except ValueError:
            errors.append("%s: cuda build %r must be a quoted major.minor or cpu" % (where, build))
    if row["default_cuda"] not in builds:
        errors.append("%s: default_cuda %r is not one of its builds" % (where, row["default_cuda"]))
    for extra in ("experimental_cuda",):
        for build in row.get(extra) or []:
            if build not in builds:
                errors.append("%s: %s %r is not one of its builds" % (where, extra, build))
    for lib in ("cudnn", "nccl"):
        table = row[lib]
        if not isinstance(table, dict):
            errors.append("%s: %s must be a mapping CUDA build -> version or null" % (where, lib))
            continue
        for build, value in table.items():
            if build not in builds or build == "cpu":
                errors.append("%s: %s key %r is not a CUDA build of this row" % (where, lib, build))
            if value is not None and not _is_version_str(value):
                errors.append("%s: %s[%s] must be a quoted version or null" % (where, lib, build))
    if not isinstance(row["sources"], list) or not row["sources"]:
        errors.append("%s: sources must be a non-empty list of URLs" % where)
    override = row.get("index_url_pattern")
    if override is not None and (not isinstance(override, str) or "{tag}" not in override):
        errors.append("%s: index_url_pattern must contain {tag}" % where)
    return errors


def _driver_table_errors(matrix):
    """Errors in the driver tables ``cuda_drivers`` and ``minor_version_compat``.

    :returns: ``(errors, drivers)``: the error strings and the ``cuda_drivers`` list (``[]`` when it is not one).
    """
    errors = []
    drivers = matrix.get("cuda_drivers")
    if not isinstance(drivers, list) or not drivers:
        errors.append("cuda_drivers must be a non-empty list")
        drivers = []
    for idx, entry in enumerate(drivers):
        if not isinstance(entry, dict) or "cuda" not in entry or "min_driver" not in entry:
            errors.append("cuda_drivers[%d] needs cuda and min_driver" % idx)
            continue
        if entry["min_driver"] is not None and not _is_version_str(entry["min_driver"]):
            errors.append("cuda_drivers[%d]: min_driver must be a quoted version or null" % idx)
    floors = matrix.get("minor_version_compat")
    if not isinstance(floors, list):
        errors.append("minor_version_compat must be a list")
        floors = []
    for idx, entry in enumerate(floors):
        if not isinstance(entry, dict) or not isinstance(entry.get("cuda_major"), int) \
                or not _is_version_str(entry.get("min_driver")):
            errors.append("minor_version_compat[%d] needs int cuda_major and quoted min_driver" % idx)
    return errors, drivers


def _system_stack_errors(stacks, drivers):
    """Errors in the optional ``system_stacks`` list (see data/compat_matrix.yml)."""
    if stacks is None:
        return []
    if not isinstance(stacks, list):
        return ["system_stacks must be a list"]
    errors = []
    known = set(entry.get("cuda") for entry in drivers if isinstance(entry, dict))
    seen = set()
    for idx, entry in enumerate(stacks):
        where = "system_stacks[%d]" % idx
        if not isinstance(entry, dict):
            errors.append("%s is not a mapping" % where)
            continue
        cuda = entry.get("cuda")
        if not isinstance(cuda, str) or cuda not in known:
            errors.append("%s: cuda %r must be a quoted CUDA build listed in cuda_drivers" % (where, cuda))
        if cuda in seen:
            errors.append("%s: cuda %r listed twice" % (where, cuda))
        seen.add(cuda)
        branch = entry.get("driver_branch")
        if not isinstance(branch, str) or not branch.isdigit():
            errors.append("%s: driver_branch must be a quoted integer such as \"580\", got %r" % (where, branch))
        for lib in ("cudnn", "nccl"):
            value = entry.get(lib)
            if value is not None and not _is_version_str(value):
                errors.append("%s: %s must be a quoted version or null" % (where, lib))
        if not isinstance(entry.get("sources"), list) or not entry.get("sources"):
            errors.append("%s: sources must be a non-empty list of URLs" % where)
    return errors


def load_matrix(data):
    """Validate a parsed matrix dict and return it.

    Raises MatrixError listing every structural error; the returned object is the
    same dict (no copy), so callers may cache it.
    """
    errors = validate_matrix(data)
    if errors:
        raise MatrixError("invalid compatibility matrix: " + "; ".join(errors))
    return data


def find_row(matrix, torch):
    """Return the matrix row whose torch equals the public part of ``torch``, or None."""
    public = parse_version(torch)[0]
    for row in matrix.get("torch_releases", []):
        if row["torch"] == public:
            return row
    return None


def _known_torch(matrix):
    return [row["torch"] for row in matrix.get("torch_releases", [])]


def _min_driver(matrix, cuda):
    for entry in matrix.get("cuda_drivers", []):
        if entry.get("cuda") == cuda:
            return entry.get("min_driver"), entry.get("release")
    return None, None


def _minor_floor(matrix, cuda):
    try:
        major = int(cuda.split(".")[0])
    except (AttributeError, ValueError):
        return None
    for entry in matrix.get("minor_version_compat", []):
        if entry.get("cuda_major") == major:
            return entry.get("min_driver")
    return None


def _problem(code, variable, message, fix):
    return {"code": code, "variable": variable, "message": message, "fix": fix}


# --------------------------------------------------------------------------- resolve
def resolve_stack(matrix, torch, torchvision=None, cuda=None, driver=None):
    """Resolve a requested torch stack against the matrix.

    Arguments
        matrix       parsed matrix dict (see load_matrix)
        torch        torch version, optionally with local tag (``2.1.0+cu121``);
                     None means the matrix ``default_torch``
        torchvision  torchvision version (optionally tagged); None derives it
        cuda         CUDA build: ``"12.1"``/``"cu121"``/``"cpu"``; None or
                     ``"auto"`` means the torch tag's build, else the row default
        driver       installed/planned NVIDIA driver (``"535.104.05"``); None skips
                     the driver check

    Returns ``{"ok": bool, "problems": [...], "stack": {...}}``. Each problem is
    ``{code, variable, message, fix}`` with a code from PROBLEM_CODES. ``stack``
    always has the keys torch, torchvision, torchaudio, cuda, cuda_tag,
    min_driver, min_driver_release, driver_minor_compat_floor, cudnn, nccl,
    index_url, sources, numpy; values the request does not determine are None. ``numpy``
    is a pip version specifier (``"<2"``) for torch releases before the matrix's
    ``numpy2_first_torch`` (built against NumPy 1.x), else None. On a
    torchvision mismatch the stack carries the torchvision that fits (the fix).
    """
    problems = []
    stack = dict.fromkeys((
        "torch", "torchvision", "torchaudio", "cuda", "cuda_tag", "min_driver",
        "min_driver_release", "driver_minor_compat_floor", "cudnn", "nccl",
        "index_url", "sources", "numpy"))

    if torch is None or str(torch).strip() in ("", "auto"):
        torch = matrix.get("default_torch")
    try:
        torch_public, torch_build = parse_version(torch)
    except ValueError as exc:
        problems.append(_problem(
            "STACK_BAD_VERSION", VAR_TORCH, "torch version %r cannot be read: %s" % (torch, exc),
            "Set %s to a release such as %s (optionally +cu121 / +cpu)." % (VAR_TORCH, matrix.get("default_torch"))))
        return {"ok": False, "problems": problems, "stack": stack}

    row = find_row(matrix, torch_public)
    if row is None:
        known = _known_torch(matrix)
        problems.append(_problem(
            "STACK_UNKNOWN_TORCH", VAR_TORCH,
            "torch %s is not in the compatibility matrix; known versions: %s" % (torch_public, ", ".join(known)),
            "Set %s to one of the known versions (default %s), or add a row with sources to data/compat_matrix.yml."
            % (VAR_TORCH, matrix.get("default_torch"))))
        stack["torch"] = torch_public
        return {"ok": False, "problems": problems, "stack": stack}

    stack["torch"] = row["torch"]
    stack["torchvision"] = row["torchvision"]
    stack["torchaudio"] = row.get("torchaudio")
    stack["sources"] = list(row.get("sources") or [])
    numpy2 = matrix.get("numpy2_first_torch")
    if numpy2 and compare_versions(row["torch"], numpy2) < 0:
        stack["numpy"] = "<2"

    # torchvision: release pairing, then its CUDA build.
    tv_problems, tv_build = _torchvision_problems(matrix, row, torch, torch_build, torchvision)
    problems.extend(tv_problems)

    # CUDA build: explicit > torch tag > torchvision tag > row default.
    cuda_problems, wanted = _wanted_cuda(row, cuda, torch, torch_build)
    problems.extend(cuda_problems)
    effective = wanted or torch_build or tv_build or row["default_cuda"]

    if effective not in row["cuda"]:
        problems.append(_problem(
            "STACK_CUDA_UNSUPPORTED", VAR_CUDA,
            "torch %s is not published for %s; published builds: %s"
            % (row["torch"], _build_words(effective), ", ".join(row["cuda"])),
            "Set %s to one of %s, or auto (= %s)." % (VAR_CUDA, ", ".join(row["cuda"]), row["default_cuda"])))
        stack["cuda"] = effective
        return {"ok": False, "problems": problems, "stack": stack}

    problems.extend(_fill_cuda_stack(stack, matrix, row, effective, driver))
    return {"ok": not problems, "problems": problems, "stack": stack}


def _torchvision_problems(matrix, row, torch, torch_build, torchvision):
    """Check the requested torchvision against the row's release and torch's CUDA build.

    :returns: ``(problems, tv_build)``: the problems found and torchvision's CUDA build from its local tag (None
        when it has none or was not requested).
    """
    problems = []
    tv_build = None
    if torchvision is not None and str(torchvision).strip() not in ("", "auto"):
        try:
            tv_public, tv_build = parse_version(torchvision)
        except ValueError as exc:
            tv_public = None
            problems.append(_problem(
                "STACK_BAD_VERSION", VAR_TORCHVISION,
                "torchvision version %r cannot be read: %s" % (torchvision, exc),
                "Set %s to %s or leave it unset to derive it from torch." % (VAR_TORCHVISION, row["torchvision"])))
        if tv_public is not None and tv_public != row["torchvision"]:
            problems.append(_problem(
                "STACK_TORCHVISION_MISMATCH", VAR_TORCHVISION,
                _torchvision_message(matrix, tv_public, row),
                "Set %s to %s (or leave it unset to derive it from torch %s)."
                % (VAR_TORCHVISION, row["torchvision"], row["torch"])))

    if torch_build is not None and tv_build is not None and torch_build != tv_build:
        problems.append(_problem(
            "STACK_CUDA_BUILD_MISMATCH", VAR_TORCHVISION,
            "CUDA builds differ: torch %s is the %s build but torchvision %s is the %s build"
            % (torch, _build_words(torch_build), torchvision, _build_words(tv_build)),
            "Install torch and torchvision from the same index (%s) with the same local tag (+%s)."
            % (_index_url(matrix, row, torch_build), cuda_tag(torch_build))))
    return problems, tv_build


def _wanted_cuda(row, cuda, torch, torch_build):
    """Read the requested CUDA build and check it against torch's local tag.

    :returns: ``(problems, wanted)``: the problems found and the normalized build asked for (None for auto or
        unreadable).
    """
    problems = []
    try:
        wanted = normalize_cuda(cuda)
    except ValueError as exc:
        problems.append(_problem(
            "STACK_BAD_VERSION", VAR_CUDA, "CUDA build %r cannot be read: %s" % (cuda, exc),
            "Set %s to one of %s, or auto." % (VAR_CUDA, ", ".join(row["cuda"]))))
        wanted = None
    if wanted is not None and torch_build is not None and wanted != torch_build:
        problems.append(_problem(
            "STACK_CUDA_BUILD_MISMATCH", VAR_CUDA,
            "CUDA builds differ: %s is %s but torch %s is the %s build"
            % (VAR_CUDA, wanted, torch, _build_words(torch_build)),
            "Make %s and the torch local tag agree (or set %s to auto)." % (VAR_CUDA, VAR_CUDA)))
    return problems, wanted


def _fill_cuda_stack(stack, matrix, row, effective, driver):
    """Fill ``stack``'s CUDA build, index and (for a GPU build) libraries and driver floors in place.

    :returns: the driver problems (empty for the CPU build or when no driver was given).
    """
    stack["cuda"] = effective
    stack["cuda_tag"] = cuda_tag(effective)
    stack["index_url"] = _index_url(matrix, row, effective)
    if effective != "cpu":
        stack["cudnn"] = (row.get("cudnn") or {}).get(effective)
        stack["nccl"] = (row.get("nccl") or {}).get(effective)
        min_driver, release = _min_driver(matrix, effective)
        floor = _minor_floor(matrix, effective)
        stack["min_driver"] = min_driver
        stack["min_driver_release"] = release
        stack["driver_minor_compat_floor"] = floor
        if driver is not None and str(driver).strip() != "":
            return _driver_problems(effective, driver, min_driver, release, floor)
    return []


def _build_words(build):
    return "CPU-only" if build == "cpu" else "CUDA %s" % build


def _index_url(matrix, row, build):
    pattern = row.get("index_url_pattern") or matrix.get("index_url_pattern") or ""
    return pattern.replace("{tag}", cuda_tag(build))


def _torchvision_message(matrix, tv_public, row):
    """'torchvision 0.17 goes with torch 2.2; torch 2.1.0 needs torchvision 0.16.0'."""
    needs = "torch %s needs torchvision %s" % (row["torch"], row["torchvision"])
    rows = matrix.get("torch_releases", [])
    exact = [r for r in rows if r["torchvision"] == tv_public]
    series = [r for r in rows if _series(r["torchvision"]) == _series(tv_public)]
    if series and _series(tv_public) != _series(row["torchvision"]):
        return "torchvision %s goes with torch %s; %s" % (_series(tv_public), _series(series[0]["torch"]), needs)
    if exact:
        return "torchvision %s goes with torch %s; %s" % (tv_public, exact[0]["torch"], needs)
    return "torchvision %s is not in the compatibility matrix; %s" % (tv_public, needs)


def _driver_problems(cuda, driver, min_driver, release, floor):
    try:
        version_tuple(driver)
    except ValueError:
        return [_problem(
            "STACK_BAD_VERSION", VAR_DRIVER, "NVIDIA driver version %r cannot be read" % (driver,),
            "Set %s to the dotted driver version nvidia-smi reports, e.g. 535.104.05." % VAR_DRIVER)]
    major = cuda.split(".")[0]
    floor_words = ("the CUDA %s.x minor-version-compatibility floor is %s (that mode runs with "
                   "limitations and is not what this collection validates)" % (major, floor)) if floor else \
        "no CUDA %s.x minor-version-compatibility floor is recorded" % major
    if min_driver is not None:
        if compare_versions(driver, min_driver) >= 0:
            return []
        return [_problem(
            "STACK_DRIVER_TOO_OLD", VAR_DRIVER,
            "CUDA %s needs NVIDIA driver >= %s (%s, CUDA Toolkit release notes Table 3); driver %s is older; %s"
            % (cuda, min_driver, release or "GA", driver, floor_words),
            "Install NVIDIA driver >= %s (set %s), or choose an older CUDA build with %s."
            % (min_driver, VAR_DRIVER, VAR_CUDA))]
    # GA minimum not recorded: the minor-version floor is the only bound we have.
    if floor is not None and compare_versions(driver, floor) < 0:
        return [_problem(
            "STACK_DRIVER_TOO_OLD", VAR_DRIVER,
            "CUDA %s: the %s GA minimum driver is not recorded, and driver %s is below the CUDA %s.x "
            "minor-version-compatibility floor %s" % (cuda, cuda, driver, major, floor),
            "Install NVIDIA driver >= %s at least (set %s)." % (floor, VAR_DRIVER))]
    return []
