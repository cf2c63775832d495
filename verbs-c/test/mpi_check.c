/*
 * An MPI program that checks what it moves, run unmodified by OpenMPI over Pagewire (MpiOnPagewireTest): a
 * ping-pong of 8 B to 4 MiB between the first and the last rank (on different nodes) with every byte checked
 * both ways, MPI_Allreduce and MPI_Alltoall over every rank, and one-sided MPI_Put and MPI_Get through a
 * window of the program's own memory (MPI_Win_create). Prints the one-way time of each ping-pong size ("pingpong BYTES US"), then "mpi_check: ok"; any
 * wrong byte aborts the job with what it found.
 *   mpi_check [ITERATIONS [MAX_BYTES [MIN_BYTES]]]   ping-pong round trips per size (default 20; 0 leaves the ping-pong out),
 *                                                  sizes from MIN_BYTES (8) to MAX_BYTES (4 MiB) in powers of two
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static void fail(const char *what, long at, long got, long want)
{
	fprintf(stderr, "mpi_check: rank %d: %s: at %ld found %ld, expected %ld\n", rank, what, at, got, want);
	MPI_Abort(MPI_COMM_WORLD, 2);
}

/* The byte a message of LENGTH carries at AT in round ROUND from rank FROM: no two neighbours alike. */
static unsigned char pattern(size_t at, size_t length, int round, int from)
{
	return (unsigned char)((at * 131u + length * 7u + (unsigned)round * 17u + (unsigned)from * 61u) % 251u);
}

static void fill(unsigned char *b, size_t length, int round, int from)
{
	for (size_t i = 0; i < length; i++)
		b[i] = pattern(i, length, round, from);
}

static void check(const char *what, const unsigned char *b, size_t length, int round, int from)
{
	for (size_t i = 0; i < length; i++)
		if (b[i] != pattern(i, length, round, from))
			fail(what, (long)i, b[i], pattern(i, length, round, from));
}

static void pingpong(int iterations, size_t min, size_t max)
{
	int peer = rank == 0 ? size - 1 : 0;
	unsigned char *out = malloc(max), *in = malloc(max);
	if (!out || !in)
		MPI_Abort(MPI_COMM_WORLD, 3);
	for (size_t length = min; length <= max; length *= 2) {
		int rounds = length >= (1u << 20) ? (iterations + 3) / 4 : iterations; /* at least one: (1 + 3) / 4 */
		double start = 0;
		for (int r = 0; r < rounds + 1; r++) {
			if (r == 1)
				start = MPI_Wtime(); /* the first round is the warm-up */
			if (rank == 0) {
				fill(out, length, r, rank);
				MPI_Send(out, (int)length, MPI_BYTE, peer, r, MPI_COMM_WORLD);
				MPI_Recv(in, (int)length, MPI_BYTE, peer, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				check("ping-pong answer", in, length, r, peer);
			} else {
				MPI_Recv(in, (int)length, MPI_BYTE, peer, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				check("ping-pong message", in, length, r, peer);
				fill(out, length, r, rank);
				MPI_Send(out, (int)length, MPI_BYTE, peer, r, MPI_COMM_WORLD);
			}
		}
		if (rank == 0)
			printf("pingpong %zu %.2f\n", length, (MPI_Wtime() - start) * 1e6 / (2.0 * rounds));
	}
	free(out);
	free(in);
}

static void collectives(void)
{
	enum { COUNT = 4096 };
	long *mine = malloc(COUNT * sizeof(long)), *sum = malloc(COUNT * sizeof(long));
	for (int i = 0; i < COUNT; i++)
		mine[i] = (long)(rank + 1) * (i + 1);
	MPI_Allreduce(mine, sum, COUNT, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	long ranks = (long)size * (size + 1) / 2;
	for (int i = 0; i < COUNT; i++)
		if (sum[i] != ranks * (i + 1))
			fail("MPI_Allreduce", i, sum[i], ranks * (i + 1));
	free(mine);
	free(sum);

	enum { BLOCK = 1024 };
	int *send = malloc((size_t)size * BLOCK * sizeof(int)), *recv = malloc((size_t)size * BLOCK * sizeof(int));
	for (int to = 0; to < size; to++)
		for (int i = 0; i < BLOCK; i++)
			send[to * BLOCK + i] = rank * 1000000 + to * 10000 + i;
	MPI_Alltoall(send, BLOCK, MPI_INT, recv, BLOCK, MPI_INT, MPI_COMM_WORLD);
	for (int from = 0; from < size; from++)
		for (int i = 0; i < BLOCK; i++)
			if (recv[from * BLOCK + i] != from * 1000000 + rank * 10000 + i)
				fail("MPI_Alltoall", from * BLOCK + i, recv[from * BLOCK + i], from * 1000000 + rank * 10000 + i);
	free(send);
	free(recv);
}

/* Each rank puts a block into the next rank's window and gets one back from the previous rank's. */
static void one_sided(void)
{
	enum { WORDS = 8192 };
	/* The program's own memory, as a verbs program registers it (MPI_Win_create). */
	uint64_t *base = malloc(2 * WORDS * sizeof(uint64_t));
	MPI_Win win;
	MPI_Win_create(base, 2 * WORDS * sizeof(uint64_t), sizeof(uint64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	for (int i = 0; i < 2 * WORDS; i++)
		base[i] = (uint64_t)rank << 32 | (uint64_t)i;
	uint64_t *put = malloc(WORDS * sizeof(uint64_t)), *got = malloc(WORDS * sizeof(uint64_t));
	for (int i = 0; i < WORDS; i++)
		put[i] = 0xA5A5000000000000ull | (uint64_t)rank << 24 | (uint64_t)i;
	int next = (rank + 1) % size, previous = (rank + size - 1) % size;
	MPI_Win_fence(0, win);
	MPI_Put(put, WORDS, MPI_UINT64_T, next, 0, WORDS, MPI_UINT64_T, win);
	MPI_Get(got, WORDS, MPI_UINT64_T, previous, WORDS, WORDS, MPI_UINT64_T, win);
	MPI_Win_fence(0, win);
	for (int i = 0; i < WORDS; i++) {
		uint64_t want = 0xA5A5000000000000ull | (uint64_t)previous << 24 | (uint64_t)i;
		if (base[i] != want)
			fail("MPI_Put into this rank's window", i, (long)base[i], (long)want);
		want = (uint64_t)previous << 32 | (uint64_t)(WORDS + i);
		if (got[i] != want)
			fail("MPI_Get from the previous rank's window", i, (long)got[i], (long)want);
	}
	MPI_Win_free(&win);
	free(base);
	free(put);
	free(got);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int iterations = argc > 1 ? atoi(argv[1]) : 20;
	size_t max = argc > 2 ? (size_t)atol(argv[2]) : 4u << 20;
	size_t min = argc > 3 ? (size_t)atol(argv[3]) : 8; /* the bench times one size: MIN = MAX */
	if (min < 8)
		min = 8;
	if (iterations > 0 && (rank == 0 || rank == size - 1))
		pingpong(iterations, min, max < min ? min : max);
	MPI_Barrier(MPI_COMM_WORLD);
	collectives();
	one_sided();
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_check: ok, %d ranks\n", size);
	MPI_Finalize();
	return 0;
}
