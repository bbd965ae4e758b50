/*
 * tiletool - decode, inspect, verify and write TileDB tile files.
 *
 *   tiletool decode [-F SPEC] [-t TYPE] [-n CELLS|var] [-k KEYFILE] [-V VERSION]
 *                   [-o OUT] [--generic] [--var-data FILE --var-filters SPEC
 *                   --var-type TYPE] FILE
 *   tiletool info [-v] [decode options] FILE...
 *   tiletool verify [decode options] FILE...
 *   tiletool encode -F SPEC -t TYPE [-n CELLS] [--tile-size BYTES] [-k KEYFILE] IN OUT
 *   tiletool export [--csv | --arrow | --raw ATTR | --npy ATTR] [--fragment NAME] [-k KEYFILE]
 *                   [-c CONFIG] [-o OUT] ARRAY
 *   tiletool index [-j N] [-c CONFIG] [--index-dir DIR] SOURCE   (tools/index.c)
 *   (every command: [--plugin-path DIR[:DIR...]], default $TILEFS_PLUGIN_PATH,
 *   then $HDF5_PLUGIN_PATH: filter plugins the specs may name)
 *
 * FILE may be s3://BUCKET/KEY: read from an object store with the [s3]
 * settings of -c FILE (an INI configuration) and the AWS_* environment.
 *
 * Exit status: 0 success, 1 data error, 2 usage error.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/tf_array.h"
#include "cache/tf_cache.h"
#include "config/tf_config.h"
#include "format/tf_file.h"
#include "cache/tf_handle.h"
#include "util/tf_keys.h"
#include "format/tf_pipeline.h"
#include "sources/tf_source_open.h"
#include "format/tf_tile.h"
#include "views/tf_view.h"
#include "filters/plugin.h"
#include "tools/index.h"
#include "tools/tiletool_int.h"

const char *const tiletool_prog = "tiletool";

int tiletool_usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "%s: ", tiletool_prog);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry '%s --help'.\n", tiletool_prog);
	return EXIT_USAGE;
}

static void print_help(const char *cmd)
{
	static const char decode_opts[] =
		"  -F, --filters SPEC     pipeline in write order, e.g. 'delta(reinterpret=int64) | zstd'\n"
		"                         or numeric 'tiledb:19 | 8 | 2,7'; empty = no filters\n"
		"  -t, --type TYPE        datatype (int8..uint64, float32, float64, char,\n"
		"                         string_ascii, string_utf8, datetime_ms, ...; default uint8)\n"
		"  -n, --cells N|var      cell_val_num (default 1); fixed RLE's value width is\n"
		"                         the type size times N\n"
		"  -k, --key FILE         key file (32 raw bytes or 64 hex digits, mode 0600):\n"
		"                         adds AES-256-GCM as the last filter\n"
		"  -V, --format-version V format version of the fragment (default 22)\n"
		"  -g, --generic          FILE is a generic tile (schema, metadata): its header\n"
		"                         carries the pipeline\n"
		"      --var-data FILE    for an offsets file whose tiles were folded into the\n"
		"                         data (string RLE/dictionary): the var data file ...\n"
		"      --var-filters SPEC ... its pipeline\n"
		"      --var-type TYPE    ... and its datatype\n"
		"      --plugin-path DIRS filter plugins (tilefs or HDF5) for SPEC: DIR[:DIR...];\n"
		"                         default $TILEFS_PLUGIN_PATH, then $HDF5_PLUGIN_PATH.\n"
		"                         SPEC then names them: 'hdf5:307,9', a plugin's name\n"
		"  -c, --config FILE      INI configuration whose [s3] section says how to\n"
		"                         reach s3://BUCKET/KEY (else the AWS_* environment)\n";

	if (!cmd) {
		printf("Usage: %s COMMAND [OPTIONS] ...\n\n"
		       "Commands:\n"
		       "  decode   write the decoded bytes of a tile file\n"
		       "  info     tiles, chunks, sizes and pipeline of tile files\n"
		       "  verify   decode everything and check checksums; non-zero exit on error\n"
		       "  encode   write a tile file from raw bytes, chunked as TileDB does\n"
		       "  schema   print a TileDB array's schema\n"
		       "  export   write an array's cells as CSV, or a dense attribute as a matrix\n"
		       "  index    index a whole source ahead of a mount (tilefs -o index_dir)\n\n"
		       "'%s COMMAND --help' describes a command.  Exit status: 0 ok, 1 data\n"
		       "error, 2 usage error.  A file inside a TileDB array needs no options: its\n"
		       "schema and fragment metadata say how to decode it.\n", tiletool_prog, tiletool_prog);
	} else if (!strcmp(cmd, "decode")) {
		printf("Usage: %s decode [OPTIONS] FILE\n\nWrite FILE's decoded bytes to stdout.\n\n%s"
		       "  -o, --output OUT       write to OUT instead of stdout\n", tiletool_prog, decode_opts);
	} else if (!strcmp(cmd, "info")) {
		printf("Usage: %s info [-v] [OPTIONS] FILE...\n\nDescribe tile files.\n\n%s"
		       "  -v, --verbose          list every chunk\n", tiletool_prog, decode_opts);
	} else if (!strcmp(cmd, "verify")) {
		printf("Usage: %s verify [OPTIONS] FILE...\n\nDecode every chunk (checking checksums"
		       " and authentication tags); report each error.\n\n%s", tiletool_prog, decode_opts);
	} else if (!strcmp(cmd, "export")) {
		printf("Usage: %s export [--csv | --arrow | --raw ATTR | --npy ATTR] [--fragment NAME]\n"
		       "                [-k KEYFILE] [-c CONFIG] [-o OUT] ARRAY\n\n"
		       "Write what tilefs shows in ARRAY/" TF_VIEWS_DIR "/ (tilefs(1), Views), decoding only\n"
		       "the tiles needed:\n"
		       "      --csv              the cells a read of the whole array returns now, as\n"
		       "                         CSV: dimensions, then attributes (the default)\n"
		       "      --arrow            the same cells as an Apache Arrow IPC file\n"
		       "      --fragment NAME    the cells fragment NAME stores, in storage order (CSV,\n"
		       "                         or Arrow with --arrow)\n"
		       "      --raw ATTR         a dense array's attribute over its non-empty domain,\n"
		       "                         row-major, little-endian\n"
		       "      --npy ATTR         the same as a NumPy .npy file\n"
		       "  -o, --output OUT       write to OUT instead of stdout\n"
		       "  -k, --key FILE         the key of an encrypted array\n"
		       "  -c, --config FILE      a configuration whose [s3] section reaches s3://\n"
		       "                         arrays (ARRAY may be s3://BUCKET/PREFIX)\n"
		       "      --cache-size SIZE  decoded-chunk cache (default 64M)\n", tiletool_prog);
	} else if (!strcmp(cmd, "schema")) {
		printf("Usage: %s schema [-k KEYFILE] [-c CONFIG] ARRAY\n\nPrint the newest schema of the "
		       "TileDB array in directory ARRAY\n(or s3://BUCKET/PREFIX): dimensions, attributes, "
		       "their pipelines.  -k: the\nkey of an encrypted array; -c: a configuration with an "
		       "[s3] section.\n", tiletool_prog);
	} else {
		printf("Usage: %s encode -F SPEC -t TYPE [-n CELLS] [--tile-size BYTES] [-k KEYFILE] IN OUT\n"
		       "       %s encode -F SPEC -t TYPE -n var --offsets OFFS [--tile-cells N]\n"
		       "                 [--offsets-out FILE [--offsets-filters SPEC]] [-k KEYFILE] IN OUT\n\n"
		       "Write tile file OUT holding the raw bytes of IN, in tiles of --tile-size\n"
		       "bytes (default: all of IN in one tile), chunked as TileDB does (64 KiB\n"
		       "of whole cells).  Var-sized cells start where OFFS says (u64 byte\n"
		       "offsets into IN, one per cell), N cells per tile (default all), never\n"
		       "split across chunks; --offsets-out also writes the offsets file (its\n"
		       "pipeline default zstd), folded into the data where TileDB folds it\n"
		       "(string rle and dictionary).\n", tiletool_prog, tiletool_prog);
	}
}

/* ---- options ------------------------------------------------------------------------- */

