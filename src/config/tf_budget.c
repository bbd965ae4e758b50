/*
 * tf_budget.c - sizes and memory budgets as options give them (tf_budget.h):
 * "256M" parsed, and a budget checked against its minimum and the memory
 * of this process (physical memory, or its cgroup's limit when lower).
 */
#include "config.h"

#include "config/tf_budget.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool tf_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	if (!isdigit((unsigned char)s[0]))	/* strtoull would take " -1" */
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return false;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	default: break;
	}
	if (shift && end[0] == 'i' && end[1] == 'B')	/* 256MiB */
		end += 2;
	else if (*end == 'B')				/* 256MB, 100B */
		end++;
	if (*end || (shift && v > (ULLONG_MAX >> shift)))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

/* The lowest memory limit of cgroup `dir` and its parents, in the files
 * `hier`DIR/`file` (cgroup v2: /sys/fs/cgroup, memory.max; v1:
 * /sys/fs/cgroup/memory, memory.limit_in_bytes); 0 when none is set.  dir
 * is modified. */
static uint64_t cgroup_limit(const char *hier, const char *file, char *dir)
{
	uint64_t lowest = 0;

	for (;;) {
		char path[PATH_MAX + 32], text[32];
		unsigned long long v;
		char *slash, *end;
		FILE *f;

		snprintf(path, sizeof(path), "%s%s/%s", hier, dir, file);
		if ((f = fopen(path, "re"))) {
			if (fgets(text, sizeof(text), f) && isdigit((unsigned char)text[0]) &&
			    (v = strtoull(text, &end, 10)) > 0 && (!lowest || v < lowest))
				lowest = v;	/* "max": no limit at this level */
			fclose(f);
		}
		if (!(slash = strrchr(dir, '/')) || slash == dir)
			break;
		*slash = '\0';
	}
	return lowest;
}

uint64_t tf_memory_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	uint64_t mem = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0, lim;
	char line[PATH_MAX], *dir;
	FILE *f = fopen("/proc/self/cgroup", "re");

	/* Lines "ID:CONTROLLERS:PATH": v2's is "0::PATH", v1's memory
	 * controller "N:memory:PATH" (an unlimited v1 group says ~2^63). */
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		lim = 0;
		if (!strncmp(line, "0::/", 4))
			lim = cgroup_limit("/sys/fs/cgroup", "memory.max", line + 3);
		else if ((dir = strstr(line, ":memory:/")))
			lim = cgroup_limit("/sys/fs/cgroup/memory", "memory.limit_in_bytes", dir + 8);
		if (lim && (!mem || lim < mem))
			mem = lim;
	}
	if (f)
		fclose(f);
	return mem;
}

/* A size as a person writes it: 64K, 1M, 23.5G. */
static const char *human_size(uint64_t v, char *buf, size_t n)
{
	if (v >= (uint64_t)1 << 30)
		snprintf(buf, n, "%.1fG", (double)v / (double)((uint64_t)1 << 30));
	else if (v >= (uint64_t)1 << 20)
		snprintf(buf, n, "%lluM", (unsigned long long)(v >> 20));
	else
		snprintf(buf, n, "%lluK", (unsigned long long)(v >> 10));
	return buf;
}

tf_status tf_parse_budget(const char *name, const char *text, uint64_t min, uint64_t *out, tf_error *err)
{
	uint64_t v, mem = tf_memory_bytes();
	char h[32];

	if (!tf_parse_size(text, &v))
		return tf_err(err, TF_E_INVAL, "%s: bad size '%s' (e.g. 256M)", name, text);
	if (v < min)
		return tf_err(err, TF_E_INVAL, "%s: %s is less than the least it works with, %s", name, text,
			      human_size(min, h, sizeof(h)));
	if (mem && v > mem)
		return tf_err(err, TF_E_INVAL, "%s: %s is more than this machine's memory, %s (%llu bytes)", name,
			      text, human_size(mem, h, sizeof(h)), (unsigned long long)mem);
	*out = v;
	return TF_OK;
}
