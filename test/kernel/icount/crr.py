#!/usr/bin/env python3
"""Connect-request-response for the icount benchmark: a new TCP connection per 64-byte exchange.

    crr.py server PORT             accept, read 64 bytes, send them back, wait for the client to
                                   close, close (dual-stack)
    crr.py client HOST PORT SECS   one connection after another for SECS seconds; prints
                                   `crr HOST:PORT: N connections whole, M failed, S stalled,
                                   R per second`

The client closes first, as an HTTP/1.0 client does, so the TIME_WAIT would be the client's.
The benchmark keeps none (lib.sh sets net.ipv4.tcp_max_tw_buckets=0 in the client's
namespace): TIME_WAIT sockets carried from one sample to the next made each repeat slower than
the one before (3160, 2996, 2953 connections a second in a row, 8,192 TIME_WAIT sockets).

A connection that takes longer than STALL seconds (guest time) is stalled: a retransmitted SYN
waits a whole second. The benchmark takes a sample with any failed or stalled connection as a
failure, never as a slower sample.

Python rather than Node (test/kernel/traffic.ts) because under icount a throughput is only
comparable between runs if the program's own work repeats: Node's JIT and garbage collector
do not (Node clients spread by 7-13 % between repeats here); CPython's interpreter does.
"""
import socket
import sys
import time

PAYLOAD = b"x" * 64
STALL = 0.2


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
    ok = failed = stalled = 0
    start = time.monotonic()
    while time.monotonic() - start < secs:
        began = time.monotonic()
        connected = sport = None
        try:
            with socket.create_connection((host, port), timeout=2) as s:
                connected = time.monotonic()
                sport = s.getsockname()[1]
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.sendall(PAYLOAD)
                if read_exactly(s, len(PAYLOAD)) == PAYLOAD:
                    ok += 1
                else:
                    failed += 1
        except OSError as e:
            failed += 1
            print(f"crr: failed: port {sport}: {e}", file=sys.stderr)
        took = time.monotonic() - began
        if took > STALL:
            stalled += 1
            phase = f"connect {connected - began:.3f} s" if connected else "no connection"
            print(f"crr: stalled: port {sport}: {took:.3f} s ({phase})", file=sys.stderr)
    elapsed = time.monotonic() - start
    print(f"crr {host}:{port}: {ok} connections whole, {failed} failed, {stalled} stalled, {ok / elapsed:.1f} per second")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "server":
        server(int(sys.argv[2]))
    elif len(sys.argv) == 5 and sys.argv[1] == "client":
        client(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(__doc__)
