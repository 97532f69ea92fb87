#!/usr/bin/env bash
# Tesseract for the OCR of scanned PDF pages (Debian's tesseract-ocr 5 with English). Idempotent;
# needs root for apt (CI runs as root). Without it everything else works, and a PDF page that
# has no text is refused with a line saying how to install it.
set -euo pipefail

if command -v tesseract >/dev/null && tesseract --list-langs 2>/dev/null | grep -qx eng; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-ocr: not root and Tesseract is missing: scanned PDFs need 'apt-get install tesseract-ocr tesseract-ocr-eng'" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends tesseract-ocr tesseract-ocr-eng >/dev/null 2>&1 || {
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends tesseract-ocr tesseract-ocr-eng >/dev/null
}
