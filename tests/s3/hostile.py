#!/usr/bin/env python3
"""hostile.py --root DIR --ready FILE [--log FILE]

A small S3-compatible store on 127.0.0.1 for tests (path-style, anonymous: signatures are
not checked), serving DIR/BUCKET/KEY files as objects: ListObjectsV2 (prefix, delimiter '/',
max-keys, continuation-token, encoding-type=url), HEAD, GET with one byte range, If-Match.
Files are read afresh at every request, so a test changes the store by changing DIR.  A
file KEY.v2 is no object of its own: it is KEY's next version (see liar, noetag).

Honest, except in the buckets named after how they lie:

  loop     a truncated listing continues with the same continuation token for ever
  endless  every listing page holds max-keys new keys and a new token, for ever
  slow     object bodies come one byte a second (headers at once)
  stall    a listing's first page is answered (the probe of a mount: one key, more to
           come), the pages after it never
  noetag   GET and HEAD answers carry no ETag, If-Match is ignored, and after the
           first GET of KEY, KEY.v2 is served in its place (Last-Modified 10 s later)
  liar     If-Match is ignored and answers keep KEY's first ETag, but after the first
           GET of KEY, KEY.v2 is served in its place (Last-Modified 10 s later); the
           first GET is answered 0.3 s late, after any sent at the same time
  dated    as liar, but its listings carry each object's own date (as GET answers do),
           so a client learns from a first object that answers agree with listings
  bare     no ETag anywhere: not in listings, not in answers
  nometa   GETs of __fragment_metadata.tdb files, and listings of __commits/
           directories (alone, or in arr/'s subtree listed whole), answer 503 SlowDown
  badkey   the top listing also holds keys that are no file name once decoded:
           'bad%00name' (a NUL), 'sl%2Fash' (a '/'), 'esc%zz' (no escape)
  badtree  listings also hold keys (never objects) under __t/ that are no path, or
           hidden: '__t/x/../y', '__t/x//z', a folder marker '__t/m/', '__t/.tilefs/i',
           '__t/x/.tilefs/j' (a directory named __* is listed whole: source_s3.c)

Every request is logged to --log as "METHOD BUCKET KEY STATUS".  The port is written to
--ready once it listens.  Stops on SIGTERM."""
import argparse, email.utils, hashlib, http.server, os, signal, socketserver, sys, threading, time
import urllib.parse
from xml.sax.saxutils import escape

A = None
lock = threading.Lock()
logf = None
gets = {}       # (bucket, key) -> GETs served


def log(*words):
    with lock:
        logf.write(" ".join(str(w) for w in words) + "\n")
        logf.flush()