enum { OPT_VAR_DATA = 256, OPT_VAR_FILTERS, OPT_VAR_TYPE, OPT_TILE_SIZE, OPT_TILE_CELLS,
       OPT_OFFSETS, OPT_OFFSETS_OUT, OPT_OFFSETS_FILTERS, OPT_PLUGIN_PATH, OPT_HELP, OPT_CSV, OPT_ARROW, OPT_RAW,
       OPT_NPY, OPT_FRAGMENT, OPT_CACHE_SIZE };

static const struct option long_opts[] = {
	{ "filters", required_argument, NULL, 'F' },
	{ "type", required_argument, NULL, 't' },
	{ "cells", required_argument, NULL, 'n' },
	{ "key", required_argument, NULL, 'k' },
	{ "format-version", required_argument, NULL, 'V' },
	{ "output", required_argument, NULL, 'o' },
	{ "generic", no_argument, NULL, 'g' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "all", no_argument, NULL, 'a' },
	{ "config", required_argument, NULL, 'c' },
	{ "var-data", required_argument, NULL, OPT_VAR_DATA },
	{ "var-filters", required_argument, NULL, OPT_VAR_FILTERS },
	{ "var-type", required_argument, NULL, OPT_VAR_TYPE },
	{ "tile-size", required_argument, NULL, OPT_TILE_SIZE },
	{ "tile-cells", required_argument, NULL, OPT_TILE_CELLS },
	{ "offsets", required_argument, NULL, OPT_OFFSETS },
	{ "offsets-out", required_argument, NULL, OPT_OFFSETS_OUT },
	{ "offsets-filters", required_argument, NULL, OPT_OFFSETS_FILTERS },
	{ "plugin-path", required_argument, NULL, OPT_PLUGIN_PATH },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "csv", no_argument, NULL, OPT_CSV },
	{ "arrow", no_argument, NULL, OPT_ARROW },
	{ "raw", required_argument, NULL, OPT_RAW },
	{ "npy", required_argument, NULL, OPT_NPY },
	{ "fragment", required_argument, NULL, OPT_FRAGMENT },
	{ "cache-size", required_argument, NULL, OPT_CACHE_SIZE },
	{ NULL, 0, NULL, 0 },
};

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno == 0 && end != s && *end == '\0' && s[0] != '-';
}

