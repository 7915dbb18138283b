/*
 * fuzz_audit.c - libFuzzer target: aud_verify on a hostile log file (the
 * strict line-prefix parser, the chain, checkpoint parsing and the
 * explanation of anomalies), and aud_parse_prefix on each line alone.
 * The keyring is derived from a fixed seed so the seed corpus (a genuine
 * log written with that key, tests/fuzz/corpus/fuzz_audit) has checkpoints
 * that verify.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>

#include "audit/audit.h"
#include "audit/audit_int.h"
#include "caps/caps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct cap_keyring *kr;

static void
setup(void)
{
	static const uint8_t seed[32] = { 'c', 'a', 'p', 'b', 'r', 'o', 'k', 'e', 'r', '-',
		'a', 'u', 'd', 'i', 't', '-', 'f', 'u', 'z', 'z' };
	struct cap_key *k = NULL;

	if (cap_keyring_new(&kr) != 0 || cap_key_from_seed(seed, &k) != 0 ||
	    cap_keyring_add(kr, k, true) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct aud_report rep;
	struct aud_head h;
	char path[64];
	size_t off = 0;
	int fd, rc;

	if (kr == NULL)
		setup();
	if (size > 1 << 20)
		return 0;
	for (off = 0; off < size;) {
		const uint8_t *nl = memchr(data + off, '\n', size - off);
		size_t len = nl != NULL ? (size_t)(nl - (data + off)) : size - off;
		struct aud_prefix p;

		if (len > 0 && aud_parse_prefix((const char *)data + off, len, &p) == 0) {
			uint8_t lid[AUD_LOG_ID_LEN], kid[CAP_KID_LEN], sig[64];

			if (p.rest < (const char *)data + off || p.rest + p.rest_len != (const char *)data + off + len)
				abort();	/* rest must stay inside the line */
			(void)aud_parse_checkpoint(&p, lid, kid, sig, NULL, NULL);
			(void)aud_parse_genesis(&p, lid);
		}
		off += len + 1;
	}
	if ((fd = memfd_create("fuzz_audit", MFD_CLOEXEC)) < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rc = aud_verify(path, kr, NULL, &rep);
	if (rc == 0 && (rep.lines < 2 || rep.checkpoints < 1))
		abort();	/* an accepted log always has its genesis seal */
	if (rc != 0 && rc != CB_EAUDIT)
		abort();
	if (memchr(rep.what, '\0', sizeof(rep.what)) == NULL)
		abort();
	/* and against a remembered head taken from the input itself */
	memset(&h, 0, sizeof(h));
	memcpy(h.log_id, rep.log_id, sizeof(h.log_id));
	h.seq = rep.last_checkpoint;
	(void)aud_verify(path, kr, &h, &rep);
	close(fd);
	return 0;
}
