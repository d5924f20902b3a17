#!/usr/bin/env python3
"""The CSV, the summary and the comparison of make grade-class (tests/grade/class.sh).

Reads, for student I (its name in I.name) and exercise NN, what class.sh kept: I.NN.tsv
(grade.sh's GRADE_RESULTS records), I.NN.rc (its exit status: 124 or 137 when timeout
stopped it), I.NN.secs, I.NN.note (why the file was not graded, when class.sh refused
it). Writes results.csv, summary.txt and identical.txt into --out, and prints the summary.

Two files are identical when they are once comments and whitespace are removed (string
and character literals are kept as they are); files identical to the exercise's stub as
dtlab ships it, and empty files, are nobody's copy and are left out.
"""
import argparse
import csv
import hashlib
import os
import statistics
import subprocess
import sys


def read(path, default=""):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return default


def normalized(src):
    """src without its comments and whitespace; literals kept."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            while i < n and src[i] != "\n":
                i += 2 if src[i] == "\\" else 1
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        elif c.isspace():
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", required=True)
    ap.add_argument("--max", required=True)
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--submissions", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=int, required=True)
    ap.add_argument("--seconds", type=int, default=0)
    ap.add_argument("--exercises", nargs="+", required=True)
    a = ap.parse_args()

    maxima = {}
    for line in read(a.max).splitlines():
        e, m = line.split("\t")
        maxima[e] = int(m)
    names = {}
    for f in os.listdir(a.records):
        if f.endswith(".name"):
            names[int(f[:-5])] = read(os.path.join(a.records, f))
    order = sorted(names)

    rows, secs = [], []
    for i in order:
        for e in a.exercises:
            base = os.path.join(a.records, f"{i}.{e[:2]}")
            recs = [l.split("\t") for l in read(base + ".tsv").splitlines() if l]
            rc = read(base + ".rc", "?").strip()
            note = read(base + ".note").strip()
            secs.append(int(read(base + ".secs", "0").strip() or 0))
            ex = next((r for r in recs if r[0] == "exercise" and r[1] == e), None)
            ended = any(r[0] == "total" for r in recs)
            fail = next((r for r in recs if r[0] == "case" and r[6] == "fail"), None)
            state = "graded"
            if note:
                state, points, first = "missing", 0, note
            elif rc in ("124", "137"):
                state, points = "timeout", 0
                first = f"timed out: the grading took more than {a.timeout} s (no points)"
            elif not ended or ex is None:
                state, points = "error", 0
                first = f"not graded: the grader stopped (exit status {rc}); its log is in logs/"
            else:
                points, state = int(ex[2]), ex[4]
                first = ""
                if state == "missing":
                    first = f"not graded: no {e}/{e.split('_', 1)[1]}.c"
                elif state == "nobuild":
                    first = f"not graded: {e}/{e.split('_', 1)[1]}.c does not build"
                elif fail is not None:
                    first = f"{fail[3]}: {fail[8]}"
            rows.append({"i": i, "student": names[i], "exercise": e, "points": points,
                         "max": maxima.get(e, 0), "first": first, "state": state})

    # identical files, per exercise
    groups = {}
    for r in rows:
        e = r["exercise"]
        path = os.path.join(a.submissions, r["student"], e, e.split("_", 1)[1] + ".c")
        if r["state"] == "missing" or os.path.islink(path) or not os.path.isfile(path):
            continue
        norm = normalized(read(path))
        if not norm or norm == normalized(read(os.path.join(a.stubs, e + ".c"))):
            continue
        key = (e, hashlib.sha256(norm.encode()).hexdigest())
        groups.setdefault(key, []).append(r)
    same = [g for g in groups.values() if len(g) > 1]
    for g in same:
        for r in g:
            r["same"] = " ".join(x["student"] for x in g if x is not r)

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "results.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["student", "exercise", "points", "max", "first failure", "identical to"])
        for r in rows:
            w.writerow([r["student"], r["exercise"], r["points"], r["max"], r["first"],
                        r.get("same", "")])

    with open(os.path.join(a.out, "identical.txt"), "w", encoding="utf-8") as f:
        if not same:
            f.write("No two submissions are identical once comments and whitespace are removed.\n")
        for g in same:
            e = g[0]["exercise"]
            files = [os.path.join(a.submissions, r["student"], e, e.split("_", 1)[1] + ".c")
                     for r in g]
            f.write(f"== {e}: identical once comments and whitespace are removed: "
                    + ", ".join(r["student"] for r in g) + "\n")
            diff = subprocess.run(["diff", "-y", "-W", "160", files[0], files[1]],
                                  capture_output=True, text=True, errors="replace")
            f.write(diff.stdout + "\n")

    lines = [f"{len(order)} students, {len(a.exercises)} exercise(s), graded in "
             f"{a.seconds} s ({a.seconds / max(len(rows), 1):.1f} s a student's exercise; "
             f"the longest {max(secs, default=0)} s; limit {a.timeout} s)", ""]
    lines.append(f"{'exercise':<24} {'max':>4} {'full':>5} {'mean':>6} {'median':>6} "
                 f"{'missing':>7} {'no build':>8} {'timeout':>7} {'error':>5}")
    for e in a.exercises:
        rs = [r for r in rows if r["exercise"] == e]
        pts = [r["points"] for r in rs]
        count = lambda s: sum(1 for r in rs if r["state"] == s)
        lines.append(f"{e:<24} {maxima.get(e, 0):>4} "
                     f"{sum(1 for r in rs if r['points'] == r['max'] and r['max']):>5} "
                     f"{statistics.mean(pts) if pts else 0:>6.1f} "
                     f"{statistics.median(pts) if pts else 0:>6.1f} {count('missing'):>7} "
                     f"{count('nobuild'):>8} {count('timeout'):>7} {count('error'):>5}")
    lines.append("")
    if same:
        lines.append("Identical once comments and whitespace are removed (identical.txt shows "
                     "them side by side):")
        for g in same:
            lines.append(f"  {g[0]['exercise']}: " + ", ".join(r["student"] for r in g))
    else:
        lines.append("No two submissions are identical once comments and whitespace are removed.")
    lines.append("")
    lines.append(f"CSV: {os.path.join(a.out, 'results.csv')}; each grading's table: "
                 f"{os.path.join(a.out, 'logs')}/")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "summary.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    sys.stdout.write("\n" + text)


if __name__ == "__main__":
    main()