static int parse_cells(const char *s, uint32_t *v)
{
	uint64_t n;

	if (!strcmp(s, "var")) {
		*v = TF_CELL_VAR;
		return 0;
	}
	if (!parse_u64(s, &n) || n == 0 || n >= TF_CELL_VAR)
		return tiletool_usage_error("bad cell count '%s' (a positive number or 'var')", s);
	*v = (uint32_t)n;
	return 0;
}

static int parse_type(const char *s, tf_datatype *t)
{
	return tf_datatype_parse(s, t) ? 0 : tiletool_usage_error("unknown datatype '%s'", s);
}

/* Parse argv; returns -1 to go on, or an exit status (help: 0). */
static int parse_opts(const char *cmd, int argc, char **argv, opts *o)
{
	uint64_t n;
	int c, rc = 0;

	while (rc == 0 && (c = getopt_long(argc, argv, "F:t:n:k:V:o:c:gva", long_opts, NULL)) != -1) {
		switch (c) {
		case 'F': o->spec = optarg; o->have_spec = o->explicit = true; break;
		case 't': rc = parse_type(optarg, &o->type); o->explicit = true; break;
		case 'n': rc = parse_cells(optarg, &o->cell_val_num); o->explicit = true; break;
		case 'k': o->keyfile = optarg; break;
		case 'V':
			if (!parse_u64(optarg, &n) || n > UINT32_MAX)
				rc = tiletool_usage_error("bad format version '%s'", optarg);
			o->version = (uint32_t)n;
			o->explicit = true;
			break;
		case 'o': o->out = optarg; break;
		case 'g': o->generic = o->explicit = true; break;
		case 'v': o->verbose = true; break;
		case 'a': o->all = true; break;
		case 'c': o->config = optarg; break;
		case OPT_VAR_DATA: o->var_data = optarg; o->explicit = true; break;
		case OPT_VAR_FILTERS: o->var_spec = optarg; break;
		case OPT_VAR_TYPE: rc = parse_type(optarg, &o->var_type); break;
		case OPT_TILE_SIZE:
			if (!parse_u64(optarg, &o->tile_size) || o->tile_size == 0)
				rc = tiletool_usage_error("bad tile size '%s'", optarg);
			break;
		case OPT_TILE_CELLS:
			if (!parse_u64(optarg, &o->tile_cells) || o->tile_cells == 0)
				rc = tiletool_usage_error("bad cell count '%s'", optarg);
			break;
		case OPT_OFFSETS: o->offsets_in = optarg; break;
		case OPT_OFFSETS_OUT: o->offsets_out = optarg; break;
		case OPT_OFFSETS_FILTERS: o->offsets_spec = optarg; break;
		case OPT_PLUGIN_PATH: o->plugin_path = optarg; break;
		case OPT_HELP: print_help(cmd); return 0;
		case OPT_CSV: o->raw_attr = o->npy_attr = NULL, o->arrow = false; break;
		case OPT_ARROW: o->raw_attr = o->npy_attr = NULL, o->arrow = true; break;
		case OPT_RAW: o->raw_attr = optarg; o->npy_attr = NULL, o->arrow = false; break;
		case OPT_NPY: o->npy_attr = optarg; o->raw_attr = NULL, o->arrow = false; break;
		case OPT_FRAGMENT: o->fragment = optarg; break;
		case OPT_CACHE_SIZE:
			if (!tf_parse_size(optarg, &o->cache_size) || o->cache_size < (1u << 20))
				rc = tiletool_usage_error("bad cache size '%s' (at least 1M)", optarg);
			break;
		default: return EXIT_USAGE;
		}
	}
	return rc ? rc : -1;
}

