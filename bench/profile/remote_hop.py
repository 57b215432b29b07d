#!/usr/bin/env python3
"""Where a forwarded memcached get spends its time, leg by leg.

Run inside a cluster's namespace while `./ebb cluster up memcached --nodes 3`
runs (docs/benchmarks.md, "Where the remote hop's time goes"):

    ip netns exec NS python3 bench/profile/remote_hop.py [--node 10.96.0.2]
        [--keys 300] [--rounds 5] [--bridge ebbbr0]

It sets KEYS keys through the node, then gets each key ROUNDS times, one
request at a time (closed loop: every get finds the guests idle), and
splits the keys into the node's own (local) and the others' (forwarded) by
their median latency (two clusters). With `--bridge`, it also records the
cluster's bridge with tcpdump (not installed by ./ebb: apt-get install
tcpdump) and reports each leg's time from the frames' timestamps:

- local: the node's request-in to answer-out;
- forwarded: request-in to forward-out (the asked node's turn), forward-out
  to owner's reply (the owner's turn and the wire), reply-in to answer-out
  (the asked node's second turn);

and the frames each get cost. Bounded: KEYS x ROUNDS gets, 5 s timeouts.
"""

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

MEMCACHED_PORT = 11211
MESSENGER_PORT = "7000"
# `ebb_testbed::cluster_net`'s frontend address.
FRONTEND = "10.96.0.1"


def quantile(values, q):
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def run_gets(node, keys, rounds):
    conn = socket.create_connection((node, MEMCACHED_PORT), timeout=5)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader = conn.makefile("rb")
    for i in range(keys):
        conn.sendall(b"set key%d 0 0 10\r\n%010d\r\n" % (i, i))
        line = reader.readline()
        if line != b"STORED\r\n":
            sys.exit(f"remote_hop: set key{i} answered {line!r}")
    latency = {i: [] for i in range(keys)}
    for _ in range(rounds):
        for i in range(keys):
            began = time.perf_counter()
            conn.sendall(b"get key%d\r\n" % i)
            header, value, end = reader.readline(), reader.readline(), reader.readline()
            latency[i].append((time.perf_counter() - began) * 1e6)
            if value != b"%010d\r\n" % i or end != b"END\r\n":
                sys.exit(f"remote_hop: get key{i} answered {header!r} {value!r} {end!r}")
    conn.close()
    return latency


def split_local(latency):
    """Two clusters of per-key median latency: the lower one is local."""
    medians = {k: statistics.median(v) for k, v in latency.items()}
    values = sorted(medians.values())
    low, high = values[0], values[-1]
    for _ in range(50):
        near_low = [v for v in values if abs(v - low) <= abs(v - high)]
        near_high = [v for v in values if abs(v - low) > abs(v - high)]
        if not near_high:
            break
        low, high = statistics.median(near_low), statistics.median(near_high)
    return {k for k, m in medians.items() if abs(m - low) <= abs(m - high)}


FRAME = re.compile(r"^(\d+\.\d+) IP (\S+) > (\S+): Flags \[[^\]]+\].*length (\d+)")


def legs(dump, node):
    frames = []
    for line in dump.splitlines():
        m = FRAME.match(line)
        if m:
            frames.append((float(m[1]), m[2], m[3], int(m[4])))
    asked = f"{node}.{MEMCACHED_PORT}"

    def is_request(f):
        return f[2] == asked and f[3] > 0

    out = {"local": [], "turn 1": [], "owner": [], "turn 2": [], "forwarded": []}
    counts = {"local": [], "forwarded": []}
    i = 0
    while i < len(frames):
        if not is_request(frames[i]):
            i += 1
            continue
        start = frames[i][0]
        forward = reply = answer = None
        j = i + 1
        while j < len(frames) and not is_request(frames[j]):
            t, src, dst, length = frames[j]
            # Node to node only: the Messenger's keep-alives to the
            # frontend (its port too) are not forwards.
            to_node = dst.endswith("." + MESSENGER_PORT) and not dst.startswith(FRONTEND + ".")
            from_node = src.endswith("." + MESSENGER_PORT) and not src.startswith(FRONTEND + ".")
            if length > 0 and src.startswith(node + ".") and to_node:
                forward = forward or t
            if length > 0 and from_node and dst.startswith(node + "."):
                reply = reply or t
            if length > 0 and src == asked:
                answer = answer or t
            j += 1
        if answer is not None:
            if forward is None:
                out["local"].append((answer - start) * 1e6)
                counts["local"].append(j - i)
            elif reply is not None:
                out["turn 1"].append((forward - start) * 1e6)
                out["owner"].append((reply - forward) * 1e6)
                out["turn 2"].append((answer - reply) * 1e6)
                out["forwarded"].append((answer - start) * 1e6)
                counts["forwarded"].append(j - i)
        i = j
    return out, counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node", default="10.96.0.2", help="the node asked (default node 1)")
    parser.add_argument("--keys", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bridge", help="record this bridge with tcpdump (e.g. ebbbr0)")
    args = parser.parse_args()
    if args.keys < 10 or args.rounds < 1:
        sys.exit("remote_hop: --keys must be at least 10 and --rounds at least 1")
    capture = None
    if args.bridge:
        if shutil.which("tcpdump") is None:
            sys.exit("remote_hop: --bridge needs tcpdump (apt-get install tcpdump)")
        dump_file = tempfile.NamedTemporaryFile(prefix="remote-hop-", suffix=".txt", delete=False)
        capture = subprocess.Popen(
            ["tcpdump", "-i", args.bridge, "-n", "-tt", "-s", "128", "tcp"],
            stdout=dump_file,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1)
    try:
        latency = run_gets(args.node, args.keys, args.rounds)
    except BaseException:
        if capture:
            os.unlink(dump_file.name)
        raise
    finally:
        if capture:
            time.sleep(0.5)
            capture.terminate()
            capture.wait(timeout=5)
    local = split_local(latency)
    local_us = [x for k in local for x in latency[k]]
    remote_us = [x for k, v in latency.items() if k not in local for x in v]
    if not remote_us or not local_us:
        sys.exit("remote_hop: the keys did not split into local and forwarded ones")
    print(f"client-measured, closed loop, {args.rounds} rounds over {args.keys} keys via {args.node}:")
    print(f"  local     keys {len(local):4d}  p50 {quantile(local_us, .5):6.0f} us  p90 {quantile(local_us, .9):6.0f} us")
    print(f"  forwarded keys {args.keys - len(local):4d}  p50 {quantile(remote_us, .5):6.0f} us  p90 {quantile(remote_us, .9):6.0f} us")
    print(f"  ratio (forwarded p50 / local p50) {quantile(remote_us, .5) / quantile(local_us, .5):.2f}")
    if capture:
        with open(dump_file.name) as f:
            out, counts = legs(f.read(), args.node)
        os.unlink(dump_file.name)
        print("on the bridge (frame timestamps):")
        names = {
            "local": "local: request in -> answer out",
            "turn 1": "forwarded: request in -> forward out",
            "owner": "forwarded: forward out -> owner's reply",
            "turn 2": "forwarded: reply in -> answer out",
            "forwarded": "forwarded: request in -> answer out",
        }
        for key, name in names.items():
            if out[key]:
                print(f"  {name:42s} n={len(out[key]):5d}  p50 {quantile(out[key], .5):6.0f} us  p90 {quantile(out[key], .9):6.0f} us")
        for key, values in counts.items():
            if values:
                print(f"  frames per {key} get: {statistics.median(values):.0f}")


if __name__ == "__main__":
    main()
