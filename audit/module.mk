MODULES += audit
audit_SRCS := audit/log.c audit/prefix.c audit/verify.c audit/follow.c
# state: only for tests/unit/test_audit_state.c, which checks the wiring the
# broker uses (st_sign_audit, st_audit_checkpoint_cb, st_audit_keyring);
# audit/ itself does not call state/.
audit_LIBS := audit state caps wire common
