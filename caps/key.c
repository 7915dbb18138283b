/*
 * key.c - Ed25519 signing keys and the keyring that verifies with several
 * keys while signing with one (rotation).
 *
 * Runs in the broker and capctl.  Secret keys live in libsodium guarded
 * memory (sodium_malloc: guard pages, mlock, canary) kept PROT_NONE except
 * for the instant of a signature, and are wiped on free.  Key files are
 * refused unless private to their owner.
 */
#include "caps/caps.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CAP_KEYFILE_MAGIC "capbroker-ed25519-secret-v1\n"
#define CAP_KEYFILE_MAX 256

/*
 * A secret key's page is PROT_NONE except while it is used.  Two threads
 * signing at once (the broker's loop minting a token while the audit writer
 * seals a checkpoint) would each flip the protection under the other, so
 * every window in which a secret is readable is taken under this lock.
 */
static pthread_mutex_t cap_sk_lock = PTHREAD_MUTEX_INITIALIZER;

struct cap_key {
	uint8_t pk[crypto_sign_PUBLICKEYBYTES];
	uint8_t kid[CAP_KID_LEN];
	unsigned char *sk;	/* sodium_malloc, PROT_NONE when idle */
};

struct cap_keyring_entry {
	uint8_t kid[CAP_KID_LEN];
	uint8_t pk[crypto_sign_PUBLICKEYBYTES];
	bool retired;
	struct cap_key *key;	/* NULL for verify-only keys */
};

struct cap_keyring {
	struct cap_keyring_entry *e;
	size_t n;
	ssize_t signer;		/* index into e, -1 if none */
};

static int
cap_sodium_init(void)
{
	return sodium_init() < 0 ? CB_EINTERNAL : 0;
}

void
cap_kid_of(const uint8_t pk[32], uint8_t kid[CAP_KID_LEN])
{
	static const char ctx[] = "capbroker key id v1";
	crypto_generichash_state st;

	crypto_generichash_init(&st, NULL, 0, CAP_KID_LEN);
	crypto_generichash_update(&st, (const unsigned char *)ctx, sizeof(ctx));
	crypto_generichash_update(&st, pk, 32);
	crypto_generichash_final(&st, kid, CAP_KID_LEN);
}

static int
cap_key_alloc(struct cap_key **out)
{
	struct cap_key *k;
	int r;

	*out = NULL;
	if ((r = cap_sodium_init()) != 0)
		return r;
	if (!(k = calloc(1, sizeof(*k))))
		return CB_ENOMEM;
	if (!(k->sk = sodium_malloc(crypto_sign_SECRETKEYBYTES))) {
		free(k);
		return CB_ENOMEM;
	}
	*out = k;
	return 0;
}

static void
cap_key_finish(struct cap_key *k)
{
	cap_kid_of(k->pk, k->kid);
	sodium_mprotect_noaccess(k->sk);
}

int
cap_key_generate(struct cap_key **out)
{
	struct cap_key *k;
	int r;

	if ((r = cap_key_alloc(&k)) != 0)
		return r;
	crypto_sign_keypair(k->pk, k->sk);
	cap_key_finish(k);
	*out = k;
	return 0;
}

int
cap_key_from_seed(const uint8_t seed[32], struct cap_key **out)
{
	struct cap_key *k;
	int r;

	if ((r = cap_key_alloc(&k)) != 0)
		return r;
	crypto_sign_seed_keypair(k->pk, k->sk, seed);
	cap_key_finish(k);
	*out = k;
	return 0;
}

void
cap_key_free(struct cap_key *k)
{
	if (!k)
		return;
	sodium_free(k->sk);	/* wipes */
	free(k);
}

void
cap_key_id(const struct cap_key *k, uint8_t kid[CAP_KID_LEN])
{
	memcpy(kid, k->kid, CAP_KID_LEN);
}

void
cap_key_public(const struct cap_key *k, uint8_t pk[32])
{
	memcpy(pk, k->pk, 32);
}

static int
cap_fsync_dir(const char *path)
{
	char *copy = strdup(path);
	int fd, r = 0;

	if (!copy)
		return CB_ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) != 0)
		r = CB_EIO;
	if (fd >= 0)
		close(fd);
	free(copy);
	return r;
}

