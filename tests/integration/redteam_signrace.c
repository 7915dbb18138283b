/*
 * redteam_signrace.c - the root cause behind "the daemon dies of SIGSEGV
 * under a derive flood" (tests/integration/16-broker-redteam.sh), made
 * deterministic.  Trust domain: test helper, runs on the host.
 *
 * The broker signs on two threads with one keyring: tokens on the loop
 * thread (brk_tok_sign -> cap_token_issue -> cap_sign, no lock) and audit
 * checkpoints on the audit writer thread (st_sign_audit -> cap_sign, under
 * st->mu, which the loop thread does not take).  cap_sign makes the secret
 * key page readable, signs, and makes it PROT_NONE again: one thread's
 * "PROT_NONE again" lands inside the other's signature.
 *
 * This does exactly that, two threads, one keyring, the two domains the
 * broker uses.  Exit 0 when N signatures per thread all succeeded; a crash
 * (SIGSEGV) is the bug.  Usage: redteam_signrace [N]
 */
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>

#include "caps/caps.h"

static struct cap_keyring *kr;
static long n = 200000;

static void *
signer(void *arg)
{
	const char *domain = arg;
	uint8_t msg[56] = { 1 }, sig[64], kid[CAP_KID_LEN];

	for (long i = 0; i < n; i++) {
		msg[1] = (uint8_t)i;
		if (cap_sign(kr, domain, msg, sizeof(msg), sig, kid) != 0)
			return (void *)1;
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	struct cap_key *k = NULL;
	pthread_t a, b;
	void *ra, *rb;

	if (argc > 1)
		n = atol(argv[1]);
	if (sodium_init() < 0 || cap_keyring_new(&kr) != 0 || cap_key_generate(&k) != 0 ||
	    cap_keyring_add(kr, k, true) != 0) {
		fprintf(stderr, "setup failed\n");
		return 2;
	}
	pthread_create(&a, NULL, signer, (void *)"capbroker token v1");
	pthread_create(&b, NULL, signer, (void *)"capbroker audit checkpoint v1");
	pthread_join(a, &ra);
	pthread_join(b, &rb);
	printf("%ld signatures per thread: %s\n", n, ra || rb ? "a signature failed" : "ok");
	return ra || rb ? 1 : 0;
}
