"""Run fastapi_app:app under uvicorn with N worker processes on one port.

    python3 serve_fastapi.py --port 8081 --workers 2 [--shared-socket]

This is `uvicorn --workers N` done by hand so the sockets can be tuned the
way a production deployment would be:

* One listening socket per worker process, all bound to the port with
  SO_REUSEPORT (what `gunicorn --reuse-port` does), so the kernel spreads
  connections over the workers. With `uvicorn --workers N`'s single shared
  socket (--shared-socket here) every worker's event loop wakes for a burst
  of new connections and the first one accepts all it can: wrk's 32
  connections, opened at once, often land mostly on one worker, and half
  of the CPUs stay idle (measured here: 5,000 instead of 11,000 req/s at
  c=32, depending on the run).
* TCP_NODELAY on the listening sockets; Linux copies it to every accepted
  socket. Without it, a response written in two pieces (headers, then body)
  waits for the client's delayed ACK, ~40 ms per request. uvloop sets
  TCP_NODELAY on its own, but asyncio does not on a socket it did not create
  (`uvicorn --workers N` pre-binds one, and asyncio only sets it when the
  socket's proto field says TCP, which a plain socket() leaves at 0), so
  with asyncio + h11 every request of stock `uvicorn --workers 2` takes
  ~44 ms at concurrency 1.
* uvloop and httptools when installed (Debian: python3-uvloop,
  python3-httptools), no access log, warning-level logging, no lifespan.

Each worker imports fastapi_app (so model_fn runs once per worker). Stop the
server by signalling its process group.
"""

import argparse
import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _have(mod):
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


def _listen(args, reuse_port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    if not args.no_nodelay:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((args.host, args.port))
    sock.listen(2048)
    return sock


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--loop", default="auto", help="auto (uvloop if installed), uvloop or asyncio")
    p.add_argument("--http", default="auto", help="auto (httptools if installed), httptools or h11")
    p.add_argument("--no-nodelay", action="store_true", help="leave Nagle on (to show the stall)")
    p.add_argument("--shared-socket", action="store_true",
                   help="one socket shared by the workers, as `uvicorn --workers N` does")
    args = p.parse_args()

    sys.path.insert(0, HERE)
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    loop = args.loop if args.loop != "auto" else ("uvloop" if _have("uvloop") else "asyncio")
    http = args.http if args.http != "auto" else ("httptools" if _have("httptools") else "h11")
    print(
        "uvicorn %s: loop=%s http=%s workers=%d tcp_nodelay=%s sockets=%s"
        % (uvicorn.__version__, loop, http, args.workers, not args.no_nodelay,
           "shared" if args.shared_socket else "one per worker (SO_REUSEPORT)"),
        flush=True,
    )
    config = uvicorn.Config(
        "fastapi_app:app",
        host=args.host,
        port=args.port,
        workers=args.workers,
        loop=loop,
        http=http,
        access_log=False,
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config=config)
    if args.shared_socket:
        sock = _listen(args, reuse_port=False)
        sock.set_inheritable(True)
        if args.workers > 1:
            Multiprocess(config, target=server.run, sockets=[sock]).run()
        else:
            server.run(sockets=[sock])
        return

    # Bind every socket before forking, so the port is complete when the
    # first worker answers; each worker then serves its own.
    socks = [_listen(args, reuse_port=True) for _ in range(args.workers)]
    children = []
    for i, sock in enumerate(socks):
        pid = os.fork()
        if pid == 0:
            for j, other in enumerate(socks):
                if j != i:
                    other.close()
            server.run(sockets=[sock])
            os._exit(0)
        children.append(pid)
    for sock in socks:
        sock.close()
    status = 0
    for pid in children:
        _, st = os.waitpid(pid, 0)
        status = status or os.waitstatus_to_exitcode(st)
    sys.exit(status)


if __name__ == "__main__":
    main()