static void plugin_warning(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "%s: warning: %s\n", tiletool_prog, msg);
}

/* tf_source_locate, the source's warnings (keys it skips) on stderr. */
static tf_status locate(const opts *o, const char *path, tf_source **src, char **rel, tf_error *err)
{
	tf_status rc = tf_source_locate(path, o->s3, src, rel, err);

	if (rc == TF_OK)
		tf_source_set_hooks(*src, &(tf_source_hooks){ .warn = plugin_warning });
	return rc;
}

/* Turn option text into objects; errors are usage (spec) or data (key). */
static int resolve(opts *o)
{
	tf_error err;

	if (tf_plugins_load(o->plugin_path ? o->plugin_path : tf_plugins_env_path(), plugin_warning,
			    NULL, &o->plugins, &err) != TF_OK) {
		fprintf(stderr, "%s: plugins: %s\n", tiletool_prog, err.msg);
		return EXIT_DATA;
	}
	if (tf_pipeline_parse_with(o->spec, o->plugins, &o->pipeline, &err) != TF_OK)
		return tiletool_usage_error("-F: %s", err.msg);
	if (o->var_data && tf_pipeline_parse_with(o->var_spec ? o->var_spec : "", o->plugins,
						  &o->var_pipeline, &err) != TF_OK)
		return tiletool_usage_error("--var-filters: %s", err.msg);
	if (o->var_data && !o->var_spec)
		return tiletool_usage_error("%s", "--var-data needs --var-filters (and --var-type)");
	if (o->config) {
		if (tf_config_load(o->config, &o->cfg, &err) != TF_OK)
			return tiletool_usage_error("-c: %s", err.msg);
		o->s3 = tf_config_s3(o->cfg);
	}
	if (o->keyfile && tf_key_load_file(o->keyfile, &o->key, &err) != TF_OK) {
		fprintf(stderr, "%s: key: %s\n", tiletool_prog, err.msg);
		return err.code == TF_E_INVAL ? EXIT_USAGE : EXIT_DATA;
	}
	return -1;
}

static void opts_free(opts *o)
{
	tf_pipeline_free(o->pipeline);
	tf_pipeline_free(o->var_pipeline);
	tf_key_free(o->key);
	tf_plugins_free(o->plugins);
	tf_config_free(o->cfg);
}

/* A file inside a TileDB array (below the nearest ancestor with __schema/
 * or __array_schema.tdb), opened as its array says.  *found tells whether
 * the array knows the file at all. */
static tf_status open_in_array(const opts *o, tf_source *src, const char *rel, const char *name,
			       tf_file **f, bool *found, tf_error *err)
{
	char *dir = strdup(rel), *slash;
	bool in_array = false;
	tf_array *a = NULL;
	tf_array_file af;
	tf_status rc = TF_E_INVAL;

	*found = false;
	/* The nearest ancestor directory that is an array root, if any. */
	while (dir && !in_array && (slash = strrchr(dir, '/'))) {
		*slash = '\0';
		in_array = tf_array_detect(src, dir);
	}
	if (in_array && tf_array_open(src, dir, o->key, &a, err) == TF_OK) {
		rc = tf_array_describe(a, rel + strlen(dir) + 1, &af, err);
		*found = rc != TF_E_INVAL;
		if (rc == TF_OK) {
			rc = tf_file_open(src, af.path, name, NULL, &af.spec, f, err);
			tf_array_file_clear(&af);
		}
		tf_array_free(a);
	}
	free(dir);
	return rc;
}

/* The var data file named by --var-data, as a path in src: the user names
 * it beside the offsets file, resolved like it. */
