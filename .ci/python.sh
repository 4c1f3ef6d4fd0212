#!/usr/bin/env bash
# The official MCP Python SDK for the end-to-end tests that drive the broker with its client
# (tests/api/mcp/python_client.rs): a venv under .ci/python/ (git-ignored) with the pinned `mcp`
# from PyPI, and the pinned `openapi-spec-validator` that checks the token API's OpenAPI document
# (tests/api/token_api/openapi_validator.rs). Reused when it already has those versions. Prints the venv's interpreter last, so
#   export MCP_PYTHON="$(bash .ci/python.sh | tail -n1)"
# points the tests at it.
set -euo pipefail
cd "$(dirname "$0")/.."

MCP_VERSION="2.3.0"
VALIDATOR_VERSION="0.9.0"
VENV=".ci/python"
PYTHON="${PYTHON:-python3}"

installed() {
  [ -x "$VENV/bin/python" ] &&
    [ "$("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("mcp"))' 2>/dev/null)" = "$MCP_VERSION" ] &&
    [ "$("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("openapi-spec-validator"))' 2>/dev/null)" = "$VALIDATOR_VERSION" ]
}

if ! installed; then
  echo "== installing mcp==$MCP_VERSION and openapi-spec-validator==$VALIDATOR_VERSION into $VENV" >&2
  if ! "$PYTHON" -m venv --help >/dev/null 2>&1; then
    echo "$PYTHON cannot make a venv (Debian: apt-get install python3-venv)" >&2
    exit 1
  fi
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_VERSION" \
    "openapi-spec-validator==$VALIDATOR_VERSION" >&2
  installed || { echo "mcp==$MCP_VERSION or openapi-spec-validator==$VALIDATOR_VERSION did not install into $VENV" >&2; exit 1; }
fi
echo "$(pwd)/$VENV/bin/python"
