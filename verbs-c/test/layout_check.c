/*
 * pagewire-layout-check: the library's view of the shared layouts (layout.h) against the node's (the
 * ring module's record classes), both ways. `write DIR` writes one file per record kind with the values
 * below at layout.h's offsets; `read DIR` reads files the Java side wrote with the same values and says
 * which field of which record is not where layout.h puts it. RecordLayoutTest runs both.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

static int failures;

#define PUT(buf, at, type, value)                                                                                                \
	do {                                                                                                                     \
		type v_ = (type)(value);                                                                                         \
		memcpy((buf) + (at), &v_, sizeof(v_));                                                                           \
	} while (0)

#define EXPECT(file, name, buf, at, type, value)                                                                                 \
	do {                                                                                                                     \
		type v_;                                                                                                         \
		memcpy(&v_, (buf) + (at), sizeof(v_));                                                                           \
		if (v_ != (type)(value)) {                                                                                       \
			printf("FAIL %s: %s at offset %d is 0x%llx, not 0x%llx\n", file, name, (int)(at), (unsigned long long)v_, \
			       (unsigned long long)(type)(value));                                                               \
			failures++;                                                                                              \
		}                                                                                                                \
	} while (0)

/* The values both sides write and expect. */
#define WR0_ID 0x1111222233334444ull
#define WR0_OPCODE (PW_OP_WRITE | PW_FLAG_UNSIGNALED | PW_FLAG_FENCE)
#define WR1_ID 0x5555666677778888ull
#define WR1_OPCODE (PW_OP_COMPARE_SWAP | PW_FLAG_SOLICITED | PW_FLAG_DATAGRAM)

static void work_request(uint8_t *w, uint64_t id, int32_t opcode, uint32_t salt)
{
	PUT(w, PW_WR_ID, uint64_t, id);
	PUT(w, PW_WR_OPCODE, int32_t, opcode);
	PUT(w, PW_WR_LKEY, uint32_t, 0x55 + salt);
	PUT(w, PW_WR_LOCAL, uint64_t, 0x7f0011223344ull + salt);
	PUT(w, PW_WR_LENGTH, uint32_t, 4096 + salt);
	PUT(w, PW_WR_COUNTER, uint32_t, 9 + salt);
	PUT(w, PW_WR_REMOTE, uint64_t, 0x6600aabbccddull + salt);
	PUT(w, PW_WR_RKEY, uint64_t, 0x12345678ull + salt);
	PUT(w, PW_WR_ADD, uint64_t, 77 + salt);
	PUT(w, PW_WR_IMM, uint32_t, 0xabcdef01u + salt);
	PUT(w, PW_WR_SWAP, uint64_t, 88 + salt);
}

static void expect_work_request(const char *file, const uint8_t *w, uint64_t id, int32_t opcode, uint32_t salt)
{
	EXPECT(file, "wr id", w, PW_WR_ID, uint64_t, id);
	EXPECT(file, "opcode and flags", w, PW_WR_OPCODE, int32_t, opcode);
	EXPECT(file, "lkey", w, PW_WR_LKEY, uint32_t, 0x55 + salt);
	EXPECT(file, "local address", w, PW_WR_LOCAL, uint64_t, 0x7f0011223344ull + salt);
	EXPECT(file, "length", w, PW_WR_LENGTH, uint32_t, 4096 + salt);
	EXPECT(file, "counter id", w, PW_WR_COUNTER, uint32_t, 9 + salt);
	EXPECT(file, "remote address", w, PW_WR_REMOTE, uint64_t, 0x6600aabbccddull + salt);
	EXPECT(file, "rkey", w, PW_WR_RKEY, uint64_t, 0x12345678ull + salt);
	EXPECT(file, "add", w, PW_WR_ADD, uint64_t, 77 + salt);
	EXPECT(file, "immediate", w, PW_WR_IMM, uint32_t, 0xabcdef01u + salt);
	EXPECT(file, "swap", w, PW_WR_SWAP, uint64_t, 88 + salt);
}

