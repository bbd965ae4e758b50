#!/usr/bin/env python3
"""Hostile arrays through the mount with views on (issue 19).

Each case is a fresh copy of a TileDB-written array (the corpus) that
lies: a schema field (tile extents, domain bounds, cell_val_num,
capacity, datatype, counts), a newer schema that disagrees with the
fragments' own, a fragment footer field (non-empty domain, tile counts,
file sizes), a tile offsets / var sizes entry, a payload byte anywhere, a
fragment cloned up to thousands of times, a file dropped or truncated, a
chunk length: one to three of these stacked (tdbfmt.py says how fields
are found).  The copy is dropped into the source of a live mount
(`-o views`), and the array is used as a user would: its directory
listed (ls -la), every file under @views/ listed, stat'ed, opened and
read (its start, its end when its size is known, a piece in the middle;
a CSV of unknown size up to a cap), a data file read.  Then the copy is
removed.

What is asserted (FAIL otherwise):

  crash   the daemon must not die (an ASan build makes every memory error
          a crash; its exit status is checked at every unmount);
  hang    every operation is answered within the timeout;
  memory  the daemon's peak RSS (VmHWM) stays within cache_size + 64 MiB
          (not under the sanitizers, where RSS means nothing);
  fds     the daemon's open descriptors stay within --max-fds, and it
          never logs "Too many open files";
  starve  a pristine control array in the same mount reads back the same
          bytes (its cells.csv and a data file) after every batch.

Any errno from a lying array is fine: EIO, ENOENT, EFBIG, whatever the
daemon chose.  The report's last line is 'campaign: N passed, M failed'.
"""
import argparse
import errno
import os
import queue
import random
import resource
import shutil
import struct
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tdbfmt  # noqa: E402

KEY = b"TileDB-oracle-key-0123456789ABCD"
U8 = (0, 1, 2, 0x7F, 0x80, 0xFF)
U32 = (0, 1, 2, 3, 7, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 29, 1 << 16)
U64 = (0, 1, 2, 1 << 31, 1 << 32, (1 << 62) + 1, 1 << 63, (1 << 64) - 1, 0x7FFFFFFFFFFFFFFF, 1 << 40)
CSV_CAP = 2 << 20
READ = 256 << 10


def special(rnd, width, old):
    """A value to write over a field of `width` bytes that held `old`."""
    mask = (1 << (8 * width)) - 1
    pool = {1: U8, 2: (0, 1, 0xFFFF, 0x8000), 4: U32, 8: U64}[width]
    how = rnd.random()
    if how < 0.55:
        v = rnd.choice(pool)
    elif how < 0.75:
        v = old + rnd.choice((1, -1, 2, -2))
    elif how < 0.9:
        v = old * rnd.choice((2, 3, 1000, 1 << 20))
    else:
        v = rnd.getrandbits(8 * width)
    return v & mask


def float_special(rnd, width):
    big = 3e38 if width == 4 else 1e300
    tiny = 1e-45 if width == 4 else 1e-300
    v = rnd.choice((0.0, -0.0, float("nan"), float("inf"), -float("inf"), tiny, big, -big, 0.5))
    return struct.pack("<f" if width == 4 else "<d", v)


# ---- the arrays ---------------------------------------------------------------------------

def find_arrays(roots):
    """name -> array directory, for every case with an array/ under roots."""
    out = {}
    for root in roots:
        for case in sorted(os.listdir(root)):
            arr = os.path.join(root, case, "array")
            if os.path.isdir(arr) and case not in out:
                out[case] = arr
    return out


class Array:
    """A copy of an array in the source, and what can be lied about in it."""

    def __init__(self, path):
        self.path = path
        self.key = None
        self.schemas = {}
        sd = os.path.join(path, "__schema")
        for name in sorted(os.listdir(sd)) if os.path.isdir(sd) else []:
            f = os.path.join(sd, name)
            if os.path.isfile(f):
                self.schemas[name] = f
        if not self.schemas and os.path.isfile(os.path.join(path, "__array_schema.tdb")):
            self.schemas["__array_schema.tdb"] = os.path.join(path, "__array_schema.tdb")
        fd = os.path.join(path, "__fragments")
        self.frags = sorted(os.path.join(fd, f) for f in os.listdir(fd)) if os.path.isdir(fd) else []

    def schema(self, name):
        b = open(self.schemas[name], "rb").read()
        payload, _, enc = tdbfmt.generic_decode(b, 0, KEY)
        return payload, enc

    def frag_schema_name(self, frag):
        m = open(os.path.join(frag, "__fragment_metadata.tdb"), "rb").read()
        flen = struct.unpack_from("<Q", m, len(m) - 8)[0]
        st = len(m) - 8 - flen
        ln = struct.unpack_from("<Q", m, st + 4)[0]
        return m, m[st + 12:st + 12 + ln].decode()

    def files(self):
        out = []
        for d, _, fs in os.walk(self.path):
            out += [os.path.join(d, f) for f in fs]
        return out


