#!/bin/sh
# Every data file of every case of the TileDB corpus (../shared/corpus and
# its extra/ cases), decoded with tiletool and compared with TileDB's bytes.
set -u
if [ ! -d "${TF_CORPUS:-}" ]; then
	[ "${TILEFS_CI:-0}" = 1 ] && { echo "FAIL: corpus absent at '${TF_CORPUS:-}' (CI needs ../shared)"; exit 1; }
	echo "SKIP: corpus absent at '${TF_CORPUS:-}' (checked out without ../shared?)"
	exit 77
fi
python3 "$TF_TOOLS/check-cli" "$TILETOOL" "$TF_CORPUS" "$TF_CORPUS/extra"
