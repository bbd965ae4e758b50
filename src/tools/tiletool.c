/* scratch: decode a whole tile file with a spec */
#include <stdio.h>
#include <stdlib.h>
#include "tf_tile.h"
int main(int argc, char **argv)
{ (void)argc;
	tf_pipeline *p; tf_error e; tf_datatype t = TF_DT_UINT8;
	if (tf_pipeline_parse(argv[1], &p, &e)) { fprintf(stderr, "%s\n", e.msg); return 2; }
	tf_datatype_parse(argv[2], &t);
	FILE *f = fopen(argv[3], "rb"); fseek(f, 0, SEEK_END); long n = ftell(f); rewind(f);
	uint8_t *b = malloc(n); fread(b, 1, n, f);
	tf_workspace *ws = tf_workspace_new(); tf_buf out = TF_BUF_INIT(SIZE_MAX);
	tf_chunk_env env = { t, tf_datatype_size(t), 22, false, NULL };
	size_t pos = 0;
	while (pos < (size_t)n) { uint64_t used; if (tf_tile_decode(p, &env, ws, tf_span_of(b+pos, n-pos), &out, NULL, &used, &e)) { fprintf(stderr, "%s\n", e.msg); return 1;} pos += used; }
	fwrite(out.p, 1, out.len, stdout);
	char *s = tf_pipeline_text(p); fprintf(stderr, "%s\n", s); free(s);
	return 0;
}
