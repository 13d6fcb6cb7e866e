# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""accounts_todo, account_home: thin wrappers over plugins/module_utils/system/accounts.py (pure, unit-tested)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils.system import accounts


def accounts_todo(listing, groups=None, users=None):
    """{groups, users} still to create or change, from ``getent passwd ...; echo '--- group'; getent group ...``."""
    try:
        return accounts.accounts_todo(listing, list(groups or []), list(users or []))
    except (TypeError, KeyError, ValueError) as exc:
        raise AnsibleFilterError("accounts_todo: %s" % exc)


def account_home(listing, name):
    """A user's home folder from the same listing ("" where the user is missing)."""
    try:
        return accounts.account_home(listing, name)
    except TypeError as exc:
        raise AnsibleFilterError("account_home: %s" % exc)


class FilterModule(object):
    """ddp.cluster account filters."""

    def filters(self):
        return {"accounts_todo": accounts_todo, "account_home": account_home}
