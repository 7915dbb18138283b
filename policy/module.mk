MODULES += policy
policy_SRCS := policy/policy.c policy/load.c policy/print.c policy/net.c policy/default.c policy/cmd.c
policy_LIBS := policy sandbox caps wire common
# The built-in policy as C data (pol_default_image.h), made at build time
# by parsing its text with this module's own loader (pol-mkdefault, built
# from the sources without the image), so that pol_default() copies it
# instead of parsing (≈0.3 ms per start; docs/performance.md).  test_policy
# checks that the copy is what the parse gives.
POL_MK_SRCS := policy/mkdefault.c $(filter-out policy/cmd.c,$(policy_SRCS))
$(B)/policy/pol-mkdefault: $(POL_MK_SRCS) policy/pol_int.h policy/policy.h \
    $(B)/libsandbox.a $(B)/libcaps.a $(B)/libwire.a $(B)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -MMD -MP,$(ALL_CFLAGS)) -DPOL_NO_IMAGE $(ALL_LDFLAGS) -o $@ \
		$(POL_MK_SRCS) $(B)/libsandbox.a $(B)/libcaps.a $(B)/libwire.a $(B)/libcommon.a \
		$(PKG_LIBS_libconfig) $(PKG_LIBS_libsodium) $(PKG_LIBS_msgpack)
$(B)/policy/pol_default_image.h: $(B)/policy/pol-mkdefault
	$< >$@.tmp && mv $@.tmp $@
$(B)/policy/load.o: $(B)/policy/pol_default_image.h
$(B)/policy/load.o: ALL_CFLAGS += -I$(B)/policy
