/*
 * tf_glob.c - the globs of [match] and [array] sections (tf_glob.h): '*'
 * and '?' within a segment, '[...]' classes, '**' for any number of
 * segments, matched with fnmatch(3) one segment at a time.
 */
#include "config.h"

#include "config/tf_glob.h"

#include <fnmatch.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

bool tf_glob_valid(const char *p)
{
	if (!*p || p[0] == '/' || strstr(p, "//") || p[strlen(p) - 1] == '/')
		return false;
	for (; *p; p++) {
		if (*p == '[') {
			const char *close = strchr(p + 1 + (p[1] == '!' || p[1] == '^') + (p[1] == ']'), ']');
			if (!close || memchr(p, '/', (size_t)(close - p)))
				return false;
			p = close;
		} else if (*p == '\\' && !*++p) {
			return false;
		}
	}
	return true;
}

/* Match one path segment pattern against one name segment. */
static bool segment_match(const char *pat, size_t plen, const char *name, size_t nlen)
{
	char p[PATH_MAX], n[PATH_MAX];

	if (plen >= sizeof(p) || nlen >= sizeof(n))
		return false;
	memcpy(p, pat, plen);
	p[plen] = '\0';
	memcpy(n, name, nlen);
	n[nlen] = '\0';
	return fnmatch(p, n, 0) == 0;
}

/* A string cut at every '/': segment i is s[off[i]], len[i] bytes. */
typedef struct segs {
	size_t n, *off, *len;
} segs;

static bool split(const char *s, segs *out)
{
	size_t n = 1, i = 0, start = 0;

	for (const char *c = s; *c; c++)
		n += *c == '/';
	out->n = n;
	out->off = malloc(n * sizeof(size_t));
	out->len = malloc(n * sizeof(size_t));
	if (!out->off || !out->len)
		return false;
	for (size_t k = 0;; k++)
		if (s[k] == '/' || !s[k]) {
			out->off[i] = start;
			out->len[i++] = k - start;
			start = k + 1;
			if (!s[k])
				return true;
		}
}

/*
 * Pattern segments from i against path segments from j.  "**" matches any
 * number of segments (at least one when it ends the pattern).  Each (i, j)
 * is decided once (memo: -1 unknown, 0, 1), so the cost is linear in
 * pattern x path segments whatever the pattern: SOURCE's depth is chosen
 * by whoever writes it, and "**" / "**" / ... must not be exponential.
 */
typedef struct glob_job {
	const char *pat, *path;
	segs p, s;
	signed char *memo;
} glob_job;

static bool glob_from(glob_job *g, size_t i, size_t j)
{
	signed char *m = &g->memo[i * (g->s.n + 1) + j];
	const char *seg = g->pat + (i < g->p.n ? g->p.off[i] : 0);
	bool r;

	if (*m >= 0)
		return *m;
	if (j == g->s.n || i == g->p.n)
		r = i == g->p.n && j == g->s.n;
	else if (g->p.len[i] == 2 && seg[0] == '*' && seg[1] == '*')
		r = i + 1 == g->p.n || glob_from(g, i + 1, j) || glob_from(g, i, j + 1);
	else
		r = segment_match(seg, g->p.len[i], g->path + g->s.off[j], g->s.len[j]) &&
		    glob_from(g, i + 1, j + 1);
	*m = r;
	return r;
}

static bool glob_segments(const char *pat, const char *path)
{
	glob_job g = { pat, path, { 0 }, { 0 }, NULL };
	bool r = false;

	if (split(pat, &g.p) && split(path, &g.s) &&
	    (g.memo = malloc((g.p.n + 1) * (g.s.n + 1)))) {
		memset(g.memo, -1, (g.p.n + 1) * (g.s.n + 1));
		r = glob_from(&g, 0, 0);
	}
	free(g.memo);
	free(g.p.off), free(g.p.len), free(g.s.off), free(g.s.len);
	return r;
}

bool tf_glob_match(const char *pattern, const char *path)
{
	const char *base;

	if (strchr(pattern, '/'))
		return glob_segments(pattern, path);
	base = strrchr(path, '/');
	return fnmatch(pattern, base ? base + 1 : path, 0) == 0;
}