/* Each record kind: its file, its length, and how the C side writes and checks it. */
static void post(uint8_t *b, int write)
{
	if (write) {
		PUT(b, 0, uint32_t, 0x01020304);
		PUT(b, 4, uint32_t, 2);
		work_request(b + PW_POST_HEADER, WR0_ID, WR0_OPCODE, 0);
		work_request(b + PW_POST_HEADER + PW_POST_WR, WR1_ID, WR1_OPCODE, 1);
	} else {
		EXPECT("post", "qpn", b, 0, uint32_t, 0x01020304);
		EXPECT("post", "count", b, 4, uint32_t, 2);
		expect_work_request("post", b + PW_POST_HEADER, WR0_ID, WR0_OPCODE, 0);
		expect_work_request("post", b + PW_POST_HEADER + PW_POST_WR, WR1_ID, WR1_OPCODE, 1);
	}
}

static void receive(uint8_t *b, int write)
{
	uint8_t *r = b + PW_RECV_HEADER;
	if (write) {
		PUT(b, 0, uint32_t, 5);
		PUT(b, 4, uint32_t, 6);
		PUT(b, 8, uint32_t, 1);
		PUT(r, PW_RECV_ID, uint64_t, 0x99);
		PUT(r, PW_RECV_LKEY, uint32_t, 3);
		PUT(r, PW_RECV_LENGTH, uint32_t, 100);
		PUT(r, PW_RECV_ADDRESS, uint64_t, 0x1000);
	} else {
		EXPECT("receive", "qpn", b, 0, uint32_t, 5);
		EXPECT("receive", "srq id", b, 4, uint32_t, 6);
		EXPECT("receive", "count", b, 8, uint32_t, 1);
		EXPECT("receive", "wr id", r, PW_RECV_ID, uint64_t, 0x99);
		EXPECT("receive", "lkey", r, PW_RECV_LKEY, uint32_t, 3);
		EXPECT("receive", "length", r, PW_RECV_LENGTH, uint32_t, 100);
		EXPECT("receive", "address", r, PW_RECV_ADDRESS, uint64_t, 0x1000);
	}
}

static void list(uint8_t *b, int write)
{
	uint8_t *e = b + PW_LIST_HEADER + PW_POST_WR;
	if (write) {
		PUT(b, 0, uint32_t, 7);
		PUT(b, 4, uint32_t, 0);
		PUT(b, 8, uint32_t, 3);
		work_request(b + PW_LIST_HEADER, WR1_ID, PW_OP_SEND, 2);
		for (int i = 0; i < 3; i++) {
			PUT(e + i * PW_LIST_ELEMENT, PW_ELEMENT_LKEY, uint32_t, 10 + i);
			PUT(e + i * PW_LIST_ELEMENT, PW_ELEMENT_LENGTH, uint32_t, 100 + i);
			PUT(e + i * PW_LIST_ELEMENT, PW_ELEMENT_ADDRESS, uint64_t, 0x2000ull * (i + 1));
		}
	} else {
		EXPECT("list", "qpn", b, 0, uint32_t, 7);
		EXPECT("list", "element count", b, 8, uint32_t, 3);
		expect_work_request("list", b + PW_LIST_HEADER, WR1_ID, PW_OP_SEND, 2);
		for (int i = 0; i < 3; i++) {
			EXPECT("list", "element lkey", e + i * PW_LIST_ELEMENT, PW_ELEMENT_LKEY, uint32_t, 10 + i);
			EXPECT("list", "element length", e + i * PW_LIST_ELEMENT, PW_ELEMENT_LENGTH, uint32_t, 100 + i);
			EXPECT("list", "element address", e + i * PW_LIST_ELEMENT, PW_ELEMENT_ADDRESS, uint64_t, 0x2000ull * (i + 1));
		}
	}
}

