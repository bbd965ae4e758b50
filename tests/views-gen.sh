#!/bin/sh
# Array views of arrays written here by contrib/genarray (dense 2-D with
# overlapping, partial-tile fragments in row- and column-major orders;
# sparse with overlapping fragments, with and without duplicates), checked
# by tests/views_gen.py against its own simulation.  Needs no corpus.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${GENARRAY:=$(dirname "$TILETOOL")/../contrib/genarray}"
# 120 rounds, half dense and half sparse; 40 in a sanitizer build, where a
# round costs six times more: the sanitizers look for memory errors, and the
# byte-exact judgement of all 120 is the plain build's.
rounds=120
[ "${TILEFS_SANITIZERS:-no}" = no ] || rounds=40
exec python3 "$here/views_gen.py" "$GENARRAY" "$TILETOOL" "$rounds"
