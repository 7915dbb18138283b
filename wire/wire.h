/*
 * wire.h - the wire module: every msgpack encoding and decoding in
 * capbroker, and the one way a packet with descriptors crosses a socket.
 * No other module includes msgpack.h.
 *
 * One header per concern; this one includes them all for callers that
 * speak the whole protocol:
 *   wire/codec.h   msgpack primitives and the bounded pre-scan
 *   wire/agent.h   agent <-> broker requests and replies
 *   wire/admin.h   admin <-> broker requests (typed, one per command)
 *   wire/packet.h  one packet with descriptors (SCM_RIGHTS) over a socket
 *
 * See docs/protocol.md for the messages and docs/architecture.md for who
 * calls what.
 */
#ifndef CB_WIRE_H
#define CB_WIRE_H

#include "wire/admin.h"
#include "wire/agent.h"
#include "wire/codec.h"
#include "wire/packet.h"

#endif
