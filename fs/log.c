/*
 * log.c - the driver's log: stderr in the foreground, syslog otherwise.
 * Decode failures are rate-limited: a corrupt chunk read in a loop must
 * not flood the log, but the first failure of each chunk is always seen.
 */
#include "tilefs.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#define BURST 10		/* failure lines per window */
#define WINDOW_SECONDS 10
#define RECENT 16		/* distinct messages remembered */
#define RECENT_SECONDS 60

static struct {
	pthread_mutex_t lock;
	bool foreground;
	atomic_int level;		/* tf_log_level; a reload may change it */
	time_t window_start;
	unsigned in_window;
	unsigned long suppressed;
	struct { char msg[200]; time_t when; } recent[RECENT];
	unsigned next_recent;
} L = { PTHREAD_MUTEX_INITIALIZER, true, TF_LOG_INFO };

void fs_log_init(bool foreground, tf_log_level level)
{
	L.foreground = foreground;
	atomic_store(&L.level, (int)level);
	if (!foreground)
		openlog("tilefs", LOG_PID, LOG_DAEMON);
}

void fs_log_set_level(tf_log_level level)
{
	atomic_store(&L.level, (int)level);
}

static void emit(tf_log_level level, const char *msg)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };

	if (L.foreground)
		fprintf(stderr, "tilefs: %s\n", msg);
	else
		syslog(prio[level], "%s", msg);
}

void fs_log(tf_log_level level, const char *fmt, ...)
{
	char msg[TF_ERRMSG_MAX + 64];
	va_list ap;

	if ((int)level > atomic_load_explicit(&L.level, memory_order_relaxed))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	emit(level, msg);
}

/* Seen within the last minute?  Remember it otherwise (lock held). */
static bool seen_recently(const char *msg, time_t now)
{
	for (unsigned i = 0; i < RECENT; i++)
		if (now - L.recent[i].when < RECENT_SECONDS &&
		    !strncmp(L.recent[i].msg, msg, sizeof(L.recent[i].msg) - 1))
			return true;
	snprintf(L.recent[L.next_recent].msg, sizeof(L.recent[0].msg), "%s", msg);
	L.recent[L.next_recent].when = now;
	L.next_recent = (L.next_recent + 1) % RECENT;
	return false;
}

void fs_log_failure(const char *msg)
{
	time_t now = time(NULL);
	unsigned long dropped = 0;
	bool show;

	pthread_mutex_lock(&L.lock);
	if (now - L.window_start >= WINDOW_SECONDS) {
		dropped = L.suppressed;
		L.suppressed = 0;
		L.window_start = now;
		L.in_window = 0;
	}
	show = !seen_recently(msg, now) && L.in_window < BURST;
	if (show)
		L.in_window++;
	else
		L.suppressed++;
	pthread_mutex_unlock(&L.lock);
	if (dropped)
		fs_log(TF_LOG_ERROR, "(%lu similar decode errors not logged)", dropped);
	if (show)
		fs_log(TF_LOG_ERROR, "%s", msg);
}

void fs_log_hook(void *ctx, tf_log_level level, const char *msg)
{
	(void)ctx;
	fs_log(level, "%s", msg);
}
