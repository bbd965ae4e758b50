#!/bin/sh
# Array views of arrays written here by contrib/genarray (dense 2-D with
# overlapping, partial-tile fragments in row- and column-major orders;
# sparse with overlapping fragments, with and without duplicates), checked
# by tests/views_gen.py against its own simulation.  Needs no corpus.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${GENARRAY:=$(dirname "$TILETOOL")/../contrib/genarray}"
exec python3 "$here/views_gen.py" "$GENARRAY" "$TILETOOL" 120
