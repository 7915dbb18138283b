MODULES += wire
wire_SRCS := wire/codec.c wire/agent.c
wire_LIBS := wire common
