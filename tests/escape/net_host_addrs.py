#!/usr/bin/python3
# net_host_addrs.py - escape attempt: net.connect:*:PORT reaches a host service bound to 0.0.0.0 through the host's own addresses.
#
# Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
# every attempt was refused as never-reachable.  Metadata read by run.sh:
# TIER: high
# EXIT: 0
# OPTS: --grant net.connect:*:@HOSTPORT@
# ARGS: @HOSTPORT@ @HOSTADDRS@
#
# run.sh listens on 0.0.0.0:HOSTPORT on the host and passes the host's own
# global addresses (those of its interfaces, not loopback).  The agent holds
# net.connect:*:HOSTPORT, which names no address: each host address, in
# each spelling that carries it (IPv4-mapped, NAT64, 6to4, Teredo client),
# must be refused as never-reachable (issue 10, hole 10), never connected.
import ipaddress
import os
import socket
import sys

import msgpack

port = int(sys.argv[1])
addrs = [a for a in (sys.argv[2] if len(sys.argv) > 2 else "").split(",") if a]
s = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))
s.settimeout(20)


def spellings(a):
    ip = ipaddress.ip_address(a)
    out = [str(ip)]
    if ip.version == 4:
        v = int(ip)
        out += ["::ffff:%s" % ip, str(ipaddress.IPv6Address((0x0064ff9b << 96) | v)),
                str(ipaddress.IPv6Address((0x2002 << 112) | (v << 80) | 1)),
                str(ipaddress.IPv6Address((0x20010000 << 96) | (0x4136e378 << 64) | (v ^ 0xffffffff)))]
    return out


escaped = tried = 0
rid = 0
for a in addrs:
    for sp in spellings(a):
        rid += 1
        tried += 1
        s.send(msgpack.packb({"id": rid, "op": "net.connect", "host": sp, "port": port}))
        data, fds, _, _ = socket.recv_fds(s, 65536, 4)
        for fd in fds:
            os.close(fd)
        r = msgpack.unpackb(data, raw=False)
        if r.get("ok") is not False or r.get("err") != -95:
            print("ESCAPE: %s:%d gave %r" % (sp, port, r))
            escaped += 1
if escaped:
    sys.exit(1)
print("all %d spellings of %d host address(es) refused as never-reachable" % (tried, len(addrs)))