static tf_status var_data_rel(const opts *o, char **out, tf_error *err)
{
	tf_source *vsrc = NULL;
	tf_status rc;

	*out = NULL;
	if (!o->var_data)
		return TF_OK;
	rc = tf_source_locate(o->var_data, o->s3, &vsrc, out, err);
	tf_source_free(vsrc);
	return rc;
}

/* Open path (a local file, or s3://BUCKET/KEY) as a decoded file; *src is
 * the source it reads, to be freed after the file. */
static tf_status open_file(const opts *o, const char *path, tf_file **f, tf_source **src, tf_error *err)
{
	tf_file_spec spec = {
		.pipeline = o->pipeline, .type = o->type, .cell_val_num = o->cell_val_num,
		.version = o->version, .key = o->key, .generic = o->generic,
		.var_pipeline = o->var_pipeline, .var_type = o->var_type,
	};
	char *rel = NULL, *var = NULL;
	bool found = false;
	tf_status rc;

	if ((rc = locate(o, path, src, &rel, err)) != TF_OK)
		return rc;
	/* A file inside a TileDB array needs no flags: its schema says it all. */
	if (!o->explicit)
		rc = open_in_array(o, *src, rel, path, f, &found, err);
	if (o->explicit || (rc != TF_OK && !found)) {
		if ((rc = var_data_rel(o, &var, err)) == TF_OK) {
			spec.var_data = var;
			rc = tf_file_open(*src, rel, path, NULL, &spec, f, err);
		}
	}
	free(rel), free(var);
	if (rc != TF_OK) {
		tf_source_free(*src);
		*src = NULL;
	}
	return rc;
}

static void close_file(tf_file *f, tf_source *src)
{
	tf_file_unref(f);
	tf_source_free(src);
}

/* ---- decode / verify ---------------------------------------------------------------- */

bool tiletool_write_all(FILE *out, const uint8_t *p, size_t n)
{
	return n == 0 || fwrite(p, 1, n, out) == n;
}

bool tiletool_write_file(const char *path, const tf_buf *b)
{
	FILE *f = fopen(path, "wb");
	bool ok = f && tiletool_write_all(f, b->p, b->len);

	return f ? (fclose(f) == 0) && ok : false;
}

/* Decode every unit (chunk, or run of tiny chunks) of h in order; hand
 * each to out (if non-NULL).  With keep_going, report every failing unit
 * (or tile) and go on.  Returns the number of errors. */
static unsigned decode_units(tf_handle *h, FILE *out, bool keep_going)
{
	tf_file *f = tf_handle_file(h);
	tf_workspace *ws = tf_workspace_new();
	tf_buf buf = TF_BUF_INIT(TF_MAX_CHUNK_BYTES);
	unsigned errors = !ws;
	tf_error err;

	for (size_t t = 0; ws && t < tf_file_ntiles(f) && (keep_going || !errors); t++) {
		size_t n = 0;

		if (tf_handle_tile_units(h, t, &n, &err) != TF_OK) {
			fprintf(stderr, "%s: %s\n", tiletool_prog, err.msg);
			errors++;
		}
		for (size_t u = 0; u < n && (keep_going || !errors); u++) {
			tf_unit_info ui;

			tf_handle_unit_info(h, t, u, &ui);
			if (tf_buf_reserve(&buf, ui.size, &err) != TF_OK ||
			    tf_handle_decode_unit(h, ws, t, u, buf.p, &err) != TF_OK) {
				fprintf(stderr, "%s: %s\n", tiletool_prog, err.msg);
				errors++;
			} else if (out && !tiletool_write_all(out, buf.p, ui.size)) {
				fprintf(stderr, "%s: write: %s\n", tiletool_prog, strerror(errno));
				return errors + 1;
			}
		}
	}
	tf_buf_free(&buf);
	tf_workspace_free(ws);
	return errors;
}

/* decode_units over a fresh handle of f. */
static unsigned decode_file(tf_file *f, FILE *out, bool keep_going)
{
	tf_handle *h;
	tf_error err;
	unsigned errors;

	if (tf_handle_open(f, &h, &err) != TF_OK) {
		fprintf(stderr, "%s: %s\n", tiletool_prog, err.msg);
		return 1;
	}
	errors = decode_units(h, out, keep_going);
	tf_handle_close(h);
	return errors;
}

static void warn_folded(const tf_file *f, const opts *o)
{
	tf_file_info info;

	tf_file_get_info(f, &info);
	if (!o->var_data && info.decoded_bytes == 0 && info.tiles > 0)
		fprintf(stderr, "%s: %s: its %" PRIu64 " tiles hold no chunks; if it is the offsets file of a "
			"string field with rle or dictionary, pass --var-data, --var-filters, --var-type\n",
			tiletool_prog, tf_file_name(f), info.tiles);
}

