MODULES += wire
wire_SRCS := wire/wire.c
wire_LIBS := wire caps common
