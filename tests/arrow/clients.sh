# tests/arrow/clients.sh - sourced: install the two Arrow readers the tests
# use, pinned, from npm into the build tree (once; kept between runs):
# apache-arrow (JavaScript) and nodejs-polars (Rust, with its native
# package for this machine).  Sets ARROW_CLIENTS; calls skip (lib.sh) when
# node, npm or the registry is missing (a failure under TILEFS_CI=1).
ARROW_PINS="apache-arrow@21.2.0 nodejs-polars@0.25.2"
ARROW_CLIENTS=$(cd "$(dirname "$TILETOOL")/.." && pwd)/tests/clients/arrow
export ARROW_CLIENTS
command -v node >/dev/null 2>&1 || skip "no node (Debian package nodejs)"
command -v npm >/dev/null 2>&1 || skip "no npm (Debian package npm)"
case "$(uname -m)" in
x86_64) plat=nodejs-polars-linux-x64-gnu@0.25.2 ;;
aarch64) plat=nodejs-polars-linux-arm64-gnu@0.25.2 ;;
*) skip "no nodejs-polars build for $(uname -m)" ;;
esac
# Two tests may get here at once (make -j): one installs, the other waits.
mkdir -p "$(dirname "$ARROW_CLIENTS")"
exec 9> "$ARROW_CLIENTS.lock"
flock -w 400 9 || skip "waited 400 s for another test's npm install"
if [ "$(cat "$ARROW_CLIENTS/.pins" 2>/dev/null)" != "$ARROW_PINS $plat" ]; then
	rm -rf "$ARROW_CLIENTS"
	mkdir -p "$ARROW_CLIENTS"
	printf '{ "name": "tilefs-arrow-clients", "private": true }\n' > "$ARROW_CLIENTS/package.json"
	# npm leaves out the optional native package without a lock file: named.
	(cd "$ARROW_CLIENTS" && timeout 300 npm install --no-audit --no-fund --loglevel=error \
		$ARROW_PINS "$plat" > npm.log 2>&1) || {
		tail -n 5 "$ARROW_CLIENTS/npm.log"; rm -rf "$ARROW_CLIENTS"
		skip "npm install $ARROW_PINS failed (no registry?)"; }
	echo "$ARROW_PINS $plat" > "$ARROW_CLIENTS/.pins"
fi
exec 9>&-