def write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


def pick_field(rnd, fields, prefer):
    hot = [f for f in fields if any(p in f.name for p in prefer)]
    return rnd.choice(hot if hot and rnd.random() < 0.7 else fields)


def set_field(rnd, buf, f, base=0):
    if "tile_extent" in f.name or "domain_" in f.name or "ned" in f.name:
        if rnd.random() < 0.3 and f.width in (4, 8):
            buf[base + f.off:base + f.off + f.width] = float_special(rnd, f.width)
            return "%s float" % f.name
    v = special(rnd, f.width, f.value)
    buf[base + f.off:base + f.off + f.width] = v.to_bytes(f.width, "little")
    return "%s %d->%d" % (f.name, f.value, v)


SCHEMA_HOT = ("tile_extent", "domain_", "cell_val_num", "capacity", "datatype", "dim_num",
              "attribute_num", "domain_size", "fill_value_size", "null_tile_extent", "array_type",
              "cell_order", "tile_order", "nullable", "name_len")
FOOTER_HOT = ("ned", "sparse_tile_num", "last_tile_cell_num", "file_sizes", "file_var_sizes",
              "file_validity_sizes", "dense", "has_", "null_non_empty")


def m_schema_field(rnd, a):
    name = rnd.choice(sorted(a.schemas))
    payload, enc = a.schema(name)
    s = tdbfmt.Schema(payload)
    buf = bytearray(payload)
    desc = set_field(rnd, buf, pick_field(rnd, s.fields, SCHEMA_HOT))
    write(a.schemas[name], tdbfmt.generic_encode(bytes(buf), 22, KEY if enc else None))
    return "schema %s: %s" % (name[:12], desc)


def m_schema_newer(rnd, a):
    """A newer schema than every fragment's: what views take extents from."""
    name = sorted(a.schemas)[-1]
    if name == "__array_schema.tdb":
        return m_schema_field(rnd, a)
    payload, enc = a.schema(name)
    s = tdbfmt.Schema(payload)
    buf = bytearray(payload)
    desc = set_field(rnd, buf, pick_field(rnd, s.fields, ("tile_extent", "domain_", "cell_val_num",
                                                          "datatype", "capacity")))
    t = int(time.time() * 1000) + 10 ** 9
    new = os.path.join(os.path.dirname(a.schemas[name]), "__%d_%d_%s" % (t, t, uuid.uuid4().hex))
    write(new, tdbfmt.generic_encode(bytes(buf), 22, KEY if enc else None))
    a.schemas[os.path.basename(new)] = new
    return "newer schema: " + desc


def m_footer_field(rnd, a):
    frag = rnd.choice(a.frags)
    meta, sname = a.frag_schema_name(frag)
    payload, _ = a.schema(sname)
    f = tdbfmt.Footer(meta, tdbfmt.Schema(payload))
    buf = bytearray(meta)
    desc = set_field(rnd, buf, pick_field(rnd, f.fields, FOOTER_HOT))
    write(os.path.join(frag, "__fragment_metadata.tdb"), bytes(buf))
    return "footer %s: %s" % (os.path.basename(frag)[:16], desc)


def m_offsets_field(rnd, a):
    """A tile offsets, var offsets or var sizes entry: the tile rewritten
    unfiltered just before the footer, which is pointed at it."""
    frag = rnd.choice(a.frags)
    meta, sname = a.frag_schema_name(frag)
    payload, enc = a.schema(sname)
    f = tdbfmt.Footer(meta, tdbfmt.Schema(payload))
    which = rnd.choice(("tile_offsets", "tile_var_offsets", "tile_var_sizes"))
    table = getattr(f, which)
    idx = rnd.randrange(len(table))
    body, _, _ = tdbfmt.generic_decode(meta, table[idx], KEY)
    fields = tdbfmt.offsets_fields(body, which)
    buf = bytearray(body)
    desc = set_field(rnd, buf, rnd.choice(fields))
    tile = tdbfmt.generic_encode(bytes(buf), 22, KEY if enc else None)
    footer = bytearray(meta[f.start:len(meta) - 8])
    slot = next(x for x in f.fields if x.name == "%s_offset[%d]" % (which, idx))
    footer[slot.off - f.start:slot.off - f.start + 8] = struct.pack("<Q", f.start)
    out = meta[:f.start] + tile + bytes(footer) + struct.pack("<Q", len(footer))
    write(os.path.join(frag, "__fragment_metadata.tdb"), out)
    return "%s[%d] of %s: %s" % (which, idx, os.path.basename(frag)[:16], desc)


