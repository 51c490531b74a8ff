#!/usr/bin/env bash
# Install everything the tests need, then run them. This is the README's test command and what
# CI runs (.ci/run). Extra arguments go to pytest (e.g. `-m "not labelstudio"`, `-m "not browser"`).
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --disable-pip-version-check -e ".[test]"
bash scripts/install-label-studio.sh          # real Label Studio server, in its own virtualenv
bash scripts/install-chromium.sh              # Debian's chromium for the review-screen browser test
cuqa-models pull smollm2-135m-instruct-q4_1   # small embedded model for the local-model smoke test

# The docs site (mkdocs.yml, docs/), strictly: a broken link or anchor, a page left out of the nav
# or a README section a page includes that is gone fails the command. Built into a temporary
# folder, not the checkout's site/; not --quiet, which hides the warnings --strict counts.
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
NO_MKDOCS_2_WARNING=1 python3 -m mkdocs build --strict --site-dir "$site"

# The import rules of the architecture, the contracts of pyproject.toml's [tool.importlinter]:
# a broken one prints its name and the import that broke it (docs/architecture.md).
lint-imports --no-cache

set +e
python3 -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "scripts/test.sh: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$status"
