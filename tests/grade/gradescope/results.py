#!/usr/bin/env python3
"""Writes Gradescope's results.json from dtlab's grader (run_autograder calls it).

Gradescope's format (https://gradescope-autograders.readthedocs.io/en/latest/specs/):
the top level has "score" (the submission's points; given, it is the score whatever the
tests add up to), "execution_time" (seconds), "output" (text for the whole submission),
"output_format", "test_output_format", "test_name_format" ("text": shown as written, in
a fixed font) and "tests"; each test has "score", "max_score", "status" ("passed" or
"failed"), "name", "output" and "visibility" ("visible", "hidden", "after_due_date" or
"after_published").

Here: one test per case of the exercise (and of the hidden suites packed with it, at
GS_HIDDEN_VISIBILITY), its points and max_score from the grader, its output the grader's
message and the command that runs the case again in a dtlab checkout; the score the
exercise's total; the output the grader's table (without the hidden suites' rows, unless
their cases are visible). When the file is missing, does not
compile, or the grading ran out of time, the score is 0 and the output starts with why.

Input: grade.sh's GRADE_RESULTS records (tab-separated: "case EXERCISE SUITE NAME POINTS
MAX ok|fail WHAT MESSAGE RERUN", "exercise EXERCISE POINTS MAX STATE FILE", "total POINTS
MAX"), its table (stdout), its stderr, its exit status, and the cases as dtlab's answer
lists them ("SUITE NAME POINTS KIND WHAT USES"), for a grading that ended before it wrote
its records.
"""
import argparse
import json
import re


def read_tsv(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [line.rstrip("\n").split("\t") for line in f if line.strip()]
    except OSError:
        return []


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name in ("exercise", "file", "found", "received", "records", "table", "stderr",
                 "cases", "work", "build", "hidden-visibility", "out"):
        ap.add_argument("--" + name, default="")
    for name in ("status", "timeout", "seconds"):
        ap.add_argument("--" + name, type=int, default=0)
    a = ap.parse_args()
    ex = a.exercise

    def local(text):
        """The grader's paths as they read in the learner's own dtlab checkout."""
        if a.build:
            text = re.sub(re.escape(a.build) + r"/grade/work-[0-9]+/", "build/grade/learner/", text)
            text = text.replace(a.build + "/", "build/")
        if a.work:
            text = text.replace(a.work + "/", "").replace(a.work, "your submission")
        return text

    records = read_tsv(a.records)
    cases = [r for r in records if r[0] == "case" and len(r) >= 10]
    state = next((r[4] for r in records if r[0] == "exercise" and r[1] == ex and len(r) >= 6), "")
    ended = any(r[0] == "total" for r in records)
    # (the TAP report's line names a file that is gone when the grading ends)
    table = "\n".join(l for l in local(read_text(a.table)).rstrip().splitlines()
                      if not l.startswith("TAP report: "))

    # the hidden suites' rows leave the table, which every student sees, unless their
    # cases are visible anyway: their tests carry them, at their own visibility
    if a.hidden_visibility != "visible":
        kept, hiding = [], False
        for l in table.splitlines():
            if l.startswith("   hidden tests "):
                hiding = True
                kept.append("   hidden tests: shown case by case, when the course staff decides")
            elif hiding and l.startswith(" "):
                continue
            else:
                hiding = False
                kept.append(l)
        table = "\n".join(kept)

    reason = ""
    if not a.found:
        received = a.received.strip()
        reason = (f"Not graded (0 points): your submission has no {a.file}. Upload the file "
                  f"{a.file} itself, or the folder {ex}/ holding it, or your dtlab repository "
                  f"(exercises/{ex}/{a.file}). "
                  + (f"The files received:\n  " + received.replace("\n", "\n  ")
                     if received else "Nothing was received."))
    elif a.status in (124, 137):
        reason = (f"Not graded (0 points): the grading did not end within {a.timeout} s. "
                  "Each run of your program has its own time limit, which the grader "
                  "reports per case; the grading as a whole ran out of time, so no case "
                  "counts. Look for an endless loop or a wait that never ends (make grade "
                  f"EX={ex[:2]} in your checkout shows where).")
    elif state == "nobuild":
        errors = [l[len("   | "):] for l in table.splitlines() if l.startswith("   | ")]
        reason = (f"Not graded (0 points): {ex}/{a.file} does not compile. The compiler says:\n"
                  + "\n".join("  " + l for l in errors[:8]))
    elif not ended:
        tail = "\n".join(local(read_text(a.stderr)).strip().splitlines()[-12:])
        reason = (f"Not graded (0 points): the autograder could not grade this submission "
                  f"(exit status {a.status}); this is a fault of the autograder, not of your "
                  f"file: please tell the course staff.\n{tail}")
    elif state == "missing":     # (found, yet the grader saw no file: cannot happen)
        reason = f"Not graded (0 points): {ex}/{a.file} was not found by the grader."

    tests = []
    if ended:
        for _, _, suite, name, pts, mx, ok, what, msg, rerun in (c[:10] for c in cases):
            hidden = suite.startswith("extra/")
            label = f"{ex} {name}: {what}" if not hidden else \
                f"{ex} hidden ({suite[len('extra/'):]}) {name}: {what}"
            if reason:
                out = reason
            elif ok == "ok":
                out = "passed: every rank saw the case pass, at every rank count"
            else:
                out = local(msg)
                if rerun:
                    out += ("\n\nto run this case again in your dtlab checkout, after make grade "
                            f"EX={ex[:2]}:\n  " + local(rerun))
            tests.append({
                "name": label,
                "score": 0.0 if reason else float(pts),
                "max_score": float(mx),
                "status": "passed" if ok == "ok" and not reason else "failed",
                "output": out,
                "visibility": a.hidden_visibility if hidden else "visible",
            })
    else:
        for c in read_tsv(a.cases):
            if len(c) < 5:
                continue
            suite, name, pts, what = c[0], c[1], c[2], c[4]
            hidden = suite.startswith("extra/")
            tests.append({
                "name": f"{ex} {name}: {what}" if not hidden else
                        f"{ex} hidden ({suite[len('extra/'):]}) {name}: {what}",
                "score": 0.0,
                "max_score": float(pts),
                "status": "failed",
                "output": reason,
                "visibility": a.hidden_visibility if hidden else "visible",
            })

    score = 0.0 if reason else sum(t["score"] for t in tests)
    head = reason + "\n\n" if reason else ""
    if a.found and not reason:
        head = f"Graded {a.found} as {ex}/{a.file}.\n\n"
    result = {
        "score": score,
        "execution_time": a.seconds,
        "output": head + (table or "(the grader printed nothing)"),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "tests": tests,
    }
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
