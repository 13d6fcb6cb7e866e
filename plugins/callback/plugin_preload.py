# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: plugin_preload
type: aggregate
short_description: Load each host's connection, shell and become plugins once, before the workers that use them fork
version_added: 0.3.0
description:
  - >-
    C(ansible-playbook) forks one worker process per task and host. A worker that runs a task (anything but a skipped
    one) loads the host's connection plugin and reads the plugin's option definitions, by parsing the YAML of its
    documentation (C(ansible.builtin.ssh) has over 40 options), unless the main process, which every worker is a
    fork of, holds them already. ansible-core keeps them under the name the plugin was asked for. Its main process
    loads the connection plugins of ansible-core itself at start, under their short names (C(ssh), C(local)): a host
    whose C(ansible_connection) is C(ansible.builtin.ssh), as the local cluster's podman inventory sets it, or a
    collection's plugin (C(containers.podman.podman)), makes every worker parse the definitions again.
  - >-
    This callback loads, in the main process and before the first worker of each host forks (at
    C(v2_runner_on_start), which C(ansible-playbook) sends just before it starts the worker), every connection,
    shell and become plugin that worker may load, under each name it may be asked for (C(ssh) and
    C(ansible.builtin.ssh)): the connection plugins named by the host's C(ansible_connection) where the inventory
    source sets it (the host's own variables or its groups'; group_vars files are read by the worker only), by the
    task's C(connection) keyword and by the configured default (C(DEFAULT_TRANSPORT), C(ssh)); the shell plugins
    C(sh) and the host's C(ansible_shell_type); the become plugins of the task's C(become_method) and the configured
    default (C(DEFAULT_BECOME_METHOD), C(sudo)). Each is loaded once per run. A name given as a template is left to
    the worker, as is a plugin that does not load (the worker then reports the error as it would without this
    callback).
  - >-
    It changes nothing a task does or reports; it only moves work from every worker to the main process, once per
    plugin and name. Measured with C(benchmarks/task_cost.sh) on the local cluster (docs/scale.md): a C(set_fact)
    took 0.7 and a module run 0.8 of the controller's CPU it took without it; a skipped task loads no plugin and
    costs the same.
  - The repository's C(ansible.cfg) enables it (C(callbacks_enabled)); elsewhere add C(ddp.cluster.plugin_preload)
    to C(callbacks_enabled) or to C(ANSIBLE_CALLBACKS_ENABLED).
author:
  - ddp.cluster maintainers (@ddp-cluster)
"""

from ansible import constants as C
from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import become_loader, connection_loader, shell_loader

# A connection named 'smart' is ssh (ansible-core resolves it so before loading a plugin).
_ALIASES = {"smart": "ssh"}


def _literal(value):
    """``value`` as a plugin name when it is a plain non-empty string (no template), else None."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    if not value or "{{" in value or "{%" in value:
        return None
    return _ALIASES.get(value, value)


def _spellings(name):
    """``name`` and its other spelling for an ansible-core plugin: ``ssh`` and ``ansible.builtin.ssh``. ansible-core
    keeps a plugin's option definitions under the name it was asked for, so a plugin loaded as ``ssh`` is parsed
    again when a worker asks for ``ansible.builtin.ssh``. A collection plugin's name is its only spelling; None
    gives nothing."""
    if not name:
        return []
    if "." not in name:
        return [name, "ansible.builtin." + name]
    for prefix in ("ansible.builtin.", "ansible.legacy."):
        if name.startswith(prefix) and "." not in name[len(prefix):]:
            return [name, name[len(prefix):]]
    return [name]


def host_inventory_var(host, name):
    """The value of variable ``name`` for ``host`` as the inventory source set it: the host's own variables first,
    then its groups' in reverse order of ``host.get_groups()`` (a deeper group wins, as in ansible-core's own
    precedence within one inventory). None where neither sets it. ``host`` is an ansible Host (``vars``,
    ``get_groups()``); group_vars and host_vars files are not seen here."""
    own = getattr(host, "vars", None) or {}
    if name in own:
        return own[name]
    for group in reversed(list(host.get_groups())):
        group_vars = getattr(group, "vars", None) or {}
        if name in group_vars:
            return group_vars[name]
    return None


def plugins_for(task_connection, host_connection, host_shell, task_become_method, default_transport,
                default_become_method):
    """The plugins a worker for this task and host may load, as ``(loader kind, name)`` pairs, without repeats.

    ``loader kind`` is ``connection``, ``shell`` or ``become``. Which connection a worker uses depends on variables
    this callback cannot see (group_vars files, for one), so every candidate is listed: the host's
    ``ansible_connection``, the task's ``connection`` keyword and ``default_transport``; the shell is ``host_shell``
    and ``sh``; become is ``task_become_method`` and ``default_become_method``. A value that is a template, empty or
    not a string is skipped (the worker resolves it)."""
    out = []
    for kind, values in (("connection", (host_connection, task_connection, default_transport)),
                         ("shell", (host_shell, "sh")),
                         ("become", (task_become_method, default_become_method))):
        for value in values:
            for name in _spellings(_literal(value)):
                if (kind, name) not in out:
                    out.append((kind, name))
    return out


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "ddp.cluster.plugin_preload"
    CALLBACK_NEEDS_ENABLED = True

    _LOADERS = {"connection": connection_loader, "shell": shell_loader, "become": become_loader}

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._tried = set()

    def v2_runner_on_start(self, host, task):
        wanted = plugins_for(getattr(task, "connection", None), host_inventory_var(host, "ansible_connection"),
                             host_inventory_var(host, "ansible_shell_type"), getattr(task, "become_method", None),
                             C.DEFAULT_TRANSPORT, C.DEFAULT_BECOME_METHOD)
        for kind, name in wanted:
            if (kind, name) in self._tried:
                continue
            self._tried.add((kind, name))
            try:
                self._LOADERS[kind].get(name, class_only=True)
            except Exception as exc:  # pylint: disable=broad-except  # the worker loads it again and reports it
                self._display.vvv("plugin_preload: %s plugin %s not preloaded: %s" % (kind, name, exc))