def m_payload(rnd, a):
    """A special value anywhere in a schema's payload."""
    name = rnd.choice(sorted(a.schemas))
    payload, enc = a.schema(name)
    buf = bytearray(payload)
    w = rnd.choice((1, 4, 8))
    if len(buf) <= w:
        return m_schema_field(rnd, a)
    p = rnd.randrange(len(buf) - w)
    old = int.from_bytes(buf[p:p + w], "little")
    v = special(rnd, w, old)
    buf[p:p + w] = v.to_bytes(w, "little")
    write(a.schemas[name], tdbfmt.generic_encode(bytes(buf), 22, KEY if enc else None))
    return "schema payload %d/%d %d->%d" % (p, w, old, v)


def m_clone(rnd, a, big):
    """A fragment cloned k times, each a later fragment of the same cells."""
    frag = rnd.choice(a.frags)
    k = rnd.choice((2, 10, 100, 300) + ((1000, 2000) if big else ()))
    name = os.path.basename(frag)
    parts = name.split("_")    # '', '', t1, t2, uuid, v
    if len(parts) != 6:
        return m_drop(rnd, a)
    base = int(parts[3])
    commits = os.path.join(a.path, "__commits")
    os.makedirs(commits, exist_ok=True)
    for i in range(k):
        t = base + 1 + i
        new = "__%d_%d_%s_%s" % (t, t, uuid.uuid4().hex, parts[5])
        dst = os.path.join(os.path.dirname(frag), new)
        os.mkdir(dst)
        for f in os.listdir(frag):
            os.link(os.path.join(frag, f), os.path.join(dst, f))
        open(os.path.join(commits, new + ".wrt"), "wb").close()
        a.frags.append(dst)
    return "clone %s x%d" % (name[:16], k)


def m_drop(rnd, a):
    f = rnd.choice(a.files())
    how = rnd.choice(("delete", "truncate", "empty"))
    if how == "delete":
        os.unlink(f)
    else:
        b = open(f, "rb").read()
        write(f, b[:rnd.randrange(len(b))] if how == "truncate" and b else b"")
    return "%s %s" % (how, os.path.relpath(f, a.path))


def m_chunk(rnd, a):
    """A chunk length of a data file's first tile."""
    data = [f for f in a.files() if "__fragments" in f and f.endswith(".tdb")
            and not f.endswith("__fragment_metadata.tdb")]
    if not data:
        return m_drop(rnd, a)
    f = rnd.choice(data)
    b = bytearray(open(f, "rb").read())
    if len(b) < 20:
        return m_drop(rnd, a)
    p = rnd.choice((0, 8, 12, 16))
    w = 8 if p == 0 else 4
    old = int.from_bytes(b[p:p + w], "little")
    v = special(rnd, w, old)
    b[p:p + w] = v.to_bytes(w, "little")
    write(f, bytes(b))
    return "chunk field %d of %s %d->%d" % (p, os.path.relpath(f, a.path), old, v)


MUTATIONS = [(m_schema_field, 5), (m_schema_newer, 3), (m_footer_field, 5), (m_offsets_field, 3),
             (m_payload, 2), (m_clone, 2), (m_drop, 1), (m_chunk, 1)]


def mutate(rnd, a, big):
    descs = []
    for _ in range(rnd.choice((1, 1, 1, 2, 2, 3))):
        fn = rnd.choices([m for m, _ in MUTATIONS], [w for _, w in MUTATIONS])[0]
        try:
            descs.append(fn(rnd, a, big) if fn is m_clone else fn(rnd, a))
        except (ValueError, IndexError, KeyError, OSError, OverflowError, struct.error) as e:
            descs.append("(%s: %s)" % (fn.__name__, e))    # an earlier lie broke the parse
    return "; ".join(descs)


# ---- the mount ---------------------------------------------------------------------------