static int cmd_decode(opts *o, int nfiles, char **files)
{
	FILE *out = stdout;
	tf_file *f;
	tf_source *src;
	tf_error err;
	unsigned errors;

	if (nfiles != 1)
		return tiletool_usage_error("%s", "decode takes exactly one FILE");
	if (open_file(o, files[0], &f, &src, &err) != TF_OK) {
		fprintf(stderr, "%s: %s\n", tiletool_prog, err.msg);
		return EXIT_DATA;
	}
	warn_folded(f, o);
	if (o->out && !(out = fopen(o->out, "wb"))) {
		fprintf(stderr, "%s: %s: %s\n", tiletool_prog, o->out, strerror(errno));
		close_file(f, src);
		return EXIT_DATA;
	}
	errors = decode_file(f, out, false);
	if (fflush(out) != 0 && !errors) {
		fprintf(stderr, "%s: write: %s\n", tiletool_prog, strerror(errno));
		errors++;
	}
	if (out != stdout)
		fclose(out);
	close_file(f, src);
	return errors ? EXIT_DATA : 0;
}

static int cmd_verify(opts *o, int nfiles, char **files)
{
	unsigned bad = 0;

	if (nfiles < 1)
		return tiletool_usage_error("%s", "verify needs at least one FILE");
	for (int i = 0; i < nfiles; i++) {
		tf_file_info info;
		tf_file *f;
		tf_source *src;
		tf_error err;
		unsigned errors;

		if (open_file(o, files[i], &f, &src, &err) != TF_OK) {
			fprintf(stderr, "%s: %s\n", tiletool_prog, err.msg);
			bad++;
			continue;
		}
		errors = decode_file(f, NULL, true);
		tf_file_get_info(f, &info);
		printf("%s: %s (%" PRIu64 " tiles, %" PRIu64 " chunks, %" PRIu64 " bytes decoded%s)\n",
		       files[i], errors ? "FAILED" : "ok", info.tiles, info.chunks, tf_file_size(f),
		       errors ? ", see errors above" : "");
		bad += errors != 0;
		close_file(f, src);
	}
	return bad ? EXIT_DATA : 0;
}

/* ---- info ------------------------------------------------------------------------------ */

static int print_chunk(void *ctx, size_t c, const tf_chunk_info *ci)
{
	printf("  %-6zu %-6zu %14" PRIu64 " %10u %14" PRIu64 " %10" PRIu64 "\n", *(size_t *)ctx, c, ci->off,
	       ci->size, ci->src_off, ci->src_len);
	return 0;
}

static void print_chunks(tf_file *f)
{
	tf_workspace *ws = tf_workspace_new();
	tf_handle *h = NULL;
	tf_error err;

	printf("  %-6s %-6s %14s %10s %14s %10s\n", "tile", "chunk", "decoded at", "bytes",
	       "stored at", "bytes");
	if (!ws || tf_handle_open(f, &h, &err) != TF_OK)
		printf("  %s\n", ws ? err.msg : "out of memory");
	for (size_t t = 0; h && t < tf_file_ntiles(f); t++)
		if (tf_handle_each_chunk(h, ws, t, print_chunk, &t, &err) != TF_OK)
			printf("  %-6zu %s\n", t, err.msg);
	tf_handle_close(h);
	tf_workspace_free(ws);
}

static void print_info(const tf_file *f)
{
	char *pipe = tf_file_pipeline_text(f), *filter = tf_file_filter_attr(f);
	char *codecs = tf_file_codecs_json(f);
	tf_file_info i;

	tf_file_get_info(f, &i);
	printf("%s:\n", tf_file_name(f));
	printf("  kind:      %s%s%s\n", i.generic ? "generic tile" : "tile file",
	       i.encrypted ? ", encrypted (AES-256-GCM)" : "",
	       i.var_string ? ", var-string layout (offsets folded into the data)" : "");
	printf("  pipeline:  %s\n", pipe && *pipe ? pipe : "(none)");
	printf("  _Filter:   %s\n", filter && *filter ? filter : "(none)");
	printf("  _Codecs:   %s\n", codecs ? codecs : "(out of memory)");
	if (i.cell_val_num == TF_CELL_VAR)
		printf("  datatype:  %s, var-sized cells\n", tf_datatype_name(i.type));
	else
		printf("  datatype:  %s, %u value%s per cell\n", tf_datatype_name(i.type),
		       i.cell_val_num, i.cell_val_num == 1 ? "" : "s");
	printf("  version:   %u\n", i.version);
	printf("  tiles:     %" PRIu64 "%s\n", i.tiles, i.folded_tiles ? " (offsets rebuilt from data)" : "");
	printf("  chunks:    %" PRIu64 "\n", i.chunks);
	printf("  stored:    %" PRIu64 " bytes\n", i.stored_bytes);
	printf("  decoded:   %" PRIu64 " bytes", i.decoded_bytes);
	if (i.stored_bytes)
		printf(" (ratio %.2f)", (double)i.decoded_bytes / (double)i.stored_bytes);
	printf("\n");
	free(pipe), free(filter), free(codecs);
}

