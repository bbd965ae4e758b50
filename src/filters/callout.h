/*
 * callout.h - calls into plugin code that the caller can stop waiting for.
 *
 * A plugin may never return (Debian's libh5bz2.so loops for ever on a
 * truncated bzip2 stream).  A thread stuck in plugin code can be neither
 * cancelled nor joined, and a daemon that joins its threads on the way
 * out (libfuse joins its workers, the cache its decoders) would never
 * exit.  So plugin code runs on a callout's own threads, and the caller
 * waits for the result until tf_callout_stop(): then every waiting caller
 * is released at once with TF_E_IO, and later calls fail the same way.
 *
 * A job must own everything the plugin code touches (copies of the
 * caller's bytes, buffers of its own), since a stopped caller goes away
 * while the job may still run: the job then belongs to the callout, which
 * hands it to `drop` when the plugin code returns, if it ever does.  A
 * thread still inside plugin code when the callout is freed is abandoned
 * (detached): it frees the callout when it returns, and nothing its code
 * may touch (the plugin's code and data) may be unloaded meanwhile:
 * tf_callout_free says whether such a thread is left.
 *
 * Jobs run in arrival order, at most max_threads at a time; threads are
 * started as jobs need them and live until tf_callout_free.  Every
 * function is safe from any thread; no signal is delivered to a callout
 * thread.
 */
#ifndef TF_CALLOUT_H
#define TF_CALLOUT_H

#include <stdbool.h>

#include "util/tf_status.h"

typedef struct tf_callout tf_callout;
typedef void (*tf_callout_fn)(void *job);

tf_status tf_callout_new(unsigned max_threads, tf_callout **out, tf_error *err);

/* Run fn(job) on a callout thread and wait for it: TF_OK when it returned
 * (the job is the caller's again).  TF_E_IO when the callout was stopped
 * first (or cannot start a thread: TF_E_NOMEM): the job is no longer the
 * caller's, and drop(job) runs once fn returns (at once if it never
 * started). */
tf_status tf_callout_run(tf_callout *c, tf_callout_fn fn, tf_callout_fn drop, void *job,
			 tf_error *err);

/* Release every waiting caller and refuse every later call. */
void tf_callout_stop(tf_callout *c);

/* Stop, join the threads, free.  false: a thread is still inside plugin
 * code, abandoned (see the top); the caller must then keep everything that
 * code may use.  NULL is fine (true). */
bool tf_callout_free(tf_callout *c);

#endif
