/* fuzz_wire_admin_rep.c - libFuzzer target: admin reply and event decoding
 * (capctl's and `capbroker run --connect`'s side).  The first byte picks
 * the command the input is read as a reply to (or an event); anything
 * accepted must encode again and decode to the same reply. */
#include <stdlib.h>
#include <string.h>

#include "wire/admin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct wire_dec *d, *d2;
	static uint8_t out[WIRE_REPLY_MAX];
	struct wire_adm_rep r, r2;
	struct wire_adm_event ev;
	enum wire_adm_cmd cmd;
	size_t len;

	if (!d && (wire_dec_new(WIRE_REPLY_MAX, &d) != 0 || wire_dec_new(WIRE_REPLY_MAX, &d2) != 0))
		abort();
	if (size < 1)
		return 0;
	cmd = (enum wire_adm_cmd)(data[0] % (WIRE_ADM_COUNT + 2));
	data++;
	size--;
	if (cmd == WIRE_ADM_COUNT + 1) {
		if (wire_adm_event_decode(d, data, size, &ev) == 0 &&
		    wire_adm_event_encode(&ev, out, sizeof(out), &len) != 0)
			abort();	/* any event we accept we can re-encode */
		return 0;
	}
	if (wire_adm_rep_decode(d, data, size, cmd, &r) != 0)
		return 0;
	if (wire_adm_rep_encode(&r, out, sizeof(out), &len) != 0 ||
	    wire_adm_rep_decode(d2, out, len, cmd, &r2) != 0 || r2.id != r.id || r2.err != r.err ||
	    r2.ntokens != r.ntokens || r2.nsbxs != r.nsbxs || r2.nrequests != r.nrequests)
		abort();	/* a reply we accept survives a round trip */
	return 0;
}
