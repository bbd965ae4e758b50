#!/usr/bin/env python3
"""Corruption campaign through the mount (issue 9, item 3).

Copies TileDB-written cases (corpus manifests give each data file's tiles
and its expected decoded bytes) into a source directory, mounts it once per
batch, and for each corruption replaces one stored file under the live
mount (rename over it: a new version), then reads every file that decodes
from it whole through the mount, 64 KiB at a time, skipping over EIO, and
compares every byte served.  Each case is shown two ways at once:

  m/<case>/...  by [match] rules (tile files walked, chunk headers only),
  z/<case>/...  with no configuration (TileDB arrays: the fragment metadata
                gives every tile's offset and sizes).

Corruptions of a data file: bit flips, overwritten runs, truncations (at
random, at a tile or chunk boundary), length fields (a tile's chunk count,
a chunk's orig/filtered/metadata length) set to 0, 2^31-1 or 2^32-1, two
tiles swapped, bytes appended.  Arrays also get their fragment metadata or
schema corrupted, each such case in a fresh copy beside the others.

What is asserted (FAIL otherwise), per corruption:

  crash   the daemon must not die (an ASan build makes every memory error
          a crash; its exit status is checked at every unmount);
  hang    every whole-file read must be answered within the timeout;
  wrong   GUARDED files (a checksum filter in the pipeline, or an encrypted
          array: AES-256-GCM authenticates every chunk) must serve only
          legitimate bytes: each byte served equals the legitimate decoded
          byte at its offset, the size shown is the legitimate size unless
          some read failed, otherwise the range fails with EIO.
          UNGUARDED files may decode a flipped bit to other bytes, but only
          inside the tiles whose stored bytes were touched: every byte served
          outside them must be legitimate.
  framing a corruption that makes the framing wrong must give EIO somewhere
          in the file (guarded or not): a length field changed, a truncation
          (through the mount's zero-config path always, since the fragment
          metadata says how long every tile is; through a [match] rule
          unless it falls on a tile boundary, which leaves a well-formed
          shorter file), tiles of different stored sizes swapped in an array.

"Legitimate" bytes: the manifest's expected bytes, or what the corrupted
stored file still says when it is well formed: a [match] tile file cut at a
tile boundary is a shorter file; two swapped tiles decode swapped where
nothing (a [match] walk, or fragment metadata whose sizes still agree) can
tell.  TileDB's format cannot tell either: checksums and GCM tags are per
chunk, not per position.

Corrupted fragment metadata or schemas of unencrypted arrays are unguarded
for every file of the array (metadata can point a tile at another valid
tile): only crash and hang are asserted there.

The report's last line is 'campaign: N passed, M failed'.
"""
import argparse
import errno
import json
import os
import queue
import random
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

BS = 65536
PAGE = 4096
SPECIAL = (0, 2**31 - 1, 2**32 - 1)


# ---- the cases --------------------------------------------------------------------------------

class Target:
    """One stored data file of a case, with its tiles and expected bytes."""

    def __init__(self, case, info, expected, encrypted, root):
        self.case = case
        self.path = info["path"]
        self.role = info["role"]
        filt = info.get("effective_filters_on_disk") or []
        if isinstance(filt, dict):
            filt = [f["type"] for f in filt.get("filters", [])]
        self.filters = [str(f) for f in filt]
        self.encrypted = encrypted
        self.guarded = encrypted or any("CHECKSUM" in f for f in self.filters)
        tiles = info["tiles"]
        if isinstance(tiles, str):      # some manifests hold a repr
            import ast
            tiles = ast.literal_eval(tiles)
        self.tiles = [(t["offset"], t["persisted_size"]) for t in tiles]
        self.dec_sizes = list(info["unfiltered_tile_sizes"])
        self.expected = expected
        self.folded = bool(info.get("offsets_skipped"))
        self.stored = open(os.path.join(root, case, self.path), "rb").read()
        self.var_of = None              # folded offsets: the var Target they come from

    def dec_ranges(self):
        out, at = [], 0
        for n in self.dec_sizes:
            out.append((at, at + n))
            at += n
        return out


