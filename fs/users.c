/*
 * users.c - what each user holds open on the mount: no user's opens may
 * take the daemon from the others (allow_other).
 *
 * Descriptors are not what an open costs: the source's pool lends them
 * (source_local.c), so a user holding 1,014 opens of one file no longer
 * runs the daemon out.  Memory is: an open file costs a handle and a source
 * object (0.41 KiB per open of a decoded file, measured: RSS over 19,000
 * opens), and an open directory holds its whole listing (~200 bytes an
 * entry) until it is closed, so one user holding a million opens, or a
 * thousand opens of a directory of 100,000 entries (18 GiB), would take
 * the daemon's memory from everyone.  So each uid may hold at most
 * max_opens files and directories open at once (-o max_user_opens, default
 * 16,384: 7 MiB of handles) and list a directory only while its open
 * listings hold less than max_listing bytes (4 KiB per open allowed: 64
 * MiB by default; one listing beyond is allowed, so any directory can be
 * listed).  Beyond, that user's opens fail EMFILE and its listings ENOMEM,
 * and nobody else's: the mount's own work (views, indexing) and other
 * users are not counted.  The first refusal of each episode (until the user
 * holds nothing) is logged.  max_user_opens=0 bounds neither.
 */
#include "tilefs.h"

#include <errno.h>
#include <stdlib.h>

struct fs_user {
	uid_t uid;
	unsigned opens;			/* files and directories open */
	size_t listed;			/* bytes of its open directories' listings */
	bool warned;			/* this episode's refusal is logged */
	fs_user *next;
};

/* The entry of uid, made if absent (lock held); NULL: out of memory. */
static fs_user *user_of(fs_users *u, uid_t uid, bool make)
{
	fs_user **p = &u->bucket[uid % FS_USER_BUCKETS];

	for (; *p; p = &(*p)->next)
		if ((*p)->uid == uid)
			return *p;
	if (make && (*p = calloc(1, sizeof(**p))))
		(*p)->uid = uid;
	return *p;
}

/* Free uid's entry once it holds nothing (lock held). */
static void forget_idle(fs_users *u, fs_user *e)
{
	fs_user **p = &u->bucket[e->uid % FS_USER_BUCKETS];

	if (e->opens || e->listed)
		return;
	while (*p != e)
		p = &(*p)->next;
	*p = e->next;
	free(e);
}

static void refuse(fs_users *u, fs_user *e, const char *what)
{
	u->refused++;
	if (e->warned)
		return;
	e->warned = true;
	fs_log(TF_LOG_WARN, "uid %u holds %u open files and directories and %zu bytes of listings on "
	       "this mount: %s (-o max_user_opens=%u, %zu bytes of listings)", (unsigned)e->uid, e->opens,
	       e->listed, what, u->max_opens, u->max_listing);
}

int fs_user_open(tilefs *fs, uid_t uid)
{
	fs_users *u = &fs->users;
	fs_user *e;
	int rc = 0;

	pthread_mutex_lock(&u->lock);
	if (!(e = user_of(u, uid, true)))
		rc = ENOMEM;
	else if (u->max_opens && e->opens >= u->max_opens) {
		refuse(u, e, "its further opens get EMFILE");
		rc = EMFILE;
	} else {
		e->opens++;
		u->open_total++;
	}
	pthread_mutex_unlock(&u->lock);
	return rc;
}

size_t fs_users_open(tilefs *fs)
{
	size_t n;

	pthread_mutex_lock(&fs->users.lock);
	n = fs->users.open_total;
	pthread_mutex_unlock(&fs->users.lock);
	return n;
}

void fs_user_close(tilefs *fs, uid_t uid)
{
	fs_users *u = &fs->users;
	fs_user *e;

	pthread_mutex_lock(&u->lock);
	if ((e = user_of(u, uid, false))) {
		e->opens--;
		u->open_total--;
		forget_idle(u, e);
	}
	pthread_mutex_unlock(&u->lock);
}

int fs_user_may_list(tilefs *fs, uid_t uid, size_t mine)
{
	fs_users *u = &fs->users;
	fs_user *e;
	int rc = 0;

	pthread_mutex_lock(&u->lock);
	if ((e = user_of(u, uid, false)) && u->max_listing && e->listed - mine >= u->max_listing) {
		refuse(u, e, "its further listings get ENOMEM");
		rc = ENOMEM;
	}
	pthread_mutex_unlock(&u->lock);
	return rc;
}

void fs_user_listed(tilefs *fs, uid_t uid, size_t was, size_t now)
{
	fs_users *u = &fs->users;
	fs_user *e;

	pthread_mutex_lock(&u->lock);
	if ((e = user_of(u, uid, false))) {
		e->listed = e->listed - was + now;
		forget_idle(u, e);
	}
	pthread_mutex_unlock(&u->lock);
}

void fs_users_stats(tilefs *fs, size_t *users, uint64_t *refused)
{
	fs_users *u = &fs->users;

	pthread_mutex_lock(&u->lock);
	*users = 0;
	for (size_t i = 0; i < FS_USER_BUCKETS; i++)
		for (fs_user *e = u->bucket[i]; e; e = e->next)
			++*users;
	*refused = u->refused;
	pthread_mutex_unlock(&u->lock);
}

void fs_users_destroy(fs_users *u)
{
	for (size_t i = 0; i < FS_USER_BUCKETS; i++)
		while (u->bucket[i]) {
			fs_user *e = u->bucket[i];
			u->bucket[i] = e->next;
			free(e);
		}
}
