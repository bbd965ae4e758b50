#!/usr/bin/env python3
"""credserver.py --users AK=SECRET,AK=SECRET --upstream HOST:PORT [--ttl S] [--revoke-early S]
                 [--role-arn ARN] [--web-token FILE] [--source-key AK=SECRET] [--container-auth TOKEN]
                 [--redirect-region REGION] --ready FILE --log FILE

The cloud's credential services, on 127.0.0.1, for tests/s3/cloud.sh: they hand out the real
store's keys (--users, in turn: every issue rotates to the next user) with a session token of
their own that expires --ttl seconds later; and a gate in front of the store that lets through
only requests signed with a token it issued and that has not expired.  Two ports, written to
--ready as "META GATE" once both listen:

META, the services:
  PUT  /latest/api/token                         IMDSv2's session token; the header
                                                 X-aws-ec2-metadata-token-ttl-seconds required
  GET  /latest/meta-data/iam/security-credentials/[ROLE]
                                                 the role's name, its credentials (JSON); 401
                                                 without a valid X-aws-ec2-metadata-token
  GET  /container/creds                          container credentials (JSON); 401 unless
                                                 Authorization is --container-auth
  GET  /process                                  credentials as credential_process prints them
  POST /                                         STS: AssumeRoleWithWebIdentity (RoleArn must be
                                                 --role-arn, WebIdentityToken the contents of
                                                 --web-token, a RoleSessionName) and AssumeRole
                                                 (RoleArn, RoleSessionName, and a SigV4
                                                 Authorization verified with --source-key)

GATE, the store's door: a request whose x-amz-security-token was not issued here, or is not the
one issued with its access key, is refused 403 InvalidToken; one whose token has expired (or will
within --revoke-early seconds: a store revoking early, or a clock ahead) 400 ExpiredToken; with
--redirect-region, one signed for another region gets 301 PermanentRedirect and
x-amz-bucket-region.  Others go to the store unchanged.

Every event is a line of --log: "ISSUE KIND N USER", "REFUSE WHY ...", "GATE OK|EXPIRED|BADTOKEN|
REDIRECT METHOD PATH [payer] [owner]".  Stops on SIGTERM."""
import argparse, datetime, hashlib, hmac, http.client, http.server, json, os, secrets, signal, socketserver
import sys, threading, time, urllib.parse

A = None
lock = threading.Lock()
issued = {}         # token -> (access key, expiry)
imds_tokens = set()
count = [0]
logf = None


def log(line):
    with lock:
        logf.write(line + "\n")
        logf.flush()


def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def issue(kind):
    with lock:
        count[0] += 1
        n = count[0]
        ak, sk = A.users[(n - 1) % len(A.users)]
        token = "tok%d-%s" % (n, secrets.token_hex(24))
        exp = time.time() + A.ttl
        issued[token] = (ak, exp)
    log("ISSUE %s %d %s" % (kind, n, ak))
    return ak, sk, token, iso(exp)


class Base(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *a):
        pass

    def answer(self, status, body=b"", ctype="text/plain", headers=()):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""


