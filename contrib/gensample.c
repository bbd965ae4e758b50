/*
 * gensample DIR - deterministic raw data for the bundled sample:
 *   DIR/readings.csv  weather readings as text (for grep and hexdump)
 *   DIR/temps.i32     a random walk of int32 temperatures (centi-degrees)
 *   DIR/ids.u64       increasing uint64 station-reading ids
 * contrib/make-sample turns them into tile files with tiletool encode.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define ROWS 200000

static uint32_t rnd(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static FILE *create(const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "wb"))) {
		perror(path);
		exit(1);
	}
	return f;
}

int main(int argc, char **argv)
{
	static const char *const stations[] = { "OSLO", "BERGEN", "TROMSO", "LISBON", "QUITO", "PERTH" };
	FILE *csv, *temps, *ids;
	uint32_t seed = 2026;
	int32_t t = 1200;

	if (argc != 2) {
		fprintf(stderr, "usage: gensample DIR\n");
		return 2;
	}
	csv = create(argv[1], "readings.csv");
	temps = create(argv[1], "temps.i32");
	ids = create(argv[1], "ids.u64");
	fprintf(csv, "time,station,temperature_c\n");
	for (uint64_t i = 0; i < ROWS; i++) {
		uint64_t id = 1000000 + i * 3 + rnd(&seed) % 3;

		t += (int32_t)(rnd(&seed) % 61) - 30;
		fprintf(csv, "2026-01-%02u %02u:%02u,%s,%.2f\n", (unsigned)(i / 8640 % 28 + 1),
			(unsigned)(i / 360 % 24), (unsigned)(i / 6 % 60), stations[i % 6], t / 100.0);
		fwrite(&t, sizeof(t), 1, temps);
		fwrite(&id, sizeof(id), 1, ids);
	}
	return fclose(csv) | fclose(temps) | fclose(ids) ? 1 : 0;
}
