#!/bin/sh
# tests/s3/cloud.sh - a cloud machine's own identity and buckets in other
# regions, against the real store (tests/s3/store, Swift with s3api, which
# verifies every signature) behind tests/s3/credserver.py: a fake IMDSv2,
# container-credentials service and STS on loopback that hand out the
# store's real keys (two users, in turn) with session tokens of their own,
# and a gate in front of the store that refuses a token it did not issue
# (403) or that has expired (400 ExpiredToken).
#
#   order       every source configured at once: the environment wins; then,
#               each removed in turn, web identity, the profile
#               (credential_process), the container, IMDSv2; each reads the
#               same bytes through tiletool and s3read, and logs where its
#               credentials come from (but for the environment), naming no
#               secret
#   assume      a profile with role_arn + source_profile: STS AssumeRole,
#               whose SigV4 signature the fake checks with the source key
#   refusals    a wrong container token, a wrong web identity token, a
#               failing credential_process: the mount exits 5, one line
#               naming the source, no secret
#   rotation    keys that live 6 s, revoked 2 s early by the gate: 4 readers
#               for 12 s, every range compared, 0 failures; keys fetched
#               again and again, expired ones re-signed
#   regions     [s3] region = eu-west-1: the store's 400
#               AuthorizationHeaderMalformed names us-east-1 and is followed;
#               a gate answering 301 + x-amz-bucket-region, followed once
#               and remembered; requester_pays and expected_owner sent,
#               signed
#
# Needs swift (skips with 77 when absent unless TILEFS_CI=1), python3,
# curl, the corpus, built TILETOOL, TILEFS and S3READ.  About 40 s.
set -u
here=$(cd "$(dirname "$0")" && pwd)
CORPUS=${TF_CORPUS:-$here/../../../shared/corpus}
PORT=${TF_S3_PORT:-18092}; export TF_S3_PORT=$PORT
skip() { echo "SKIP: $*"; [ "${TILEFS_CI:-0}" = 1 ] && exit 1; exit 77; }
[ -d "$CORPUS/dense_2d/array" ] || skip "no corpus at $CORPUS"
command -v swift-proxy-server >/dev/null 2>&1 || skip "swift not installed (contrib/setup installs it)"
: "${TILETOOL:?}" "${S3READ:?}"
WORK=$(mktemp -d /tmp/tilefs-cloud.XXXXXX)
failed=0
ok() { echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
srv=
cleanup() {
	[ -n "$srv" ] && kill "$srv" 2>/dev/null
	mountpoint -q "$WORK/mnt" 2>/dev/null && fusermount3 -u "$WORK/mnt"
	"$here/store" stop "$WORK/store"
	[ -n "${KEEP:-}" ] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

"$here/store" start "$WORK/store" || { echo "FAIL: store did not start"; exit 1; }
mkdir -p "$WORK/data/arr" "$WORK/mnt"
head -c 3145728 /dev/urandom > "$WORK/data/r.bin"
cp -r "$CORPUS/dense_2d/array" "$WORK/data/arr/dense"
"$here/store" upload "$WORK/store" cloud "$WORK/data" || { echo "FAIL: upload"; exit 1; }
tile=$(cd "$WORK/data" && find arr/dense/__fragments -name 'a*.tdb' | sort | head -1)
"$TILETOOL" decode "$WORK/data/$tile" > "$WORK/tile.want" && [ -s "$WORK/tile.want" ] || { echo "FAIL: local decode"; exit 1; }

# The secrets no message may show.
WEBTOK=eyJhbGciOiJSUzI1NiJ9.web-identity-$$-secret
CAUTH=Bearer-container-$$-secret
SRCSECRET=source-secret-$$-xyz
echo "$WEBTOK" > "$WORK/webtok"
echo "$CAUTH" > "$WORK/cauth"
chmod 600 "$WORK/webtok" "$WORK/cauth"
ARN=arn:aws:iam::123456789012:role/tilefs-test

# start_creds ARGS...: the credential services; $META, $GATE their ports.
start_creds() {
	[ -n "$srv" ] && kill "$srv" && wait "$srv" 2>/dev/null
	rm -f "$WORK/ready" "$WORK/cred.log"
	python3 "$here/credserver.py" --users "test:tester=testing,test:tester2=testing2" \
		--upstream "127.0.0.1:$PORT" --role-arn "$ARN" --web-token "$WORK/webtok" \
		--container-auth "$CAUTH" --source-key "SOURCEKEY=$SRCSECRET" --ready "$WORK/ready" \
		--log "$WORK/cred.log" "$@" &
	srv=$!
	i=0; while [ $i -lt 100 ] && [ ! -f "$WORK/ready" ]; do i=$((i + 1)); sleep 0.1; done
	read -r META GATE < "$WORK/ready" || { echo "FAIL: the credential services did not start"; exit 1; }
	printf '[s3]\nendpoint = http://127.0.0.1:%s\nretries = 2\n' "$GATE" > "$WORK/s3.ini"
	# The services' addresses, for whichever sources are configured.
	[ -n "${AWS_ENDPOINT_URL_STS:-}" ] && export AWS_ENDPOINT_URL_STS=http://127.0.0.1:$META
	[ -n "${AWS_CONTAINER_CREDENTIALS_FULL_URI:-}" ] &&
		export AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:$META/container/creds
	[ -n "${AWS_EC2_METADATA_SERVICE_ENDPOINT:-}" ] && export AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:$META
	[ -f "$HOME/.aws/config" ] && sed -i "s|127.0.0.1:[0-9]*/process|127.0.0.1:$META/process|" "$HOME/.aws/config"
	return 0
}

# A clean slate: no keys, no profile, nothing of the developer's.
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION \
	AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN AWS_ROLE_SESSION_NAME AWS_ENDPOINT_URL_STS \
	AWS_CONTAINER_CREDENTIALS_RELATIVE_URI AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN \
	AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE AWS_EC2_METADATA_SERVICE_ENDPOINT AWS_EC2_METADATA_DISABLED \
	AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
export HOME=$WORK/home
mkdir -p "$HOME/.aws"
start_creds

# no_secret FILE: none of the secrets (nor a session token the services issued) in FILE.
no_secret() {
	for s in "$WEBTOK" "$CAUTH" "$SRCSECRET" testing testing2 tok1- tok2- tok3-; do
		grep -q -- "$s" "$1" && { echo "secret '$s' in $1"; return 1; }
	done
	return 0
}
# reads WHAT WANT_ORIGIN: the tile decoded and the object read through
# the store with what the environment gives, the credentials' origin
# logged once; the services' log says which issued them.
reads() {
	why=
	timeout 60 "$TILETOOL" decode -c "$WORK/s3.ini" "s3://cloud/$tile" > "$WORK/tile.got" 2> "$WORK/err" ||
		why="$why tiletool: $(head -c 300 "$WORK/err");"
	cmp -s "$WORK/tile.got" "$WORK/tile.want" || why="$why decoded bytes differ;"
	if [ -n "$2" ]; then
		grep -q "credentials from $2" "$WORK/err" || why="$why origin not '$2': $(grep credentials "$WORK/err");"
		[ "$(grep -c "credentials from" "$WORK/err")" = 1 ] || why="$why the origin logged $(grep -c "credentials from" "$WORK/err") times;"
	else	# the caller's own environment: nothing to say
		! grep -q "credentials from" "$WORK/err" || why="$why the environment's keys logged;"
		[ "$(grep -c "ISSUE" "$WORK/cred.log")" = 0 ] || why="$why a service was asked;"
	fi
	AWS_ENDPOINT_URL=http://127.0.0.1:$GATE timeout 60 "$S3READ" cat s3://cloud r.bin 2> "$WORK/err2" |
		cmp -s - "$WORK/data/r.bin" || why="$why s3read: $(head -c 300 "$WORK/err2");"
	no_secret "$WORK/err" > "$WORK/leak" && no_secret "$WORK/err2" >> "$WORK/leak" || why="$why $(cat "$WORK/leak");"
	[ -z "$why" ] && ok "$1: byte-exact, $(grep -o 'credentials from .*' "$WORK/err" || echo "nothing logged")" ||
		fail "$1:$why"
}

# ---- order: every source at once, then each removed in turn
cat > "$HOME/.aws/config" <<EOF
[default]
credential_process = curl -s -f "http://127.0.0.1:$META/process"
EOF
export AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing
export AWS_WEB_IDENTITY_TOKEN_FILE=$WORK/webtok AWS_ROLE_ARN=$ARN AWS_ENDPOINT_URL_STS=http://127.0.0.1:$META
export AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:$META/container/creds AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=$WORK/cauth
export AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:$META
start_creds --no-token-check	# static keys have no token: the gate lets them through
reads "environment first" ""
start_creds
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
reads "web identity next" "web identity (AWS_WEB_IDENTITY_TOKEN_FILE): role '$ARN' through STS"
grep -q "ISSUE sts-AssumeRoleWithWebIdentity" "$WORK/cred.log" || fail "STS issued no web identity credentials"
unset AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN
reads "the profile's credential_process next" ".*config profile 'default': credential_process"
rm "$HOME/.aws/config"
reads "container credentials next" "container credentials http://127.0.0.1:$META/container/creds"
unset AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE
export AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:$META
reads "IMDSv2 last" "instance metadata (IMDSv2) http://127.0.0.1:$META"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$META/latest/meta-data/iam/security-credentials/")
[ "$code" = 401 ] && ok "the fake IMDS refuses a GET without a token (401)" || fail "the fake IMDS answered $code without a token"
kinds=$(awk '$1 == "ISSUE" {print $2}' "$WORK/cred.log" | sort -u | tr '\n' ' ')
[ "$kinds" = "container imds process sts-AssumeRoleWithWebIdentity " ] && ok "issued by: $kinds" || fail "issued by: $kinds"

# ---- assume role: a profile's role_arn with source_profile
printf '[src]\naws_access_key_id = SOURCEKEY\naws_secret_access_key = %s\n' "$SRCSECRET" > "$HOME/.aws/credentials"
chmod 600 "$HOME/.aws/credentials"
printf '[profile r]\nrole_arn = %s\nsource_profile = src\nrole_session_name = tilefs-test\n' "$ARN" > "$HOME/.aws/config"
AWS_PROFILE=r reads "role_arn + source_profile (AssumeRole, SigV4-signed)" "profile 'r': role '$ARN' through STS"
grep -q "ISSUE sts-AssumeRole " "$WORK/cred.log" && ! grep -q "REFUSE sts" "$WORK/cred.log" &&
	ok "STS verified the AssumeRole signature" || fail "AssumeRole: $(grep -E 'REFUSE|ISSUE sts' "$WORK/cred.log")"
printf '[src]\naws_access_key_id = SOURCEKEY\naws_secret_access_key = wrong-%s\n' "$SRCSECRET" > "$HOME/.aws/credentials"
AWS_PROFILE=r timeout 60 "$TILETOOL" decode -c "$WORK/s3.ini" "s3://cloud/$tile" > /dev/null 2> "$WORK/err"
grep -q "AssumeRole: HTTP 403 (SignatureDoesNotMatch)" "$WORK/err" && no_secret "$WORK/err" > /dev/null &&
	ok "a wrong source key: $(cat "$WORK/err")" || fail "a wrong source key: $(cat "$WORK/err")"
rm -f "$HOME/.aws/credentials" "$HOME/.aws/config"

# ---- refusals: the mount exits 5 with one line naming the source
refused() {	# WHAT PATTERN
	rc=0
	timeout 60 "$TILEFS" -o config="$WORK/s3.ini" s3://cloud "$WORK/mnt" 2> "$WORK/err" || rc=$?
	mountpoint -q "$WORK/mnt" && fusermount3 -u "$WORK/mnt"
	[ $rc = 5 ] && [ "$(wc -l < "$WORK/err")" = 1 ] && grep -q -- "$2" "$WORK/err" && no_secret "$WORK/err" > /dev/null &&
		ok "$1: exit 5: $(cat "$WORK/err")" || fail "$1: exit $rc: $(cat "$WORK/err")"
}
if [ -x "${TILEFS:-}" ] && [ "$(id -u)" = 0 ] && [ -c /dev/fuse ]; then
	AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:$META/container/creds AWS_CONTAINER_AUTHORIZATION_TOKEN=wrong \
		refused "a wrong container token" "credentials from container credentials .*HTTP 401"
	echo "not-the-token" > "$WORK/badtok"
	AWS_WEB_IDENTITY_TOKEN_FILE=$WORK/badtok AWS_ROLE_ARN=$ARN \
		refused "a wrong web identity" "web identity .*AssumeRoleWithWebIdentity: HTTP 400 (InvalidIdentityToken)"
	printf '[default]\ncredential_process = sh -c "exit 3"\n' > "$HOME/.aws/config"
	refused "a failing credential_process" "credential_process 'sh': exited with status 3"
	rm "$HOME/.aws/config"
	AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:1 refused "no identity at all" \
		"no credentials in the environment, web identity, profile 'default' or container credentials: .*instance metadata"
	# The mount, on IMDS: logs where its credentials come from, once, no secret.
	timeout 120 "$TILEFS" -f -o config="$WORK/s3.ini" s3://cloud "$WORK/mnt" 2> "$WORK/log" &
	d=$!
	i=0; until mountpoint -q "$WORK/mnt" || [ $i -ge 200 ]; do i=$((i + 1)); sleep 0.05; done
	cmp -s "$WORK/mnt/r.bin" "$WORK/data/r.bin" && cmp -s "$WORK/mnt/$tile" "$WORK/tile.want" &&
		ok "tilefs on IMDS credentials: byte-exact" || fail "tilefs on IMDS credentials: $(cat "$WORK/log")"
	fusermount3 -u "$WORK/mnt"; wait $d
	[ "$(grep -c "credentials from instance metadata (IMDSv2) http://127.0.0.1:$META" "$WORK/log")" = 1 ] &&
		no_secret "$WORK/log" > /dev/null && ok "tilefs logs: $(grep 'credentials from' "$WORK/log")" ||
		fail "tilefs log: $(cat "$WORK/log")"
else
	[ "${TILEFS_CI:-0}" = 1 ] && fail "the mount cases need root and /dev/fuse"
	echo "SKIP: the mount cases need root and /dev/fuse"
fi

# ---- rotation: keys living 6 s, revoked 2 s early
start_creds --ttl 6 --revoke-early 2
out=$(AWS_ENDPOINT_URL=http://127.0.0.1:$GATE timeout 60 "$S3READ" random s3://cloud r.bin "$WORK/data/r.bin" 200 12 2> "$WORK/err")
issues=$(grep -c "^ISSUE imds" "$WORK/cred.log")
users=$(awk '$1 == "ISSUE" {print $4}' "$WORK/cred.log" | sort -u | wc -l)
expired=$(grep -c "^GATE EXPIRED" "$WORK/cred.log")
gets=$(grep -c "^GATE OK" "$WORK/cred.log")
case $out in
"ok "*) [ "$issues" -ge 3 ] && [ "$users" = 2 ] && ! grep -q "wrong" "$WORK/err" &&
	ok "rotation: $out reads by 4 readers in 12 s, 0 failed; $issues keys fetched, from both users, $gets GETs let in, $expired refused as expired (re-signed)" ||
	fail "rotation: $out, $issues issues, $users users: $(head -c 400 "$WORK/err")" ;;
*) fail "rotation: $out: $(head -c 600 "$WORK/err")" ;;
esac

# ---- regions
unset AWS_EC2_METADATA_SERVICE_ENDPOINT
export AWS_EC2_METADATA_DISABLED=true AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing
printf '[s3]\nendpoint = http://127.0.0.1:%s\nregion = eu-west-1\n' "$PORT" > "$WORK/region.ini"
timeout 60 "$TILETOOL" decode -c "$WORK/region.ini" "s3://cloud/$tile" 2> "$WORK/err" | cmp -s - "$WORK/tile.want" &&
	grep -q "the bucket is in region 'us-east-1', not 'eu-west-1' (HTTP 400)" "$WORK/err" &&
	ok "the store's 400 AuthorizationHeaderMalformed followed: $(grep region "$WORK/err")" ||
	fail "a 400 naming the region: $(cat "$WORK/err")"
start_creds --no-token-check --redirect-region us-east-1
printf '[s3]\nendpoint = http://127.0.0.1:%s\nregion = eu-west-1\nrequester_pays = yes\nexpected_owner = 123456789012\n' \
	"$GATE" > "$WORK/region.ini"
timeout 60 "$TILETOOL" decode -c "$WORK/region.ini" "s3://cloud/$tile" 2> "$WORK/err" | cmp -s - "$WORK/tile.want" &&
	[ "$(grep -c "GATE REDIRECT" "$WORK/cred.log")" = 1 ] && grep -q "(HTTP 301)" "$WORK/err" &&
	ok "301 + x-amz-bucket-region followed once, then remembered ($(grep -c 'GATE OK' "$WORK/cred.log") requests went straight)" ||
	fail "301: $(cat "$WORK/err"; grep GATE "$WORK/cred.log")"
[ "$(grep "^GATE OK" "$WORK/cred.log" | grep -vc "payer owner")" = 0 ] &&
	ok "requester_pays and expected_owner sent and signed on every request" ||
	fail "requester_pays/expected_owner: $(grep '^GATE OK' "$WORK/cred.log" | head -3)"

echo "$failed failed"
[ $failed = 0 ]
