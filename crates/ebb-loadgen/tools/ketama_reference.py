#!/usr/bin/env python3
"""Where the real libmemcached puts keys under MEMCACHED_BEHAVIOR_KETAMA.

Usage: ketama_reference.py HOST:PORT[,HOST:PORT...] COUNT
Prints one line: the servers, a space, then the index of the server that
libmemcached's memcached_generate_hash() picks for each of key:0 .. key:COUNT-1
(one digit each). Needs libmemcached.so.11 (Debian: libmemcached11). The
output is what src/ketama/libmemcached_placements.txt holds; the unit tests
in src/ketama/mod.rs check ebb-loadgen's placement against it.

Enum values from libmemcached-1.0/types/behavior.h and hash.h, read back to
check them: MEMCACHED_BEHAVIOR_KETAMA = 3 must give
MEMCACHED_BEHAVIOR_DISTRIBUTION (9) = MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA
(2) and leaves MEMCACHED_BEHAVIOR_HASH (2) at MEMCACHED_HASH_DEFAULT (0).
"""
import ctypes
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    servers, count = sys.argv[1].split(","), int(sys.argv[2])
    lib = ctypes.CDLL("libmemcached.so.11")
    lib.memcached_create.restype = ctypes.c_void_p
    lib.memcached_create.argtypes = [ctypes.c_void_p]
    lib.memcached_behavior_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
    lib.memcached_behavior_get.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.memcached_behavior_get.restype = ctypes.c_uint64
    lib.memcached_server_add.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint16]
    lib.memcached_generate_hash.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.memcached_generate_hash.restype = ctypes.c_uint32
    memc = lib.memcached_create(None)
    if lib.memcached_behavior_set(memc, 3, 1) != 0:
        sys.exit("memcached_behavior_set(KETAMA) failed")
    if (lib.memcached_behavior_get(memc, 9), lib.memcached_behavior_get(memc, 2)) != (2, 0):
        sys.exit("unexpected distribution or hash: check the enum values")
    for server in servers:
        host, port = server.rsplit(":", 1)
        if lib.memcached_server_add(memc, host.encode(), int(port)) != 0:
            sys.exit(f"memcached_server_add({server}) failed")
    placements = []
    for i in range(count):
        key = f"key:{i}".encode()
        placements.append(str(lib.memcached_generate_hash(memc, key, len(key))))
    print(",".join(servers), "".join(placements))


if __name__ == "__main__":
    main()