def load_cases(roots, only):
    """Cases (name -> dict) from every manifest under roots."""
    cases = {}
    for root in roots:
        for case in sorted(os.listdir(root)):
            mf = os.path.join(root, case, "manifest.json")
            if not os.path.exists(mf) or (only and case not in only) or case in cases:
                continue
            m = json.load(open(mf))
            enc = bool(m.get("encryption"))
            targets = []
            for fr in m["fragments"]:
                byname = {}
                for fn, info in fr["data_files"].items():
                    if info.get("kind") == "special" or "unfiltered_concat" not in info:
                        continue
                    exp = open(os.path.join(root, case, info["unfiltered_concat"]), "rb").read()
                    t = Target(case, info, exp, enc, root)
                    t.frag_dir = os.path.dirname(info["path"])
                    byname[fn] = t
                    targets.append(t)
                for fn, t in byname.items():
                    if t.folded:
                        base = fn[:-len(".tdb")] + "_var.tdb"
                        t.var_of = byname.get(base)
            if targets:
                cases[case] = {"root": root, "targets": targets, "encrypted": enc,
                               "schemas": [s["path"] for s in m.get("schema_files", [])],
                               "frag_dirs": sorted({t.frag_dir for t in targets})}
    return cases


# ---- corruptions -----------------------------------------------------------------------------

def walk_headers(t):
    """(offset, kind) of every length field of t's stored file: 'count' (u64)
    at each tile's start and 'orig'/'filt'/'meta' (u32) in each chunk header."""
    out = []
    b = t.stored
    for off, size in t.tiles:
        if off + 8 > len(b):
            continue
        out.append((off, "count"))
        n = struct.unpack_from("<Q", b, off)[0]
        p = off + 8
        for _ in range(n):
            if p + 12 > off + size:
                break
            o, f, m = struct.unpack_from("<III", b, p)
            out += [(p, "orig"), (p + 4, "filt"), (p + 8, "meta")]
            p += 12 + f + m
    return out


def touched_tiles(t, lo, hi):
    """Indexes of the tiles whose stored bytes meet [lo, hi)."""
    return {i for i, (o, s) in enumerate(t.tiles) if o < hi and lo < o + max(s, 1)}


