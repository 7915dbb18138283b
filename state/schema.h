/*
 * schema.h - the state database's schema, in one place: state.c runs it on
 * every database it opens (CREATE ... IF NOT EXISTS), and the build-time
 * tool st-mkimage (state/mkimage.c) runs it once to make the empty database
 * an ephemeral state starts from (docs/state.md, "Ephemeral state").
 *
 * Trust domain: broker (and the build host).
 */
#ifndef CB_STATE_SCHEMA_H
#define CB_STATE_SCHEMA_H

static const char st_schema[] =
	"CREATE TABLE IF NOT EXISTS keys("
	" kid BLOB PRIMARY KEY, pk BLOB NOT NULL, created_at INTEGER NOT NULL,"
	" signing INTEGER NOT NULL DEFAULT 0, retired_at INTEGER);"
	"CREATE TABLE IF NOT EXISTS tokens("
	" seq INTEGER PRIMARY KEY, id BLOB NOT NULL UNIQUE, parent BLOB,"
	" sandbox TEXT NOT NULL, caps TEXT NOT NULL, nbf INTEGER NOT NULL,"
	" exp INTEGER NOT NULL, uses_left INTEGER, elevated INTEGER NOT NULL,"
	" issued_at INTEGER NOT NULL, issued_by TEXT NOT NULL, revoked_at INTEGER);"
	"CREATE INDEX IF NOT EXISTS tokens_parent ON tokens(parent) WHERE parent IS NOT NULL;"
	"CREATE TABLE IF NOT EXISTS requests("
	" id INTEGER PRIMARY KEY AUTOINCREMENT, sandbox TEXT NOT NULL, command TEXT NOT NULL,"
	" capability TEXT NOT NULL, reason TEXT NOT NULL, ttl INTEGER NOT NULL,"
	" asked_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, state INTEGER NOT NULL,"
	" decided_by TEXT, decision_reason TEXT, decided_at INTEGER, approved_ttl INTEGER,"
	" scope INTEGER, token_id BLOB);"
	"CREATE INDEX IF NOT EXISTS requests_pending ON requests(expires_at) WHERE state = 0;"
	/* Sandbox instances and the approved elevations each was given: an
	 * elevation ends with the instance it was granted to (issue 10). */
	"CREATE TABLE IF NOT EXISTS instances("
	" id INTEGER PRIMARY KEY AUTOINCREMENT, sandbox TEXT NOT NULL,"
	" started_at INTEGER NOT NULL, ended_at INTEGER);"
	"CREATE TABLE IF NOT EXISTS elevations("
	" token BLOB PRIMARY KEY, instance INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS elevations_instance ON elevations(instance);"
	"CREATE TABLE IF NOT EXISTS audit_head("
	" one INTEGER PRIMARY KEY CHECK (one = 1), log_id BLOB NOT NULL,"
	" seq INTEGER NOT NULL, hash BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS last_decision("
	" one INTEGER PRIMARY KEY CHECK (one = 1), dseq INTEGER NOT NULL, op TEXT NOT NULL,"
	" sandbox TEXT, resource TEXT, tid BLOB, actor TEXT, detail TEXT,"
	" decision INTEGER NOT NULL, reason INTEGER NOT NULL);"
	/* The records of the last batch of decisions committed together
	 * (st_revoke_many): a crash before the log has them leaves the state
	 * several decisions ahead, and the next start writes them all. */
	"CREATE TABLE IF NOT EXISTS batch_decisions("
	" dseq INTEGER PRIMARY KEY, op TEXT NOT NULL,"
	" sandbox TEXT, resource TEXT, tid BLOB, actor TEXT, detail TEXT,"
	" decision INTEGER NOT NULL, reason INTEGER NOT NULL);"
	"PRAGMA user_version = 1;";

#endif
