"""The changelog check of `make test` (`make changelog-check`).

1. `antsibull-changelog lint` (fragments) and `lint-changelog-yaml` (changelogs/changelog.yaml).
2. CHANGELOG.md is what `antsibull-changelog generate` makes from changelogs/changelog.yaml.
3. A change to plugins/ or roles/ carries a fragment: when anything under plugins/ or roles/ differs
   between the base and the working tree, a fragment under changelogs/fragments/ must be added or changed
   over the same span. The base is
     - $CHANGELOG_BASE when set (a commit, tag or branch);
     - on a branch: its merge base with main (origin/main, else main), when that merge base is at or after
       the last release, so a branch needs its own fragment;
     - otherwise (main itself, as in a fresh clone of main): the last release, i.e. the last commit that
       changed changelogs/changelog.yaml (`antsibull-changelog release` writes it and removes the fragments).
   A change with nothing to tell users carries a fragment with a `trivial:` section.
Exit status 0 when all hold, 1 with the reasons otherwise.
"""
from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WATCHED = ("plugins/", "roles/")
FRAGMENTS = "changelogs/fragments/"
TOOL = os.path.join(os.path.dirname(sys.executable), "antsibull-changelog")


def git(*args, check=True):
    proc = subprocess.run(["git", "-C", ROOT] + list(args), capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise SystemExit("git %s: %s" % (" ".join(args), proc.stderr.strip()))
    return proc


def resolves(ref):
    return git("rev-parse", "--verify", "--quiet", ref + "^{commit}", check=False).returncode == 0


def choose_base():
    """(commit, why) of the base the working tree is compared with."""
    if os.environ.get("CHANGELOG_BASE"):
        ref = os.environ["CHANGELOG_BASE"]
        return git("rev-parse", ref + "^{commit}").stdout.strip(), "CHANGELOG_BASE=%s" % ref
    release = git("log", "-1", "--format=%H", "--", "changelogs/changelog.yaml").stdout.strip()
    if not release:
        raise SystemExit("no commit has changelogs/changelog.yaml: nothing to measure a change against")
    head = git("rev-parse", "HEAD").stdout.strip()
    for main in ("origin/main", "main"):
        if not resolves(main):
            continue
        merge_base = git("merge-base", "HEAD", main, check=False).stdout.strip()
        if merge_base and merge_base != head and \
                git("merge-base", "--is-ancestor", release, merge_base, check=False).returncode == 0:
            return merge_base, "merge base with %s" % main
        break
    return release, "last release (last commit that changed changelogs/changelog.yaml)"


def changed_paths(base):
    """Paths that differ between base and the working tree, untracked files included."""
    diff = git("diff", "--name-only", base).stdout.split()
    untracked = git("ls-files", "--others", "--exclude-standard").stdout.split()
    return sorted(set(diff) | set(untracked))


def fragment_problems():
    base, why = choose_base()
    paths = changed_paths(base)
    watched = [p for p in paths if p.startswith(WATCHED)]
    fragments = [p for p in paths if p.startswith(FRAGMENTS) and p.endswith((".yml", ".yaml"))
                 and os.path.exists(os.path.join(ROOT, p))]
    print("changelog-check: base %s (%s): %d change(s) under plugins/ or roles/, %d fragment(s)"
          % (base[:12], why, len(watched), len(fragments)))
    if watched and not fragments:
        shown = "\n  ".join(watched[:20]) + ("\n  ..." if len(watched) > 20 else "")
        return ["these changed since %s (%s) but no fragment was added under %s:\n  %s\n"
                "Add changelogs/fragments/<topic>.yml (a `trivial:` section when users need not know)."
                % (base[:12], why, FRAGMENTS, shown)]
    return []


def lint_problems():
    problems = []
    for argv in ([TOOL, "lint"], [TOOL, "lint-changelog-yaml", "changelogs/changelog.yaml"]):
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or proc.stdout.strip():
            problems.append("%s:\n%s%s" % (" ".join(argv[1:]), proc.stdout, proc.stderr))
    return problems


def generated_problems():
    """CHANGELOG.md must equal what `antsibull-changelog generate` writes (in a scratch copy)."""
    with tempfile.TemporaryDirectory() as scratch:
        shutil.copy(os.path.join(ROOT, "galaxy.yml"), scratch)
        shutil.copytree(os.path.join(ROOT, "changelogs"), os.path.join(scratch, "changelogs"))
        proc = subprocess.run([TOOL, "generate"], cwd=scratch, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            return ["antsibull-changelog generate failed:\n%s%s" % (proc.stdout, proc.stderr)]
        if not filecmp.cmp(os.path.join(scratch, "CHANGELOG.md"), os.path.join(ROOT, "CHANGELOG.md"), shallow=False):
            return ["CHANGELOG.md is not generated from changelogs/changelog.yaml: run `antsibull-changelog generate`"
                    " (never edit CHANGELOG.md by hand)"]
    return []


def main():
    problems = lint_problems() + generated_problems() + fragment_problems()
    for text in problems:
        print("changelog-check: " + text, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