def resized(t, b, touched):
    """A [match] tile file's index trusts each chunk's orig_len: when the
    corrupted headers still frame every tile where it was but give some
    tiles other decoded sizes, later tiles legitimately move.  The
    alternative: untouched tiles' original bytes at their new offsets,
    holes for the touched or resized ones.  None when nothing moved or the
    framing no longer holds."""
    sizes = []
    for i, (o, sz) in enumerate(t.tiles):
        if o + 8 > len(b):
            return None
        n = struct.unpack_from("<Q", b, o)[0]
        p, total = o + 8, 0
        for _ in range(min(n, sz // 12 + 1)):
            if p + 12 > o + sz:
                return None
            orig, f, m = struct.unpack_from("<III", b, p)
            total += orig
            p += 12 + f + m
        if p != o + sz or n > sz // 12:
            return None
        sizes.append(total)
    # Beyond 256 MiB the alternative is not materialized: the reader goes
    # no further than the longest alternative and a block, so all it reads
    # lies in the resized tile, which must fail.  (Holes are filled whole:
    # later tiles must sit at their offsets.)
    if sizes == t.dec_sizes or sum(sizes) > 256 << 20:
        return None
    r, out, holes, at = t.dec_ranges(), bytearray(), [], 0
    for i, n in enumerate(sizes):
        if i in touched or n != t.dec_sizes[i]:
            holes.append((at, at + n))
            out += bytes(n)
        else:
            out += t.expected[r[i][0]:r[i][1]]
        at += n
    return bytes(out), holes


def corrupt_data(rnd, t):
    """A corruption of data file t: (new bytes, description, touched tiles,
    legitimate alternatives {mode: [bytes...]}, framing_broken {mode: bool})."""
    b = bytearray(t.stored)
    n = len(b)
    kinds = ["flip", "flip", "overwrite", "truncate", "length", "length", "swap", "append"]
    kind = rnd.choice(kinds)
    alts = {"m": [], "z": []}
    framing = {"m": False, "z": False}
    if kind == "flip":
        k = rnd.choice((1, 1, 2, 3, 8))
        spots = []
        hdrs = walk_headers(t)
        for _ in range(k):
            if hdrs and rnd.random() < 0.3:     # aim at a header now and then
                p = rnd.choice(hdrs)[0] + rnd.randrange(4)
            else:
                p = rnd.randrange(n)
            bit = rnd.randrange(8)
            b[p] ^= 1 << bit
            spots.append((p, bit))
        lo, hi = min(p for p, _ in spots), max(p for p, _ in spots) + 1
        touched = set()
        for p, _ in spots:
            touched |= touched_tiles(t, p, p + 1)
        # a length field changed (two flips of one bit undo each other)
        hdr_changed = any(b[h + i] != t.stored[h + i] for h, kd in hdrs
                          for i in range(8 if kd == "count" else 4) if h + i < n)
        framing["m"] = framing["z"] = hdr_changed
        desc = "flip " + " ".join("%d.%d" % s for s in spots)
    elif kind == "overwrite":
        p = rnd.randrange(n)
        ln = min(rnd.choice((1, 2, 4, 16, 64, 512)), n - p)
        fill = rnd.choice(("rand", "zero", "ones"))
        data = bytes(rnd.randrange(256) for _ in range(ln)) if fill == "rand" else \
            (b"\0" if fill == "zero" else b"\xff") * ln
        b[p:p + ln] = data
        touched = touched_tiles(t, p, p + ln)
        desc = "overwrite %d+%d %s" % (p, ln, fill)
        hdrs = walk_headers(t)
        framing["m"] = framing["z"] = any(
            bytes(b[h:h + (8 if kd == "count" else 4)]) != t.stored[h:h + (8 if kd == "count" else 4)]
            for h, kd in hdrs)
    elif kind == "truncate":
        how = rnd.choice(("random", "tile", "chunk", "minus1", "zero"))
        bounds = [o for o, _ in t.tiles if 0 < o < n]
        if how == "tile" and bounds:
            cut = rnd.choice(bounds)
        elif how == "chunk":
            hd = [h for h, kd in walk_headers(t) if kd == "orig" and h > 0]
            cut = rnd.choice(hd) if hd else rnd.randrange(n)
        elif how == "minus1":
            cut = n - 1
        elif how == "zero":
            cut = 0
        else:
            cut = rnd.randrange(n)
        del b[cut:]
        touched = touched_tiles(t, cut, n)
        desc = "truncate to %d (%s)" % (cut, how)
        aligned = cut in [o for o, _ in t.tiles] or cut == 0
        framing["z"] = True
        framing["m"] = not aligned
        if aligned:     # a well-formed shorter tile file
            keep = sum(1 for o, _ in t.tiles if o < cut)
            alts["m"].append(t.expected[:sum(t.dec_sizes[:keep])])
    elif kind == "length":
        hdrs = walk_headers(t)
        if not hdrs:
            return corrupt_data(rnd, t)
        p, kd = rnd.choice(hdrs)
        v = rnd.choice(SPECIAL)
        width = 8 if kd == "count" else 4
        old = int.from_bytes(b[p:p + width], "little")
        if old == v:
            return corrupt_data(rnd, t)         # no change: draw again
        b[p:p + width] = v.to_bytes(width, "little")
        touched = touched_tiles(t, p, p + width)
        desc = "length %s at %d: %d -> %d" % (kd, p, old, v)
        framing["m"] = framing["z"] = True
    elif kind == "swap":
        if len(t.tiles) < 2:
            return corrupt_data(rnd, t)
        i, j = sorted(rnd.sample(range(len(t.tiles)), 2))
        (oi, si), (oj, sj) = t.tiles[i], t.tiles[j]
        if t.stored[oi:oi + si] == t.stored[oj:oj + sj]:
            return corrupt_data(rnd, t)
        b = bytearray(t.stored[:oi] + t.stored[oj:oj + sj] + t.stored[oi + si:oj] + t.stored[oi:oi + si]
                      + t.stored[oj + sj:])
        touched = set(range(i, j + 1))
        desc = "swap tiles %d and %d (%d and %d bytes)" % (i, j, si, sj)
        r = t.dec_ranges()
        order = list(range(len(t.tiles)))
        order[i], order[j] = j, i
        swapped = b"".join(t.expected[r[k][0]:r[k][1]] for k in order)
        alts["m"].append(swapped)
        if si == sj and t.dec_sizes[i] == t.dec_sizes[j]:
            alts["z"].append(swapped)            # the metadata still agrees
        else:
            framing["z"] = True
    else:  # append
        ln = rnd.choice((1, 8, 12, 100))
        b += bytes(rnd.randrange(256) for _ in range(ln))
        touched = set()
        desc = "append %d bytes" % ln
        framing["m"] = True                     # trailing bytes are no tile
    if kind in ("flip", "overwrite", "length"):
        alt = resized(t, b, touched)
        if alt:
            alts["m"].append(alt)
    alts = {m: [a if isinstance(a, tuple) else (a, []) for a in v] for m, v in alts.items()}
    return bytes(b), desc, touched, alts, framing


def flip_file(rnd, data):
    """Flip 1-8 bits, overwrite a run, or truncate a metadata file."""
    b = bytearray(data)
    kind = rnd.choice(("flip", "flip", "overwrite", "truncate"))
    if kind == "flip" or not b:
        spots = []
        for _ in range(rnd.choice((1, 2, 8))):
            p = rnd.randrange(max(len(b), 1))
            if b:
                b[p] ^= 1 << rnd.randrange(8)
            spots.append(p)
        return bytes(b), "flip at " + ",".join(map(str, spots))
    if kind == "overwrite":
        p = rnd.randrange(len(b))
        ln = min(rnd.choice((1, 4, 8, 32)), len(b) - p)
        b[p:p + ln] = bytes(rnd.randrange(256) for _ in range(ln))
        return bytes(b), "overwrite %d+%d" % (p, ln)
    cut = rnd.randrange(len(b))
    return bytes(b[:cut]), "truncate to %d" % cut


def dep_alts(o, desc, mode, alts):
    """Folded offsets o rebuilt from a var file whose tiles were swapped: its
    tiles swap too where the var file's swapped version is legitimate."""
    if not desc.startswith("swap") or not alts[mode]:
        return []
    i, j = int(desc.split()[2]), int(desc.split()[4])
    r = o.dec_ranges()
    order = list(range(len(r)))
    order[i], order[j] = j, i
    return [(b"".join(o.expected[r[k][0]:r[k][1]] for k in order), [])]


# ---- the mount -----------------------------------------------------------------------------

class Mount:
    def __init__(self, args, src, mnt, cfg, log):
        self.args, self.src, self.mnt, self.cfg, self.logpath = args, src, mnt, cfg, log
        self.proc = None
        self.mounts = 0

    def start(self):
        self.log = open(self.logpath, "ab")
        self.proc = subprocess.Popen([self.args.tilefs, "-f", "-o", "config=" + self.cfg, "-o",
                                      "cache_size=" + self.args.cache_size, self.src, self.mnt],
                                     stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("FAIL: tilefs did not mount (see %s)" % self.logpath)
            time.sleep(0.01)   # bounded polling for the mount to appear
        self.mounts += 1

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """Unmount; the daemon's exit status (non-zero: a sanitizer report
        at exit, or a crash) or None if it exited cleanly."""
        if os.path.ismount(self.mnt):
            subprocess.run(["fusermount3", "-u", self.mnt], stderr=subprocess.DEVNULL)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = "no exit within 30 s of unmount"
        if os.path.ismount(self.mnt):
            subprocess.run(["fusermount3", "-u", "-z", self.mnt], stderr=subprocess.DEVNULL)
        self.log.close()
        return None if rc == 0 else rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        subprocess.run(["fusermount3", "-u", "-z", self.mnt], stderr=subprocess.DEVNULL)


class Reader:
    """Reads whole files on a thread, so a read that is never answered is a
    hang the main thread sees (and ends by killing the daemon)."""

    def __init__(self):
        self.jobs, self.results = queue.Queue(), queue.Queue()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            self.results.put(read_whole(*job))

    def read(self, path, want, timeout):
        self.jobs.put((path, want))
        try:
            return self.results.get(timeout=timeout)
        except queue.Empty:
            return None

    def drain(self, timeout):
        try:
            return self.results.get(timeout=timeout)
        except queue.Empty:
            return None


def read_whole(path, want):
    """{'size': shown size, 'blocks': [(off, bytes|None)], 'err': errno of open or None}."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        return {"size": None, "blocks": [], "err": e.errno}
    try:
        size = os.fstat(fd).st_size
        blocks = []
        # A lying header can make a file of gigabytes: read what could be
        # legitimate and a block more; a size beyond that is judged as such.
        end = min(max(size, want), want + BS)
        off = 0
        # A read that meets a failing range returns what came before it
        # (a short count); the next read from there says EIO.  Past an EIO
        # we go on a page further, so every intact byte is read and judged.
        while off <= end:
            try:
                d = os.pread(fd, BS, off)
            except OSError as e:
                if e.errno == errno.ENOTCONN:
                    return {"size": size, "blocks": blocks, "err": e.errno}
                blocks.append((off, None if e.errno == errno.EIO else e.errno))
                off = (off // PAGE + 1) * PAGE
                continue
            if not d:
                break
            blocks.append((off, d[:max(end - off, 0)]))
            off += len(d)
        return {"size": size, "blocks": blocks, "err": None}
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def in_ranges(ranges, off):
    return any(lo <= off < hi for lo, hi in ranges)


def judge(res, legit, protected):
    """Wrong bytes served, EIO seen, other errno: the fewest wrong bytes over
    the legitimate alternatives, each (bytes, holes).  A byte in a hole has
    no legitimate value; protected(k, offset) says whether a byte at that
    offset of alternative k must be legitimate (one served in a hole then
    counts as wrong)."""
    if res["err"] is not None:
        return 0, res["err"] == errno.EIO, None if res["err"] == errno.EIO else res["err"]
    eio = any(d is None for _, d in res["blocks"])
    other = next((d for _, d in res["blocks"] if isinstance(d, int)), None)
    best = None
    for k, (want, holes) in enumerate(legit):
        wrong = 0
        for off, d in res["blocks"]:
            if not isinstance(d, (bytes, bytearray)):
                continue
            exp = want[off:off + len(d)]
            if d == exp and not any(lo < off + len(d) and off < hi for lo, hi in holes):
                continue
            for i in range(len(d)):
                bad = in_ranges(holes, off + i) or i >= len(exp) or d[i] != exp[i]
                if bad and protected(k, off + i):
                    wrong += 1
        # the end of the file where more was legitimate, or less
        served = max((off + len(d) for off, d in res["blocks"] if isinstance(d, (bytes, bytearray))),
                     default=0)
        if not eio and served < len(want):
            wrong += sum(1 for i in range(served, len(want)) if protected(k, i))
        if not eio and res["size"] != len(want):
            wrong += 1 if protected(k, min(res["size"], len(want))) else 0
        best = wrong if best is None else min(best, wrong)
    return best, eio, other


# ---- the campaign -----------------------------------------------------------------------------

class Campaign:
    def __init__(self, args):
        self.args = args
        self.work = args.work
        self.src = os.path.join(self.work, "src")
        self.mnt = os.path.join(self.work, "mnt")
        self.counts = {"ok": 0, "eio": 0, "wrong": 0, "crash": 0, "hang": 0, "framing": 0, "errno": 0}
        self.by_kind = {}
        self.failures = []
        self.n = 0
        self.fresh_copies = 0

    def log(self, msg):
        print(msg, flush=True)

    # set-up
    def prepare(self, cases):
        os.makedirs(self.mnt, exist_ok=True)
        for mode in ("m", "z"):
            os.makedirs(os.path.join(self.src, mode), exist_ok=True)
            for case, c in cases.items():
                shutil.copytree(os.path.join(c["root"], case), os.path.join(self.src, mode, case))
        key = os.path.join(self.work, "oracle.key")
        with open(key, "w") as f:
            f.write(self.args.key_hex)
        os.chmod(key, 0o600)
        cfg = os.path.join(self.work, "campaign.ini")
        ini = ""
        self.match_mode = False
        if self.args.tools and os.path.exists(os.path.join(self.args.tools, "corpus.py")):
            ini = subprocess.run([sys.executable, os.path.join(self.args.tools, "corpus.py"), "ini", key,
                                  os.path.join(self.src, "m") + ":m"], check=True, capture_output=True,
                                 text=True).stdout
            self.match_mode = True
        else:
            ini = "[tilefs]\n\n[key oracle]\nfile = %s\n" % key
            self.log("note: no corpus.py (TF_TOOLS): [match] rules not exercised, zero-config only")
        ini = ini.replace("[tilefs]\n", "[tilefs]\ndefault_key = oracle\n", 1)
        with open(cfg, "w") as f:
            f.write(ini)
        self.mount = Mount(self.args, self.src, self.mnt, cfg, os.path.join(self.work, "tilefs.log"))
        self.mount.start()
        self.reader = Reader()

    def modes(self):
        return ("m", "z") if self.match_mode else ("z",)

    def replace(self, rel, data):
        path = os.path.join(self.src, rel)
        tmp = path + ".new"
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, path)

    def remount(self, why):
        rc = self.mount.stop()
        if rc is not None:
            self.fail("crash", "daemon exit status %s at unmount (%s)" % (rc, why))
        self.mount.start()

    def fail(self, cls, msg):
        self.counts[cls] += 1
        self.failures.append("%s: %s" % (cls, msg))
        self.log("FAIL %s: %s" % (cls, msg))

    # one read
    def check(self, rel, legit, protected, framing, guarded, what):
        """Read rel through the mount and classify it."""
        res = self.reader.read(os.path.join(self.mnt, rel), max(len(x) for x, _ in legit), self.args.timeout)
        if res is None:
            self.fail("hang", "%s: %s: no answer within %ss" % (what, rel, self.args.timeout))
            self.mount.kill()
            self.reader.drain(30)
            self.mount.log.close()
            self.mount.start()
            return "hang"
        if res["err"] == errno.ENOTCONN or not self.mount.alive():
            self.fail("crash", "%s: %s: the daemon died (log: %s)" % (what, rel, self.tail()))
            self.mount.kill()
            self.mount.log.close()
            self.mount.start()
            return "crash"
        wrong, eio, other = judge(res, legit, protected)
        if other is not None:
            self.fail("errno", "%s: %s: %s" % (what, rel, os.strerror(other)))
            return "errno"
        if wrong:
            self.fail("wrong", "%s: %s: %d wrong bytes served (%s)" % (
                what, rel, wrong, "guarded" if guarded else "outside the touched tiles"))
            return "wrong"
        if framing and not eio:
            self.fail("framing", "%s: %s: framing broken but the file read without an error" % (what, rel))
            return "framing"
        return "eio" if eio else "ok"

    def tail(self):
        try:
            with open(self.mount.logpath, "rb") as f:
                return f.read()[-600:].decode(errors="replace").replace("\n", " | ")
        except OSError:
            return "?"

    def count(self, cls, kind):
        if cls in ("ok", "eio"):
            self.counts[cls] += 1
        self.by_kind.setdefault(kind, {}).setdefault(cls, 0)
        self.by_kind[kind][cls] += 1

    # data-file corruptions, in both modes under the live mount
    def data_corruption(self, rnd, case, t):
        data, desc, touched, alts, framing = corrupt_data(rnd, t)
        kind = desc.split()[0]
        for mode in self.modes():
            rel = os.path.join(mode, case, t.path)
            self.replace(rel, data)
            what = "#%d %s %s [%s]" % (self.n, case, desc, mode)
            reads = [(rel, t, touched)]
            # folded offsets decode from this var file: read them too
            for o in self.cases[case]["targets"]:
                if o.var_of is t:
                    reads.append((os.path.join(mode, case, o.path), o, touched))
            worst = "ok"
            for r, tt, tch in reads:
                legit = [(tt.expected, [])] + (alts[mode] if tt is t else dep_alts(tt, desc, mode, alts))
                ranges = tt.dec_ranges()
                if tt is t:
                    def prot(k, off, tt=tt, tch=tch, ranges=ranges, legit=legit):
                        if tt.guarded:
                            return True
                        if k > 0:
                            return not in_ranges(legit[k][1], off)
                        return not any(ranges[i][0] <= off < ranges[i][1] for i in tch)
                else:   # a folded offsets tile per var tile
                    def prot(k, off, tt=tt, tch=tch, ranges=ranges):
                        return tt.guarded or not any(ranges[i][0] <= off < ranges[i][1] for i in tch)
                cls = self.check(r, legit, prot, framing[mode] and tt is t, tt.guarded, what)
                if cls in ("hang", "crash"):
                    return cls
                if cls not in ("ok", "eio") or worst == "ok":
                    worst = cls
            self.count(worst, "data " + kind + " [" + mode + "]")
            self.replace(rel, t.stored)      # pristine again for the next one
        return "ok"

    # fragment metadata or schema corruptions, in a fresh copy of the array
    def meta_corruption(self, rnd, case):
        c = self.cases[case]
        which = rnd.choice(("fragment",) * 3 + ("schema",)) if c["schemas"] else "fragment"
        copy = "z/%s.%d" % (case, self.n)
        shutil.copytree(os.path.join(self.src, "z", case), os.path.join(self.src, copy))
        if which == "fragment":
            frag = rnd.choice(c["frag_dirs"])
            rel = os.path.join(frag, "__fragment_metadata.tdb")
            files = [t for t in c["targets"] if t.frag_dir == frag]
        else:
            rel = rnd.choice(c["schemas"])
            files = c["targets"]
        data, desc = flip_file(rnd, open(os.path.join(self.src, "z", case, rel), "rb").read())
        self.replace(os.path.join(copy, rel), data)
        what = "#%d %s %s %s [z]" % (self.n, case, which, desc)
        worst = "ok"
        for t in files:
            guarded = c["encrypted"]
            cls = self.check(os.path.join(copy, t.path), [(t.expected, [])], lambda k, off, g=guarded: g, False,
                             guarded, what)
            if cls in ("hang", "crash"):
                break
            if cls not in ("ok", "eio") or worst == "ok":
                worst = cls
        self.count(worst, "meta " + which)
        shutil.rmtree(os.path.join(self.src, copy))
        self.fresh_copies += 1

    def baseline(self):
        bad = 0
        for case, c in self.cases.items():
            for t in c["targets"]:
                for mode in self.modes():
                    rel = os.path.join(mode, case, t.path)
                    res = read_whole(os.path.join(self.mnt, rel), len(t.expected))
                    wrong, eio, other = judge(res, [(t.expected, [])], lambda k, off: True)
                    if wrong or eio or other:
                        bad += 1
                        self.log("baseline differs: %s (wrong=%d eio=%s)" % (rel, wrong, eio))
        return bad

    def run(self, cases):
        self.cases = cases
        self.prepare(cases)
        try:
            if self.baseline():
                raise SystemExit("FAIL: the pristine copies do not read back exactly")
            flat = [(case, t) for case, c in cases.items() for t in c["targets"]]
            start = time.monotonic()
            for i in range(self.args.count):
                self.n = i
                rnd = random.Random(self.args.seed * 1000003 + i)
                if self.args.only is not None and i != self.args.only:
                    continue
                if i and i % self.args.fresh_every == 0:
                    self.remount("fresh mount every %d" % self.args.fresh_every)
                if rnd.random() < self.args.meta_share:
                    self.meta_corruption(rnd, rnd.choice(sorted(cases)))
                else:
                    case, t = rnd.choice(flat)
                    self.data_corruption(rnd, case, t)
                if self.args.progress and i and i % self.args.progress == 0:
                    self.log("... %d corruptions, %.0fs, %s" % (i, time.monotonic() - start, self.counts))
            self.elapsed = time.monotonic() - start
        finally:
            rc = self.mount.stop()
            self.reader.jobs.put(None)
        if rc is not None:
            self.fail("crash", "daemon exit status %s at the last unmount (log: %s)" % (rc, self.tail()))

    def report(self):
        total = sum(sum(v.values()) for v in self.by_kind.values())
        self.log("corruptions: %d (%d reads of corrupted versions; %d mounts; %d fresh array copies); %.1f s"
                 % (self.args.count if self.args.only is None else 1, total, self.mount.mounts,
                    self.fresh_copies, self.elapsed))
        for k in sorted(self.by_kind):
            self.log("  %-28s %s" % (k, " ".join("%s=%d" % kv for kv in sorted(self.by_kind[k].items()))))
        self.log("classes: " + " ".join("%s=%d" % kv for kv in self.counts.items()))
        failed = sum(self.counts[k] for k in ("wrong", "crash", "hang", "framing", "errno"))
        self.log("campaign: %d passed, %d failed" % (total - failed if total >= failed else 0, failed))
        return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tilefs", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--corpus", action="append", required=True, help="a directory of cases (repeat)")
    ap.add_argument("--tools", default="")
    ap.add_argument("--case", action="append", help="only these cases")
    ap.add_argument("--count", type=int, default=250)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", type=int, help="replay corruption number N of this seed")
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--fresh-every", type=int, default=50)
    ap.add_argument("--meta-share", type=float, default=0.15)
    ap.add_argument("--cache-size", default="4M")
    ap.add_argument("--progress", type=int, default=0)
    ap.add_argument("--key-hex", default="54696c6544422d6f7261636c652d6b65792d3031323334353637383941424344")
    args = ap.parse_args()
    cases = load_cases(args.corpus, set(args.case or ()))
    if not cases:
        raise SystemExit("FAIL: no cases found under %s" % args.corpus)
    c = Campaign(args)
    print("cases: %d (%d data files, %d guarded); seed %d" % (
        len(cases), sum(len(v["targets"]) for v in cases.values()),
        sum(t.guarded for v in cases.values() for t in v["targets"]), args.seed), flush=True)
    c.run(cases)
    sys.exit(1 if c.report() else 0)


if __name__ == "__main__":
    main()
