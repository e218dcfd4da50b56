"""pytest plugin for .ci/sanitizer-leg: when and where LeakSanitizer checks.

* Child interpreters run without LeakSanitizer.  Some tests start a fresh
  Python (`subprocess.run([sys.executable, ...])`) to see what an import does.
  Those children inherit LD_PRELOAD and ASAN_OPTIONS, so LeakSanitizer ran at
  their exit too.  ASan and UBSan stay on in the children (any report still
  fails them); only the leak check is off.
* The pytest process checks for leaks once, when the session finishes
  (`__lsan_do_recoverable_leak_check`), not at exit (the leg sets
  leak_check_at_exit=0): at exit, during the interpreter's finalization with
  the worker threads still parked, LeakSanitizer's tracer crashed now and then
  ("Tracer caught signal 11 ... LeakSanitizer has encountered a fatal error",
  exit 87), a failure of the tool that failed the leg in CI, in a child and
  once in the pytest process itself (the leg runs the tests again once
  when that crash is all there is; see .ci/sanitizer-leg).  At the session's end every test has run
  and everything still reachable is not a leak; what tests leaked is reported
  to the leg's log files like any other report.
"""
import ctypes
import os


def pytest_configure(config):
    opts = os.environ.get("ASAN_OPTIONS", "")
    opts = opts.replace("detect_leaks=1", "detect_leaks=0")
    if "detect_leaks=0" not in opts:
        opts = (opts + ":" if opts else "") + "detect_leaks=0"
    os.environ["ASAN_OPTIONS"] = opts        # read by the children at their start


def pytest_sessionfinish(session, exitstatus):
    # the tests' own outcome, written before the leak check: if the check
    # dies (the tool's crash, exit 87), the leg knows whether every test
    # had passed and may run them again (.ci/sanitizer-leg)
    status = os.environ.get("MF_SAN_STATUS")
    if status:
        with open(status, "w") as fh:
            fh.write(f"{int(exitstatus)}\n")
    check = getattr(ctypes.CDLL(None), "__lsan_do_recoverable_leak_check", None)
    if check is None:
        return
    check.restype = ctypes.c_int
    if check():
        print("\nsanitizer_children: LeakSanitizer found leaks (see the leg's report)")
        session.exitstatus = 87
