#!/bin/sh
# Make sure bubblewrap (bwrap) is available: the code suite runs model-written programs
# under it (complexformer/evaluation/sandbox/isolation.py). Installs it with apt-get where this runs
# as root on a system with apt-get; otherwise says what to do and exits non-zero.
set -eu

if command -v bwrap >/dev/null 2>&1; then
    echo "bwrap found: $(command -v bwrap) ($(bwrap --version 2>/dev/null || echo 'version unknown'))"
    exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "bwrap missing: installing bubblewrap with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq bubblewrap
    if command -v bwrap >/dev/null 2>&1; then
        echo "bwrap installed: $(command -v bwrap)"
        exit 0
    fi
    echo "error: apt-get install bubblewrap did not provide bwrap" >&2
    exit 1
fi
cat >&2 <<'MSG'
error: bubblewrap (bwrap) is not installed, and it cannot be installed from here
(this needs root and apt-get). Install the package "bubblewrap" with the system's package
manager (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), or
run the code suite with --unsafe-python-guard-only (model-written programs then run behind
the Python guard alone, which code written to escape can switch off).
MSG
exit 1