class Mount:
    def __init__(self, args, src, mnt, cfg, log):
        self.args, self.src, self.mnt, self.cfg, self.logpath = args, src, mnt, cfg, log
        self.mounts = 0

    def start(self):
        self.log = open(self.logpath, "ab")
        nofile = self.args.nofile

        def limits():
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.proc = subprocess.Popen([self.args.tilefs, "-f", "-o", "config=" + self.cfg, "-o", "views",
                                      "-o", "cache_size=" + self.args.cache_size, self.src, self.mnt],
                                     stdout=self.log, stderr=self.log, preexec_fn=limits)
        deadline = time.monotonic() + 30
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("FAIL: tilefs did not mount (see %s)" % self.logpath)
            time.sleep(0.01)   # bounded polling for the mount to appear
        self.mounts += 1

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """Unmount; the daemon's exit status (non-zero: a sanitizer report)."""
        if os.path.ismount(self.mnt):
            subprocess.run(["fusermount3", "-u", self.mnt], stderr=subprocess.DEVNULL)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = "no exit within 30 s of unmount"
        if os.path.ismount(self.mnt):
            subprocess.run(["fusermount3", "-u", "-z", self.mnt], stderr=subprocess.DEVNULL)
        self.log.close()
        return None if rc == 0 else rc

    def kill(self):
        self.proc.kill()
        self.proc.wait()
        subprocess.run(["fusermount3", "-u", "-z", self.mnt], stderr=subprocess.DEVNULL)
        self.log.close()

    def status(self, key):
        try:
            for line in open("/proc/%d/status" % self.proc.pid):
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def fds(self):
        try:
            return len(os.listdir("/proc/%d/fd" % self.proc.pid))
        except OSError:
            return 0


class Worker:
    """Runs the reads on a thread, so that one that never returns is a
    finding (hang) instead of a stuck campaign."""

    def __init__(self):
        self.jobs, self.done = queue.Queue(), queue.Queue()
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            try:
                self.done.put(("ok", job()))
            except OSError as e:
                self.done.put(("err", e.errno))
            except Exception as e:          # noqa: BLE001 - a harness bug, reported
                self.done.put(("bug", repr(e)))

    def call(self, job, timeout):
        self.jobs.put(job)
        try:
            return self.done.get(timeout=timeout)
        except queue.Empty:
            return ("hang", None)


