/*
 * packet.h - one packet, with descriptors, across a SOCK_SEQPACKET (or
 * datagram) socket: the one place capbroker builds or reads SCM_RIGHTS.
 *
 * Used by the broker (replies to agents and administrators, requests from
 * agents: hostile), the sandbox stub (seccomp listener and bind trees
 * between its own processes) and clients (replies from the broker).  The
 * receive side reports the two ways a packet can arrive incomplete, so each
 * caller refuses them: MSG_TRUNC (the packet was larger than the buffer; the
 * rest is gone) and MSG_CTRUNC (descriptors did not fit; the kernel closed
 * them).  Descriptors arrive close-on-exec, so none leaks into a program
 * started before the receiver has decided what to do with them.
 *
 * These are thin system-call wrappers: they answer as sendmsg/recvmsg do
 * (a count, or -1 and errno), because callers tell EAGAIN, EINTR and EPIPE
 * apart.
 */
#ifndef CB_WIRE_PACKET_H
#define CB_WIRE_PACKET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define WIRE_PACKET_FDS	16	/* most descriptors one packet brings in */

struct wire_packet {
	int fds[WIRE_PACKET_FDS];	/* received, close-on-exec; the caller's */
	size_t nfds;
	bool trunc;	/* MSG_TRUNC: larger than the buffer; the rest was lost */
	bool ctrunc;	/* MSG_CTRUNC, or more than WIRE_PACKET_FDS came (closed) */
};

/* Send len bytes of buf as one packet with nfds descriptors (at most
 * WIRE_PACKET_FDS; 0 for none).  flags as sendmsg's (MSG_DONTWAIT,
 * MSG_NOSIGNAL).  The bytes sent, or -1 and errno (EINVAL for too many
 * descriptors). */
ssize_t wire_packet_send(int sock, const void *buf, size_t len, const int *fds, size_t nfds,
    int flags);

/* Receive one packet into buf (cap bytes) and the descriptors sent with it
 * into p.  flags as recvmsg's (MSG_DONTWAIT); MSG_CMSG_CLOEXEC is always
 * added.  The bytes received (0 for an empty packet or end of stream), or -1
 * and errno, with p->nfds 0.  Every descriptor in p is the caller's, even
 * when p->trunc or p->ctrunc says to refuse the packet. */
ssize_t wire_packet_recv(int sock, void *buf, size_t cap, int flags, struct wire_packet *p);

/* Close every descriptor in p (for a packet that should have carried none,
 * or was refused). */
void wire_packet_close(struct wire_packet *p);

#endif
