/*
 * common.h - the one error convention and a few helpers shared by every
 * capbroker module.  Runs in every trust domain (broker, sandbox stub,
 * clients), so it holds nothing secret and allocates nothing.
 *
 * Every fallible function in the project returns int: 0 on success or a
 * negative CB_E* code from the enum below.  cb_strerror() turns a code into
 * a short message suitable for an audit line or a denial reason.
 */
#ifndef CB_COMMON_H
#define CB_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#define CB_WARN_UNUSED __attribute__((warn_unused_result))

enum cb_err {
	CB_OK = 0,
	/* generic */
	CB_ENOMEM = -1,		/* out of memory */
	CB_EINVAL = -2,		/* invalid argument */
	CB_EIO = -3,		/* I/O error (errno has detail) */
	CB_EPERM = -4,		/* permission denied */
	CB_ENOENT = -5,		/* no such file or object */
	CB_EEXIST = -6,		/* already exists */
	CB_ETOOBIG = -7,	/* input larger than the hard maximum */
	CB_EINTERNAL = -8,	/* a library call failed unexpectedly */
	CB_EBUSY = -9,		/* too many requests in flight */
	CB_ETIMEDOUT = -10,	/* operation timed out */
	CB_EUNSUPPORTED = -11,	/* not supported here */

	/* token text and body decoding */
	CB_ETOK_PREFIX = -20,	/* text does not start with "cap1." */
	CB_ETOK_BASE64 = -21,	/* invalid base64url */
	CB_ETOK_TOOBIG = -22,	/* token larger than CAP_TOKEN_MAX */
	CB_ETOK_VERSION = -23,	/* unknown token version */
	CB_ETOK_MISSING = -24,	/* a required field is missing */
	CB_ETOK_TYPE = -25,	/* a field has the wrong type or size */
	CB_ETOK_DUPKEY = -26,	/* a field appears twice */
	CB_ETOK_TRAILING = -27,	/* bytes after the body */
	CB_ETOK_UNKNOWN = -28,	/* unknown field */
	CB_ETOK_MALFORMED = -29, /* not a msgpack map / truncated */

	/* token verification: the reasons a denial can give */
	CB_EBADSIG = -40,	/* bad signature */
	CB_EUNKNOWNKEY = -41,	/* unknown key id */
	CB_EEXPIRED = -42,	/* expired */
	CB_ENOTYET = -43,	/* not yet valid */
	CB_EAUDIENCE = -44,	/* wrong audience */
	CB_EREVOKED = -45,	/* revoked */
	CB_ESPENT = -46,	/* use limit spent */
	CB_ENOTCOVERED = -47,	/* not covered by the token */
	CB_EPOLICY = -48,	/* exceeds policy */
	CB_ENOTOKEN = -49,	/* no token presented */
	CB_ENARROW = -50,	/* derived token would widen its parent */
	CB_ERETIRED = -51,	/* signing key retired */
	CB_EUNKNOWNTOK = -52,	/* token id unknown to this broker's state */

	/* capability grammar */
	CB_ECAP_OP = -60,	/* unknown operation */
	CB_ECAP_SYNTAX = -61,	/* not OP:RESOURCE */
	CB_ECAP_RELATIVE = -62,	/* path is not absolute */
	CB_ECAP_DOTDOT = -63,	/* path has a . or .. component */
	CB_ECAP_EMPTY = -64,	/* path has an empty component (// or trailing /) */
	CB_ECAP_NUL = -65,	/* embedded NUL or control character */
	CB_ECAP_HOST = -66,	/* malformed host, address or CIDR */
	CB_ECAP_PORT = -67,	/* malformed port */
	CB_ECAP_GLOB = -68,	/* malformed glob (e.g. ** inside a component) */
	CB_ECAP_TOOLONG = -69,	/* capability longer than CAP_STR_MAX */

	/* keys */
	CB_EKEY_MODE = -80,	/* key file readable by others */
	CB_EKEY_FORMAT = -81,	/* key file malformed */

	/* wire protocol */
	CB_EPROTO = -90,	/* malformed message */
	CB_EUNKNOWNOP = -91,	/* unknown request */
	CB_EAUDIT = -92,	/* audit log cannot be written (fail closed) */
	CB_EESCAPE = -93,	/* path would escape its root */
	CB_EFTYPE = -94,	/* refused file type (device, fifo, socket, dir) */
	CB_ENETBLOCKED = -95,	/* address in a never-reachable range */
	CB_EDENIED = -96,	/* denied by a human or by policy */
	CB_EEXPIREDREQ = -97,	/* elevation request expired undecided */
	CB_ECONNREFUSED = -98,	/* connection refused */
	CB_ERESOLVE = -99,	/* name did not resolve */
	CB_ERATE = -100,	/* sandbox over its request rate */
	CB_ECLOSED = -101,	/* peer closed the channel */
	CB_ECLUSTER = -102,	/* the cluster database is unreachable or the view stale (fail closed) */
	CB_ESTOPPING = -103,	/* the sandbox is stopping: nothing more is served */
};

