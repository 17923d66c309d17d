#!/usr/bin/env python3
"""The machine's ceiling for moving bytes over loopback TCP: one sender and one receiver thread,
1 MiB writes and reads, for SECONDS (default 5). What live streams can deliver to their readers on
one machine is below it whatever the server does (docs/benchmarks.md, "Live change streams").

Usage: bench/loopback_ceiling.py [seconds]
"""
import socket
import sys
import threading
import time

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
chunk = b"x" * (1 << 20)
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
received = 0


def receive():
    global received
    conn, _ = listener.accept()
    buf = bytearray(1 << 20)
    while n := conn.recv_into(buf):
        received += n


reader = threading.Thread(target=receive)
reader.start()
sender = socket.create_connection(("127.0.0.1", listener.getsockname()[1]))
start = time.monotonic()
while time.monotonic() - start < seconds:
    sender.sendall(chunk)
sender.close()
reader.join()
elapsed = time.monotonic() - start
print(f"loopback TCP, one flow, 1 MiB writes: {received / elapsed / 1e9:.2f} GB/s")