static void completion(uint8_t *b, int write)
{
	if (write) {
		PUT(b, PW_COMPLETION_ID, uint64_t, 0xfeedull);
		PUT(b, PW_COMPLETION_QPN, uint32_t, 11);
		PUT(b, PW_COMPLETION_OPCODE, int32_t, PW_OP_RECV);
		PUT(b, PW_COMPLETION_STATUS, int32_t, PW_ST_FLUSHED);
		PUT(b, PW_COMPLETION_ERROR_LENGTH, int32_t, 7);
		PUT(b, PW_COMPLETION_BYTES, uint64_t, 12345);
		PUT(b, PW_COMPLETION_VALUE, uint64_t, 99);
		PUT(b, PW_COMPLETION_FLAGS, uint32_t, PW_COMPLETION_WITH_IMM | PW_COMPLETION_SOLICITED | PW_COMPLETION_DATAGRAM | PW_COMPLETION_GLOBAL_ROUTE);
		PUT(b, PW_COMPLETION_IMM, uint32_t, 0x77);
		PUT(b, PW_COMPLETION_TIME, uint64_t, 0x0123456789abcdefull);
		memcpy(b + PW_COMPLETION, "flushed", 7);
	} else {
		EXPECT("completion", "wr id", b, PW_COMPLETION_ID, uint64_t, 0xfeedull);
		EXPECT("completion", "qpn", b, PW_COMPLETION_QPN, uint32_t, 11);
		EXPECT("completion", "opcode", b, PW_COMPLETION_OPCODE, int32_t, PW_OP_RECV);
		EXPECT("completion", "status", b, PW_COMPLETION_STATUS, int32_t, PW_ST_FLUSHED);
		EXPECT("completion", "error length", b, PW_COMPLETION_ERROR_LENGTH, int32_t, 7);
		EXPECT("completion", "bytes", b, PW_COMPLETION_BYTES, uint64_t, 12345);
		EXPECT("completion", "value", b, PW_COMPLETION_VALUE, uint64_t, 99);
		EXPECT("completion", "flags", b, PW_COMPLETION_FLAGS, uint32_t, PW_COMPLETION_WITH_IMM | PW_COMPLETION_SOLICITED | PW_COMPLETION_DATAGRAM | PW_COMPLETION_GLOBAL_ROUTE);
		EXPECT("completion", "immediate", b, PW_COMPLETION_IMM, uint32_t, 0x77);
		EXPECT("completion", "time", b, PW_COMPLETION_TIME, uint64_t, 0x0123456789abcdefull);
		if (memcmp(b + PW_COMPLETION, "flushed", 7)) {
			printf("FAIL completion: the error is not at offset %d\n", PW_COMPLETION);
			failures++;
		}
	}
}

static void refused(uint8_t *b, int write)
{
	if (write) {
		PUT(b, PW_REFUSED_ID, uint64_t, 0xbadull);
		PUT(b, PW_REFUSED_QPN, uint32_t, 12);
		PUT(b, PW_REFUSED_CODE, uint32_t, 8);
		PUT(b, PW_REFUSED_ERROR_LENGTH, int32_t, 5);
		memcpy(b + PW_REFUSED, "quota", 5);
	} else {
		EXPECT("refused", "wr id", b, PW_REFUSED_ID, uint64_t, 0xbadull);
		EXPECT("refused", "qpn", b, PW_REFUSED_QPN, uint32_t, 12);
		EXPECT("refused", "code", b, PW_REFUSED_CODE, uint32_t, 8);
		EXPECT("refused", "error length", b, PW_REFUSED_ERROR_LENGTH, int32_t, 5);
		if (memcmp(b + PW_REFUSED, "quota", 5)) {
			printf("FAIL refused: the error is not at offset %d\n", PW_REFUSED);
			failures++;
		}
	}
}

static void cpu_unmap(uint8_t *b, int write)
{
	if (write) {
		PUT(b, PW_CPU_UNMAP_ADDRESS, uint64_t, 0x7f0000001000ull);
		PUT(b, PW_CPU_UNMAP_LENGTH, uint64_t, 3 * 4096);
	} else {
		EXPECT("cpu_unmap", "address", b, PW_CPU_UNMAP_ADDRESS, uint64_t, 0x7f0000001000ull);
		EXPECT("cpu_unmap", "length", b, PW_CPU_UNMAP_LENGTH, uint64_t, 3 * 4096);
	}
}