static int cmd_info(opts *o, int nfiles, char **files)
{
	int rc = 0;

	if (nfiles < 1)
		return tiletool_usage_error("%s", "info needs at least one FILE");
	for (int i = 0; i < nfiles; i++) {
		tf_file *f;
		tf_source *src;
		tf_error err;

		if (open_file(o, files[i], &f, &src, &err) != TF_OK) {
			fprintf(stderr, "%s: %s\n", tiletool_prog, err.msg);
			rc = EXIT_DATA;
			continue;
		}
		print_info(f);
		if (o->verbose)
			print_chunks(f);
		close_file(f, src);
	}
	return rc;
}

/* ---- schema ------------------------------------------------------------------------------- */

static int cmd_schema(opts *o, int nfiles, char **files)
{
	const tf_schema *s;
	tf_source *src = NULL;
	tf_array *a = NULL;
	tf_error err;
	char *name = NULL, *rel = NULL;
	int rc = 0;

	if (nfiles != 1)
		return tiletool_usage_error("%s", "schema takes one ARRAY directory");
	if (locate(o, files[0], &src, &rel, &err) != TF_OK) {
		fprintf(stderr, "%s: %s\n", tiletool_prog, err.msg);
		return EXIT_DATA;
	}
	if (!tf_array_detect(src, rel)) {
		fprintf(stderr, "%s: %s: not a TileDB array (no __schema/ or __array_schema.tdb)\n", tiletool_prog, files[0]);
		rc = EXIT_DATA;
	} else if (tf_array_open(src, rel, o->key, &a, &err) != TF_OK ||
		   tf_array_latest_schema(a, &s, &name, &err) != TF_OK) {
		fprintf(stderr, "%s: %s: %s\n", tiletool_prog, files[0], err.msg);
		rc = EXIT_DATA;
	} else {
		printf("%s (%s)\n", files[0], name);
		tf_schema_print(s, stdout);
	}
	free(name);
	free(rel);
	tf_array_free(a);
	tf_source_free(src);
	return rc;
}

/* ---- export ------------------------------------------------------------------------------- */

/* The views path export writes (as under ARRAY/@views/). */
static int export_path(const opts *o, char *rel, size_t n)
{
	const char *attr = o->raw_attr ? o->raw_attr : o->npy_attr;

	if (o->fragment && attr)
		return tiletool_usage_error("%s", "--fragment gives cells (CSV or Arrow); it does not go with --raw or --npy");
	if (o->fragment && (strchr(o->fragment, '/') || !*o->fragment))
		return tiletool_usage_error("bad fragment name '%s'", o->fragment);
	if (attr && (strchr(attr, '/') || !*attr))
		return tiletool_usage_error("bad attribute name '%s'", attr);
	if (o->fragment)
		snprintf(rel, n, "fragments/%s/cells.%s", o->fragment, o->arrow ? "arrow" : "csv");
	else if (attr)
		snprintf(rel, n, "%s.%s", attr, o->raw_attr ? "raw" : "npy");
	else
		snprintf(rel, n, "cells.%s", o->arrow ? "arrow" : "csv");
	return -1;
}

/* Read the view from start to end in large pieces, as `cat` would. */
static int copy_view(tf_view *w, FILE *out)
{
	size_t piece = (size_t)1 << 20, got;
	uint8_t *buf = malloc(piece);
	tf_workspace *ws = tf_workspace_new();
	uint64_t off = 0;
	tf_error err;
	int rc = 0;

	if (!buf || !ws) {
		fprintf(stderr, "%s: out of memory\n", tiletool_prog);
		rc = EXIT_DATA;
	}
	while (rc == 0) {
		if (tf_view_read(w, ws, off, piece, buf, &got, &err) != TF_OK) {
			fprintf(stderr, "%s: %s\n", tiletool_prog, err.msg);
			rc = EXIT_DATA;
		} else if (got == 0) {
			break;
		} else if (!tiletool_write_all(out, buf, got)) {
			fprintf(stderr, "%s: write: %s\n", tiletool_prog, strerror(errno));
			rc = EXIT_DATA;
		}
		off += got;
	}
	free(buf);
	tf_workspace_free(ws);
	return rc;
}

