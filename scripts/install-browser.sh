#!/usr/bin/env bash
# Debian's headless Chromium and its ChromeDriver, for the browser test of the keeper's pages
# (tests/test_pages.py). Idempotent; needs root for apt (CI runs as root). Without them that one
# test is skipped with a line saying so; nothing else needs a browser.
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-browser: not root and Chromium is missing: the browser test will be skipped" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null 2>&1 || {
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
}