def use_file(path, rnd):
    """stat, open, read the start, the end, a middle piece; a CSV of
    unknown size sequentially up to CSV_CAP.  Errors are answers."""
    st = os.stat(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        got = len(os.pread(fd, READ, 0))
        size = st.st_size
        if size > READ:
            got += len(os.pread(fd, 65536, max(size - 65536, 0)))
            got += len(os.pread(fd, 4096, rnd.randrange(size)))
        elif size == 0 or path.endswith(".csv"):
            off = got
            while got and off < CSV_CAP:
                n = len(os.pread(fd, READ, off))
                if not n:
                    break
                off += n
            got = off
        return got
    finally:
        os.close(fd)


def listing(path):
    """ls -la: every entry lstat'ed."""
    names = os.listdir(path)
    for n in names:
        try:
            os.lstat(os.path.join(path, n))
        except OSError as e:
            if e.errno == errno.ENOTCONN:
                raise
    return names


# ---- the campaign --------------------------------------------------------------------------

class Campaign:
    def __init__(self, args):
        self.args = args
        self.src = os.path.join(args.work, "src")
        self.mnt = os.path.join(args.work, "mnt")
        self.counts = {"ok": 0, "crash": 0, "hang": 0, "memory": 0, "fds": 0, "starve": 0}
        self.errnos = {}
        self.peak_rss = self.peak_fds = 0
        self.ops = 0
        self.worker = Worker()

    def log(self, msg):
        print(msg, flush=True)

    def prepare(self, arrays):
        os.makedirs(self.mnt, exist_ok=True)
        os.makedirs(self.src, exist_ok=True)
        key = os.path.join(self.args.work, "oracle.key")
        with open(key, "wb") as f:
            f.write(KEY)
        os.chmod(key, 0o600)
        self.cfg = os.path.join(self.args.work, "views.ini")
        with open(self.cfg, "w") as f:
            f.write("[tilefs]\ndefault_key = oracle\n\n[key oracle]\nfile = %s\n" % key)
        control = self.args.control if self.args.control in arrays else sorted(arrays)[0]
        shutil.copytree(arrays[control], os.path.join(self.src, "control"))
        self.mount = Mount(self.args, self.src, self.mnt, self.cfg, os.path.join(self.args.work, "tilefs.log"))
        self.mount.start()
        self.control = self.read_control()
        if not self.control or any(v is None for v in self.control.values()):
            raise SystemExit("FAIL: the pristine control array %s does not read (%s)" % (control, self.control))

    def read_control(self):
        out = {}
        base = os.path.join(self.mnt, "control")
        data = sorted(f for f in self.walk(base) if f.endswith(".tdb") and "__fragments" in f)[:1]
        for rel in ["@views/cells.csv"] + [os.path.relpath(f, base) for f in data]:
            r = self.worker.call(lambda p=os.path.join(base, rel): open(p, "rb").read(), self.args.timeout)
            out[rel] = r[1] if r[0] == "ok" else None
        return out

    def walk(self, top):
        out = []
        for d, _, fs in os.walk(top):
            out += [os.path.join(d, f) for f in fs]
        return out

    def fail(self, cls, what, msg):
        self.counts[cls] += 1
        self.log("FAIL %s: %s: %s" % (cls, what, msg))

    def restart(self, why):
        self.mount.kill()
        self.mount.start()
        self.log("  (remounted: %s)" % why)

    def op(self, job, what):
        """One operation; None when the campaign must move on (hang or crash)."""
        self.ops += 1
        kind, val = self.worker.call(job, self.args.timeout)
        if kind == "hang":
            self.fail("hang", what, "no answer in %g s (log: %s)" % (self.args.timeout, self.tail()))
            self.mount.kill()
            self.worker = Worker()      # the old one may stay stuck in the dead mount
            self.mount.start()
            return None
        if kind == "bug":
            raise SystemExit("harness error on %s: %s" % (what, val))
        if not self.mount.alive() or (kind == "err" and val == errno.ENOTCONN):
            self.fail("crash", what, "daemon died (log: %s)" % self.tail())
            self.restart("after a crash")
            return None
        if kind == "err":
            self.errnos[errno.errorcode.get(val, str(val))] = self.errnos.get(errno.errorcode.get(val, str(val)), 0) + 1
        return (kind, val)

    def use(self, rnd, name, what):
        base = os.path.join(self.mnt, name)
        if self.op(lambda: listing(base), what + " [ls]") is None:
            return False
        views = os.path.join(base, "@views")
        r = self.op(lambda: self.walk(views), what + " [ls @views]")
        if r is None:
            return False
        files = r[1] if r[0] == "ok" else []
        data = [os.path.join(base, os.path.relpath(f, os.path.join(self.src, name)))
                for f in self.walk(os.path.join(self.src, name))
                if "__fragments" in f and f.endswith(".tdb")]
        rnd.shuffle(data)
        # every view but at most 12 fragment views; one data file
        top = [f for f in files if "/fragments/" not in f]
        per = [f for f in files if "/fragments/" in f]
        rnd.shuffle(per)
        for f in top + per[:12] + data[:1]:
            if self.op(lambda f=f: use_file(f, rnd), "%s [%s]" % (what, os.path.relpath(f, base))) is None:
                return False
        return True

    def check_bounds(self, what):
        rss, fds = self.mount.status("VmHWM"), self.mount.fds()
        self.peak_rss, self.peak_fds = max(self.peak_rss, rss), max(self.peak_fds, fds)
        ok = True
        if not self.args.sanitizers and rss > self.args.cache_bytes + (64 << 20):
            self.fail("memory", what, "peak RSS %d MiB > cache_size + 64 MiB" % (rss >> 20))
            ok = False
        if fds > self.args.max_fds:
            self.fail("fds", what, "%d open fds > %d" % (fds, self.args.max_fds))
            ok = False
        if ok and b"Too many open files" in self.tail(4096).encode():
            self.fail("fds", what, "the daemon ran out of fds")
            ok = False
        if not ok:
            self.restart("bounds")      # a fresh peak for the next cases
        return ok

    def check_control(self, what):
        now = self.read_control()
        if now != self.control:
            bad = [k for k in now if now[k] != self.control[k]]
            self.fail("starve", what, "the control array reads otherwise: %s" % bad)

    def tail(self, n=300):
        try:
            with open(self.mount.logpath, "rb") as f:
                f.seek(0, 2)
                f.seek(max(f.tell() - n, 0))
                return f.read().decode(errors="replace").strip().replace("\n", " | ")
        except OSError:
            return ""

    def run(self, arrays):
        self.prepare(arrays)
        names = sorted(arrays)
        start = time.monotonic()
        try:
            for i in range(self.args.first, self.args.count):
                if self.args.only is not None and i != self.args.only:
                    continue
                rnd = random.Random(self.args.seed * 1000003 + i)
                case = names[i % len(names)] if self.args.round_robin else rnd.choice(names)
                name = "%s.%d" % (case, i)
                dst = os.path.join(self.src, name)
                shutil.copytree(arrays[case], dst)
                desc = mutate(rnd, Array(dst), self.args.big)
                what = "#%d %s: %s" % (i, case, desc)
                before = self.counts["hang"] + self.counts["crash"]
                self.use(rnd, name, what)
                if self.counts["hang"] + self.counts["crash"] == before:
                    self.check_bounds(what)
                    if self.counts["hang"] + self.counts["crash"] == before:
                        self.counts["ok"] += 1
                shutil.rmtree(dst, ignore_errors=True)
                if self.args.trace:
                    self.log("  #%d RSS %d KiB, peak %d KiB; cache: %s" % (
                        i, self.mount.status("VmRSS") >> 10, self.mount.status("VmHWM") >> 10,
                        cache_text(self.mnt)))
                if i % self.args.batch == self.args.batch - 1:
                    self.check_control("after #%d" % i)
                    rc = self.mount.stop()
                    if rc is not None:
                        self.fail("crash", "batch ending #%d" % i, "exit status %s at unmount" % rc)
                    self.mount.start()
                if self.args.progress and i and i % self.args.progress == 0:
                    self.log("... %d cases, %.0f s, %s" % (i, time.monotonic() - start, self.counts))
            self.check_control("at the end")
        finally:
            rc = self.mount.stop()
            self.worker.jobs.put(None)
        if rc is not None:
            self.fail("crash", "the last unmount", "exit status %s" % rc)
        self.elapsed = time.monotonic() - start

    def report(self):
        failed = sum(v for k, v in self.counts.items() if k != "ok")
        self.log("cases: %d, operations: %d, mounts: %d, %.1f s; peak RSS %d MiB (cache_size %s), peak fds %d"
                 % (self.args.count if self.args.only is None else 1, self.ops, self.mount.mounts,
                    self.elapsed, self.peak_rss >> 20, self.args.cache_size, self.peak_fds))
        self.log("errors answered: " + " ".join("%s=%d" % kv for kv in sorted(self.errnos.items())))
        self.log("classes: " + " ".join("%s=%d" % kv for kv in self.counts.items()))
        self.log("campaign: %d passed, %d failed" % (self.counts["ok"], failed))
        return failed


def size_bytes(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def cache_text(mnt):
    try:
        return os.getxattr(mnt, "user.tilefs.cache").decode(errors="replace").strip().replace("\n", "; ")
    except OSError as e:
        return "(%s)" % e.strerror


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tilefs", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--corpus", action="append", required=True, help="a directory of cases (repeat)")
    ap.add_argument("--case", action="append", help="only these cases")
    ap.add_argument("--control", default="dense_2d")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", type=int, help="replay case number N of this seed")
    ap.add_argument("--first", type=int, default=0, help="start at case number N (batches as if from 0)")
    ap.add_argument("--trace", action="store_true", help="the daemon's RSS and cache after every case")
    ap.add_argument("--round-robin", action="store_true", help="every array in turn")
    ap.add_argument("--big", action="store_true", help="clone fragments up to 2,000 times")
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--cache-size", default="64M")
    ap.add_argument("--nofile", type=int, default=1024, help="the daemon's fd limit")
    ap.add_argument("--max-fds", type=int, default=0,
                    help="default: half the fd limit (the pool's bound and the reserve, tilefs(1)"
                    " LIMITS) and one per request in flight")
    ap.add_argument("--sanitizers", action="store_true", help="no RSS bound")
    ap.add_argument("--progress", type=int, default=0)
    args = ap.parse_args()
    args.cache_bytes = size_bytes(args.cache_size)
    args.max_fds = args.max_fds or args.nofile // 2 + 16
    arrays = find_arrays(args.corpus)
    if args.case:
        arrays = {k: v for k, v in arrays.items() if k in args.case or k == args.control}
    if not arrays:
        raise SystemExit("FAIL: no arrays under %s" % args.corpus)
    print("arrays: %d; seed %d; cache_size %s; fd limit %d" % (len(arrays), args.seed, args.cache_size,
                                                               args.nofile), flush=True)
    c = Campaign(args)
    c.run(arrays)
    sys.exit(1 if c.report() else 0)


if __name__ == "__main__":
    main()
