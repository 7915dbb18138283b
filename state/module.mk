MODULES += state
state_SRCS := state/state.c state/tokmap.c
state_LIBS := state caps wire common
# An ephemeral state starts from an empty database made once, at build time:
# st-mkimage runs the schema (state/schema.h) and prints the database as a C
# array (schema_image.h) that state.c loads, so a `run` does not run the
# schema (saves ~0.45 ms per start; docs/state.md).
$(B)/state/st-mkimage: state/mkimage.c state/schema.h
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -MMD -MP,$(ALL_CFLAGS)) $(ALL_LDFLAGS) -o $@ state/mkimage.c \
		$(PKG_LIBS_sqlite3)
$(B)/state/schema_image.h: $(B)/state/st-mkimage
	$< >$@.tmp && mv $@.tmp $@
$(B)/state/state.o: $(B)/state/schema_image.h
$(B)/state/state.o: ALL_CFLAGS += -I$(B)/state
# test_state checks the image is what the schema makes.
$(B)/tests/unit/test_state.o: $(B)/state/schema_image.h
$(B)/tests/unit/test_state.o: ALL_CFLAGS += -I$(B)/state
