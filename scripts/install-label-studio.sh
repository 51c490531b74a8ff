#!/usr/bin/env bash
# Install the Label Studio server used by the integration tests and scripts/bench_annotate.py
# into its OWN virtualenv: it pins its own Django, pytz and label-studio-sdk, which must not touch
# the project's environment. Idempotent and quiet: a venv whose `label-studio version` already
# reports the pinned release is reused. CI runs this through scripts/test.sh.
#
#   CUQA_LS_VENV  where the virtualenv goes (default: ~/.cache/cuqa-builder/label-studio-venv)
#   PYTHON        interpreter that creates it (default: python3)
set -euo pipefail

VERSION="1.23.2"
VENV="${CUQA_LS_VENV:-$HOME/.cache/cuqa-builder/label-studio-venv}"
PYTHON="${PYTHON:-python3}"

# Whether the venv's label-studio reports $VERSION. `label-studio --version` would start a
# server; the `version` subcommand only reports. Its whole report is read before matching: a
# reader that stops at its first match (grep in quiet mode) closes the pipe, label-studio's next
# print fails, and under pipefail a sound install would count as broken (and be rebuilt) at random.
reports_version() {
  local report pattern="Label Studio version: ${VERSION//./\\.}([^0-9.]|\$)"
  [ -x "$VENV/bin/label-studio" ] || return 1
  report="$("$VENV/bin/label-studio" version 2>/dev/null)" || return 1
  [[ $report =~ $pattern ]]
}

if reports_version; then
  echo "label-studio $VERSION: reusing $VENV"
  exit 0
fi

log="$(mktemp "${TMPDIR:-/tmp}/install-label-studio.XXXXXX.log")"
trap 'rm -f "$log"' EXIT
echo "label-studio $VERSION: installing into $VENV (about 1 GB, a minute or two)"
mkdir -p "$(dirname "$VENV")"
if ! { "$PYTHON" -m venv --clear "$VENV" &&
       "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
         "label-studio==$VERSION"; } >"$log" 2>&1; then
  echo "install-label-studio.sh: installation failed; last lines of its log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
reports_version || {
  echo "install-label-studio.sh: $VENV/bin/label-studio does not report $VERSION" >&2
  exit 1
}
echo "label-studio $VERSION: ready in $VENV"
