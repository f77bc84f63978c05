#!/usr/bin/env python3
"""Connect-request-response for the icount benchmark: a new TCP connection per 64-byte exchange.

    crr.py server PORT             accept, read 64 bytes, send them back, wait for the client to
                                   close, close (dual-stack)
    crr.py client HOST PORT SECS   one connection after another for SECS seconds of busy time
                                   (below; at most 10 x SECS of guest time); prints
                                   `crr HOST:PORT: N connections whole, M failed, S stalled,
                                   R per second, B per busy second (...)`

The client closes first, as an HTTP/1.0 client does, so the TIME_WAIT is the client's. lib.sh
sets net.ipv4.tcp_tw_reuse=1 in the client's namespace, so a port still in TIME_WAIT (at most
the namespace's 8,192, tcp_max_tw_buckets) is reused once it is a second old rather than
failing the connect. They carry over between samples: docs/performance.md ("CRR repeats") has
what that does to repeats, and what it does not explain.

The rate that counts is per busy second: connections over the time the vCPU was not idle
(the kernel's per-CPU run time of every task but the idle one, /proc/schedstat, in ns; the
non-idle ticks of /proc/stat where there is none). Under icount with sleep=off an idle vCPU
jumps the guest clock to its next timer, and in this loop it sometimes does with a
connection in flight: no segment is retransmitted (the namespaces' counters say so), yet one
connect takes 0.2 to 5 s of guest time, and shorter jumps move whole samples by several
percent. Busy time is what the benchmark means (1e9 / rate is instructions per connection
under shift=0) and those jumps are not in it. lib.sh fails a sample in which any segment was
retransmitted; a connection over STALL seconds (guest time) is still counted and reported.

Python rather than Node (test/kernel/traffic.ts) because under icount a throughput is only
comparable between runs if the program's own work repeats: Node's JIT and garbage collector
do not (Node clients spread by 7-13 % between repeats here); CPython's interpreter does.
"""
import os
import socket
import sys
import time

PAYLOAD = b"x" * 64
STALL = 0.2
CHECK_EVERY = 32
GIVE_UP = 10


def read_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def busy_ns() -> tuple[int, str]:
    """Time the CPUs ran anything but the idle task, in ns, and where it was read."""
    try:
        with open("/proc/schedstat") as f:
            # cpuN yld_count 0 sched_count sched_goidle ttwu_count ttwu_local rq_cpu_time ...
            return sum(int(l.split()[7]) for l in f if l.startswith("cpu")), "schedstat"
    except (OSError, IndexError, ValueError):
        with open("/proc/stat") as f:
            t = [int(x) for x in f.readline().split()[1:]]
        # user nice system idle iowait irq softirq steal: all but idle and iowait
        ticks = t[0] + t[1] + t[2] + t[5] + t[6] + (t[7] if len(t) > 7 else 0)
        return ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK"), "stat"


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
    busy0, source = busy_ns()
    start = time.monotonic()
    busy = 0.0
    # Until `secs` of busy time (read every CHECK_EVERY connections, the same in every mode),
    # so a sample with a long idle jump still measures as much work as any other.
    while True:
        if (ok + failed) % CHECK_EVERY == 0:
            busy = (busy_ns()[0] - busy0) / 1e9
            if busy >= secs or time.monotonic() - start >= secs * GIVE_UP:
                break
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
    if busy < secs:
        failed += 1  # gave up: the sample is a failure, never a short one
        print(f"crr: gave up: {busy:.3f} s busy in {elapsed:.3f} s of guest time", file=sys.stderr)
    per_busy = ok / busy if busy > 0 else 0
    print(
        f"crr {host}:{port}: {ok} connections whole, {failed} failed, {stalled} stalled, {ok / elapsed:.1f} per second, "
        f"{per_busy:.1f} per busy second ({busy:.3f} s busy of {elapsed:.3f}, {source})"
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "server":
        server(int(sys.argv[2]))
    elif len(sys.argv) == 5 and sys.argv[1] == "client":
        client(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(__doc__)