/* Discard a result on purpose (best-effort calls); says so at the call. */
static inline void cb_ignore(int r) { (void)r; }

/* A short, static, human-readable message for a CB_E* code.  Never NULL. */
const char *cb_strerror(int err);

/* A stable lowercase identifier for a code ("expired", "bad-signature"...),
 * used in JSON output and the audit log.  Never NULL. */
const char *cb_errname(int err);

/* The longest ttl or duration anywhere (366 days): policy ttl, max_ttl,
 * request_expiry, cpu and wall; `run --ttl/--timeout`; capctl and capcall
 * --ttl; the ttl and timeout of a request on the wire.  Above it a program
 * exits 64, the broker answers `invalid` and a policy does not load, so no
 * "now + ttl" can overflow and nothing lives for ever by accident. */
#define CB_DURATION_MAX	31622400u

/* Wall-clock seconds since the epoch. */
uint64_t cb_now(void);

/* Monotonic nanoseconds. */
uint64_t cb_mono_ns(void);

/* ---- libraries loaded when first needed (dl.c) ---- */

/* One function of a library loaded at run time: its name, and the address of
 * the function pointer that receives it (cast: `(void **)&tbl.fn`). */
struct cb_dl_sym {
	const char *name;
	void **addr;
};

/* Loads the library soname (dlopen) and resolves every one of syms.  0 with
 * every pointer set, or CB_EUNSUPPORTED with every pointer NULL and why (at
 * most whylen bytes) saying what is missing.  The library stays loaded.  Not
 * thread-safe by itself: callers load once (pthread_once) before any use. */
int cb_dl_load(const char *soname, const struct cb_dl_sym *syms, size_t n, char *why,
    size_t whylen) CB_WARN_UNUSED;

/* ---- text an agent wrote, shown to a person (text.c) ---- */

/* The longest escape one unit becomes: a character ("\U000e0020") or a
 * run of spaces ("\x20{65536}"). */
#define CB_ESC_UNIT	24
/* A buffer that holds the escaped form of n input bytes, whatever they are
 * (one byte becomes at most 4: "\xNN"; a character of 2 to 4 bytes at most
 * 10, "\U000e0020"; a run of N > 3 spaces 6 and N's digits). */
#define CB_ESC_SIZE(n)	(4 * (size_t)(n) + 1)

/* Is code point cp one that must not reach a person's terminal as itself:
 * a C0 or C1 control or DEL, a bidirectional mark, embedding, override or
 * isolate (U+061C, U+200E-200F, U+202A-202E, U+2066-2069), a zero-width or
 * other invisible format character (U+200B-200D, U+2060-2064, U+FEFF, tags
 * U+E0000-E007F ...), a line or paragraph separator, a filler that renders
 * as nothing, or a variation selector?  docs/approval.md lists the set. */
bool cb_text_invisible(uint32_t cp);

/* Is cp shown as an escape by the one escaper below: cb_text_invisible(),
 * or a combining mark (Unicode's Mn and Me: drawn over, under or through
 * the character before it), a space other than U+0020 or the braille
 * blank U+2800 (which look like a space and are not one)?  The audit log
 * escapes only cb_text_invisible(): its JSON is for programs, and a path
 * there keeps its marks. */
bool cb_text_escaped(uint32_t cp);

/*
 * The one escaper for text an agent wrote (a reason, a command line, an
 * audience, a path) before a person sees it, used by every display: the
 * tty prompt of `capbroker run`, capctl's tables, `pending` and `watch`,
 * and check-policy's messages.  Visible text is copied; a character for
 * which cb_text_invisible() holds becomes \xNN (below U+0080) or \uXXXX /
 * \UXXXXXXXX, and so does a combining mark (Mn, Me), a space other than
 * U+0020 (U+00A0, U+1680, U+2000-200A, U+202F, U+205F, U+3000) and the
 * braille blank U+2800; a run of more than 3 spaces becomes \x20{N}; a byte
 * that is not part of valid UTF-8 becomes \xNN; a backslash becomes \\, so
 * the display is unambiguous.
 *
 * cb_text_esc writes at most len bytes including the terminating NUL to
 * dst (when len > 0), never splitting an escape or a character, and
 * returns the length of the whole escaped text, like snprintf: a return
 * >= len means the display was cut.  A NULL s is the empty string.
 * cb_text_fputs writes the whole escaped text to f: 0, or CB_EIO.
 */
size_t cb_text_esc(char *dst, size_t len, const char *s);