static void rings(uint8_t *b, int write)
{
	if (write) {
		PUT(b, 0, uint64_t, PW_RINGS_MAGIC);
		PUT(b, PW_RINGS_NONCE, uint64_t, 0x0102030405060708ull);
		PUT(b, PW_RINGS_CAPACITY, int32_t, 4096);
		PUT(b, PW_RINGS_NODE_ASLEEP, int32_t, 1);
		PUT(b, PW_RINGS_APP_ASLEEP, int32_t, 0);
	} else {
		EXPECT("rings", "magic", b, 0, uint64_t, PW_RINGS_MAGIC);
		EXPECT("rings", "nonce", b, PW_RINGS_NONCE, uint64_t, 0x0102030405060708ull);
		EXPECT("rings", "capacity", b, PW_RINGS_CAPACITY, int32_t, 4096);
		EXPECT("rings", "node asleep", b, PW_RINGS_NODE_ASLEEP, int32_t, 1);
		EXPECT("rings", "application asleep", b, PW_RINGS_APP_ASLEEP, int32_t, 0);
	}
}

/* A memory file's header: 16 frames of 4 KiB, laid out as MemoryFile lays them (guard words and frames page-aligned). */
static void memory(uint8_t *b, int write)
{
	uint64_t guards = PW_MEMORY_HEADER + 4096, frames = guards + 4096;
	if (write) {
		PUT(b, 0, uint64_t, PW_MEMORY_MAGIC);
		PUT(b, PW_MEMORY_PAGE_SIZE, uint32_t, 4096);
		PUT(b, PW_MEMORY_FRAME_COUNT, uint32_t, 16);
		PUT(b, PW_MEMORY_STATES, uint64_t, PW_MEMORY_HEADER);
		PUT(b, PW_MEMORY_GUARDS, uint64_t, guards);
		PUT(b, PW_MEMORY_FRAMES, uint64_t, frames);
	} else {
		EXPECT("memory", "magic", b, 0, uint64_t, PW_MEMORY_MAGIC);
		EXPECT("memory", "page size", b, PW_MEMORY_PAGE_SIZE, uint32_t, 4096);
		EXPECT("memory", "frame count", b, PW_MEMORY_FRAME_COUNT, uint32_t, 16);
		EXPECT("memory", "state words' offset", b, PW_MEMORY_STATES, uint64_t, PW_MEMORY_HEADER);
		EXPECT("memory", "guard words' offset", b, PW_MEMORY_GUARDS, uint64_t, guards);
		EXPECT("memory", "frames' offset", b, PW_MEMORY_FRAMES, uint64_t, frames);
	}
}

static const struct {
	const char *file;
	int length;
	void (*run)(uint8_t *, int);
} kinds[] = {
	{"post", PW_POST_HEADER + 2 * PW_POST_WR, post},
	{"receive", PW_RECV_HEADER + PW_RECV, receive},
	{"list", PW_LIST_HEADER + PW_POST_WR + 3 * PW_LIST_ELEMENT, list},
	{"completion", PW_COMPLETION + 7, completion},
	{"refused", PW_REFUSED + 5, refused},
	{"cpu_unmap", PW_CPU_UNMAP, cpu_unmap},
	{"rings", PW_RINGS_HEADER, rings},
	{"memory", PW_MEMORY_FIELDS, memory},
};

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "write") && strcmp(argv[1], "read"))) {
		fprintf(stderr, "usage: %s write|read DIR\n", argv[0]);
		return 2;
	}
	int write = !strcmp(argv[1], "write");
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s.%s", argv[2], kinds[i].file, write ? "c" : "java");
		uint8_t buf[1024];
		memset(buf, 0, sizeof(buf));
		FILE *f = fopen(path, write ? "wb" : "rb");
		if (!f) {
			printf("FAIL %s: cannot open %s\n", kinds[i].file, path);
			failures++;
			continue;
		}
		if (write) {
			kinds[i].run(buf, 1);
			if (fwrite(buf, 1, (size_t)kinds[i].length, f) != (size_t)kinds[i].length)
				failures++;
		} else {
			size_t n = fread(buf, 1, sizeof(buf), f);
			if (n != (size_t)kinds[i].length) {
				printf("FAIL %s: %zu bytes, where layout.h makes it %d\n", kinds[i].file, n, kinds[i].length);
				failures++;
			}
			kinds[i].run(buf, 0);
		}
		fclose(f);
	}
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}
