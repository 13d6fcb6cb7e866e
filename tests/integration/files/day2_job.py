"""A small training job that must live through a day-2 change (tests/integration/test_day2_*.py).

Started by ddp-torchrun.sbatch on every node of its allocation (torchrun, Gloo on CPU): all-reduces a tensor every
half second until --stop-file exists on rank 0's node (the test makes it once its change is done; all ranks stop at
the same step) or --seconds have passed, then imports a part of torch it had not loaded yet (the stack it started from must still
be there after a re-run switched the environment), checks the result of the all-reduces, and prints one JSON line
per rank: rank, world size, steps, torch's version, the environment's folder and the file torch was loaded from. Exit 0 only if all held.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--stop-file", default=None)
    args = parser.parse_args()
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    started, steps = time.time(), 0
    value = torch.ones(256)
    while True:
        stop = torch.zeros(1)
        if rank == 0 and (time.time() - started >= args.seconds or (args.stop_file and os.path.exists(args.stop_file))):
            stop += 1
        dist.all_reduce(stop)
        if stop.item() > 0:
            break
        dist.all_reduce(value)
        value /= world
        steps += 1
        time.sleep(0.5)
    # Loaded only now: a module of the torch folder this job started from (a switched environment must not matter).
    late = "torch.utils.show_pickle"
    assert late not in sys.modules, late
    importlib.import_module(late)
    ok = bool(torch.allclose(value, torch.ones(256)))
    print(json.dumps({"rank": rank, "world": world, "steps": steps, "torch": torch.__version__, "ok": ok,
                      "folder": os.path.realpath(sys.prefix),
                      "torch_file": os.path.realpath(torch.__file__)}), flush=True)
    dist.destroy_process_group()
    return 0 if ok and steps > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
