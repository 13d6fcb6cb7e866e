"""ddp_env_users.py (roles/pytorch_env/files): which old stack folders running processes still use."""
from __future__ import annotations

import json
import os

from role_files import load

users = load("pytorch_env", "ddp_env_users.py")

OLD = "/opt/ddp/venv.d/torch-2.13.0-aaaaaaaaaa"
OTHER = "/opt/ddp/venv.d/torch-2.13.0-bbbbbbbbbb"


def proc(tmp_path, pid, maps=b"", cmdline=b"", environ=b""):
    folder = tmp_path / str(pid)
    folder.mkdir()
    (folder / "maps").write_bytes(maps)
    (folder / "cmdline").write_bytes(cmdline)
    (folder / "environ").write_bytes(environ)
    return folder


def test_a_process_is_a_user_by_its_mapped_files_command_line_or_virtual_env(tmp_path):
    proc(tmp_path, 101, maps=("7f0-7f1 r-xp 0 08:01 5 %s/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so\n"
                              % OLD).encode())
    proc(tmp_path, 102, cmdline=("%s/bin/python\0train.py\0" % OLD).encode())
    proc(tmp_path, 103, environ=("HOME=/home/ddp\0VIRTUAL_ENV=%s\0" % OLD).encode())
    proc(tmp_path, 104, environ=("VIRTUAL_ENV=%s-longer\0" % OLD).encode(), cmdline=b"/usr/bin/sleep\0100\0")
    (tmp_path / "self").mkdir()  # not a pid: ignored
    assert users.users([OLD, OTHER + "/"], proc_root=str(tmp_path)) == {OLD: [101, 102, 103], OTHER: []}


def test_a_process_that_cannot_be_read_keeps_every_folder_and_one_that_ended_is_skipped(tmp_path, monkeypatch):
    proc(tmp_path, 7)
    proc(tmp_path, 8)
    real = users._read

    def read(path):
        if path.endswith(os.path.join("7", "environ")):
            raise PermissionError(13, "Permission denied", path)
        if path.endswith(os.path.join("8", "maps")):
            raise FileNotFoundError(2, "No such file or directory", path)
        return real(path)

    monkeypatch.setattr(users, "_read", read)
    assert users.users([OLD, OTHER], proc_root=str(tmp_path)) == {OLD: [7], OTHER: [7]}


def test_this_scripts_own_process_is_not_a_user(tmp_path):
    # Ansible's script module runs it as `python3 ddp_env_users.py DIR`: its own command line names the folder.
    proc(tmp_path, os.getpid(), cmdline=("/usr/bin/python3\0ddp_env_users.py\0%s\0" % OLD).encode())
    proc(tmp_path, 1, cmdline=("/usr/bin/python3\0ddp_env_users.py\0%s\0" % OLD).encode())
    assert users.users([OLD], proc_root=str(tmp_path)) == {OLD: [1]}


def test_main_prints_json_and_refuses_relative_paths(capsys):
    assert users.main(["relative/dir"]) == 2
    assert users.main([OLD]) == 0
    assert OLD in json.loads(capsys.readouterr().out)
