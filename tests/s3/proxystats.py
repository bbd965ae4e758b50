#!/usr/bin/env python3
"""proxystats.py LOG [--ranged] [--timeline SECONDS]

Reads a tests/s3/faultproxy.py log ("METHOD STATUS BYTES FAULT PATH RANGE START END") and
prints one line of key=value counts:

  requests gets ranged lists bytes   requests of each kind; bytes of answer bodies sent
  max_inflight                       most requests in flight at once (arrived, not answered)
  mean_inflight                      requests in flight, averaged over the time any was
  span                               seconds from the first arrival to the last answer

--ranged counts in flight only ranged GETs (data, not metadata).  --timeline S also prints,
for each S seconds from the first arrival, "t=... inflight=..." (the most in flight then)."""
import argparse, sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--ranged", action="store_true")
    ap.add_argument("--timeline", type=float, default=0)
    a = ap.parse_args()
    reqs, gets, ranged, lists, nbytes, spans = 0, 0, 0, 0, 0, []
    for line in open(a.log):
        f = line.split()
        if len(f) < 8:
            continue
        reqs += 1
        is_ranged = f[0] == "GET" and f[5] != "-"
        gets += f[0] == "GET"
        ranged += is_ranged
        lists += f[0] == "GET" and f[5] == "-" and "list-type=" in f[4]
        nbytes += int(f[2])
        if is_ranged or not a.ranged:
            spans.append((float(f[6]), float(f[7])))
    ev = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    cur = peak = 0
    busy = area = 0.0
    last = ev[0][0] if ev else 0.0
    marks = []
    for t, d in ev:
        if cur:
            busy += t - last
            area += cur * (t - last)
        last = t
        cur += d
        peak = max(peak, cur)
        marks.append((t, cur))
    span = (ev[-1][0] - ev[0][0]) if ev else 0.0
    print("requests=%d gets=%d ranged=%d lists=%d bytes=%d max_inflight=%d mean_inflight=%.1f span=%.3f"
          % (reqs, gets, ranged, lists, nbytes, peak, area / busy if busy else 0.0, span))
    if a.timeline and ev:
        t0, i, cur = ev[0][0], 0, 0
        t = t0
        while t <= ev[-1][0]:
            hi = cur
            while i < len(marks) and marks[i][0] < t + a.timeline:
                cur = marks[i][1]
                hi = max(hi, cur)
                i += 1
            print("t=%.2f inflight=%d" % (t - t0, hi))
            t += a.timeline


if __name__ == "__main__":
    sys.exit(main())
