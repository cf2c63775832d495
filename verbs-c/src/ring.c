/*
 * Agrona's many-to-one ring buffer (org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer 1.x), in C,
 * so that the library and the node's Java share the session's rings byte for byte:
 *
 *   record:  i32 length (header included; negative while its writer fills it), i32 type, body;
 *            records start 8-byte aligned; a record of type -1 pads to the end of the buffer.
 *   trailer (after capacity bytes): i64 tail at +128, i64 head cache at +256, i64 head at +384.
 */
#include <string.h>

#include "pw.h"
#include "ring.h"

#define HEADER 8
#define ALIGNMENT 8
#define TAIL 128
#define HEAD_CACHE 256
#define HEAD 384
#define PADDING_TYPE (-1)

static inline int64_t *word64(struct pw_ring *r, int offset) { return (int64_t *)(r->buffer + r->capacity + offset); }
static inline int32_t *length_at(struct pw_ring *r, int32_t index) { return (int32_t *)(r->buffer + index); }
static inline int32_t align8(int32_t v) { return (v + ALIGNMENT - 1) & ~(ALIGNMENT - 1); }

void pw_ring_init(struct pw_ring *ring, uint8_t *at, int32_t capacity)
{
	ring->buffer = at;
	ring->capacity = capacity;
	ring->max_message = capacity / 8;
}

static int32_t claim(struct pw_ring *r, int32_t required)
{
	const int32_t mask = r->capacity - 1;
	int64_t head = __atomic_load_n(word64(r, HEAD_CACHE), __ATOMIC_ACQUIRE);
	int64_t tail;
	int32_t tail_index, padding;
	do {
		tail = __atomic_load_n(word64(r, TAIL), __ATOMIC_ACQUIRE);
		int32_t available = r->capacity - (int32_t)(tail - head);
		if (required > available) {
			head = __atomic_load_n(word64(r, HEAD), __ATOMIC_ACQUIRE);
			if (required > r->capacity - (int32_t)(tail - head))
				return -1;
			__atomic_store_n(word64(r, HEAD_CACHE), head, __ATOMIC_RELEASE);
		}
		padding = 0;
		tail_index = (int32_t)tail & mask;
		int32_t to_end = r->capacity - tail_index;
		if (required > to_end) {
			int32_t head_index = (int32_t)head & mask;
			if (required > head_index) {
				head = __atomic_load_n(word64(r, HEAD), __ATOMIC_ACQUIRE);
				head_index = (int32_t)head & mask;
				if (required > head_index)
					return -1;
				__atomic_store_n(word64(r, HEAD_CACHE), head, __ATOMIC_RELEASE);
			}
			padding = to_end;
		}
	} while (!__atomic_compare_exchange_n(word64(r, TAIL), &tail, tail + required + padding, 0, __ATOMIC_SEQ_CST,
					      __ATOMIC_SEQ_CST));
	if (padding) {
		__atomic_store_n(length_at(r, tail_index), -padding, __ATOMIC_RELEASE);
		*(int32_t *)(r->buffer + tail_index + 4) = PADDING_TYPE;
		__atomic_store_n(length_at(r, tail_index), padding, __ATOMIC_RELEASE);
		tail_index = 0;
	}
	return tail_index;
}

uint8_t *pw_ring_claim(struct pw_ring *ring, int32_t type, int32_t length, int32_t *index)
{
	if (length < 0 || length > ring->max_message)
		return NULL;
	int32_t record_length = length + HEADER;
	int32_t at = claim(ring, align8(record_length));
	if (at < 0)
		return NULL;
	__atomic_store_n(length_at(ring, at), -record_length, __ATOMIC_RELEASE);
	*(int32_t *)(ring->buffer + at + 4) = type;
	*index = at;
	return ring->buffer + at + HEADER;
}

void pw_ring_commit(struct pw_ring *ring, int32_t index, int32_t length)
{
	__atomic_store_n(length_at(ring, index), length + HEADER, __ATOMIC_RELEASE);
}

int pw_ring_pending(struct pw_ring *r)
{
	int64_t head = *word64(r, HEAD);
	return __atomic_load_n(length_at(r, (int32_t)head & (r->capacity - 1)), __ATOMIC_ACQUIRE) > 0;
}

int pw_ring_read(struct pw_ring *r, pw_ring_handler handler, void *arg, int limit)
{
	int64_t head = *word64(r, HEAD);
	int32_t head_index = (int32_t)head & (r->capacity - 1);
	int32_t max_block = r->capacity - head_index;
	int32_t bytes = 0;
	int read = 0;
	while (bytes < max_block && read < limit) {
		int32_t at = head_index + bytes;
		int32_t length = __atomic_load_n(length_at(r, at), __ATOMIC_ACQUIRE);
		if (length <= 0)
			break;
		bytes += align8(length);
		int32_t type = *(int32_t *)(r->buffer + at + 4);
		if (type == PADDING_TYPE)
			continue;
		handler(arg, type, r->buffer + at + HEADER, length - HEADER);
		read++;
	}
	if (bytes > 0) {
		memset(r->buffer + head_index, 0, (size_t)bytes);
		__atomic_store_n(word64(r, HEAD), head + bytes, __ATOMIC_RELEASE);
	}
	return read;
}
