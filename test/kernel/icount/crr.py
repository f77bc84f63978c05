#!/usr/bin/env python3
"""Connect-request-response for the icount benchmark: a new TCP connection per 64-byte exchange.

    crr.py server PORT             accept, read 64 bytes, send them back, wait for the client to
                                   close, close (dual-stack)
    crr.py client HOST PORT SECS   one connection after another for SECS seconds; prints
                                   `crr HOST:PORT: N connections whole, M failed, R per second`

The client closes first, as an HTTP/1.0 client does: the TIME_WAIT is the client's, and the
benchmark sets net.ipv4.tcp_tw_reuse=1 in the client's namespace so its ports come round
again (a server that closed first would still hold the 4-tuple in TIME_WAIT when the client
reused the port, and connections would stall on retransmitted SYNs).

Python rather than Node (test/kernel/traffic.ts) because under icount a throughput is only
comparable between runs if the program's own work repeats: Node's JIT and garbage collector
do not (Node clients spread by 7-13 % between repeats here); CPython's interpreter does.
"""
import socket
import sys
import time

PAYLOAD = b"x" * 64


def read_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def server(port: int) -> None:
    srv = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    srv.bind(("::", port))
    srv.listen(128)
    while True:
        conn, _ = srv.accept()
        try:
            conn.sendall(read_exactly(conn, len(PAYLOAD)))
            conn.recv(1)  # the client's FIN
        except OSError:
            pass
        conn.close()


def client(host: str, port: int, secs: float) -> None:
    ok = failed = 0
    start = time.monotonic()
    while time.monotonic() - start < secs:
        try:
            with socket.create_connection((host, port), timeout=2) as s:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.sendall(PAYLOAD)
                if read_exactly(s, len(PAYLOAD)) == PAYLOAD:
                    ok += 1
                else:
                    failed += 1
        except OSError:
            failed += 1
    elapsed = time.monotonic() - start
    print(f"crr {host}:{port}: {ok} connections whole, {failed} failed, {ok / elapsed:.1f} per second")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "server":
        server(int(sys.argv[2]))
    elif len(sys.argv) == 5 and sys.argv[1] == "client":
        client(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(__doc__)
