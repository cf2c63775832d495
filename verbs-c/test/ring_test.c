/* ring.c against the layout Agrona's ring buffer uses: records in order across wrap-arounds, a full
 * ring refuses, an oversized record is refused, and the reader zeroes what it consumed. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pw.h"
#include "ring.h"

static int expected_next;
static void check(void *arg, int32_t type, const uint8_t *body, int32_t length)
{
	(void)arg;
	assert(type == 7);
	int32_t n;
	memcpy(&n, body, 4);
	assert(n == expected_next);
	assert(length == 4 + (n % 97));
	for (int i = 4; i < length; i++)
		assert(body[i] == (uint8_t)(n + i));
	expected_next++;
}

static void ignore(void *arg, int32_t type, const uint8_t *body, int32_t length)
{
	(void)arg;
	(void)type;
	(void)body;
	(void)length;
}

int main(void)
{
	const int32_t capacity = 4096;
	uint8_t *mem = calloc(1, (size_t)capacity + 768);
	struct pw_ring ring;
	pw_ring_init(&ring, mem, capacity);
	int written = 0;
	for (int round = 0; round < 2000; round++) {
		int burst = 1 + round % 13;
		for (int k = 0; k < burst; k++) {
			int32_t length = 4 + (written % 97), index;
			uint8_t *at = pw_ring_claim(&ring, 7, length, &index);
			if (!at)
				break;
			memcpy(at, &written, 4);
			for (int i = 4; i < length; i++)
				at[i] = (uint8_t)(written + i);
			pw_ring_commit(&ring, index, length);
			written++;
		}
		pw_ring_read(&ring, check, NULL, 1 + round % 5);
	}
	while (pw_ring_read(&ring, check, NULL, 100) > 0)
		;
	assert(expected_next == written);
	/* a full ring refuses a record, and takes one again once read */
	int32_t index;
	int filled = 0;
	while (pw_ring_claim(&ring, 7, 100, &index)) {
		pw_ring_commit(&ring, index, 100);
		filled++;
	}
	assert(filled > 0 && filled <= capacity / 112);
	assert(pw_ring_claim(&ring, 7, capacity, &index) == NULL); /* over the largest message */
	int drained = 0, n;
	while ((n = pw_ring_read(&ring, ignore, NULL, 1000)) > 0)
		drained += n;
	assert(drained == filled);
	for (int32_t i = 0; i < capacity; i++)
		assert(mem[i] == 0);
	assert(pw_ring_claim(&ring, 7, 100, &index) != NULL);
	printf("ring_test: %d records through a %d-byte ring in order; full and oversized records refused\n", written, capacity);
	free(mem);
	return 0;
}
