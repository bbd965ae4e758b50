/*
 * s3_creds.c - credentials from the environment and AWS profile files.
 */
#include "config.h"

#include "sources/s3_creds.h"

#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LONG_MARK "\001"	/* stands for a value kept aside by the reader */

typedef struct cparser {
	FILE *f;
	const char *path;
	char *section;		/* the wanted section's name */
	bool readable;		/* by group or others */
	bool unsafe;		/* writable by group or others, or another user's */
	bool no_secrets;
	bool found;
	s3_creds *out;
	char *long_value;	/* the value of the last over-long line */
	const char *fail;
	int line;
} cparser;

static void wipe_free(char *s)
{
	if (s) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

void s3_creds_free(s3_creds *c)
{
	wipe_free(c->access_key);
	wipe_free(c->secret);
	wipe_free(c->token);
	free(c->region), free(c->origin);
	free(c->process), free(c->role_arn), free(c->source_profile), free(c->session_name);
	free(c->external_id), free(c->web_token_file), free(c->credential_source);
	memset(c, 0, sizeof(*c));
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/* inih's line reader: a line too long for inih goes through as "name =
 * LONG_MARK" with its value kept in ps->long_value. */
static char *read_line(char *str, int num, void *stream)
{
	cparser *ps = stream;
	char *line = NULL, *eq;
	size_t cap = 0;
	ssize_t n = getline(&line, &cap, ps->f);

	if (n < 0) {
		free(line);
		return NULL;
	}
	ps->line++;
	if (n < num - 1 || !(eq = strchr(line, '=')) || line[0] == '[') {
		snprintf(str, (size_t)num, "%s", line);
		OPENSSL_cleanse(line, (size_t)n);
		free(line);
		return str;
	}
	*eq = '\0';
	wipe_free(ps->long_value);
	ps->long_value = strdup(trim(eq + 1));
	if (!ps->long_value || snprintf(str, (size_t)num, "%.100s = " LONG_MARK "\n", trim(line)) >= num)
		ps->fail = "out of memory";
	OPENSSL_cleanse(line, (size_t)n);
	free(line);
	return str;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
	cparser *ps = user;
	char **dst = NULL;
	bool secret = false;

	if (ps->fail || strcmp(section, ps->section))
		return 1;
	ps->found = true;
	if (!strcmp(value, LONG_MARK))
		value = ps->long_value ? ps->long_value : "";
	if (!strcmp(name, "aws_access_key_id"))
		dst = &ps->out->access_key;
	else if (!strcmp(name, "aws_secret_access_key"))
		dst = &ps->out->secret, secret = true;
	else if (!strcmp(name, "aws_session_token"))
		dst = &ps->out->token, secret = true;
	else if (!strcmp(name, "region"))
		dst = &ps->out->region;
	else if (!strcmp(name, "credential_process"))
		dst = &ps->out->process;
	else if (!strcmp(name, "role_arn"))
		dst = &ps->out->role_arn;
	else if (!strcmp(name, "source_profile"))
		dst = &ps->out->source_profile;
	else if (!strcmp(name, "role_session_name"))
		dst = &ps->out->session_name;
	else if (!strcmp(name, "external_id"))
		dst = &ps->out->external_id;
	else if (!strcmp(name, "web_identity_token_file"))
		dst = &ps->out->web_token_file;
	else if (!strcmp(name, "credential_source"))
		dst = &ps->out->credential_source;
	if (dst == &ps->out->process && ps->unsafe && !ps->no_secrets) {
		ps->fail = "credential_process in a file that group or others can write, or another user owns; "
			   "chmod go-w it";
		return 0;
	}
	if (!dst || (secret && ps->no_secrets) || (dst == &ps->out->access_key && ps->no_secrets))
		return 1;
	if (secret && ps->readable) {
		ps->fail = "readable by group or others";
		return 0;
	}
	wipe_free(*dst);
	if (!(*dst = strdup(value)))
		ps->fail = "out of memory";
	return 1;
}

/* Open path as a regular file (O_NONBLOCK until fstat says so: a FIFO
 * must not hang start-up), telling whether group or others can read it.
 * Symlinks are followed (dotfile managers link ~/.aws/config): the mode
 * that counts is that of the file opened. */
static int open_creds(const char *path, bool *readable, bool *unsafe, tf_error *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat sb;

	if (fd < 0)
		return errno == ENOENT ? -2 : (tf_err(err, TF_E_INVAL, "%s: %s", path, strerror(errno)), -1);
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || fcntl(fd, F_SETFL, 0) != 0) {
		close(fd);
		tf_err(err, TF_E_INVAL, "%s: not a regular file", path);
		return -1;
	}
	*readable = (sb.st_mode & (S_IRGRP | S_IROTH)) != 0;
	*unsafe = (sb.st_mode & (S_IWGRP | S_IWOTH)) || (sb.st_uid != getuid() && sb.st_uid != 0);
	return fd;
}

tf_status s3_creds_read_file(const char *path, const char *profile, int flags, s3_creds *out,
			     bool *found, tf_error *err)
{
	cparser ps = { .path = path, .out = out, .no_secrets = flags & S3_CF_NO_SECRETS };
	bool config_format = flags & S3_CF_CONFIG, must_exist = flags & S3_CF_MUST_EXIST;
	/* Only a region wanted: a file that cannot be read just has none. */
	bool region_only = ps.no_secrets && !must_exist;
	tf_error ignored;
	int fd, rc;

	*found = false;
	if ((fd = open_creds(path, &ps.readable, &ps.unsafe, region_only ? &ignored : err)) == -2)
		return must_exist ? tf_err(err, TF_E_INVAL, "%s: no such file", path) : TF_OK;
	if (fd < 0)
		return region_only ? TF_OK : TF_E_INVAL;
	/* A credentials file is secret as a whole; a config file only where it holds a secret. */
	if (!config_format && ps.readable) {
		close(fd);
		return tf_err(err, TF_E_INVAL, "%s: credentials file is readable by group or others; "
			      "chmod 600 it", path);
	}
	if (!(ps.f = fdopen(fd, "r")) ||
	    (config_format && strcmp(profile, "default") ? asprintf(&ps.section, "profile %s", profile)
							 : asprintf(&ps.section, "%s", profile)) < 0) {
		ps.f ? fclose(ps.f) : close(fd);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	rc = ini_parse_stream(read_line, &ps, on_key, &ps);
	fclose(ps.f);
	free(ps.section);
	wipe_free(ps.long_value);
	*found = ps.found;
	if (ps.fail)
		return tf_err(err, TF_E_INVAL, "%s: %s%s", path, ps.fail,
			      ps.readable && !strncmp(ps.fail, "readable", 8) ? " and holds a secret; chmod 600 it" : "");
	if (rc != 0)
		return tf_err(err, TF_E_INVAL, "%s:%d: syntax error", path, rc);
	return TF_OK;
}

char *s3_aws_file(const char *var, const char *name)
{
	const char *v = getenv(var), *home = getenv("HOME");
	char *p = NULL;

	if (v && *v)
		return strdup(v);
	if (home && *home && asprintf(&p, "%s/.aws/%s", home, name) < 0)
		return NULL;
	return p;
}
