#!/usr/bin/python3
"""Hostile-input suite for `redisched serve`: requests as an attacker would
send them, on raw sockets, with the whole Redis keyspace compared before and
after every refused one.

    /usr/bin/python3 tests/hostile/hostile_test.py --binary build/redisched [--part NAME,...]
        [--only SUBSTRING] [--verbose]

--part runs the cases of some modules only (framing, routes, bodies,
compat, auth, scoped): ctest runs the parts side by side.

Three servers, each with its embedded Redis in a temporary data directory:
  main  default limits
  auth  --token s3cret
  slow  --idle-timeout 500 --header-timeout 1000 (slowloris cases)
Each gets a fixture through the API (topic alpha with jobs in every state and
one due-but-not-yet-promoted job, topic beta). A case fails with a line
"FAIL name: expected ..., got ... -- reasons"; the exit status is 1 if any
case failed. A server killed by a case is started again (on its data
directory) and the run goes on.
"""

import argparse
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cases_auth  # noqa: E402
import cases_bodies  # noqa: E402
import cases_compat  # noqa: E402
import cases_framing  # noqa: E402
import cases_routes  # noqa: E402
import cases_scoped  # noqa: E402
from core import Case, Ctx, SeedError, check_background  # noqa: E402
from harness import Serve, StartError  # noqa: E402


PARTS = {"framing": cases_framing, "routes": cases_routes, "bodies": cases_bodies,
         "compat": cases_compat, "auth": cases_auth, "scoped": cases_scoped}


def all_cases(parts=tuple(PARTS)):
    cases = []
    for part in parts:
        some = PARTS[part].cases()
        if part == "framing":
            # The 64 MiB chunk extension goes first: it reads the server's peak RSS.
            some = [c for c in some if "64MiB" in c.name] + [c for c in some if "64MiB" not in c.name]
        cases += some
    return cases


def category(name):
    return name.split("/")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "../../build/redisched"))
    ap.add_argument("--part", default=",".join(PARTS),
                    help="comma-separated case modules to run: %s (default: all)" % ", ".join(PARTS))
    ap.add_argument("--only", default=None, help="run the cases whose name contains this")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)

    parts = [p for p in args.part.split(",") if p]
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        print("unknown part %s: the parts are %s" % (unknown or "(none)", ", ".join(PARTS)))
        return 2
    cases = all_cases(parts)
    names = [c.name for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        print("duplicate case names: %s" % sorted(dup))
        return 2
    if args.list:
        for c in cases:
            print(c.name)
        print("%d cases" % len(cases))
        return 0
    if args.only:
        cases = [c for c in cases if args.only in c.name]
    needed = {c.server for c in cases}
    start_t = time.monotonic()

    servers = {}
    ctx = Ctx(servers, verbose=args.verbose)
    startup_failures = []
    try:
        if "main" in needed or not cases:
            servers["main"] = Serve(binary, "main")
        if "auth" in needed:
            servers["auth"] = Serve(binary, "auth", ["--token", "s3cret"], token="s3cret")
        if "scoped" in needed:
            tokens = os.path.join(tempfile.mkdtemp(prefix="redisched-hostile-tokens-"), "tokens")
            with open(tokens, "w") as f:
                f.write(cases_scoped.TOKENS_FILE)
            allow = [a for d in cases_scoped.WEBHOOK_ALLOW for a in ("--webhook-allow", d)]
            servers["scoped"] = Serve(binary, "scoped",
                                      ["--token", "s3cret", "--tokens", tokens] + allow,
                                      token="s3cret")
        if "slow" in needed:
            servers["slow"] = Serve(binary, "slow", ["--idle-timeout", "500", "--header-timeout", "1000"])
        for name, s in servers.items():
            try:
                s.start()
            except StartError as e:
                if name != "slow":
                    raise
                # The flag is new: record it, and run the slow cases without it.
                startup_failures.append(("startup/slow-with-header-timeout", str(e)[:300]))
                s.args = ["--idle-timeout", "500"]
                s.start()
        for name in servers:
            ctx.seed(name)
        check_background(ctx)
    except (StartError, SeedError) as e:
        print("cannot set up: %s" % e)
        for s in servers.values():
            s.cleanup()
        return 2

    # The start-up results as cases of their own.
    if "slow" in needed:
        case = Case("startup/slow-with-header-timeout", None)
        ok = not startup_failures
        ctx.results.append((case, ok, "started" if ok else "refused", [f for _, f in startup_failures]))
        if not ok:
            print("FAIL startup/slow-with-header-timeout: expected serve to accept --header-timeout 1000, "
                  "got -- %s" % startup_failures[0][1], flush=True)

    try:
        for case in cases:
            ctx.run(case)
    finally:
        # Stop every server: SIGTERM, exit status 0.
        for name, s in servers.items():
            rc = s.stop()
            case = Case("lifecycle/%s-sigterm-exit-0" % name, None)
            statuses = [x for x in s.exit_statuses]
            bad = [x for x in statuses if x != 0]
            fails = ["exit statuses %s (crashes included)" % statuses] if bad else []
            if rc != 0:
                fails = ["SIGTERM gave exit status %r; all: %s" % (rc, statuses)]
            ctx.results.append((case, not fails, "exit %r" % rc, fails))
            if fails:
                print("FAIL lifecycle/%s-sigterm-exit-0: expected exit 0, got %r -- %s"
                      % (name, rc, "; ".join(fails)), flush=True)
            s.cleanup()

    # Summary.
    per = {}
    for case, ok, _, _ in ctx.results:
        p = per.setdefault(category(case.name), [0, 0])
        p[0] += 1
        p[1] += 0 if ok else 1
    total = len(ctx.results)
    failed = sum(1 for r in ctx.results if not r[1])
    print()
    print("%-10s %6s %6s" % ("category", "cases", "failed"))
    for cat in sorted(per):
        print("%-10s %6d %6d" % (cat, per[cat][0], per[cat][1]))
    if args.verbose:
        timed = sorted((sum(getattr(c, "took", (0, 0))), c.name) for c, _, _, _ in ctx.results)[-15:]
        print("slowest: " + ", ".join("%s %.2fs" % (n, t) for t, n in reversed(timed)))
        print("fixtures seeded: %d" % getattr(ctx, "seeds", 0))
    print("%d cases, %d failed, %.1f s" % (total, failed, time.monotonic() - start_t))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
