MODULES += wire
wire_SRCS := wire/codec.c wire/agent.c wire/admin.c wire/packet.c
wire_LIBS := wire common
