#!/usr/bin/env bash
# The Home Assistant integration's tests against a real Swath: creates (or reuses) a virtual
# environment under target/ with the pinned requirements, builds the release `swath` of this
# repository (incremental when it is already built), type-checks the component and the
# acceptance script with `mypy --strict`, runs pytest with its coverage floors (95 % of the
# component, all of config_flow.py), then the acceptance test (acceptance.py: a real `hass`
# process onboarded and given the integration through its APIs, against swath on PostgreSQL at
# SWATH_TEST_DATABASE_URL, by default postgres://postgres@127.0.0.1:5432/postgres). The tests
# start that binary themselves, on free ports, and fail when it is missing.
# SWATH_BIN set in the environment names a swath binary to test instead: the build is skipped
# (CI leaves it unset). Extra arguments go to pytest, without the floors and without the
# acceptance test (`integrations/homeassistant/test.sh -k stream -x`).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

target=${CARGO_TARGET_DIR:-$root/target}
venv=$target/homeassistant-venv
requirements=$here/requirements_test.txt

# Home Assistant 2025.4 needs Python 3.13.
python=${SWATH_HA_PYTHON:-}
if [[ -z $python ]]; then
  for candidate in python3.13 "$HOME"/.pyenv/versions/3.13*/bin/python3 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then
      python=$candidate
      break
    fi
  done
fi
if [[ -z $python ]]; then
  echo "test.sh needs Python 3.13 (python3.13 on PATH, pyenv's 3.13, or SWATH_HA_PYTHON)." >&2
  exit 1
fi

want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [[ ! -x $venv/bin/python || "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$want" ]]; then
  echo "Installing the pinned test requirements into $venv ($("$python" --version))."
  rm -rf "$venv"
  "$python" -m venv "$venv"
  timeout 1200 "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  echo "$want" >"$venv/.requirements.sha256"
fi

if [[ -n ${SWATH_BIN:-} ]]; then
  echo "Testing $SWATH_BIN (SWATH_BIN is set: no build)."
else
  echo "Building the release swath."
  # The workspace's default members, as .ci/api-conformance builds it: the same features, so CI
  # builds the binary once for both.
  cargo build --release --bin swath
  export SWATH_BIN=$target/release/swath
fi

cd "$here"
echo "Type-checking the component (mypy --strict)."
"$venv/bin/python" -m mypy --strict custom_components/swath
# The acceptance script too (not the pytest helpers it imports, which are not held to --strict).
"$venv/bin/python" -m mypy --strict --follow-imports=silent acceptance.py acceptance_harness.py
if [[ $# -gt 0 ]]; then
  # A chosen subset of the tests: no coverage floor.
  exec "$venv/bin/python" -m pytest tests "$@"
fi
# The whole suite: at least 95 % of the component's lines, and every line of the config flow
# (the quality scale's test-coverage and config-flow-test-coverage rules).
"$venv/bin/python" -m pytest tests --cov=custom_components.swath --cov-report=term-missing \
  --cov-fail-under=95
"$venv/bin/python" -m coverage report --include='custom_components/swath/config_flow.py' \
  --fail-under=100
echo "Acceptance: a real hass process with the component against a running swath."
SWATH_TEST_DATABASE_URL=${SWATH_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres} \
  "$venv/bin/python" acceptance.py
