#!/usr/bin/env bash
# Install Debian's `chromium` for the browser test of the review screen (tests marked `browser`),
# which drives it headless over the DevTools protocol (Playwright, from the test extras, with
# this system browser: Playwright's own browser download is never used). Idempotent and quiet:
# an installed chromium that reports its version is reused at once. CI runs this through
# scripts/test.sh as root; elsewhere, without root (or apt-get), it says so in one line and
# exits 0: the browser test then skips, saying why (in CI, where it must run, that is exit 1).
#
#   CUQA_CHROMIUM  a browser to use instead (the test reads it too); default: chromium on PATH
set -euo pipefail

if [ -n "${CUQA_CHROMIUM:-}" ] && "$CUQA_CHROMIUM" --version >/dev/null 2>&1; then
  echo "chromium: using $CUQA_CHROMIUM"
  exit 0
fi
# A version is read whole, then cut to its first line: no reader that stops early (`| head`)
# under pipefail.
first_line() { printf '%s\n' "${1%%$'\n'*}"; }
if command -v chromium >/dev/null 2>&1 && version="$(chromium --version 2>/dev/null)"; then
  echo "chromium: reusing $(first_line "$version")"
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  how="as root: apt-get install chromium fonts-dejavu-core, or set CUQA_CHROMIUM to a Chromium"
  if [ "${CI:-}" = "true" ]; then  # CI runs the browser test: a missing browser fails it
    echo "install-chromium.sh: chromium is missing and this user cannot install it ($how)" >&2
    exit 1
  fi
  echo "chromium: not installed, and installing it needs root and apt-get: the browser test" \
       "will skip ($how)"
  exit 0
fi

log="$(mktemp "${TMPDIR:-/tmp}/install-chromium.XXXXXX.log")"
trap 'rm -f "$log"' EXIT
echo "chromium: installing Debian's package (about 300 MB installed)"
# Fonts are only recommended by the package, yet a page without them renders as empty boxes.
if ! { apt-get update -qq &&
       DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
         chromium fonts-dejavu-core; } >"$log" 2>&1; then
  echo "install-chromium.sh: installation failed; last lines of its log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
echo "chromium: ready, $(first_line "$(chromium --version 2>/dev/null)")"
