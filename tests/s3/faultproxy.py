#!/usr/bin/env python3
"""faultproxy.py --listen PORT --upstream HOST:PORT [--faults KINDS] [--every N] [--ranged-only]
                [--per-request N] [--delay SECONDS] [--latency MS] [--log FILE] [--ready FILE]

An HTTP proxy on 127.0.0.1 for tests: requests go to the upstream store unchanged (Host
included, so SigV4 signatures still verify), and every N-th request (counting those it may
touch) is given the next fault of KINDS in turn instead of an honest answer:

  503     an S3 "503 SlowDown" error, the store not asked
  reset   the connection closed (RST) before any answer
  trunc   the store's status and headers, then half the body, then the connection closed
  short   a 206 claiming the range asked for, with a shorter body and a Content-Length to match
  delay   the answer held back --delay seconds (longer than the client's timeout)

--latency MS holds every answer MS milliseconds before it is sent (a round trip, for tests
that count requests in flight without ../shared/tools/wan-proxy; requests are served each on
its own thread, so they overlap).  --ranged-only touches only GETs with a Range header (listings and HEADs pass).  With
--per-request N, one request (method, path, range) is given at most N faults, so a client
that retries more than N times always gets through, however its requests interleave with
other clients' (0: no limit).  Every
request is logged to --log as "METHOD STATUS BYTES FAULT PATH RANGE START END" (START and END
are the monotonic clock, in seconds, when the request arrived and when its answer was sent;
the benchmark counts GETs, bytes and requests in flight from it: tests/s3/proxystats.py).  --ready FILE is written once the port listens.  Stops on SIGTERM."""
import argparse, http.client, http.server, itertools, os, signal, socket, socketserver, struct, sys, threading, time

A = None
lock = threading.Lock()
counter = itertools.count(1)
fault_cycle = None
logf = None
per_key = {}


def log(method, status, nbytes, fault, path, rng=None):
    t0 = getattr(threading.current_thread(), "t0", None)
    t1 = time.monotonic()
    with lock:
        logf.write("%s %s %d %s %s %s %.6f %.6f\n" % (method, status, nbytes, fault or "-", path,
                                                      (rng or "-").replace(" ", ""),
                                                      t0 if t0 is not None else t1, t1))
        logf.flush()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle's algorithm on, the
    # body waits for the client's delayed ACK (40 ms) on every answer, which
    # made a pass over the corpus through the proxy ten times slower.
    disable_nagle_algorithm = True

    def log_message(self, *a):
        pass

    def upstream(self):
        c = getattr(self, "_up", None)
        if c is None:
            h, p = A.upstream.rsplit(":", 1)
            c = self._up = http.client.HTTPConnection(h, int(p), timeout=60)
        return c

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        hdrs = {k: v for k, v in self.headers.items()}
        for attempt in range(2):
            try:
                c = self.upstream()
                c.request(self.command, self.path, body=body, headers=hdrs)
                r = c.getresponse()
                data = r.read()
                return r.status, r.reason, r.getheaders(), data
            except (http.client.HTTPException, OSError):
                self._up = None
                if attempt:
                    raise

    def pick_fault(self):
        touchable = not A.ranged_only or (self.command == "GET" and "Range" in self.headers)
        if not touchable or not fault_cycle:
            return None
        key = (self.command, self.path, self.headers.get("Range"))
        with lock:
            n = next(counter)
            if n % A.every or (A.per_request and per_key.get(key, 0) >= A.per_request):
                return None
            per_key[key] = per_key.get(key, 0) + 1
            return next(fault_cycle)

    def send_answer(self, status, reason, headers, data, cut=None):
        self.send_response_only(status, reason)
        for k, v in headers:
            if k.lower() not in ("connection", "transfer-encoding"):
                self.send_header(k, v)
        # A chunked answer (Swift's error pages) is sent whole: its length
        # told, or the client would wait for the connection to close.
        if self.command != "HEAD" and not any(k.lower() == "content-length" for k, _ in headers):
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data if cut is None else data[:cut])
        self.wfile.flush()

    def rst(self):
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True

    def handle_any(self):
        threading.current_thread().t0 = time.monotonic()
        if A.latency:
            time.sleep(A.latency / 1000.0)
        fault = self.pick_fault()
        if fault == "503":
            body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                    b'<Message>Please reduce your request rate.</Message></Error>')
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                self.rfile.read(n)
            self.send_answer(503, "Slow Down", [("Content-Type", "application/xml"),
                                                ("Content-Length", str(len(body)))], body)
            return log(self.command, 503, len(body), fault, self.path)
        if fault == "reset":
            self.rst()
            return log(self.command, 0, 0, fault, self.path)
        if fault == "delay":
            time.sleep(A.delay)
        status, reason, headers, data = self.forward()
        if fault == "trunc" and len(data) > 1:
            self.send_answer(status, reason, headers, data, cut=len(data) // 2)
            self.rst()
            return log(self.command, status, len(data) // 2, fault, self.path)
        if fault == "short" and status == 206 and len(data) > 1:
            half = len(data) // 2
            hs = [(k, str(half) if k.lower() == "content-length" else v) for k, v in headers]
            self.send_answer(status, reason, hs, data[:half])
            return log(self.command, status, half, fault, self.path)
        try:
            self.send_answer(status, reason, headers, data)
        except OSError:
            pass	# the client gave up (a delayed answer)
        log(self.command, status, len(data), fault, self.path, self.headers.get("Range"))

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = handle_any


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver listens with a backlog of 5: a client opening 16
    # connections at once had the rest dropped, and the kernel tried them
    # again a second later (a second of nothing in flight in the logs)
    request_queue_size = 128


def main():
    global A, fault_cycle, logf
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--faults", default="")
    ap.add_argument("--every", type=int, default=2)
    ap.add_argument("--ranged-only", action="store_true")
    ap.add_argument("--per-request", type=int, default=0)
    ap.add_argument("--delay", type=float, default=3.0)
    ap.add_argument("--latency", type=float, default=0)
    ap.add_argument("--log", default=os.devnull)
    ap.add_argument("--ready")
    A = ap.parse_args()
    kinds = [k for k in A.faults.split(",") if k]
    for k in kinds:
        if k not in ("503", "reset", "trunc", "short", "delay"):
            sys.exit("faultproxy: unknown fault %s" % k)
    fault_cycle = itertools.cycle(kinds) if kinds else None
    logf = open(A.log, "a")
    srv = Server(("127.0.0.1", A.listen), Handler)
    signal.signal(signal.SIGTERM, lambda *a: threading.Thread(target=srv.shutdown).start())
    if A.ready:
        open(A.ready, "w").write("%d\n" % os.getpid())
    srv.serve_forever()


if __name__ == "__main__":
    main()