def sigv4_ok(method, path, query, headers, payload, secret_of):
    """Whether headers' Authorization is a valid SigV4 signature of the request."""
    auth = headers.get("Authorization") or ""
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return False, "no SigV4 Authorization"
    parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    ak, date, region, service, term = parts["Credential"].split("/")
    secret = secret_of(ak)
    if secret is None:
        return False, "unknown access key"
    signed = parts["SignedHeaders"].split(";")
    canon_headers = "".join("%s:%s\n" % (h, " ".join((headers.get(h) or "").split())) for h in signed)
    q = urllib.parse.parse_qsl(query, keep_blank_values=True)
    canon_query = "&".join("%s=%s" % (urllib.parse.quote(k, safe="-_.~"), urllib.parse.quote(v, safe="-_.~"))
                           for k, v in sorted(q))
    creq = "\n".join([method, path, canon_query, canon_headers, parts["SignedHeaders"],
                      hashlib.sha256(payload).hexdigest()])
    scope = "%s/%s/%s/%s" % (date, region, service, term)
    sts = "\n".join(["AWS4-HMAC-SHA256", headers.get("X-Amz-Date") or "", scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for m in (date, region, service, term):
        k = hmac.new(k, m.encode(), hashlib.sha256).digest()
    want = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, parts["Signature"]), "signature" if service == "sts" else "service " + service


class Meta(Base):
    def imds_token_ok(self):
        return self.headers.get("X-aws-ec2-metadata-token") in imds_tokens

    def do_PUT(self):
        self.body()
        if self.path != "/latest/api/token":
            return self.answer(404)
        if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            log("REFUSE imds token without a ttl")
            return self.answer(400)
        t = secrets.token_urlsafe(32)
        with lock:
            imds_tokens.add(t)
        self.answer(200, t)

    def do_GET(self):
        base = "/latest/meta-data/iam/security-credentials/"
        if self.path.startswith(base):
            if not self.imds_token_ok():
                log("REFUSE imds %s without a token" % self.path)
                return self.answer(401)
            role = self.path[len(base):]
            if not role:
                return self.answer(200, "tilefs-role\n")
            if role != "tilefs-role":
                return self.answer(404)
            ak, sk, tok, exp = issue("imds")
            return self.answer(200, json.dumps({"Code": "Success", "LastUpdated": iso(time.time()),
                                                "Type": "AWS-HMAC", "AccessKeyId": ak, "SecretAccessKey": sk,
                                                "Token": tok, "Expiration": exp}), "application/json")
        if self.path == "/container/creds":
            if self.headers.get("Authorization") != A.container_auth:
                log("REFUSE container: bad Authorization")
                return self.answer(401, '{"message":"bad token"}')
            ak, sk, tok, exp = issue("container")
            return self.answer(200, json.dumps({"AccessKeyId": ak, "SecretAccessKey": sk, "Token": tok,
                                                "Expiration": exp, "RoleArn": "arn:aws:iam::1:role/r"}),
                               "application/json")
        if self.path == "/process":
            ak, sk, tok, exp = issue("process")
            return self.answer(200, json.dumps({"Version": 1, "AccessKeyId": ak, "SecretAccessKey": sk,
                                                "SessionToken": tok, "Expiration": exp}))
        self.answer(404)

    def sts_error(self, status, code):
        log("REFUSE sts %s" % code)
        self.answer(status, "<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>no</Message>"
                    "</Error></ErrorResponse>" % code, "text/xml")

    def do_POST(self):
        payload = self.body()
        if self.path != "/":
            return self.answer(404)
        f = dict(urllib.parse.parse_qsl(payload.decode(), keep_blank_values=True))
        action = f.get("Action")
        if f.get("Version") != "2011-06-15" or f.get("RoleArn") != A.role_arn or not f.get("RoleSessionName"):
            return self.sts_error(400, "ValidationError")
        if action == "AssumeRoleWithWebIdentity":
            if "Authorization" in self.headers:
                return self.sts_error(400, "SignedWebIdentity")
            if f.get("WebIdentityToken") != open(A.web_token).read().strip():
                return self.sts_error(400, "InvalidIdentityToken")
        elif action == "AssumeRole":
            sak, ssk = A.source_key.split("=", 1)
            ok, why = sigv4_ok("POST", "/", "", self.headers, payload, lambda ak: ssk if ak == sak else None)
            if not ok:
                log("REFUSE sts AssumeRole: %s" % why)
                return self.sts_error(403, "SignatureDoesNotMatch")
        else:
            return self.sts_error(400, "InvalidAction")
        ak, sk, tok, exp = issue("sts-" + action)
        self.answer(200, "<%sResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><%sResult>"
                    "<Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey>"
                    "<SessionToken>%s</SessionToken><Expiration>%s</Expiration></Credentials>"
                    "<AssumedRoleUser><Arn>x</Arn></AssumedRoleUser></%sResult></%sResponse>"
                    % (action, action, ak, sk, tok, exp, action, action), "text/xml")


class Gate(Base):
    def upstream(self):
        c = getattr(self, "_up", None)
        if c is None:
            h, p = A.upstream.rsplit(":", 1)
            c = self._up = http.client.HTTPConnection(h, int(p), timeout=60)
        return c

    def s3_error(self, status, code, extra="", headers=()):
        self.answer(status, "<?xml version=\"1.0\"?><Error><Code>%s</Code><Message>no</Message>%s</Error>"
                    % (code, extra), "application/xml", headers)

    def handle_any(self):
        payload = self.body()
        auth = self.headers.get("Authorization") or ""
        tok = self.headers.get("x-amz-security-token")
        notes = ("payer" if self.headers.get("x-amz-request-payer") == "requester" and
                 "x-amz-request-payer" in auth else "",
                 "owner" if self.headers.get("x-amz-expected-bucket-owner") and
                 "x-amz-expected-bucket-owner" in auth else "")
        what = "%s %s %s" % (self.command, self.path.split("?")[0], " ".join(n for n in notes if n))
        if A.redirect_region:
            region = auth.split("Credential=", 1)[-1].split("/")[2] if "Credential=" in auth else ""
            if region != A.redirect_region:
                log("GATE REDIRECT " + what)
                return self.s3_error(301, "PermanentRedirect", "<Endpoint>s3.%s.amazonaws.com</Endpoint>"
                                     % A.redirect_region, [("x-amz-bucket-region", A.redirect_region)])
        if A.users_need_token:
            with lock:
                got = issued.get(tok)
            ak = auth.split("Credential=", 1)[-1].split("/")[0] if "Credential=" in auth else ""
            if not got or got[0] != ak:
                log("GATE BADTOKEN " + what)
                return self.s3_error(403, "InvalidToken")
            if time.time() >= got[1] - A.revoke_early:
                log("GATE EXPIRED " + what)
                return self.s3_error(400, "ExpiredToken")
        log("GATE OK " + what)
        hdrs = {k: v for k, v in self.headers.items()}
        for attempt in range(2):
            try:
                up = self.upstream()
                up.request(self.command, self.path, body=payload or None, headers=hdrs)
                r = up.getresponse()
                data = r.read()
                break
            except (OSError, http.client.HTTPException) as e:
                self._up = None
                if attempt:
                    log("GATE UPSTREAM-FAILED %s" % e)
                    return self.answer(502)
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", r.getheader("Content-Length", "0") if self.command == "HEAD"
                         else str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = handle_any


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global A, logf
    p = argparse.ArgumentParser()
    p.add_argument("--users", required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--ttl", type=float, default=3600)
    p.add_argument("--revoke-early", type=float, default=0)
    p.add_argument("--role-arn", default="arn:aws:iam::123456789012:role/tilefs-test")
    p.add_argument("--web-token")
    p.add_argument("--source-key", default="SOURCEKEY=source-secret")
    p.add_argument("--container-auth", default="")
    p.add_argument("--redirect-region")
    p.add_argument("--no-token-check", action="store_true")
    p.add_argument("--ready", required=True)
    p.add_argument("--log", required=True)
    A = p.parse_args()
    A.users = [tuple(u.split("=", 1)) for u in A.users.split(",")]
    A.users_need_token = not A.no_token_check
    logf = open(A.log, "a")
    meta = Server(("127.0.0.1", 0), Meta)
    gate = Server(("127.0.0.1", 0), Gate)
    for s in (meta, gate):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    tmp = A.ready + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d %d\n" % (meta.server_address[1], gate.server_address[1]))
    os.rename(tmp, A.ready)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