def objects(bucket):
    """Every key of bucket, sorted (KEY.v2 files are versions, not objects)."""
    top = os.path.join(A.root, bucket)
    keys = []
    for d, _, files in os.walk(top):
        for f in files:
            if not f.endswith(".v2"):
                keys.append(os.path.relpath(os.path.join(d, f), top))
    return sorted(keys)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *a):
        pass

    def answer(self, status, headers, body=b""):
        self.send_response_only(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, code):
        body = ("<?xml version=\"1.0\"?><Error><Code>%s</Code></Error>" % code).encode()
        self.answer(status, [("Content-Type", "application/xml")], body)

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        parts = u.path.lstrip("/").split("/", 1)
        bucket = urllib.parse.unquote(parts[0])
        key = urllib.parse.unquote(parts[1]) if len(parts) > 1 else ""
        if not os.path.isdir(os.path.join(A.root, bucket)):
            log(self.command, bucket, key or "-", 404)
            return self.error(404, "NoSuchBucket")
        if not key and self.command == "GET":
            return self.listing(bucket, urllib.parse.parse_qs(u.query, keep_blank_values=True))
        self.object(bucket, key)

    do_HEAD = do_GET

    # ---- listings
    def listing(self, bucket, q):
        one = lambda k, d="": q.get(k, [d])[0]
        prefix, delim, token = one("prefix"), one("delimiter"), one("continuation-token")
        max_keys = int(one("max-keys", "1000"))
        enc = one("encoding-type") == "url"
        # __commits/ listed alone, or within its array's subtree listed whole
        if bucket == "nometa" and (prefix.endswith("__commits/") or (not delim and prefix.endswith("arr/"))):
            log("LIST", bucket, prefix, 503)
            return self.error(503, "SlowDown")
        if bucket == "stall" and not token:	# the mount's probe: a first page, more to come
            return self.send_list(bucket, [(prefix + "t.tdb", 5, "e")], [], True, "more", enc)
        if bucket == "stall":
            log("LIST", bucket, "-", "stalled")
            while True:
                time.sleep(3600)
        if bucket == "endless":
            page = int(token[1:]) if token else 0
            names = ["%sk%06d_%04d_%s" % (prefix, page, i, "x" * 40) for i in range(max_keys)]
            return self.send_list(bucket, [(n, 5, "e") for n in names], [], True, "p%d" % (page + 1), enc)
        entries, prefixes = [], []
        tree = ["__t/x/../y", "__t/x//z", "__t/m/", "__t/.tilefs/i", "__t/x/.tilefs/j"]
        for k in sorted(objects(bucket) + (tree if bucket == "badtree" else [])):
            if not k.startswith(prefix):
                continue
            rest = k[len(prefix):]
            if delim and delim in rest:
                p = prefix + rest[:rest.index(delim) + 1]
                if p not in prefixes:
                    prefixes.append(p)
                continue
            path = os.path.join(A.root, bucket, k)
            if k in tree and bucket == "badtree":
                entries.append((k, 3, "e"))
                continue
            entries.append((k, os.path.getsize(path), etag_of(path)))
        names = sorted([(e[0], e) for e in entries] + [(p, None) for p in prefixes])
        if bucket == "badkey" and prefix == "":
            names = sorted(names + [("bad%00name", ("bad%00name", 3, "e")), ("sl%2Fash", ("sl%2Fash", 3, "e")),
                                    ("esc%zz", ("esc%zz", 3, "e"))])
        start = 0
        if token:
            start = next((i for i, (n, _) in enumerate(names) if n > token), len(names))
        page = names[start:start + max_keys]
        more = start + max_keys < len(names)
        next_token = page[-1][0] if more else None
        if bucket == "loop":    # the same page and the same token, every time
            page, more, next_token = names[:max_keys], True, "same-token"
        return self.send_list(bucket, [e for _, e in page if e], [n for n, e in page if not e], more, next_token,
                              enc)

    def send_list(self, bucket, entries, prefixes, truncated, token, enc):
        def name(n):
            if bucket == "badkey" and "%" in n:
                return n        # already as the store means to send it
            return urllib.parse.quote(n, safe="/") if enc else n
        x = ['<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>%s</Name>' % escape(bucket)]
        if enc:
            x.append("<EncodingType>url</EncodingType>")
        x.append("<IsTruncated>%s</IsTruncated>" % ("true" if truncated else "false"))
        if truncated:
            x.append("<NextContinuationToken>%s</NextContinuationToken>" % escape(token))
        for k, size, etag in entries:
            date = "2024-01-02T03:04:05.000Z"
            if bucket == "dated":
                date = time.strftime("%Y-%m-%dT%H:%M:%S.000Z",
                                     time.gmtime(int(os.path.getmtime(os.path.join(A.root, bucket, k)))))
            x.append("<Contents><Key>%s</Key><LastModified>%s</LastModified>"
                     "%s<Size>%d</Size></Contents>" % (escape(name(k)), date, "" if bucket == "bare" else
                                                       "<ETag>&quot;%s&quot;</ETag>" % etag, size))
        for p in prefixes:
            x.append("<CommonPrefixes><Prefix>%s</Prefix></CommonPrefixes>" % escape(name(p)))
        x.append("</ListBucketResult>")
        log("LIST", bucket, "-", 200)
        self.answer(200, [("Content-Type", "application/xml")], "".join(x).encode())

    # ---- objects
    def object(self, bucket, key):
        path = os.path.join(A.root, bucket, key)
        if not os.path.isfile(path) or key.endswith(".v2"):
            log(self.command, bucket, key, 404)
            return self.error(404, "NoSuchKey")
        if bucket == "nometa" and key.endswith("__fragment_metadata.tdb") and self.command == "GET":
            log(self.command, bucket, key, 503)
            return self.error(503, "SlowDown")
        first_etag = etag_of(path)
        mtime = int(os.path.getmtime(path))
        if bucket in ("noetag", "liar", "dated", "bare") and self.command == "GET":
            with lock:
                n = gets.get((bucket, key), 0)
                gets[(bucket, key)] = n + 1
            if n and os.path.isfile(path + ".v2"):
                path, mtime = path + ".v2", mtime + 10
            elif bucket in ("liar", "dated"):
                time.sleep(0.3)     # the first answer last: GETs after it are answered first
        data = open(path, "rb").read()
        honest = bucket not in ("noetag", "liar", "dated", "bare")
        etag = etag_of(path) if honest else first_etag
        want = (self.headers.get("If-Match") or "").strip('"')
        if honest and want and want != etag:
            log(self.command, bucket, key, 412)
            return self.error(412, "PreconditionFailed")
        headers = [("Last-Modified", email.utils.formatdate(mtime, usegmt=True))]
        if bucket not in ("noetag", "bare"):
            headers.append(("ETag", '"%s"' % etag))
        status, body = 200, data
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, b = rng[6:].split("-")
            a, b = int(a), min(int(b), len(data) - 1)
            if a >= len(data):
                log(self.command, bucket, key, 416)
                return self.error(416, "InvalidRange")
            status, body = 206, data[a:b + 1]
            headers.append(("Content-Range", "bytes %d-%d/%d" % (a, b, len(data))))
        log(self.command, bucket, key, status)
        if bucket == "slow" and self.command == "GET":
            return self.drip(status, headers, body)
        self.answer(status, headers, body)

    def drip(self, status, headers, body):
        self.send_response_only(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.flush()
        try:
            for i in range(len(body)):
                self.wfile.write(body[i:i + 1])
                self.wfile.flush()
                time.sleep(1)
        except OSError:
            pass        # the client gave up
        self.close_connection = True


def etag_of(path):
    return hashlib.md5(open(path, "rb").read()).hexdigest()


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)     # a client giving up is no error


def main():
    global A, logf
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--log", default=os.devnull)
    A = ap.parse_args()
    logf = open(A.log, "a")
    srv = Server(("127.0.0.1", 0), Handler)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    with open(A.ready + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(A.ready + ".tmp", A.ready)
    srv.serve_forever()


if __name__ == "__main__":
    main()
