/*
 * mkimage.c - build-time tool st-mkimage: run the state schema
 * (state/schema.h) on an empty in-memory SQLite database and print the
 * database's bytes as a C array (schema_image.h), which state.c loads
 * (sqlite3_deserialize) to start an ephemeral state without running the
 * schema at every `capbroker run` (docs/state.md, "Ephemeral state").
 *
 * Runs on the build host (trusted).  The SQLite file format is stable, so
 * an image made by one SQLite 3 reads in any later one.
 */
#include <stdio.h>
#include <stdlib.h>

#include <sqlite3.h>

#include "state/schema.h"

int
main(void)
{
	sqlite3 *db = NULL;
	sqlite3_int64 n = 0;
	unsigned char *img = NULL;
	char *err = NULL;
	int rc = 1;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_exec(db, st_schema, NULL, NULL, &err) != SQLITE_OK) {
		fprintf(stderr, "st-mkimage: %s\n", err ? err : sqlite3_errmsg(db));
		goto out;
	}
	/* The unused pages go: the image is as small as the schema allows. */
	if (sqlite3_exec(db, "VACUUM", NULL, NULL, &err) != SQLITE_OK ||
	    !(img = sqlite3_serialize(db, "main", &n, 0)) || n <= 0) {
		fprintf(stderr, "st-mkimage: %s\n", err ? err : "cannot serialize the database");
		goto out;
	}
	printf("/* Made by st-mkimage (state/mkimage.c) from state/schema.h: do not edit. */\n");
	printf("static const unsigned char st_schema_image[%lld] = {", (long long)n);
	for (sqlite3_int64 i = 0; i < n; i++)
		printf("%s%u,", i % 24 ? "" : "\n", img[i]);
	printf("\n};\n");
	rc = fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
out:
	sqlite3_free(img);
	sqlite3_free(err);
	sqlite3_close(db);
	return rc;
}
