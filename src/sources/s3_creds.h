/*
 * s3_creds.h - AWS profile files (private to the S3 source; the chain
 * that uses them is s3_auth.h).
 *
 * A profile's section of ~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE),
 * its [profile NAME] (or [default]) section of ~/.aws/config
 * (AWS_CONFIG_FILE), or of the [s3] credentials = FILE.
 * Files are parsed with inih; a value longer than inih's line is kept
 * whole (session tokens run to a kilobyte or more).  A credentials file
 * that group or others can read, or a config file holding a secret that
 * they can read, is refused, as key files are.  Secrets are wiped when
 * freed and never appear in a message.
 */
#ifndef S3_CREDS_H
#define S3_CREDS_H

#include <stdbool.h>

#include "config/tf_s3.h"
#include "util/tf_status.h"

typedef struct s3_creds {
	char *access_key;	/* may contain ':' (Swift's account:user) */
	char *secret;
	char *token;		/* session token or NULL */
	char *region;		/* the profile's region from the config file, or NULL */
	char *origin;		/* where they came from, for messages ("environment", a path) */
	/* A profile's other ways to credentials (none secret): */
	char *process;		/* credential_process, from a file only its owner (or root) can write */
	char *role_arn, *source_profile, *session_name, *external_id, *web_token_file, *credential_source;
} s3_creds;

/* $VAR, else $HOME/.aws/NAME (malloc'd); NULL when neither is known. */
char *s3_aws_file(const char *var, const char *name);

/*
 * One profile of one file: credentials format ([NAME]) or, with
 * S3_CF_CONFIG, config format ([profile NAME], [default]).  *found tells
 * whether the section exists.  S3_CF_MUST_EXIST: a missing file is an
 * error; S3_CF_NO_SECRETS: keys and tokens are skipped (only the region
 * is wanted), so a readable file holding them is not refused, and a file
 * that cannot be opened (a link loop, a directory) has no region.
 * Symlinks are followed; the target's mode is the one checked.  A
 * credential_process (a command tilefs will run) is refused from a file
 * that group or others can write, or that another user than the caller
 * or root owns.
 */
enum { S3_CF_CONFIG = 1, S3_CF_MUST_EXIST = 2, S3_CF_NO_SECRETS = 4 };
tf_status s3_creds_read_file(const char *path, const char *profile, int flags, s3_creds *out,
			     bool *found, tf_error *err);

void s3_creds_free(s3_creds *c);

#endif