int
cap_key_save(const struct cap_key *k, const char *path)
{
	const size_t b64len = sodium_base64_ENCODED_LEN(32,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	const size_t magiclen = sizeof(CAP_KEYFILE_MAGIC) - 1;
	unsigned char *seed = NULL;
	char *text = NULL;
	size_t len;
	ssize_t w;
	int fd = -1, r = CB_EIO;

	seed = sodium_malloc(32);
	text = sodium_malloc(magiclen + b64len + 1);
	if (!seed || !text) {
		r = CB_ENOMEM;
		goto out;
	}
	pthread_mutex_lock(&cap_sk_lock);
	sodium_mprotect_readonly(k->sk);
	crypto_sign_ed25519_sk_to_seed(seed, k->sk);
	sodium_mprotect_noaccess(k->sk);
	pthread_mutex_unlock(&cap_sk_lock);
	memcpy(text, CAP_KEYFILE_MAGIC, magiclen);
	sodium_bin2base64(text + magiclen, b64len, seed, 32,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	len = strlen(text);
	text[len++] = '\n';
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = errno == EEXIST ? CB_EEXIST : CB_EIO;
		goto out;
	}
	/* The umask could have narrowed but never widened 0600; be explicit. */
	if (fchmod(fd, 0600) != 0)
		goto out;
	w = write(fd, text, len);
	if (w < 0 || (size_t)w != len || fsync(fd) != 0)
		goto out;
	r = cap_fsync_dir(path);
out:
	if (fd >= 0)
		close(fd);
	if (r != 0 && fd >= 0)
		unlink(path);
	sodium_free(seed);
	sodium_free(text);
	return r;
}

int
cap_key_load(const char *path, struct cap_key **out)
{
	const size_t magiclen = sizeof(CAP_KEYFILE_MAGIC) - 1;
	struct cap_key *k = NULL;
	unsigned char *seed = NULL;
	char *text = NULL;
	struct stat st;
	size_t binlen;
	const char *end;
	ssize_t n;
	int fd = -1, r;

	*out = NULL;
	if ((r = cap_sodium_init()) != 0)
		return r;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = errno == ENOENT ? CB_ENOENT : CB_EIO;
		goto out;
	}
	if (fstat(fd, &st) != 0) {
		r = CB_EIO;
		goto out;
	}
	/* A secret key anyone else could read is no longer secret. */
	if (!S_ISREG(st.st_mode) || (st.st_mode & 077) != 0 || st.st_uid != geteuid()) {
		r = CB_EKEY_MODE;
		goto out;
	}
	seed = sodium_malloc(32);
	text = sodium_malloc(CAP_KEYFILE_MAX + 1);
	if (!seed || !text) {
		r = CB_ENOMEM;
		goto out;
	}
	n = read(fd, text, CAP_KEYFILE_MAX + 1);
	if (n < 0) {
		r = CB_EIO;
		goto out;
	}
	if (n > CAP_KEYFILE_MAX || (size_t)n < magiclen ||
	    memcmp(text, CAP_KEYFILE_MAGIC, magiclen) != 0) {
		r = CB_EKEY_FORMAT;
		goto out;
	}
	text[n] = '\0';
	if (sodium_base642bin(seed, 32, text + magiclen, (size_t)n - magiclen, "\n",
		&binlen, &end, sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
	    binlen != 32 || *end != '\0') {
		r = CB_EKEY_FORMAT;
		goto out;
	}
	if ((r = cap_key_from_seed(seed, &k)) != 0)
		goto out;
	*out = k;
out:
	if (fd >= 0)
		close(fd);
	sodium_free(seed);
	sodium_free(text);
	return r;
}

/* ---- keyring ---------------------------------------------------------- */

int
cap_keyring_new(struct cap_keyring **out)
{
	struct cap_keyring *kr;
	int r;

	*out = NULL;
	if ((r = cap_sodium_init()) != 0)
		return r;
	if (!(kr = calloc(1, sizeof(*kr))))
		return CB_ENOMEM;
	kr->signer = -1;
	*out = kr;
	return 0;
}

void
cap_keyring_free(struct cap_keyring *kr)
{
	if (!kr)
		return;
	for (size_t i = 0; i < kr->n; i++)
		cap_key_free(kr->e[i].key);
	free(kr->e);
	free(kr);
}

static struct cap_keyring_entry *
cap_keyring_find(const struct cap_keyring *kr, const uint8_t kid[CAP_KID_LEN])
{
	for (size_t i = 0; i < kr->n; i++)
		if (memcmp(kr->e[i].kid, kid, CAP_KID_LEN) == 0)
			return &kr->e[i];
	return NULL;
}

static int
cap_keyring_push(struct cap_keyring *kr, const uint8_t pk[32], struct cap_key *k,
    struct cap_keyring_entry **out)
{
	struct cap_keyring_entry *e;
	uint8_t kid[CAP_KID_LEN];

	cap_kid_of(pk, kid);
	if ((e = cap_keyring_find(kr, kid)) != NULL) {
		if (!e->key && k) {	/* upgrade a public entry */
			e->key = k;
			*out = e;
			return 0;
		}
		return CB_EEXIST;
	}
	if (!(e = reallocarray(kr->e, kr->n + 1, sizeof(*e))))
		return CB_ENOMEM;
	kr->e = e;
	e = &kr->e[kr->n++];
	memset(e, 0, sizeof(*e));
	memcpy(e->kid, kid, CAP_KID_LEN);
	memcpy(e->pk, pk, 32);
	e->key = k;
	*out = e;
	return 0;
}

int
cap_keyring_add(struct cap_keyring *kr, struct cap_key *k, bool signing)
{
	struct cap_keyring_entry *e;
	int r;

	if ((r = cap_keyring_push(kr, k->pk, k, &e)) != 0) {
		cap_key_free(k);
		return r;
	}
	if (signing) {
		if (e->retired) {
			e->retired = false;
		}
		kr->signer = e - kr->e;
	}
	return 0;
}

int
cap_keyring_add_public(struct cap_keyring *kr, const uint8_t pk[32])
{
	struct cap_keyring_entry *e;

	return cap_keyring_push(kr, pk, NULL, &e);
}

int
cap_keyring_retire(struct cap_keyring *kr, const uint8_t kid[CAP_KID_LEN])
{
	struct cap_keyring_entry *e = cap_keyring_find(kr, kid);

	if (!e)
		return CB_EUNKNOWNKEY;
	if (kr->signer >= 0 && &kr->e[kr->signer] == e)
		return CB_EBUSY;
	e->retired = true;
	return 0;
}

int
cap_keyring_signer(const struct cap_keyring *kr, uint8_t kid[CAP_KID_LEN])
{
	if (kr->signer < 0)
		return CB_ENOENT;
	memcpy(kid, kr->e[kr->signer].kid, CAP_KID_LEN);
	return 0;
}

int
cap_keyring_public(const struct cap_keyring *kr, const uint8_t kid[CAP_KID_LEN], uint8_t pk[32])
{
	const struct cap_keyring_entry *e = cap_keyring_find(kr, kid);

	if (!e)
		return CB_EUNKNOWNKEY;
	if (e->retired)
		return CB_ERETIRED;
	memcpy(pk, e->pk, 32);
	return 0;
}

/* domain || 0x00 || msg: a signature over one kind of message can never be
 * replayed as another (token vs audit checkpoint). */
static int
cap_domain_msg(const char *domain, const uint8_t *msg, size_t len, uint8_t **out, size_t *outlen)
{
	size_t dl = strlen(domain);
	uint8_t *m;

	if (len > SIZE_MAX - dl - 1)
		return CB_ETOOBIG;
	if (!(m = malloc(dl + 1 + len)))
		return CB_ENOMEM;
	memcpy(m, domain, dl);
	m[dl] = 0;
	if (len)
		memcpy(m + dl + 1, msg, len);
	*out = m;
	*outlen = dl + 1 + len;
	return 0;
}

int
cap_sign(const struct cap_keyring *kr, const char *domain, const uint8_t *msg, size_t len,
    uint8_t sig[64], uint8_t kid[CAP_KID_LEN])
{
	const struct cap_keyring_entry *e;
	uint8_t *m = NULL;
	size_t mlen;
	int r;

	if (kr->signer < 0)
		return CB_ENOENT;
	e = &kr->e[kr->signer];
	if ((r = cap_domain_msg(domain, msg, len, &m, &mlen)) != 0)
		return r;
	pthread_mutex_lock(&cap_sk_lock);
	sodium_mprotect_readonly(e->key->sk);
	if (crypto_sign_detached(sig, NULL, m, mlen, e->key->sk) != 0)
		r = CB_EINTERNAL;
	sodium_mprotect_noaccess(e->key->sk);
	pthread_mutex_unlock(&cap_sk_lock);
	memcpy(kid, e->kid, CAP_KID_LEN);
	free(m);
	return r;
}

int
cap_verify(const struct cap_keyring *kr, const uint8_t kid[CAP_KID_LEN], const char *domain,
    const uint8_t *msg, size_t len, const uint8_t sig[64])
{
	const struct cap_keyring_entry *e = cap_keyring_find(kr, kid);
	uint8_t *m = NULL;
	size_t mlen;
	int r;

	if (!e)
		return CB_EUNKNOWNKEY;
	if (e->retired)
		return CB_ERETIRED;
	if ((r = cap_domain_msg(domain, msg, len, &m, &mlen)) != 0)
		return r;
	r = crypto_sign_verify_detached(sig, m, mlen, e->pk) == 0 ? 0 : CB_EBADSIG;
	free(m);
	return r;
}
