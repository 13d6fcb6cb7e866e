"""ddp_train.py (roles/slurm/files): the checkpoint files, their atomic writes and the replay count, without torch.

The training itself (torchrun, Gloo, a resume on another world size, a save killed half-way) is run for real in
tests/integration/test_ddp_train_script.py.
"""
from __future__ import annotations

import json
import os

import pytest

from role_files import load

train = load("slurm", "ddp_train.py")


def test_checkpoint_names_sort_by_step():
    assert train.checkpoint_name(7) == "step-00000007.pt"
    assert train.CHECKPOINT_RE.match(train.checkpoint_name(123456789)).group(1) == "123456789"


def test_only_files_under_their_final_name_are_checkpoints(tmp_path):
    for name in ("step-00000010.pt", "step-00000020.pt", ".tmp-step-00000030.pt.4242", "progress.json",
                 "step-30.pt", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "step-00000040.pt").mkdir()  # a folder under a checkpoint's name is not one
    found = train.list_checkpoints(str(tmp_path))
    assert found == [(20, str(tmp_path / "step-00000020.pt")), (10, str(tmp_path / "step-00000010.pt"))]
    assert train.list_checkpoints(str(tmp_path / "missing")) == []


def test_write_atomic_replaces_the_whole_file(tmp_path):
    target = tmp_path / "step-00000010.pt"
    train.write_atomic(str(target), b"first")
    train.write_atomic(str(target), b"second, longer")
    assert target.read_bytes() == b"second, longer"
    assert sorted(os.listdir(str(tmp_path))) == ["step-00000010.pt"]


class DiesHalfWay(object):
    """A file object whose write puts half the bytes down (flushed to disk), then stops: :meth:`stop` raises the
    error a failing disk gives; tests/integration/test_ddp_train_script.py ends the process there instead."""

    def __init__(self, path, mode):
        self.handle = open(path, mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()

    def write(self, data):
        self.handle.write(data[: len(data) // 2])
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.stop()

    def stop(self):
        raise OSError(5, "Input/output error")

    def flush(self):
        self.handle.flush()

    def fileno(self):
        return self.handle.fileno()


def test_a_write_that_dies_half_way_leaves_the_old_checkpoint_alone(tmp_path, monkeypatch):
    good = tmp_path / "step-00000010.pt"
    train.write_atomic(str(good), b"complete checkpoint")
    monkeypatch.setattr(train, "open", DiesHalfWay, raising=False)
    with pytest.raises(OSError):
        train.write_atomic(str(tmp_path / "step-00000020.pt"), b"0123456789" * 100)
    monkeypatch.delattr(train, "open")
    # Nothing under the new name, no temporary file, the previous checkpoint as it was: it is the newest.
    assert sorted(os.listdir(str(tmp_path))) == ["step-00000010.pt"]
    assert train.list_checkpoints(str(tmp_path)) == [(10, str(good))]
    assert good.read_bytes() == b"complete checkpoint"


def test_prune_keeps_the_newest_and_drops_leftover_temporary_files(tmp_path):
    for step in (10, 20, 30):
        (tmp_path / train.checkpoint_name(step)).write_bytes(b"x")
    (tmp_path / ".tmp-step-00000040.pt.99").write_bytes(b"half")  # a process killed while saving
    (tmp_path / "progress.json").write_text("{}")
    train.prune(str(tmp_path), keep=2)
    assert sorted(os.listdir(str(tmp_path))) == ["progress.json", "step-00000020.pt", "step-00000030.pt"]


def test_progress_round_trip_and_replayed_steps(tmp_path):
    assert train.read_progress(str(tmp_path)) is None
    train.write_progress(str(tmp_path), 47, 3, clock=lambda: 1000.0)
    assert json.loads((tmp_path / "progress.json").read_text()) == {"step": 47, "time": 1000.0, "world_size": 3}
    progress = train.read_progress(str(tmp_path))
    assert train.replayed_steps(progress, 40) == 7
    assert train.replayed_steps(progress, 47) == 0
    assert train.replayed_steps(None, 40) == 0
    (tmp_path / "progress.json").write_text("{not json")
    assert train.read_progress(str(tmp_path)) is None


def test_options_default_from_the_job_script_environment():
    args = train.parse_args([], environ={"DDP_CHECKPOINT_DIR": "/shared/ckpt/42", "DDP_HANG_TIMEOUT": "45",
                                         "DDP_CHECKPOINT_EVERY": "25"})
    assert (args.checkpoint_dir, args.hang_timeout, args.checkpoint_every) == ("/shared/ckpt/42", 45.0, 25)
    args = train.parse_args(["--checkpoint-every", "5"], environ={})
    assert (args.checkpoint_dir, args.hang_timeout, args.checkpoint_every) == ("", 600.0, 5)
    with pytest.raises(SystemExit):
        train.parse_args(["--steps", "0"], environ={})


def test_launch_env_needs_torchrun():
    with pytest.raises(train.TrainError, match="start this program with torchrun"):
        train.read_launch_env({"RANK": "0"})
    launch = train.read_launch_env({"RANK": "2", "LOCAL_RANK": "0", "WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "1",
                                    "TORCHELASTIC_RESTART_COUNT": "1"})
    assert launch == {"rank": 2, "local_rank": 0, "world_size": 3, "local_world_size": 1, "restart": 1}


def test_main_refuses_a_start_outside_torchrun(capsys):
    assert train.main(["--steps", "1"], environ={}) == 2
    assert "start this program with torchrun" in capsys.readouterr().err


def test_folder_data_without_files_is_refused(tmp_path):
    (tmp_path / "cats").mkdir()
    with pytest.raises(train.TrainError, match="no .pt or image files"):
        train.FolderDataset(str(tmp_path))
    with pytest.raises(train.TrainError, match="not a folder"):
        train.FolderDataset(str(tmp_path / "missing"))
