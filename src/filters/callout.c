/*
 * callout.c - calls into plugin code that the caller can stop waiting for
 * (callout.h has the contract).
 */
#include "config.h"

#include "callout.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

typedef struct worker worker;

/* One call, on its caller's stack: no worker touches it once its caller
 * has stopped waiting (the worker keeps fn, drop and job itself). */
typedef struct call {
	tf_callout_fn fn, drop;
	void *job;
	enum { QUEUED, RUNNING, DONE } state;
	worker *runner;
	struct call *next;
} call;

struct worker {
	pthread_t thread;
	tf_callout *c;
	bool busy;		/* inside fn */
	bool abandoned;		/* its caller stopped waiting: drop the job after fn */
	bool detached;		/* left to finish alone by tf_callout_free */
};

struct tf_callout {
	pthread_mutex_t lock;	/* over everything below */
	pthread_cond_t work;	/* to workers: a call queued, or stopped */
	pthread_cond_t done;	/* to callers: a call done, or stopped */
	call *head, *tail;	/* queued, in arrival order */
	size_t queued, idle;
	worker **w;
	size_t nw, max;
	bool stopped;
	unsigned refs;		/* tf_callout_free's own, and one per detached worker */
};

#define ABANDONED "the plugin call was abandoned: tilefs is stopping"

static void destroy(tf_callout *c)
{
	for (size_t i = 0; i < c->nw; i++)
		free(c->w[i]);
	free(c->w);
	pthread_cond_destroy(&c->done);
	pthread_cond_destroy(&c->work);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

tf_status tf_callout_new(unsigned max_threads, tf_callout **out, tf_error *err)
{
	tf_callout *c = calloc(1, sizeof(*c));

	if (!c)
		return tf_err(err, TF_E_NOMEM, "out of memory");
	if (pthread_mutex_init(&c->lock, NULL) != 0) {
		free(c);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	if (pthread_cond_init(&c->work, NULL) != 0 || pthread_cond_init(&c->done, NULL) != 0) {
		pthread_mutex_destroy(&c->lock);	/* (a failed init leaves nothing to destroy) */
		free(c);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	c->max = max_threads ? max_threads : 1;
	c->refs = 1;
	*out = c;
	return TF_OK;
}

static void *work(void *arg)
{
	worker *w = arg;
	tf_callout *c = w->c;
	bool last = false;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		tf_callout_fn fn, drop;
		void *job;
		call *k;

		c->idle++;
		while (!c->head && !c->stopped)
			pthread_cond_wait(&c->work, &c->lock);
		c->idle--;
		if (c->stopped)
			break;	/* calls still queued: their callers drop them */
		k = c->head;
		if (!(c->head = k->next))
			c->tail = NULL;
		c->queued--;
		k->state = RUNNING;
		k->runner = w;
		w->busy = true;
		fn = k->fn, drop = k->drop, job = k->job;
		pthread_mutex_unlock(&c->lock);
		fn(job);
		pthread_mutex_lock(&c->lock);
		w->busy = false;
		if (w->abandoned) {	/* k went with its caller; the job is ours */
			w->abandoned = false;
			pthread_mutex_unlock(&c->lock);
			drop(job);
			pthread_mutex_lock(&c->lock);
		} else {
			k->state = DONE;
			pthread_cond_broadcast(&c->done);
		}
	}
	if (w->detached)
		last = --c->refs == 0;
	pthread_mutex_unlock(&c->lock);
	if (last)
		destroy(c);	/* (w with it) */
	return NULL;
}

/* With c->lock held.  The thread blocks every signal: they are the
 * program's (libfuse's handlers), and a plugin may sleep in pause(). */
static tf_status start_worker(tf_callout *c, tf_error *err)
{
	worker **v = realloc(c->w, (c->nw + 1) * sizeof(*v));
	worker *w = calloc(1, sizeof(*w));
	sigset_t all, old;
	int e;

	if (v)
		c->w = v;
	if (!v || !w) {
		free(w);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	w->c = c;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	e = pthread_create(&w->thread, NULL, work, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		free(w);
		return tf_err(err, TF_E_NOMEM, "cannot start a plugin thread: %s", strerror(e));
	}
	c->w[c->nw++] = w;
	return TF_OK;
}

static void unqueue(tf_callout *c, call *k)
{
	call **at = &c->head, *prev = NULL;

	while (*at != k) {
		prev = *at;
		at = &(*at)->next;
	}
	*at = k->next;
	if (c->tail == k)
		c->tail = prev;
	c->queued--;
}

tf_status tf_callout_run(tf_callout *c, tf_callout_fn fn, tf_callout_fn drop, void *job,
			 tf_error *err)
{
	call k = { fn, drop, job, QUEUED, NULL, NULL };
	tf_status rc;

	pthread_mutex_lock(&c->lock);
	if (c->stopped) {
		pthread_mutex_unlock(&c->lock);
		drop(job);
		return tf_err(err, TF_E_IO, ABANDONED);
	}
	/* A thread more if every one is busy (one that cannot start is no
	 * error while another will take the call). */
	if (c->queued >= c->idle && c->nw < c->max && (rc = start_worker(c, err)) != TF_OK && !c->nw) {
		pthread_mutex_unlock(&c->lock);
		drop(job);
		return rc;
	}
	if (c->tail)
		c->tail->next = &k;
	else
		c->head = &k;
	c->tail = &k;
	c->queued++;
	pthread_cond_signal(&c->work);
	while (k.state != DONE && !c->stopped)
		pthread_cond_wait(&c->done, &c->lock);
	if (k.state == DONE) {
		pthread_mutex_unlock(&c->lock);
		return TF_OK;
	}
	if (k.state == QUEUED) {
		unqueue(c, &k);
		pthread_mutex_unlock(&c->lock);
		drop(job);
	} else {
		k.runner->abandoned = true;	/* its worker drops the job when fn returns */
		pthread_mutex_unlock(&c->lock);
	}
	return tf_err(err, TF_E_IO, ABANDONED);
}

void tf_callout_stop(tf_callout *c)
{
	pthread_mutex_lock(&c->lock);
	c->stopped = true;
	pthread_cond_broadcast(&c->work);
	pthread_cond_broadcast(&c->done);
	pthread_mutex_unlock(&c->lock);
}

bool tf_callout_free(tf_callout *c)
{
	bool clean = true, last;

	if (!c)
		return true;
	pthread_mutex_lock(&c->lock);
	c->stopped = true;
	pthread_cond_broadcast(&c->work);
	pthread_cond_broadcast(&c->done);
	for (size_t i = 0; i < c->nw; i++)
		if (c->w[i]->busy) {	/* in plugin code: it may never come back */
			c->w[i]->detached = true;
			c->refs++;
			pthread_detach(c->w[i]->thread);
			clean = false;
		}
	pthread_mutex_unlock(&c->lock);
	/* Only this thread sets detached, and the rest exit now: no lock. */
	for (size_t i = 0; i < c->nw; i++)
		if (!c->w[i]->detached)
			pthread_join(c->w[i]->thread, NULL);
	pthread_mutex_lock(&c->lock);
	last = --c->refs == 0;
	pthread_mutex_unlock(&c->lock);
	if (last)
		destroy(c);
	return clean;
}
