# Copyright: contributors to ddp.cluster
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time torch.distributed.all_reduce over a sweep of sizes; report algbw and busbw per size.

Installed by the pytorch_env role as <env>/share/ddp-cluster/ddp_nccl_allreduce.py and run by the
ddp.cluster.nccl_health module (mode torch) on every node at once, under torchrun::

    torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HEAD:PORT \\
        --rdzv-id RUN ddp_nccl_allreduce.py --output /tmp/result.json

or, with one process per node, without torchrun's agent (one torch import per node instead of two): the caller sets
RANK, WORLD_SIZE, LOCAL_RANK=0, LOCAL_WORLD_SIZE=1, GROUP_RANK, MASTER_ADDR and MASTER_PORT (rank 0 on the host
MASTER_ADDR names) and passes ``--join-timeout SECONDS``: rank 0 then hosts the c10d TCPStore on MASTER_PORT and waits
that long for every rank to connect, and each other rank as long for rank 0's store (torch.distributed.TCPStore).

algbw = bytes / time (GB/s, 1e9); busbw = algbw * 2(n-1)/n, the all-reduce factor of nccl-tests
doc/PERFORMANCE.md. time is the slowest rank's mean over --iters calls after --warmup calls.
Correctness: once per size, each rank contributes rank+1; every element must equal n(n+1)/2.
Every node's LOCAL_RANK 0 writes the same JSON to --output. A refusal is one line on stderr,
``ddp_nccl_allreduce.py: error: ...``, and exit status 2.

