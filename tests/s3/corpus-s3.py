#!/usr/bin/env python3
"""corpus-s3.py TILETOOL CONFIG ROOT URL SET...: decode every data file of the corpus
sets (sub-folders of ROOT holding cases with manifest.json; "." for ROOT itself) from the
object store copy of ROOT at URL (s3://BUCKET[/PREFIX]) with `tiletool decode -c CONFIG`
and no decode flags (the arrays' schemas and fragment metadata, read from the store, say
how), the key given where the array is encrypted; compare with the expected bytes read
locally. Prints the first failures and a summary line last; exit 0 iff all match."""
import concurrent.futures as cf, os, subprocess, sys, tempfile

sys.path.insert(0, os.environ.get("TF_TOOLS", os.path.join(os.path.dirname(__file__), "../../../shared/tools")))
import corpus  # noqa: E402

KEY_HEX = "54696c6544422d6f7261636c652d6b65792d3031323334353637383941424344"


def main():
    tt, cfg, root, url, sets = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].rstrip("/"), sys.argv[5:]
    kf = tempfile.NamedTemporaryFile("w", delete=False, prefix="s3key")
    kf.write(KEY_HEX); kf.close(); os.chmod(kf.name, 0o600)
    jobs = [(s, j, key) for s in sets for j, key in corpus.jobs(os.path.join(root, s))]

    def run(job):
        s, j, key = job
        rel = os.path.normpath(os.path.join(s, j["file"]))
        args = [tt, "decode", "-c", cfg] + (["-k", kf.name] if key else []) + [url + "/" + rel]
        try:
            p = subprocess.run(args, capture_output=True, timeout=120)
            got, err, rc = p.stdout, p.stderr.decode(errors="replace").strip(), p.returncode
        except subprocess.TimeoutExpired:
            got, err, rc = b"", "timeout", -1
        want = open(os.path.join(root, s, j["expected"]), "rb").read()
        return rel, rc == 0 and got == want, "rc=%s got=%d want=%d %s" % (rc, len(got), len(want), err[:200])

    with cf.ThreadPoolExecutor(4) as ex:
        res = list(ex.map(run, jobs))
    os.unlink(kf.name)
    bad = [(f, why) for f, ok, why in res if not ok]
    for f, why in bad[:8]:
        print("FAIL", f, why)
    print("%d/%d data files byte-exact via tiletool from %s" % (len(res) - len(bad), len(res), url))
    return 0 if res and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
