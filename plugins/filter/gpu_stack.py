# -*- coding: utf-8 -*-
# Copyright: (c) 2024, ddp.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that plan the system GPU stack (driver, CUDA toolkit, cuDNN, NCCL) and read the node-side outputs.

gpu_stack_plan, nccl_select_build, kernel_devel_plan, secure_boot_state, secure_boot_problems,
nvcc_release, dnf_enabled_stream, dnf_stream_problems, nouveau_actions. Documentation lives in the sidecar files
plugins/filter/<filter name>.yml. The pure logic is in module_utils/gpu/stack.py and
module_utils/system/kernel.py; the matrix is read by compat.py's loader (controller side).
"""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.ddp.cluster.plugins.plugin_utils.compat_data import compat_resolve, load_matrix_file, plain
from ansible_collections.ddp.cluster.plugins.module_utils.gpu import stack as gpu_stack
from ansible_collections.ddp.cluster.plugins.module_utils.system import kernel


def _device_ids(device_ids):
    """List of ids; dicts from hardware_facts (nvidia_gpus) give their device_id."""
    if device_ids is None:
        return []
    if isinstance(device_ids, (str, int)):
        device_ids = [device_ids]
    out = []
    for item in plain(device_ids):
        if isinstance(item, dict):
            if 'device_id' not in item:
                raise AnsibleFilterError('device_ids: a dict needs device_id (as in hardware_facts nvidia_gpus), got %s'
                                         % sorted(item))
            item = item['device_id']
        out.append(item)
    return out


def _text(value):
    if value is None:
        return ''
    if isinstance(value, (list, tuple)):
        return '\n'.join(str(v) for v in value)
    return str(value)


def gpu_stack_plan(spec, os_family, distribution, os_major, device_ids=None, branch='auto', flavor='auto',
                   cudnn='auto', nccl='auto', source='nvidia'):
    """spec {torch, torchvision, cuda, driver} -> system_stack_plan(...) + stack + compat problems first."""
    resolved = compat_resolve(spec)
    try:
        plan = gpu_stack.system_stack_plan(
            load_matrix_file(), resolved['stack'], str(os_family), str(distribution), str(os_major), _device_ids(device_ids),
            branch=plain(branch), flavor=plain(flavor), cudnn=plain(cudnn), nccl=plain(nccl),
            source=plain(source))
    except ValueError as exc:
        raise AnsibleFilterError('gpu_stack_plan: %s' % exc)
    own = plan['problems']
    if resolved['problems'] and resolved['stack'].get('cuda') is None:
        # the torch request did not resolve: its problems say why, "no CUDA" would repeat it
        own = [p for p in own if p['code'] != 'GPU_STACK_NO_CUDA']
    plan['problems'] = list(resolved['problems']) + own
    plan['ok'] = not plan['problems']
    plan['stack'] = resolved['stack']
    return plan


def nccl_select_build(text, nccl_version, cuda, os_family):
    """apt-cache madison (Debian) / dnf --showduplicates list (RedHat) text -> select_nccl_build's dict."""
    if os_family == 'Debian':
        rows = gpu_stack.parse_apt_madison(_text(text))
    elif os_family == 'RedHat':
        rows = gpu_stack.parse_dnf_showduplicates(_text(text))
    else:
        raise AnsibleFilterError('nccl_select_build: os_family must be Debian or RedHat, got %r' % (os_family,))
    runtime = gpu_stack.nccl_package_names(os_family, devel=False)[0]
    if any(row['package'] == runtime for row in rows):
        rows = [row for row in rows if row['package'] == runtime]
    try:
        return gpu_stack.select_nccl_build(rows, plain(nccl_version), plain(cuda))
    except ValueError as exc:
        raise AnsibleFilterError('nccl_select_build: %s' % exc)


def kernel_devel_plan(uname_r, os_family, installed, available):
    """uname -r, os_family, installed header packages, what the repositories offer -> kernel_devel_plan's dict."""
    if isinstance(available, str) and available.strip().lower() in ('true', 'false', 'yes', 'no'):
        available = boolean(available)
    elif not isinstance(available, bool):
        available = _text(plain(available))
    try:
        return kernel.kernel_devel_plan(str(os_family), str(uname_r).strip(), _text(plain(installed)), available)
    except ValueError as exc:
        raise AnsibleFilterError('kernel_devel_plan: %s' % exc)


def secure_boot_state(stdout, rc=0):
    """mokutil --sb-state output and exit code -> enabled / disabled / unsupported / unknown."""
    return kernel.parse_mokutil_sb_state(_text(stdout), None if rc is None else int(rc))


def secure_boot_problems(state, signing_configured=False):
    """secure_boot_state result, module signing configured? -> [] or [SECURE_BOOT_UNSIGNED]."""
    return kernel.secure_boot_problems(str(state), boolean(signing_configured))


def nvcc_release(text):
    """nvcc --version output -> {release, version} or None."""
    return gpu_stack.parse_nvcc_version(_text(text))


def dnf_enabled_stream(text, module='nvidia-driver'):
    """dnf module list output -> the enabled stream of module, or None."""
    return gpu_stack.parse_dnf_module_enabled(_text(text), str(module))


def dnf_stream_problems(text, wanted, module='nvidia-driver'):
    """dnf module list output, the plan's stream -> [] or [DNF_STREAM_CONFLICT]."""
    enabled = gpu_stack.parse_dnf_module_enabled(_text(text), str(module))
    return gpu_stack.stream_conflict_problems(enabled, None if wanted is None else str(wanted))


def nouveau_actions(conf_changed, nouveau_loaded, initramfs_has_conf=None):
    """C12: blacklist changed?, nouveau loaded?, blacklist in the initramfs (or None) -> rebuild / reboot."""
    has_conf = None if initramfs_has_conf is None or initramfs_has_conf == '' else boolean(initramfs_has_conf)
    return gpu_stack.nouveau_actions(boolean(conf_changed), boolean(nouveau_loaded), has_conf)


class FilterModule(object):
    """ddp.cluster GPU stack filters."""

    def filters(self):
        return {
            'gpu_stack_plan': gpu_stack_plan,
            'nccl_select_build': nccl_select_build,
            'kernel_devel_plan': kernel_devel_plan,
            'secure_boot_state': secure_boot_state,
            'secure_boot_problems': secure_boot_problems,
            'nvcc_release': nvcc_release,
            'dnf_enabled_stream': dnf_enabled_stream,
            'dnf_stream_problems': dnf_stream_problems,
            'nouveau_actions': nouveau_actions,
        }