/* Open the views of the array at rel of src and the view `view` in them. */
static int export_open(opts *o, const char *name, tf_source *src, const char *rel, const char *view,
		       tf_array **a, tf_cache **cache, tf_views **v, tf_view **w)
{
	size_t budget = (size_t)(o->cache_size ? o->cache_size : (uint64_t)64 << 20);
	tf_error err;

	if (!tf_array_detect(src, rel)) {
		fprintf(stderr, "%s: %s: not a TileDB array (no __schema/ or __array_schema.tdb)\n", tiletool_prog, name);
		return EXIT_DATA;
	}
	if (tf_array_open(src, rel, o->key, a, &err) != TF_OK ||
	    tf_cache_new(budget, 0, cache, &err) != TF_OK || tf_views_open(*a, *cache, v, &err) != TF_OK ||
	    tf_view_open(*v, view, w, &err) != TF_OK) {
		fprintf(stderr, "%s: %s: %s\n", tiletool_prog, name, err.msg);
		return EXIT_DATA;
	}
	return 0;
}

/* Copy the view to o->out (or stdout) and close it. */
static int export_write(const opts *o, tf_view *w)
{
	FILE *out = o->out ? fopen(o->out, "wb") : stdout;
	int rc;

	if (!out) {
		fprintf(stderr, "%s: %s: %s\n", tiletool_prog, o->out, strerror(errno));
		return EXIT_DATA;
	}
	rc = copy_view(w, out);
	if (fflush(out) != 0 && !rc) {
		fprintf(stderr, "%s: write: %s\n", tiletool_prog, strerror(errno));
		rc = EXIT_DATA;
	}
	if (out != stdout && fclose(out) != 0 && !rc) {
		fprintf(stderr, "%s: %s: %s\n", tiletool_prog, o->out, strerror(errno));
		rc = EXIT_DATA;
	}
	return rc;
}

static int cmd_export(opts *o, int nfiles, char **files)
{
	char view[1024], *rel = NULL;
	tf_source *src = NULL;
	tf_array *a = NULL;
	tf_cache *cache = NULL;
	tf_views *v = NULL;
	tf_view *w = NULL;
	tf_error err;
	int rc = export_path(o, view, sizeof(view));

	if (rc >= 0)
		return rc;
	if (nfiles != 1)
		return tiletool_usage_error("%s", "export takes one ARRAY directory");
	/* ARRAY may be s3://BUCKET/PREFIX, as for schema. */
	if (locate(o, files[0], &src, &rel, &err) != TF_OK) {
		fprintf(stderr, "%s: %s\n", tiletool_prog, err.msg);
		return EXIT_DATA;
	}
	rc = export_open(o, files[0], src, rel, view, &a, &cache, &v, &w);
	if (rc == 0)
		rc = export_write(o, w);
	tf_view_close(w);
	tf_views_unref(v);
	tf_cache_free(cache);
	tf_array_free(a);
	free(rel);
	tf_source_free(src);
	return rc;
}

/* ---- main ------------------------------------------------------------------------------- */

static const struct {
	const char *name;
	int (*run)(opts *o, int nfiles, char **files);
} commands[] = {
	{ "decode", cmd_decode }, { "info", cmd_info }, { "verify", cmd_verify }, { "encode", tiletool_encode },
	{ "schema", cmd_schema }, { "export", cmd_export },
};

int main(int argc, char **argv)
{
	opts o = { .type = TF_DT_UINT8, .var_type = TF_DT_STRING_ASCII, .cell_val_num = 1 };
	int rc;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		print_help(NULL);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("tiletool (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "index"))	/* options of its own */
		return tiletool_index(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name))
			continue;
		rc = parse_opts(argv[1], argc - 1, argv + 1, &o);
		if (rc < 0)
			rc = resolve(&o);
		if (rc < 0)
			rc = commands[i].run(&o, argc - 1 - optind, argv + 1 + optind);
		opts_free(&o);
		return rc;
	}
	return tiletool_usage_error("unknown command '%s'", argv[1]);
}
