#!/bin/sh
# Corruption campaign through the mount (issue 9, item 3): corrupt.py says
# what is corrupted and what is asserted.  Quick mode (make check): 1000
# corruptions of the curated cases (tests/data/corpus) and, when the corpus
# is beside the project, of every checksummed or encrypted case in it.
# Long mode, by hand:
#   TILEFS_CAMPAIGN=long make check TESTS=tests/robust/campaign.sh
# 10,000 corruptions of every case of the corpus and its extra/ layouts.
# TILEFS_CAMPAIGN_COUNT and TILEFS_CAMPAIGN_SEED override the count and the
# seed; a failure names its number N, and `corrupt.py ... --only N` with the
# same seed replays it alone.
. "$(dirname "$0")/../mount/lib.sh"

here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/../data/corpus" && pwd) || fail "no tests/data/corpus"
mode=${TILEFS_CAMPAIGN:-quick}
seed=${TILEFS_CAMPAIGN_SEED:-1}
timeout=20
[ "${TILEFS_SANITIZERS:-no}" = no ] || timeout=90
set -- --corpus "$data"
if [ "$mode" = long ]; then
	count=${TILEFS_CAMPAIGN_COUNT:-10000}
	[ -d "$TF_CORPUS" ] || fail "long mode needs the corpus (TF_CORPUS=$TF_CORPUS)"
	set -- --corpus "$TF_CORPUS" --corpus "$TF_CORPUS/extra" "$@" --progress 1000
else
	count=${TILEFS_CAMPAIGN_COUNT:-1000}
	if [ -d "$TF_CORPUS" ]; then	# the curated cases, and every guarded one of the corpus
		for c in "$data"/*/; do set -- "$@" --case "$(basename "$c")"; done
		for c in checksum_md5 checksum_sha256 chain_long6_int enc_dense_nofilter enc_consolidated_meta; do
			set -- "$@" --case "$c"
		done
		set -- "$@" --corpus "$TF_CORPUS" --corpus "$TF_CORPUS/extra"
	else
		echo "note: corpus absent ($TF_CORPUS): the curated cases only"
	fi
fi
python3 "$here/corrupt.py" --tilefs "$TILEFS" --work "$WORK/c" --tools "$TF_TOOLS" --count "$count" \
	--seed "$seed" --timeout "$timeout" "$@" > "$WORK/out" 2>&1
rc=$?
cat "$WORK/out"
[ "$rc" = 0 ] || fail "campaign ($mode, seed $seed): see the FAIL lines above"
ok "campaign ($mode, seed $seed): $(tail -n 1 "$WORK/out")"
