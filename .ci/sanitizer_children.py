"""pytest plugin for .ci/sanitizer-leg: child interpreters run without LeakSanitizer.

Some tests start a fresh Python (`subprocess.run([sys.executable, ...])`) to see
what an import does.  Those children inherit LD_PRELOAD and ASAN_OPTIONS, so
LeakSanitizer ran at their exit too, and its tracer thread crashed there now
and then ("Tracer caught signal 11 ... LeakSanitizer has encountered a fatal
error", exit 87): a failure of the tool in a short-lived child, which failed
the test and the leg.  ASan and UBSan stay on in the children (any report
still fails them); only the leak check at their exit is off.  The pytest
process itself, which runs every kernel, keeps LeakSanitizer (it reads its
options at start, before this plugin changes the environment).
"""
import os


def pytest_configure(config):
    opts = os.environ.get("ASAN_OPTIONS", "")
    opts = opts.replace("detect_leaks=1", "detect_leaks=0")
    if "detect_leaks=0" not in opts:
        opts = (opts + ":" if opts else "") + "detect_leaks=0"
    os.environ["ASAN_OPTIONS"] = opts
