/*
 * follow.c - tail the audit log for `capctl audit --follow`: hands out
 * complete lines in order as the broker writes them.  Runs in capctl (an
 * administrator's process); the file is read-only here and lines are
 * bounded (AUD_LINE_MAX).  Uses inotify to sleep until the file changes.
 */
#include "audit/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

struct aud_follow {
	int fd;
	int ino;
	char *buf;
	size_t cap, start, end;
};

int
aud_follow_open(const char *path, bool from_start, struct aud_follow **out)
{
	struct aud_follow *f;
	int rc = CB_EIO;

	*out = NULL;
	if ((f = calloc(1, sizeof(*f))) == NULL)
		return CB_ENOMEM;
	f->fd = f->ino = -1;
	f->cap = 2 * AUD_LINE_MAX;
	if ((f->buf = malloc(f->cap)) == NULL) {
		rc = CB_ENOMEM;
		goto out;
	}
	if ((f->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		rc = errno == ENOENT ? CB_ENOENT : CB_EIO;
		goto out;
	}
	if ((f->ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0 ||
	    inotify_add_watch(f->ino, path, IN_MODIFY) < 0)
		goto out;
	/* starting at the end: skip to just past the last complete line */
	if (!from_start) {
		off_t end = lseek(f->fd, 0, SEEK_END), pos;
		char c;

		for (pos = end; pos > 0; pos--) {
			if (pread(f->fd, &c, 1, pos - 1) != 1)
				goto out;
			if (c == '\n')
				break;
		}
		if (lseek(f->fd, pos, SEEK_SET) < 0)
			goto out;
	}
	*out = f;
	f = NULL;
	rc = 0;
out:
	aud_follow_free(f);
	return rc;
}

int
aud_follow_next(struct aud_follow *f, int timeout_ms, const char **line, size_t *len)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX :
	    cb_mono_ns() + (uint64_t)timeout_ms * 1000000u;

	for (;;) {
		char *nl = memchr(f->buf + f->start, '\n', f->end - f->start);
		char ev[4096];
		struct pollfd pfd;
		ssize_t n;
		uint64_t now;

		if (nl != NULL) {
			*line = f->buf + f->start;
			*len = (size_t)(nl - *line);
			f->start += *len + 1;
			return 0;
		}
		if (f->start > 0) {
			memmove(f->buf, f->buf + f->start, f->end - f->start);
			f->end -= f->start;
			f->start = 0;
		}
		if (f->end == f->cap)
			return CB_ETOOBIG;
		n = read(f->fd, f->buf + f->end, f->cap - f->end);
		if (n < 0 && errno != EINTR)
			return CB_EIO;
		if (n > 0) {
			f->end += (size_t)n;
			continue;
		}
		/* nothing new: sleep until the file changes or time runs out */
		now = cb_mono_ns();
		if (now >= deadline)
			return CB_ETIMEDOUT;
		pfd.fd = f->ino;
		pfd.events = POLLIN;
		n = poll(&pfd, 1, deadline == UINT64_MAX ? -1 :
		    (int)((deadline - now + 999999) / 1000000));
		if (n < 0 && errno != EINTR)
			return CB_EIO;
		while (read(f->ino, ev, sizeof(ev)) > 0)
			;
	}
}

int
aud_follow_fd(const struct aud_follow *f)
{
	return f->ino;
}

void
aud_follow_free(struct aud_follow *f)
{
	if (f == NULL)
		return;
	if (f->fd >= 0)
		close(f->fd);
	if (f->ino >= 0)
		close(f->ino);
	free(f->buf);
	free(f);
}
