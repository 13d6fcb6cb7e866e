#!/usr/bin/python
# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: installed_files
short_description: Read the files and folders a role installs, in one call, where a missing folder is an answer
version_added: 0.3.0
description:
  - Runs M(ansible.builtin.find) with the same options on the parent folders of the paths a role installs, with
    their base names as O(patterns), so that one call returns each path's type, mode, owner and SHA-1; the role
    then writes only the paths that C(ddp.cluster.paths_todo) finds missing or different.
  - A folder of O(paths) that does not exist (or is not a folder) is returned in RV(not_directories) instead of
    find's warning C(Skipped '<folder>' path due to this access issue), which every first run on a new node would
    print once per folder. A folder that cannot be read still gives that warning.
  - This is an action plugin; the options are find's, with the same meaning and defaults.
options:
  paths:
    description: Folders to search (the parents of the installed paths).
    type: list
    elements: str
    required: true
  patterns:
    description: Shell patterns (fnmatch) of the base names to return.
    type: list
    elements: str
    default: []
  file_type:
    description: Kind of entries to return.
    type: str
    choices: [any, directory, file, link]
    default: file
  hidden:
    description: Return hidden entries too.
    type: bool
    default: false
  get_checksum:
    description: Add the SHA-1 of each regular file (C(checksum)).
    type: bool
    default: false
  recurse:
    description: Search the folders' subfolders too.
    type: bool
    default: false
  depth:
    description: With O(recurse), how many levels of subfolders.
    type: int
seealso:
  - module: ansible.builtin.find
author:
  - ddp.cluster maintainers (@ddp-cluster)
extends_documentation_fragment:
  - ddp.cluster.health.read_only
"""

EXAMPLES = r"""
- name: Read the program and its folder before installing them
  ddp.cluster.installed_files:
    paths: [/opt/ddp, /opt/ddp/bin]
    patterns: [bin, ddp-health]
    file_type: any
    get_checksum: true
  register: found

- name: Create the folder only where it is missing or differs
  ansible.builtin.file:
    path: /opt/ddp/bin
    state: directory
    mode: "0755"
  when: "'/opt/ddp/bin' in found.files | ddp.cluster.paths_todo([{'path': '/opt/ddp/bin', 'state': 'directory'}])"
"""

RETURN = r"""
files:
  description: What M(ansible.builtin.find) returns in C(files) (path, isreg, isdir, mode, pw_name, gr_name, checksum, ...).
  returned: success
  type: list
  elements: dict
  sample: [{"path": "/opt/ddp/bin", "isdir": true, "mode": "0755", "pw_name": "root", "gr_name": "root"}]
not_directories:
  description: Folders of O(paths) that do not exist or are not folders, sorted.
  returned: success
  type: list
  elements: str
  sample: ["/opt/ddp/bin"]
skipped_paths:
  description: find's C(skipped_paths), every folder it could not search with the reason, those above included.
  returned: success
  type: dict
  sample: {"/opt/ddp/bin": "'/opt/ddp/bin' is not a directory"}
examined:
  description: Entries find looked at.
  returned: success
  type: int
  sample: 12
matched:
  description: Entries returned in RV(files).
  returned: success
  type: int
  sample: 3
"""
