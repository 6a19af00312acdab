#!/usr/bin/env bash
# Headless Chromium for tests/test_browser.py (the report opened in a real browser). Idempotent; root + apt.
#   Debian's chromium + chromium-driver (same version, so Selenium needs no download), DejaVu fonts for
#   the page's font stack, and Selenium in the project venv (it is in the [test] extra already).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null || [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "setup-browser.sh: need root and apt-get to install chromium chromium-driver" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null
fi

PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
if ! "$PY" -c "import selenium" 2>/dev/null; then
  "$PY" -m pip install -q "selenium>=4.20"
fi

chromium --version
chromedriver --version
