#!/bin/sh
# Hostile arrays through the mount with views on (issue 19): views_campaign.py
# says what each case lies about and what is asserted (no crash, no hang,
# peak RSS within cache_size + 64 MiB, open fds bounded, a control array
# still reading the same bytes).  Quick mode (make check): 300 cases (150
# under the sanitizers) of the curated arrays (tests/data/corpus) and, when
# the corpus is beside the project, of all of its arrays.  Long mode, by hand:
#   TILEFS_CAMPAIGN=long make check TESTS=tests/robust/views-campaign.sh
# 5,000 cases, every corpus array in turn, fragments cloned up to 2,000
# times.  TILEFS_CAMPAIGN_COUNT and TILEFS_CAMPAIGN_SEED override the count
# and the seed; a failure names its number N, and `views_campaign.py ...
# --seed S --only N` replays it alone.
. "$(dirname "$0")/../mount/lib.sh"

here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/../data/corpus" && pwd) || fail "no tests/data/corpus"
mode=${TILEFS_CAMPAIGN:-quick}
seed=${TILEFS_CAMPAIGN_SEED:-1}
timeout=20
set -- --corpus "$data" --corpus "$data/extra"
quick=300
[ "${TILEFS_SANITIZERS:-no}" = no ] || { timeout=90 quick=150; set -- "$@" --sanitizers; }
if [ "$mode" = long ]; then
	count=${TILEFS_CAMPAIGN_COUNT:-5000}
	[ -d "$TF_CORPUS" ] || fail "long mode needs the corpus (TF_CORPUS=$TF_CORPUS)"
	set -- --corpus "$TF_CORPUS" --corpus "$TF_CORPUS/extra" --round-robin --big --progress 500
else
	count=${TILEFS_CAMPAIGN_COUNT:-$quick}
	if [ -d "$TF_CORPUS" ]; then
		set -- --corpus "$TF_CORPUS" --corpus "$TF_CORPUS/extra" "$@"
	else
		echo "note: corpus absent ($TF_CORPUS): the curated arrays only"
	fi
fi
python3 "$here/views_campaign.py" --tilefs "$TILEFS" --work "$WORK/v" --count "$count" \
	--seed "$seed" --timeout "$timeout" "$@" > "$WORK/out" 2>&1
rc=$?
cat "$WORK/out"
[ "$rc" = 0 ] || fail "views campaign ($mode, seed $seed): see the FAIL lines above"
ok "views campaign ($mode, seed $seed): $(tail -n 1 "$WORK/out")"