/* s as valid UTF-8: a new string (free()) in which each byte that does not
 * start a valid, shortest-form sequence is U+FFFD; NULL when out of
 * memory.  For stores that refuse other text (PostgreSQL's UTF8). */
char *cb_text_utf8(const char *s);
int cb_text_fputs(const char *s, FILE *f);

/* Free text an agent wrote (a request's reason) is shown at most this many
 * bytes long (escaped), so however long it is it cannot fill the
 * approver's screen with a block of its own under the real request. */
#define CB_TEXT_SHOW_MAX	200
/* Room for the marker of what was left out: "[... 65536 more bytes]". */
#define CB_TEXT_SHOW_MARK	32
#define CB_TEXT_SHOW_SIZE	(CB_TEXT_SHOW_MAX + CB_TEXT_SHOW_MARK + 1)
/* cb_text_esc's display of s, cut visibly: when the escaped text is longer
 * than max bytes (and than len - 1), a prefix (never half an escape or a
 * character) and "[... N more bytes]", N the bytes of s not shown; the
 * whole fits max bytes.  Writes to dst (len > 0 bytes, NUL-terminated);
 * returns dst. */
const char *cb_text_show(char *dst, size_t len, const char *s, size_t max);

/* ---- the one path resolver (resolve.c) ----
 * Every host path the broker (and the launcher, on the broker's side) opens
 * is resolved by the kernel beneath a directory fd with
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS, and the
 * resulting fd is refused when it lies on a kernel file system (procfs,
 * sysfs, debugfs, ...: see cb_fd_kernfs).  rel is relative to dirfd ("."
 * for dirfd itself); flags are open(2) flags (O_CLOEXEC is added), mode is
 * used only with O_CREAT.  Returns the fd, or -1 with errno set: ELOOP or
 * EXDEV for a symlink, magic link or escape on the way, EACCES for a kernel
 * file system, else what openat2 said. */
int cb_openat2(int dirfd, const char *rel, int flags, unsigned mode);

/* A stat of a file together with the mount it was reached through
 * (statx's mount id, CB_MNT_NONE when the kernel does not give one). */
#define CB_MNT_NONE UINT64_MAX
struct cb_stat {
	struct stat st;
	uint64_t mnt;
};

/* statx(dirfd, path, atflags) as a struct stat plus the mount id (the
 * unique one where the kernel has it).  0, or -1 with errno set. */
int cb_statat(int dirfd, const char *path, int atflags, struct cb_stat *cs);

/* Is a file seen by cs on the file system of the directory seen by dirst,
 * so that the resolver's file system check of that directory holds for it
 * too?  True when both report the same device (one superblock) or were
 * reached through the same mount (one mount is one superblock: on
 * overlayfs a regular file reports its layer's device, the directory the
 * overlay's, and both the overlay mount's id).  Sound only while the
 * directory's fd is held (dirst came from it): the fd pins its superblock
 * and its mount, so neither number can be handed to another file system
 * meanwhile. */
bool cb_stat_same_fs(const struct cb_stat *cs, const struct cb_stat *dirst);

/* cb_openat2 that also returns the new fd's stat (and mount) in *st.
 * dirst is the cb_statat of dirfd, which must itself come from this
 * resolver (cb_openat2, cb_open_abs, cb_open_proc_sys or this function),
 * or NULL.  A read-only open that stays on dirfd's file system
 * (cb_stat_same_fs) skips the fstatfs check: it cannot say anything the
 * check of dirfd did not.  Same returns as cb_openat2. */
int cb_openat2_st(int dirfd, const struct cb_stat *dirst, const char *rel, int flags,
    unsigned mode, struct cb_stat *st);

/* Open an absolute path with cb_openat2 from "/" (no symlink followed
 * anywhere on the way). */
int cb_open_abs(const char *path, int flags);

/* Open path, /proc/sys or beneath it, read-only (O_RDONLY or O_PATH): the
 * only way to a procfs fd that cb_openat2 accepts as a start directory,
 * and then only for read-only opens beneath it.  EACCES for anything else. */
int cb_open_proc_sys(const char *path, int flags);

/* Is fd on a kernel file system whose files act on the machine or show
 * processes' memory (procfs, sysfs, debugfs, tracefs, securityfs, bpf,
 * cgroup, efivarfs, pstore, configfs, devpts, ...)?  Unknown: true. */
bool cb_fd_kernfs(int fd);

/* Is a kernel file system (the types cb_fd_kernfs refuses) mounted at the
 * absolute, symlink-free directory dir or anywhere beneath it, in the
 * caller's mount namespace (/proc/self/mountinfo)?  A recursive bind of dir
 * would show it.  Unknown (mountinfo unreadable): true. */
bool cb_kernfs_below(const char *dir);

#endif
