/* fuzz_fuse_req.c - libFuzzer target: the FUSE request decoder
 * (fsrv/proto.c, fsrv_msg_decode) on hostile bytes from /dev/fuse.  What
 * it accepts must be what the handlers may rely on: every name ends inside
 * the request, a write's data and a batch of forgets lie inside it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fsrv/fsrv_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
inside(const uint8_t *buf, size_t size, const void *p, size_t len)
{
	const uint8_t *q = p;

	if (q < buf || q > buf + size || len > (size_t)(buf + size - q))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fsrv_msg m;
	uint8_t *buf = malloc(size ? size : 1);	/* aligned, as the server's buffer is */
	int r;

	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	r = fsrv_msg_decode(buf, size, &m);
	if (r == 0) {
		if (!m.known || m.h.len != size)
			abort();
		if (m.name != NULL)
			inside(buf, size, m.name, strlen(m.name) + 1);
		if (m.name2 != NULL)
			inside(buf, size, m.name2, strlen(m.name2) + 1);
		if (m.data != NULL)
			inside(buf, size, m.data, m.datalen);
		if (m.h.opcode == FUSE_WRITE && m.datalen != m.a.write.size)
			abort();
		if (m.h.opcode == FUSE_BATCH_FORGET &&
		    m.datalen != (size_t)m.a.forgets.count * sizeof(struct fuse_forget_one))
			abort();
	} else if (r != -1 && r != EIO && r != ENOSYS) {
		abort();
	}
	free(buf);
	return 0;
}
