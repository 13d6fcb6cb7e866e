# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Serve a wheelhouse as a PEP 503 package index for the nodes, for a bounded time (runs on the controller).

The pytorch_env role starts it when a node lacks a package, so that every node's pip downloads only the
wheels it needs, each checked against the sha256 in the link (PEP 503: ``#sha256=`` fragment; pip refuses a
file whose digest differs), instead of the whole wheelhouse being copied to every node through the Ansible
connection. Air-gapped sites serve their own mirrors the same way.

Layout served (PEP 503, "Simple Repository API"):

* ``/simple/``: one anchor per project (normalized name, PEP 503 "Normalized Names");
* ``/simple/<project>/``: one anchor per file, ``../../files/<file>#sha256=<hex>``;
* ``/files/<file>``: the file, only for files listed at start (no path from the request reaches the disk).

Usage::

    ddp_wheelhouse_index.py serve --directory DIR --state FILE (--bind ADDR | --toward NODE_ADDR ...)
                                  [--port 0] [--idle-exit 300] [--max-life 3600]
    ddp_wheelhouse_index.py stop --state FILE [--remove-dir]

``serve`` binds the address the controller's kernel would use to reach the given node addresses (``--toward``:
all must agree; no packet is sent), or ``--bind``; port 0 takes a free port. Once listening it writes the state
file (JSON: ``url``, ``pid``, ``address``, ``port``, ``files``; ``error`` alone when it cannot serve). It exits after ``--idle-exit`` seconds without a
request, after ``--max-life`` seconds in all, or on SIGTERM (``stop``), and removes the state file.
Exit status: 0 after serving, 2 for bad arguments or nothing to serve (the message says which).
"""
from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote

ARCHIVES = (".whl", ".tar.gz", ".zip")


def normalize(name):
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def project_of(filename):
    """Project name of a distribution file name (wheel: PEP 427 ``{name}-{version}-...``; sdist: ``{name}-{version}``)."""
    if filename.endswith(".whl"):
        return normalize(filename.split("-", 1)[0])
    stem = filename[:-len(".tar.gz")] if filename.endswith(".tar.gz") else filename[:-len(".zip")]
    return normalize(stem.rsplit("-", 1)[0])


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def scan(directory):
    """``{filename: {"path", "sha256", "project"}}`` of the distribution files directly in ``directory``."""
    files = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.startswith(".") or not name.endswith(ARCHIVES) or not os.path.isfile(path):
            continue
        files[name] = {"path": path, "sha256": sha256_of(path), "project": project_of(name)}
    return files


def pages(files):
    """``{url_path: html bytes}`` of the PEP 503 index over ``files`` (from :func:`scan`)."""
    projects = {}
    for name, info in files.items():
        projects.setdefault(info["project"], []).append(name)

    def page(title, anchors):
        body = "\n".join('<a href="%s">%s</a><br/>' % (html.escape(href, quote=True), html.escape(text))
                         for href, text in anchors)
        return ('<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" content="1.0">'
                "<title>%s</title></head><body>\n%s\n</body></html>\n" % (html.escape(title), body)).encode()

    out = {"/simple/": page("Simple index", [(p + "/", p) for p in sorted(projects)])}
    for project, names in projects.items():
        out["/simple/%s/" % project] = page("Links for " + project, [
            ("../../files/%s#sha256=%s" % (quote(n), files[n]["sha256"]), n) for n in sorted(names)])
    return out


def source_address(peers):
    """The local address the kernel routes from toward every peer (UDP connect sends nothing).

    :raises ValueError: when the peers are reached from different local addresses (the message names them).
    """
    found = {}
    for peer in peers:
        family = socket.AF_INET6 if ":" in peer else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((peer, 9))
            found.setdefault(probe.getsockname()[0], []).append(peer)
    if len(found) != 1:
        raise ValueError("the nodes are reached from different local addresses: %s"
                         % "; ".join("%s for %s" % (a, ", ".join(p)) for a, p in sorted(found.items())))
    return next(iter(found))


class _Handler(BaseHTTPRequestHandler):
    server_version = "ddp-wheelhouse"
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        """Quiet: the role reports what pip installed."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.server.touch()
        path = unquote(self.path.split("?", 1)[0].split("#", 1)[0])
        if path in self.server.pages:
            body = self.server.pages[path]
            self._head(200, "text/html; charset=utf-8", len(body))
            self.wfile.write(body)
        elif path.startswith("/files/") and path[len("/files/"):] in self.server.files:
            info = self.server.files[path[len("/files/"):]]
            self._head(200, "application/octet-stream", os.path.getsize(info["path"]))
            with open(info["path"], "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    self.wfile.write(block)
                    self.server.touch()
        else:
            self._head(404, "text/plain", 0)

    def _head(self, status, kind, length):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(length))
        self.end_headers()


class IndexServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, files):
        self.files = files
        self.pages = pages(files)
        self.last = time.monotonic()
        super().__init__(address, _Handler)

    def touch(self):
        self.last = time.monotonic()


def _write_state(path, state):
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(state, handle)
    os.replace(tmp, path)


def _refuse(args, message):
    """Exit status 2, with the reason on stderr and in the state file (whoever waits for it reads it there)."""
    print("ddp_wheelhouse_index: " + message, file=sys.stderr)
    _write_state(args.state, {"error": message})
    return 2


def serve(args):
    if not os.path.isdir(args.directory):
        return _refuse(args, "%s is not a directory" % args.directory)
    files = scan(args.directory)
    if not files:
        return _refuse(args, "no wheels in %s" % args.directory)
    try:
        address = args.bind or source_address(args.toward)
    except (ValueError, OSError) as exc:
        return _refuse(args, "cannot choose an address to listen on toward %s: %s"
                       % (" ".join(args.toward or ()), exc))
    IndexServer.address_family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        server = IndexServer((address, args.port), files)
    except OSError as exc:
        return _refuse(args, "cannot listen on %s port %d: %s" % (address, args.port, exc))
    port = server.server_address[1]
    host = "[%s]" % address if ":" in address else address
    _write_state(args.state, {"url": "http://%s:%d/simple/" % (host, port), "pid": os.getpid(), "address": address,
                              "port": port, "files": len(files)})
    started = time.monotonic()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    try:
        while not stop.wait(0.5):
            now = time.monotonic()
            if now - server.last > args.idle_exit or now - started > args.max_life:
                break
    finally:
        server.shutdown()
        server.server_close()
        try:
            os.unlink(args.state)
        except FileNotFoundError:
            pass
    return 0


def stop(args):
    """SIGTERM the server named in the state file, if it is still this program; wait for it to go.

    With ``--remove-dir``, also remove the state file's folder (a temporary folder the caller made for it).
    """
    try:
        return _stop(args)
    finally:
        if args.remove_dir:
            shutil.rmtree(os.path.dirname(os.path.abspath(args.state)), ignore_errors=True)


def _stop(args):
    try:
        with open(args.state) as handle:
            pid = int(json.load(handle)["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        print("no server (no readable state file %s)" % args.state)
        return 0
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            cmdline = handle.read().decode(errors="replace")
    except OSError:
        cmdline = ""
    if os.path.basename(__file__) not in cmdline:
        print("no server (process %d is gone)" % pid)
        return 0
    os.kill(pid, signal.SIGTERM)
    for _attempt in range(50):
        if not os.path.exists("/proc/%d" % pid) or not os.path.exists(args.state):
            break
        time.sleep(0.1)
    print("stopped %d" % pid)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("serve", help="serve a wheelhouse as a PEP 503 index")
    run.add_argument("--directory", required=True, help="the wheelhouse (distribution files directly in it)")
    run.add_argument("--state", required=True, help="JSON file written once listening, removed on exit")
    where = run.add_mutually_exclusive_group(required=True)
    where.add_argument("--bind", help="address to listen on")
    where.add_argument("--toward", nargs="+", help="node addresses: listen on the local address that reaches them")
    run.add_argument("--port", type=int, default=0, help="TCP port (0: a free one)")
    run.add_argument("--idle-exit", type=float, default=300.0, help="seconds without a request before exiting")
    run.add_argument("--max-life", type=float, default=3600.0, help="seconds before exiting in any case")
    halt = sub.add_parser("stop", help="stop the server named in a state file")
    halt.add_argument("--state", required=True)
    halt.add_argument("--remove-dir", action="store_true", help="also remove the state file's folder")
    args = parser.parse_args(argv)
    return serve(args) if args.command == "serve" else stop(args)


if __name__ == "__main__":
    sys.exit(main())