Python 3.8+, standard library + torch; ddp_dist.py (gathering and writing the result, shared with the
benchmark's ddp_bench.py) from the same folder.
"""
from __future__ import annotations

import argparse
import datetime
import os
import socket
import sys
import time

try:  # beside this file (pytorch_env installs both in <env>/share/ddp-cluster)
    from ddp_dist import all_gather_objects, write_json_atomic
except ImportError:  # a copy elsewhere (nccl_health's script option) still runs with the environment's Python
    sys.path.append(os.path.join(sys.prefix, "share", "ddp-cluster"))
    from ddp_dist import all_gather_objects, write_json_atomic

PROG = "ddp_nccl_allreduce.py"


class TestError(Exception):
    pass


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog=PROG)
    p.add_argument("--sizes", default="1048576,4194304,16777216", help="comma-separated message sizes in bytes")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    p.add_argument("--timeout", type=int, default=300, help="init_process_group timeout, seconds")
    p.add_argument("--join-timeout", type=int, default=None,
                   help="launched without torchrun: seconds rank 0's TCPStore waits for every rank (and they for it)")
    p.add_argument("--output", required=True)
    return p.parse_args(argv)


def nccl_version(torch):
    if not torch.cuda.is_available():
        return None
    try:
        v = torch.cuda.nccl.version()
    except Exception:
        return None
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def run(args):
    env = os.environ
    try:
        rank, local_rank = int(env["RANK"]), int(env["LOCAL_RANK"])
        world_size = int(env["WORLD_SIZE"])
        local_world = int(env.get("LOCAL_WORLD_SIZE", "1"))
        group_rank = int(env.get("GROUP_RANK", "0"))
    except (KeyError, ValueError) as exc:
        raise TestError("missing or bad torchrun environment (%s); launch with torchrun" % exc)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        raise TestError("--sizes must be comma-separated integers, got %r" % args.sizes)
    if not sizes or min(sizes) < 4 or args.iters < 1 or args.warmup < 0:
        raise TestError("need sizes >= 4 bytes, --iters >= 1 and --warmup >= 0")
    if args.join_timeout is not None:
        if args.join_timeout < 1:
            raise TestError("--join-timeout must be >= 1 second, got %d" % args.join_timeout)
        try:
            master = (env["MASTER_ADDR"], int(env["MASTER_PORT"]))
        except (KeyError, ValueError) as exc:
            raise TestError("--join-timeout needs MASTER_ADDR and MASTER_PORT (rank 0's host and port): %s" % exc)

    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    backend = args.backend if args.backend != "auto" else ("nccl" if cuda else "gloo")
    if backend == "nccl" and not cuda:
        raise TestError("backend nccl needs CUDA, but torch.cuda.is_available() is False (torch %s)"
                        % torch.__version__)
    on_gpu = backend == "nccl"
    if on_gpu:
        if local_rank >= torch.cuda.device_count():
            raise TestError("LOCAL_RANK %d but only %d CUDA device(s) visible"
                            % (local_rank, torch.cuda.device_count()))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")

    def sync():
        if on_gpu:
            torch.cuda.synchronize(device)

    def barrier():
        if on_gpu:
            dist.barrier(device_ids=[local_rank])
        else:
            dist.barrier()

    timeout = datetime.timedelta(seconds=args.timeout)
    if args.join_timeout is None:  # under torchrun: its agent made the rendezvous, env:// finds its store
        dist.init_process_group(backend=backend, timeout=timeout)
    else:
        # Rank 0 hosts the store and waits for every rank to connect (wait_for_workers); the others retry connecting
        # to it. Either gives up after --join-timeout with torch's own error (DistStoreError, DistNetworkError).
        store = dist.TCPStore(master[0], master[1], world_size, rank == 0,
                              timeout=datetime.timedelta(seconds=args.join_timeout), wait_for_workers=True)
        store.set_timeout(timeout)
        dist.init_process_group(backend=backend, store=store, rank=rank, world_size=world_size, timeout=timeout)
    try:
        factor = 2.0 * (world_size - 1) / world_size
        expected = world_size * (world_size + 1) / 2.0
        results = []
        for size in sizes:
            count = size // 4
            nbytes = count * 4
            check = torch.full((count,), float(rank + 1), dtype=torch.float32, device=device)
            dist.all_reduce(check)
            wrong = torch.tensor([int((check != expected).sum().item())], dtype=torch.float64, device=device)
            del check
            buf = torch.zeros(count, dtype=torch.float32, device=device)
            for _w in range(args.warmup):
                dist.all_reduce(buf)
            sync()
            barrier()
            t0 = time.perf_counter()
            for _i in range(args.iters):
                dist.all_reduce(buf)
            sync()
            elapsed = torch.tensor([(time.perf_counter() - t0) / args.iters], dtype=torch.float64, device=device)
            del buf
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            dist.all_reduce(wrong)
            seconds = float(elapsed.item())
            algbw = nbytes / seconds / 1e9
            results.append({
                "bytes": nbytes, "count": count, "type": "float", "redop": "sum",
                "time_us": round(seconds * 1e6, 3), "algbw_gbps": round(algbw, 6),
                "busbw_gbps": round(algbw * factor, 6), "wrong": int(wrong.item()),
            })
        mine = {
            "rank": rank, "local_rank": local_rank, "group_rank": group_rank, "host": socket.gethostname(),
            "nccl_version": nccl_version(torch) if on_gpu else None,
            "device": torch.cuda.get_device_name(device) if on_gpu else "cpu",
        }
        ranks = sorted(all_gather_objects(torch, dist, mine, device, world_size), key=lambda r: r["rank"])
        hosts, versions, devices = {}, {}, {}
        for r in ranks:
            hosts.setdefault(r["host"], []).append(r["rank"])
            versions[r["host"]] = r["nccl_version"]
            devices.setdefault(r["host"], r["device"])
        result = {
            "schema_version": 1,
            "op": "all_reduce",
            "dtype": "float32",
            "backend": backend,
            "world_size": world_size,
            "nnodes": len({r["group_rank"] for r in ranks}),
            "nproc_per_node": local_world,
            "iterations": args.iters,
            "warmup": args.warmup,
            "busbw_factor": factor,
            "results": results,
            "avg_busbw_gbps": round(sum(r["busbw_gbps"] for r in results) / len(results), 6),
            "hosts": hosts,
            "devices": devices,
            "nccl_versions": versions,
            "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda,
        }
        if local_rank == 0:
            write_json_atomic(args.output, result, prefix=".nccl_health.")
        barrier()
        return result
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def main(argv=None):
    args = parse_args(argv)
    try:
        run(args)
    except TestError as exc:
        print("%s: error: %s" % (PROG, exc), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
