/*
 * fuzz_config.c - libFuzzer target: the INI configuration and globs.
 *
 * Every input is used twice:
 *
 *   - as a configuration file (mode 0600, in a directory that also holds
 *     a valid key file "key"; TILEFS_FUZZ_KEY holds a valid key too) ->
 *     tf_config_load; a loaded configuration is then asked what the driver
 *     asks: settings, the rule of a few paths, array keys; the pipeline of
 *     every rule found must print as text that parses back to the same
 *     text (tiletool and the logs show that text);
 *   - as "PATTERN\nPATH\n..." -> tf_glob_valid and tf_glob_match, timed:
 *     a match that takes more than FZ_GLOB_CPU seconds of CPU aborts, so a
 *     matcher exponential in its input is caught at lengths where a linear
 *     one takes microseconds (inputs are at most -max_len bytes).
 *
 * Any status is fine; crashes, leaks, undefined behaviour, slow globs and
 * rules that break the promises of tf_config.h are not.
 */
#include "fuzz_util.h"

#include <time.h>

#include "config/tf_config.h"
#include "format/tf_pipeline.h"

#define FZ_GLOB_CPU 0.5

static const char *const fz_paths[] = {
	"a.tdb", "data/a.tdb", "data/x/y/z/a_var.tdb", "arrays/dense/__fragments/f/a0.tdb",
	"arrays/dense", "deep/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/19/file.bin",
	".hidden", "dir/", "", "[x]", "a*b?c",
};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[512];

	(void)argc, (void)argv;
	snprintf(path, sizeof(path), "%s/key", fz_dir());
	fz_write(path, fz_oracle_key, strlen(fz_oracle_key), 0600);
	setenv("TILEFS_FUZZ_KEY", fz_oracle_key, 1);
	/* No plugins from the environment either (see load()). */
	unsetenv("TILEFS_PLUGIN_PATH");
	unsetenv("HDF5_PLUGIN_PATH");
	return 0;
}

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool timed_match(const char *pattern, const char *path)
{
	double start = cpu_now();
	bool r = tf_glob_match(pattern, path);

	if (cpu_now() - start > FZ_GLOB_CPU)
		fz_fail("glob", "one match took longer than its bound");
	return r;
}

/* A pipeline's canonical text parses back to the same pipeline (knowing
 * the configuration's plugins, as the pipeline did). */
static void check_text(const tf_config *c, const tf_pipeline *p)
{
	char *text = tf_pipeline_text(p), *again = NULL;
	tf_pipeline *q = NULL;
	tf_error err;

	if (!text)
		fz_fail("pipeline text", "out of memory");
	if (tf_pipeline_parse_with(text, tf_config_plugins(c), &q, &err) != TF_OK)
		fz_fail("pipeline text", "does not parse back");
	if (!(again = tf_pipeline_text(q)) || strcmp(text, again))
		fz_fail("pipeline text", "parses back to another pipeline");
	free(text);
	free(again);
	tf_pipeline_free(q);
}

/* What a rule promises: a valid glob, a pipeline, a known datatype. */
static void check_rule(const tf_config *c, const tf_rule *r)
{
	if (!r->pattern || !tf_glob_valid(r->pattern) || !r->pipeline || !tf_datatype_valid(r->type) ||
	    r->cell_val_num == 0)
		fz_fail("rule", "breaks a promise of tf_config.h");
	check_text(c, r->pipeline);
}

static void ask(tf_config *c, const char *extra)
{
	const tf_settings *s = tf_config_settings(c);

	if (s->cache_size < 65536 || s->log_level > TF_LOG_DEBUG || s->workers > 256)
		fz_fail("settings", "out of range");
	for (size_t i = 0; i < sizeof(fz_paths) / sizeof(fz_paths[0]); i++) {
		const tf_rule *r = tf_config_match(c, fz_paths[i]);
		if (r)
			check_rule(c, r);
		(void)tf_config_array_key(c, fz_paths[i]);
	}
	if (tf_config_match(c, extra))
		check_rule(c, tf_config_match(c, extra));
	(void)tf_config_array_key(c, extra);
	tf_config_set_cache_size(c, 1 << 20);
}

static void load(const uint8_t *data, size_t size, const char *extra)
{
	char path[512];
	tf_config *c;
	tf_error err;

	/* plugin_path dlopen()s the *.so of the directories it names (an
	 * absolute path, or ../ out of ours) when a rule names a plugin
	 * filter, and runs their code: what this target tests is the parser,
	 * not whatever a mutation points at.
	 * test_plugins.c and tests/mount/plugins.sh cover plugin paths. */
	if (memmem(data, size, "plugin_path", 11))
		return;
	snprintf(path, sizeof(path), "%s/tilefs.ini", fz_dir());
	fz_write(path, data, size, 0600);
	if (tf_config_load(path, &c, &err) != TF_OK) {
		fz_say("config: %s%s", err.msg, "");
		return;
	}
	fz_say("config: loaded%s%s", "", "");
	ask(c, extra);
	tf_config_free(c);
}

/* Line `n` (0-based) of the input, cut at a NUL; "" when absent. */
static char *line_of(const uint8_t *data, size_t size, int n)
{
	const uint8_t *p = data, *end = data + size, *nl;

	for (; n > 0 && p < end; n--)
		p = (nl = memchr(p, '\n', (size_t)(end - p))) ? nl + 1 : end;
	nl = memchr(p, '\n', (size_t)(end - p));
	return strndup((const char *)p, (size_t)((nl ? nl : end) - p));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *pattern = line_of(data, size, 0), *path = line_of(data, size, 1);

	if (!pattern || !path)
		fz_fail("input", "out of memory");
	(void)tf_glob_valid(pattern);
	(void)timed_match(pattern, path);
	load(data, size, path);
	free(pattern);
	free(path);
	return 0;
}
